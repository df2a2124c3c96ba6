//! Integration tests of the built-in tools through the public API (one test binary).

// Test helpers outside `#[test]` functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
