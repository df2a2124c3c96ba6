//! The console's storage in tests, on either backend: a SQLite file in a temp dir or a fresh
//! PostgreSQL database (`turnstone_testkit::db`), and [`both_backends!`] to run one case on
//! each.

use std::sync::Arc;

use turnstone_testkit::db::PgDatabase;

/// A store of one backend, kept alive with what it lives in.
pub struct Db {
    pub store: Arc<dyn turnstone_store::Store>,
    /// The PostgreSQL URL (`None` for SQLite).
    pub url: Option<String>,
    _dir: Option<tempfile::TempDir>,
    _pg: Option<PgDatabase>,
}

pub async fn sqlite() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let config = turnstone_store::StoreConfig::sqlite(dir.path().join("console.db"));
    Db {
        store: turnstone_store::connect(&config).await.unwrap(),
        url: None,
        _dir: Some(dir),
        _pg: None,
    }
}

pub async fn postgres() -> Db {
    let pg = PgDatabase::create().await;
    let config = turnstone_store::StoreConfig::postgres(pg.url.clone(), 4);
    Db {
        store: turnstone_store::connect(&config).await.unwrap(),
        url: Some(pg.url.clone()),
        _dir: None,
        _pg: Some(pg),
    }
}

/// Runs `async fn $case(db: Db)` once per backend, as `$case::sqlite` and `$case::postgres`.
macro_rules! both_backends {
    ($($case:ident),+ $(,)?) => {
        $(
            mod $case {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$case(crate::suite::db::sqlite().await).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$case(crate::suite::db::postgres().await).await;
                }
            }
        )+
    };
}
pub(crate) use both_backends;
