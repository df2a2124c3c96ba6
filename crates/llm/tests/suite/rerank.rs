//! The rerank client against the fake rerank server: every reply shape, the request it
//! sends, and each failure classified (what the node's fallback counts).

use std::time::Duration;

use serde_json::json;
use turnstone_llm::{RerankClient, RerankConfig};
use turnstone_testkit::{FakeRerank, RerankFault, RerankShape};

fn client(base_url: &str, timeout: Duration) -> RerankClient {
    RerankClient::new(RerankConfig {
        base_url: base_url.into(),
        model: "tiny-reranker".into(),
        api_key: Some("rk-secret".into()),
        timeout,
        instruction: None,
    })
    .unwrap()
}

fn docs() -> Vec<String> {
    [
        "a recipe for bread",
        "tokio is an async runtime for rust",
        "rust the game",
    ]
    .map(String::from)
    .to_vec()
}

#[tokio::test]
async fn every_reply_shape_orders_by_relevance() {
    let server = FakeRerank::start(RerankShape::Cohere).await;
    let c = client(&server.base_url(), Duration::from_secs(30));
    for shape in [
        RerankShape::Cohere,
        RerankShape::Jina,
        RerankShape::Voyage,
        RerankShape::Tei,
    ] {
        server.set_shape(shape);
        let got = c.rerank("async rust runtime", &docs()).await.unwrap();
        let order: Vec<usize> = got.iter().map(|r| r.index).collect();
        assert_eq!(order, [1, 2, 0], "{shape:?}");
        assert_eq!(got[0].relevance_score, 1.0, "{shape:?}");
    }
    let body = server.requests().pop().unwrap();
    assert_eq!(
        body,
        json!({"model": "tiny-reranker", "query": "async rust runtime",
               "documents": docs(), "top_n": 3})
    );
    assert_eq!(
        server.authorizations().pop().unwrap().as_deref(),
        Some("Bearer rk-secret")
    );
}

#[tokio::test]
async fn failures_are_classified_by_reason() {
    let server = FakeRerank::start(RerankShape::Jina).await;
    let c = client(&server.base_url(), Duration::from_millis(300));
    for (fault, reason) in [
        (RerankFault::Slow(Duration::from_secs(5)), "timeout"),
        (RerankFault::Status(500), "status"),
        (RerankFault::Status(401), "status"),
        (RerankFault::Garbage, "malformed"),
        (RerankFault::OutOfRange, "index"),
    ] {
        server.set_fault(fault.clone());
        let err = c.rerank("rust", &docs()).await.unwrap_err();
        assert_eq!(err.reason(), reason, "{fault:?}: {err}");
        assert!(!err.to_string().contains("rk-secret"), "{err}");
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let err = client(&closed, Duration::from_secs(5))
        .rerank("rust", &docs())
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "connect", "{err}");
}

#[tokio::test]
async fn no_documents_sends_nothing() {
    let server = FakeRerank::start(RerankShape::Cohere).await;
    let c = client(&server.base_url(), Duration::from_secs(30));
    assert!(c.rerank("q", &[]).await.unwrap().is_empty());
    assert_eq!(server.request_count(), 0);
}
