//! The production backend: PostgreSQL with a connection pool, `tsvector` + GIN search.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::PgPoolOptions;

use crate::error::{Result, StoreError};
use crate::model::{SchemaDescription, SearchHit};
use crate::sql_common::impl_store;

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

/// How long to wait for a pooled connection (also bounds the first connect).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// How many of the newest rows the first step of a search looks at (see `fts_search`).
const SEARCH_RECENT_ROWS: i64 = 5_000;

/// [`crate::Store`] on PostgreSQL.
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects (pool of `pool_size`, at least 1) and applies the PostgreSQL migrations.
    pub async fn open(url: &str, pool_size: u32) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(pool_size.max(1))
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect(url)
            .await
            .map_err(|source| StoreError::Connect {
                target: "postgresql database".to_string(),
                source,
            })?;
        MIGRATOR.run(&pool).await?;
        Ok(Self { pool })
    }

    async fn fts_search(&self, terms: &[String], limit: i64) -> Result<Vec<SearchHit>> {
        // Newest hits first, in two steps, because no single plan suits both rare and common
        // words: for `ORDER BY id DESC LIMIT n` PostgreSQL underestimates how rare a rare word
        // is and walks the primary key backwards through the whole table (seconds over a
        // million rows), while collecting every match through the GIN index is as slow for a
        // common word. So (1) search the newest `SEARCH_RECENT_ROWS` rows, which is enough for
        // any common word; (2) only when that gave fewer than `limit` hits, collect the older
        // matches through the GIN index and sort just those ids.
        // plainto_tsquery ANDs the words and accepts any text: no syntax errors possible.
        let text = terms.join(" ");
        let newest: i64 = sqlx::query_scalar("SELECT COALESCE(max(id), 0) FROM conversations")
            .fetch_one(&self.pool)
            .await?;
        let floor = newest.saturating_sub(SEARCH_RECENT_ROWS);
        let rows = sqlx::query(
            "SELECT c.id, c.ws_id, c.role, c.tool_name, c.content, c.timestamp, \
             ts_headline('english', COALESCE(c.content, ''), q, \
                         'StartSel=[, StopSel=], MaxWords=24, MinWords=8') AS snippet \
             FROM conversations c, plainto_tsquery('english', $1) AS q \
             WHERE c.id > $3 AND c.content_tsv @@ q ORDER BY c.id DESC LIMIT $2",
        )
        .bind(&text)
        .bind(limit)
        .bind(floor)
        .fetch_all(&self.pool)
        .await?;
        let mut hits = rows
            .iter()
            .map(|r| Self::hit_from_row(r, true))
            .collect::<Result<Vec<_>>>()?;
        let missing = limit.saturating_sub(i64::try_from(hits.len()).unwrap_or(i64::MAX));
        if missing > 0 && floor > 0 {
            let rows = sqlx::query(
                "WITH matches AS MATERIALIZED ( \
                     SELECT c.id FROM conversations c, plainto_tsquery('english', $1) AS q \
                     WHERE c.content_tsv @@ q AND c.id <= $3), \
                 newest AS (SELECT id FROM matches ORDER BY id DESC LIMIT $2) \
                 SELECT c.id, c.ws_id, c.role, c.tool_name, c.content, c.timestamp, \
                 ts_headline('english', COALESCE(c.content, ''), q, \
                             'StartSel=[, StopSel=], MaxWords=24, MinWords=8') AS snippet \
                 FROM newest JOIN conversations c ON c.id = newest.id, \
                      plainto_tsquery('english', $1) AS q \
                 ORDER BY c.id DESC",
            )
            .bind(&text)
            .bind(missing)
            .bind(floor)
            .fetch_all(&self.pool)
            .await?;
            for row in &rows {
                hits.push(Self::hit_from_row(row, true)?);
            }
        }
        Ok(hits)
    }

    async fn schema_impl(&self) -> Result<SchemaDescription> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name::text NOT LIKE '\\_sqlx%' \
             ORDER BY table_name, ordinal_position",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut out = SchemaDescription::new();
        for (table, column) in rows {
            out.entry(table).or_default().insert(column);
        }
        Ok(out)
    }
}

impl_store!(PostgresStore, sqlx::Postgres, "postgresql");
crate::auth::impl_auth_store!(PostgresStore, sqlx::Postgres);
crate::roles::impl_role_store!(PostgresStore, sqlx::Postgres);
crate::schedules::impl_schedule_store!(PostgresStore, sqlx::Postgres);
crate::skills::impl_skill_store!(PostgresStore, sqlx::Postgres);
crate::watches::impl_watch_store!(PostgresStore, sqlx::Postgres);
crate::queued::impl_queued_send_store!(PostgresStore, sqlx::Postgres);
crate::policies::impl_tool_policy_store!(PostgresStore, sqlx::Postgres);
crate::verdicts::impl_verdict_store!(PostgresStore, sqlx::Postgres);
crate::assessments::impl_assessment_store!(PostgresStore, sqlx::Postgres);
crate::cluster_settings::impl_settings_store!(PostgresStore, sqlx::Postgres);
crate::audit::impl_audit_store!(PostgresStore, sqlx::Postgres);
crate::usage::impl_usage_store!(PostgresStore, sqlx::Postgres);
