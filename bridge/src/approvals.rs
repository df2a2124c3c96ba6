//! Relays approval decisions from Redis to the node, without keeping approval state.
//!
//! The node holds every pending approval and decides each once. The bridge only knows which
//! response lists to watch — `{p}:resp:{request_id}` of the requests it published (and, after
//! a start or an outage, of what `GET /v1/api/approvals` lists) — and waits on all of them
//! with a single `BLPOP` on one dedicated connection, whatever their number. A wake list
//! interrupts the wait when a new request arrives. A decision the node cannot take yet is
//! put back at the head of its list.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde_json::Value;
use turnstone_proto::mq::InboundMessage;
use turnstone_queue::Backoff;

use crate::{Ctx, Reply, lock};

/// Makes the waiter re-block on the current set of response lists.
pub async fn wake(ctx: &Ctx) {
    let mut conn = ctx.redis.clone();
    let key = ctx.keys.bridge_wake(&ctx.node_id);
    let r: Result<(), _> = redis::pipe()
        .cmd("RPUSH")
        .arg(&key)
        .arg("1")
        .ignore()
        .cmd("EXPIRE")
        .arg(&key)
        .arg(60)
        .ignore()
        .query_async(&mut conn)
        .await;
    if let Err(e) = r {
        tracing::debug!(error = %e, "approval waiter not woken (it re-blocks within 5 s)");
    }
}

async fn load_pending(ctx: &Ctx) -> bool {
    let Reply::Accepted(body) = ctx.node.get("/v1/api/approvals").await else {
        return false;
    };
    let rows = body
        .get("approvals")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut waits = lock(&ctx.waits);
    for row in rows {
        let ws = row.get("ws_id").and_then(Value::as_str).unwrap_or_default();
        let req = row
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !ws.is_empty() && !req.is_empty() {
            waits.insert(req.to_string(), ws.to_string());
        }
    }
    true
}

pub async fn run(ctx: Arc<Ctx>) {
    let pop = Duration::from_secs(5);
    let mut conn: Option<MultiplexedConnection> = None;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let mut loaded_epoch = u64::MAX;
    let resp_prefix = ctx.keys.response("");
    let wake_key = ctx.keys.bridge_wake(&ctx.node_id);
    while !ctx.cancel.is_cancelled() {
        let epoch = ctx.current_epoch();
        if ctx.is_up() && epoch != loaded_epoch && load_pending(&ctx).await {
            loaded_epoch = epoch;
        }
        let Some(c) = conn.as_mut() else {
            match turnstone_queue::conn::blocking_connection(&ctx.client, pop).await {
                Ok(c) => {
                    conn = Some(c);
                    backoff.reset();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "approval waiter cannot reach redis");
                    tokio::select! {
                        _ = ctx.cancel.cancelled() => break,
                        _ = tokio::time::sleep(backoff.delay()) => {}
                    }
                }
            }
            continue;
        };
        let mut keys: Vec<String> = lock(&ctx.waits)
            .keys()
            .map(|r| ctx.keys.response(r))
            .collect();
        keys.sort();
        keys.push(wake_key.clone());
        let mut blpop = redis::cmd("BLPOP");
        blpop.arg(&keys).arg(pop.as_secs());
        let popped: Result<Option<(String, String)>, _> = tokio::select! {
            _ = ctx.cancel.cancelled() => break,
            r = blpop.query_async(c) => r,
        };
        let (key, value) = match popped {
            Ok(Some(kv)) => kv,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "approval wait failed; reconnecting");
                conn = None;
                continue;
            }
        };
        if key == wake_key {
            continue;
        }
        let Some(request_id) = key.strip_prefix(&resp_prefix).map(str::to_string) else {
            continue;
        };
        let ws_id = lock(&ctx.waits).get(&request_id).cloned();
        let Some(ws_id) = ws_id else { continue };
        if !relay(&ctx, &ws_id, &request_id, &value).await {
            // The node cannot take it now: put it back first in line and wait a little.
            let mut m = ctx.redis.clone();
            let _: Result<(), _> = redis::cmd("LPUSH")
                .arg(&key)
                .arg(&value)
                .query_async(&mut m)
                .await;
            tokio::select! {
                _ = ctx.cancel.cancelled() => break,
                _ = tokio::time::sleep(backoff.delay()) => {}
            }
        }
    }
}

/// Hands one reply to the node; `false` when it must be retried later.
async fn relay(ctx: &Ctx, ws_id: &str, request_id: &str, raw: &str) -> bool {
    let reply = match InboundMessage::decode(raw.as_bytes()) {
        Ok(InboundMessage::PlanFeedback(p)) => {
            ctx.node
                .post("/v1/api/plan", &serde_json::json!({"ws_id": ws_id, "feedback": p.feedback, "request_id": request_id}))
                .await
        }
        Ok(InboundMessage::Approve(a)) => {
            ctx.node
                .approve(ws_id, request_id, a.approved, a.feedback.as_deref(), a.always)
                .await
        }
        // Any other message on a response list counts as a denial (cluster spec §3.7).
        Ok(_) => ctx.node.approve(ws_id, request_id, false, Some("Unexpected reply type"), false).await,
        Err(e) => {
            ctx.dead_letter(&format!("unreadable approval reply: {e}"), raw, request_id).await;
            ctx.node.approve(ws_id, request_id, false, Some("Unreadable approval reply"), false).await
        }
    };
    match reply {
        Reply::Accepted(_) => {
            ctx.metrics.inc(&ctx.metrics.approvals_relayed);
            lock(&ctx.waits).remove(request_id);
            true
        }
        Reply::Rejected { status, error, .. } => {
            // 409: decided already (first decision wins); 404: the workstream is gone.
            tracing::info!(request_id, status, error, "approval reply not applied");
            if status != 409 {
                ctx.dead_letter(
                    &format!("approval reply refused by the node: {error}"),
                    raw,
                    request_id,
                )
                .await;
            }
            lock(&ctx.waits).remove(request_id);
            true
        }
        Reply::Unavailable(e) => {
            ctx.metrics.inc(&ctx.metrics.node_retries);
            tracing::warn!(request_id, error = %e, "node unavailable for an approval; will retry");
            false
        }
    }
}
