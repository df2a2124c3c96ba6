//! A worker's handling of one message: decoded once, given a correlation id in its held
//! copy, answered by the bridge itself (approval replies, lists, health) or routed, and
//! acknowledged — removed from the processing list — once handled.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use turnstone_proto::ProtoError;
use turnstone_proto::mq::{
    ErrorEvent, HealthResponseBody, HealthResponseEvent, InboundMessage, NodeListBody,
    NodeListEvent, OutboundEvent, WsListBody, WsListEvent,
};
use turnstone_proto::sse::Notice;
use turnstone_queue::{Backoff, ReliableQueue};

use super::answer::{fail, reject_malformed};
use super::fetch::Job;
use super::{Source, deliver, route};
use crate::{Ctx, Reply};

pub(super) async fn worker(ctx: Arc<Ctx>, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(job) = rx.recv().await {
        if ctx.cancel.is_cancelled() {
            return;
        }
        if !ctx.link.lasts(job.epoch) {
            ctx.metrics.inc(&ctx.metrics.inbound_abandoned);
            continue;
        }
        let q = ctx.inbound.queue(job.source).clone();
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
                if ctx.link.lasts(job.epoch) {
                    // Not a node outage (that re-drives by itself when the node is back):
                    // Redis failed mid-message. Ask the fetchers to re-drive.
                    ctx.inbound.request_redrive();
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
pub(super) enum Handled {
    Done(String),
    Abandoned,
}

async fn handle(
    ctx: &Ctx,
    q: &ReliableQueue,
    source: Source,
    raw: String,
    parsed: Option<Value>,
    epoch: u64,
) -> Handled {
    let mut value = match parsed {
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
            let ev = OutboundEvent::Error(ErrorEvent {
                correlation_id: cid,
                ..ErrorEvent::new(
                    "",
                    Notice {
                        message: format!("Failed to process message: {reason}"),
                    },
                )
            });
            ctx.publish(&ctx.keys.events_global(), &ev).await;
            return Handled::Done(raw);
        }
        Err(e) => return reject_malformed(ctx, raw, format!("invalid message: {e}")).await,
    };
    let Some(raw) = hold_correlation_id(ctx, q, &mut value, &msg, raw).await else {
        return Handled::Abandoned;
    };
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
            let Some(reply) = deliver::retried(ctx, epoch, || ctx.node.workstreams()).await else {
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
                ..WsListEvent::new("", WsListBody { workstreams: rows })
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
                ..HealthResponseEvent::new("", HealthResponseBody { data })
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
                ..NodeListEvent::new("", NodeListBody { nodes })
            }
            .into();
            ctx.publish(&ctx.keys.events_global(), &ev).await;
        }
        _ => {
            if route::route(ctx, source, &msg, &value, &raw, epoch)
                .await
                .is_none()
            {
                return Handled::Abandoned;
            }
        }
    }
    Handled::Done(raw)
}

/// Gives the held copy a correlation id before anything reaches the node (when the producer
/// sent none), so a redelivery carries the same one and the node applies it once. The held
/// form of the message; `None` when it could not be recorded before shutdown.
async fn hold_correlation_id(
    ctx: &Ctx,
    q: &ReliableQueue,
    value: &mut Value,
    msg: &InboundMessage,
    raw: String,
) -> Option<String> {
    let has_cid = value
        .get("correlation_id")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty());
    if has_cid {
        return Some(raw);
    }
    value["correlation_id"] = json!(msg.correlation_id());
    let held = value.to_string();
    let mut backoff = Backoff::default();
    loop {
        let mut m = ctx.redis.clone();
        match q.replace(&mut m, &raw, &held).await {
            Ok(()) => return Some(held),
            Err(e) if !ctx.cancel.is_cancelled() => {
                tracing::warn!(error = %e, "cannot record the correlation id yet");
                tokio::time::sleep(backoff.delay()).await;
            }
            Err(_) => return None,
        }
    }
}
