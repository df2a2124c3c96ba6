//! Follows the node-wide ordered event stream and republishes it.
//!
//! One HTTP stream per node (`/v1/api/events/node`), resumed from the cursor kept in Redis
//! (`<boot>:<node_seq>` of the last event published). Each node event becomes one
//! [`Publication`]: an entry `<boot>-<node_seq>` in the workstream's capped stream plus the
//! compatible pub/sub messages (cluster spec §3.6, §3.8) — published only if the entry is
//! new, so replaying events after a crash or a reconnect publishes nothing twice.
//! `turn_complete` is the node's own event (with the send's `correlation_id`), never inferred.

use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;
use turnstone_proto::mq::{
    ApprovalRequestEvent, ClusterStateEvent, OutboundEvent, PlanReviewEvent, StateChangeEvent,
    WsClosedEvent, WsRenameEvent,
};
use turnstone_proto::sse::WsEvent;
use turnstone_queue::{Backoff, Publication};

use crate::{Ctx, WsFacts, lock};

/// What the bridge must do besides publishing, after the publication went out.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    AwaitApproval { request_id: String, ws_id: String },
    ApprovalResolved { ws_id: String },
    Closed { ws_id: String },
    Created { ws_id: String },
}

pub async fn run(ctx: Arc<Ctx>) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    while !ctx.cancel.is_cancelled() {
        let cursor = load_cursor(&ctx).await;
        let resp = match ctx.node.node_events(cursor).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "node event stream not open");
                tokio::select! {
                    _ = ctx.cancel.cancelled() => break,
                    _ = tokio::time::sleep(backoff.delay()) => {}
                }
                continue;
            }
        };
        ctx.metrics.inc(&ctx.metrics.event_stream_reconnects);
        let mut stream = resp.bytes_stream().eventsource().ready_chunks(512);
        let mut boot = cursor.map(|c| c.0).unwrap_or_default();
        let mut last_seq = cursor.map(|c| c.1).unwrap_or_default();
        loop {
            let chunk = tokio::select! {
                _ = ctx.cancel.cancelled() => return,
                c = stream.next() => c,
            };
            let Some(chunk) = chunk else { break };
            let mut batch = Vec::with_capacity(chunk.len());
            let mut effects = Vec::new();
            let mut broken = false;
            for item in chunk {
                let ev = match item {
                    Ok(ev) => ev,
                    Err(e) => {
                        tracing::debug!(error = %e, "node event stream broke");
                        broken = true;
                        break;
                    }
                };
                let Ok(data) = serde_json::from_str::<Value>(&ev.data) else {
                    continue;
                };
                let kind = data.get("type").and_then(Value::as_str).unwrap_or_default();
                if kind == "node_hello" {
                    let new_boot = data.get("boot").and_then(Value::as_u64).unwrap_or_default();
                    if new_boot != boot {
                        if boot != 0 {
                            tracing::info!(
                                old = boot,
                                new = new_boot,
                                "node restarted; following its new event log"
                            );
                        }
                        boot = new_boot;
                        last_seq = 0;
                    }
                    continue;
                }
                if kind == "events_truncated" {
                    tracing::error!(event = %data, "the node no longer holds some events the bridge had not published");
                    continue;
                }
                let Some(seq) = ev.id.trim().parse::<u64>().ok() else {
                    continue;
                };
                ctx.metrics.inc(&ctx.metrics.events_received);
                last_seq = last_seq.max(seq);
                let (publication, effect) = map_event(&ctx, boot, seq, &data);
                batch.extend(publication);
                effects.extend(effect);
            }
            publish_all(&ctx, &batch).await;
            for effect in effects {
                apply(&ctx, effect).await;
            }
            if boot != 0 {
                save_cursor(&ctx, boot, last_seq).await;
            }
            backoff.reset();
            if broken {
                break;
            }
        }
        tokio::select! {
            _ = ctx.cancel.cancelled() => break,
            _ = tokio::time::sleep(backoff.delay()) => {}
        }
    }
}

async fn publish_all(ctx: &Ctx, batch: &[Publication]) {
    if batch.is_empty() {
        return;
    }
    let mut backoff = Backoff::default();
    loop {
        let mut conn = ctx.redis.clone();
        match ctx.publisher.publish_batch(&mut conn, batch).await {
            Ok(fresh) => {
                ctx.metrics.add(&ctx.metrics.events_published, fresh as u64);
                ctx.metrics
                    .add(&ctx.metrics.events_replayed, (batch.len() - fresh) as u64);
                return;
            }
            Err(e) => {
                ctx.metrics.inc(&ctx.metrics.publish_errors);
                tracing::warn!(error = %e, "events not published yet; retrying");
                tokio::select! {
                    _ = ctx.cancel.cancelled() => return,
                    _ = tokio::time::sleep(backoff.delay()) => {}
                }
            }
        }
    }
}

async fn apply(ctx: &Ctx, effect: Effect) {
    let mut conn = ctx.redis.clone();
    match effect {
        Effect::AwaitApproval { request_id, ws_id } => {
            lock(&ctx.waits).insert(request_id, ws_id);
            crate::approvals::wake(ctx).await;
        }
        Effect::ApprovalResolved { ws_id } => {
            lock(&ctx.waits).retain(|_, w| *w != ws_id);
        }
        Effect::Closed { ws_id } => {
            lock(&ctx.waits).retain(|_, w| *w != ws_id);
            lock(&ctx.ws_facts).remove(&ws_id);
            if let Err(e) = ctx.leases.release(&mut conn, &ws_id, &ctx.node_id).await {
                tracing::warn!(ws_id, error = %e, "ownership lease not released (it runs out by itself)");
            }
        }
        Effect::Created { ws_id } => {
            if let Err(e) = ctx
                .leases
                .own(&mut conn, &ws_id, &ctx.node_id, ctx.cfg.lease_ttl)
                .await
            {
                tracing::warn!(ws_id, error = %e, "ownership lease not taken yet (the next refresh takes it)");
            }
        }
    }
}

async fn load_cursor(ctx: &Ctx) -> Option<(u64, u64)> {
    let mut conn = ctx.redis.clone();
    let raw: Option<String> = redis::cmd("GET")
        .arg(ctx.keys.bridge_cursor(&ctx.node_id))
        .query_async(&mut conn)
        .await
        .ok()
        .flatten();
    let (b, s) = raw?
        .split_once(':')
        .map(|(b, s)| (b.to_string(), s.to_string()))?;
    Some((b.parse().ok()?, s.parse().ok()?))
}

async fn save_cursor(ctx: &Ctx, boot: u64, seq: u64) {
    let mut conn = ctx.redis.clone();
    let r: Result<(), _> = redis::cmd("SET")
        .arg(ctx.keys.bridge_cursor(&ctx.node_id))
        .arg(format!("{boot}:{seq}"))
        .query_async(&mut conn)
        .await;
    if let Err(e) = r {
        // Harmless: a replay from an older cursor publishes nothing twice.
        tracing::debug!(error = %e, "event cursor not saved");
    }
}

fn facts(ctx: &Ctx, ws_id: &str) -> WsFacts {
    lock(&ctx.ws_facts).get(ws_id).cloned().unwrap_or_default()
}

/// The publication (and follow-up) of one node event; pure apart from the derived facts.
pub fn map_event(
    ctx: &Ctx,
    boot: u64,
    seq: u64,
    data: &Value,
) -> (Option<Publication>, Option<Effect>) {
    let ws_id = data
        .get("ws_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if ws_id.is_empty() {
        return (None, None);
    }
    let kind = data.get("type").and_then(Value::as_str).unwrap_or_default();
    let str_of = |k: &str| {
        data.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let k = &ctx.keys;
    let ws_channel = k.events_ws(ws_id);
    let mut effect = None;
    let events: Vec<(String, OutboundEvent)> = match kind {
        "state_change" => {
            let state = str_of("state");
            let f = facts(ctx, ws_id);
            let change: OutboundEvent = StateChangeEvent {
                ws_id: ws_id.to_string(),
                state: state.clone(),
                ..StateChangeEvent::default()
            }
            .into();
            let cluster: OutboundEvent = ClusterStateEvent {
                ws_id: ws_id.to_string(),
                state,
                node_id: ctx.node_id.clone(),
                tokens: f.tokens,
                context_ratio: f.context_ratio,
                activity: f.activity,
                activity_state: f.activity_state,
                ..ClusterStateEvent::default()
            }
            .into();
            vec![
                (ws_channel, change.clone()),
                (k.events_global(), change),
                (k.events_cluster(), cluster),
            ]
        }
        "activity" => {
            let mut map = lock(&ctx.ws_facts);
            let f = map.entry(ws_id.to_string()).or_default();
            f.activity = str_of("activity");
            f.activity_state = str_of("activity_state");
            return (None, None);
        }
        "approve_request" => {
            let request_id = str_of("request_id");
            let items = data
                .get("items")
                .cloned()
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default();
            effect = Some(Effect::AwaitApproval {
                request_id: request_id.clone(),
                ws_id: ws_id.to_string(),
            });
            let ev: OutboundEvent = ApprovalRequestEvent {
                ws_id: ws_id.to_string(),
                correlation_id: request_id,
                items,
                ..ApprovalRequestEvent::default()
            }
            .into();
            vec![(ws_channel, ev)]
        }
        "approval_resolved" | "plan_resolved" => {
            return (
                None,
                Some(Effect::ApprovalResolved {
                    ws_id: ws_id.to_string(),
                }),
            );
        }
        "plan_review" => {
            // Its reply (`plan_feedback` on `resp:{request_id}`) is relayed like an approval's.
            let request_id = str_of("request_id");
            if !request_id.is_empty() {
                effect = Some(Effect::AwaitApproval {
                    request_id,
                    ws_id: ws_id.to_string(),
                });
            }
            let ev: OutboundEvent = PlanReviewEvent {
                ws_id: ws_id.to_string(),
                correlation_id: str_of("request_id"),
                content: str_of("content"),
                ..PlanReviewEvent::default()
            }
            .into();
            vec![(ws_channel, ev)]
        }
        "ws_closed" => {
            effect = Some(Effect::Closed {
                ws_id: ws_id.to_string(),
            });
            let ev: OutboundEvent = WsClosedEvent {
                ws_id: ws_id.to_string(),
                ..WsClosedEvent::default()
            }
            .into();
            vec![(k.events_global(), ev.clone()), (k.events_cluster(), ev)]
        }
        "ws_rename" => {
            let ev: OutboundEvent = WsRenameEvent {
                ws_id: ws_id.to_string(),
                name: str_of("name"),
                ..WsRenameEvent::default()
            }
            .into();
            vec![(k.events_global(), ev.clone()), (k.events_cluster(), ev)]
        }
        "ws_created" => {
            return (
                None,
                Some(Effect::Created {
                    ws_id: ws_id.to_string(),
                }),
            );
        }
        _ => {
            let Ok(event) = WsEvent::from_value(data.clone()) else {
                return (None, None);
            };
            if let WsEvent::Status(s) = &event {
                let mut map = lock(&ctx.ws_facts);
                let f = map.entry(ws_id.to_string()).or_default();
                f.tokens = s.total_tokens;
                f.context_ratio = (s.pct / 100.0 * 1000.0).round() / 1000.0;
            }
            match OutboundEvent::from_ws_event(ws_id, &event) {
                Some(ev) => vec![(ws_channel, ev)],
                None => return (None, None),
            }
        }
    };
    let Some((_, first)) = events.first() else {
        return (None, effect);
    };
    let publication = Publication {
        stream: k.stream(ws_id),
        entry_id: format!("{boot}-{seq}"),
        event_type: kind.to_string(),
        event: first.encode(),
        channels: events
            .iter()
            .map(|(c, e)| (c.clone(), e.encode()))
            .collect(),
    };
    (Some(publication), effect)
}
