//! Workstream routes: list, dashboard, create, close.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use turnstone_engine::{CreateOptions, ManagerError, WsState};
use turnstone_proto::api::{CloseWorkstreamBody, CreateWorkstreamBody};

use super::body::WireJson;
use super::error::ApiError;
use super::state::Node;
use super::views;

/// `GET /v1/api/workstreams` — live workstreams in creation order.
pub async fn list(State(node): State<Arc<Node>>) -> Json<Value> {
    let rows: Vec<Value> = node
        .manager
        .list()
        .iter()
        .map(|w| json!({"id": w.id(), "name": w.name(), "state": w.state()}))
        .collect();
    Json(json!({ "workstreams": rows }))
}

/// `GET /v1/api/dashboard` — enriched rows and aggregates (node spec §1.3.4).
pub async fn dashboard(State(node): State<Arc<Node>>) -> Json<Value> {
    let list = node.manager.list();
    let mut total_tokens = 0;
    let mut total_tool_calls = 0;
    let mut active = 0;
    let rows: Vec<Value> = list
        .iter()
        .map(|w| {
            let (activity, activity_state) = w.activity();
            total_tokens += w.tokens_total();
            total_tool_calls += w.tool_calls_total();
            if w.state() != WsState::Idle {
                active += 1;
            }
            json!({
                "id": w.id(),
                "name": w.name(),
                "state": w.state(),
                "title": "",
                "tokens": w.tokens_total(),
                "context_ratio": (views::context_ratio(&node, w) * 1000.0).round() / 1000.0,
                "activity": activity,
                "activity_state": activity_state,
                "tool_calls": w.tool_calls_total(),
                "node": "local",
                "model": node.options.model,
                "model_alias": node.options.model_alias,
            })
        })
        .collect();
    Json(json!({
        "workstreams": rows,
        "aggregate": {
            "total_tokens": total_tokens,
            "total_tool_calls": total_tool_calls,
            "active_count": active,
            "total_count": list.len(),
            "uptime_seconds": node.uptime().as_secs(),
            "node": "local",
        }
    }))
}

/// `POST /v1/api/workstreams/new`.
pub async fn create(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<CreateWorkstreamBody>,
) -> Result<Json<Value>, ApiError> {
    if !body.resume_ws.is_empty() {
        return Err(ApiError::Unavailable(
            "Resuming a saved workstream needs persistence, which this node does not have yet"
                .into(),
        ));
    }
    if !body.skill.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "Skill not found or disabled: {}",
            body.skill
        )));
    }
    let options = CreateOptions {
        name: Some(body.name.clone()).filter(|n| !n.is_empty()),
        skip_permissions: body.auto_approve.then_some(true),
        ..CreateOptions::default()
    };
    let ws = node.create_workstream(options).map_err(|e| match e {
        ManagerError::AllActive(_) => ApiError::BadRequest(e.to_string()),
        other => ApiError::BadRequest(other.to_string()),
    })?;
    Ok(Json(json!({
        "ws_id": ws.id(),
        "name": ws.name(),
        "resumed": false,
        "message_count": ws.history().len(),
    })))
}

/// `POST /v1/api/workstreams/close` — 400 `Cannot close last workstream` for the last one
/// and for unknown ids, as the original.
pub async fn close(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<CloseWorkstreamBody>,
) -> Result<Json<Value>, ApiError> {
    match node.manager.close(&body.ws_id) {
        Ok(()) => Ok(Json(json!({"status": "ok"}))),
        Err(_) => Err(ApiError::BadRequest("Cannot close last workstream".into())),
    }
}
