//! Watches: the `watches` table (node spec §6.1) and [`WatchStore`], its operations.
//!
//! A watch is a shell command a workstream asked to have polled periodically; the node's
//! watch runner asks [`WatchStore::due_watches`] what to poll, records each poll with
//! [`WatchStore::record_watch_poll`] and ends a watch with [`WatchStore::deactivate_watch`].
//! Every [`crate::Store`] is a `WatchStore` (a supertrait), so `Arc<dyn Store>` has these
//! methods. The SQL is written once, in [`impl_watch_store!`], for both backends.
//!
//! Columns: `watch_id` (32 hex), `ws_id`, `node_id` (`''` = any node), `name` (unique among
//! a workstream's *active* watches), `command`, `interval_secs`, `stop_on` (`NULL` = change
//! detection), `max_polls`, `poll_count`, `last_output`, `last_exit_code`, `last_poll`,
//! `next_poll` (`NULL` once inactive), `active` (1/0), `created_by`, `created`, `updated`.

use std::time::SystemTime;

use async_trait::async_trait;

use crate::error::Result;

/// A watch to create. It is active, and its first poll is due at `first_poll`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWatch {
    /// A fixed id (tests); default a fresh 32-hex id.
    pub watch_id: Option<String>,
    pub ws_id: String,
    pub node_id: String,
    pub name: String,
    pub command: String,
    pub interval_secs: f64,
    /// `None`: fire when the output changes.
    pub stop_on: Option<String>,
    pub max_polls: i64,
    pub created_by: String,
    /// When the first poll is due (usually now).
    pub first_poll: SystemTime,
}

/// One row of `watches`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Watch {
    pub watch_id: String,
    pub ws_id: String,
    pub node_id: String,
    pub name: String,
    pub command: String,
    pub interval_secs: f64,
    pub stop_on: Option<String>,
    pub max_polls: i64,
    pub poll_count: i64,
    pub last_output: Option<String>,
    pub last_exit_code: Option<i64>,
    /// ISO timestamp of the last recorded poll.
    pub last_poll: Option<String>,
    /// ISO timestamp of the next poll; `None` once inactive.
    pub next_poll: Option<String>,
    pub active: bool,
    pub created_by: String,
    pub created: String,
    pub updated: String,
}

/// What one poll saw, to record on its watch.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchPoll {
    /// The (already capped) output; it becomes `last_output`, the next poll's baseline.
    pub output: String,
    pub exit_code: i64,
    /// The watch's poll count including this poll.
    pub poll_count: i64,
    /// When the next poll is due; `None` leaves no next poll (the watch is ending).
    pub next_poll: Option<SystemTime>,
}

/// Storage of watches; implemented by both backends (see the module docs).
#[async_trait]
pub trait WatchStore: Send + Sync {
    /// Inserts an active watch. A name already used by an active watch of the same
    /// workstream is [`crate::StoreError::InvalidInput`].
    async fn create_watch(&self, new: NewWatch) -> Result<Watch>;
    async fn get_watch(&self, watch_id: &str) -> Result<Option<Watch>>;
    /// Active watches, oldest first, optionally only of one workstream and/or one node.
    async fn list_active_watches(
        &self,
        ws_id: Option<&str>,
        node_id: Option<&str>,
    ) -> Result<Vec<Watch>>;
    /// Active watches of `node_id` (or of no particular node) whose next poll is at or
    /// before `now`, most overdue first, at most `limit`.
    async fn due_watches(&self, node_id: &str, now: SystemTime, limit: usize)
    -> Result<Vec<Watch>>;
    /// Records a poll on an active watch (output, exit code, count, `last_poll` = now, next
    /// poll). `false` when the watch is no longer active (cancelled meanwhile): nothing
    /// changes then.
    async fn record_watch_poll(&self, watch_id: &str, poll: &WatchPoll) -> Result<bool>;
    /// Ends a watch (`active = 0`, no next poll). `false` when it was not active.
    async fn deactivate_watch(&self, watch_id: &str) -> Result<bool>;
    /// How many watches of the workstream are active.
    async fn count_active_watches(&self, ws_id: &str) -> Result<i64>;
}

macro_rules! watch_columns {
    () => {
        "watch_id, ws_id, node_id, name, command, interval_secs, stop_on, max_polls, \
         poll_count, last_output, last_exit_code, last_poll, next_poll, active, created_by, \
         created, updated"
    };
}
pub(crate) use watch_columns;

/// Implements [`WatchStore`] for a backend type with a `pool` field (see `sql_common.rs`
/// for why a macro rather than a generic).
macro_rules! impl_watch_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn watch_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::watches::Watch> {
                use sqlx::Row as _;
                let active: i64 = row.try_get("active")?;
                Ok($crate::watches::Watch {
                    watch_id: row.try_get("watch_id")?,
                    ws_id: row.try_get("ws_id")?,
                    node_id: row.try_get("node_id")?,
                    name: row.try_get("name")?,
                    command: row.try_get("command")?,
                    interval_secs: row.try_get("interval_secs")?,
                    stop_on: row.try_get("stop_on")?,
                    max_polls: row.try_get("max_polls")?,
                    poll_count: row.try_get("poll_count")?,
                    last_output: row.try_get("last_output")?,
                    last_exit_code: row.try_get("last_exit_code")?,
                    last_poll: row.try_get("last_poll")?,
                    next_poll: row.try_get("next_poll")?,
                    active: active != 0,
                    created_by: row.try_get("created_by")?,
                    created: row.try_get("created")?,
                    updated: row.try_get("updated")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::watches::WatchStore for $store {
            async fn create_watch(
                &self,
                new: $crate::watches::NewWatch,
            ) -> $crate::error::Result<$crate::watches::Watch> {
                use $crate::error::StoreError;
                if new.ws_id.is_empty() || new.name.trim().is_empty() || new.command.trim().is_empty()
                {
                    return Err(StoreError::InvalidInput(
                        "a watch needs a ws_id, a name and a command".into(),
                    ));
                }
                if !new.interval_secs.is_finite() || new.interval_secs <= 0.0 || new.max_polls < 1 {
                    return Err(StoreError::InvalidInput(
                        "a watch needs a positive interval and max_polls".into(),
                    ));
                }
                let watch_id = new.watch_id.clone().unwrap_or_else($crate::ids::new_ws_id);
                let now = $crate::timestamp::now();
                const SQL: &str = concat!(
                    "INSERT INTO watches (watch_id, ws_id, node_id, name, command, interval_secs, \
                     stop_on, max_polls, poll_count, next_poll, active, created_by, created, updated) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, 1, $10, $11, $11) RETURNING ",
                    $crate::watches::watch_columns!()
                );
                let result = sqlx::query(SQL)
                    .bind(&watch_id)
                    .bind(&new.ws_id)
                    .bind(&new.node_id)
                    .bind(new.name.trim())
                    .bind(&new.command)
                    .bind(new.interval_secs)
                    .bind(&new.stop_on)
                    .bind(new.max_polls)
                    .bind($crate::timestamp::format_system_time(new.first_poll))
                    .bind(&new.created_by)
                    .bind(&now)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(StoreError::from);
                match result {
                    Ok(row) => Self::watch_from_row(&row),
                    Err(e) if e.is_unique_violation() => Err(StoreError::InvalidInput(format!(
                        "a watch named '{}' is already active in this workstream \
                         (or watch {watch_id} exists)",
                        new.name.trim()
                    ))),
                    Err(e) => Err(e),
                }
            }

            async fn get_watch(
                &self,
                watch_id: &str,
            ) -> $crate::error::Result<Option<$crate::watches::Watch>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::watches::watch_columns!(),
                    " FROM watches WHERE watch_id = $1"
                );
                let row = sqlx::query(SQL).bind(watch_id).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::watch_from_row).transpose()
            }

            async fn list_active_watches(
                &self,
                ws_id: Option<&str>,
                node_id: Option<&str>,
            ) -> $crate::error::Result<Vec<$crate::watches::Watch>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::watches::watch_columns!(),
                    " FROM watches WHERE active = 1 AND ($1 IS NULL OR ws_id = $1) \
                     AND ($2 IS NULL OR node_id = $2) ORDER BY created, watch_id"
                );
                let rows = sqlx::query(SQL)
                    .bind(ws_id)
                    .bind(node_id)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::watch_from_row).collect()
            }

            async fn due_watches(
                &self,
                node_id: &str,
                now: std::time::SystemTime,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::watches::Watch>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::watches::watch_columns!(),
                    " FROM watches WHERE active = 1 AND (node_id = $1 OR node_id = '') \
                     AND next_poll IS NOT NULL AND next_poll <= $2 \
                     ORDER BY next_poll, watch_id LIMIT $3"
                );
                let rows = sqlx::query(SQL)
                    .bind(node_id)
                    .bind($crate::timestamp::format_system_time(now))
                    .bind($crate::store::limit_i64(limit))
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::watch_from_row).collect()
            }

            async fn record_watch_poll(
                &self,
                watch_id: &str,
                poll: &$crate::watches::WatchPoll,
            ) -> $crate::error::Result<bool> {
                let now = $crate::timestamp::now();
                let done = sqlx::query(
                    "UPDATE watches SET last_output = $2, last_exit_code = $3, poll_count = $4, \
                     next_poll = $5, last_poll = $6, updated = $6 \
                     WHERE watch_id = $1 AND active = 1",
                )
                .bind(watch_id)
                .bind(&poll.output)
                .bind(poll.exit_code)
                .bind(poll.poll_count)
                .bind(poll.next_poll.map($crate::timestamp::format_system_time))
                .bind(&now)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn deactivate_watch(&self, watch_id: &str) -> $crate::error::Result<bool> {
                let done = sqlx::query(
                    "UPDATE watches SET active = 0, next_poll = NULL, updated = $2 \
                     WHERE watch_id = $1 AND active = 1",
                )
                .bind(watch_id)
                .bind($crate::timestamp::now())
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn count_active_watches(&self, ws_id: &str) -> $crate::error::Result<i64> {
                Ok(
                    sqlx::query_scalar("SELECT COUNT(*) FROM watches WHERE ws_id = $1 AND active = 1")
                        .bind(ws_id)
                        .fetch_one(&self.pool)
                        .await?,
                )
            }
        }
    };
}

pub(crate) use impl_watch_store;
