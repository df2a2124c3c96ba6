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
        // plainto_tsquery ANDs the words and accepts any text: no syntax errors possible.
        let rows = sqlx::query(
            "SELECT c.id, c.ws_id, c.role, c.tool_name, c.content, c.timestamp, \
             ts_headline('english', COALESCE(c.content, ''), q, \
                         'StartSel=[, StopSel=], MaxWords=24, MinWords=8') AS snippet \
             FROM conversations c, plainto_tsquery('english', $1) AS q \
             WHERE c.content_tsv @@ q ORDER BY c.id DESC LIMIT $2",
        )
        .bind(terms.join(" "))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Self::hit_from_row(r, true)).collect()
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
