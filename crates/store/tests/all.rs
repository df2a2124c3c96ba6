//! The store's one integration test binary. Every case runs against BOTH backends: SQLite in
//! a temp dir and PostgreSQL on 127.0.0.1:5432 in a fresh database (see `support`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test cases are plain async fns, not #[test] fns

mod support;

/// Runs `async fn $case(db: TestDb)` once per backend, as `$case::sqlite` and
/// `$case::postgres`.
macro_rules! both_backends {
    ($($case:ident),+ $(,)?) => {
        $(
            mod $case {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    let db = crate::support::TestDb::new(crate::support::Backend::Sqlite).await;
                    super::$case(db).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    let db = crate::support::TestDb::new(crate::support::Backend::Postgres).await;
                    super::$case(db).await;
                }
            }
        )+
    };
}

mod suite;
