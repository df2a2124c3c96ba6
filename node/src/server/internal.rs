//! `/v1/api/_internal/*`: the console's admin fan-out (cluster spec §4.7) — MCP status and
//! reload, model status. Reload needs the approve scope (checked by the auth layer, as every
//! route). `config-reload` and `model-reload` are `super::cluster_settings`'.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::body::WireJson;
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

/// `POST /v1/api/_internal/release` — another node owns the workstream now (its bridge
/// found the lease moved while this node was down or cut off): this node's copy leaves
/// memory and listings, not closed, so consumers see it once, on its owner. The store row
/// stays; the owner adopted it if the store is shared. `409` while it is busy (asked again
/// at the bridge's next lease refresh).
pub async fn release(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<turnstone_proto::api::ReleaseBody>,
) -> Result<Json<Value>, ApiError> {
    if body.ws_id.is_empty() {
        return Err(ApiError::BadRequest("ws_id is required".into()));
    }
    match node
        .manager
        .release(&body.ws_id, |ws| node.queues.len(ws.id()) > 0)
    {
        Ok(true) => {
            tracing::info!(ws_id = %body.ws_id, owner = %body.owner, "workstream released: another node owns it now");
            Ok(Json(json!({"status": "ok"})))
        }
        Ok(false) => Err(ApiError::Conflict {
            message: "Workstream is busy; not released".into(),
            detail: json!({}),
        }),
        Err(_) => Err(ApiError::unknown_workstream()),
    }
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
    let ws = node.resolve(&q.ws_id).await?;
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

/// Applies a change to a workstream's tool intent (checked: `400` naming what is wrong),
/// announces a plan-mode change, and persists the new intent (`503` when storage fails).
/// The one path of `POST /v1/api/tools`, `/plan`, `/persona` and a create's `persona`.
pub(crate) async fn change_tool_intent(
    node: &Node,
    ws: &turnstone_engine::WorkstreamHandle,
    change: &Value,
) -> Result<turnstone_tools::toolset::ToolIntent, ApiError> {
    let was_plan = ws.plan_mode();
    let intent = ws
        .update_tool_intent(change)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    if intent.is_plan() != was_plan {
        ws.announce_plan_mode();
    }
    if let Some(p) = &node.persistence
        && let Err(e) = p
            .store
            .set_config(ws.id(), "tool_intent", Some(&intent.to_json()))
            .await
    {
        return Err(ApiError::Unavailable(format!("Storage unavailable: {e}")));
    }
    Ok(intent)
}

/// `POST /v1/api/tools` (ours) — changes a workstream's tool-set *intent* (seed 002): a
/// partial object of `enabled`, `disabled`, `allowed`, `toolset`, `web_search`, `only`,
/// `plan`, `persona` (`null` clears a key). The intent is stored (never a materialised list) and applies from the next turn;
/// it survives a resume when the node persists. `400` names what is wrong.
pub async fn set_tools(
    State(node): State<Arc<Node>>,
    super::body::WireJson(body): super::body::WireJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let ws_id = body
        .get("ws_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let ws = node.resolve(ws_id).await?;
    let change = body
        .get("intent")
        .filter(|c| c.is_object())
        .ok_or_else(|| ApiError::BadRequest("intent must be a JSON object".into()))?;
    let intent = change_tool_intent(&node, &ws, change).await?;
    let intent_json: Value = serde_json::from_str(&intent.to_json()).unwrap_or(Value::Null);
    Ok(Json(json!({"ws_id": ws.id(), "intent": intent_json})))
}

/// `POST /v1/api/tools` body.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct SetToolsBody {
    pub ws_id: String,
    /// Partial intent: `enabled`, `disabled`, `allowed`, `toolset`, `web_search`, `only`,
    /// `plan` (`true`: plan mode, read-only tools only), `persona` (a configured persona).
    pub intent: serde_json::Map<String, Value>,
}

/// `POST /v1/api/tools` reply.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SetToolsReply {
    pub ws_id: String,
    pub intent: serde_json::Map<String, Value>,
}

/// One alias of `GET /v1/api/_internal/model-status`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct ModelStatus {
    pub model: String,
    /// `openai` or `anthropic`.
    pub provider: String,
    /// `config` (from `[models.*]`), `db` (a stored model definition); empty for the node's
    /// single `--model`.
    pub source: String,
    /// Tokens; the engine's measured window for the single model.
    pub context_window: u32,
    pub enabled: bool,
}

/// `GET /v1/api/_internal/model-status`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct ModelStatusReply {
    pub models: std::collections::BTreeMap<String, ModelStatus>,
}

/// `GET /v1/api/_internal/model-status`: every alias with its model, provider and context
/// window (the console's model fan-out reads it).
pub async fn model_status(State(node): State<Arc<Node>>) -> Json<ModelStatusReply> {
    let engine = node.manager.engine();
    let mut models = std::collections::BTreeMap::new();
    match engine.config().models.clone() {
        Some(registry) => {
            for alias in registry.aliases() {
                let Ok(m) = registry.get(alias) else { continue };
                models.insert(
                    alias.to_string(),
                    ModelStatus {
                        model: m.entry.model.clone(),
                        provider: super::memories::provider_name(m.entry.provider).to_string(),
                        source: if node.cluster_settings.is_stored_alias(alias) {
                            "db".to_string()
                        } else {
                            "config".to_string()
                        },
                        context_window: m
                            .entry
                            .context_window
                            .unwrap_or_else(|| engine.context_window()),
                        enabled: true,
                    },
                );
            }
        }
        None => {
            let alias = if node.options.model_alias.is_empty() {
                "default".to_string()
            } else {
                node.options.model_alias.clone()
            };
            models.insert(
                alias,
                ModelStatus {
                    model: node.options.model.clone(),
                    provider: "openai".to_string(),
                    source: String::new(),
                    context_window: engine.context_window(),
                    enabled: true,
                },
            );
        }
    }
    Json(ModelStatusReply { models })
}
