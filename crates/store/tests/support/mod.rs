//! Test databases: a temp-dir SQLite file, or a fresh PostgreSQL database per case
//! (`turnstone_testkit::db`).

use std::sync::Arc;

use turnstone_store::{Store, StoreConfig};
use turnstone_testkit::db::PgDatabase;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// One isolated database, removed when the value is dropped.
pub struct TestDb {
    pub backend: Backend,
    pub config: StoreConfig,
    _dir: Option<tempfile::TempDir>,
    _pg: Option<PgDatabase>,
}

impl TestDb {
    pub async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let config = StoreConfig::sqlite(dir.path().join("test.db"));
                Self {
                    backend,
                    config,
                    _dir: Some(dir),
                    _pg: None,
                }
            }
            Backend::Postgres => {
                let pg = PgDatabase::create().await;
                Self {
                    backend,
                    config: StoreConfig::postgres(pg.url.clone(), 4),
                    _dir: None,
                    _pg: Some(pg),
                }
            }
        }
    }

    /// The PostgreSQL database's URL (panics on SQLite: PostgreSQL-only tests call it).
    pub fn pg_url(&self) -> &str {
        match &self.config.backend {
            turnstone_store::StoreBackend::Postgres { url, .. } => url,
            turnstone_store::StoreBackend::Sqlite { .. } => {
                panic!("pg_url() on a SQLite test database")
            }
        }
    }

    /// Connects (running migrations), as a fresh process would.
    pub async fn open(&self) -> Arc<dyn Store> {
        turnstone_store::connect(&self.config)
            .await
            .unwrap_or_else(|e| panic!("open {:?} store: {e}", self.backend))
    }
}
