//! [`WatchBackend`]: where the `watch` tool keeps its watches. The node implements it over
//! its store; this crate never sees the database.

use async_trait::async_trait;

/// A watch the tool asks the backend to persist (active, first poll due at once).
#[derive(Debug, Clone, PartialEq)]
pub struct WatchRequest {
    pub ws_id: String,
    pub node_id: String,
    pub name: String,
    pub command: String,
    pub interval_secs: f64,
    /// `None`: change detection.
    pub stop_on: Option<String>,
    pub max_polls: i64,
    /// Who asked (`model` for the tool).
    pub created_by: String,
}

/// An active watch, as the tool lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEntry {
    pub watch_id: String,
    pub name: String,
    pub command: String,
    pub interval_secs: f64,
    pub stop_on: Option<String>,
    pub max_polls: i64,
    pub poll_count: i64,
    /// ISO timestamp of the last poll (`None` before the first).
    pub last_poll: Option<String>,
    /// ISO timestamp of the next poll.
    pub next_poll: Option<String>,
}

/// Storage of watches as the `watch` tool needs it. Errors are messages for the model.
#[async_trait]
pub trait WatchBackend: Send + Sync + 'static {
    /// Persists a new active watch.
    async fn create(&self, request: WatchRequest) -> Result<WatchEntry, String>;
    /// The active watches of a workstream, oldest first.
    async fn active(&self, ws_id: &str) -> Result<Vec<WatchEntry>, String>;
    /// Deactivates a watch; `false` when it was not active.
    async fn cancel(&self, watch_id: &str) -> Result<bool, String>;
}
