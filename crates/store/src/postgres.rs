//! The production backend: PostgreSQL with a connection pool, `tsvector` + GIN search
//! indexed in the background ([`crate::search_indexer`]).

use std::time::Duration;

use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::PgPoolOptions;

use crate::error::{Result, StoreError};
use crate::model::{SchemaDescription, SearchHit};
use crate::search_indexer::{SearchIndexer, SearchIndexerConfig, SearchIndexerCounters};
use crate::sql_common::impl_store;

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

/// How long to wait for a pooled connection (also bounds the first connect).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// How many of the newest rows the first step of a search looks at (see `fts_search`).
const SEARCH_RECENT_ROWS: i64 = 5_000;

/// Two sources of hits, because indexing is deferred: indexed rows through
/// `conversation_search`, and committed rows not indexed yet, stemmed on the fly. A row is in
/// exactly one of the two tables in a snapshot (the indexer moves it in one statement), so
/// the branches never overlap. `$1` the query text, `$3` the id bound.
macro_rules! indexed_hits_sql {
    ($op:literal) => {
        concat!(
            "SELECT s.id FROM conversation_search s, plainto_tsquery('english', $1) AS q \
             WHERE s.id ",
            $op,
            " $3 AND s.tsv @@ q"
        )
    };
}
macro_rules! pending_hits_sql {
    ($op:literal) => {
        concat!(
            "SELECT p.id FROM conversation_search_pending p \
             JOIN conversations c ON c.id = p.id, plainto_tsquery('english', $1) AS q \
             WHERE p.id ",
            $op,
            " $3 AND to_tsvector('english', COALESCE(c.content, '')) @@ q"
        )
    };
}

/// The hits themselves, newest first, for the ids of the CTE `newest`.
macro_rules! hits_of_newest_sql {
    () => {
        "SELECT c.id, c.ws_id, c.role, c.tool_name, c.content, c.timestamp, \
         ts_headline('english', COALESCE(c.content, ''), q, \
                     'StartSel=[, StopSel=], MaxWords=24, MinWords=8') AS snippet \
         FROM newest JOIN conversations c ON c.id = newest.id, \
              plainto_tsquery('english', $1) AS q \
         ORDER BY c.id DESC"
    };
}

/// Step 1 of a search: the newest `$2` hits among ids above `$3`. Each branch has its own
/// `ORDER BY id DESC LIMIT`, so a common word walks the primary key backwards and stops
/// after `$2` matches (without it the planner collected and sorted every match in the
/// window: 16 ms instead of 3 for a common word at 200,000 messages).
const SEARCH_RECENT_SQL: &str = concat!(
    "WITH newest AS (SELECT id FROM ((",
    indexed_hits_sql!(">"),
    " ORDER BY s.id DESC LIMIT $2) UNION ALL (",
    pending_hits_sql!(">"),
    " ORDER BY p.id DESC LIMIT $2)) hits ORDER BY id DESC LIMIT $2) ",
    hits_of_newest_sql!()
);

/// Step 2: the newest `$2` hits among ids up to `$3`, collected first (see `fts_search`).
const SEARCH_OLDER_SQL: &str = concat!(
    "WITH matches AS MATERIALIZED (",
    indexed_hits_sql!("<="),
    " UNION ALL ",
    pending_hits_sql!("<="),
    "), newest AS (SELECT id FROM matches ORDER BY id DESC LIMIT $2) ",
    hits_of_newest_sql!()
);

/// [`crate::Store`] on PostgreSQL.
pub struct PostgresStore {
    pool: PgPool,
    indexer: SearchIndexer,
}

impl PostgresStore {
    /// Connects (pool of `pool_size`, at least 1), applies the PostgreSQL migrations and
    /// starts the background search indexer.
    pub async fn open(url: &str, pool_size: u32) -> Result<Self> {
        Self::open_with(url, pool_size, SearchIndexerConfig::default()).await
    }

    /// [`PostgresStore::open`] with the search indexer tuned (or not running:
    /// `background: false`).
    pub async fn open_with(
        url: &str,
        pool_size: u32,
        indexer: SearchIndexerConfig,
    ) -> Result<Self> {
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
        let indexer = SearchIndexer::start(pool.clone(), indexer);
        Ok(Self { pool, indexer })
    }

    /// Runs one indexing transaction now (whether or not the background task runs): claims
    /// up to `batch_rows` pending messages and indexes them. Returns how many it claimed.
    pub async fn index_search_batch(&self) -> Result<u64> {
        self.indexer.index_batch().await
    }

    /// Messages committed and not yet in the search index (on this database, whichever
    /// store wrote them). Search finds them all the same, at a cost growing with this number.
    async fn search_backlog_impl(&self) -> Result<u64> {
        self.indexer.backlog().await
    }

    /// What this store's indexer has done so far.
    pub fn search_indexer_counters(&self) -> SearchIndexerCounters {
        self.indexer.counters()
    }

    fn messages_committed(&self) {
        self.indexer.wake();
    }

    async fn stop_background_tasks(&self) {
        self.indexer.shutdown().await;
    }

    async fn fts_search(&self, terms: &[String], limit: i64) -> Result<Vec<SearchHit>> {
        // Newest hits first, in two steps, because no single plan suits both rare and common
        // words: for `ORDER BY id DESC LIMIT n` PostgreSQL underestimates how rare a rare word
        // is and walks the primary key backwards through the whole table (seconds over a
        // million rows), while collecting every match through the GIN index is as slow for a
        // common word. So (1) search the newest `SEARCH_RECENT_ROWS` rows, which is enough for
        // any common word; (2) only when that gave fewer than `limit` hits, collect the older
        // matches through the GIN index and sort just those ids. Both steps also match the
        // messages of their id range not indexed yet (see `pending_hits_sql!`), so a message is
        // found from the moment it is committed; every step-1 id is above every step-2 id,
        // so the concatenation is newest first.
        // plainto_tsquery ANDs the words and accepts any text: no syntax errors possible.
        let text = terms.join(" ");
        let newest: i64 = sqlx::query_scalar("SELECT COALESCE(max(id), 0) FROM conversations")
            .fetch_one(&self.pool)
            .await?;
        let floor = newest.saturating_sub(SEARCH_RECENT_ROWS);
        let rows = sqlx::query(SEARCH_RECENT_SQL)
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
            let rows = sqlx::query(SEARCH_OLDER_SQL)
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
