//! Is the node alive, and what follows from it.
//!
//! * The heartbeat `{p}:node:{id}` is written only while the node answers `/health`; after
//!   two failed probes the bridge stops taking work, lets what is in flight finish (work the
//!   node cannot take stays in the processing list) and withdraws the heartbeat, so the
//!   cluster sees the node as gone within one probe interval instead of one TTL.
//! * When the node answers again: heartbeat first, then the processing lists are re-driven
//!   (the janitor of another bridge can no longer move them once the heartbeat exists).
//! * Ownership leases of the node's workstreams are refreshed every `lease_ttl / 3`.
//! * The janitor hands the queues of nodes without a heartbeat (directed queue and the
//!   processing lists their bridge left behind) to the shared queue, one atomic script per
//!   list, so nothing waits forever in a dead node's queue — except held messages the dead
//!   node's bridge had handed to it: the node may have applied them, so they wait for it
//!   (it applies each correlation id once) instead of running a second time elsewhere.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use turnstone_proto::api::{Health, ReleaseBody, WorkstreamList};
use turnstone_proto::ids::now_timestamp;
use turnstone_proto::mq::{NodeHeartbeat, OutboundEvent, WsCreatedBody, WsCreatedEvent};
use turnstone_queue::ReliableQueue;

use crate::node::decode_reply;
use crate::{Ctx, Reply};

/// Is the node answering? Owned by the liveness task, which alone changes it; the inbound
/// side and the approval relay only read it.
pub struct NodeLink {
    /// Inbound work runs only while it is `true`.
    up: watch::Sender<bool>,
    /// Changes on every up/down transition; work fetched in another epoch is abandoned
    /// (left in the processing list) instead of being handed to the node.
    epoch: AtomicU64,
    /// The node's capacity as its `/health` last said (the heartbeat's `max_ws`).
    max_ws: AtomicU64,
    /// Bridge start, Unix seconds (the heartbeat's `started`).
    started: f64,
}

impl NodeLink {
    pub(crate) fn new(max_ws: u64) -> Self {
        Self {
            up: watch::channel(false).0,
            epoch: AtomicU64::new(0),
            max_ws: AtomicU64::new(max_ws),
            started: now_timestamp(),
        }
    }

    pub fn is_up(&self) -> bool {
        *self.up.borrow()
    }

    /// The current up/down epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Whether work begun in `epoch` may still go to the node: the node is up and has not
    /// been down since.
    pub fn lasts(&self, epoch: u64) -> bool {
        epoch == self.epoch() && self.is_up()
    }

    /// Follows the up/down state.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.up.subscribe()
    }

    fn set_up(&self, up: bool) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let _ = self.up.send(up);
    }

    /// The heartbeat value of the original (`{server_url, started, max_ws}`), signed
    /// (`signed_at`, `sig`) when the bridge has the cluster's JWT secret, so the console
    /// trusts its `server_url`.
    fn heartbeat(&self, cfg: &crate::BridgeConfig, node_id: &str) -> NodeHeartbeat {
        let mut hb = NodeHeartbeat {
            server_url: cfg.server_url.clone(),
            started: self.started,
            max_ws: self.max_ws.load(Ordering::Relaxed),
            ..NodeHeartbeat::default()
        };
        if let Some(secret) = &cfg.heartbeat_secret {
            // Whole seconds: the signature covers them.
            let signed_at = now_timestamp().trunc() as i64;
            hb.sig = Some(turnstone_runtime::auth::heartbeat::sign(
                secret,
                node_id,
                &cfg.server_url,
                signed_at,
            ));
            hb.signed_at = Some(signed_at);
        }
        hb
    }
}

pub async fn run(ctx: Arc<Ctx>) {
    let probe = ctx
        .cfg
        .probe_interval
        .min(ctx.cfg.heartbeat_ttl / 2)
        .max(Duration::from_millis(50));
    let probe_timeout = probe.clamp(Duration::from_secs(1), Duration::from_secs(5));
    let lease_every = ctx.cfg.lease_ttl / 3;
    // A dead node's lists only appear once its heartbeat has expired: scanning a few times
    // per heartbeat TTL is enough, and keeps SCAN traffic off large Redis instances.
    let janitor_every = probe
        .max(ctx.cfg.heartbeat_ttl / 4)
        .max(Duration::from_millis(500));
    let mut failures = 0u32;
    let mut recovered = false;
    let mut next_lease = Instant::now();
    let mut next_janitor = Instant::now();
    loop {
        if ctx.cancel.is_cancelled() {
            break;
        }
        match ctx.node.health(probe_timeout).await {
            Reply::Accepted(body) => {
                failures = 0;
                if let Some(h) = decode_reply::<Health>("health", &body) {
                    ctx.link.max_ws.store(h.max_ws, Ordering::Relaxed);
                }
                if !ctx.link.is_up() {
                    if come_up(&ctx, !recovered).await {
                        recovered = true;
                        next_lease = Instant::now() + lease_every;
                    }
                } else {
                    heartbeat(&ctx).await;
                    if Instant::now() >= next_lease {
                        refresh_leases(&ctx, false).await;
                        next_lease = Instant::now() + lease_every;
                    }
                }
            }
            Reply::Rejected { status, error, .. } => {
                failures += 1;
                tracing::error!(
                    status,
                    error,
                    "the node refuses the bridge's health probe (check --auth-token / TURNSTONE_JWT_SECRET)"
                );
            }
            Reply::Unavailable(e) => {
                failures += 1;
                if ctx.link.is_up() {
                    tracing::warn!(error = %e, failures, "node health probe failed");
                }
            }
        }
        if failures >= 2 && ctx.link.is_up() {
            go_down(&ctx).await;
        }
        if Instant::now() >= next_janitor {
            janitor(&ctx).await;
            next_janitor = Instant::now() + janitor_every;
        }
        tokio::select! {
            _ = ctx.cancel.cancelled() => break,
            _ = tokio::time::sleep(probe) => {}
        }
    }
}

async fn heartbeat(ctx: &Ctx) -> bool {
    let mut conn = ctx.redis.clone();
    let value =
        serde_json::to_value(ctx.link.heartbeat(&ctx.cfg, &ctx.node_id)).unwrap_or_default();
    match ctx
        .leases
        .heartbeat(&mut conn, &ctx.node_id, &value, ctx.cfg.heartbeat_ttl)
        .await
    {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "heartbeat not written");
            false
        }
    }
}

/// Node answers again: heartbeat, leases, then let the inbound side re-drive and fetch.
async fn come_up(ctx: &Ctx, first: bool) -> bool {
    if !heartbeat(ctx).await {
        return false;
    }
    refresh_leases(ctx, first).await;
    ctx.link.set_up(true);
    tracing::info!(node_id = %ctx.node_id, "node is up; taking work");
    true
}

/// Node stopped answering: stop taking work, let in-flight work end, withdraw the heartbeat.
async fn go_down(ctx: &Ctx) {
    ctx.link.set_up(false);
    tracing::warn!(node_id = %ctx.node_id, "node is down; no longer taking work");
    ctx.inbound.settle(Duration::from_secs(15)).await;
    let mut conn = ctx.redis.clone();
    if let Err(e) = ctx.leases.withdraw(&mut conn, &ctx.node_id).await {
        tracing::warn!(error = %e, "heartbeat not withdrawn (it expires by its TTL)");
    }
}

/// Refreshes the ownership lease of every live workstream of the node. On the first run
/// after start it also announces them on the cluster channel (cluster spec §3.2).
async fn refresh_leases(ctx: &Ctx, announce: bool) {
    let Reply::Accepted(body) = ctx.node.workstreams().await else {
        return;
    };
    let Some(WorkstreamList { workstreams: rows }) = decode_reply("workstreams", &body) else {
        return;
    };
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    let mut conn = ctx.redis.clone();
    let moved = match ctx
        .leases
        .own_all(&mut conn, &ids, &ctx.node_id, ctx.cfg.lease_ttl)
        .await
    {
        Ok(moved) => moved,
        Err(e) => {
            tracing::warn!(error = %e, "ownership leases not refreshed");
            Vec::new()
        }
    };
    for ws_id in &moved {
        release(ctx, ws_id, announce).await;
    }
    if announce {
        for row in rows.into_iter().filter(|r| !moved.contains(&r.id)) {
            let event: OutboundEvent = WsCreatedEvent::new(
                row.id,
                WsCreatedBody {
                    name: row.name,
                    node_id: ctx.node_id.clone(),
                    ..WsCreatedBody::default()
                },
            )
            .into();
            ctx.publish(&ctx.keys.events_cluster(), &event).await;
        }
    }
}

/// `ws_id` was re-homed while this node was down or cut off: its messages go to the new
/// owner, and this node's copy is no longer the one that is driven. The node lets it go (not
/// closed), so it is listed once, on its owner; while the copy is busy the node says `409`
/// and it is asked again at the next refresh. Logged as a warning at the first refresh after
/// start, at debug later.
async fn release(ctx: &Ctx, ws_id: &str, first: bool) {
    let mut conn = ctx.redis.clone();
    let owner = ctx
        .leases
        .owner(&mut conn, ws_id)
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    let body = ReleaseBody {
        ws_id: ws_id.to_string(),
        owner: owner.clone(),
    };
    match ctx.node.release(&body).await {
        Reply::Accepted(_) => {
            tracing::warn!(%ws_id, %owner, "workstream is owned by another node now; this node's copy released");
        }
        Reply::Rejected { status, error, .. } if first => {
            tracing::warn!(%ws_id, %owner, status, error, "workstream is owned by another node now; this node's copy is not released yet");
        }
        other => {
            tracing::debug!(%ws_id, %owner, reply = ?other, "workstream owned by another node; copy not released yet");
        }
    }
}

/// Hands the lists of nodes without a heartbeat to the shared queue.
async fn janitor(ctx: &Ctx) {
    let mut conn = ctx.redis.clone();
    let p = ctx.keys.prefix();
    let directed_prefix = format!("{p}:inbound:");
    let mut lists: Vec<(String, String)> = Vec::new();
    for pattern in [
        format!("{p}:inbound:*"),
        format!("{{{p}:inbound*}}:processing:*"),
    ] {
        let mut cursor: u64 = 0;
        loop {
            let r: Result<(u64, Vec<String>), _> = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(200)
                .query_async(&mut conn)
                .await;
            let Ok((next, keys)) = r else { return };
            for key in keys {
                let owner = if let Some(rest) = key.strip_prefix(&directed_prefix) {
                    rest.to_string()
                } else if let Some((_, node)) = key.rsplit_once("}:processing:") {
                    if key.ends_with(":handed") {
                        continue; // the handed marks of a processing list
                    }
                    node.to_string()
                } else {
                    continue;
                };
                if owner != ctx.node_id && !owner.is_empty() {
                    lists.push((key, owner));
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    for (list, owner) in lists {
        // A directed queue has no handed messages (nothing of it reached a node): all of it
        // moves. A processing list keeps what its bridge handed to the node: the node may
        // have applied it, so it waits for that node (which applies it once) instead of
        // running a second time elsewhere.
        let held = ReliableQueue::new(String::new(), list.clone());
        let moved = held
            .release_unhanded(
                &mut conn,
                &ctx.keys.inbound(),
                1000,
                &ctx.keys.node_heartbeat(&owner),
            )
            .await;
        match moved {
            Ok(Some((moved, kept))) => {
                if moved > 0 {
                    ctx.metrics.add(&ctx.metrics.janitor_moved, moved);
                    tracing::warn!(
                        list,
                        owner,
                        moved,
                        "moved messages of a dead node to the shared queue"
                    );
                }
                if kept > 0 {
                    tracing::warn!(
                        list,
                        owner,
                        kept,
                        "messages handed to a node that is down wait for it (it may have applied them; they are not run elsewhere)"
                    );
                }
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(list, error = %e, "janitor move failed"),
        }
    }
}
