//! Test databases: a temp-dir SQLite file, or a fresh PostgreSQL database per case.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::PgConnection;
use turnstone_store::{Store, StoreConfig};

const PG_SERVER: &str = "postgres://postgres@127.0.0.1:5432";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// One isolated database. PostgreSQL databases are named `turnstone_test_<run>_<n>` (`run`
/// is random per test-binary run) and dropped when the value is dropped (best effort).
pub struct TestDb {
    pub backend: Backend,
    pub config: StoreConfig,
    _dir: Option<tempfile::TempDir>,
    pg_name: Option<String>,
}

fn run_id() -> &'static str {
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| format!("{:08x}", rand::random::<u32>()))
}

async fn admin_connection() -> PgConnection {
    match PgConnection::connect(&format!("{PG_SERVER}/postgres")).await {
        Ok(conn) => conn,
        Err(e) => panic!(
            "PostgreSQL tests need a server on 127.0.0.1:5432 (user postgres, trust auth), \
             and it is not reachable: {e}. Start it with `scripts/services`."
        ),
    }
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
                    pg_name: None,
                }
            }
            Backend::Postgres => {
                static N: AtomicUsize = AtomicUsize::new(0);
                let name = format!(
                    "turnstone_test_{}_{}",
                    run_id(),
                    N.fetch_add(1, Ordering::Relaxed)
                );
                let mut admin = admin_connection().await;
                let sql = format!("CREATE DATABASE {name}");
                let mut attempt = 0;
                loop {
                    match sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                        .execute(&mut admin)
                        .await
                    {
                        Ok(_) => break,
                        // Concurrent CREATE DATABASE can collide on template1.
                        Err(e) if attempt < 10 => {
                            attempt += 1;
                            eprintln!("create database {name} failed ({e}), retrying");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => panic!("cannot create test database {name}: {e}"),
                    }
                }
                let _ = admin.close().await;
                Self {
                    backend,
                    config: StoreConfig::postgres(format!("{PG_SERVER}/{name}"), 4),
                    _dir: None,
                    pg_name: Some(name),
                }
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

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(name) = self.pg_name.take() else {
            return;
        };
        // Drop runs inside the test's runtime: use a separate thread with its own runtime.
        let dropper = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut admin) = PgConnection::connect(&format!("{PG_SERVER}/postgres")).await
                {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut admin)
                        .await
                    {
                        eprintln!("best-effort drop of {name} failed: {e}");
                    }
                    let _ = admin.close().await;
                }
            });
        });
        let _ = dropper.join();
    }
}
