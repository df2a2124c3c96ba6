//! Queued user turns (issue 20): the `queued_sends` table and [`QueuedSendStore`].
//!
//! A send that arrives while its workstream is busy is inserted here (through the batching
//! writer, [`WriteOp::QueueSend`](crate::WriteOp::QueueSend)) and answered only once that
//! insert is committed. When its turn starts, [`WriteOp::QueueState`](crate::WriteOp::QueueState)
//! marks it `started` in the same transaction as the turn's user message, so after a crash a
//! row is either still `queued` (its turn never reached the database: run it) or `started`
//! (never run it again). Rows that are no longer `queued` are kept for a while so a
//! redelivered `correlation_id` is recognised after a restart, then pruned.

use async_trait::async_trait;

use crate::error::Result;

/// Where a queued send is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueuedState {
    /// Waiting for its turn.
    Queued,
    /// Its turn began (committed with the turn's user message).
    Started,
    /// Removed before it ran (`cancel {"all": true}`, a delete, its workstream closed).
    Removed,
}

impl QueuedState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Started => "started",
            Self::Removed => "removed",
        }
    }

    /// Unknown text reads as `removed` (never run a row we do not understand).
    pub fn parse(text: &str) -> Self {
        match text {
            "queued" => Self::Queued,
            "started" => Self::Started,
            _ => Self::Removed,
        }
    }
}

/// One row of `queued_sends`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueuedSend {
    pub ws_id: String,
    pub correlation_id: String,
    pub message: String,
    /// The send's options as JSON (`auto_approve`, `auto_approve_tools`).
    pub options: String,
    pub state: QueuedState,
    /// ISO timestamps.
    pub created: String,
    pub updated: String,
}

/// Reading and pruning `queued_sends` (writes go through the batching writer).
#[async_trait]
pub trait QueuedSendStore: Send + Sync {
    /// Every `queued` row, and every other row updated at or after `since` (ISO timestamp),
    /// in insertion order.
    async fn queued_sends(&self, since: &str) -> Result<Vec<QueuedSend>>;
    /// Deletes rows that are no longer `queued` and were last updated before `before`.
    /// Returns how many.
    async fn prune_queued_sends(&self, before: &str) -> Result<u64>;
}

/// Implements [`QueuedSendStore`] for a backend type with a `pool` field.
macro_rules! impl_queued_send_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::queued::QueuedSendStore for $store {
            async fn queued_sends(
                &self,
                since: &str,
            ) -> $crate::error::Result<Vec<$crate::queued::QueuedSend>> {
                use sqlx::Row as _;
                let rows = sqlx::query(
                    "SELECT ws_id, correlation_id, message, options, state, created, updated \
                     FROM queued_sends WHERE state = 'queued' OR updated >= $1 ORDER BY id",
                )
                .bind(since)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        let state: String = row.try_get("state")?;
                        Ok($crate::queued::QueuedSend {
                            ws_id: row.try_get("ws_id")?,
                            correlation_id: row.try_get("correlation_id")?,
                            message: row.try_get("message")?,
                            options: row.try_get("options")?,
                            state: $crate::queued::QueuedState::parse(&state),
                            created: row.try_get("created")?,
                            updated: row.try_get("updated")?,
                        })
                    })
                    .collect()
            }

            async fn prune_queued_sends(&self, before: &str) -> $crate::error::Result<u64> {
                let done = sqlx::query(
                    "DELETE FROM queued_sends WHERE state <> 'queued' AND updated < $1",
                )
                .bind(before)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use impl_queued_send_store;

/// The SQL of the two queue write ops, run inside the writer's transaction.
macro_rules! write_queue_op {
    ($tx:expr, $op:expr) => {
        match $op {
            $crate::model::WriteOp::QueueSend(q) => {
                // A redelivered correlation id is already here: keep the first.
                sqlx::query(
                    "INSERT INTO queued_sends (ws_id, correlation_id, message, options, state, \
                     created, updated) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (correlation_id) DO NOTHING",
                )
                .bind(&q.ws_id)
                .bind(&q.correlation_id)
                .bind(&q.message)
                .bind(&q.options)
                .bind(q.state.as_str())
                .bind(&q.created)
                .bind(&q.updated)
                .execute(&mut *$tx)
                .await?;
            }
            $crate::model::WriteOp::QueueState {
                correlation_id,
                state,
            } => {
                sqlx::query(
                    "UPDATE queued_sends SET state = $1, updated = $2 \
                     WHERE correlation_id = $3 AND state = 'queued'",
                )
                .bind(state.as_str())
                .bind($crate::timestamp::now())
                .bind(correlation_id)
                .execute(&mut *$tx)
                .await?;
            }
            _ => {}
        }
    };
}
pub(crate) use write_queue_op;
