//! A fresh PostgreSQL database per test on the server `scripts/services` starts
//! (127.0.0.1:5432, user `postgres`, trust auth), dropped when the value is dropped (best
//! effort). Databases are named `turnstone_test_<run>_<n>` (`run` random per test binary).
//! A test that needs PostgreSQL and cannot reach it fails with the reason.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The test server, without a database.
pub const PG_SERVER: &str = "postgres://postgres@127.0.0.1:5432";

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

/// One fresh database.
#[derive(Debug)]
pub struct PgDatabase {
    pub name: String,
    /// `postgres://postgres@127.0.0.1:5432/<name>`.
    pub url: String,
}

impl PgDatabase {
    /// Creates it (retrying the collisions of concurrent `CREATE DATABASE` on template1).
    pub async fn create() -> Self {
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
            url: format!("{PG_SERVER}/{name}"),
            name,
        }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.name);
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
