//! Reranking over a Cohere/Jina-compatible `/rerank` endpoint (self-hosted vLLM, TEI,
//! llama.cpp, or hosted Cohere, Jina, Voyage): wire types, one client, one classified error.
//!
//! ```text
//! POST {base_url}/rerank      (base_url may already end in /rerank)
//! {"model": "...", "query": "...", "documents": ["...", ...], "top_n": 3}
//! → {"results": [{"index": 2, "relevance_score": 0.91}, ...]}
//! ```
//!
//! Spellings accepted in the reply: the list under `results` (Cohere, Jina, vLLM, llama.cpp)
//! or `data` (Voyage), or the reply is the list itself (TEI); each entry's score as
//! `relevance_score` (Cohere, Jina) or `score` (TEI). Extra fields (`document`, `usage`,
//! `meta`, `id`) are ignored. A reply naming an index outside the documents, one index
//! twice, or a score that is not a finite number is [`RerankError::BadIndex`] /
//! [`RerankError::Malformed`]: the caller keeps its own order rather than trust it.
//!
//! The API key travels as `Authorization: Bearer …`, marked sensitive; it is never part of a
//! `Debug` output or an error message.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::{Deserialize, Serialize};

use crate::error::LlmError;
use crate::http::{ClientSettings, clip, error_text, response_head};

/// Where and how to rerank.
#[derive(Clone, PartialEq, Eq)]
pub struct RerankConfig {
    /// The service root (`http://vllm:8000`, `https://api.cohere.com/v2`) or the endpoint
    /// itself (`…/rerank`).
    pub base_url: String,
    /// The model name sent as `model`.
    pub model: String,
    pub api_key: Option<String>,
    /// The whole request, connect to last byte.
    pub timeout: Duration,
    /// For endpoints that do not apply an instruction-aware model's template: each query is
    /// sent as `<Instruct>: {instruction}\n<Query>: {query}` (Qwen3-Reranker's format).
    pub instruction: Option<String>,
}

impl std::fmt::Debug for RerankConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RerankConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("instruction", &self.instruction)
            .finish()
    }
}

impl RerankConfig {
    /// The URL requests go to: `base_url` plus `/rerank` unless it ends so already.
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim().trim_end_matches('/');
        if base.ends_with("/rerank") {
            base.to_string()
        } else {
            format!("{base}/rerank")
        }
    }
}

/// The request body.
#[derive(Debug, Serialize)]
pub struct RerankRequest<'a> {
    pub model: &'a str,
    pub query: &'a str,
    pub documents: &'a [String],
    pub top_n: usize,
}

/// One scored document of a reply.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RerankResult {
    pub index: usize,
    #[serde(alias = "score")]
    pub relevance_score: f64,
}

/// The reply: a list under `results` or `data`, or the list itself.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RerankReply {
    Results { results: Vec<RerankResult> },
    Data { data: Vec<RerankResult> },
    Bare(Vec<RerankResult>),
}

impl RerankReply {
    fn into_results(self) -> Vec<RerankResult> {
        match self {
            Self::Results { results } | Self::Data { data: results } | Self::Bare(results) => {
                results
            }
        }
    }
}

/// Why a rerank gave no usable order.
#[derive(Debug, thiserror::Error)]
pub enum RerankError {
    /// No reply in time, no connection, or an HTTP error status.
    #[error("rerank request failed: {0}")]
    Request(#[from] LlmError),
    /// A reply that is not one of the accepted shapes, or a score that is not finite.
    #[error("malformed rerank reply: {0}")]
    Malformed(String),
    /// A reply naming a document that was not sent, or one twice.
    #[error("rerank reply names document {index} of {documents} (or twice)")]
    BadIndex { index: usize, documents: usize },
}

impl RerankError {
    /// A short, bounded label for logs and metrics: `timeout`, `connect`, `status`,
    /// `malformed` or `index`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Request(LlmError::Timeout(_)) => "timeout",
            Self::Request(LlmError::Connect(_)) => "connect",
            Self::Request(LlmError::EmptyResponse | LlmError::Malformed(_))
            | Self::Malformed(_) => "malformed",
            Self::Request(_) => "status",
            Self::BadIndex { .. } => "index",
        }
    }
}

/// A client of one rerank endpoint.
#[derive(Clone)]
pub struct RerankClient {
    config: RerankConfig,
    endpoint: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for RerankClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RerankClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RerankClient {
    /// Fails only when the HTTP client cannot be built (an API key that is no header value).
    pub fn new(config: RerankConfig) -> Result<Self, RerankError> {
        let http = crate::http::client(ClientSettings {
            headers: HeaderMap::new(),
            extra_headers: &BTreeMap::new(),
            credential: config
                .api_key
                .as_ref()
                .filter(|k| !k.is_empty())
                .map(|k| (AUTHORIZATION, format!("Bearer {k}"))),
            connect_timeout: config.timeout,
            request_timeout: config.timeout,
        })?;
        Ok(Self {
            endpoint: config.endpoint(),
            config,
            http,
        })
    }

    pub fn config(&self) -> &RerankConfig {
        &self.config
    }

    /// The query as sent: wrapped in the instruction when one is configured.
    fn query_text(&self, query: &str) -> String {
        match self.config.instruction.as_deref().map(str::trim) {
            Some(instruction) if !instruction.is_empty() => {
                format!("<Instruct>: {instruction}\n<Query>: {query}")
            }
            _ => query.to_string(),
        }
    }

    /// Scores every document against `query`, best first (ties keep the documents' order).
    /// The whole exchange is bounded by the configured timeout.
    pub async fn rerank(
        &self,
        query: &str,
        documents: &[String],
    ) -> Result<Vec<RerankResult>, RerankError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let timeout = self.config.timeout;
        tokio::time::timeout(timeout, self.exchange(query, documents))
            .await
            .map_err(|_| LlmError::Timeout(format!("no rerank reply within {timeout:?}")))?
    }

    async fn exchange(
        &self,
        query: &str,
        documents: &[String],
    ) -> Result<Vec<RerankResult>, RerankError> {
        let query = self.query_text(query);
        let body = RerankRequest {
            model: &self.config.model,
            query: &query,
            documents,
            top_n: documents.len(),
        };
        let request = self.http.post(&self.endpoint).json(&body);
        let response = match response_head(request, self.config.timeout).await? {
            Ok(response) => response,
            Err((failed, response)) => {
                let text = error_text(response).await.unwrap_or_default();
                return Err(failed.error(clip(&text)).into());
            }
        };
        let bytes = response
            .bytes()
            .await
            .map_err(|e| LlmError::StreamInterrupted(e.to_string()))?;
        parse_reply(&bytes, documents.len())
    }
}

/// Decodes and checks a reply to a request of `documents` documents; best first.
pub fn parse_reply(body: &[u8], documents: usize) -> Result<Vec<RerankResult>, RerankError> {
    let reply: RerankReply = serde_json::from_slice(body).map_err(|e| {
        RerankError::Malformed(format!("{e}: {}", clip(&String::from_utf8_lossy(body))))
    })?;
    let mut results = reply.into_results();
    let mut seen = vec![false; documents];
    for r in &results {
        if !r.relevance_score.is_finite() {
            return Err(RerankError::Malformed(format!(
                "document {} has a score that is not a number",
                r.index
            )));
        }
        match seen.get_mut(r.index) {
            Some(slot) if !*slot => *slot = true,
            _ => {
                return Err(RerankError::BadIndex {
                    index: r.index,
                    documents,
                });
            }
        }
    }
    results.sort_by(|a, b| {
        b.relevance_score
            .total_cmp(&a.relevance_score)
            .then(a.index.cmp(&b.index))
    });
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(base_url: &str) -> RerankConfig {
        RerankConfig {
            base_url: base_url.into(),
            model: "m".into(),
            api_key: Some("sk-secret".into()),
            timeout: Duration::from_secs(1),
            instruction: None,
        }
    }

    #[test]
    fn the_endpoint_is_the_base_plus_rerank_once() {
        assert_eq!(config("http://h:1").endpoint(), "http://h:1/rerank");
        assert_eq!(config("http://h:1/v2/").endpoint(), "http://h:1/v2/rerank");
        assert_eq!(config("http://h:1/rerank").endpoint(), "http://h:1/rerank");
    }

    #[test]
    fn the_key_never_shows_in_debug() {
        let text = format!("{:?}", RerankClient::new(config("http://h")).unwrap());
        assert!(
            !text.contains("sk-secret") && text.contains("<redacted>"),
            "{text}"
        );
    }

    #[test]
    fn every_accepted_shape_decodes_best_first() {
        let cohere = br#"{"id":"x","results":[{"index":0,"relevance_score":0.1},{"index":1,"relevance_score":0.9}],"meta":{}}"#;
        let jina = br#"{"model":"j","usage":{"total_tokens":3},"results":[{"index":1,"document":{"text":"b"},"relevance_score":0.9},{"index":0,"document":{"text":"a"},"relevance_score":0.1}]}"#;
        let voyage = br#"{"object":"list","data":[{"index":1,"relevance_score":0.9},{"index":0,"relevance_score":0.1}]}"#;
        let tei = br#"[{"index":0,"score":0.1},{"index":1,"score":0.9}]"#;
        for body in [&cohere[..], &jina[..], &voyage[..], &tei[..]] {
            let got = parse_reply(body, 2).unwrap();
            let order: Vec<usize> = got.iter().map(|r| r.index).collect();
            assert_eq!(order, [1, 0], "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn bad_replies_are_classified() {
        let bad = |body: &str| parse_reply(body.as_bytes(), 2).unwrap_err().reason();
        assert_eq!(bad("<html>oops</html>"), "malformed");
        assert_eq!(bad(r#"{"results":"x"}"#), "malformed");
        assert_eq!(
            bad(r#"{"results":[{"index":2,"relevance_score":1}]}"#),
            "index"
        );
        assert_eq!(
            bad(r#"{"results":[{"index":0,"relevance_score":1},{"index":0,"relevance_score":0}]}"#),
            "index"
        );
        assert_eq!(
            bad(r#"{"results":[{"index":-1,"relevance_score":1}]}"#),
            "malformed"
        );
    }

    #[test]
    fn the_instruction_wraps_the_query() {
        let mut c = config("http://h");
        c.instruction = Some("Find passages".into());
        let client = RerankClient::new(c).unwrap();
        assert_eq!(
            client.query_text("q"),
            "<Instruct>: Find passages\n<Query>: q"
        );
    }
}
