//! Delivery of a message that is this node's: the node calls with typed `proto::api` bodies,
//! retried while the node is unavailable and this bridge's epoch lasts; `busy` sends tried
//! again with backoff; creates announced as the original does.

use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use turnstone_proto::api::{
    CancelBody, CloseWorkstreamBody, CommandBody, CreateWorkstreamBody, CreateWorkstreamReply,
    STATUS_BUSY, STATUS_OK, STATUS_QUEUED, SendBody,
};
use turnstone_proto::mq::{
    AckBody, AckEvent, CreateWorkstreamMessage, InboundMessage, OutboundEvent, SendMessage,
    WsCreatedBody, WsCreatedEvent, WsResumedBody, WsResumedEvent,
};
use turnstone_queue::{Backoff, ReliableQueue};

use super::answer::{ack_event, ack_reply, command_reply, fail, refusal};
use super::route::{known_here, restore};
use crate::node::decode_reply;
use crate::{Ctx, Reply};

/// The node's answer to `call`, retried while the node is unavailable and this bridge's
/// epoch lasts; `None` when the node went away (the message stays held).
pub(super) async fn retried<F, Fut>(ctx: &Ctx, epoch: u64, mut call: F) -> Option<Reply>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Reply>,
{
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    loop {
        let reply = call().await;
        if !reply.is_unavailable() {
            return Some(reply);
        }
        ctx.metrics.inc(&ctx.metrics.node_retries);
        if !ctx.link.lasts(epoch) || ctx.cancel.is_cancelled() {
            return None;
        }
        tokio::time::sleep(backoff.delay()).await;
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

/// Sends a `send` to the node, opting in to its queue. A `busy` answer (the workstream's
/// queue is full, or an older node without queues) is not an answer to acknowledge: the
/// send is tried again with backoff — the worker holds its shard meanwhile, so the
/// workstream's later messages stay behind it — and after `busy_retries` tries it is
/// dead-lettered with reason `busy` and an error event carrying its correlation id.
/// `None` = node unavailable (the message stays held).
async fn send_until_accepted(
    ctx: &Ctx,
    msg: &InboundMessage,
    body: &SendBody,
    raw: &str,
    epoch: u64,
) -> Option<Option<Reply>> {
    let mut backoff = Backoff::new(Duration::from_millis(100), ctx.cfg.busy_retry_max_delay);
    let mut tries = 0u32;
    loop {
        let reply = retried(ctx, epoch, || ctx.node.send(body)).await?;
        let busy = match &reply {
            Reply::Accepted(b) => Some(command_reply(b)).filter(|r| r.status == STATUS_BUSY),
            _ => None,
        };
        let Some(busy) = busy else {
            return Some(Some(reply));
        };
        let detail = refusal(&busy);
        tries += 1;
        ctx.metrics.inc(&ctx.metrics.node_retries);
        if tries > ctx.cfg.busy_retries {
            let reason = format!("busy: {detail} (tried {tries} times)");
            fail(ctx, msg, raw, &reason).await;
            return Some(None);
        }
        tracing::debug!(correlation_id = msg.correlation_id(), tries, %detail, "node busy; trying again");
        if !ctx.link.lasts(epoch) || ctx.cancel.is_cancelled() {
            return None;
        }
        tokio::time::sleep(backoff.delay()).await;
    }
}

fn is_unknown_ws(reply: &Reply) -> bool {
    matches!(reply, Reply::Rejected { status: 404, .. })
}

/// Hands a message for this node to the node. `None` = node unavailable.
pub(super) async fn local(
    ctx: &Ctx,
    q: &ReliableQueue,
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
    // From here the node may apply it (`crate::awaiting`).
    let starts_turn = match msg {
        InboundMessage::Send(_) => true,
        InboundMessage::CreateWorkstream(c) => !c.initial_message.is_empty(),
        _ => false,
    };
    if !ctx
        .hand_over(q, raw, starts_turn.then_some(cid.as_str()))
        .await?
    {
        tracing::warn!(
            correlation_id = %cid,
            "held message was released to another bridge meanwhile; not delivered here"
        );
        return Some(());
    }
    match msg {
        InboundMessage::Send(s) => send(ctx, msg, s, value, raw, epoch).await?,
        InboundMessage::Command(c) => {
            // (The node's `command` takes no correlation id: it starts no turn.)
            let body = CommandBody {
                ws_id: c.ws_id.clone(),
                command: c.command.clone(),
            };
            let reply = retried(ctx, epoch, || ctx.node.command(&body)).await?;
            ack_reply(ctx, msg, &reply, raw).await;
        }
        InboundMessage::Cancel(c) => {
            // `"all": true` also empties the workstream's queue (the node's `cancel`).
            let all = value.get("all").and_then(Value::as_bool).unwrap_or(false);
            let body = CancelBody {
                ws_id: c.ws_id.clone(),
                force: false,
                all,
            };
            let reply = retried(ctx, epoch, || ctx.node.cancel(&body)).await?;
            ack_reply(ctx, msg, &reply, raw).await;
        }
        InboundMessage::CloseWorkstream(c) => {
            let body = CloseWorkstreamBody {
                ws_id: c.ws_id.clone(),
            };
            let reply = retried(ctx, epoch, || ctx.node.close_workstream(&body)).await?;
            ack_reply(ctx, msg, &reply, raw).await;
        }
        InboundMessage::CreateWorkstream(c) => {
            create_with_message(ctx, c, &cid, value, raw, epoch).await?;
        }
        _ => {}
    }
    Some(())
}

/// A `send`: to its workstream, or to a new one when it names none; a workstream this
/// node lost (restarted without it) is brought back first.
async fn send(
    ctx: &Ctx,
    msg: &InboundMessage,
    s: &SendMessage,
    value: &Value,
    raw: &str,
    epoch: u64,
) -> Option<()> {
    let cid = msg.correlation_id().to_string();
    let ws_id = if s.ws_id.is_empty() {
        let body = CreateWorkstreamBody {
            name: s.name.clone(),
            auto_approve: s.auto_approve,
            auto_approve_tools: s.auto_approve_tools.clone(),
            ..CreateWorkstreamBody::default()
        };
        match create(ctx, epoch, &cid, value, body, raw).await? {
            Some((ws, _)) => {
                await_subscriber(ctx, &ws).await;
                ws
            }
            None => {
                ctx.not_awaited(&cid).await;
                return Some(());
            }
        }
    } else {
        s.ws_id.clone()
    };
    let body = SendBody {
        ws_id: ws_id.clone(),
        message: s.message.clone(),
        correlation_id: cid,
        auto_approve: Some(s.auto_approve),
        auto_approve_tools: s.auto_approve_tools.clone(),
        queue: true,
    };
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
    if !starts_turn(&reply) {
        ctx.not_awaited(&body.correlation_id).await;
    }
    ack_reply(ctx, &m, &reply, raw).await;
    Some(())
}

/// The node took the send: its turn runs now or later, and ends in a `turn_complete`.
fn starts_turn(reply: &Reply) -> bool {
    match reply {
        Reply::Accepted(b) => matches!(command_reply(b).status.as_str(), STATUS_OK | STATUS_QUEUED),
        _ => false,
    }
}

/// A `create_workstream`, then its `initial_message` (unless it resumed a workstream).
async fn create_with_message(
    ctx: &Ctx,
    c: &CreateWorkstreamMessage,
    cid: &str,
    value: &Value,
    raw: &str,
    epoch: u64,
) -> Option<()> {
    let body = CreateWorkstreamBody {
        name: c.name.clone(),
        auto_approve: c.auto_approve,
        auto_approve_tools: c.auto_approve_tools.clone(),
        model: c.model.clone(),
        resume_ws: c.resume_ws.clone(),
        skill: c.skill.clone(),
        user_id: c.user_id.clone(),
        ..CreateWorkstreamBody::default()
    };
    let created = create(ctx, epoch, cid, value, body, raw).await?;
    if let Some((ws_id, resumed)) = created
        && !resumed
        && !c.initial_message.is_empty()
    {
        let body = SendBody {
            ws_id: ws_id.clone(),
            message: c.initial_message.clone(),
            correlation_id: cid.to_string(),
            queue: true,
            ..SendBody::default()
        };
        let reply = retried(ctx, epoch, || ctx.node.send(&body)).await?;
        if starts_turn(&reply) {
            return Some(());
        }
        if let Reply::Rejected { error, .. } = reply {
            ctx.dead_letter(&format!("initial message refused: {error}"), raw, cid)
                .await;
        }
    }
    if !c.initial_message.is_empty() {
        ctx.not_awaited(cid).await;
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

/// Creates a workstream (idempotent by the message's correlation id) and announces it as
/// the original: `ws_created` on global (node_id "") and cluster (node_id set), `ws_resumed`
/// on the workstream's channel when resumed. `Some(None)` = refused (already reported),
/// `None` = node unavailable.
async fn create(
    ctx: &Ctx,
    epoch: u64,
    cid: &str,
    value: &Value,
    mut body: CreateWorkstreamBody,
    raw: &str,
) -> Option<Option<(String, bool)>> {
    body.correlation_id = cid.to_string();
    let reply = retried(ctx, epoch, || ctx.node.create_workstream(&body)).await?;
    let b = match reply {
        Reply::Accepted(b) => b,
        Reply::Rejected { error, .. } => {
            ctx.dead_letter(&format!("node refused the create: {error}"), raw, cid)
                .await;
            let ev: OutboundEvent = AckEvent {
                correlation_id: cid.to_string(),
                ..AckEvent::new(
                    "",
                    AckBody {
                        status: "error".into(),
                        detail: error,
                    },
                )
            }
            .into();
            ctx.publish(&ctx.keys.events_global(), &ev).await;
            return Some(None);
        }
        Reply::Unavailable(_) => return None,
    };
    let CreateWorkstreamReply {
        ws_id,
        name,
        resumed,
        message_count: count,
    } = decode_reply("workstreams/new", &b).unwrap_or_default();
    let mut m = ctx.redis.clone();
    let _ = ctx
        .leases
        .own(&mut m, &ws_id, &ctx.node_id, ctx.cfg.lease_ttl)
        .await;
    if value.get("pin").and_then(Value::as_str) == Some("hard")
        && let Err(e) = ctx.leases.pin_hard(&mut m, &ws_id, &ctx.node_id).await
    {
        tracing::warn!(%ws_id, error = %e, "hard pin not written: the workstream is soft-pinned");
    }
    let global: OutboundEvent = WsCreatedEvent {
        correlation_id: cid.to_string(),
        ..WsCreatedEvent::new(
            ws_id.clone(),
            WsCreatedBody {
                name: name.clone(),
                resumed,
                message_count: count,
                ..WsCreatedBody::default()
            },
        )
    }
    .into();
    ctx.publish(&ctx.keys.events_global(), &global).await;
    let cluster: OutboundEvent = WsCreatedEvent {
        correlation_id: cid.to_string(),
        ..WsCreatedEvent::new(
            ws_id.clone(),
            WsCreatedBody {
                name: name.clone(),
                node_id: ctx.node_id.clone(),
                ..WsCreatedBody::default()
            },
        )
    }
    .into();
    ctx.publish(&ctx.keys.events_cluster(), &cluster).await;
    if resumed {
        let ev: OutboundEvent = WsResumedEvent {
            correlation_id: cid.to_string(),
            ..WsResumedEvent::new(
                ws_id.clone(),
                WsResumedBody {
                    message_count: count,
                    name,
                },
            )
        }
        .into();
        ctx.publish(&ctx.keys.events_ws(&ws_id), &ev).await;
    }
    Some(Some((ws_id, resumed)))
}
