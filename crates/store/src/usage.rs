//! Model usage accounting (node spec §6.1 `usage_events`): one row per model call — who
//! (`user_id`), where (`ws_id`, `node_id`), which model, and its token and tool-call counts —
//! through [`UsageStore`].
//!
//! Nodes write rows through the batching [`crate::Writer`] ([`WriteOp::Usage`](crate::WriteOp::Usage)),
//! so accounting never waits on the database inside a turn; [`UsageStore::record_usage`]
//! writes one row at once. [`UsageStore::usage_report`] sums a time range, in total and
//! grouped by day, user, model, node or workstream; [`UsageStore::prune_usage`] drops rows
//! older than a number of days. The SQL is written once, in `impl_usage_store!`, for both
//! backends.

use async_trait::async_trait;

use crate::error::Result;

/// The summed columns of a report query, each as a 64-bit integer (PostgreSQL's `SUM` of a
/// `BIGINT` is `NUMERIC`).
macro_rules! usage_sums {
    () => {
        "CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens, \
         CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens, \
         CAST(COALESCE(SUM(tool_calls_count), 0) AS BIGINT) AS tool_calls, \
         CAST(COALESCE(SUM(cache_creation_tokens), 0) AS BIGINT) AS cache_creation_tokens, \
         CAST(COALESCE(SUM(cache_read_tokens), 0) AS BIGINT) AS cache_read_tokens, \
         CAST(COUNT(*) AS BIGINT) AS calls"
    };
}
/// The time range of a report query (`$1` since, `$2` until, either NULL).
macro_rules! usage_range {
    () => {
        " FROM usage_events WHERE ($1 IS NULL OR timestamp >= $1) \
         AND ($2 IS NULL OR timestamp < $2)"
    };
}

/// A model call's usage to record (its id is the store's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewUsageEvent {
    /// When the call's usage became known; empty: now.
    pub timestamp: String,
    pub user_id: String,
    pub ws_id: String,
    pub node_id: String,
    /// The model alias (or name) the call used.
    pub model: String,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// Tool calls the model requested in this call.
    pub tool_calls_count: i64,
    pub cache_creation_tokens: i64,
    pub cache_read_tokens: i64,
}

/// What a report's rows are grouped by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UsageGroup {
    /// The UTC day (`YYYY-MM-DD`), newest first.
    #[default]
    Day,
    User,
    Model,
    Node,
    /// The workstream.
    Ws,
}

impl UsageGroup {
    /// Every group, in the order the API lists them.
    pub const ALL: [Self; 5] = [Self::Day, Self::User, Self::Model, Self::Node, Self::Ws];

    /// The API's name of the group.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::User => "user",
            Self::Model => "model",
            Self::Node => "node",
            Self::Ws => "ws",
        }
    }

    /// The group named `name` (an API's `group_by`), if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.as_str() == name)
    }

    /// The grouped query of the group: its key is a fixed column, never caller text. Days
    /// read newest first; every other group biggest (most tokens) first.
    pub(crate) fn report_sql(self) -> &'static str {
        macro_rules! grouped {
            ($key:literal, $order:literal) => {
                concat!(
                    "SELECT ",
                    $key,
                    " AS usage_key, ",
                    usage_sums!(),
                    usage_range!(),
                    " GROUP BY ",
                    $key,
                    " ORDER BY ",
                    $order,
                    " LIMIT $3"
                )
            };
            ($key:literal) => {
                grouped!(
                    $key,
                    "SUM(prompt_tokens) + SUM(completion_tokens) DESC, usage_key"
                )
            };
        }
        match self {
            Self::Day => grouped!("substr(timestamp, 1, 10)", "usage_key DESC"),
            Self::User => grouped!("user_id"),
            Self::Model => grouped!("model"),
            Self::Node => grouped!("node_id"),
            Self::Ws => grouped!("ws_id"),
        }
    }
}

/// Which rows a report sums.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageQuery {
    /// Rows at or after this timestamp (the store's format, see [`crate::timestamp`]).
    pub since: Option<String>,
    /// Rows before this timestamp.
    pub until: Option<String>,
    pub group_by: UsageGroup,
    /// Most grouped rows (at least 1); the totals cover every matching row.
    pub limit: usize,
}

/// Summed counts of a set of model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct UsageTotals {
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// Tool calls the model requested.
    pub tool_calls: i64,
    pub cache_creation_tokens: i64,
    pub cache_read_tokens: i64,
    /// Model calls (rows).
    pub calls: i64,
}

/// One group of a report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UsageRow {
    /// The day, user id, model, node id or workstream id (`""` where the row had none).
    pub key: String,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

/// A usage report: the totals of the range and its groups.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UsageReport {
    pub totals: UsageTotals,
    pub rows: Vec<UsageRow>,
}

#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Writes one row now (nodes write through the [`crate::Writer`] instead).
    async fn record_usage(&self, event: NewUsageEvent) -> Result<()>;
    /// The totals of the rows in the query's range and its groups.
    async fn usage_report(&self, query: UsageQuery) -> Result<UsageReport>;
    /// Deletes the rows older than `days` days; how many.
    async fn prune_usage(&self, days: u32) -> Result<u64>;
}

/// Inserts one `usage_events` row with `$executor` (a pool or a transaction).
macro_rules! insert_usage {
    ($executor:expr, $event:expr) => {{
        let event: &$crate::usage::NewUsageEvent = $event;
        let now = $crate::timestamp::now();
        sqlx::query(
            "INSERT INTO usage_events (event_id, timestamp, user_id, ws_id, node_id, model, \
             prompt_tokens, completion_tokens, tool_calls_count, cache_creation_tokens, \
             cache_read_tokens, created) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind($crate::ids::new_ws_id())
        .bind($crate::cluster_settings::stamp_or(&event.timestamp, &now))
        .bind(&event.user_id)
        .bind(&event.ws_id)
        .bind(&event.node_id)
        .bind(&event.model)
        .bind(event.prompt_tokens)
        .bind(event.completion_tokens)
        .bind(event.tool_calls_count)
        .bind(event.cache_creation_tokens)
        .bind(event.cache_read_tokens)
        .bind(&now)
        .execute($executor)
        .await?;
    }};
}
pub(crate) use {insert_usage, usage_range, usage_sums};

/// Implements [`UsageStore`] for a backend type with a `pool` field.
macro_rules! impl_usage_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn usage_totals_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::usage::UsageTotals> {
                use sqlx::Row as _;
                Ok($crate::usage::UsageTotals {
                    prompt_tokens: row.try_get("prompt_tokens")?,
                    completion_tokens: row.try_get("completion_tokens")?,
                    tool_calls: row.try_get("tool_calls")?,
                    cache_creation_tokens: row.try_get("cache_creation_tokens")?,
                    cache_read_tokens: row.try_get("cache_read_tokens")?,
                    calls: row.try_get("calls")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::usage::UsageStore for $store {
            async fn record_usage(
                &self,
                event: $crate::usage::NewUsageEvent,
            ) -> $crate::error::Result<()> {
                $crate::usage::insert_usage!(&self.pool, &event);
                Ok(())
            }

            async fn usage_report(
                &self,
                query: $crate::usage::UsageQuery,
            ) -> $crate::error::Result<$crate::usage::UsageReport> {
                use sqlx::Row as _;
                const TOTALS: &str = concat!(
                    "SELECT ",
                    $crate::usage::usage_sums!(),
                    $crate::usage::usage_range!()
                );
                let totals = sqlx::query(TOTALS)
                    .bind(query.since.as_deref())
                    .bind(query.until.as_deref())
                    .fetch_one(&self.pool)
                    .await?;
                let totals = Self::usage_totals_from_row(&totals)?;
                let limit = i64::try_from(query.limit.max(1)).unwrap_or(i64::MAX);
                let rows = sqlx::query(query.group_by.report_sql())
                    .bind(query.since.as_deref())
                    .bind(query.until.as_deref())
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?;
                let rows = rows
                    .iter()
                    .map(|row| {
                        Ok($crate::usage::UsageRow {
                            key: row.try_get("usage_key")?,
                            totals: Self::usage_totals_from_row(row)?,
                        })
                    })
                    .collect::<$crate::error::Result<Vec<_>>>()?;
                Ok($crate::usage::UsageReport { totals, rows })
            }

            async fn prune_usage(&self, days: u32) -> $crate::error::Result<u64> {
                let done = sqlx::query("DELETE FROM usage_events WHERE timestamp < $1")
                    .bind($crate::timestamp::days_ago(days))
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use impl_usage_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_their_names_only() {
        for g in UsageGroup::ALL {
            assert_eq!(UsageGroup::parse(g.as_str()), Some(g));
        }
        assert_eq!(UsageGroup::parse("week"), None);
        assert_eq!(UsageGroup::parse("Day"), None);
        assert_eq!(UsageGroup::default(), UsageGroup::Day);
    }
}
