//! What the producer of a message is told: `ack` events, error events, dead letters.

use serde_json::Value;
use turnstone_proto::api::{STATUS_OK, STATUS_QUEUED, SendReply};
use turnstone_proto::mq::{AckBody, AckEvent, ErrorEvent, InboundMessage, OutboundEvent};
use turnstone_proto::sse::Notice;

use super::handle::Handled;
use crate::node::decode_reply;
use crate::{Ctx, Reply};

/// What an accepted answer of the node says (`send` and the other commands answer in the
/// shape of [`SendReply`]); an unreadable one reads as `ok`.
pub(super) fn command_reply(body: &Value) -> SendReply {
    decode_reply("reply", body).unwrap_or_default()
}

/// What a non-ok answer means, for an ack's or dead letter's detail.
pub(super) fn refusal(reply: &SendReply) -> String {
    match reply.reason.as_deref() {
        Some(reason) if !reason.is_empty() => format!("{}: {reason}", reply.status),
        _ => format!("node answered {}", reply.status),
    }
}

pub(super) async fn reject_malformed(ctx: &Ctx, raw: String, reason: String) -> Handled {
    ctx.dead_letter(&reason, &raw, "").await;
    let ev = OutboundEvent::Error(ErrorEvent::new(
        "",
        Notice {
            message: format!("Failed to process message: {reason}"),
        },
    ));
    ctx.publish(&ctx.keys.events_global(), &ev).await;
    Handled::Done(raw)
}

/// Dead-letters a message and tells its producer: `ack` (status error) and `error` on the
/// workstream's channel, or on the global channel when there is no workstream yet.
pub(super) async fn fail(ctx: &Ctx, msg: &InboundMessage, raw: &str, reason: &str) {
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
        correlation_id: msg.correlation_id().to_string(),
        ..AckEvent::new(
            ws_id.clone(),
            AckBody {
                status: "error".into(),
                detail: reason.to_string(),
            },
        )
    }
    .into();
    let err = OutboundEvent::Error(ErrorEvent {
        correlation_id: msg.correlation_id().to_string(),
        ..ErrorEvent::new(
            ws_id,
            Notice {
                message: reason.to_string(),
            },
        )
    });
    ctx.publish(&channel, &ack).await;
    ctx.publish(&channel, &err).await;
}

pub(super) async fn ack_event(ctx: &Ctx, msg: &InboundMessage, status: &str, detail: &str) {
    let ws_id = msg.ws_id().to_string();
    let ev: OutboundEvent = AckEvent {
        correlation_id: msg.correlation_id().to_string(),
        ..AckEvent::new(
            ws_id.clone(),
            AckBody {
                status: status.to_string(),
                detail: detail.to_string(),
            },
        )
    }
    .into();
    ctx.publish(&ctx.keys.events_ws(&ws_id), &ev).await;
}

/// A reply's ack: `ok` for `{"status":"ok"}`, `queued` (detail: the position) for a send
/// that waits in its workstream's queue, else `error` with a detail saying why.
pub(super) async fn ack_reply(ctx: &Ctx, msg: &InboundMessage, reply: &Reply, raw: &str) {
    match reply {
        Reply::Accepted(b) => {
            let reply = command_reply(b);
            match reply.status.as_str() {
                STATUS_OK => ack_event(ctx, msg, "ok", "").await,
                STATUS_QUEUED => {
                    let position = reply.position.unwrap_or(0);
                    let detail = format!("queued at position {position}");
                    ack_event(ctx, msg, "queued", &detail).await;
                }
                _ => ack_event(ctx, msg, "error", &refusal(&reply)).await,
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
