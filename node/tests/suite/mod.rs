//! The node server's integration tests.

mod server;
