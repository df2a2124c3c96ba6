//! Cluster-wide settings and model definitions, administered in the console's store and
//! pushed to every node (cluster spec §6.5; keys and value rules in
//! `turnstone_proto::settings`).
//!
//! * `GET /v1/api/admin/settings` — the stored rows (a secret's value as `null`) and the
//!   accepted keys with their type, range and when a node applies them; permission
//!   `admin.settings`.
//! * `PUT /v1/api/admin/settings/{key}` `{"value", "node_id"?}` — checks the key (unknown →
//!   400 naming it) and the value, stores it (globally, or for one node), and reloads every
//!   node; `DELETE /v1/api/admin/settings/{key}[?node_id=]` removes it (the node falls back
//!   to its flags and file).
//! * `POST /v1/api/admin/models`, `PUT`/`DELETE /v1/api/admin/models/{definition_id}` —
//!   model definitions (alias, model, provider, base URL, API key, context window,
//!   capabilities, enabled; permission `admin.models`). The API key is stored, never returned (`has_api_key`) and
//!   never logged. `POST /v1/api/admin/models/reload` reloads every node's registry.
//! * **Model roles** are settings: `model.default`, `model.fallback` and `model.reranker`
//!   (Models → Roles → Reranker). `model.reranker` must name an enabled definition with
//!   `capabilities.supports_rerank`; `model.default`/`model.fallback` must name none such (a
//!   reranker is never a chat model); else 400 naming the problem. A definition selected as
//!   the Reranker role cannot be disabled, lose `supports_rerank`, be renamed or be deleted
//!   until the role is cleared (400).
//! * `GET /v1/api/models` and `GET /v1/api/skills` (read scope; cluster spec §6.3) — the
//!   enabled model definitions `{"models": [{alias, model, provider}]}` and the store's
//!   enabled skills, for the new-workstream dialog's pickers; 503 without storage.
//! * `GET /v1/api/admin/audit?user_id=&action=&limit=` — the audit log, newest first
//!   (permission `admin.audit`).
//!
//! **How the values reach a node.** After each change the console calls every node's
//! `_internal/config-reload` (5 s) or `_internal/model-reload` (10 s) — the admin fan-out's
//! client, credentials and limit (`admin::fan_out`) — with the console's *whole*
//! current state in the body. A node stores what it is given when its store differs (a node
//! on its own SQLite; one sharing the console's PostgreSQL already has the rows and writes
//! nothing) and applies it; it reads its store at start, so it keeps the values across
//! restarts and without the console. A node that was down misses the call: the console
//! pushes again to every node that (re)joins ([`spawn_catch_up`]). Each change answers with
//! every node's reply (`results`) and the nodes that failed (`errors`). Every change is
//! recorded in `audit_events`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use turnstone_accounts::audit::Actor;
use turnstone_accounts::body::AccountsJson;
use turnstone_proto::settings::{
    self as contract, CLUSTER_SETTINGS, ConfigReloadBody, Kind, ModelReloadBody, PushedSetting,
};
use turnstone_runtime::auth::Identity;
use turnstone_store::{
    ModelDefinition, ModelDefinitionUpdate, NewModelDefinition, SettingRow, Store,
};

use crate::admin::fan_out;
use crate::error::ApiError;
use crate::state::Console;

/// Timeout of one node's `_internal/config-reload` (the spec's).
pub const CONFIG_RELOAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Timeout of one node's `_internal/model-reload`.
pub const MODEL_RELOAD_TIMEOUT: Duration = Duration::from_secs(10);

const CONFIG_RELOAD: &str = "/v1/api/_internal/config-reload";
const MODEL_RELOAD: &str = "/v1/api/_internal/model-reload";

pub(crate) fn store(console: &Console) -> Result<Arc<dyn Store>, ApiError> {
    console
        .store
        .clone()
        .ok_or_else(|| ApiError::Unavailable("Storage not available".into()))
}

pub(crate) fn storage(e: turnstone_store::StoreError) -> ApiError {
    match e {
        turnstone_store::StoreError::InvalidInput(m) => ApiError::BadRequest(m),
        e => ApiError::Internal(format!("storage error: {e}")),
    }
}

// ------------------------------------------------------------------------ pushing

fn pushed_settings(rows: &[SettingRow]) -> Vec<PushedSetting> {
    rows.iter()
        .filter_map(|r| {
            Some(PushedSetting {
                key: r.key.clone(),
                value: serde_json::from_str(&r.value).ok()?,
                node_id: r.node_id.clone(),
                changed_by: r.changed_by.clone(),
            })
        })
        .collect()
}

fn as_values<T: serde::Serialize>(
    items: impl IntoIterator<Item = T>,
) -> Result<Vec<Value>, ApiError> {
    items
        .into_iter()
        .map(|i| serde_json::to_value(i).map_err(|e| ApiError::Internal(e.to_string())))
        .collect()
}

/// The bodies that carry the console's whole state: `config-reload`'s and `model-reload`'s.
async fn state_bodies(store: &Arc<dyn Store>) -> Result<(Value, Value), ApiError> {
    let rows = store.list_settings().await.map_err(storage)?;
    let definitions = store.list_model_definitions().await.map_err(storage)?;
    let settings = pushed_settings(&rows);
    let config = ConfigReloadBody {
        settings: Some(settings.clone()),
        policies: Some(as_values(
            turnstone_accounts::policies::list_stored(store).await?,
        )?),
        skills: Some(as_values(
            turnstone_accounts::skills::list_all(store)
                .await?
                .into_iter()
                .filter(|s| s.spec.origin != turnstone_accounts::skills::MCP_ORIGIN)
                .map(|s| s.spec),
        )?),
    };
    let models = ModelReloadBody {
        definitions: Some(as_values(definitions)?),
        settings: Some(settings),
    };
    let to_value =
        |v: Result<Value, serde_json::Error>| v.map_err(|e| ApiError::Internal(e.to_string()));
    Ok((
        to_value(serde_json::to_value(&config))?,
        to_value(serde_json::to_value(&models))?,
    ))
}

/// Which reload a change needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reload {
    Config,
    Models,
}

/// Pushes the state to every node (or `only`): `{"results": {node: reply}, "errors"}`.
async fn push(
    console: &Console,
    identity: Option<&Identity>,
    reload: Reload,
    only: Option<&str>,
) -> Result<Value, ApiError> {
    let store = store(console)?;
    let (config, models) = state_bodies(&store).await?;
    let (path, timeout, body) = match reload {
        Reload::Config => (CONFIG_RELOAD, CONFIG_RELOAD_TIMEOUT, config),
        Reload::Models => (MODEL_RELOAD, MODEL_RELOAD_TIMEOUT, models),
    };
    let answers = fan_out(
        console,
        identity,
        Method::POST,
        path,
        timeout,
        Some(&body),
        only,
    )
    .await?;
    let mut results = Map::new();
    let mut errors = Map::new();
    for (node_id, answer) in answers {
        match answer {
            Ok(reply) => {
                results.insert(node_id, reply);
            }
            Err(e) => {
                errors.insert(node_id, json!(e));
            }
        }
    }
    tracing::info!(
        path,
        nodes = results.len(),
        failed = errors.len(),
        "settings pushed to the nodes"
    );
    Ok(json!({"results": results, "errors": errors}))
}

/// Pushes the config state (settings, tool policies, skills) to every node after a change.
pub(crate) async fn push_config(
    console: &Console,
    identity: Option<Extension<Identity>>,
) -> Result<Value, ApiError> {
    push(
        console,
        identity.as_ref().map(|e| &e.0),
        Reload::Config,
        None,
    )
    .await
}

/// Pushes settings and models to every node that joins (a node that was down, or every
/// node when the console starts), so it catches up on what changed meanwhile.
pub fn spawn_catch_up(
    console: Arc<Console>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let mut joined = console.collector.joined();
    tokio::spawn(async move {
        loop {
            let node_id = tokio::select! {
                _ = stop.cancelled() => return,
                n = joined.recv() => match n {
                    Ok(id) => id,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "settings catch-up: joins missed");
                        continue;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
            };
            if console.store.is_none() {
                continue;
            }
            let console = console.clone();
            tokio::spawn(async move {
                for reload in [Reload::Config, Reload::Models] {
                    match push(&console, None, reload, Some(&node_id)).await {
                        Ok(v) if v["errors"].as_object().is_none_or(Map::is_empty) => {}
                        Ok(v) => {
                            tracing::warn!(node_id, errors = %v["errors"], "settings catch-up failed")
                        }
                        Err(e) => tracing::warn!(node_id, error = %e, "settings catch-up failed"),
                    }
                }
            });
        }
    })
}

// ------------------------------------------------------------------------ settings

fn kind_view(kind: Kind) -> Value {
    match kind {
        Kind::Bool => json!({"type": "bool"}),
        Kind::Int { min, max } => json!({"type": "int", "min": min, "max": max}),
        Kind::Float { min, max } => json!({"type": "float", "min": min, "max": max}),
        Kind::Choice(c) => json!({"type": "choice", "choices": c}),
        Kind::SearchBackend => json!({"type": "search_backend"}),
        Kind::Aliases => json!({"type": "aliases"}),
        Kind::Alias => json!({"type": "alias"}),
        Kind::Text { max } => json!({"type": "text", "max": max}),
        Kind::Url => json!({"type": "url"}),
    }
}

fn setting_view(row: &SettingRow) -> Value {
    let value = if row.is_secret {
        Value::Null
    } else {
        serde_json::from_str(&row.value).unwrap_or(Value::Null)
    };
    json!({
        "key": row.key,
        "value": value,
        "node_id": row.node_id,
        "is_secret": row.is_secret,
        "changed_by": row.changed_by,
        "created": row.created,
        "updated": row.updated,
    })
}

/// `GET /v1/api/admin/settings`.
pub async fn list_settings(State(console): State<Arc<Console>>) -> Result<Json<Value>, ApiError> {
    let rows = store(&console)?.list_settings().await.map_err(storage)?;
    let registry: Vec<Value> = CLUSTER_SETTINGS
        .iter()
        .map(|s| {
            let mut v = kind_view(s.kind);
            if let Some(o) = v.as_object_mut() {
                o.insert("key".into(), json!(s.key));
                o.insert("applies".into(), json!(s.applies));
                o.insert("secret".into(), json!(s.secret));
                o.insert("description".into(), json!(s.description));
            }
            v
        })
        .collect();
    Ok(Json(json!({
        "settings": rows.iter().map(setting_view).collect::<Vec<_>>(),
        "registry": registry,
    })))
}

/// `PUT /v1/api/admin/settings/{key}` body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingBody {
    /// JSON of the key's type (see `GET /v1/api/admin/settings` `registry`).
    pub value: Value,
    /// `""` (default): every node; else the node this value overrides the global one on.
    #[serde(default)]
    pub node_id: String,
}

fn check_node_id(node_id: &str) -> Result<(), ApiError> {
    if node_id.is_empty() || crate::api::valid_node_id(node_id) {
        Ok(())
    } else {
        Err(ApiError::BadRequest("Invalid node_id".into()))
    }
}

fn reload_for(key: &str) -> Reload {
    if key.starts_with("model.") {
        Reload::Models
    } else {
        Reload::Config
    }
}

/// The model roles' rules: `model.reranker` names an enabled definition with
/// `supports_rerank`; `model.default` and `model.fallback` name no such reranker (it is
/// never a chat model). 400 naming the problem.
async fn check_model_role(store: &dyn Store, key: &str, value: &Value) -> Result<(), ApiError> {
    let named: Vec<&str> = match value {
        Value::String(a) if !a.is_empty() => vec![a.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !key.starts_with("model.") || named.is_empty() {
        return Ok(());
    }
    let definitions = store.list_model_definitions().await.map_err(storage)?;
    let find = |alias: &str| definitions.iter().find(|d| d.alias == alias);
    for alias in named {
        let definition = find(alias);
        let is_reranker = definition
            .is_some_and(|d| contract::capability_flag(&d.capabilities, contract::SUPPORTS_RERANK));
        if key == contract::RERANKER_ROLE {
            let d = definition.ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "{key}: no model definition {alias:?} (add it in Models first)"
                ))
            })?;
            if let Some(problem) =
                contract::reranker_role_problem(&d.alias, &d.capabilities, d.enabled)
            {
                return Err(ApiError::BadRequest(format!("{key}: {problem}")));
            }
        } else if is_reranker {
            return Err(ApiError::BadRequest(format!(
                "{key}: model {alias:?} is a reranker (supports_rerank), not a chat model"
            )));
        }
    }
    Ok(())
}

/// 400 when a change to (or the removal of) `current` would leave the global Reranker role
/// naming a definition that cannot serve it: the role is cleared first.
async fn check_role_kept(
    store: &dyn Store,
    current: &ModelDefinition,
    after: Option<&ModelDefinition>,
) -> Result<(), ApiError> {
    let rows = store.list_settings().await.map_err(storage)?;
    let selected = rows.iter().any(|r| {
        r.key == contract::RERANKER_ROLE
            && serde_json::from_str::<String>(&r.value).is_ok_and(|a| a == current.alias)
    });
    if !selected {
        return Ok(());
    }
    let problem = match after {
        None => Some("it would be deleted".to_string()),
        Some(d) if d.alias != current.alias => Some("its alias would change".to_string()),
        Some(d) => contract::reranker_role_problem(&d.alias, &d.capabilities, d.enabled),
    };
    match problem {
        Some(problem) => Err(ApiError::BadRequest(format!(
            "model {:?} is selected as the Reranker role ({}), and {problem}: clear the role \
             first",
            current.alias,
            contract::RERANKER_ROLE
        ))),
        None => Ok(()),
    }
}

/// `PUT /v1/api/admin/settings/{key}`.
pub async fn put_setting(
    State(console): State<Arc<Console>>,
    Path(key): Path<String>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
    AccountsJson(body): AccountsJson<SettingBody>,
) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    let value =
        contract::validate(&key, &body.value).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    check_node_id(&body.node_id)?;
    check_model_role(store.as_ref(), &key, &value).await?;
    let secret = contract::spec(&key).is_some_and(|s| s.secret);
    let row = store
        .put_setting(SettingRow {
            key: key.clone(),
            value: value.to_string(),
            node_id: body.node_id.clone(),
            is_secret: secret,
            changed_by: actor.user_id.clone(),
            created: String::new(),
            updated: String::new(),
        })
        .await
        .map_err(storage)?;
    let detail = if secret {
        json!({"node_id": body.node_id})
    } else {
        json!({"node_id": body.node_id, "value": value})
    };
    actor
        .record(&store, "setting.update", "setting", &key, detail)
        .await;
    tracing::info!(key, node_id = %body.node_id, "setting stored");
    let reload = push(
        &console,
        identity.as_ref().map(|e| &e.0),
        reload_for(&key),
        None,
    )
    .await?;
    Ok(Json(
        json!({"setting": setting_view(&row), "reload": reload}),
    ))
}

/// `DELETE /v1/api/admin/settings/{key}[?node_id=]`.
pub async fn delete_setting(
    State(console): State<Arc<Console>>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
) -> Result<Json<Value>, ApiError> {
    // A map, so a repeated parameter is not a (plain-text) rejection: the last one counts.
    let node_id = query.get("node_id").cloned().unwrap_or_default();
    let store = store(&console)?;
    if contract::spec(&key).is_none() {
        return Err(ApiError::BadRequest(format!("Unknown setting: {key}")));
    }
    check_node_id(&node_id)?;
    if !store
        .delete_setting(&key, &node_id)
        .await
        .map_err(storage)?
    {
        return Err(ApiError::NotFound(format!("Setting not set: {key}")));
    }
    actor
        .record(
            &store,
            "setting.delete",
            "setting",
            &key,
            json!({"node_id": node_id}),
        )
        .await;
    tracing::info!(key, node_id = %node_id, "setting removed");
    let reload = push(
        &console,
        identity.as_ref().map(|e| &e.0),
        reload_for(&key),
        None,
    )
    .await?;
    Ok(Json(json!({"status": "ok", "reload": reload})))
}

// ------------------------------------------------------------------------ models

/// A definition as the admin API shows it: never its API key.
fn definition_view(d: &ModelDefinition) -> Value {
    json!({
        "definition_id": d.definition_id,
        "alias": d.alias,
        "model": d.model,
        "provider": d.provider,
        "base_url": d.base_url,
        "has_api_key": !d.api_key.is_empty(),
        "context_window": d.context_window,
        "capabilities": serde_json::from_str::<Value>(&d.capabilities)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({})),
        "enabled": d.enabled,
        "created_by": d.created_by,
        "created": d.created,
        "updated": d.updated,
    })
}

/// The stored definitions' views (empty without storage), for `GET /v1/api/admin/models`.
pub async fn definition_views(console: &Console) -> Result<Vec<Value>, ApiError> {
    let Some(store) = console.store.clone() else {
        return Ok(Vec::new());
    };
    let defs = store.list_model_definitions().await.map_err(storage)?;
    Ok(defs.iter().map(definition_view).collect())
}

/// `POST /v1/api/admin/models` and `PUT /v1/api/admin/models/{definition_id}` body (create:
/// `alias` and `model` required).
#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelBody {
    pub alias: Option<String>,
    pub model: Option<String>,
    /// `openai` (default) or `anthropic`.
    pub provider: Option<String>,
    /// `http(s)://…`; empty: the provider's default.
    pub base_url: Option<String>,
    /// Stored, never returned; `""` clears it.
    pub api_key: Option<String>,
    pub context_window: Option<i64>,
    /// A JSON object: `vision`, `supports_rerank` (a reranker: its `base_url` is a
    /// Cohere/Jina-compatible `/rerank` endpoint), `rerank_instruction`, `rerank_timeout`.
    pub capabilities: Option<Value>,
    pub enabled: Option<bool>,
}

impl ModelBody {
    /// The capabilities as stored text, checked (400 naming the key).
    fn capabilities_text(&self) -> Result<Option<String>, ApiError> {
        self.capabilities
            .as_ref()
            .map(|c| {
                contract::validate_capabilities(c)
                    .map(|v| v.to_string())
                    .map_err(ApiError::BadRequest)
            })
            .transpose()
    }
}

fn check_model_fields(b: &ModelBody) -> Result<(), ApiError> {
    let bad = |m: String| Err(ApiError::BadRequest(m));
    if let Some(a) = &b.alias {
        let ok = !a.is_empty()
            && a.len() <= 64
            && a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
        if !ok {
            return bad("alias: 1-64 letters, digits, . _ -".into());
        }
    }
    if let Some(m) = &b.model
        && (m.trim().is_empty() || m.len() > 256)
    {
        return bad("model: 1-256 characters".into());
    }
    if let Some(p) = &b.provider
        && !matches!(p.as_str(), "openai" | "anthropic")
    {
        return bad(format!("provider: expected openai or anthropic, got {p:?}"));
    }
    if let Some(u) = &b.base_url
        && !u.is_empty()
        && (!(u.starts_with("http://") || u.starts_with("https://"))
            || u.len() > 2048
            || reqwest::Url::parse(u).is_err())
    {
        return bad("base_url: an http:// or https:// URL".into());
    }
    if b.api_key.as_ref().is_some_and(|k| k.len() > 4096) {
        return bad("api_key: at most 4096 characters".into());
    }
    if let Some(n) = b.context_window
        && !(1..=10_000_000).contains(&n)
    {
        return bad(format!("context_window: between 1 and 10000000, got {n}"));
    }
    Ok(())
}

/// `POST /v1/api/admin/models`: 201 `{definition, reload}`.
pub async fn create_model(
    State(console): State<Arc<Console>>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
    AccountsJson(body): AccountsJson<ModelBody>,
) -> Result<Response, ApiError> {
    let store = store(&console)?;
    check_model_fields(&body)?;
    let capabilities = body.capabilities_text()?.unwrap_or_default();
    let (Some(alias), Some(model)) = (body.alias.clone(), body.model.clone()) else {
        return Err(ApiError::BadRequest("alias and model are required".into()));
    };
    let created = store
        .create_model_definition(NewModelDefinition {
            definition_id: None,
            alias,
            model: model.trim().to_string(),
            provider: body.provider.clone().unwrap_or_else(|| "openai".into()),
            base_url: body.base_url.clone().unwrap_or_default(),
            api_key: body.api_key.clone().unwrap_or_default(),
            context_window: body.context_window.unwrap_or(32_768),
            capabilities,
            enabled: body.enabled.unwrap_or(true),
            created_by: actor.user_id.clone(),
        })
        .await
        .map_err(storage)?;
    let view = definition_view(&created);
    actor
        .record(
            &store,
            "model.create",
            "model",
            &created.definition_id,
            view.clone(),
        )
        .await;
    tracing::info!(alias = %created.alias, "model definition created");
    let reload = push(
        &console,
        identity.as_ref().map(|e| &e.0),
        Reload::Models,
        None,
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"definition": view, "reload": reload})),
    )
        .into_response())
}

/// `PUT /v1/api/admin/models/{definition_id}`: the given fields.
pub async fn update_model(
    State(console): State<Arc<Console>>,
    Path(definition_id): Path<String>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
    AccountsJson(body): AccountsJson<ModelBody>,
) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    check_model_fields(&body)?;
    let capabilities = body.capabilities_text()?;
    let key_changed = body.api_key.is_some();
    if let Some(current) = store
        .get_model_definition(&definition_id)
        .await
        .map_err(storage)?
    {
        let after = ModelDefinition {
            alias: body.alias.clone().unwrap_or_else(|| current.alias.clone()),
            capabilities: capabilities
                .clone()
                .unwrap_or_else(|| current.capabilities.clone()),
            enabled: body.enabled.unwrap_or(current.enabled),
            ..current.clone()
        };
        check_role_kept(store.as_ref(), &current, Some(&after)).await?;
    }
    let changed = store
        .update_model_definition(
            &definition_id,
            ModelDefinitionUpdate {
                alias: body.alias,
                model: body.model.map(|m| m.trim().to_string()),
                provider: body.provider,
                base_url: body.base_url,
                api_key: body.api_key,
                context_window: body.context_window,
                capabilities,
                enabled: body.enabled,
            },
        )
        .await
        .map_err(storage)?
        .ok_or_else(|| ApiError::NotFound("Model definition not found".into()))?;
    let view = definition_view(&changed);
    let mut detail = view.clone();
    if let Some(o) = detail.as_object_mut() {
        o.insert("api_key_changed".into(), json!(key_changed));
    }
    actor
        .record(&store, "model.update", "model", &definition_id, detail)
        .await;
    tracing::info!(alias = %changed.alias, "model definition updated");
    let reload = push(
        &console,
        identity.as_ref().map(|e| &e.0),
        Reload::Models,
        None,
    )
    .await?;
    Ok(Json(json!({"definition": view, "reload": reload})))
}

/// `DELETE /v1/api/admin/models/{definition_id}`.
pub async fn delete_model(
    State(console): State<Arc<Console>>,
    Path(definition_id): Path<String>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    let gone = store
        .get_model_definition(&definition_id)
        .await
        .map_err(storage)?
        .ok_or_else(|| ApiError::NotFound("Model definition not found".into()))?;
    check_role_kept(store.as_ref(), &gone, None).await?;
    store
        .delete_model_definition(&definition_id)
        .await
        .map_err(storage)?;
    actor
        .record(
            &store,
            "model.delete",
            "model",
            &definition_id,
            json!({"alias": gone.alias}),
        )
        .await;
    tracing::info!(alias = %gone.alias, "model definition deleted");
    let reload = push(
        &console,
        identity.as_ref().map(|e| &e.0),
        Reload::Models,
        None,
    )
    .await?;
    Ok(Json(json!({"status": "ok", "reload": reload})))
}

/// `POST /v1/api/admin/models/reload`: `{"status": "ok", "results", "errors"}`.
pub async fn reload_models(
    State(console): State<Arc<Console>>,
    identity: Option<Extension<Identity>>,
) -> Result<Json<Value>, ApiError> {
    let mut reload = push(
        &console,
        identity.as_ref().map(|e| &e.0),
        Reload::Models,
        None,
    )
    .await?;
    if let Some(o) = reload.as_object_mut() {
        o.insert("status".into(), json!("ok"));
    }
    Ok(Json(reload))
}

/// Most audit events one request lists (and the default).
const AUDIT_LIMIT: usize = 1000;
const AUDIT_DEFAULT: usize = 100;

/// `GET /v1/api/admin/audit`: `{"events": [...]}`, newest first.
pub async fn audit_log(
    State(console): State<Arc<Console>>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    let limit = match q.get("limit").map(String::as_str) {
        None | Some("") => AUDIT_DEFAULT,
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=AUDIT_LIMIT).contains(n))
            .ok_or_else(|| {
                ApiError::BadRequest(format!("limit must be an integer 1..{AUDIT_LIMIT}"))
            })?,
    };
    let events = store
        .list_audit(turnstone_store::AuditQuery {
            user_id: q.get("user_id").filter(|s| !s.is_empty()).cloned(),
            action: q.get("action").filter(|s| !s.is_empty()).cloned(),
            limit,
        })
        .await
        .map_err(storage)?;
    let events: Vec<Value> = events
        .into_iter()
        .map(|e| {
            let detail: Value = serde_json::from_str(&e.detail).unwrap_or(Value::Null);
            json!({
                "event_id": e.event_id,
                "timestamp": e.timestamp,
                "user_id": e.user_id,
                "action": e.action,
                "resource_type": e.resource_type,
                "resource_id": e.resource_id,
                "detail": detail,
                "ip_address": e.ip_address,
            })
        })
        .collect();
    Ok(Json(json!({ "events": events })))
}

/// `GET /v1/api/models`: the enabled stored chat definitions (cluster spec §6.3); a
/// reranker (`supports_rerank`) is no model a workstream can run on.
pub async fn models(State(console): State<Arc<Console>>) -> Result<Json<Value>, ApiError> {
    let defs = store(&console)?
        .list_model_definitions()
        .await
        .map_err(storage)?;
    let models: Vec<Value> = defs
        .iter()
        .filter(|d| {
            d.enabled && !contract::capability_flag(&d.capabilities, contract::SUPPORTS_RERANK)
        })
        .map(|d| json!({"alias": d.alias, "model": d.model, "provider": d.provider}))
        .collect();
    Ok(Json(json!({ "models": models })))
}

/// `GET /v1/api/skills`: the store's enabled skills with the fields of the node's
/// `GET /v1/api/skills` (cluster spec §6.3).
pub async fn skills(State(console): State<Arc<Console>>) -> Result<Json<Value>, ApiError> {
    let skills = store(&console)?.list_skills(true).await.map_err(storage)?;
    let skills: Vec<Value> = skills
        .iter()
        .map(|s| {
            json!({
                "name": s.spec.name,
                "category": s.spec.category,
                "description": s.spec.description,
                "tags": s.spec.tags,
                "is_default": s.spec.is_default,
                "activation": s.spec.activation,
                "origin": s.spec.origin,
                "author": s.spec.author,
                "version": s.spec.version,
            })
        })
        .collect();
    Ok(Json(json!({ "skills": skills })))
}
