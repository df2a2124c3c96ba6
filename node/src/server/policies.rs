//! Tool policies and judge verdicts over HTTP, and the policies the engine applies.
//!
//! * `/v1/api/admin/policies` — operators' CRUD of tool policies (GET list, POST create,
//!   PUT `/{policy_id}` update, DELETE `/{policy_id}`), permission `admin.policies` (approve
//!   scope). Stored in `tool_policies` (both backends); 503 without storage.
//! * `GET /v1/api/admin/verdicts` — the recorded heuristic verdicts, newest first, with the
//!   human decision once made (permission `admin.judge`).
//! * `[[policies]]` of `config.toml` ([`ConfigPolicy`]): read-only policies the file owns.
//!   They are not copied into the database (the file stays their one source: editing the
//!   file and restarting changes them, nothing else does); they are listed with
//!   `source: "config"` and refused (403) by PUT and DELETE. They work without storage.
//! * [`PolicyRegistry::refresh`] builds one [`PolicySet`] from the config-file policies and
//!   the stored ones and hands it to the engine, at start and after every change through
//!   these routes, and every [`POLICY_REFRESH_INTERVAL`] (a change made through another node
//!   sharing the database). Equal priorities keep config-file policies first.
//!
//! It must not know SQL; storage is the store's `ToolPolicyStore` and `VerdictStore`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Extension, Json, Router};
use parking_lot::RwLock;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnstone_accounts::policies::{
    self as shared, CONFIG_POLICY_PREFIX, DeletePolicyReply, PolicyBody, PolicyList, PolicyRow,
    check_fields,
};
use turnstone_governance::{PolicyAction, PolicySet, RiskLevel, ToolPolicy};
use turnstone_runtime::auth::Identity;
use turnstone_store::{IntentVerdictRecord, StoreError, ToolPolicyRecord, VerdictFilter};

use super::body::WireJson;
use super::error::ApiError;
use super::state::Node;

/// How often a node re-reads the stored policies, so a change made through another node
/// sharing the database applies here too (a change through this node applies at once).
pub const POLICY_REFRESH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// One `[[policies]]` entry of `config.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigPolicy {
    pub name: String,
    pub tool_pattern: String,
    /// `allow`, `deny` or `ask`.
    pub action: String,
    #[serde(default)]
    pub priority: i64,
    #[serde(default = "enabled_default")]
    pub enabled: bool,
}

fn enabled_default() -> bool {
    true
}

impl ConfigPolicy {
    /// Checks the entry as the admin API checks a body (same messages).
    pub fn check(&self) -> Result<(), String> {
        check_fields(
            Some(&self.name),
            Some(&self.tool_pattern),
            Some(&self.action),
            Some(self.priority),
        )
    }

    fn to_policy(&self) -> ToolPolicy {
        ToolPolicy {
            policy_id: format!("{CONFIG_POLICY_PREFIX}{}", self.name.trim()),
            name: self.name.trim().to_owned(),
            tool_pattern: self.tool_pattern.trim().to_owned(),
            action: PolicyAction::parse_lenient(&self.action),
            priority: self.priority,
            enabled: self.enabled,
        }
    }
}

/// The node's policies: the config file's (fixed at start) and, through the store, the
/// admin's; the owner of the engine's policy snapshot.
#[derive(Debug, Default)]
pub struct PolicyRegistry {
    config: RwLock<Vec<ConfigPolicy>>,
    /// Serialises refreshes, so two changes in a row cannot install their snapshots out of
    /// order.
    refreshing: tokio::sync::Mutex<()>,
}

impl PolicyRegistry {
    /// Sets the config-file policies (at start); call [`PolicyRegistry::refresh`] after.
    pub fn set_config(&self, policies: Vec<ConfigPolicy>) {
        *self.config.write() = policies;
    }

    /// Rebuilds the engine's policy set from the config file and the store. A store that
    /// cannot be read keeps the previous set (and says so), rather than dropping every deny.
    pub async fn refresh(node: &Node) -> Result<(), ApiError> {
        let _one_at_a_time = node.policies.refreshing.lock().await;
        let mut policies: Vec<ToolPolicy> = node
            .policies
            .config
            .read()
            .iter()
            .map(ConfigPolicy::to_policy)
            .collect();
        if let Some(store) = node.store() {
            let stored = store.list_tool_policies(None).await.map_err(|e| {
                tracing::error!(error = %e, "tool policies not read; the previous set stays");
                storage_failed(e)
            })?;
            policies.extend(stored.iter().map(record_policy));
        }
        let set = PolicySet::new(policies);
        node.manager.engine().set_policies(Arc::new(set));
        Ok(())
    }
}

impl PolicyRegistry {
    /// At start, before any turn: the config file's policies and the stored ones go to the
    /// engine, and with storage the node follows later changes made elsewhere
    /// ([`POLICY_REFRESH_INTERVAL`]). A store that cannot be read is an error: better no
    /// start than a start without the operator's denials.
    pub async fn install(node: &Arc<Node>, config: Vec<ConfigPolicy>) -> Result<(), ApiError> {
        node.policies.set_config(config);
        Self::refresh(node).await?;
        if node.store().is_some() {
            Self::follow_store(node, POLICY_REFRESH_INTERVAL);
        }
        Ok(())
    }

    /// Refreshes the engine's policies every `interval` for as long as the node lives.
    pub fn follow_store(node: &Arc<Node>, interval: std::time::Duration) {
        node.every(interval, |node| async move {
            // A failure keeps the previous set and is logged by `refresh`.
            let _ = Self::refresh(&node).await;
        });
    }
}

fn record_policy(r: &ToolPolicyRecord) -> ToolPolicy {
    ToolPolicy {
        policy_id: r.policy_id.clone(),
        name: r.name.clone(),
        tool_pattern: r.tool_pattern.clone(),
        action: PolicyAction::parse_lenient(&r.action),
        priority: r.priority,
        enabled: r.enabled,
    }
}

impl From<&ConfigPolicy> for PolicyRow {
    fn from(c: &ConfigPolicy) -> Self {
        let p = c.to_policy();
        Self {
            policy_id: p.policy_id,
            name: p.name,
            tool_pattern: p.tool_pattern,
            action: p.action.as_str().into(),
            priority: p.priority,
            org_id: String::new(),
            enabled: p.enabled,
            created_by: "config".into(),
            created: String::new(),
            updated: String::new(),
            source: "config".into(),
        }
    }
}

/// `GET /v1/api/admin/verdicts`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VerdictList {
    pub verdicts: Vec<VerdictRow>,
}

/// One row of `intent_verdicts`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VerdictRow {
    pub verdict_id: String,
    pub ws_id: String,
    pub call_id: String,
    pub func_name: String,
    /// The call's arguments as a JSON string.
    pub func_args: String,
    pub intent_summary: String,
    /// `none`, `low`, `medium`, `high` or `critical`.
    pub risk_level: String,
    pub confidence: f64,
    /// `approve`, `review` or `deny`.
    pub recommendation: String,
    pub reasoning: String,
    pub evidence: Vec<String>,
    /// `heuristic` (the LLM tier is not built).
    pub tier: String,
    pub judge_model: String,
    /// `""` until decided, then `approved` or `denied`.
    pub user_decision: String,
    pub latency_ms: i64,
    pub created: String,
}

impl From<IntentVerdictRecord> for VerdictRow {
    fn from(r: IntentVerdictRecord) -> Self {
        Self {
            verdict_id: r.verdict_id,
            ws_id: r.ws_id,
            call_id: r.call_id,
            func_name: r.func_name,
            func_args: r.func_args,
            intent_summary: r.intent_summary,
            risk_level: r.risk_level,
            confidence: r.confidence,
            recommendation: r.recommendation,
            reasoning: r.reasoning,
            evidence: r.evidence,
            tier: r.tier,
            judge_model: r.judge_model,
            user_decision: r.user_decision,
            latency_ms: r.latency_ms,
            created: r.created,
        }
    }
}

/// The routes of this module (under `/v1`).
pub fn routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/api/admin/policies", get(list).post(create))
        .route(
            "/api/admin/policies/{policy_id}",
            put(update).delete(delete),
        )
        .route("/api/admin/verdicts", get(verdicts))
}

fn storage_failed(e: StoreError) -> ApiError {
    tracing::warn!(error = %e, "policy storage failed");
    ApiError::Internal("Storage error".to_string())
}

/// `GET /v1/api/admin/policies`: config-file and stored policies, in evaluation order.
pub async fn list(State(node): State<Arc<Node>>) -> Result<Json<PolicyList>, ApiError> {
    let mut rows: Vec<PolicyRow> = node
        .policies
        .config
        .read()
        .iter()
        .map(PolicyRow::from)
        .collect();
    if let Some(store) = node.store() {
        rows.extend(shared::list_stored(&store).await?);
    }
    // The engine's order: priority descending, stable.
    rows.sort_by_key(|r| std::cmp::Reverse(r.priority));
    Ok(Json(PolicyList { policies: rows }))
}

/// `POST /v1/api/admin/policies`: 201 with the row.
pub async fn create(
    State(node): State<Arc<Node>>,
    identity: Option<Extension<Identity>>,
    WireJson(body): WireJson<PolicyBody>,
) -> Result<Response, ApiError> {
    shared::checked(&body)?;
    let store = super::memories::store(&node)?;
    let created_by = identity.map(|Extension(i)| i.user_id).unwrap_or_default();
    let row = shared::create(&store, &body, created_by).await?;
    PolicyRegistry::refresh(&node).await?;
    Ok((StatusCode::CREATED, Json(row)).into_response())
}

/// `PUT /v1/api/admin/policies/{policy_id}`: changes the given fields; 404 unknown, 403
/// for a config-file policy.
pub async fn update(
    State(node): State<Arc<Node>>,
    Path(policy_id): Path<String>,
    WireJson(body): WireJson<PolicyBody>,
) -> Result<Json<PolicyRow>, ApiError> {
    shared::read_only(&policy_id)?;
    shared::checked(&body)?;
    let store = super::memories::store(&node)?;
    let row = shared::update(&store, &policy_id, &body).await?;
    PolicyRegistry::refresh(&node).await?;
    Ok(Json(row))
}

/// `DELETE /v1/api/admin/policies/{policy_id}`: 404 unknown, 403 for a config-file policy.
pub async fn delete(
    State(node): State<Arc<Node>>,
    Path(policy_id): Path<String>,
) -> Result<Json<DeletePolicyReply>, ApiError> {
    shared::read_only(&policy_id)?;
    let store = super::memories::store(&node)?;
    let reply = shared::delete(&store, &policy_id).await?;
    PolicyRegistry::refresh(&node).await?;
    Ok(Json(reply))
}

/// Largest `limit` of the verdict list.
const MAX_VERDICTS: usize = 1000;

/// `GET /v1/api/admin/verdicts?ws_id=&risk_level=&since=&until=&limit=&offset=`.
pub async fn verdicts(
    State(node): State<Arc<Node>>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<VerdictList>, ApiError> {
    let mut filter = VerdictFilter::default();
    for (key, value) in &query {
        let number = |what: &str| -> Result<usize, ApiError> {
            value.trim().parse::<usize>().map_err(|_| {
                ApiError::BadRequest(format!(
                    "{what} must be a non-negative integer, not {value:?}"
                ))
            })
        };
        match key.as_str() {
            "ws_id" => filter.ws_id = Some(value.clone()).filter(|v| !v.is_empty()),
            "risk_level" => {
                if RiskLevel::parse(value).is_none() {
                    return Err(ApiError::BadRequest(format!(
                        "risk_level must be none, low, medium, high or critical, not {value:?}"
                    )));
                }
                filter.risk_level = Some(value.clone());
            }
            "since" => filter.since = Some(value.clone()),
            "until" => filter.until = Some(value.clone()),
            "limit" => {
                let limit = number("limit")?;
                if !(1..=MAX_VERDICTS).contains(&limit) {
                    return Err(ApiError::BadRequest(format!(
                        "limit must be between 1 and {MAX_VERDICTS}, not {limit}"
                    )));
                }
                filter.limit = limit;
            }
            "offset" => filter.offset = number("offset")?,
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {other:?}"
                )));
            }
        }
    }
    let store = super::memories::store(&node)?;
    let rows = store
        .list_intent_verdicts(&filter)
        .await
        .map_err(storage_failed)?;
    Ok(Json(VerdictList {
        verdicts: rows.into_iter().map(VerdictRow::from).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_policies_get_stable_read_only_ids() {
        let c = ConfigPolicy {
            name: " no-mcp ".into(),
            tool_pattern: "mcp__*".into(),
            action: "deny".into(),
            priority: 3,
            enabled: true,
        };
        let row = PolicyRow::from(&c);
        assert_eq!(row.policy_id, "config:no-mcp");
        assert_eq!(row.source, "config");
        assert!(shared::read_only(&row.policy_id).is_err());
    }
}
