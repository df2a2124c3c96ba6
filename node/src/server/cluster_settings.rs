//! The cluster-wide settings and model definitions a node takes from its store
//! (`system_settings`, `model_definitions`), over what its flags and `config.toml` say, and
//! the two routes that reload them (cluster spec §4.7):
//!
//! * `POST /v1/api/_internal/config-reload` — re-reads the settings and applies the live
//!   keys (`turnstone_proto::settings`) to the engine; with a body
//!   `{"settings": [{key, value, node_id}]}` the node first makes its stored settings exactly
//!   those (a node on its own SQLite gets the console's values so, and keeps them across
//!   restarts and while the console is down). `policies` and `skills` in the body make the
//!   stored tool policies and manual skills exactly those the same way (the policies then
//!   go to the engine). Reply [`ConfigReloadReply`].
//! * `POST /v1/api/_internal/model-reload` — rebuilds the model registry from the
//!   config file's `[models.*]` (or the node's own model as its one alias) plus the stored
//!   definitions (a stored alias overrides a config alias of the same name, except the
//!   node's default: its client is built at start), with `model.fallback`; `model.default`
//!   names the alias of new workstreams that ask for none. A definition with
//!   `capabilities.supports_rerank` is a reranker only: it joins no chat registry, and a
//!   `model.default` or `model.fallback` naming one is refused. A body
//!   `{"definitions": [...], "settings": [...]}` is stored first, as above.
//!   `{"status":"ok","aliases":[...]}`, or `422 {"status":"error","reason"}` when the
//!   result would not build (the previous registry stays).
//!
//! Both also put the Reranker role in force: `model.reranker` names the stored definition
//! the node's reranker is built from (replaced atomically; unset: none), unless the config
//! file has `[rerank]`, which wins (node-local, like `[models.*]` over stored definitions in
//! the spec's precedence); see [`crate::rerank`].
//!
//! Both run at start too ([`ClusterSettings::install`]), so a node that was down when a
//! change was made starts with it. A stored value this node refuses (unknown key, out of
//! range) is left out with a warning and named in the reply; the flag or file value stays.
//! A key absent from the store falls back to the flag or file value of the start.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parking_lot::RwLock;
use serde_json::{Value, json};
use turnstone_accounts::policies::PolicyRow;
use turnstone_engine::EngineConfig;
use turnstone_llm::{ModelEntry, ModelRegistry, ProviderKind, RegistryConfig};
use turnstone_proto::settings::{
    self as contract, Applies, ConfigReloadBody, ConfigReloadReply, ModelReloadBody, PushedSetting,
};
use turnstone_store::{ModelDefinition, SettingRow, SkillSpec, Store};

use crate::judge::JudgeSection;

use super::error::ApiError;
use super::state::Node;

/// What the node was started with, for the keys the store may override.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The engine settings of the start (flags, file).
    pub engine: EngineConfig,
    /// The config file's `[models.*]`/`[model]`; else the node's own model as its one alias.
    pub registry: RegistryConfig,
    /// Whether the start had a registry (the config file's); without one and without stored
    /// definitions the engine keeps no registry, as before.
    pub had_registry: bool,
    /// The config file's `[judge]`, which stored `judge.*` keys override key by key.
    pub judge: JudgeSection,
}

impl Baseline {
    /// The baseline of a node whose engine is built: its settings, and its registry (the
    /// config file's, else `own` — the node's single model — as alias `alias`).
    pub fn new(
        engine: EngineConfig,
        judge: JudgeSection,
        file_registry: Option<RegistryConfig>,
        alias: &str,
        own: ModelEntry,
    ) -> Self {
        match file_registry {
            Some(registry) => Self {
                engine,
                registry,
                had_registry: true,
                judge,
            },
            None => {
                let mut registry = RegistryConfig::default();
                registry.models.insert(alias.to_string(), own);
                registry.model.default = Some(alias.to_string());
                Self {
                    engine,
                    registry,
                    had_registry: false,
                    judge,
                }
            }
        }
    }

    fn default_alias(&self) -> String {
        self.registry
            .model
            .default
            .clone()
            .or_else(|| self.registry.models.keys().next().cloned())
            .unwrap_or_default()
    }
}

/// The node's view of the stored settings: the baseline, what is in force, and which
/// aliases came from the store.
#[derive(Debug, Default)]
pub struct ClusterSettings {
    baseline: std::sync::OnceLock<Baseline>,
    state: RwLock<Applied>,
    /// One reload at a time, so two cannot install their results out of order.
    reloading: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default, Clone)]
struct Applied {
    settings: BTreeMap<String, Value>,
    db_aliases: BTreeSet<String>,
    default_model: Option<String>,
}

impl ClusterSettings {
    /// Sets the baseline and applies what the store holds (at start, before any turn).
    pub async fn install(node: &Node, baseline: Baseline) {
        let _ = node.cluster_settings.baseline.set(baseline);
        let reply = reload_settings(node).await;
        if !reply.applied.is_empty() {
            tracing::info!(keys = ?reply.applied.keys().collect::<Vec<_>>(), "stored settings applied");
        }
        match reload_models(node).await {
            Ok(aliases) => tracing::debug!(?aliases, "model registry"),
            Err(reason) => {
                tracing::warn!(%reason, "stored model definitions not applied")
            }
        }
    }

    /// The stored settings in force (after validation), by key.
    pub fn in_force(&self) -> BTreeMap<String, Value> {
        self.state.read().settings.clone()
    }

    /// `model.default`: the alias of new workstreams that name none (`None`: the node's own).
    pub fn default_model(&self) -> Option<String> {
        self.state.read().default_model.clone()
    }

    /// Whether `alias` is a stored definition (`source: "db"`).
    pub fn is_stored_alias(&self, alias: &str) -> bool {
        self.state.read().db_aliases.contains(alias)
    }
}

/// The effective stored settings of this node, validated: `(valid, refused)`.
fn effective(
    rows: &[SettingRow],
    node_id: &str,
) -> (BTreeMap<String, Value>, BTreeMap<String, String>) {
    let mut parsed = Vec::new();
    let mut refused = BTreeMap::new();
    for r in rows {
        match serde_json::from_str::<Value>(&r.value) {
            Ok(v) => parsed.push((r.key.as_str(), r.node_id.as_str(), v)),
            Err(_) => {
                refused.insert(r.key.clone(), "the stored value is not JSON".to_string());
            }
        }
    }
    let raw = contract::effective(parsed.iter().map(|(k, n, v)| (*k, *n, v)), node_id);
    let mut valid = BTreeMap::new();
    for (key, value) in raw {
        match contract::validate(&key, &value) {
            Ok(v) => {
                refused.remove(&key);
                valid.insert(key, v);
            }
            Err(e) => {
                refused.insert(key, e.to_string());
            }
        }
    }
    (valid, refused)
}

/// The settings to read at start, before the engine exists (`tools.web_search_backend`):
/// the store's effective values, validated; empty when it cannot be read.
pub async fn startup_values(store: &Arc<dyn Store>, node_id: &str) -> BTreeMap<String, Value> {
    match store.list_settings().await {
        Ok(rows) => effective(&rows, node_id).0,
        Err(e) => {
            tracing::warn!(error = %e, "stored settings not read at start");
            BTreeMap::new()
        }
    }
}

fn int(settings: &BTreeMap<String, Value>, key: &str) -> Option<i64> {
    settings.get(key).and_then(Value::as_i64)
}
fn float(settings: &BTreeMap<String, Value>, key: &str) -> Option<f64> {
    settings.get(key).and_then(Value::as_f64)
}
fn flag(settings: &BTreeMap<String, Value>, key: &str) -> Option<bool> {
    settings.get(key).and_then(Value::as_bool)
}

/// The engine's judge from the file's `[judge]` with the stored `judge.*` keys over it (the
/// LLM judge's model, provider, endpoint, key and timeout included); the start's judge when
/// the result does not build (logged by key, never by value).
fn judge_of(settings: &BTreeMap<String, Value>, base: &Baseline) -> turnstone_engine::JudgeConfig {
    match base
        .judge
        .with_stored(settings)
        .and_then(|section| section.engine_judge())
    {
        Ok(judge) => judge,
        Err(reason) => {
            tracing::warn!(%reason, "stored judge settings not applied; the start's judge stays");
            base.engine.judge.clone()
        }
    }
}

/// Puts the live keys into `config`: each stored value, else the baseline's.
fn apply_live(settings: &BTreeMap<String, Value>, baseline: &Baseline, config: &mut EngineConfig) {
    let base = &baseline.engine;
    config.approval_timeout = int(settings, "server.approval_timeout")
        .and_then(|s| u64::try_from(s).ok())
        .map_or(base.approval_timeout, Duration::from_secs);
    config.judge = judge_of(settings, baseline);
    config.output_guard.scan =
        flag(settings, "judge.output_guard").unwrap_or(base.output_guard.scan);
    config.output_guard.redact =
        flag(settings, "judge.redact_secrets").unwrap_or(base.output_guard.redact);
    config.toolset.search = settings
        .get("tools.search")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(base.toolset.search);
    config.toolset.search_threshold = int(settings, "tools.search_threshold")
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(base.toolset.search_threshold);
    config.toolset.search_max_results = int(settings, "tools.search_max_results")
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(base.toolset.search_max_results);
    config.auto_compact_pct =
        float(settings, "session.auto_compact_pct").unwrap_or(base.auto_compact_pct);
    config.compact_max_tokens = int(settings, "session.compact_max_tokens")
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(base.compact_max_tokens);
}

/// Re-reads the stored settings and applies the live keys.
pub async fn reload_settings(node: &Node) -> ConfigReloadReply {
    let (Some(store), Some(base)) = (node.store(), node.cluster_settings.baseline.get()) else {
        return ConfigReloadReply {
            status: "noop".into(),
            ..ConfigReloadReply::default()
        };
    };
    let _one = node.cluster_settings.reloading.lock().await;
    let rows = match store.list_settings().await {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "settings reload: the store cannot be read; settings kept");
            return ConfigReloadReply {
                status: "error".into(),
                refused: BTreeMap::from([("*".into(), format!("store: {e}"))]),
                ..ConfigReloadReply::default()
            };
        }
    };
    let (settings, refused) = effective(&rows, &node.options.node_id);
    for (key, reason) in &refused {
        tracing::warn!(key, reason, "stored setting refused");
    }
    node.manager
        .engine()
        .reconfigure(|config| apply_live(&settings, base, config));
    if let Some(reranker) = &node.options.reranker {
        reranker.apply_stored(&settings);
        apply_reranker_role(store.as_ref(), reranker, &settings).await;
    }
    let restart_required = settings
        .keys()
        .filter(|k| contract::spec(k).is_some_and(|s| s.applies == Applies::Restart))
        .cloned()
        .collect();
    let applied = settings
        .iter()
        .map(|(k, v)| {
            let secret = contract::spec(k).is_some_and(|s| s.secret);
            (k.clone(), if secret { json!("<set>") } else { v.clone() })
        })
        .collect();
    node.cluster_settings.state.write().settings = settings;
    ConfigReloadReply {
        status: "ok".into(),
        applied,
        refused,
        restart_required,
    }
}

/// The Reranker role (`model.reranker`) from the store's definitions; a store that cannot
/// be read keeps the reranker in force.
async fn apply_reranker_role(
    store: &dyn Store,
    reranker: &crate::rerank::NodeReranker,
    settings: &BTreeMap<String, Value>,
) {
    let alias = settings
        .get(contract::RERANKER_ROLE)
        .and_then(Value::as_str);
    match store.list_model_definitions().await {
        Ok(definitions) => reranker.apply_role(alias, &definitions),
        Err(e) => {
            tracing::warn!(error = %e, "the Reranker role not applied: the store cannot be read")
        }
    }
}

/// The registry entry of a stored definition.
fn entry_of(d: &ModelDefinition) -> Result<ModelEntry, String> {
    let provider = match d.provider.as_str() {
        "openai" => ProviderKind::Openai,
        "anthropic" => ProviderKind::Anthropic,
        other => return Err(format!("model {:?}: unknown provider {other:?}", d.alias)),
    };
    let mut entry = ModelEntry::new(provider, d.base_url.clone(), d.model.clone());
    if d.base_url.trim().is_empty() {
        entry.base_url = None;
    }
    entry.api_key = Some(d.api_key.clone()).filter(|k| !k.is_empty());
    entry.context_window = u32::try_from(d.context_window).ok().filter(|n| *n > 0);
    entry.vision = contract::capability_flag(&d.capabilities, "vision");
    Ok(entry)
}

/// Rebuilds the registry from the baseline, the stored definitions and `model.*`; the
/// aliases now known, or why nothing changed.
pub async fn reload_models(node: &Node) -> Result<Vec<String>, String> {
    let (Some(store), Some(base)) = (node.store(), node.cluster_settings.baseline.get()) else {
        return Ok(node.manager.engine().model_aliases());
    };
    let _one = node.cluster_settings.reloading.lock().await;
    let definitions = store
        .list_model_definitions()
        .await
        .map_err(|e| format!("store: {e}"))?;
    let settings = node.cluster_settings.in_force();
    let own = base.default_alias();
    let mut config = base.registry.clone();
    let mut db_aliases = BTreeSet::new();
    // A reranker definition (`supports_rerank`) is never a chat model: no alias, no
    // fallback target, not `model.default` (it serves only the Reranker role).
    let rerankers: BTreeSet<&str> = definitions
        .iter()
        .filter(|d| crate::rerank::is_reranker(d))
        .map(|d| d.alias.as_str())
        .collect();
    for d in definitions
        .iter()
        .filter(|d| d.enabled && !rerankers.contains(d.alias.as_str()))
    {
        if d.alias == own {
            tracing::warn!(alias = %d.alias, "a stored model definition names the node's default alias; its client is built at start, so it is left out");
            continue;
        }
        config.models.insert(d.alias.clone(), entry_of(d)?);
        db_aliases.insert(d.alias.clone());
    }
    if let Some(fallback) = settings.get("model.fallback").and_then(Value::as_array) {
        config.model.fallback = fallback
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
    }
    let default_model = settings
        .get("model.default")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty() && *a != own)
        .map(str::to_string);
    let mut named = default_model.iter().chain(&config.model.fallback);
    if let Some(alias) = named.find(|a| rerankers.contains(a.as_str())) {
        return Err(format!(
            "{alias:?} is a reranker (supports_rerank), not a chat model: it cannot be \
             model.default or in model.fallback"
        ));
    }
    if let Some(alias) = &default_model
        && !config.models.contains_key(alias)
    {
        return Err(format!("model.default names an unknown alias {alias:?}"));
    }
    let uses_registry =
        base.had_registry || !db_aliases.is_empty() || !config.model.fallback.is_empty();
    let registry = if uses_registry {
        Some(Arc::new(
            ModelRegistry::from_config(&config).map_err(|e| e.to_string())?,
        ))
    } else {
        None
    };
    let aliases = registry
        .as_ref()
        .map(|r| r.aliases().into_iter().map(str::to_string).collect())
        .unwrap_or_else(|| vec![own.clone()]);
    node.manager.engine().reconfigure(|c| c.models = registry);
    let mut state = node.cluster_settings.state.write();
    state.db_aliases = db_aliases;
    state.default_model = default_model;
    Ok(aliases)
}

/// Stores pushed settings rows when they differ from the store's (a node sharing the
/// console's database already has them and writes nothing).
async fn store_pushed_settings(node: &Node, pushed: &[PushedSetting]) -> Result<(), ApiError> {
    let store = node
        .store()
        .ok_or_else(|| ApiError::Unavailable("Storage not available".into()))?;
    let me = node.options.node_id.as_str();
    let mut seen = BTreeSet::new();
    for p in pushed {
        if p.key.trim().is_empty() || p.key.len() > 128 {
            return Err(ApiError::BadRequest(
                "Invalid setting: a key is 1-128 characters".into(),
            ));
        }
        if !seen.insert((p.key.as_str(), p.node_id.as_str())) {
            return Err(ApiError::BadRequest(format!(
                "Invalid settings: {} given twice for node_id {:?}",
                p.key, p.node_id
            )));
        }
    }
    let wanted: BTreeSet<(String, String, String)> = pushed
        .iter()
        .filter(|p| p.node_id.is_empty() || p.node_id == me)
        .map(|p| (p.key.clone(), p.node_id.clone(), p.value.to_string()))
        .collect();
    let current: BTreeSet<(String, String, String)> = store
        .list_settings()
        .await
        .map_err(|e| ApiError::Unavailable(format!("Storage unavailable: {e}")))?
        .into_iter()
        .filter(|r| r.node_id.is_empty() || r.node_id == me)
        .map(|r| {
            let canonical = serde_json::from_str::<Value>(&r.value)
                .map(|v| v.to_string())
                .unwrap_or(r.value);
            (r.key, r.node_id, canonical)
        })
        .collect();
    if wanted == current {
        return Ok(());
    }
    let rows: Vec<SettingRow> = pushed
        .iter()
        .map(|p| SettingRow {
            key: p.key.clone(),
            value: p.value.to_string(),
            node_id: p.node_id.clone(),
            is_secret: contract::spec(&p.key).is_some_and(|s| s.secret),
            changed_by: p.changed_by.clone(),
            created: String::new(),
            updated: String::new(),
        })
        .collect();
    store
        .replace_settings(me, &rows)
        .await
        .map_err(|e| ApiError::Unavailable(format!("Storage unavailable: {e}")))?;
    tracing::info!(rows = rows.len(), "settings from the console stored");
    Ok(())
}

/// Stores pushed definitions when they differ from the store's.
async fn store_pushed_definitions(node: &Node, pushed: &[Value]) -> Result<(), ApiError> {
    let store = node
        .store()
        .ok_or_else(|| ApiError::Unavailable("Storage not available".into()))?;
    let mut wanted: Vec<ModelDefinition> = decode_all(pushed, "model definition")?;
    wanted.sort_by(|a, b| a.alias.cmp(&b.alias));
    let mut ids = BTreeSet::new();
    for (i, d) in wanted.iter().enumerate() {
        if d.alias.trim().is_empty() || d.definition_id.trim().is_empty() {
            return Err(ApiError::BadRequest(
                "Invalid model definition: alias and definition_id are required".into(),
            ));
        }
        let dup_alias = i > 0 && wanted[i - 1].alias == d.alias;
        if dup_alias || !ids.insert(d.definition_id.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "Invalid model definitions: {:?} given twice",
                d.alias
            )));
        }
    }
    let current = store
        .list_model_definitions()
        .await
        .map_err(|e| ApiError::Unavailable(format!("Storage unavailable: {e}")))?;
    let same = |a: &ModelDefinition, b: &ModelDefinition| {
        (
            &a.definition_id,
            &a.alias,
            &a.model,
            &a.provider,
            &a.base_url,
            &a.api_key,
        ) == (
            &b.definition_id,
            &b.alias,
            &b.model,
            &b.provider,
            &b.base_url,
            &b.api_key,
        ) && (a.context_window, a.enabled, &a.capabilities)
            == (b.context_window, b.enabled, &b.capabilities)
    };
    if wanted.len() == current.len() && wanted.iter().zip(&current).all(|(a, b)| same(a, b)) {
        return Ok(());
    }
    store
        .replace_model_definitions(&wanted)
        .await
        .map_err(|e| ApiError::Unavailable(format!("Storage unavailable: {e}")))?;
    tracing::info!(
        definitions = wanted.len(),
        "model definitions from the console stored"
    );
    Ok(())
}

/// Makes the stored tool policies the pushed ones (no write when they match) and gives the
/// engine the result.
async fn store_pushed_policies(node: &Node, pushed: &[Value]) -> Result<(), ApiError> {
    let store = node
        .store()
        .ok_or_else(|| ApiError::Unavailable("Storage not available".into()))?;
    let wanted: Vec<PolicyRow> = decode_all(pushed, "policy")?;
    if turnstone_accounts::policies::replace_stored(&store, &wanted).await? {
        tracing::info!(
            policies = wanted.len(),
            "tool policies from the console stored"
        );
    }
    super::policies::PolicyRegistry::refresh(node).await
}

/// Makes the stored manual skills the pushed ones (no write when they match).
async fn store_pushed_skills(node: &Node, pushed: &[Value]) -> Result<(), ApiError> {
    let store = node
        .store()
        .ok_or_else(|| ApiError::Unavailable("Storage not available".into()))?;
    let wanted: Vec<SkillSpec> = decode_all(pushed, "skill")?;
    if turnstone_accounts::skills::replace_manual(&store, &wanted).await? {
        tracing::info!(skills = wanted.len(), "skills from the console stored");
    }
    Ok(())
}

fn decode_all<T: serde::de::DeserializeOwned>(
    pushed: &[Value],
    what: &str,
) -> Result<Vec<T>, ApiError> {
    pushed
        .iter()
        .map(|v| serde_json::from_value(v.clone()))
        .collect::<Result<_, _>>()
        .map_err(|e| ApiError::BadRequest(format!("Invalid {what}: {e}")))
}

fn parse_body<T: serde::de::DeserializeOwned + Default>(body: &Bytes) -> Result<T, ApiError> {
    let invalid = |e: serde_json::Error| ApiError::BadRequest(format!("Invalid JSON body: {e}"));
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    match serde_json::from_slice::<Value>(body).map_err(invalid)? {
        Value::Null => Ok(T::default()),
        v => serde_json::from_value(v).map_err(invalid),
    }
}

/// `POST /v1/api/_internal/config-reload`.
pub async fn config_reload(
    State(node): State<Arc<Node>>,
    body: Bytes,
) -> Result<Json<ConfigReloadReply>, ApiError> {
    let body: ConfigReloadBody = parse_body(&body)?;
    if node.store().is_none() {
        return Ok(Json(ConfigReloadReply {
            status: "noop".into(),
            ..ConfigReloadReply::default()
        }));
    }
    if let Some(pushed) = &body.settings {
        store_pushed_settings(&node, pushed).await?;
    }
    if let Some(pushed) = &body.policies {
        store_pushed_policies(&node, pushed).await?;
    }
    if let Some(pushed) = &body.skills {
        store_pushed_skills(&node, pushed).await?;
    }
    let reply = reload_settings(&node).await;
    tracing::info!(status = %reply.status, keys = reply.applied.len(), refused = reply.refused.len(), "settings reloaded");
    Ok(Json(reply))
}

/// `POST /v1/api/_internal/model-reload`.
pub async fn model_reload(
    State(node): State<Arc<Node>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: ModelReloadBody = parse_body(&body)?;
    if node.store().is_none() {
        let aliases = node.manager.engine().model_aliases();
        return Ok(Json(json!({"status": "noop", "aliases": aliases})).into_response());
    }
    if let Some(pushed) = &body.settings {
        store_pushed_settings(&node, pushed).await?;
    }
    if let Some(pushed) = &body.definitions {
        store_pushed_definitions(&node, pushed).await?;
    }
    reload_settings(&node).await;
    match reload_models(&node).await {
        Ok(aliases) => {
            tracing::info!(?aliases, "model registry reloaded");
            Ok(Json(json!({"status": "ok", "aliases": aliases})).into_response())
        }
        Err(reason) => {
            tracing::warn!(%reason, "model reload refused; the registry is unchanged");
            Ok((
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({"status": "error", "reason": reason})),
            )
                .into_response())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, value: &str, node_id: &str) -> SettingRow {
        SettingRow {
            key: key.into(),
            value: value.into(),
            node_id: node_id.into(),
            is_secret: false,
            changed_by: String::new(),
            created: String::new(),
            updated: String::new(),
        }
    }

    fn baseline(engine: EngineConfig, judge: JudgeSection) -> Baseline {
        let own = ModelEntry::new(ProviderKind::Openai, "http://127.0.0.1:9/v1", "m");
        Baseline::new(engine, judge, None, "default", own)
    }

    #[test]
    fn stored_values_override_the_start_and_fall_back_when_removed() {
        let base = EngineConfig::default();
        let baseline = baseline(base.clone(), JudgeSection::default());
        let rows = [
            row("server.approval_timeout", "2", ""),
            row("tools.search", "\"off\"", ""),
            row("tools.search", "\"on\"", "n1"),
            row("session.auto_compact_pct", "7", ""),
            row("tools.bogus", "1", ""),
        ];
        let (settings, refused) = effective(&rows, "n1");
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(refused["session.auto_compact_pct"].contains("between 0 and 1"));
        assert_eq!(refused["tools.bogus"], "Unknown setting: tools.bogus");
        let mut config = base.clone();
        apply_live(&settings, &baseline, &mut config);
        assert_eq!(config.approval_timeout, Duration::from_secs(2));
        assert_eq!(
            config.toolset.search,
            turnstone_tools::toolset::SearchMode::On
        );
        assert_eq!(config.auto_compact_pct, base.auto_compact_pct);
        apply_live(&BTreeMap::new(), &baseline, &mut config);
        assert_eq!(config.approval_timeout, base.approval_timeout);
        assert_eq!(config.toolset.search, base.toolset.search);
    }

    #[test]
    fn stored_judge_keys_reach_the_judge_and_fall_back_to_the_file() {
        let file: JudgeSection =
            toml::from_str("model = \"file-judge\"\ntimeout = 30.0\n").unwrap();
        let base = EngineConfig::default();
        let baseline = baseline(base.clone(), file);
        let rows = [
            row("judge.model", "\"stored-judge\"", ""),
            row("judge.base_url", "\"http://127.0.0.1:9/v1\"", ""),
            row("judge.provider", "\"openai\"", ""),
            row("judge.api_key", "\"sk-stored\"", ""),
            row("judge.timeout", "2.5", ""),
            row("judge.confidence_threshold", "0.9", ""),
        ];
        let (settings, refused) = effective(&rows, "n1");
        assert!(refused.is_empty(), "{refused:?}");
        let mut config = base.clone();
        apply_live(&settings, &baseline, &mut config);
        assert_eq!(config.judge.confidence_threshold, 0.9);
        let llm = config.judge.llm.clone().expect("the LLM tier");
        assert_eq!(llm.model, "stored-judge");
        assert!(llm.client.is_some(), "its own endpoint");
        assert_eq!(llm.timeout, Duration::from_millis(2500));
        // Removed from the store: the file's again.
        apply_live(&BTreeMap::new(), &baseline, &mut config);
        let llm = config.judge.llm.clone().expect("the LLM tier");
        assert_eq!(llm.model, "file-judge");
        assert!(llm.client.is_none(), "the workstream's client");
        assert_eq!(llm.timeout, Duration::from_secs(30));
        // Off from the store.
        let off = BTreeMap::from([("judge.enabled".to_string(), json!(false))]);
        apply_live(&off, &baseline, &mut config);
        assert!(!config.judge.enabled && config.judge.llm.is_none());
    }

    #[test]
    fn a_definition_becomes_a_registry_entry() {
        let d = ModelDefinition {
            definition_id: "d1".into(),
            alias: "fast".into(),
            model: "m".into(),
            provider: "anthropic".into(),
            base_url: String::new(),
            api_key: "k".into(),
            context_window: 4096,
            capabilities: "{}".into(),
            enabled: true,
            created_by: String::new(),
            created: String::new(),
            updated: String::new(),
        };
        let e = entry_of(&d).unwrap();
        assert_eq!(e.provider, ProviderKind::Anthropic);
        assert_eq!(e.base_url, None);
        assert_eq!(e.api_key.as_deref(), Some("k"));
        assert_eq!(e.context_window, Some(4096));
        assert!(!e.vision, "vision is off unless the capabilities say so");
        let seeing = ModelDefinition {
            capabilities: r#"{"vision": true}"#.into(),
            ..d.clone()
        };
        assert!(entry_of(&seeing).unwrap().vision);
        let bad = ModelDefinition {
            provider: "gemini".into(),
            ..d
        };
        assert!(entry_of(&bad).unwrap_err().contains("gemini"));
    }
}
