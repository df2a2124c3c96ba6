//! What the producer of a message is told: `ack` events, error events, dead letters.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use turnstone_proto::mq::{AckEvent, ErrorEvent, InboundMessage, OutboundEvent};

use super::handle::Handled;
use crate::{Ctx, Reply};

/// What an accepted answer of the node says (`send` and the other commands); each field
/// read on its own (a value of another type reads as absent).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct CommandReply {
    /// `ok`, `queued` or `busy`; `ok` when absent.
    #[serde(deserialize_with = "lenient")]
    status: Option<String>,
    /// `queued`: the place in the workstream's queue.
    #[serde(deserialize_with = "lenient")]
    position: u64,
    /// Why a non-ok answer.
    #[serde(deserialize_with = "lenient")]
    reason: Option<String>,
}

fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(d)?).unwrap_or_default())
}

impl CommandReply {
    pub(super) fn of(body: &Value) -> Self {
        Self::deserialize(body).unwrap_or_default()
    }

    pub(super) fn status(&self) -> &str {
        self.status.as_deref().unwrap_or("ok")
    }

    /// What a non-ok answer means, for an ack's or dead letter's detail.
    pub(super) fn refusal(&self) -> String {
        match self.reason.as_deref() {
            Some(reason) if !reason.is_empty() => format!("{}: {reason}", self.status()),
            _ => format!("node answered {}", self.status()),
        }
    }
}

pub(super) async fn reject_malformed(ctx: &Ctx, raw: String, reason: String) -> Handled {
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

pub(super) async fn ack_event(ctx: &Ctx, msg: &InboundMessage, status: &str, detail: &str) {
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
pub(super) async fn ack_reply(ctx: &Ctx, msg: &InboundMessage, reply: &Reply, raw: &str) {
    match reply {
        Reply::Accepted(b) => {
            let reply = CommandReply::of(b);
            match reply.status() {
                "ok" => ack_event(ctx, msg, "ok", "").await,
                "queued" => {
                    let detail = format!("queued at position {}", reply.position);
                    ack_event(ctx, msg, "queued", &detail).await;
                }
                _ => ack_event(ctx, msg, "error", &reply.refusal()).await,
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
