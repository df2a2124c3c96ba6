//! The node's optional reranker: the stored **Reranker role** (`model.reranker` naming a
//! model definition with `capabilities.supports_rerank`), `[rerank]` of config.toml as its
//! node-local equivalent, the live `tools.rerank_*` settings, and [`NodeReranker`] — the
//! [`Reranker`] every workstream's tools get.
//!
//! **The role.** In the console's Models tab a model definition whose `base_url` is a
//! Cohere/Jina-compatible `/rerank` endpoint and whose capabilities include
//! `{"supports_rerank": true}` (optionally `rerank_instruction`, `rerank_timeout` seconds)
//! is selected under Roles → Reranker; the console stores `model.reranker` = its alias. At
//! every `config-reload` and `model-reload` (and at start) the node builds its reranker from
//! that definition ([`NodeReranker::apply_role`]), replacing the one in force atomically; an
//! unset role, or a definition that is gone, disabled or not `supports_rerank`, leaves none.
//! Such a definition is a reranker only: it never joins the chat registry (see
//! `server::cluster_settings`). `tools.rerank_web_search` defaults on once a reranker is
//! selected ([`RerankSettings::SELECTED`]).
//!
//! **Precedence.** `[rerank]` in config.toml wins over the role, as `[models.*]` win over
//! stored definitions in the spec: a node with the section keeps that endpoint whatever the
//! role says (the stored `tools.rerank_*` toggles still apply to it).
//!
//! ```toml
//! [rerank]                      # a Cohere/Jina-compatible POST {base_url}/rerank
//! base_url = "http://127.0.0.1:8000"   # or the endpoint itself (…/rerank)
//! model = "qwen3-reranker"
//! api_key_env = "RERANK_API_KEY"   # env var holding the key (also X_FILE); default
//!                                  # TURNSTONE_RERANK_API_KEY(_FILE); none: no key sent
//! timeout = 5.0                 # seconds per rerank request; slower = native order
//! web_search = true             # re-order web_search results (tools.rerank_web_search)
//! bm25 = false                  # re-order memory/tool_search/skill candidates (tools.rerank_bm25)
//! bm25_threshold = 0.0          # drop retrieval candidates scored below (tools.rerank_bm25_threshold)
//! instruction = ""              # wrap queries as <Instruct>: … / <Query>: … (not with a chat template)
//! ```
//!
//! Why not a chat `[models.<alias>]` entry: every registry alias builds a chat provider,
//! joins fallback chains and is offered by `/model`; a reranker is none of these and must
//! never be a fallback target. The three toggles are stored settings
//! (`tools.rerank_web_search`, `tools.rerank_bm25`, `tools.rerank_bm25_threshold`, applied
//! live at `config-reload`), so `turnstone-admin rerank-calibrate --apply` and the console
//! can change them; `[rerank]`'s endpoint itself is read at start.
//!
//! Failure never reaches the model: a timeout, a connection error, an HTTP error status, a
//! reply that is not one of the accepted shapes or names a document that was not sent —
//! each is logged at debug (never the key) and counted in
//! `turnstone_rerank_fallbacks_total{use, reason}` (both labels from fixed sets), and the
//! tool keeps its native order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::{Mutex, RwLock};
use serde::Deserialize;
use serde_json::Value;
use turnstone_llm::{RerankClient, RerankConfig};
use turnstone_proto::settings;
use turnstone_store::ModelDefinition;
use turnstone_tools::{RerankUse, Reranker};

/// The key's environment variable when `api_key_env` is not set.
pub const DEFAULT_KEY_ENV: &str = "TURNSTONE_RERANK_API_KEY";

/// The stored settings a node applies live (see the module docs).
pub const SETTING_WEB_SEARCH: &str = "tools.rerank_web_search";
pub const SETTING_BM25: &str = "tools.rerank_bm25";
pub const SETTING_BM25_THRESHOLD: &str = "tools.rerank_bm25_threshold";

/// `[rerank]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerankSection {
    pub base_url: String,
    pub model: String,
    /// The environment variable holding the key (or `X_FILE` its file).
    pub api_key_env: Option<String>,
    /// Seconds; default 5.
    pub timeout: Option<f64>,
    /// Default `true`.
    pub web_search: Option<bool>,
    /// Default `false`.
    pub bm25: Option<bool>,
    /// In `[0, 1]`; default 0 (rerank without filtering).
    pub bm25_threshold: Option<f64>,
    pub instruction: Option<String>,
}

/// When the reranker applies; live (stored settings over the section).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RerankSettings {
    pub web_search: bool,
    pub bm25: bool,
    pub bm25_threshold: f64,
}

impl RerankSection {
    /// Range and shape checks; the message names the key.
    pub fn check(&self) -> Result<(), String> {
        let url = self.base_url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "[rerank] base_url {url:?} must start with http:// or https://"
            ));
        }
        if self.model.trim().is_empty() {
            return Err("[rerank] model is empty".into());
        }
        if let Some(t) = self.timeout
            && !(t.is_finite() && t > 0.0 && t <= 600.0)
        {
            return Err(format!(
                "[rerank] timeout must be above 0 and at most 600 seconds, got {t}"
            ));
        }
        if let Some(t) = self.bm25_threshold
            && !(t.is_finite() && (0.0..=1.0).contains(&t))
        {
            return Err(format!(
                "[rerank] bm25_threshold must be between 0 and 1, got {t}"
            ));
        }
        if let Some(name) = &self.api_key_env
            && name.trim().is_empty()
        {
            return Err("[rerank] api_key_env is empty".into());
        }
        Ok(())
    }

    /// The section's toggles (the baseline the stored settings override).
    pub fn settings(&self) -> RerankSettings {
        RerankSettings {
            web_search: self.web_search.unwrap_or(true),
            bm25: self.bm25.unwrap_or(false),
            bm25_threshold: self.bm25_threshold.unwrap_or(0.0),
        }
    }

    /// The client, its key read from `api_key_env` (or its `_FILE`) through `env`.
    pub fn client(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<RerankClient, String> {
        self.check()?;
        let var = self.api_key_env.as_deref().unwrap_or(DEFAULT_KEY_ENV);
        let api_key = crate::backend::env_secret(var, env).map_err(|e| e.to_string())?;
        if api_key.is_none() && self.api_key_env.is_some() {
            return Err(format!(
                "[rerank] api_key_env names {var}, but neither {var} nor {var}_FILE is set"
            ));
        }
        RerankClient::new(RerankConfig {
            base_url: self.base_url.trim().to_string(),
            model: self.model.trim().to_string(),
            api_key,
            timeout: Duration::from_secs_f64(self.timeout.unwrap_or(5.0)),
            instruction: self.instruction.clone().filter(|i| !i.trim().is_empty()),
        })
        .map_err(|e| format!("[rerank]: {e}"))
    }
}

/// Where the node's reranker came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RerankSource {
    /// `[rerank]` of config.toml (node-local; wins over the stored role).
    ConfigFile,
    /// The stored model definition of this alias, selected as `model.reranker`.
    Model(String),
}

/// One rerank endpoint: its client, the toggles it starts from, and where it came from.
#[derive(Debug)]
pub struct RerankEndpoint {
    pub client: RerankClient,
    /// The toggles the stored `tools.rerank_*` settings override.
    pub baseline: RerankSettings,
    pub source: RerankSource,
}

/// What is in force, swapped as one: the endpoint (none: no reranker), the stored toggles
/// last applied, and the toggles they make over the endpoint's baseline.
#[derive(Debug)]
struct Active {
    endpoint: Option<Arc<RerankEndpoint>>,
    stored: BTreeMap<String, Value>,
    settings: RerankSettings,
}

impl Active {
    fn settle(&mut self) {
        let base = self
            .endpoint
            .as_ref()
            .map_or(RerankSettings::NONE, |e| e.baseline);
        let stored = &self.stored;
        let flag = |k: &str, d: bool| stored.get(k).and_then(Value::as_bool).unwrap_or(d);
        self.settings = RerankSettings {
            web_search: flag(SETTING_WEB_SEARCH, base.web_search),
            bm25: flag(SETTING_BM25, base.bm25),
            bm25_threshold: stored
                .get(SETTING_BM25_THRESHOLD)
                .and_then(Value::as_f64)
                .unwrap_or(base.bm25_threshold),
        };
    }
}

/// The node's [`Reranker`]: the endpoint in force (replaced atomically when the stored
/// `model.reranker` role or its definition changes; none: every use declines), the live
/// toggles, and the fallback counters (kept across replacements). The same value stays in
/// the engine's config for the node's life, so every workstream — also one created before
/// a change — uses what is in force now.
#[derive(Debug)]
pub struct NodeReranker {
    active: RwLock<Active>,
    /// `(use, reason)` → fallbacks; both labels come from fixed sets.
    fallbacks: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// `use` → requests that re-ordered.
    reranked: Mutex<BTreeMap<&'static str, u64>>,
}

impl RerankSettings {
    /// No reranker: nothing is on.
    pub const NONE: Self = Self {
        web_search: false,
        bm25: false,
        bm25_threshold: 0.0,
    };

    /// The baseline of a reranker selected as a model definition: `web_search` on (so it
    /// defaults on once a reranker is selected), `bm25` off, no threshold.
    pub const SELECTED: Self = Self {
        web_search: true,
        bm25: false,
        bm25_threshold: 0.0,
    };
}

impl NodeReranker {
    /// A reranker with `[rerank]`'s endpoint.
    pub fn new(client: RerankClient, settings: RerankSettings) -> Arc<Self> {
        let r = Self::none();
        r.replace(Some(RerankEndpoint {
            client,
            baseline: settings,
            source: RerankSource::ConfigFile,
        }));
        r
    }

    /// No endpoint yet (a stored role may bring one).
    pub fn none() -> Arc<Self> {
        Arc::new(Self {
            active: RwLock::new(Active {
                endpoint: None,
                stored: BTreeMap::new(),
                settings: RerankSettings::NONE,
            }),
            fallbacks: Mutex::default(),
            reranked: Mutex::default(),
        })
    }

    /// Puts `endpoint` in force (`None`: no reranker); the stored toggles stay applied.
    pub fn replace(&self, endpoint: Option<RerankEndpoint>) {
        let mut active = self.active.write();
        active.endpoint = endpoint.map(Arc::new);
        active.settle();
    }

    /// The endpoint in force.
    pub fn endpoint(&self) -> Option<Arc<RerankEndpoint>> {
        self.active.read().endpoint.clone()
    }

    pub fn settings(&self) -> RerankSettings {
        self.active.read().settings
    }

    /// Applies the stored `tools.rerank_*` values (already validated); a key not stored
    /// falls back to the endpoint's baseline.
    pub fn apply_stored(&self, stored: &BTreeMap<String, Value>) {
        let mut active = self.active.write();
        active.stored = stored
            .iter()
            .filter(|(k, _)| k.starts_with("tools.rerank_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        active.settle();
    }

    /// Puts the Reranker role in force: the stored definition `alias` names (`None`: the
    /// role is unset). `[rerank]` of config.toml, when the node has one, wins and stays. An
    /// unset role, or one naming a definition that is missing, disabled or not
    /// `supports_rerank`, leaves no reranker (logged, never the key). The client is rebuilt
    /// only when the definition changed.
    pub fn apply_role(&self, alias: Option<&str>, definitions: &[ModelDefinition]) {
        let current = self.endpoint();
        if current
            .as_ref()
            .is_some_and(|e| e.source == RerankSource::ConfigFile)
        {
            if let Some(alias) = alias {
                tracing::debug!(
                    alias,
                    "model.reranker is set, but [rerank] of the config file wins"
                );
            }
            return;
        }
        let Some(alias) = alias.filter(|a| !a.is_empty()) else {
            if current.is_some() {
                tracing::info!("the Reranker role is cleared: no reranker");
                self.replace(None);
            }
            return;
        };
        let source = RerankSource::Model(alias.to_string());
        let config = definitions
            .iter()
            .find(|d| d.alias == alias)
            .ok_or_else(|| format!("model.reranker names an unknown alias {alias:?}"))
            .and_then(definition_config);
        let config = match config {
            Ok(c) => c,
            Err(reason) => {
                tracing::warn!(%reason, "the Reranker role is not usable: no reranker");
                self.replace(None);
                return;
            }
        };
        if current
            .as_ref()
            .is_some_and(|e| e.source == source && *e.client.config() == config)
        {
            return;
        }
        match RerankClient::new(config) {
            Ok(client) => {
                tracing::info!(alias, endpoint = %client.config().endpoint(), "reranker selected");
                self.replace(Some(RerankEndpoint {
                    client,
                    baseline: RerankSettings::SELECTED,
                    source,
                }));
            }
            Err(e) => {
                tracing::warn!(
                    alias,
                    reason = e.reason(),
                    "the reranker's client cannot be built: no reranker"
                );
                self.replace(None);
            }
        }
    }

    /// Fallbacks so far, by `(use, reason)`.
    pub fn fallbacks(&self) -> BTreeMap<(&'static str, &'static str), u64> {
        self.fallbacks.lock().clone()
    }

    /// Requests that re-ordered, by use.
    pub fn reranked(&self) -> BTreeMap<&'static str, u64> {
        self.reranked.lock().clone()
    }
}

#[async_trait]
impl Reranker for NodeReranker {
    fn active(&self, purpose: RerankUse) -> bool {
        let a = self.active.read();
        a.endpoint.is_some()
            && if purpose.is_retrieval() {
                a.settings.bm25
            } else {
                a.settings.web_search
            }
    }

    async fn rank(
        &self,
        purpose: RerankUse,
        query: &str,
        documents: &[String],
    ) -> Option<Vec<usize>> {
        // One snapshot for the whole request: a replacement meanwhile applies to the next.
        let (endpoint, settings) = {
            let a = self.active.read();
            (a.endpoint.clone(), a.settings)
        };
        let endpoint = endpoint?;
        let on = if purpose.is_retrieval() {
            settings.bm25
        } else {
            settings.web_search
        };
        if !on {
            return None;
        }
        match endpoint.client.rerank(query, documents).await {
            Ok(results) => {
                let threshold = if purpose.is_retrieval() {
                    settings.bm25_threshold
                } else {
                    0.0
                };
                let mut order: Vec<usize> = results
                    .iter()
                    .filter(|r| r.relevance_score >= threshold)
                    .map(|r| r.index)
                    .collect();
                if threshold <= 0.0 {
                    // An endpoint that capped the reply: the rest keep their order after it.
                    let mut listed = vec![false; documents.len()];
                    for &i in &order {
                        listed[i] = true;
                    }
                    order.extend((0..documents.len()).filter(|&i| !listed[i]));
                }
                *self.reranked.lock().entry(purpose.as_str()).or_default() += 1;
                Some(order)
            }
            Err(e) => {
                tracing::debug!(
                    purpose = purpose.as_str(),
                    reason = e.reason(),
                    error = %e,
                    "rerank failed; the native order is kept"
                );
                *self
                    .fallbacks
                    .lock()
                    .entry((purpose.as_str(), e.reason()))
                    .or_default() += 1;
                None
            }
        }
    }
}

/// Whether a stored definition is a reranker (`capabilities.supports_rerank`): then it is
/// never a chat model.
pub fn is_reranker(d: &ModelDefinition) -> bool {
    settings::capability_flag(&d.capabilities, settings::SUPPORTS_RERANK)
}

/// Why a definition cannot be the Reranker role (`None`: it can): it must be enabled and
/// `supports_rerank`. The console's check and the node's.
pub fn role_problem(d: &ModelDefinition) -> Option<String> {
    settings::reranker_role_problem(&d.alias, &d.capabilities, d.enabled)
}

/// The client configuration of a stored definition for the Reranker role: its `base_url`
/// (a `/rerank` endpoint or the service root), `model`, API key, and the capabilities
/// `rerank_instruction` and `rerank_timeout` (seconds, default 5).
pub fn definition_config(d: &ModelDefinition) -> Result<RerankConfig, String> {
    if let Some(problem) = role_problem(d) {
        return Err(problem);
    }
    let url = d.base_url.trim();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "model {:?}: a reranker's base_url must be an http:// or https:// URL",
            d.alias
        ));
    }
    if d.model.trim().is_empty() {
        return Err(format!("model {:?}: model is empty", d.alias));
    }
    let timeout = settings::capability(&d.capabilities, settings::RERANK_TIMEOUT)
        .and_then(|t| t.as_f64())
        .filter(|t| t.is_finite() && *t > 0.0 && *t <= 600.0)
        .unwrap_or(5.0);
    let instruction = settings::capability(&d.capabilities, settings::RERANK_INSTRUCTION)
        .and_then(|i| i.as_str().map(str::to_string))
        .filter(|i| !i.trim().is_empty());
    Ok(RerankConfig {
        base_url: url.to_string(),
        model: d.model.trim().to_string(),
        api_key: Some(d.api_key.clone()).filter(|k| !k.is_empty()),
        timeout: Duration::from_secs_f64(timeout),
        instruction,
    })
}

/// One calibration probe: a query, the passage that answers it; every other probe's
/// passage is an irrelevant one for it.
pub const PROBES: &[(&str, &str)] = &[
    (
        "how long to boil an egg",
        "Boil an egg for nine minutes for a firm yolk.",
    ),
    (
        "capital city of france",
        "Paris is the capital city of France.",
    ),
    (
        "rust borrow checker rules",
        "The Rust borrow checker enforces ownership and borrowing rules at compile time.",
    ),
    (
        "symptoms of dehydration",
        "Common symptoms of dehydration include thirst, dark urine and dizziness.",
    ),
    (
        "train schedule tokyo osaka",
        "Shinkansen trains between Tokyo and Osaka run every ten minutes; see the schedule.",
    ),
    (
        "photosynthesis in plants",
        "Plants use photosynthesis to turn light, water and carbon dioxide into sugar.",
    ),
];

/// What `rerank-calibrate` found.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// Scores of the passages that answer their query.
    pub relevant: Vec<f64>,
    /// Scores of the passages that do not.
    pub irrelevant: Vec<f64>,
}

impl Calibration {
    /// Whether every relevant passage outscored every irrelevant one.
    pub fn separated(&self) -> bool {
        min(&self.relevant) > max(&self.irrelevant)
    }

    /// Whether every score is a probability (the threshold setting is one).
    pub fn is_probability(&self) -> bool {
        self.relevant
            .iter()
            .chain(&self.irrelevant)
            .all(|s| (0.0..=1.0).contains(s))
    }

    /// The floor to use: midway between the best irrelevant and the worst relevant score
    /// when they separate cleanly on a probability scale; `None` otherwise.
    pub fn recommended(&self) -> Option<f64> {
        (self.separated() && self.is_probability()).then(|| {
            let mid = (max(&self.irrelevant) + min(&self.relevant)) / 2.0;
            (mid * 1000.0).round() / 1000.0
        })
    }

    /// The human report.
    pub fn report(&self) -> String {
        let line = |name: &str, s: &[f64]| {
            format!(
                "{name:<10} n={:<3} min={:.3} mean={:.3} max={:.3}",
                s.len(),
                min(s),
                s.iter().sum::<f64>() / s.len().max(1) as f64,
                max(s)
            )
        };
        let mut out = vec![
            line("relevant", &self.relevant),
            line("irrelevant", &self.irrelevant),
        ];
        out.push(format!(
            "scale: {}",
            if self.is_probability() {
                "probability [0, 1]"
            } else {
                "scores outside [0, 1] (logits?): a probability floor does not apply"
            }
        ));
        out.push(if self.separated() {
            "separation: clean (every relevant passage outscored every irrelevant one)".into()
        } else {
            "separation: NO CLEAN SEPARATION: the endpoint is mis-served or the model is weak \
             (check its chat template or set [rerank] instruction)"
                .into()
        });
        out.push(match self.recommended() {
            Some(t) => format!("recommended tools.rerank_bm25_threshold = {t}"),
            None => "recommended tools.rerank_bm25_threshold = 0 (rerank without filtering)".into(),
        });
        out.join("\n")
    }
}

fn min(s: &[f64]) -> f64 {
    s.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(s: &[f64]) -> f64 {
    s.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// Probes the endpoint with [`PROBES`]: one request per query over every probe's passage.
pub async fn calibrate(client: &RerankClient) -> Result<Calibration, turnstone_llm::RerankError> {
    let passages: Vec<String> = PROBES.iter().map(|(_, p)| (*p).to_string()).collect();
    let mut calibration = Calibration {
        relevant: Vec::new(),
        irrelevant: Vec::new(),
    };
    for (i, (query, _)) in PROBES.iter().enumerate() {
        for r in client.rerank(query, &passages).await? {
            if r.index == i {
                calibration.relevant.push(r.relevance_score);
            } else {
                calibration.irrelevant.push(r.relevance_score);
            }
        }
    }
    Ok(calibration)
}

/// Stores `threshold` as the global `tools.rerank_bm25_threshold` (what `rerank-calibrate
/// --apply` does); nodes apply it at their next `config-reload` or start.
pub async fn store_threshold(
    store: &dyn turnstone_store::SettingsStore,
    threshold: f64,
    changed_by: &str,
) -> Result<turnstone_store::SettingRow, String> {
    let value =
        turnstone_proto::settings::validate(SETTING_BM25_THRESHOLD, &Value::from(threshold))
            .map_err(|e| e.to_string())?;
    store
        .put_setting(turnstone_store::SettingRow {
            key: SETTING_BM25_THRESHOLD.into(),
            value: value.to_string(),
            node_id: String::new(),
            is_secret: false,
            changed_by: changed_by.into(),
            created: String::new(),
            updated: String::new(),
        })
        .await
        .map_err(|e| format!("cannot store {SETTING_BM25_THRESHOLD}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section() -> RerankSection {
        RerankSection {
            base_url: "http://127.0.0.1:9".into(),
            model: "m".into(),
            ..RerankSection::default()
        }
    }

    #[test]
    fn the_section_is_checked_naming_the_key() {
        assert!(section().check().is_ok());
        for (bad, says) in [
            (
                RerankSection {
                    base_url: "ftp://x".into(),
                    ..section()
                },
                "base_url",
            ),
            (
                RerankSection {
                    model: " ".into(),
                    ..section()
                },
                "model",
            ),
            (
                RerankSection {
                    timeout: Some(0.0),
                    ..section()
                },
                "timeout",
            ),
            (
                RerankSection {
                    bm25_threshold: Some(1.5),
                    ..section()
                },
                "bm25_threshold",
            ),
        ] {
            let err = bad.check().unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn the_key_comes_from_the_named_variable_or_fails_naming_it() {
        let named = RerankSection {
            api_key_env: Some("MY_KEY".into()),
            ..section()
        };
        let env = |k: &str| (k == "MY_KEY").then(|| "sk-1".to_string());
        let client = named.client(&env).unwrap();
        assert_eq!(client.config().api_key.as_deref(), Some("sk-1"));
        let err = named.client(&|_| None).unwrap_err();
        assert!(err.contains("MY_KEY"), "{err}");
        // The default variable is optional.
        assert_eq!(section().client(&|_| None).unwrap().config().api_key, None);
    }

    #[test]
    fn stored_settings_override_the_section_and_fall_back() {
        let r = NodeReranker::new(section().client(&|_| None).unwrap(), section().settings());
        assert!(r.active(RerankUse::WebSearch) && !r.active(RerankUse::Memory));
        let stored = BTreeMap::from([
            (SETTING_BM25.to_string(), Value::Bool(true)),
            (SETTING_WEB_SEARCH.to_string(), Value::Bool(false)),
            (SETTING_BM25_THRESHOLD.to_string(), serde_json::json!(0.4)),
        ]);
        r.apply_stored(&stored);
        assert!(!r.active(RerankUse::WebSearch) && r.active(RerankUse::Skill));
        assert_eq!(r.settings().bm25_threshold, 0.4);
        r.apply_stored(&BTreeMap::new());
        assert_eq!(r.settings(), section().settings());
    }

    fn definition(alias: &str, capabilities: &str, enabled: bool) -> ModelDefinition {
        ModelDefinition {
            definition_id: format!("id-{alias}"),
            alias: alias.into(),
            model: "rr".into(),
            provider: "openai".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            api_key: "rk-1".into(),
            context_window: 512,
            capabilities: capabilities.into(),
            enabled,
            created_by: String::new(),
            created: String::new(),
            updated: String::new(),
        }
    }

    const RERANK: &str =
        r#"{"supports_rerank": true, "rerank_instruction": "find", "rerank_timeout": 2}"#;

    #[test]
    fn a_definition_needs_supports_rerank_and_enabled_to_be_the_reranker() {
        let good = definition("rr", RERANK, true);
        let c = definition_config(&good).unwrap();
        assert_eq!(c.api_key.as_deref(), Some("rk-1"));
        assert_eq!(c.instruction.as_deref(), Some("find"));
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert!(
            role_problem(&definition("chat", "{}", true))
                .unwrap()
                .contains("supports_rerank")
        );
        assert!(
            role_problem(&definition("rr", RERANK, false))
                .unwrap()
                .contains("disabled")
        );
        let no_url = ModelDefinition {
            base_url: String::new(),
            ..good
        };
        assert!(definition_config(&no_url).unwrap_err().contains("base_url"));
    }

    #[test]
    fn the_role_is_replaced_cleared_and_loses_to_the_config_file() {
        let r = NodeReranker::none();
        assert!(
            !r.active(RerankUse::WebSearch),
            "no reranker: nothing is on"
        );
        let defs = [
            definition("rr", RERANK, true),
            definition("chat", "{}", true),
            definition("off", r#"{"supports_rerank": true}"#, false),
        ];
        r.apply_role(Some("rr"), &defs);
        let first = r.endpoint().unwrap();
        assert_eq!(first.source, RerankSource::Model("rr".into()));
        assert!(r.active(RerankUse::WebSearch) && !r.active(RerankUse::Memory));
        // The same definition again: the same client.
        r.apply_role(Some("rr"), &defs);
        assert!(Arc::ptr_eq(&first, &r.endpoint().unwrap()));
        // The stored toggles apply over the selected baseline, and survive a replacement.
        r.apply_stored(&BTreeMap::from([(
            SETTING_WEB_SEARCH.to_string(),
            Value::Bool(false),
        )]));
        assert!(!r.active(RerankUse::WebSearch));
        let changed = [definition("rr", r#"{"supports_rerank": true}"#, true)];
        r.apply_role(Some("rr"), &changed);
        assert!(!Arc::ptr_eq(&first, &r.endpoint().unwrap()));
        assert!(!r.active(RerankUse::WebSearch));
        r.apply_stored(&BTreeMap::new());
        // Not usable, or cleared: none.
        for alias in [Some("chat"), Some("off"), Some("gone"), None] {
            r.apply_role(Some("rr"), &defs);
            r.apply_role(alias, &defs);
            assert!(r.endpoint().is_none(), "{alias:?}");
            assert!(!r.active(RerankUse::WebSearch));
        }
        // `[rerank]` wins over the role.
        let file = NodeReranker::new(section().client(&|_| None).unwrap(), section().settings());
        file.apply_role(Some("rr"), &defs);
        assert_eq!(file.endpoint().unwrap().source, RerankSource::ConfigFile);
        file.apply_role(None, &defs);
        assert!(file.endpoint().is_some());
    }

    #[test]
    fn a_clean_separation_recommends_the_midpoint() {
        let c = Calibration {
            relevant: vec![0.9, 0.7],
            irrelevant: vec![0.1, 0.3],
        };
        assert_eq!(c.recommended(), Some(0.5));
        assert!(c.report().contains("separation: clean"), "{}", c.report());
        let mixed = Calibration {
            relevant: vec![0.9, 0.2],
            irrelevant: vec![0.1, 0.3],
        };
        assert_eq!(mixed.recommended(), None);
        assert!(mixed.report().contains("NO CLEAN SEPARATION"));
        let logits = Calibration {
            relevant: vec![7.0],
            irrelevant: vec![-3.0],
        };
        assert_eq!(logits.recommended(), None);
        assert!(logits.report().contains("outside [0, 1]"));
    }
}
