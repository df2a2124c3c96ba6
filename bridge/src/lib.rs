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
//! * **approvals** ([`approvals`]): relayed, never copied — one blocking connection waits on
//!   every pending response list; the node decides once;
//! * **liveness** ([`liveness`]): the heartbeat says the *node* is alive (it is withdrawn
//!   when the node stops answering), ownership keys are leases, and the queues of dead nodes
//!   are handed back to the shared queue.
//!
//! It must not know the engine: it talks to its node over HTTP only.

pub mod approvals;
pub mod config;
pub mod events;
pub mod inbound;
pub mod liveness;
pub mod metrics;
pub mod node;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use redis::aio::ConnectionManager;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use turnstone_proto::keys::Keys;
use turnstone_proto::mq::OutboundEvent;
use turnstone_queue::{Backoff, Leases, Publisher, ReliableQueue};

pub use config::{Args, BridgeConfig, NodeAuth};
pub use node::{NodeClient, Reply};

/// Shared by the bridge's tasks.
pub struct Ctx {
    pub cfg: BridgeConfig,
    pub keys: Keys,
    pub node_id: String,
    pub node: NodeClient,
    pub redis: ConnectionManager,
    pub client: redis::Client,
    pub leases: Leases,
    pub publisher: Publisher,
    pub metrics: metrics::Metrics,
    /// Is the node answering? Inbound work runs only while it is.
    pub up: watch::Sender<bool>,
    /// Changes on every up/down transition; work fetched in another epoch is abandoned
    /// (left in the processing list) instead of being handed to the node.
    pub epoch: AtomicU64,
    /// Set when work was abandoned while the node was up (a Redis error mid-message): the
    /// fetchers then re-drive their processing lists, so that work is retried, not stranded
    /// until the next node outage.
    pub redrive: std::sync::atomic::AtomicBool,
    /// Re-drive requests taken so far (each fetcher compares it with the last it served).
    pub redrive_seen: AtomicU64,
    pub max_ws: AtomicU64,
    /// Bridge start, Unix seconds (the heartbeat's `started`).
    pub started: f64,
    /// Bounds the messages in flight; all permits back = nothing in flight.
    pub permits: Arc<Semaphore>,
    /// Derived per-workstream facts for `cluster_state` (tokens, context ratio, activity),
    /// rebuilt from the event stream; not state of record.
    pub ws_facts: Mutex<HashMap<String, WsFacts>>,
    /// Pending approvals this bridge waits on: request_id → ws_id (a cache of the node's
    /// pending set, rebuilt from `/v1/api/approvals` on start).
    pub waits: Mutex<HashMap<String, String>>,
    pub directed: ReliableQueue,
    pub shared: ReliableQueue,
    /// Set while the directed fetcher keeps finding messages (cleared when it finds the
    /// queue empty): the shared fetcher then checks for a directed backlog before taking.
    pub directed_hot: std::sync::atomic::AtomicBool,
    /// Fired when the bridge drains (SIGTERM): the fetchers stop taking from Redis, what is
    /// in flight goes on. A child of `cancel` (a hard stop drains too).
    pub draining: CancellationToken,
    /// Stops every task.
    pub cancel: CancellationToken,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("node_id", &self.node_id)
            .finish()
    }
}

#[derive(Debug, Clone, Default)]
pub struct WsFacts {
    pub tokens: u64,
    pub context_ratio: f64,
    pub activity: String,
    pub activity_state: String,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

impl Ctx {
    pub fn is_up(&self) -> bool {
        *self.up.borrow()
    }

    pub fn current_epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The heartbeat JSON of the original: `{server_url, started, max_ws}`.
    /// The heartbeat JSON, signed (`signed_at`, `sig`) when the bridge has the cluster's JWT
    /// secret, so the console trusts its `server_url`.
    pub fn heartbeat_value(&self) -> Value {
        let mut value = json!({
            "server_url": self.cfg.server_url,
            "started": self.started,
            "max_ws": self.max_ws.load(Ordering::Relaxed),
        });
        if let Some(secret) = &self.cfg.heartbeat_secret {
            let signed_at =
                turnstone_runtime::auth::jwt::unix_seconds(std::time::SystemTime::now());
            value["signed_at"] = json!(signed_at);
            value["sig"] = json!(turnstone_runtime::auth::heartbeat::sign(
                secret,
                &self.node_id,
                &self.cfg.server_url,
                signed_at,
            ));
        }
        value
    }

    /// Publishes one event on pub/sub (best effort, as the original protocol); failures are
    /// logged and counted.
    pub async fn publish(&self, channel: &str, event: &OutboundEvent) {
        let mut conn = self.redis.clone();
        let payload = event.encode();
        let r: Result<i64, _> = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(&payload)
            .query_async(&mut conn)
            .await;
        if let Err(e) = r {
            self.metrics.inc(&self.metrics.publish_errors);
            tracing::warn!(channel, error = %e, "publish failed");
        }
    }

    /// Appends a dead letter: the reason, the original payload, who and when. Retries until
    /// Redis takes it (a dead letter must not be lost either). The list keeps the newest
    /// `--dead-letter-max` entries; what is trimmed is counted.
    pub async fn dead_letter(&self, reason: &str, payload: &str, correlation_id: &str) {
        let entry = json!({
            "reason": reason,
            "payload": payload,
            "correlation_id": correlation_id,
            "node_id": self.node_id,
            "at": now_secs(),
        })
        .to_string();
        let mut backoff = Backoff::default();
        loop {
            let mut conn = self.redis.clone();
            // Appended and trimmed to the newest `dead_letter_max` in one transaction.
            let key = self.keys.dead_letter();
            let max = isize::try_from(self.cfg.dead_letter_max).unwrap_or(isize::MAX);
            let r: Result<(isize,), _> = redis::pipe()
                .atomic()
                .rpush(&key, &entry)
                .ltrim(&key, -max, -1)
                .ignore()
                .query_async(&mut conn)
                .await;
            match r {
                Ok((len,)) => {
                    let trimmed = u64::try_from(len.saturating_sub(max)).unwrap_or(0);
                    if trimmed > 0 {
                        self.metrics
                            .dead_letters_trimmed
                            .fetch_add(trimmed, std::sync::atomic::Ordering::Relaxed);
                    }
                    break;
                }
                Err(e) if !self.cancel.is_cancelled() => {
                    tracing::warn!(error = %e, "dead letter not written yet; retrying");
                    tokio::time::sleep(backoff.delay()).await;
                }
                Err(_) => break,
            }
        }
        self.metrics.inc(&self.metrics.dead_letters);
        tracing::warn!(reason, correlation_id, "message dead-lettered");
    }
}

/// A running bridge.
#[derive(Debug)]
pub struct Bridge {
    pub ctx: Arc<Ctx>,
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
        let directed_q = keys.inbound_node(&node_id);
        let shared_q = keys.inbound();
        let directed =
            ReliableQueue::new(directed_q.clone(), keys.processing(&directed_q, &node_id));
        let shared = ReliableQueue::new(shared_q.clone(), keys.processing(&shared_q, &node_id));
        let (up, _) = watch::channel(false);
        let ctx = Arc::new(Ctx {
            publisher: Publisher::new(cfg.stream_maxlen, cfg.stream_ttl.as_secs()),
            leases: Leases::new(keys.clone()),
            keys,
            node_id,
            node,
            redis,
            client,
            metrics: metrics::Metrics::default(),
            up,
            epoch: AtomicU64::new(0),
            redrive: std::sync::atomic::AtomicBool::new(false),
            redrive_seen: AtomicU64::new(0),
            max_ws: AtomicU64::new(max_ws),
            started: now_secs(),
            permits: Arc::new(Semaphore::new(cfg.concurrency)),
            ws_facts: Mutex::default(),
            waits: Mutex::default(),
            directed,
            shared,
            directed_hot: std::sync::atomic::AtomicBool::new(false),
            draining: cancel.child_token(),
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
        ctx.draining.cancel();
        let all = u32::try_from(ctx.cfg.concurrency).unwrap_or(u32::MAX);
        let finished = tokio::time::timeout(timeout, ctx.permits.acquire_many(all))
            .await
            .is_ok();
        if !finished {
            tracing::warn!("drain timeout reached with messages in flight; handing them back");
        }
        ctx.cancel.cancel();
        self.join().await;
        let mut handed_back = 0;
        let mut conn = ctx.redis.clone();
        for q in [&ctx.directed, &ctx.shared] {
            match q.hand_back(&mut conn).await {
                Ok(n) => handed_back += n,
                Err(e) => {
                    tracing::warn!(queue = %q.queue, error = %e, "held messages not handed back (a restarted bridge or another bridge's janitor re-drives them)");
                }
            }
        }
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
    let mut delay = Duration::from_secs(1);
    loop {
        match node.health(Duration::from_secs(5)).await {
            Reply::Accepted(h) => {
                let max_ws = h.get("max_ws").and_then(Value::as_u64).unwrap_or(10);
                let id = if cfg.node_id.is_empty() {
                    h.get("node_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                } else {
                    cfg.node_id.clone()
                };
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
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(60));
    }
}
