//! The fetchers: reliable pops from the directed and the shared queue into this bridge's
//! processing lists, re-drives of those lists (after a start, an outage or a Redis error),
//! and the dispatch of each message to the worker of its workstream.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use turnstone_queue::Backoff;

use super::Source;
use crate::Ctx;

pub(super) struct Job {
    pub(super) raw: String,
    /// `raw` parsed once, when it is a JSON object (the dispatcher needs its `ws_id`).
    pub(super) parsed: Option<Value>,
    pub(super) source: Source,
    pub(super) epoch: u64,
    /// Held until the message is handled: the semaphore bounds the jobs queued in the
    /// (unbounded) shard channels to `--concurrency`.
    _permit: OwnedSemaphorePermit,
}

pub(super) struct Dispatcher {
    shards: Vec<mpsc::UnboundedSender<Job>>,
    next: AtomicUsize,
}

impl Dispatcher {
    pub(super) fn new(shards: Vec<mpsc::UnboundedSender<Job>>) -> Self {
        Self {
            shards,
            next: AtomicUsize::new(0),
        }
    }

    fn dispatch(&self, raw: String, source: Source, epoch: u64, permit: OwnedSemaphorePermit) {
        let parsed = serde_json::from_str::<Value>(&raw)
            .ok()
            .filter(Value::is_object);
        let key = parsed
            .as_ref()
            .and_then(|v| v.get("ws_id").and_then(Value::as_str))
            .filter(|w| !w.is_empty());
        let shard = match key {
            Some(ws) => {
                let mut h = DefaultHasher::new();
                ws.hash(&mut h);
                (h.finish() % self.shards.len() as u64) as usize
            }
            None => self.next.fetch_add(1, Ordering::Relaxed) % self.shards.len(),
        };
        let job = Job {
            raw,
            parsed,
            source,
            epoch,
            _permit: permit,
        };
        // A closed shard means shutdown; the message stays in its processing list.
        let _ = self.shards[shard].send(job);
    }
}

pub(super) async fn fetch(ctx: Arc<Ctx>, dispatcher: Arc<Dispatcher>, source: Source) {
    let inbound = &ctx.inbound;
    let q = inbound.queue(source).clone();
    let mut conn: Option<MultiplexedConnection> = None;
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
    let mut redriven_epoch = None;
    let mut redrive_gen = inbound.redrive_seen.load(Ordering::Acquire);
    let mut up = ctx.link.subscribe();
    loop {
        // Only while the node answers.
        tokio::select! {
            _ = inbound.draining.cancelled() => return,
            r = up.wait_for(|u| *u) => if r.is_err() { return },
        }
        let epoch = ctx.link.epoch();
        if inbound.redrive.swap(false, Ordering::AcqRel) {
            // Both fetchers must see the request; each re-drives its own list once.
            inbound.redrive_seen.fetch_add(1, Ordering::AcqRel);
        }
        if redrive_gen != inbound.redrive_seen.load(Ordering::Acquire) {
            redrive_gen = inbound.redrive_seen.load(Ordering::Acquire);
            redriven_epoch = None;
            // Give Redis a moment: the work was abandoned because it was failing.
            tokio::select! {
                _ = inbound.draining.cancelled() => return,
                _ = tokio::time::sleep(backoff.delay()) => {}
            }
        }
        if redriven_epoch != Some(epoch) {
            // Whatever this bridge held when it (or its node) stopped.
            let mut m = ctx.redis.clone();
            match q.pending(&mut m).await {
                Ok(items) => {
                    for raw in items {
                        let Some(permit) = inbound.permit().await else {
                            return;
                        };
                        ctx.metrics.inc(&ctx.metrics.inbound_redriven);
                        dispatcher.dispatch(raw, source, epoch, permit);
                    }
                    redriven_epoch = Some(epoch);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "processing list not readable yet");
                    tokio::time::sleep(backoff.delay()).await;
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else {
            match turnstone_queue::conn::blocking_connection(&ctx.client, ctx.cfg.pop_timeout).await
            {
                Ok(c) => {
                    conn = Some(c);
                    backoff.reset();
                }
                Err(e) => {
                    tracing::warn!(error = %e, queue = %q.queue, "cannot reach redis; retrying");
                    tokio::select! {
                        _ = inbound.draining.cancelled() => return,
                        _ = tokio::time::sleep(backoff.delay()) => {}
                    }
                }
            }
            continue;
        };
        let permit = tokio::select! {
            _ = inbound.draining.cancelled() => return,
            p = inbound.permit() => match p { Some(p) => p, None => return },
        };
        if source == Source::Shared && inbound.directed_hot.load(Ordering::Relaxed) {
            // Directed work first: leave the shared queue alone while ours has a backlog
            // (checked only while the directed fetcher is busy: one round trip saved per
            // message otherwise).
            let mut m = ctx.redis.clone();
            if inbound.directed.len(&mut m).await.unwrap_or(0) > 0 {
                drop(permit);
                tokio::time::sleep(Duration::from_millis(2)).await;
                continue;
            }
        }
        let taken = if source == Source::Directed {
            // Non-blocking first: an empty queue clears the "hot" flag before we block.
            match q.try_take(c).await {
                Ok(Some(raw)) => Ok(Some(raw)),
                Ok(None) => {
                    inbound.directed_hot.store(false, Ordering::Relaxed);
                    tokio::select! {
                        _ = inbound.draining.cancelled() => return,
                        r = q.take(c, ctx.cfg.pop_timeout) => r,
                    }
                }
                Err(e) => Err(e),
            }
        } else {
            tokio::select! {
                _ = inbound.draining.cancelled() => return,
                r = q.take(c, ctx.cfg.pop_timeout) => r,
            }
        };
        if source == Source::Directed && matches!(taken, Ok(Some(_))) {
            inbound.directed_hot.store(true, Ordering::Relaxed);
        }
        match taken {
            Ok(Some(raw)) => {
                ctx.metrics.inc(&ctx.metrics.inbound_received);
                dispatcher.dispatch(raw, source, epoch, permit);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, queue = %q.queue, "blocking pop failed; reconnecting");
                conn = None;
                // The pop may have moved a message whose reply was lost with the connection
                // (Redis restarted right after executing it): re-drive the processing list
                // once Redis answers again, or that message would sit there unseen.
                redriven_epoch = None;
                tokio::select! {
                    _ = inbound.draining.cancelled() => return,
                    _ = tokio::time::sleep(backoff.delay()) => {}
                }
            }
        }
    }
}
