//! Typed, classified LLM errors.

use std::time::Duration;

/// Everything that can go wrong talking to a model backend.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// TCP connect / DNS / TLS failure before any response.
    #[error("cannot connect to backend: {0}")]
    Connect(String),
    /// The request timed out before the response head.
    #[error("backend request timed out: {0}")]
    Timeout(String),
    /// HTTP 429.
    #[error("rate limited by backend (HTTP 429): {body}")]
    RateLimited {
        retry_after: Option<Duration>,
        body: String,
    },
    /// HTTP 5xx.
    #[error("backend error HTTP {status}: {body}")]
    Server {
        status: u16,
        retry_after: Option<Duration>,
        body: String,
    },
    /// HTTP 4xx other than 429 (bad request, auth, unknown model): never retried.
    #[error("backend rejected the request HTTP {status}: {body}")]
    Client { status: u16, body: String },
    /// HTTP 200 with an empty body.
    #[error("backend returned an empty response")]
    EmptyResponse,
    /// A chunk or body that is not the JSON we expect.
    #[error("malformed response from backend: {0}")]
    Malformed(String),
    /// The stream broke after the first byte (connection dropped mid-stream).
    #[error("stream interrupted: {0}")]
    StreamInterrupted(String),
    /// The circuit breaker refused the request.
    #[error("Backend unreachable (circuit breaker open)")]
    CircuitOpen,
}

impl LlmError {
    /// Whether a retry before the first byte may help.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Connect(_) | Self::Timeout(_) | Self::RateLimited { .. } | Self::Server { .. }
        )
    }

    /// The server's requested delay, if it sent `Retry-After`.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } | Self::Server { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// Short class name used in `[Retrying in Ns: <class>]` notices and metrics labels.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Connect(_) => "ConnectError",
            Self::Timeout(_) => "Timeout",
            Self::RateLimited { .. } => "RateLimitError",
            Self::Server { .. } => "ServerError",
            Self::Client { .. } => "ClientError",
            Self::EmptyResponse => "EmptyResponse",
            Self::Malformed(_) => "MalformedResponse",
            Self::StreamInterrupted(_) => "StreamInterrupted",
            Self::CircuitOpen => "CircuitOpen",
        }
    }
}
