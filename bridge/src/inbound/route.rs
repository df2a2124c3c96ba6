//! Where a message goes (cluster spec §3.4, with liveness): this node, the queue of its
//! workstream's live owner or of the node it names, or — when the owner is dead — here
//! after a re-homing (soft pin) or nowhere with an error (hard pin).

use serde_json::Value;
use turnstone_proto::api::{
    CreateWorkstreamBody, CreateWorkstreamReply, OUTCOME_COMPLETED, OUTCOME_QUEUED,
    OUTCOME_REMOVED, OUTCOME_UNKNOWN, SendOutcomes, SendOutcomesBody,
};
use turnstone_proto::mq::{InboundMessage, InfoEvent, OutboundEvent};
use turnstone_proto::sse::Notice;
use turnstone_queue::{Moved, ReliableQueue, rendezvous};

use super::Source;
use super::answer::{ack_event, fail};
use super::deliver::{self, retried};
use crate::node::decode_reply;
use crate::{Ctx, Reply};

/// Moves the held message to `node`'s queue (atomically: see `ReliableQueue::move_held`).
///
/// A message this bridge had handed to its node before (a redelivery: the bridge died before
/// the acknowledgement) is not moved while that node may have applied it — another node
/// would run it a second time. The node is asked: a send it has run (or removed) is
/// acknowledged as accepted, one it still holds is delivered to it again (it answers the
/// repeat from its store), and one it never saw moves on.
async fn forward(
    ctx: &Ctx,
    q: &ReliableQueue,
    node: &str,
    (msg, value, raw, epoch): (&InboundMessage, &Value, &str, u64),
) -> Option<()> {
    let mut m = ctx.redis.clone();
    let to = ctx.keys.inbound_node(node);
    let mut moved = q.move_held(&mut m, raw, &to, false).await;
    if let Ok(Moved::Handed) = moved {
        let state = outcome_here(ctx, msg.correlation_id(), epoch).await?;
        tracing::info!(
            correlation_id = msg.correlation_id(),
            owner = node,
            state,
            "a message handed to this node before, redelivered"
        );
        match state.as_str() {
            OUTCOME_COMPLETED | OUTCOME_REMOVED => {
                let detail = format!("already accepted by node '{}'", ctx.node_id);
                ack_event(ctx, msg, "ok", &detail).await;
                return Some(());
            }
            OUTCOME_UNKNOWN => moved = q.move_held(&mut m, raw, &to, true).await,
            _ => return deliver::local(ctx, q, msg, value, raw, epoch).await,
        }
    }
    match moved {
        Ok(Moved::Moved) => {
            ctx.metrics.inc(&ctx.metrics.inbound_forwarded);
            tracing::debug!(to = node, "forwarded");
            Some(())
        }
        Ok(Moved::Handed) => None,
        Ok(Moved::NotHeld) => {
            tracing::warn!(
                to = node,
                "held message was released meanwhile; not forwarded"
            );
            Some(())
        }
        Err(e) => {
            tracing::warn!(error = %e, "forward failed; the message stays held");
            None
        }
    }
}

/// What this bridge's node says of the send `correlation_id` (`SendOutcome::state`: `queued`,
/// `started`, `completed`, `removed` or `unknown`), asked until it answers while this
/// bridge's epoch lasts; `None` = node unavailable. A node that refuses the question (an
/// older one without the route) reads as `queued`: the message stays with it.
async fn outcome_here(ctx: &Ctx, correlation_id: &str, epoch: u64) -> Option<String> {
    let body = SendOutcomesBody {
        correlation_ids: vec![correlation_id.to_string()],
    };
    let reply = retried(ctx, epoch, || ctx.node.send_outcomes(&body)).await?;
    let Reply::Accepted(reply) = reply else {
        return Some(OUTCOME_QUEUED.into());
    };
    let SendOutcomes { outcomes } = decode_reply("sends/outcomes", &reply).unwrap_or_default();
    let state = outcomes
        .into_iter()
        .find(|o| o.correlation_id == correlation_id)
        .map_or_else(|| OUTCOME_UNKNOWN.to_string(), |o| o.state);
    Some(state)
}

/// Routing of cluster spec §3.4, with liveness: `None` = abandon (retry later).
pub(super) async fn route(
    ctx: &Ctx,
    source: Source,
    msg: &InboundMessage,
    value: &Value,
    raw: &str,
    epoch: u64,
) -> Option<()> {
    let mut m = ctx.redis.clone();
    let q = ctx.inbound.queue(source);
    let me = ctx.node_id.as_str();
    let target = msg.target_node();
    let ws_id = msg.ws_id();
    if !target.is_empty() && target != me {
        let alive = ctx.leases.is_alive(&mut m, target).await.ok()?;
        if alive {
            return forward(ctx, q, target, (msg, value, raw, epoch)).await;
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
        // The lease names the owner; without one (its node gone longer than the lease
        // TTL) the pin record still names where the workstream lived.
        let (lease, pin) = ctx.leases.placement(&mut m, ws_id).await.ok()?;
        let hard = pin.as_ref().is_some_and(|p| p.hard);
        let owner = lease
            .clone()
            .or_else(|| pin.map(|p| p.node).filter(|n| !n.is_empty()));
        match owner.as_deref() {
            Some(o) if o == me => {}
            Some(o) => {
                if ctx.leases.is_alive(&mut m, o).await.ok()? {
                    return forward(ctx, q, o, (msg, value, raw, epoch)).await;
                }
                if hard {
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
                    return forward(ctx, q, &chosen, (msg, value, raw, epoch)).await;
                }
                if !ctx
                    .leases
                    .claim(&mut m, ws_id, lease.as_deref(), me, ctx.cfg.lease_ttl)
                    .await
                    .ok()?
                {
                    // Someone else moved it first: follow the new lease.
                    let now = ctx.leases.owner(&mut m, ws_id).await.ok()?;
                    if let Some(n) = now.filter(|n| n != me) {
                        return forward(ctx, q, &n, (msg, value, raw, epoch)).await;
                    }
                }
                restore(ctx, epoch, ws_id, Some(o)).await?;
            }
            None => {}
        }
    }
    deliver::local(ctx, q, msg, value, raw, epoch).await
}

/// Makes `ws_id` live on this node after its owner died: resumed from the store when the
/// node can (shared PostgreSQL), else started empty under the same id, so consumers keep
/// their channel. `None` = node unavailable.
pub(super) async fn restore(ctx: &Ctx, epoch: u64, ws_id: &str, from: Option<&str>) -> Option<()> {
    let resume = CreateWorkstreamBody {
        resume_ws: ws_id.to_string(),
        ..CreateWorkstreamBody::default()
    };
    let resumed = retried(ctx, epoch, || ctx.node.create_workstream(&resume)).await?;
    let resumed_here = match &resumed {
        Reply::Accepted(b) => decode_reply::<CreateWorkstreamReply>("workstreams/new", b)
            .is_some_and(|r| r.ws_id == ws_id),
        _ => false,
    };
    let empty = CreateWorkstreamBody {
        ws_id: ws_id.to_string(),
        ..CreateWorkstreamBody::default()
    };
    let how = if resumed_here {
        "with its history"
    } else {
        match retried(ctx, epoch, || ctx.node.create_workstream(&empty)).await? {
            Reply::Accepted(_) => "without its history (not in this node's store)",
            Reply::Rejected { status: 409, .. } => "(already here)",
            Reply::Rejected { error, .. } => {
                tracing::warn!(ws_id, error, "workstream could not be restored here");
                "(restore failed)"
            }
            Reply::Unavailable(_) => return None,
        }
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
    let ev = OutboundEvent::Info(InfoEvent::new(ws_id, Notice { message: note }));
    ctx.publish(&ctx.keys.events_ws(ws_id), &ev).await;
    Some(())
}

/// Is `ws_id` leased to this node (so a 404 from the node means the node lost it)?
pub(super) async fn known_here(ctx: &Ctx, ws_id: &str) -> bool {
    let mut m = ctx.redis.clone();
    matches!(ctx.leases.owner(&mut m, ws_id).await, Ok(Some(o)) if o == ctx.node_id)
}
