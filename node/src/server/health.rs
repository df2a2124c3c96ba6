//! `GET /health`: always 200 while the process runs; `status` says whether the model
//! backend is usable.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use turnstone_engine::WsState;
use turnstone_llm::BreakerState;
use turnstone_proto::api::{
    Health, HealthBackend, HealthEvents, HealthMcp, HealthWorkstreams, STATUS_OK,
};

use super::state::Node;

pub async fn health(State(node): State<Arc<Node>>) -> Json<Health> {
    let list = node.manager.list();
    let hibernated = node.manager.hibernated_len() as u64;
    let mut workstreams = HealthWorkstreams {
        total: list.len() as u64 + hibernated,
        // Only when hibernation is on: the original's shape otherwise.
        hibernated: node.manager.config().hibernate_after.map(|_| hibernated),
        ..HealthWorkstreams::default()
    };
    for w in &list {
        let count = match w.state() {
            WsState::Idle => &mut workstreams.idle,
            WsState::Thinking => &mut workstreams.thinking,
            WsState::Running => &mut workstreams.running,
            WsState::Attention => &mut workstreams.attention,
            WsState::Error => &mut workstreams.error,
            // A live workstream is never closed.
            WsState::Closed => continue,
        };
        *count += 1;
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
    // `mcp` only when an MCP client exists, as the original.
    let mcp = node.mcp().map(|m| {
        let c = m.counts();
        HealthMcp {
            servers: c.servers as u64,
            resources: c.resources as u64,
            prompts: c.prompts as u64,
            tools: Some(c.tools as u64),
            connected: Some(c.connected as u64),
        }
    });
    Json(Health {
        status: if up { STATUS_OK } else { "degraded" }.to_string(),
        version: node.options.version.clone(),
        node_id: node.options.node_id.clone(),
        uptime_seconds: uptime,
        model: node.options.model.clone(),
        max_ws: node.manager.config().max_workstreams as u64,
        workstreams,
        backend: HealthBackend {
            status: if up { "up" } else { "down" }.to_string(),
            circuit_state: circuit.to_string(),
        },
        events: Some(HealthEvents {
            node_seq: node.node_log.last_seq(),
            truncations: node.node_log.truncation_count(),
        }),
        event_loop_lag_ms: Some(lag_ms),
        last_turn_completed_age_seconds: Some(last_turn_age),
        mcp,
    })
}
