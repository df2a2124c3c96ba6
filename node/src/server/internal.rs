//! `/v1/api/_internal/*`: the console's admin fan-out (cluster spec §4.7) — MCP status and
//! reload. Reload needs the approve scope (checked by the auth layer, as every route).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::error::ApiError;
use super::state::Node;

/// `GET /v1/api/_internal/mcp-status` → `{"servers": {name: status}}` (empty without MCP).
pub async fn mcp_status(State(node): State<Arc<Node>>) -> Json<Value> {
    let servers = match node.mcp() {
        Some(m) => serde_json::to_value(m.status()).unwrap_or_else(|_| json!({})),
        None => json!({}),
    };
    Json(json!({ "servers": servers }))
}

/// `POST /v1/api/_internal/mcp-reload` — rediscovers every server's tools, resources and
/// prompts. `{"status":"ok"}`; `503` when a server cannot be refreshed now.
pub async fn mcp_reload(State(node): State<Arc<Node>>) -> Result<Json<Value>, ApiError> {
    if let Some(m) = node.mcp() {
        m.refresh(None)
            .await
            .map_err(|e| ApiError::Unavailable(format!("MCP refresh failed: {e}")))?;
    }
    Ok(Json(json!({"status": "ok"})))
}

/// `GET /v1/api/_internal/mcp-status` reply: server name → status object.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct McpStatusReply {
    pub servers: std::collections::BTreeMap<String, serde_json::Map<String, Value>>,
}

/// `GET /v1/api/approvals` reply: the pending `approve_request` events, each with `ws_id`,
/// `ws_seq` and `request_id`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct PendingApprovals {
    pub approvals: Vec<serde_json::Map<String, Value>>,
}

/// `GET /v1/api/tools?ws_id=` (ours) — the exact tool array of the workstream's latest
/// prepared model request: names, byte count, SHA-256 of the JSON array, resident vs
/// deferred, provenance. Kept beside the conversation, never in it. `404` for an unknown
/// workstream; `{"prepared": null}` before its first request.
pub async fn prepared_tools(
    State(node): State<Arc<Node>>,
    axum::extract::Query(q): axum::extract::Query<WsIdQuery>,
) -> Result<Json<Value>, ApiError> {
    let ws = node
        .workstream(&q.ws_id)
        .ok_or_else(ApiError::unknown_workstream)?;
    let prepared = ws
        .prepared_tools()
        .map(|p| serde_json::to_value(p).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    Ok(Json(json!({"ws_id": ws.id(), "prepared": prepared})))
}

#[derive(Debug, serde::Deserialize)]
pub struct WsIdQuery {
    #[serde(default)]
    ws_id: String,
}

/// `GET /v1/api/tools` reply.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct PreparedToolsReply {
    pub ws_id: String,
    /// `null` before the first request; else `{turn, step, tools: [...], bytes, sha256, ...}`.
    pub prepared: Option<serde_json::Map<String, Value>>,
}
