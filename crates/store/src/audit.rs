//! The admin audit log (node spec §6.1 `audit_events`): who did what, when, from where —
//! through [`AuditStore`]. Rows are appended by the services' admin routes and never
//! changed; [`AuditStore::prune_audit`] keeps the newest. The SQL is written once, in
//! `impl_audit_store!`, for both backends.

use async_trait::async_trait;

use crate::error::Result;

/// One row of `audit_events`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AuditEvent {
    pub event_id: String,
    pub timestamp: String,
    pub user_id: String,
    /// What was done, e.g. `setting.update`, `model.create`.
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    /// JSON object text (never a secret's value).
    pub detail: String,
    pub ip_address: String,
}

/// An event to record (its id and time are the store's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewAuditEvent {
    pub user_id: String,
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    pub detail: String,
    pub ip_address: String,
}

/// Which events to list: newest first, at most `limit`, optionally one user's or one
/// action's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    pub user_id: Option<String>,
    pub action: Option<String>,
    pub limit: usize,
}

#[async_trait]
pub trait AuditStore: Send + Sync {
    async fn record_audit(&self, event: NewAuditEvent) -> Result<AuditEvent>;
    async fn list_audit(&self, query: AuditQuery) -> Result<Vec<AuditEvent>>;
    /// Keeps the newest `keep` events; how many were deleted.
    async fn prune_audit(&self, keep: usize) -> Result<u64>;
}

macro_rules! audit_columns {
    () => {
        "event_id, timestamp, user_id, action, resource_type, resource_id, detail, ip_address"
    };
}
pub(crate) use audit_columns;

/// Implements [`AuditStore`] for a backend type with a `pool` field.
macro_rules! impl_audit_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn audit_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::audit::AuditEvent> {
                use sqlx::Row as _;
                Ok($crate::audit::AuditEvent {
                    event_id: row.try_get("event_id")?,
                    timestamp: row.try_get("timestamp")?,
                    user_id: row.try_get("user_id")?,
                    action: row.try_get("action")?,
                    resource_type: row.try_get("resource_type")?,
                    resource_id: row.try_get("resource_id")?,
                    detail: row.try_get("detail")?,
                    ip_address: row.try_get("ip_address")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::audit::AuditStore for $store {
            async fn record_audit(
                &self,
                event: $crate::audit::NewAuditEvent,
            ) -> $crate::error::Result<$crate::audit::AuditEvent> {
                const SQL: &str = concat!(
                    "INSERT INTO audit_events (",
                    $crate::audit::audit_columns!(),
                    ", created) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $2) RETURNING ",
                    $crate::audit::audit_columns!()
                );
                let detail = if event.detail.trim().is_empty() {
                    "{}".to_string()
                } else {
                    event.detail.clone()
                };
                let row = sqlx::query(SQL)
                    .bind($crate::ids::new_ws_id())
                    .bind($crate::timestamp::now())
                    .bind(&event.user_id)
                    .bind(&event.action)
                    .bind(&event.resource_type)
                    .bind(&event.resource_id)
                    .bind(&detail)
                    .bind(&event.ip_address)
                    .fetch_one(&self.pool)
                    .await?;
                Self::audit_from_row(&row)
            }

            async fn list_audit(
                &self,
                query: $crate::audit::AuditQuery,
            ) -> $crate::error::Result<Vec<$crate::audit::AuditEvent>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::audit::audit_columns!(),
                    " FROM audit_events WHERE ($1 IS NULL OR user_id = $1) \
                     AND ($2 IS NULL OR action = $2) \
                     ORDER BY timestamp DESC, event_id DESC LIMIT $3"
                );
                let limit = i64::try_from(query.limit.max(1)).unwrap_or(i64::MAX);
                let rows = sqlx::query(SQL)
                    .bind(query.user_id.as_deref())
                    .bind(query.action.as_deref())
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::audit_from_row).collect()
            }

            async fn prune_audit(&self, keep: usize) -> $crate::error::Result<u64> {
                let keep = i64::try_from(keep).unwrap_or(i64::MAX);
                let done = sqlx::query(
                    "DELETE FROM audit_events WHERE event_id NOT IN (SELECT event_id FROM \
                     audit_events ORDER BY timestamp DESC, event_id DESC LIMIT $1)",
                )
                .bind(keep)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use impl_audit_store;
