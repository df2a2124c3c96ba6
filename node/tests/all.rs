//! One integration binary for `turnstone-node` (see `suite/`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod suite;
