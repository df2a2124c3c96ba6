//! The embedded default backend: one SQLite file (WAL mode, busy timeout), FTS5 search.

use std::path::Path;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row as _, SqlitePool};

use crate::error::{Result, StoreError};
use crate::model::{SchemaDescription, SearchHit};
use crate::sql_common::impl_store;

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

/// How long a writer waits for another connection's lock before `SQLITE_BUSY`.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections in the pool (WAL lets readers run beside the one writer).
const POOL_SIZE: u32 = 4;
/// Page cache per connection, in KiB (SQLite's `cache_size` takes negative values as KiB).
/// SQLite's default of 2 MiB is far smaller than the indexes' working set once the history
/// grows past a few hundred thousand messages, and every batch then re-reads index and FTS
/// pages from the OS: `cargo bench --bench store` measured 19–21k messages/s over 1,000,000
/// messages with the default against 25–29k with 64 MiB. Pages are only cached once read,
/// so an idle connection stays small.
const CACHE_KIB: i64 = 64 * 1024;

/// [`crate::Store`] on one SQLite file.
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if missing) the file and applies the SQLite migrations.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let options = SqliteConnectOptions::new()
            .filename(path.as_ref())
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .pragma("cache_size", format!("-{CACHE_KIB}"));
        let pool = SqlitePoolOptions::new()
            .max_connections(POOL_SIZE)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Connect {
                target: format!("sqlite database {}", path.as_ref().display()),
                source,
            })?;
        MIGRATOR.run(&pool).await?;
        Ok(Self { pool })
    }

    async fn fts_search(&self, terms: &[String], limit: i64) -> Result<Vec<SearchHit>> {
        // Every word becomes a quoted FTS5 string: no operator or syntax survives.
        let expr = terms
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" ");
        let rows = sqlx::query(
            "SELECT c.id, c.ws_id, c.role, c.tool_name, c.content, c.timestamp, \
             snippet(conversations_fts, 0, '[', ']', '…', 16) AS snippet \
             FROM conversations_fts JOIN conversations c ON c.id = conversations_fts.rowid \
             WHERE conversations_fts MATCH $1 \
             ORDER BY conversations_fts.rowid DESC LIMIT $2",
        )
        .bind(expr)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Self::hit_from_row(r, true)).collect()
    }

    /// FTS5 triggers index in the write transaction: nothing to do after it.
    fn messages_committed(&self) {}

    /// No background tasks on SQLite.
    async fn stop_background_tasks(&self) {}

    /// FTS5 indexes in the write transaction: nothing is ever waiting.
    async fn search_backlog_impl(&self) -> Result<u64> {
        Ok(0)
    }

    async fn schema_impl(&self) -> Result<SchemaDescription> {
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_sqlx%' ESCAPE '\\'",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut out = SchemaDescription::new();
        for table in tables {
            let rows = sqlx::query("SELECT name FROM pragma_table_info($1)")
                .bind(&table)
                .fetch_all(&self.pool)
                .await?;
            let columns = rows
                .iter()
                .map(|r| r.try_get::<String, _>("name"))
                .collect::<Result<_, _>>()?;
            out.insert(table, columns);
        }
        Ok(out)
    }
}

impl_store!(SqliteStore, sqlx::Sqlite, "sqlite");
crate::auth::impl_auth_store!(SqliteStore, sqlx::Sqlite);
crate::roles::impl_role_store!(SqliteStore, sqlx::Sqlite);
crate::schedules::impl_schedule_store!(SqliteStore, sqlx::Sqlite);
crate::skills::impl_skill_store!(SqliteStore, sqlx::Sqlite);
crate::watches::impl_watch_store!(SqliteStore, sqlx::Sqlite);
crate::queued::impl_queued_send_store!(SqliteStore, sqlx::Sqlite);
crate::policies::impl_tool_policy_store!(SqliteStore, sqlx::Sqlite);
crate::verdicts::impl_verdict_store!(SqliteStore, sqlx::Sqlite);
crate::assessments::impl_assessment_store!(SqliteStore, sqlx::Sqlite);
crate::cluster_settings::impl_settings_store!(SqliteStore, sqlx::Sqlite);
crate::audit::impl_audit_store!(SqliteStore, sqlx::Sqlite);
crate::usage::impl_usage_store!(SqliteStore, sqlx::Sqlite);
