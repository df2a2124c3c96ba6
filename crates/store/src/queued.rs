//! Queued user turns (issue 20): the `queued_sends` table and [`QueuedSendStore`].
//!
//! A send that arrives while its workstream is busy is inserted here (through the batching
//! writer, [`WriteOp::QueueSend`](crate::WriteOp::QueueSend)) and answered only once that
//! insert is committed. When its turn starts, [`WriteOp::QueueState`](crate::WriteOp::QueueState)
//! marks it `started` in the same transaction as the turn's user message, so after a crash a
//! row is either still `queued` (its turn never reached the database: run it) or `started`
//! (never run it again). When the turn ends, [`WriteOp::QueueOutcome`](crate::WriteOp::QueueOutcome)
//! marks it `completed` with its `turn_complete` event, committed before the node emits
//! that event: after a crash a `started` row is a turn that never ended. Rows that are no
//! longer `queued` are kept for a while so a redelivered `correlation_id` is recognised
//! after a restart (and a missed `turn_complete` can be asked for), then pruned.

use async_trait::async_trait;
use turnstone_proto::api::{OUTCOME_COMPLETED, OUTCOME_QUEUED, OUTCOME_REMOVED, OUTCOME_STARTED};

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
    /// Its turn ended; the row holds the `turn_complete` it ended with.
    Completed,
}

impl QueuedState {
    /// The stored text, which is also the wire's `SendOutcome::state`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => OUTCOME_QUEUED,
            Self::Started => OUTCOME_STARTED,
            Self::Removed => OUTCOME_REMOVED,
            Self::Completed => OUTCOME_COMPLETED,
        }
    }

    /// Unknown text reads as `removed` (never run a row we do not understand).
    pub fn parse(text: &str) -> Self {
        match text {
            OUTCOME_QUEUED => Self::Queued,
            OUTCOME_STARTED => Self::Started,
            OUTCOME_COMPLETED => Self::Completed,
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
    /// `completed`: the `turn_complete` event (JSON) the turn ended with; else empty.
    pub outcome: String,
}

/// Reading and pruning `queued_sends` (writes go through the batching writer).
#[async_trait]
pub trait QueuedSendStore: Send + Sync {
    /// Every `queued` or `started` row (waiting, or a turn that has not ended), and every
    /// other row updated at or after `since` (ISO timestamp), in insertion order.
    async fn queued_sends(&self, since: &str) -> Result<Vec<QueuedSend>>;
    /// The row of one correlation id, if stored.
    async fn queued_send(&self, correlation_id: &str) -> Result<Option<QueuedSend>>;
    /// Deletes rows that are `removed` or `completed` and were last updated before `before`
    /// (a `started` row stays until its turn is reported ended).
    /// Returns how many.
    async fn prune_queued_sends(&self, before: &str) -> Result<u64>;
}

/// Decodes one `queued_sends` row (the columns the store's queries select).
macro_rules! decode_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = $row;
        let state: String = row.try_get("state")?;
        Ok::<_, $crate::error::StoreError>($crate::queued::QueuedSend {
            ws_id: row.try_get("ws_id")?,
            correlation_id: row.try_get("correlation_id")?,
            message: row.try_get("message")?,
            options: row.try_get("options")?,
            state: $crate::queued::QueuedState::parse(&state),
            created: row.try_get("created")?,
            updated: row.try_get("updated")?,
            outcome: row.try_get("outcome")?,
        })
    }};
}
pub(crate) use decode_row;

/// Implements [`QueuedSendStore`] for a backend type with a `pool` field.
macro_rules! impl_queued_send_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::queued::QueuedSendStore for $store {
            async fn queued_sends(
                &self,
                since: &str,
            ) -> $crate::error::Result<Vec<$crate::queued::QueuedSend>> {
                let rows = sqlx::query(
                    "SELECT ws_id, correlation_id, message, options, state, created, updated, \
                     outcome FROM queued_sends WHERE state IN ('queued', 'started') OR updated >= $1 \
                     ORDER BY id",
                )
                .bind(since)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(|r| $crate::queued::decode_row!(r)).collect()
            }

            async fn queued_send(
                &self,
                correlation_id: &str,
            ) -> $crate::error::Result<Option<$crate::queued::QueuedSend>> {
                let row = sqlx::query(
                    "SELECT ws_id, correlation_id, message, options, state, created, updated, \
                     outcome FROM queued_sends WHERE correlation_id = $1",
                )
                .bind(correlation_id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(|r| $crate::queued::decode_row!(r)).transpose()
            }

            async fn prune_queued_sends(&self, before: &str) -> $crate::error::Result<u64> {
                let done = sqlx::query(
                    "DELETE FROM queued_sends WHERE state NOT IN ('queued', 'started') \
                     AND updated < $1",
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
            $crate::model::WriteOp::QueueOutcome {
                correlation_id,
                outcome,
            } => {
                sqlx::query(
                    "UPDATE queued_sends SET state = 'completed', outcome = $1, updated = $2 \
                     WHERE correlation_id = $3 AND state = 'started'",
                )
                .bind(outcome)
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
