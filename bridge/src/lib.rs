//! `turnstone-bridge`: moves messages between Redis and one Turnstone node.
//!
//! The bridge is stateless: everything it must not lose lives in Redis (inbound queues, its
//! processing lists, its event cursor) or on the node (workstreams, pending approvals). Kill it
//! at any instant and a restarted bridge carries on:
//!
//! * **inbound** ([`inbound`]): each message moves atomically into a processing list and
//!   leaves it only after the node accepted it (or it was dead-lettered); every message gets a
//!   `correlation_id` before the node sees it, and the node deduplicates by it, so a
//!   redelivery never runs a second turn;
//! * **events** ([`events`]): one node-wide ordered stream, resumed from a cursor in Redis;
//!   each event is appended to the workstream's Redis Stream under an id derived from its
//!   position and published on pub/sub only when that append was new — nothing twice;
//! * **approvals** ([`approvals`]): relayed, never copied — a reply leaves its response list
//!   only into the bridge's held hash (one script), and leaves that once the node took it; the
//!   node decides once;
//! * **liveness** ([`liveness`]): the heartbeat says the *node* is alive (it is withdrawn
//!   when the node stops answering), ownership keys are leases, and the queues of dead nodes
//!   are handed back to the shared queue.
//!
//! It must not know the engine: it talks to its node over HTTP only.

pub mod approvals;
mod awaiting;
pub mod config;
pub mod events;
pub mod inbound;
pub mod liveness;
pub mod metrics;
pub mod node;
mod outbox;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio_util::sync::CancellationToken;
use turnstone_proto::api::Health;
use turnstone_proto::keys::Keys;
use turnstone_queue::{Backoff, Leases};

pub use config::{Args, BridgeConfig, NodeAuth};
pub use node::{NodeClient, Reply};

/// What every task of the bridge shares: its settings and connections (read-only), and
/// the state of each concern, each owned by its module and changed only through that
/// module's methods:
///
/// * [`liveness::NodeLink`]: is the node answering, and since which epoch;
/// * [`inbound::Inbound`]: the queues this bridge takes from, what it holds, draining;
/// * [`events::Events`]: the event publisher and the derived per-workstream facts;
/// * [`approvals::Approvals`]: the response lists the relay waits on.
pub struct Ctx {
    pub(crate) cfg: BridgeConfig,
    pub(crate) keys: Keys,
    pub(crate) node_id: String,
    pub(crate) node: NodeClient,
    /// Non-blocking Redis traffic (auto-reconnecting).
    pub(crate) redis: ConnectionManager,
    /// Opens the dedicated connections of blocking pops.
    pub(crate) client: redis::Client,
    pub(crate) leases: Leases,
    pub(crate) metrics: metrics::Metrics,
    pub(crate) link: liveness::NodeLink,
    pub(crate) inbound: inbound::Inbound,
    pub(crate) events: events::Events,
    pub(crate) approvals: approvals::Approvals,
    /// Stops every task.
    pub(crate) cancel: CancellationToken,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("node_id", &self.node_id)
            .finish()
    }
}

/// A running bridge.
#[derive(Debug)]
pub struct Bridge {
    ctx: Arc<Ctx>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Why the bridge could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Redis(#[from] turnstone_queue::QueueError),
    #[error("the node refused the bridge: {0}")]
    NodeRefused(String),
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    #[error("cancelled before start-up finished")]
    Cancelled,
}

impl Bridge {
    /// Connects to Redis, learns the node id (from `/health` when not configured), and starts
    /// every task. Returns once running; [`Bridge::join`] waits for the end.
    pub async fn start(cfg: BridgeConfig, cancel: CancellationToken) -> Result<Self, StartError> {
        let client = cfg.redis.client()?;
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        let redis = loop {
            match turnstone_queue::conn::manager(&client).await {
                Ok(m) => break m,
                Err(e) => {
                    tracing::warn!(redis = %cfg.redis.display(), error = %e, "redis not reachable yet");
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(StartError::Cancelled),
                        _ = tokio::time::sleep(backoff.delay()) => {}
                    }
                }
            }
        };
        let node = NodeClient::new(&cfg.server_url, &cfg.auth, cfg.allow_producer_auto_approve)?;
        let (node_id, max_ws) = resolve_identity(&cfg, &node, &cancel).await?;
        let keys = Keys::new(cfg.prefix.clone());
        let ctx = Arc::new(Ctx {
            link: liveness::NodeLink::new(max_ws),
            inbound: inbound::Inbound::new(&keys, &node_id, cfg.concurrency, cancel.child_token()),
            events: events::Events::new(cfg.stream_maxlen, cfg.stream_ttl),
            approvals: approvals::Approvals::new(redis.clone(), keys.bridge_wake(&node_id)),
            leases: Leases::new(keys.clone()),
            keys,
            node_id,
            node,
            redis,
            client,
            metrics: metrics::Metrics::default(),
            cancel: cancel.clone(),
            cfg,
        });
        tracing::info!(node_id = %ctx.node_id, server_url = %ctx.cfg.server_url, redis = %ctx.cfg.redis.display(), "bridge starting");
        if ctx.cfg.allow_producer_auto_approve {
            tracing::warn!(
                "producers' auto_approve is relayed to the node (--allow-producer-auto-approve): anyone who can push to the queue can switch approvals off"
            );
        } else {
            tracing::info!(
                "producers' auto_approve is refused (dead letter + error event); --allow-producer-auto-approve relays it"
            );
        }
        let mut tasks = vec![
            tokio::spawn(liveness::run(ctx.clone())),
            tokio::spawn(events::run(ctx.clone())),
            tokio::spawn(approvals::run(ctx.clone())),
        ];
        tasks.extend(inbound::spawn(ctx.clone()));
        if let Some(addr) = ctx.cfg.metrics_addr {
            tasks.push(tokio::spawn(metrics::serve(ctx.clone(), addr)));
        }
        Ok(Self { ctx, tasks })
    }

    /// Waits until every task has ended (after the cancellation token fired).
    pub async fn join(self) {
        for t in self.tasks {
            let _ = t.await;
        }
    }

    /// Drains the bridge (SIGTERM): `/ready` turns 503 and nothing more is taken from Redis;
    /// messages in flight get up to `timeout` to be handled; then every task stops, whatever
    /// is still held goes back to the front of the queue it came from (nothing stays only
    /// with this bridge) and the heartbeat is removed.
    pub async fn drain(self, timeout: Duration) -> DrainReport {
        let ctx = self.ctx.clone();
        ctx.inbound.start_draining();
        let finished = ctx.inbound.wait_idle(timeout).await;
        if !finished {
            tracing::warn!("drain timeout reached with messages in flight; handing them back");
        }
        ctx.cancel.cancel();
        self.join().await;
        let mut conn = ctx.redis.clone();
        let handed_back = ctx.inbound.hand_back(&mut conn).await;
        if let Err(e) = ctx.leases.withdraw(&mut conn, &ctx.node_id).await {
            tracing::warn!(error = %e, "heartbeat not removed (it expires by its TTL)");
        }
        tracing::info!(finished, handed_back, "bridge drained");
        DrainReport {
            finished,
            handed_back,
        }
    }
}

/// What a bridge drain did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Every message in flight was handled before the timeout.
    pub finished: bool,
    /// Held messages given back to their queue.
    pub handed_back: u64,
}

/// The node id and `max_ws`: from the configuration, else from `/health` (retried with
/// backoff 1, 2, 4 … 60 s forever; a 4xx ends start-up, as the original).
async fn resolve_identity(
    cfg: &BridgeConfig,
    node: &NodeClient,
    cancel: &CancellationToken,
) -> Result<(String, u64), StartError> {
    let mut backoff =
        turnstone_queue::Backoff::new(Duration::from_secs(1), Duration::from_secs(60))
            .without_jitter();
    loop {
        match node.health(Duration::from_secs(5)).await {
            Reply::Accepted(body) => {
                let h: Health = node::decode_reply("health", &body).unwrap_or_default();
                let id = if cfg.node_id.is_empty() {
                    h.node_id
                } else {
                    cfg.node_id.clone()
                };
                let max_ws = h.max_ws;
                if !id.is_empty() {
                    return Ok((id, max_ws));
                }
                tracing::warn!("the node's /health has no node_id; retrying");
            }
            Reply::Rejected { status, error, .. } => {
                return Err(StartError::NodeRefused(format!(
                    "/health answered {status}: {error}"
                )));
            }
            Reply::Unavailable(e) => {
                if !cfg.node_id.is_empty() {
                    // Configured id: start anyway; liveness waits for the node.
                    return Ok((cfg.node_id.clone(), 10));
                }
                tracing::warn!(error = %e, "waiting for the node to answer /health");
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return Err(StartError::Cancelled),
            _ = tokio::time::sleep(backoff.delay()) => {}
        }
    }
}
