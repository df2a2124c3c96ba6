//! `turnstone-queue`: everything Turnstone does with Redis.
//!
//! * [`args`] — the `--redis-*` flags (contract names, old names, secrets) the bridge and the
//!   console share.
//! * [`conn`] — connection settings (URL or host/port/user/password/db, TLS with CA and
//!   client certificate files; the one place a Redis client is built), the auto-reconnecting
//!   connection for ordinary commands, dedicated connections for blocking pops (their read
//!   timeout is raised above the pop timeout). [`Backoff`] is `turnstone_backoff`'s, re-exported.
//! * [`reliable`] — at-least-once consumption of an inbound list: a message moves atomically
//!   (`BLMOVE`) into a processing list and leaves it only when acknowledged.
//! * [`publish`] — publishing one node event exactly once: appended to the workstream's capped
//!   Redis Stream under an id derived from the event's position, and published on the
//!   compatible pub/sub channels only if that append was new.
//! * [`client`] — the producer/consumer API (`TurnstoneClient`, the original Python client's
//!   counterpart) with lossless replay of a workstream's stream; the `turnstone-mq` CLI uses it.
//! * [`lease`] — node heartbeats, workstream ownership leases, liveness and rendezvous
//!   placement over live nodes.
//!
//! It must not know the engine or the HTTP API: the bridge and the console put those together.

pub mod args;
pub mod client;
pub mod conn;
pub mod lease;
pub mod publish;
pub mod reliable;

pub use args::{REDIS_ENV_ALIASES, REDIS_SECRETS, RedisArgs};
pub use client::{ClientError, Decision, TurnResult, TurnstoneClient, WaitOptions, WsEvents};
pub use conn::RedisSettings;
pub use lease::{Leases, Pin, rendezvous};
pub use publish::{Origin, Publication, Publisher, Settle, StoredEvent, coalesce};
pub use reliable::{AlsoRecord, Moved, ReliableQueue};
/// The one backoff type (re-exported so the queue's users need no extra dependency).
pub use turnstone_backoff::Backoff;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("invalid redis settings: {0}")]
    Settings(String),
}

impl QueueError {
    /// Worth retrying after a pause (connection trouble), as opposed to a bad request.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Redis(e) => {
                e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()
                    || e.is_cluster_error()
                    || e.is_unrecoverable_error()
                    || matches!(e.retry_method(), redis::RetryMethod::WaitAndRetry)
            }
            Self::Settings(_) => false,
        }
    }
}
