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

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use turnstone_proto::ProtoError;
use turnstone_proto::mq::{
    AckEvent, ErrorEvent, HealthResponseEvent, InboundMessage, InfoEvent, NodeListEvent,
    OutboundEvent, WsCreatedEvent, WsListEvent, WsResumedEvent,
};
use turnstone_queue::{Backoff, ReliableQueue, rendezvous};

use crate::{Ctx, Reply};

/// Which list a message was taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Directed,
    Shared,
}

struct Job {
    raw: String,
    /// `raw` parsed once, when it is a JSON object (the dispatcher needs its `ws_id`).
    parsed: Option<Value>,
    source: Source,
    epoch: u64,
    /// Held until the message is handled: the semaphore bounds the jobs queued in the
    /// (unbounded) shard channels to `--concurrency`.
    _permit: OwnedSemaphorePermit,
}

struct Dispatcher {
    shards: Vec<mpsc::UnboundedSender<Job>>,
    next: AtomicUsize,
}

impl Dispatcher {
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

/// Starts the fetchers and the workers.
pub fn spawn(ctx: Arc<Ctx>) -> Vec<tokio::task::JoinHandle<()>> {
    let n = ctx.cfg.concurrency.clamp(1, 64);
    let mut tasks = Vec::new();
    let mut shards = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, rx) = mpsc::unbounded_channel();
        shards.push(tx);
        tasks.push(tokio::spawn(worker(ctx.clone(), rx)));
    }
    let dispatcher = Arc::new(Dispatcher {
        shards,
        next: AtomicUsize::new(0),
    });
    tasks.push(tokio::spawn(fetch(
        ctx.clone(),
        dispatcher.clone(),
        Source::Directed,
    )));
    tasks.push(tokio::spawn(fetch(ctx, dispatcher, Source::Shared)));
    tasks
}

fn queue(ctx: &Ctx, source: Source) -> &ReliableQueue {
    match source {
        Source::Directed => &ctx.directed,
        Source::Shared => &ctx.shared,
    }
}

async fn fetch(ctx: Arc<Ctx>, dispatcher: Arc<Dispatcher>, source: Source) {
    let q = queue(&ctx, source).clone();
    let mut conn: Option<MultiplexedConnection> = None;
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
    let mut redriven_epoch = None;
    let mut redrive_gen = ctx.redrive_seen.load(Ordering::Acquire);
    let mut up = ctx.up.subscribe();
    loop {
        // Only while the node answers.
        tokio::select! {
            _ = ctx.draining.cancelled() => return,
            r = up.wait_for(|u| *u) => if r.is_err() { return },
        }
        let epoch = ctx.current_epoch();
        if ctx.redrive.swap(false, Ordering::AcqRel) {
            // Both fetchers must see the request; each re-drives its own list once.
            ctx.redrive_seen.fetch_add(1, Ordering::AcqRel);
        }
        if redrive_gen != ctx.redrive_seen.load(Ordering::Acquire) {
            redrive_gen = ctx.redrive_seen.load(Ordering::Acquire);
            redriven_epoch = None;
            // Give Redis a moment: the work was abandoned because it was failing.
            tokio::select! {
                _ = ctx.draining.cancelled() => return,
                _ = tokio::time::sleep(backoff.delay()) => {}
            }
        }
        if redriven_epoch != Some(epoch) {
            // Whatever this bridge held when it (or its node) stopped.
            let mut m = ctx.redis.clone();
            match q.pending(&mut m).await {
                Ok(items) => {
                    for raw in items {
                        let Ok(permit) = ctx.permits.clone().acquire_owned().await else {
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
                        _ = ctx.draining.cancelled() => return,
                        _ = tokio::time::sleep(backoff.delay()) => {}
                    }
                }
            }
            continue;
        };
        let permit = tokio::select! {
            _ = ctx.draining.cancelled() => return,
            p = ctx.permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
        };
        if source == Source::Shared && ctx.directed_hot.load(Ordering::Relaxed) {
            // Directed work first: leave the shared queue alone while ours has a backlog
            // (checked only while the directed fetcher is busy: one round trip saved per
            // message otherwise).
            let mut m = ctx.redis.clone();
            if ctx.directed.len(&mut m).await.unwrap_or(0) > 0 {
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
                    ctx.directed_hot.store(false, Ordering::Relaxed);
                    tokio::select! {
                        _ = ctx.draining.cancelled() => return,
                        r = q.take(c, ctx.cfg.pop_timeout) => r,
                    }
                }
                Err(e) => Err(e),
            }
        } else {
            tokio::select! {
                _ = ctx.draining.cancelled() => return,
                r = q.take(c, ctx.cfg.pop_timeout) => r,
            }
        };
        if source == Source::Directed && matches!(taken, Ok(Some(_))) {
            ctx.directed_hot.store(true, Ordering::Relaxed);
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
                    _ = ctx.draining.cancelled() => return,
                    _ = tokio::time::sleep(backoff.delay()) => {}
                }
            }
        }
    }
}

async fn worker(ctx: Arc<Ctx>, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(job) = rx.recv().await {
        if ctx.cancel.is_cancelled() {
            return;
        }
        if job.epoch != ctx.current_epoch() || !ctx.is_up() {
            ctx.metrics.inc(&ctx.metrics.inbound_abandoned);
            continue;
        }
        let q = queue(&ctx, job.source).clone();
        let span = tracing::info_span!(
            "inbound",
            node_id = %ctx.node_id,
            queue = %q.queue,
            trace_id = tracing::field::Empty
        );
        // The producer's trace (the message's `traceparent`) continues here and, through
        // the node calls' headers, in the node.
        if let Some(tp) = job
            .parsed
            .as_ref()
            .and_then(|v| v.get(turnstone_runtime::trace_context::TRACEPARENT))
            .and_then(Value::as_str)
        {
            turnstone_runtime::trace_context::set_parent_from_traceparent(&span, tp);
        }
        turnstone_runtime::trace_context::record_trace_id(&span);
        let handled = tracing::Instrument::instrument(
            handle(&ctx, &q, job.source, job.raw, job.parsed, job.epoch),
            span,
        )
        .await;
        match handled {
            Handled::Done(raw) => ack(&ctx, &q, &raw).await,
            Handled::Abandoned => {
                ctx.metrics.inc(&ctx.metrics.inbound_abandoned);
                if job.epoch == ctx.current_epoch() && ctx.is_up() {
                    // Not a node outage (that re-drives by itself when the node is back):
                    // Redis failed mid-message. Ask the fetchers to re-drive.
                    ctx.redrive.store(true, Ordering::Release);
                }
            }
        }
    }
}

async fn ack(ctx: &Ctx, q: &ReliableQueue, raw: &str) {
    let mut backoff = Backoff::default();
    for _ in 0..20 {
        let mut m = ctx.redis.clone();
        match q.ack(&mut m, raw).await {
            Ok(_) => {
                ctx.metrics.inc(&ctx.metrics.inbound_acked);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "ack failed; retrying (a redelivery would be deduplicated)");
                tokio::time::sleep(backoff.delay()).await;
            }
        }
    }
}

/// How handling ended: `Done(raw)` acknowledges `raw` (the held form of the message).
enum Handled {
    Done(String),
    Abandoned,
}

/// The node's answer, retried while the node is unavailable and this bridge's epoch lasts.
async fn call(ctx: &Ctx, epoch: u64, path: &str, body: &Value) -> Option<Reply> {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    loop {
        let reply = ctx.node.post(path, body).await;
        if !reply.is_unavailable() {
            return Some(reply);
        }
        ctx.metrics.inc(&ctx.metrics.node_retries);
        if epoch != ctx.current_epoch() || !ctx.is_up() || ctx.cancel.is_cancelled() {
            return None;
        }
        tokio::time::sleep(backoff.delay()).await;
    }
}

async fn get(ctx: &Ctx, epoch: u64, path: &str) -> Option<Reply> {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    loop {
        let reply = ctx.node.get(path).await;
        if !reply.is_unavailable() {
            return Some(reply);
        }
        if epoch != ctx.current_epoch() || !ctx.is_up() || ctx.cancel.is_cancelled() {
            return None;
        }
        tokio::time::sleep(backoff.delay()).await;
    }
}

async fn handle(
    ctx: &Ctx,
    q: &ReliableQueue,
    source: Source,
    raw: String,
    parsed: Option<Value>,
    epoch: u64,
) -> Handled {
    let mut value: Value = match parsed {
        Some(v) => v,
        // Not an object: parse again only to say precisely what is wrong.
        None => {
            let reason = match serde_json::from_str::<Value>(&raw) {
                Ok(_) => "message is not a JSON object".to_string(),
                Err(e) => format!("invalid JSON: {e}"),
            };
            return reject_malformed(ctx, raw, reason).await;
        }
    };
    let msg = match InboundMessage::from_value(value.clone()) {
        Ok(m) => m,
        Err(ProtoError::UnknownType(t)) => {
            let cid = value
                .get("correlation_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let reason = format!("Unknown inbound message type: '{t}'");
            ctx.dead_letter(&reason, &raw, &cid).await;
            let ev: OutboundEvent = ErrorEvent {
                correlation_id: cid,
                message: format!("Failed to process message: {reason}"),
                ..ErrorEvent::default()
            }
            .into();
            ctx.publish(&ctx.keys.events_global(), &ev).await;
            return Handled::Done(raw);
        }
        Err(e) => return reject_malformed(ctx, raw, format!("invalid message: {e}")).await,
    };
    // Give the held copy a correlation id before anything reaches the node, so a
    // redelivery carries the same one and the node applies it once.
    let mut raw = raw;
    let has_cid = value
        .get("correlation_id")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty());
    if !has_cid {
        value["correlation_id"] = json!(msg.correlation_id());
        let held = value.to_string();
        let mut backoff = Backoff::default();
        loop {
            let mut m = ctx.redis.clone();
            match q.replace(&mut m, &raw, &held).await {
                Ok(()) => break,
                Err(e) if !ctx.cancel.is_cancelled() => {
                    tracing::warn!(error = %e, "cannot record the correlation id yet");
                    tokio::time::sleep(backoff.delay()).await;
                }
                Err(_) => return Handled::Abandoned,
            }
        }
        raw = held;
    }
    let cid = msg.correlation_id().to_string();
    tracing::debug!(correlation_id = %cid, kind = msg.type_name(), "inbound message");
    match &msg {
        InboundMessage::Approve(_) | InboundMessage::PlanFeedback(_) => {
            let request_id = msg.request_id().unwrap_or_default();
            if request_id.is_empty() {
                fail(ctx, &msg, &raw, "approval reply without request_id").await;
            } else {
                let key = ctx.keys.response(request_id);
                let mut m = ctx.redis.clone();
                let r: Result<(), _> = redis::pipe()
                    .cmd("RPUSH")
                    .arg(&key)
                    .arg(&raw)
                    .ignore()
                    .cmd("EXPIRE")
                    .arg(&key)
                    .arg(600)
                    .ignore()
                    .query_async(&mut m)
                    .await;
                if r.is_err() {
                    return Handled::Abandoned;
                }
            }
        }
        InboundMessage::ListWorkstreams(_) => {
            let Some(reply) = get(ctx, epoch, "/v1/api/workstreams").await else {
                return Handled::Abandoned;
            };
            let rows = match reply {
                Reply::Accepted(b) => b
                    .get("workstreams")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let ev: OutboundEvent = WsListEvent {
                correlation_id: cid.clone(),
                workstreams: rows,
                ..WsListEvent::default()
            }
            .into();
            ctx.publish(&ctx.keys.events_global(), &ev).await;
        }
        InboundMessage::Health(_) => {
            let data = match ctx.node.health(Duration::from_secs(5)).await {
                Reply::Accepted(b) => b,
                other => json!({"status": "down", "error": format!("{other:?}")}),
            };
            let ev: OutboundEvent = HealthResponseEvent {
                correlation_id: cid.clone(),
                data,
                ..HealthResponseEvent::default()
            }
            .into();
            ctx.publish(&ctx.keys.events_global(), &ev).await;
        }
        InboundMessage::ListNodes(_) => {
            let mut m = ctx.redis.clone();
            let Ok(nodes) = ctx.leases.live_nodes(&mut m).await else {
                return Handled::Abandoned;
            };
            let nodes = nodes
                .into_iter()
                .map(|(id, mut v)| {
                    if let Some(o) = v.as_object_mut() {
                        o.insert("node_id".into(), json!(id));
                    }
                    v
                })
                .collect();
            let ev: OutboundEvent = NodeListEvent {
                correlation_id: cid.clone(),
                nodes,
                ..NodeListEvent::default()
            }
            .into();
            ctx.publish(&ctx.keys.events_global(), &ev).await;
        }
        _ => {
            if route(ctx, source, &msg, &value, &raw, epoch)
                .await
                .is_none()
            {
                return Handled::Abandoned;
            }
        }
    }
    Handled::Done(raw)
}

async fn reject_malformed(ctx: &Ctx, raw: String, reason: String) -> Handled {
    ctx.dead_letter(&reason, &raw, "").await;
    let ev: OutboundEvent = ErrorEvent {
        message: format!("Failed to process message: {reason}"),
        ..ErrorEvent::default()
    }
    .into();
    ctx.publish(&ctx.keys.events_global(), &ev).await;
    Handled::Done(raw)
}

/// Dead-letters a message and tells its producer: `ack` (status error) and `error` on the
/// workstream's channel, or on the global channel when there is no workstream yet.
async fn fail(ctx: &Ctx, msg: &InboundMessage, raw: &str, reason: &str) {
    let cid = msg.correlation_id().to_string();
    ctx.dead_letter(reason, raw, &cid).await;
    tell_error(ctx, msg, reason).await;
}

async fn tell_error(ctx: &Ctx, msg: &InboundMessage, reason: &str) {
    let ws_id = msg.ws_id().to_string();
    let channel = if ws_id.is_empty() {
        ctx.keys.events_global()
    } else {
        ctx.keys.events_ws(&ws_id)
    };
    let ack: OutboundEvent = AckEvent {
        ws_id: ws_id.clone(),
        correlation_id: msg.correlation_id().to_string(),
        status: "error".into(),
        detail: reason.to_string(),
        ..AckEvent::default()
    }
    .into();
    let err: OutboundEvent = ErrorEvent {
        ws_id,
        correlation_id: msg.correlation_id().to_string(),
        message: reason.to_string(),
        ..ErrorEvent::default()
    }
    .into();
    ctx.publish(&channel, &ack).await;
    ctx.publish(&channel, &err).await;
}

async fn forward(ctx: &Ctx, node: &str, raw: &str) -> Option<()> {
    let mut m = ctx.redis.clone();
    let r: Result<i64, _> = redis::cmd("RPUSH")
        .arg(ctx.keys.inbound_node(node))
        .arg(raw)
        .query_async(&mut m)
        .await;
    match r {
        Ok(_) => {
            ctx.metrics.inc(&ctx.metrics.inbound_forwarded);
            tracing::debug!(to = node, "forwarded");
            Some(())
        }
        Err(e) => {
            tracing::warn!(error = %e, "forward failed; the message stays held");
            None
        }
    }
}

/// Routing of cluster spec §3.4, with liveness: `None` = abandon (retry later).
async fn route(
    ctx: &Ctx,
    source: Source,
    msg: &InboundMessage,
    value: &Value,
    raw: &str,
    epoch: u64,
) -> Option<()> {
    let mut m = ctx.redis.clone();
    let me = ctx.node_id.as_str();
    let target = msg.target_node();
    let ws_id = msg.ws_id();
    if !target.is_empty() && target != me {
        let alive = ctx.leases.is_alive(&mut m, target).await.ok()?;
        if alive {
            return forward(ctx, target, raw).await;
        }
        if ws_id.is_empty() {
            fail(
                ctx,
                msg,
                raw,
                &format!("target node '{target}' is not alive"),
            )
            .await;
            return Some(());
        }
    }
    if !ws_id.is_empty() {
        let owner = ctx.leases.owner(&mut m, ws_id).await.ok()?;
        match owner.as_deref() {
            Some(o) if o == me => {}
            Some(o) => {
                if ctx.leases.is_alive(&mut m, o).await.ok()? {
                    return forward(ctx, o, raw).await;
                }
                if ctx.leases.is_hard_pinned(&mut m, ws_id).await.ok()? {
                    fail(
                        ctx,
                        msg,
                        raw,
                        &format!("workstream {ws_id} is hard-pinned to node '{o}', which is down"),
                    )
                    .await;
                    return Some(());
                }
                match msg {
                    InboundMessage::CloseWorkstream(_) | InboundMessage::Cancel(_) => {
                        // Nothing runs on a dead node: a close drops the lease, a cancel is moot.
                        if matches!(msg, InboundMessage::CloseWorkstream(_)) {
                            let _ = ctx.leases.release(&mut m, ws_id, o).await;
                        }
                        ack_event(ctx, msg, "ok", &format!("node '{o}' is down")).await;
                        return Some(());
                    }
                    _ => {}
                }
                // Soft pin: move it. A message already directed at us is ours to take (no
                // ping-pong); from the shared queue, the rendezvous choice over live nodes.
                let chosen = if source == Source::Directed {
                    me.to_string()
                } else {
                    let live = ctx.leases.live_nodes(&mut m).await.ok()?;
                    let mut names: Vec<&str> = live.keys().map(String::as_str).collect();
                    names.push(me);
                    rendezvous(ws_id, names).unwrap_or(me).to_string()
                };
                if chosen != me {
                    return forward(ctx, &chosen, raw).await;
                }
                if !ctx
                    .leases
                    .claim(&mut m, ws_id, Some(o), me, ctx.cfg.lease_ttl)
                    .await
                    .ok()?
                {
                    // Someone else moved it first: follow the new lease.
                    let now = ctx.leases.owner(&mut m, ws_id).await.ok()?;
                    if let Some(n) = now.filter(|n| n != me) {
                        return forward(ctx, &n, raw).await;
                    }
                }
                restore(ctx, epoch, ws_id, Some(o)).await?;
            }
            None => {}
        }
    }
    local(ctx, msg, value, raw, epoch).await
}

/// Makes `ws_id` live on this node after its owner died: resumed from the store when the
/// node can (shared PostgreSQL), else started empty under the same id, so consumers keep
/// their channel. `None` = node unavailable.
async fn restore(ctx: &Ctx, epoch: u64, ws_id: &str, from: Option<&str>) -> Option<()> {
    let resumed = call(
        ctx,
        epoch,
        "/v1/api/workstreams/new",
        &json!({"resume_ws": ws_id}),
    )
    .await?;
    let how = match resumed {
        Reply::Accepted(b) if b.get("ws_id").and_then(Value::as_str) == Some(ws_id) => {
            "with its history"
        }
        _ => match call(
            ctx,
            epoch,
            "/v1/api/workstreams/new",
            &json!({"ws_id": ws_id}),
        )
        .await?
        {
            Reply::Accepted(_) => "without its history (not in this node's store)",
            Reply::Rejected { status: 409, .. } => "(already here)",
            Reply::Rejected { error, .. } => {
                tracing::warn!(ws_id, error, "workstream could not be restored here");
                "(restore failed)"
            }
            Reply::Unavailable(_) => return None,
        },
    };
    let mut m = ctx.redis.clone();
    let _ = ctx
        .leases
        .own(&mut m, ws_id, &ctx.node_id, ctx.cfg.lease_ttl)
        .await;
    ctx.metrics.inc(&ctx.metrics.rehomed);
    let note = match from {
        Some(o) => format!(
            "Workstream moved to node '{}' {how}: node '{o}' is down.",
            ctx.node_id
        ),
        None => format!("Workstream restored on node '{}' {how}.", ctx.node_id),
    };
    tracing::warn!(ws_id, "{note}");
    let ev: OutboundEvent = InfoEvent {
        ws_id: ws_id.to_string(),
        message: note,
        ..InfoEvent::default()
    }
    .into();
    ctx.publish(&ctx.keys.events_ws(ws_id), &ev).await;
    Some(())
}

async fn ack_event(ctx: &Ctx, msg: &InboundMessage, status: &str, detail: &str) {
    let ws_id = msg.ws_id().to_string();
    let ev: OutboundEvent = AckEvent {
        ws_id: ws_id.clone(),
        correlation_id: msg.correlation_id().to_string(),
        status: status.to_string(),
        detail: detail.to_string(),
        ..AckEvent::default()
    }
    .into();
    ctx.publish(&ctx.keys.events_ws(&ws_id), &ev).await;
}

/// A reply's ack: `ok` for `{"status":"ok"}`, `queued` (detail: the position) for a send
/// that waits in its workstream's queue, else `error` with a detail saying why.
async fn ack_reply(ctx: &Ctx, msg: &InboundMessage, reply: &Reply, raw: &str) {
    match reply {
        Reply::Accepted(b) => {
            let status = b.get("status").and_then(Value::as_str).unwrap_or("ok");
            match status {
                "ok" => ack_event(ctx, msg, "ok", "").await,
                "queued" => {
                    let position = b.get("position").and_then(Value::as_u64).unwrap_or(0);
                    ack_event(
                        ctx,
                        msg,
                        "queued",
                        &format!("queued at position {position}"),
                    )
                    .await;
                }
                other => ack_event(ctx, msg, "error", &refusal_detail(other, b)).await,
            }
        }
        Reply::Rejected { error, .. } => {
            ctx.dead_letter(&format!("node refused: {error}"), raw, msg.correlation_id())
                .await;
            ack_event(ctx, msg, "error", error).await;
        }
        Reply::Unavailable(_) => {}
    }
}

/// Why a message that would switch approvals off is refused: a producer's `auto_approve` /
/// `auto_approve_tools` is relayed only with `--allow-producer-auto-approve`.
fn auto_approve_refusal(cfg: &crate::BridgeConfig, msg: &InboundMessage) -> Option<String> {
    let asks = match msg {
        InboundMessage::Send(s) => s.auto_approve || !s.auto_approve_tools.is_empty(),
        InboundMessage::CreateWorkstream(c) => c.auto_approve || !c.auto_approve_tools.is_empty(),
        _ => false,
    };
    (asks && !cfg.allow_producer_auto_approve).then(|| {
        "auto_approve refused: this bridge does not relay producers' auto_approve / \
         auto_approve_tools (start it with --allow-producer-auto-approve to allow it)"
            .to_string()
    })
}

/// What a non-ok answer of the node means, for an ack's or dead letter's detail.
fn refusal_detail(status: &str, body: &Value) -> String {
    match body.get("reason").and_then(Value::as_str) {
        Some(reason) if !reason.is_empty() => format!("{status}: {reason}"),
        _ => format!("node answered {status}"),
    }
}

/// Sends a `send` to the node, opting in to its queue. A `busy` answer (the workstream's
/// queue is full, or an older node without queues) is not an answer to acknowledge: the
/// send is tried again with backoff — the worker holds its shard meanwhile, so the
/// workstream's later messages stay behind it — and after `busy_retries` tries it is
/// dead-lettered with reason `busy` and an error event carrying its correlation id.
/// `None` = node unavailable (the message stays held).
async fn send_until_accepted(
    ctx: &Ctx,
    msg: &InboundMessage,
    body: &Value,
    raw: &str,
    epoch: u64,
) -> Option<Option<Reply>> {
    let mut backoff = Backoff::new(Duration::from_millis(100), ctx.cfg.busy_retry_max_delay);
    let mut tries = 0u32;
    loop {
        let reply = call(ctx, epoch, "/v1/api/send", body).await?;
        let busy = match &reply {
            Reply::Accepted(b) if b.get("status").and_then(Value::as_str) == Some("busy") => {
                Some(refusal_detail("busy", b))
            }
            _ => None,
        };
        let Some(detail) = busy else {
            return Some(Some(reply));
        };
        tries += 1;
        ctx.metrics.inc(&ctx.metrics.node_retries);
        if tries > ctx.cfg.busy_retries {
            let reason = format!("busy: {detail} (tried {tries} times)");
            fail(ctx, msg, raw, &reason).await;
            return Some(None);
        }
        tracing::debug!(correlation_id = msg.correlation_id(), tries, %detail, "node busy; trying again");
        if epoch != ctx.current_epoch() || !ctx.is_up() || ctx.cancel.is_cancelled() {
            return None;
        }
        tokio::time::sleep(backoff.delay()).await;
    }
}

fn is_unknown_ws(reply: &Reply) -> bool {
    matches!(reply, Reply::Rejected { status: 404, .. })
}

async fn local(
    ctx: &Ctx,
    msg: &InboundMessage,
    value: &Value,
    raw: &str,
    epoch: u64,
) -> Option<()> {
    if let Some(reason) = auto_approve_refusal(&ctx.cfg, msg) {
        ctx.dead_letter(&reason, raw, msg.correlation_id()).await;
        ack_event(ctx, msg, "error", &reason).await;
        return Some(());
    }
    let cid = msg.correlation_id().to_string();
    match msg {
        InboundMessage::Send(s) => {
            let ws_id = if s.ws_id.is_empty() {
                let created = create(
                    ctx,
                    epoch,
                    &cid,
                    value,
                    json!({
                        "name": s.name,
                        "auto_approve": s.auto_approve,
                        "auto_approve_tools": s.auto_approve_tools,
                    }),
                    raw,
                )
                .await?;
                match created {
                    Some((ws, _)) => {
                        await_subscriber(ctx, &ws).await;
                        ws
                    }
                    None => return Some(()),
                }
            } else {
                s.ws_id.clone()
            };
            let body = json!({
                "message": s.message,
                "ws_id": ws_id,
                "correlation_id": cid,
                "auto_approve": s.auto_approve,
                "auto_approve_tools": s.auto_approve_tools,
                "queue": true,
            });
            let mut m = msg.clone();
            if let InboundMessage::Send(x) = &mut m {
                x.ws_id = ws_id.clone();
            }
            let Some(mut reply) = send_until_accepted(ctx, &m, &body, raw, epoch).await? else {
                return Some(()); // dead-lettered
            };
            if is_unknown_ws(&reply) && known_here(ctx, &ws_id).await {
                // Our node lost it (restarted without it): bring it back, then deliver.
                restore(ctx, epoch, &ws_id, None).await?;
                let Some(again) = send_until_accepted(ctx, &m, &body, raw, epoch).await? else {
                    return Some(());
                };
                reply = again;
            }
            ack_reply(ctx, &m, &reply, raw).await;
        }
        InboundMessage::Command(c) => {
            let reply = call(
                ctx,
                epoch,
                "/v1/api/command",
                &json!({"command": c.command, "ws_id": c.ws_id, "correlation_id": cid}),
            )
            .await?;
            ack_reply(ctx, msg, &reply, raw).await;
        }
        InboundMessage::Cancel(c) => {
            // `"all": true` also empties the workstream's queue (the node's `cancel`).
            let all = value.get("all").and_then(Value::as_bool).unwrap_or(false);
            let reply = call(
                ctx,
                epoch,
                "/v1/api/cancel",
                &json!({"ws_id": c.ws_id, "all": all}),
            )
            .await?;
            ack_reply(ctx, msg, &reply, raw).await;
        }
        InboundMessage::CloseWorkstream(c) => {
            let reply = call(
                ctx,
                epoch,
                "/v1/api/workstreams/close",
                &json!({"ws_id": c.ws_id}),
            )
            .await?;
            ack_reply(ctx, msg, &reply, raw).await;
        }
        InboundMessage::CreateWorkstream(c) => {
            let mut body = json!({
                "name": c.name,
                "auto_approve": c.auto_approve,
                "auto_approve_tools": c.auto_approve_tools,
            });
            for (k, v) in [
                ("model", &c.model),
                ("resume_ws", &c.resume_ws),
                ("skill", &c.skill),
                ("user_id", &c.user_id),
            ] {
                if !v.is_empty() {
                    body[k] = json!(v);
                }
            }
            let created = create(ctx, epoch, &cid, value, body, raw).await?;
            if let Some((ws_id, resumed)) = created
                && !resumed
                && !c.initial_message.is_empty()
            {
                let body = json!({
                    "message": c.initial_message,
                    "ws_id": ws_id,
                    "correlation_id": cid,
                    "queue": true,
                });
                if let Reply::Rejected { error, .. } =
                    call(ctx, epoch, "/v1/api/send", &body).await?
                {
                    ctx.dead_letter(&format!("initial message refused: {error}"), raw, &cid)
                        .await;
                }
            }
        }
        _ => {}
    }
    Some(())
}

/// A `send` without `ws_id` creates the workstream first; the original client subscribes to
/// the new workstream's channel only when `ws_created` reaches it on the global channel, so
/// the turn's first events could be published before it listens. When someone listens on
/// the global channel, wait (up to 250 ms) for a subscriber of the new workstream before
/// starting the turn. Stream consumers lose nothing either way.
async fn await_subscriber(ctx: &Ctx, ws_id: &str) {
    let channel = ctx.keys.events_ws(ws_id);
    if subscribers(ctx, &ctx.keys.events_global()).await == 0 {
        return;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(250);
    while tokio::time::Instant::now() < deadline {
        if subscribers(ctx, &channel).await > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn subscribers(ctx: &Ctx, channel: &str) -> i64 {
    let mut m = ctx.redis.clone();
    let r: Result<Vec<(String, i64)>, _> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut m)
        .await;
    r.ok().and_then(|v| v.first().map(|(_, n)| *n)).unwrap_or(0)
}

/// Is `ws_id` leased to this node (so a 404 from the node means the node lost it)?
async fn known_here(ctx: &Ctx, ws_id: &str) -> bool {
    let mut m = ctx.redis.clone();
    matches!(ctx.leases.owner(&mut m, ws_id).await, Ok(Some(o)) if o == ctx.node_id)
}

/// Creates a workstream (idempotent by the message's correlation id) and announces it as
/// the original: `ws_created` on global (node_id "") and cluster (node_id set), `ws_resumed`
/// on the workstream's channel when resumed. `Some(None)` = refused (already reported),
/// `None` = node unavailable.
async fn create(
    ctx: &Ctx,
    epoch: u64,
    cid: &str,
    value: &Value,
    mut body: Value,
    raw: &str,
) -> Option<Option<(String, bool)>> {
    body["correlation_id"] = json!(cid);
    let reply = call(ctx, epoch, "/v1/api/workstreams/new", &body).await?;
    let b = match reply {
        Reply::Accepted(b) => b,
        Reply::Rejected { error, .. } => {
            ctx.dead_letter(&format!("node refused the create: {error}"), raw, cid)
                .await;
            let ev: OutboundEvent = AckEvent {
                correlation_id: cid.to_string(),
                status: "error".into(),
                detail: error,
                ..AckEvent::default()
            }
            .into();
            ctx.publish(&ctx.keys.events_global(), &ev).await;
            return Some(None);
        }
        Reply::Unavailable(_) => return None,
    };
    let ws_id = b
        .get("ws_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let name = b
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let resumed = b.get("resumed").and_then(Value::as_bool).unwrap_or(false);
    let count = b.get("message_count").and_then(Value::as_u64).unwrap_or(0);
    let mut m = ctx.redis.clone();
    let _ = ctx
        .leases
        .own(&mut m, &ws_id, &ctx.node_id, ctx.cfg.lease_ttl)
        .await;
    if value.get("pin").and_then(Value::as_str) == Some("hard") {
        let _ = ctx.leases.set_pin(&mut m, &ws_id, true).await;
    }
    let global: OutboundEvent = WsCreatedEvent {
        ws_id: ws_id.clone(),
        correlation_id: cid.to_string(),
        name: name.clone(),
        resumed,
        message_count: count,
        ..WsCreatedEvent::default()
    }
    .into();
    ctx.publish(&ctx.keys.events_global(), &global).await;
    let cluster: OutboundEvent = WsCreatedEvent {
        ws_id: ws_id.clone(),
        correlation_id: cid.to_string(),
        name: name.clone(),
        node_id: ctx.node_id.clone(),
        ..WsCreatedEvent::default()
    }
    .into();
    ctx.publish(&ctx.keys.events_cluster(), &cluster).await;
    if resumed {
        let ev: OutboundEvent = WsResumedEvent {
            ws_id: ws_id.clone(),
            correlation_id: cid.to_string(),
            message_count: count,
            name,
            ..WsResumedEvent::default()
        }
        .into();
        ctx.publish(&ctx.keys.events_ws(&ws_id), &ev).await;
    }
    Some(Some((ws_id, resumed)))
}
