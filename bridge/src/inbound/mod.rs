//! Inbound: from the Redis queues to the node, at least once, never twice.
//!
//! Two fetchers (directed queue `{p}:inbound:{node}`, then the shared `{p}:inbound`) move
//! messages atomically into this bridge's processing lists and hand them to workers, sharded
//! by workstream so one workstream's messages keep their order. A message leaves its
//! processing list only when it is handled: accepted by the node, forwarded to another node's
//! queue, answered with an error the node gave, or dead-lettered. If the node stops answering,
//! work is abandoned (left in the list) and re-driven when it answers again — or handed to
//! the shared queue by another bridge's janitor if it does not.
//!
//! Every message gets a `correlation_id` before the node sees it (one is written into the
//! held copy when the producer sent none), and the node applies a `send` or create once per
//! `correlation_id`, so redelivery after any crash is harmless.
//!
//! * `fetch`: the fetchers — reliable pops, re-drives of the processing lists, dispatch
//!   to the workers;
//! * `handle`: a worker's handling of one message — decoding, the correlation id, the
//!   answers the bridge gives itself, the acknowledgement;
//! * `route`: where a message goes — this node, a live owner's queue, or a re-homing;
//! * `deliver`: the node calls for a message that is ours (typed `proto::api` bodies,
//!   retried while the node is unavailable, `busy` retries);
//! * `answer`: what the producer is told (acks, errors, dead letters).

mod answer;
mod deliver;
mod fetch;
mod handle;
mod route;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use turnstone_proto::keys::Keys;
use turnstone_queue::ReliableQueue;

use crate::Ctx;

/// Which list a message was taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Directed,
    Shared,
}

/// The inbound side's state, owned by this module: the two queues and what this bridge
/// holds of them, the bound on messages in flight, and the coordination of the fetchers.
pub struct Inbound {
    directed: ReliableQueue,
    shared: ReliableQueue,
    /// Bounds the messages in flight; all permits back = nothing in flight.
    permits: Arc<Semaphore>,
    capacity: usize,
    /// Set when work was abandoned while the node was up (a Redis error mid-message): the
    /// fetchers then re-drive their processing lists, so that work is retried, not stranded
    /// until the next node outage.
    redrive: AtomicBool,
    /// Re-drive requests taken so far (each fetcher compares it with the last it served).
    redrive_seen: AtomicU64,
    /// Set while the directed fetcher keeps finding messages (cleared when it finds the
    /// queue empty): the shared fetcher then checks for a directed backlog before taking.
    directed_hot: AtomicBool,
    /// Fired when the bridge drains (SIGTERM): the fetchers stop taking from Redis, what is
    /// in flight goes on. A child of the bridge's cancellation (a hard stop drains too).
    draining: CancellationToken,
}

impl Inbound {
    pub(crate) fn new(
        keys: &Keys,
        node_id: &str,
        concurrency: usize,
        draining: CancellationToken,
    ) -> Self {
        let directed_q = keys.inbound_node(node_id);
        let shared_q = keys.inbound();
        Self {
            directed: ReliableQueue::new(directed_q.clone(), keys.processing(&directed_q, node_id)),
            shared: ReliableQueue::new(shared_q.clone(), keys.processing(&shared_q, node_id)),
            permits: Arc::new(Semaphore::new(concurrency)),
            capacity: concurrency,
            redrive: AtomicBool::new(false),
            redrive_seen: AtomicU64::new(0),
            directed_hot: AtomicBool::new(false),
            draining,
        }
    }

    /// Messages being handled.
    pub fn in_flight(&self) -> usize {
        self.capacity - self.permits.available_permits().min(self.capacity)
    }

    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Stops taking from Redis; what is in flight goes on.
    pub(crate) fn start_draining(&self) {
        self.draining.cancel();
    }

    /// Waits up to `timeout` until nothing is in flight; `false` when time ran out.
    pub(crate) async fn wait_idle(&self, timeout: Duration) -> bool {
        let all = u32::try_from(self.capacity).unwrap_or(u32::MAX);
        tokio::time::timeout(timeout, self.permits.acquire_many(all))
            .await
            .is_ok()
    }

    /// Lets what is in flight end (polled; at most `within`), without holding back new
    /// work meanwhile.
    pub(crate) async fn settle(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while self.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Gives whatever this bridge still holds back to the front of the queue it came from
    /// (nothing stays only with this bridge); how many messages went back.
    pub(crate) async fn hand_back(&self, conn: &mut ConnectionManager) -> u64 {
        let mut handed_back = 0;
        for q in [&self.directed, &self.shared] {
            match q.hand_back(conn).await {
                Ok(n) => handed_back += n,
                Err(e) => {
                    tracing::warn!(queue = %q.queue, error = %e, "held messages not handed back (a restarted bridge or another bridge's janitor re-drives them)");
                }
            }
        }
        handed_back
    }

    fn queue(&self, source: Source) -> &ReliableQueue {
        match source {
            Source::Directed => &self.directed,
            Source::Shared => &self.shared,
        }
    }

    /// One message more in flight (waits while `--concurrency` are).
    async fn permit(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.clone().acquire_owned().await.ok()
    }

    /// A worker abandoned work while the node was up: ask the fetchers to re-drive.
    fn request_redrive(&self) {
        self.redrive.store(true, Ordering::Release);
    }
}

/// Starts the fetchers and the workers.
pub fn spawn(ctx: Arc<Ctx>) -> Vec<tokio::task::JoinHandle<()>> {
    let n = ctx.cfg.concurrency.clamp(1, 64);
    let mut tasks = Vec::new();
    let mut shards = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, rx) = mpsc::unbounded_channel();
        shards.push(tx);
        tasks.push(tokio::spawn(handle::worker(ctx.clone(), rx)));
    }
    let dispatcher = Arc::new(fetch::Dispatcher::new(shards));
    tasks.push(tokio::spawn(fetch::fetch(
        ctx.clone(),
        dispatcher.clone(),
        Source::Directed,
    )));
    tasks.push(tokio::spawn(fetch::fetch(ctx, dispatcher, Source::Shared)));
    tasks
}
