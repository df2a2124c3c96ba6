//! Errors of the test-support crate.

use std::net::SocketAddr;

/// What can fail while setting up a fixture.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// The fake server could not bind its listening socket.
    #[error("cannot bind fake LLM server on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}
