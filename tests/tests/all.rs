//! Cross-crate end-to-end tests: engine ↔ wire contract, the binaries from the outside, and
//! the OpenAI-compatible client against the fake server under concurrency.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod suite;
