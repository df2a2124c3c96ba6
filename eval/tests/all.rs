//! One integration binary for `turnstone-eval` (see `suite/`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod suite;
