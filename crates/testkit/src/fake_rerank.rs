//! [`FakeRerank`]: a small Cohere/Jina-compatible rerank server on `127.0.0.1:<port>`
//! (`POST /rerank`, `POST /v1/rerank`), deterministic, with the reply shapes of the real
//! services ([`RerankShape`]) and the failures a client must survive ([`RerankFault`]).
//!
//! The score of a document is **token overlap**: the share of the query's distinct words
//! (lowercased runs of letters and digits) that occur in the document, in `[0, 1]`. A query
//! wrapped as `<Instruct>: …\n<Query>: q` (Qwen3-Reranker's format) is scored on `q` alone.
//! The reply lists the best `top_n` (all when absent), best first, ties by index.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The reply body's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RerankShape {
    /// `{"id", "results": [{"index", "relevance_score"}], "meta"}`.
    #[default]
    Cohere,
    /// `{"model", "usage", "results": [{"index", "document": {"text"}, "relevance_score"}]}`.
    Jina,
    /// `{"object": "list", "data": [{"index", "relevance_score"}]}`.
    Voyage,
    /// `[{"index", "score"}]` (text-embeddings-inference).
    Tei,
}

/// How the server misbehaves (until changed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RerankFault {
    /// Answers correctly.
    #[default]
    None,
    /// Answers correctly after this long.
    Slow(Duration),
    /// Answers this status with a JSON error body.
    Status(u16),
    /// Answers 200 with a body that is not JSON.
    Garbage,
    /// Answers 200 naming a document index one past the last.
    OutOfRange,
}

/// A running fake rerank server; dropping it stops the server.
#[derive(Debug)]
pub struct FakeRerank {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _shutdown: watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct Shared {
    shape: Mutex<RerankShape>,
    fault: Mutex<RerankFault>,
    requests: Mutex<Vec<Value>>,
    authorizations: Mutex<Vec<Option<String>>>,
}

impl FakeRerank {
    /// Starts a server answering in `shape`.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (a broken test environment).
    pub async fn start(shape: RerankShape) -> Self {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let listener = match TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => panic!("turnstone-testkit: cannot bind the fake rerank server: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => panic!("turnstone-testkit: fake rerank server address: {e}"),
        };
        let shared = Arc::new(Shared::default());
        *shared.shape.lock() = shape;
        let app = Router::new()
            .route("/rerank", post(rerank))
            .route("/v1/rerank", post(rerank))
            .with_state(Arc::clone(&shared));
        let (shutdown_tx, mut stop) = watch::channel(false);
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        });
        tokio::spawn(async move {
            if let Err(e) = server.await {
                tracing::warn!(error = %e, "fake-rerank server ended with an error");
            }
        });
        Self {
            shared,
            addr,
            _shutdown: shutdown_tx,
        }
    }

    /// `http://127.0.0.1:<port>`: the `base_url` (requests go to `{base_url}/rerank`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_shape(&self, shape: RerankShape) {
        *self.shared.shape.lock() = shape;
    }

    pub fn set_fault(&self, fault: RerankFault) {
        *self.shared.fault.lock() = fault;
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().len()
    }

    /// The `Authorization` header of each request.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.shared.authorizations.lock().clone()
    }
}

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The fake's score of `document` for `query` (see the module docs).
pub fn overlap_score(query: &str, document: &str) -> f64 {
    let query = query
        .split_once("\n<Query>: ")
        .filter(|(head, _)| head.starts_with("<Instruct>: "))
        .map_or(query, |(_, q)| q);
    let (q, d) = (words(query), words(document));
    if q.is_empty() {
        return 0.0;
    }
    q.intersection(&d).count() as f64 / q.len() as f64
}

async fn rerank(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    shared.requests.lock().push(body.clone());
    shared.authorizations.lock().push(
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    );
    let fault = shared.fault.lock().clone();
    let shape = *shared.shape.lock();
    let query = body["query"].as_str().unwrap_or_default();
    let Some(documents) = body["documents"].as_array() else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"message": "documents is required"})),
        )
            .into_response();
    };
    let documents: Vec<&str> = documents.iter().map(|d| d.as_str().unwrap_or("")).collect();
    let top_n = body["top_n"]
        .as_u64()
        .map_or(documents.len(), |n| n as usize);
    let mut scored: Vec<(usize, f64)> = documents
        .iter()
        .enumerate()
        .map(|(i, d)| (i, overlap_score(query, d)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(top_n);
    match fault {
        RerankFault::None => {}
        RerankFault::Slow(delay) => tokio::time::sleep(delay).await,
        RerankFault::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (status, Json(json!({"message": "injected failure"}))).into_response();
        }
        RerankFault::Garbage => {
            return (StatusCode::OK, "<html>not json</html>").into_response();
        }
        RerankFault::OutOfRange => {
            if let Some(first) = scored.first_mut() {
                first.0 = documents.len();
            }
        }
    }
    let entries: Vec<Value> = scored
        .iter()
        .map(|&(index, score)| match shape {
            RerankShape::Cohere | RerankShape::Voyage => {
                json!({"index": index, "relevance_score": score})
            }
            RerankShape::Jina => json!({
                "index": index,
                "document": {"text": documents.get(index).copied().unwrap_or("")},
                "relevance_score": score,
            }),
            RerankShape::Tei => json!({"index": index, "score": score}),
        })
        .collect();
    let reply = match shape {
        RerankShape::Cohere => json!({
            "id": "fake-rerank",
            "results": entries,
            "meta": {"billed_units": {"search_units": 1}},
        }),
        RerankShape::Jina => json!({
            "model": body["model"],
            "usage": {"total_tokens": documents.len()},
            "results": entries,
        }),
        RerankShape::Voyage => json!({"object": "list", "data": entries, "model": body["model"]}),
        RerankShape::Tei => Value::Array(entries),
    };
    Json(reply).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_the_share_of_query_words() {
        assert_eq!(overlap_score("rust async", "Async Rust book"), 1.0);
        assert_eq!(overlap_score("rust async", "the rust book"), 0.5);
        assert_eq!(overlap_score("rust", "python"), 0.0);
        assert_eq!(
            overlap_score("<Instruct>: find things\n<Query>: rust", "rust"),
            1.0
        );
        assert_eq!(overlap_score("", "x"), 0.0);
    }
}
