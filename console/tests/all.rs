//! The console's integration tests: real Redis on 127.0.0.1:6379 (a unique key prefix per
//! test), real node servers in-process on 127.0.0.1:0, light fake nodes where a test needs
//! a node to misbehave, the console in-process (or as a process), real HTTP and SSE.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
