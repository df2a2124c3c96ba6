//! The [`Store`] trait, its configuration and [`connect`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{Result, StoreError};
use crate::model::{
    ApprovalDecision, ApprovalRecord, DecideOutcome, EventRecord, Memory, MemoryFilter,
    MemoryInput, NewMessage, NewWorkstream, ResumedSession, SchemaDescription, ScopeRef, SearchHit,
    SessionConfig, SessionSummary, StoredMessage, Workstream, WriteOp,
};
use crate::resume::rebuild_messages;
use crate::skills::SkillStore;

/// Default SQLite file, relative to the working directory (as the original).
pub const DEFAULT_SQLITE_PATH: &str = ".turnstone.db";
/// Default PostgreSQL pool size.
pub const DEFAULT_POOL_SIZE: u32 = 5;

/// Which database to use.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreBackend {
    /// One file; created if missing; WAL mode; busy timeout.
    Sqlite { path: PathBuf },
    /// A PostgreSQL URL (`postgres://user@host:port/db`) and the connection pool size.
    Postgres { url: String, pool_size: u32 },
}

impl std::fmt::Debug for StoreBackend {
    // The URL may carry a password: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite { path } => f.debug_struct("Sqlite").field("path", path).finish(),
            Self::Postgres { pool_size, .. } => f
                .debug_struct("Postgres")
                .field("url", &"<redacted>")
                .field("pool_size", pool_size)
                .finish(),
        }
    }
}

/// Store configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    pub backend: StoreBackend,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self::sqlite(DEFAULT_SQLITE_PATH)
    }
}

impl StoreConfig {
    pub fn sqlite(path: impl Into<PathBuf>) -> Self {
        Self {
            backend: StoreBackend::Sqlite { path: path.into() },
        }
    }

    pub fn postgres(url: impl Into<String>, pool_size: u32) -> Self {
        Self {
            backend: StoreBackend::Postgres {
                url: url.into(),
                pool_size,
            },
        }
    }
}

/// Opens the configured backend and applies its migrations.
pub async fn connect(config: &StoreConfig) -> Result<Arc<dyn Store>> {
    match &config.backend {
        StoreBackend::Sqlite { path } => Ok(Arc::new(crate::SqliteStore::open(path).await?)),
        StoreBackend::Postgres { url, pool_size } => {
            Ok(Arc::new(crate::PostgresStore::open(url, *pool_size).await?))
        }
    }
}

/// Persistence of sessions, history, memories, skills and the event/approval logs.
///
/// Both implementations ([`crate::SqliteStore`], [`crate::PostgresStore`]) behave the same;
/// one test suite runs against both. Skills come from the [`SkillStore`] supertrait.
#[async_trait]
pub trait Store:
    crate::auth::AuthStore
    + crate::roles::RoleStore
    + crate::schedules::ScheduleStore
    + SkillStore
    + crate::watches::WatchStore
    + crate::queued::QueuedSendStore
    + crate::policies::ToolPolicyStore
    + crate::verdicts::VerdictStore
    + crate::assessments::AssessmentStore
    + crate::cluster_settings::SettingsStore
    + crate::audit::AuditStore
    + crate::usage::UsageStore
    + Send
    + Sync
{
    /// `"sqlite"` or `"postgresql"`.
    fn backend_name(&self) -> &'static str;

    // --- workstreams / sessions -------------------------------------------------------------

    async fn create_workstream(&self, new: NewWorkstream) -> Result<Workstream>;
    async fn get_workstream(&self, ws_id: &str) -> Result<Option<Workstream>>;
    /// Sets (`Some`) or clears the unique alias. [`StoreError::AliasTaken`] if used elsewhere.
    async fn set_alias(&self, ws_id: &str, alias: Option<&str>) -> Result<()>;
    async fn set_title(&self, ws_id: &str, title: &str) -> Result<()>;
    async fn set_state(&self, ws_id: &str, state: &str) -> Result<()>;
    /// The workstreams of `node_id` that are not `closed` — what a node finds of its earlier
    /// run at start (hibernated, idle, or live when it stopped) — oldest first.
    async fn open_workstreams(&self, node_id: &str) -> Result<Vec<Workstream>>;
    /// Makes `node_id` the workstream's node: it serves the workstream now (resumed there
    /// after its owner moved), so that node's next start lists it and the earlier one's
    /// does not. [`StoreError::NotFound`] if there is no such workstream.
    async fn adopt_workstream(&self, ws_id: &str, node_id: &str) -> Result<()>;
    /// Deletes the workstream and everything keyed by it. `false` if it did not exist.
    async fn delete_workstream(&self, ws_id: &str) -> Result<bool>;

    // --- history and config -----------------------------------------------------------------

    /// Applies the writes in ONE transaction (the batching writer calls this).
    async fn write_batch(&self, ops: &[WriteOp]) -> Result<()>;

    /// Writes one row now (prefer the [`crate::Writer`] on hot paths).
    async fn append_message(&self, msg: NewMessage) -> Result<()> {
        self.write_batch(&[WriteOp::Message(msg)]).await
    }

    /// Writes one config key now (`None` deletes it).
    async fn set_config(&self, ws_id: &str, key: &str, value: Option<&str>) -> Result<()> {
        self.write_batch(&[WriteOp::Config {
            ws_id: ws_id.to_string(),
            key: key.to_string(),
            value: value.map(str::to_string),
        }])
        .await
    }

    /// All rows of one workstream, in write order.
    async fn load_messages(&self, ws_id: &str) -> Result<Vec<StoredMessage>>;
    async fn load_config(&self, ws_id: &str) -> Result<BTreeMap<String, String>>;

    // --- resume -----------------------------------------------------------------------------

    /// Resolves an alias, a full id, or a unique id prefix (in that order) to a ws_id.
    /// [`StoreError::Ambiguous`] when a prefix matches several, [`StoreError::NotFound`] when none.
    async fn resolve_session(&self, key: &str) -> Result<String>;

    /// Rebuilds the provider messages and config of a session (see [`rebuild_messages`]).
    async fn resume_session(&self, key: &str) -> Result<ResumedSession> {
        let ws_id = self.resolve_session(key).await?;
        let workstream = self
            .get_workstream(&ws_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("session {ws_id}")))?;
        let rows = self.load_messages(&ws_id).await?;
        let raw_config = self.load_config(&ws_id).await?;
        Ok(ResumedSession {
            workstream,
            messages: rebuild_messages(&rows, &raw_config),
            config: SessionConfig::from_map(&raw_config),
            raw_config,
        })
    }

    /// Sessions with at least one message, most recently active first.
    async fn list_sessions(&self, limit: usize) -> Result<Vec<SessionSummary>>;

    /// Deletes `node_id`'s sessions (and those of no node) without messages, and its unnamed
    /// (no alias) sessions inactive for more than `retention_days` (0 = no age limit). Named
    /// sessions never age out. Other nodes' sessions are never touched: in a shared database
    /// they may be live there (a workstream created but not yet sent to). Returns how many
    /// sessions were deleted.
    async fn prune_sessions(&self, node_id: &str, retention_days: u32) -> Result<u64>;

    // --- search -----------------------------------------------------------------------------

    /// Full-text search over message content, newest first. Every word of `query` must match;
    /// the query is escaped, so quotes and operators are plain text and never a syntax error.
    /// A query without any word gives [`StoreError::InvalidInput`]. Matching differs a little
    /// by backend: SQLite (FTS5, `unicode61`) matches words exactly; PostgreSQL
    /// (`english` configuration, as the original) stems words and ignores stop words.
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>>;

    /// The newest messages across all sessions, newest first.
    async fn recent_messages(&self, limit: usize) -> Result<Vec<SearchHit>>;

    // --- memories ---------------------------------------------------------------------------

    /// Inserts, or updates in place when `(name, scope, scope_id)` exists.
    async fn save_memory(&self, input: MemoryInput) -> Result<Memory>;
    /// Reads one memory and counts the access.
    async fn get_memory(&self, name: &str, scope: &ScopeRef) -> Result<Option<Memory>>;
    /// Memories whose name, description or content contain every word, best first.
    async fn search_memories(
        &self,
        query: &str,
        filter: &MemoryFilter,
        limit: usize,
    ) -> Result<Vec<Memory>>;
    async fn delete_memory(&self, name: &str, scope: &ScopeRef) -> Result<bool>;
    /// Most recently updated first.
    async fn list_memories(&self, filter: &MemoryFilter, limit: usize) -> Result<Vec<Memory>>;

    // --- durable event and approval log -------------------------------------------------------

    /// Appends an event; returns its `seq` (1-based, gap-free per workstream).
    async fn append_event(
        &self,
        ws_id: &str,
        event_type: &str,
        payload: &serde_json::Value,
    ) -> Result<i64>;
    /// Events with `seq > after_seq`, ascending, at most `limit`.
    async fn events_after(
        &self,
        ws_id: &str,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<EventRecord>>;

    /// Records a pending approval request.
    async fn create_approval(
        &self,
        request_id: &str,
        ws_id: &str,
        payload: &serde_json::Value,
    ) -> Result<ApprovalRecord>;
    /// Decides a pending request exactly once (a conditional update); a later call returns the
    /// recorded decision with `applied: false`.
    async fn decide_approval(
        &self,
        request_id: &str,
        decision: ApprovalDecision,
    ) -> Result<DecideOutcome>;
    async fn get_approval(&self, request_id: &str) -> Result<Option<ApprovalRecord>>;
    /// Pending requests of a workstream, oldest first (re-sent on reconnect).
    async fn pending_approvals(&self, ws_id: &str) -> Result<Vec<ApprovalRecord>>;

    // --- maintenance ------------------------------------------------------------------------

    /// Application tables and their columns, as the database reports them.
    async fn describe_schema(&self) -> Result<SchemaDescription>;
    /// Committed messages not yet in the search index, on this database (whichever store
    /// wrote them): PostgreSQL indexes in the background, and its search slows in proportion
    /// to this number (`turnstone_store_search_backlog`). Always 0 on SQLite, which indexes
    /// in the write transaction.
    async fn search_backlog(&self) -> Result<u64>;
    /// Stops the store's background tasks (PostgreSQL's search indexer finishes its batch;
    /// rows still pending are indexed by the next store to open the database), then closes
    /// the connection pool (waits for checked-out connections).
    async fn close(&self);
}

/// Splits a search query into plain words (no FTS syntax survives).
pub(crate) fn search_terms(query: &str) -> Result<Vec<String>> {
    let terms: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    if terms.is_empty() {
        return Err(StoreError::InvalidInput(format!(
            "search query {query:?} contains no words"
        )));
    }
    Ok(terms)
}

/// Escapes `%`, `_` and `\` for `LIKE ... ESCAPE '\'`.
pub(crate) fn like_prefix(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

pub(crate) fn limit_i64(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_drop_syntax() {
        assert_eq!(
            search_terms(r#"foo "bar AND (baz* NEAR"#).ok(),
            Some(vec![
                "foo".into(),
                "bar".into(),
                "AND".into(),
                "baz".into(),
                "NEAR".into()
            ])
        );
        assert!(matches!(
            search_terms(r#" "" * ( "#),
            Err(StoreError::InvalidInput(_))
        ));
    }

    #[test]
    fn like_escapes() {
        assert_eq!(like_prefix(r"a%_\"), r"a\%\_\\%");
    }
}
