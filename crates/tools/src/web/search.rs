//! Web search backends: the [`SearchBackend`] seam and the built-in SearxNG implementation.
//!
//! The backend URL is operator configuration (`searxng_url`), so it is **not** SSRF-screened:
//! a self-hosted SearxNG normally lives on the local network.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use url::Url;

/// The search categories `web_search` offers (they map 1:1 to SearxNG categories).
pub const CATEGORIES: [&str; 4] = ["general", "news", "it", "science"];

/// One search as the tool asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    pub query: String,
    /// One of [`CATEGORIES`].
    pub category: String,
    /// 1..=20.
    pub max_results: usize,
}

/// One hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// A search backend: SearxNG built in; the node implements it for `mcp:server:tool`.
#[async_trait]
pub trait SearchBackend: Send + Sync {
    /// Short name for messages (`searxng at http://…`, `mcp:server:tool`).
    fn describe(&self) -> String;
    /// Runs the search. `Err` is a readable reason (shown to the model).
    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, String>;
}

/// The `web_search_backend` setting: where searches go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchBackendSpec {
    /// The built-in SearxNG client (uses `searxng_url`).
    Searxng,
    /// An MCP tool; the node supplies the implementation.
    Mcp { server: String, tool: String },
}

impl SearchBackendSpec {
    /// Parses `searxng` (or empty) and `mcp:server:tool`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() || text.eq_ignore_ascii_case("searxng") {
            return Ok(Self::Searxng);
        }
        if let Some(rest) = text.strip_prefix("mcp:") {
            if let Some((server, tool)) = rest.split_once(':')
                && !server.is_empty()
                && !tool.is_empty()
                && !tool.contains(':')
            {
                return Ok(Self::Mcp {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                });
            }
            return Err(format!(
                "invalid web_search_backend '{text}': expected mcp:<server>:<tool>"
            ));
        }
        Err(format!(
            "invalid web_search_backend '{text}': expected 'searxng' or mcp:<server>:<tool>"
        ))
    }
}

/// SearxNG's JSON API: `GET {base}/search?q=…&format=json&categories=…`.
#[derive(Debug, Clone)]
pub struct SearxngBackend {
    base: Url,
    http: reqwest::Client,
}

#[derive(Deserialize)]
struct SearxngResponse {
    #[serde(default)]
    results: Vec<SearxngResult>,
}

#[derive(Deserialize)]
struct SearxngResult {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

impl SearxngBackend {
    /// A client for the SearxNG instance at `base_url` (e.g. `http://searxng:8080`).
    pub fn new(base_url: &str, timeout: Duration) -> Result<Self, String> {
        let mut base = Url::parse(base_url.trim())
            .map_err(|e| format!("invalid searxng_url '{base_url}': {e}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(format!(
                "invalid searxng_url '{base_url}': only http and https are supported"
            ));
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http = turnstone_http::client_builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("cannot build HTTP client: {}", turnstone_http::describe(&e)))?;
        Ok(Self { base, http })
    }
}

#[async_trait]
impl SearchBackend for SearxngBackend {
    fn describe(&self) -> String {
        format!("SearxNG at {}", self.base)
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, String> {
        let mut url = self
            .base
            .join("search")
            .map_err(|e| format!("invalid SearxNG URL: {e}"))?;
        url.query_pairs_mut()
            .append_pair("q", &request.query)
            .append_pair("format", "json")
            .append_pair("categories", &request.category);
        let resp = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("{} is unreachable: {e}", self.describe()))?;
        let status = resp.status();
        let body = resp
            .text()
            .await
            .map_err(|e| format!("reading the reply of {} failed: {e}", self.describe()))?;
        if !status.is_success() {
            let excerpt: String = body.chars().take(200).collect();
            let hint = if status.as_u16() == 403 {
                " (is the JSON format enabled in SearxNG's settings.yml `search.formats`?)"
            } else {
                ""
            };
            return Err(format!(
                "{} answered HTTP {status}{hint}: {excerpt}",
                self.describe()
            ));
        }
        let parsed: SearxngResponse = serde_json::from_str(&body).map_err(|e| {
            format!(
                "{} sent a reply that is not SearxNG JSON: {e}",
                self.describe()
            )
        })?;
        Ok(parsed
            .results
            .into_iter()
            .filter_map(|r| {
                let url = r.url.filter(|u| !u.trim().is_empty())?;
                Some(SearchHit {
                    title: r.title.unwrap_or_default().trim().to_owned(),
                    url,
                    snippet: r.content.unwrap_or_default().trim().to_owned(),
                })
            })
            .take(request.max_results)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_spec_parsing() {
        assert_eq!(SearchBackendSpec::parse(""), Ok(SearchBackendSpec::Searxng));
        assert_eq!(
            SearchBackendSpec::parse("mcp:brave:search"),
            Ok(SearchBackendSpec::Mcp {
                server: "brave".into(),
                tool: "search".into()
            })
        );
        assert!(SearchBackendSpec::parse("mcp:brave").is_err());
        assert!(SearchBackendSpec::parse("mcp::x").is_err());
        assert!(SearchBackendSpec::parse("google").is_err());
    }

    #[test]
    fn searxng_url_must_be_http() {
        assert!(SearxngBackend::new("ftp://x", Duration::from_secs(1)).is_err());
        assert!(SearxngBackend::new("nonsense", Duration::from_secs(1)).is_err());
        let b = SearxngBackend::new("http://127.0.0.1:8888/sx", Duration::from_secs(1)).unwrap();
        assert_eq!(b.describe(), "SearxNG at http://127.0.0.1:8888/sx/");
    }
}
