//! The one integration test binary of `turnstone-proto`.

// Test helpers outside `#[test]` functions may panic on broken fixtures too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
