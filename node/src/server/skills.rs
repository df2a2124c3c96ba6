//! Skills over HTTP and on workstreams.
//!
//! * `GET /v1/api/skills` — the enabled skills' summary (node spec §1.3.13); 503 without
//!   storage.
//! * `/v1/api/admin/skills` — operators' CRUD (GET list, POST create, PUT `/{name}` update,
//!   DELETE `/{name}`); the auth layer requires the approve scope for every `/api/admin/`
//!   path. MCP-synced skills (`readonly`) are refused with 403, as the original; creating a
//!   manual skill with the name of an MCP-synced one replaces it (the manual skill wins, and
//!   [`crate::mcp_skills`] then skips that prompt).
//! * Activation: [`activate`], [`clear`] and [`restore`] make a stored skill the active skill
//!   of a live workstream (the engine renders it into the system prompt) and persist the
//!   choice as the session config key `skill`, so a resumed session gets it back. Used by
//!   `POST /v1/api/workstreams/new` with `skill`, the `/skill` command and the `skill` tool.
//!   The skill's `model`, `temperature`, `max_tokens` and `reasoning_effort` apply to the
//!   workstream's requests while it is active ([`overrides_of`]); clearing it removes them.
//!
//! It must not know SQL; storage is the store's [`SkillStore`](turnstone_store::SkillStore).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Extension, Json, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use turnstone_accounts::skills as shared;
pub use turnstone_accounts::skills::DeleteSkillReply;
use turnstone_engine::{ActiveSkill, Engine, RequestOverrides, WorkstreamHandle};
use turnstone_runtime::auth::Identity;
use turnstone_store::{Skill, Store, StoreError};

use super::body::WireJson;
use super::error::ApiError;
use super::state::Node;

/// The session config key that holds the active skill's name.
pub const SKILL_CONFIG_KEY: &str = "skill";

/// Why a skill could not be activated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// No enabled skill of this name.
    #[error("Skill not found or disabled: {0}")]
    NotFound(String),
    /// The node runs without persistence.
    #[error("Storage not available")]
    NoStorage,
    #[error("Storage error: {0}")]
    Storage(String),
}

impl From<SkillError> for ApiError {
    fn from(e: SkillError) -> Self {
        match e {
            SkillError::NotFound(_) => ApiError::BadRequest(e.to_string()),
            SkillError::NoStorage => ApiError::Unavailable(e.to_string()),
            SkillError::Storage(_) => ApiError::Internal(e.to_string()),
        }
    }
}

fn storage(e: StoreError) -> SkillError {
    tracing::warn!(error = %e, "skill storage failed");
    SkillError::Storage(e.to_string())
}

/// One skill of `GET /v1/api/skills`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SkillInfo {
    pub name: String,
    pub category: String,
    pub description: String,
    pub tags: Vec<String>,
    pub is_default: bool,
    /// `named`, `default` or `search`.
    pub activation: String,
    /// `manual` or `mcp`.
    pub origin: String,
    pub author: String,
    pub version: String,
}

impl From<&Skill> for SkillInfo {
    fn from(s: &Skill) -> Self {
        Self {
            name: s.spec.name.clone(),
            category: s.spec.category.clone(),
            description: s.spec.description.clone(),
            tags: s.spec.tags.clone(),
            is_default: s.spec.is_default,
            activation: s.spec.activation.clone(),
            origin: s.spec.origin.clone(),
            author: s.spec.author.clone(),
            version: s.spec.version.clone(),
        }
    }
}

/// `GET /v1/api/skills`: enabled skills, highest priority first.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SkillList {
    pub skills: Vec<SkillInfo>,
}

/// The body of the admin create (`name` and `content` required) and update (any subset;
/// the rest keeps its value). Unknown keys are refused; `template_id`, `created` and
/// `updated` are ignored (so a row read from the list can be sent back).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default)]
#[allow(dead_code)]
pub struct SkillBody {
    /// Unique; no `/`, at most 256 characters. Fixed by the path on update.
    pub name: Option<String>,
    /// The prompt added to the system prompt while the skill is active; `{{model}}`,
    /// `{{ws_id}}` and `{{node_id}}` are substituted.
    pub content: Option<String>,
    /// Default `general`.
    pub category: Option<String>,
    pub description: Option<String>,
    pub tags: Option<Vec<String>>,
    /// `named` (default), `default` or `search`.
    pub activation: Option<String>,
    /// Default `true`; disabled skills are neither listed nor activatable.
    pub enabled: Option<bool>,
    pub is_default: Option<bool>,
    pub priority: Option<i64>,
    /// Default `1.0.0`.
    pub version: Option<String>,
    pub author: Option<String>,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub source_url: Option<String>,
    /// Declared template variables (a JSON array).
    pub variables: Option<Value>,
    /// `manual` (default) or `mcp`.
    pub origin: Option<String>,
    pub mcp_server: Option<String>,
    /// Read-only skills cannot be changed or deleted over this API.
    pub readonly: Option<bool>,
    pub org_id: Option<String>,
    pub created_by: Option<String>,
    pub token_estimate: Option<i64>,
    pub allowed_tools: Option<Vec<String>>,
    /// Risk level of the security scan: `safe`, `low`, `medium`, `high`, `critical`.
    pub scan_status: Option<String>,
    pub scan_report: Option<Value>,
    pub scan_version: Option<String>,
    pub installed_at: Option<String>,
    pub installed_by: Option<String>,
    pub model: Option<String>,
    pub auto_approve: Option<bool>,
    pub temperature: Option<f64>,
    pub reasoning_effort: Option<String>,
    pub max_tokens: Option<i64>,
    pub token_budget: Option<i64>,
    pub agent_max_turns: Option<i64>,
    pub notify_on_complete: Option<Value>,
}

/// One skill as the admin API returns it: every column.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[allow(dead_code)]
pub struct SkillRow {
    /// UUIDv4 with dashes.
    pub template_id: String,
    #[serde(flatten)]
    pub fields: SkillBody,
    /// ISO timestamp.
    pub created: String,
    /// ISO timestamp.
    pub updated: String,
}

/// `GET /v1/api/admin/skills`: every skill, enabled or not.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[allow(dead_code)]
pub struct AdminSkillList {
    pub skills: Vec<SkillRow>,
}

/// The routes of this module (under `/v1`).
pub fn routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/api/skills", get(list))
        .route("/api/admin/skills", get(admin_list).post(admin_create))
        .route(
            "/api/admin/skills/{name}",
            put(admin_update).delete(admin_delete),
        )
}

fn storage_failed(e: StoreError) -> ApiError {
    tracing::warn!(error = %e, "skill storage failed");
    ApiError::Internal("Storage error".to_string())
}

/// `GET /v1/api/skills`.
pub async fn list(State(node): State<Arc<Node>>) -> Result<Json<SkillList>, ApiError> {
    let store = super::memories::store(&node)?;
    let skills = store.list_skills(true).await.map_err(storage_failed)?;
    Ok(Json(SkillList {
        skills: skills.iter().map(SkillInfo::from).collect(),
    }))
}

/// `GET /v1/api/admin/skills`.
pub async fn admin_list(State(node): State<Arc<Node>>) -> Result<Json<Value>, ApiError> {
    let store = super::memories::store(&node)?;
    let skills = shared::list_all(&store).await?;
    Ok(Json(json!({ "skills": skills })))
}

/// `POST /v1/api/admin/skills`: 201 with the row; 409 when the name is taken — except by an
/// MCP-synced skill, which a manual skill replaces.
pub async fn admin_create(
    State(node): State<Arc<Node>>,
    identity: Option<Extension<Identity>>,
    WireJson(body): WireJson<Value>,
) -> Result<Response, ApiError> {
    let store = super::memories::store(&node)?;
    let user = identity.as_ref().map(|Extension(i)| i.user_id.as_str());
    let skill = shared::create(&store, &body, user).await?;
    Ok((StatusCode::CREATED, Json(skill)).into_response())
}

/// `PUT /v1/api/admin/skills/{name}`: changes the given fields; 404 unknown, 403 read-only.
pub async fn admin_update(
    State(node): State<Arc<Node>>,
    Path(name): Path<String>,
    WireJson(body): WireJson<Value>,
) -> Result<Json<Skill>, ApiError> {
    let store = super::memories::store(&node)?;
    Ok(Json(shared::update(&store, &name, &body).await?))
}

/// `DELETE /v1/api/admin/skills/{name}`: 404 unknown, 403 read-only.
pub async fn admin_delete(
    State(node): State<Arc<Node>>,
    Path(name): Path<String>,
) -> Result<Json<DeleteSkillReply>, ApiError> {
    let store = super::memories::store(&node)?;
    Ok(Json(shared::delete(&store, &name).await?))
}

/// The enabled skill of this name.
pub async fn find_enabled(node: &Node, name: &str) -> Result<Skill, SkillError> {
    let store = node.store().ok_or(SkillError::NoStorage)?;
    find_enabled_in(store.as_ref(), name).await
}

/// The enabled skill of this name in `store` (the node's, or the terminal client's).
pub async fn find_enabled_in(store: &dyn Store, name: &str) -> Result<Skill, SkillError> {
    store
        .get_skill(name.trim())
        .await
        .map_err(storage)?
        .filter(|s| s.spec.enabled)
        .ok_or_else(|| SkillError::NotFound(name.to_string()))
}

/// Makes `skill` the active skill of `ws` and persists the choice (config key `skill`).
pub async fn apply(node: &Node, ws: &WorkstreamHandle, skill: &Skill) -> Result<(), SkillError> {
    let store = node.store().ok_or(SkillError::NoStorage)?;
    apply_in(store.as_ref(), node.manager.engine(), ws, skill).await
}

/// [`apply`] on any engine's workstream, persisting the choice in `store`.
pub async fn apply_in(
    store: &dyn Store,
    engine: &Engine,
    ws: &WorkstreamHandle,
    skill: &Skill,
) -> Result<(), SkillError> {
    store
        .set_config(ws.id(), SKILL_CONFIG_KEY, Some(&skill.spec.name))
        .await
        .map_err(storage)?;
    let overrides = overrides_for(engine, ws, skill).await;
    ws.set_skill_with(
        Some(ActiveSkill::new(
            skill.spec.name.clone(),
            skill.spec.content.clone(),
        )),
        overrides,
    );
    if matches!(
        skill.spec.scan_status.to_ascii_lowercase().as_str(),
        "high" | "critical"
    ) {
        tracing::warn!(ws_id = %ws.id(), skill = %skill.spec.name, risk = %skill.spec.scan_status, "high-risk skill activated");
    }
    Ok(())
}

/// Finds the enabled skill `name` and activates it on `ws` (replacing any other).
pub async fn activate(node: &Node, ws: &WorkstreamHandle, name: &str) -> Result<Skill, SkillError> {
    let skill = find_enabled(node, name).await?;
    apply(node, ws, &skill).await?;
    Ok(skill)
}

/// [`activate`] on any engine's workstream, with skills from `store`.
pub async fn activate_in(
    store: &dyn Store,
    engine: &Engine,
    ws: &WorkstreamHandle,
    name: &str,
) -> Result<Skill, SkillError> {
    let skill = find_enabled_in(store, name).await?;
    apply_in(store, engine, ws, &skill).await?;
    Ok(skill)
}

/// Clears the active skill of `ws` (and its persisted name); returns the one it had.
pub async fn clear(node: &Node, ws: &WorkstreamHandle) -> Result<Option<String>, SkillError> {
    let previous = ws.skill().map(|s| s.name);
    if let Some(store) = node.store() {
        store
            .set_config(ws.id(), SKILL_CONFIG_KEY, None)
            .await
            .map_err(storage)?;
    }
    ws.set_skill(None);
    Ok(previous)
}

/// Re-activates the skill a resumed session had (from its stored config), when it still
/// exists and is enabled; otherwise the session continues without one (logged).
pub async fn restore(node: &Node, ws: &WorkstreamHandle, config: &BTreeMap<String, String>) {
    let Some(name) = config
        .get(SKILL_CONFIG_KEY)
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
    else {
        return;
    };
    match find_enabled(node, name).await {
        Ok(skill) => {
            let overrides = overrides_of(node, ws, &skill).await;
            ws.set_skill_with(
                Some(ActiveSkill::new(
                    skill.spec.name.clone(),
                    skill.spec.content.clone(),
                )),
                overrides,
            );
        }
        Err(e) => {
            tracing::warn!(ws_id = %ws.id(), skill = %name, error = %e, "stored skill not restored");
        }
    }
}

/// The reasoning efforts a skill may set (the original's `model.reasoning_effort` values).
const REASONING_EFFORTS: [&str; 7] = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// The request settings `skill` asks for on `ws` while it is active. A value that cannot be
/// used (an unknown model, a temperature outside 0–2, `max_tokens` below 1, an unknown
/// effort) is logged and left to the engine's setting; activation never fails over it.
pub async fn overrides_of(node: &Node, ws: &WorkstreamHandle, skill: &Skill) -> RequestOverrides {
    overrides_for(node.manager.engine(), ws, skill).await
}

/// [`overrides_of`] against any engine (its model registry resolves a skill's `model`).
pub async fn overrides_for(
    engine: &Engine,
    ws: &WorkstreamHandle,
    skill: &Skill,
) -> RequestOverrides {
    let spec = &skill.spec;
    let ignored = |field: &str, value: &dyn std::fmt::Display, why: &str| {
        tracing::warn!(ws_id = %ws.id(), skill = %spec.name, field, %value, why, "skill setting ignored");
    };
    let mut overrides = RequestOverrides::default();
    let model = spec.model.trim();
    if !model.is_empty() {
        let alias = model_alias(engine.config().models.as_deref(), model);
        match engine.resolve_model(&alias).await {
            Ok(choice) => overrides.model = choice,
            Err(e) => ignored("model", &model, &e.to_string()),
        }
    }
    if let Some(t) = spec.temperature {
        if t.is_finite() && (0.0..=2.0).contains(&t) {
            overrides.temperature = Some(t as f32);
        } else {
            ignored("temperature", &t, "outside 0-2");
        }
    }
    if let Some(m) = spec.max_tokens {
        match u32::try_from(m) {
            Ok(m) if m >= 1 => overrides.max_tokens = Some(m),
            _ => ignored("max_tokens", &m, "not a count of tokens (1 or more)"),
        }
    }
    let effort = spec.reasoning_effort.trim().to_ascii_lowercase();
    if !effort.is_empty() {
        if REASONING_EFFORTS.contains(&effort.as_str()) {
            overrides.reasoning_effort = Some(effort);
        } else {
            ignored(
                "reasoning_effort",
                &effort,
                "expected none, minimal, low, medium, high, xhigh or max",
            );
        }
    }
    overrides
}

/// The registry alias a skill's `model` means: an alias as it is, else the alias whose
/// model name it is (a skill may name `claude-sonnet-4-5` where the registry says
/// `claude`); anything else is returned unchanged (and fails to resolve).
fn model_alias(registry: Option<&turnstone_llm::ModelRegistry>, model: &str) -> String {
    let Some(registry) = registry else {
        return model.to_string();
    };
    if registry.get(model).is_ok() {
        return model.to_string();
    }
    registry
        .aliases()
        .into_iter()
        .find(|alias| {
            registry
                .get(alias)
                .is_ok_and(|entry| entry.entry.model == model)
        })
        .unwrap_or(model)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_the_original_statuses() {
        let e: ApiError = SkillError::NotFound("x".into()).into();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(e.body()["error"], "Skill not found or disabled: x");
        let e: ApiError = SkillError::NoStorage.into();
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(e.body()["error"], "Storage not available");
    }
}
