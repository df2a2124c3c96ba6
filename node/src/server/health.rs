//! `GET /health`: always 200 while the process runs; `status` says whether the model
//! backend is usable.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use turnstone_engine::WsState;
use turnstone_llm::BreakerState;

use super::state::Node;

pub async fn health(State(node): State<Arc<Node>>) -> Json<Value> {
    let mut counts = [0u64; 5];
    let list = node.manager.list();
    for w in &list {
        let i = match w.state() {
            WsState::Idle => 0,
            WsState::Thinking => 1,
            WsState::Running => 2,
            WsState::Attention => 3,
            WsState::Error => 4,
        };
        counts[i] += 1;
    }
    let breaker = node.manager.engine().provider().breaker().state();
    let (circuit, up) = match breaker {
        BreakerState::Closed => ("closed", true),
        BreakerState::Open => ("open", false),
        BreakerState::HalfOpen => ("half_open", false),
    };
    let uptime = (node.uptime().as_secs_f64() * 100.0).round() / 100.0;
    // Proof of progress: how late a 100 ms timer fires, and how long since a turn ended.
    let lag_ms = (node.metrics.event_loop_lag().as_secs_f64() * 100_000.0).round() / 100.0;
    let last_turn_age = node
        .metrics
        .last_turn_completed_age()
        .map(|age| (age.as_secs_f64() * 100.0).round() / 100.0);
    let mut body = json!({
        "status": if up { "ok" } else { "degraded" },
        "version": node.options.version,
        "node_id": node.options.node_id,
        "uptime_seconds": uptime,
        "model": node.options.model,
        "max_ws": node.manager.config().max_workstreams,
        "workstreams": {
            "total": list.len(),
            "idle": counts[0],
            "thinking": counts[1],
            "running": counts[2],
            "attention": counts[3],
            "error": counts[4],
        },
        "backend": {"status": if up { "up" } else { "down" }, "circuit_state": circuit},
        "events": {
            "node_seq": node.node_log.last_seq(),
            "truncations": node.node_log.truncation_count(),
        },
        "event_loop_lag_ms": lag_ms,
        "last_turn_completed_age_seconds": last_turn_age,
    });
    // `mcp` only when an MCP client exists, as the original.
    if let (Some(m), Some(o)) = (node.mcp(), body.as_object_mut()) {
        let c = m.counts();
        o.insert(
            "mcp".into(),
            json!({"servers": c.servers, "resources": c.resources, "prompts": c.prompts, "tools": c.tools, "connected": c.connected}),
        );
    }
    Json(body)
}
