//! Network support of the web tools (`web_fetch`, `web_search`, `notify`):
//! SSRF screening ([`ssrf`]), the screened fetcher ([`fetch`]), HTML to text ([`html`]),
//! search backends ([`search`]) and webhook delivery with the per-turn limit ([`notify`]).
//!
//! The seams the node fills in are traits held in [`WebOptions`]: a [`PageAnswerer`] (the
//! LLM that answers `web_fetch` questions) and a [`SearchBackend`] (for
//! `web_search_backend = "mcp:server:tool"`).

pub mod fetch;
pub mod html;
pub mod notify;
pub mod search;
pub mod ssrf;

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use fetch::{FetchConfig, FetchError, FetchedPage, ScreeningResolver};
pub use notify::{NotifyLimiter, NotifyTarget};
pub use search::{SearchBackend, SearchBackendSpec, SearchHit, SearchRequest, SearxngBackend};
pub use ssrf::{AddressClass, Refusal, SsrfPolicy};

/// Answers a question from the text of a fetched page (the node implements it with its
/// model). `Err` is a readable reason; `web_fetch` then returns the page text instead.
#[async_trait]
pub trait PageAnswerer: Send + Sync {
    async fn answer(&self, question: &str, page: &str) -> Result<String, String>;
}

/// Settings of the web tools, from node configuration (`[tools]`).
#[derive(Clone)]
pub struct WebOptions {
    /// Register `web_fetch`, `web_search` and `notify` in the built-in registry.
    ///
    /// Default `false` for now only because the existing exact name-list tests of the
    /// registry (`registry.rs`, `tests/suite/registry.rs`) are outside this change; the node
    /// should set it (and those tests be updated) — see the web helper's report.
    pub enabled: bool,
    /// `tools.allow_private_network`: private addresses become fetchable (metadata,
    /// link-local, multicast and reserved addresses stay refused).
    pub allow_private_network: bool,
    /// `tools.searxng_url` / `$TURNSTONE_SEARXNG_URL` (read by the node's config layer).
    /// Operator-configured, so not SSRF-screened.
    pub searxng_url: Option<String>,
    /// `tools.web_search_backend`: `searxng` (default) or `mcp:server:tool`.
    pub search_backend: Option<String>,
    /// The implementation of a non-SearxNG backend (the node's MCP bridge). When set it is
    /// used whatever `search_backend` says.
    pub search: Option<Arc<dyn SearchBackend>>,
    /// Timeout of one search.
    pub search_timeout: Duration,
    /// Answers `web_fetch` questions; without one the page text itself is returned.
    pub page_answerer: Option<Arc<dyn PageAnswerer>>,
    /// Deadline of one whole fetch (all redirect hops and the body).
    pub fetch_timeout: Duration,
    /// Body bytes read at most.
    pub max_bytes: usize,
    /// Characters of page text handed to the answerer (or returned without one).
    pub max_page_chars: usize,
    /// Fixed host → address mappings for `web_fetch`, consulted before DNS and still
    /// screened (tests, operator pinning). Empty by default.
    pub static_hosts: HashMap<String, Vec<IpAddr>>,
    /// Named webhook targets of `notify`, in delivery-preference order.
    pub notify_targets: Vec<NotifyTarget>,
    /// Waits before the retries of a failed notification (default 1 s, 3 s: two retries).
    pub notify_retry_backoff: Vec<Duration>,
    /// Notifications per turn (counted on success).
    pub notify_per_turn: usize,
    /// Timeout of one webhook POST.
    pub notify_timeout: Duration,
    /// The per-turn counter (a turn is [`crate::ToolContext::current_turn`], advanced by the
    /// engine at each turn start).
    pub notify_limiter: NotifyLimiter,
}

impl Default for WebOptions {
    fn default() -> Self {
        Self {
            enabled: false,
            allow_private_network: false,
            searxng_url: None,
            search_backend: None,
            search: None,
            search_timeout: Duration::from_secs(20),
            page_answerer: None,
            fetch_timeout: Duration::from_secs(30),
            max_bytes: 5 * 1024 * 1024,
            max_page_chars: 40_000,
            static_hosts: HashMap::new(),
            notify_targets: Vec::new(),
            notify_retry_backoff: vec![Duration::from_secs(1), Duration::from_secs(3)],
            notify_per_turn: 5,
            notify_timeout: Duration::from_secs(10),
            notify_limiter: NotifyLimiter::default(),
        }
    }
}

impl fmt::Debug for WebOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebOptions")
            .field("enabled", &self.enabled)
            .field("allow_private_network", &self.allow_private_network)
            .field("searxng_url", &self.searxng_url)
            .field("search_backend", &self.search_backend)
            .field("search", &self.search.as_ref().map(|s| s.describe()))
            .field("page_answerer", &self.page_answerer.is_some())
            .field("fetch_timeout", &self.fetch_timeout)
            .field("max_bytes", &self.max_bytes)
            .field("max_page_chars", &self.max_page_chars)
            .field("static_hosts", &self.static_hosts)
            .field("notify_targets", &self.notify_targets)
            .field("notify_per_turn", &self.notify_per_turn)
            .finish_non_exhaustive()
    }
}

impl WebOptions {
    /// The fetch settings these options imply.
    pub fn fetch_config(&self) -> FetchConfig {
        FetchConfig {
            allow_private_network: self.allow_private_network,
            timeout: self.fetch_timeout,
            max_bytes: self.max_bytes,
            static_hosts: Arc::new(self.static_hosts.clone()),
            ..FetchConfig::default()
        }
    }
}
