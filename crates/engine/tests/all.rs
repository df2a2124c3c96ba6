#![allow(clippy::unwrap_used, clippy::expect_used)]

//! Engine integration tests: full turns against the scripted fake LLM over real HTTP, real
//! tools in a temp dir.

mod suite;
