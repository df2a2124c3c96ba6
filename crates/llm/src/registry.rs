//! The model registry: `[models.<alias>]` entries, the `[model]` selection (default, fallback
//! chain, sub-agent model) and the [`FallbackProvider`] that tries the chain in order.
//!
//! ```toml
//! [models.local]
//! provider = "openai"
//! base_url = "http://127.0.0.1:8000/v1"
//! model = "qwen3-32b"
//! context_window = 131072
//!
//! [models.claude]
//! provider = "anthropic"          # base_url defaults to https://api.anthropic.com
//! model = "claude-sonnet-4-5"
//! api_key_env = "ANTHROPIC_API_KEY"
//! max_tokens = 16000
//! thinking_budget = 4096          # anthropic only
//! vision = true                   # read_file sends images (default false: a description)
//!
//! [model]
//! default = "claude"
//! fallback = ["local"]
//! agent_model = "local"
//! ```
//!
//! Every alias gets one provider and one [`CircuitBreaker`], shared by all chains using it.
//! A chain falls through to its next model when the current one is unreachable before the
//! first byte: its breaker is open, or the attempt failed with a retryable error (connection
//! refused, timeout, 429, 5xx/overloaded). Any other error (a 400, an auth failure) is
//! returned at once: the next model would not fix the request. Each member receives the
//! request with `model` replaced by its own model name (and `max_tokens` filled from its entry
//! when the request has none). Wrap the chain in [`crate::Resilient`] as usual: retries then
//! cover the whole chain.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::anthropic::{AnthropicConfig, AnthropicProvider};
use crate::error::LlmError;
use crate::openai::{OpenAiConfig, OpenAiProvider};
use crate::provider::Provider;
use crate::resilience::CircuitBreaker;
use crate::types::{ChatRequest, ChatStream, Completion, ModelCapabilities};

/// Default `base_url` of `provider = "openai"` entries.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Which adapter an entry uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible chat completions (`base_url` includes `/v1`).
    Openai,
    /// Anthropic Messages (`base_url` without `/v1`).
    Anthropic,
}

/// One `[models.<alias>]` table.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub provider: ProviderKind,
    /// Defaults: `https://api.openai.com/v1` (openai), `https://api.anthropic.com` (anthropic).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The model name sent to the backend.
    pub model: String,
    /// The key itself (prefer `api_key_env`); at most one of the two.
    #[serde(default)]
    pub api_key: Option<String>,
    /// Name of the environment variable holding the key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub context_window: Option<u32>,
    /// Output token limit (sent when the request sets none).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Anthropic only: extended thinking budget.
    #[serde(default)]
    pub thinking_budget: Option<u32>,
    /// Anthropic only: enable the server-side web search tool with this many uses per turn.
    #[serde(default)]
    pub web_search_max_uses: Option<u32>,
    /// The model accepts image inputs: `read_file` on an image sends the image itself
    /// (default off: the model gets a text description and no image bytes).
    #[serde(default)]
    pub vision: bool,
}

impl std::fmt::Debug for ModelEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelEntry")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("context_window", &self.context_window)
            .field("max_tokens", &self.max_tokens)
            .field("thinking_budget", &self.thinking_budget)
            .field("web_search_max_uses", &self.web_search_max_uses)
            .field("vision", &self.vision)
            .finish()
    }
}

impl ModelEntry {
    /// A minimal entry (no key, no limits).
    pub fn new(
        provider: ProviderKind,
        base_url: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        Self {
            provider,
            base_url: Some(base_url.into()),
            model: model.into(),
            api_key: None,
            api_key_env: None,
            context_window: None,
            max_tokens: None,
            thinking_budget: None,
            web_search_max_uses: None,
            vision: false,
        }
    }

    /// Configured capabilities, when `context_window` is set.
    pub fn capabilities(&self) -> Option<ModelCapabilities> {
        self.context_window.map(|context_window| ModelCapabilities {
            context_window,
            max_output_tokens: self
                .max_tokens
                .unwrap_or(ModelCapabilities::default().max_output_tokens),
        })
    }
}

/// The `[model]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Alias used by workstreams without an explicit model (optional with one model).
    #[serde(default)]
    pub default: Option<String>,
    /// Aliases tried in order when the selected model is unreachable.
    #[serde(default)]
    pub fallback: Vec<String>,
    /// Alias for sub-agents (`task_agent`); the default when unset.
    #[serde(default)]
    pub agent_model: Option<String>,
}

/// `[models.*]` and `[model]` together (embed both fields in the node's config, or parse a
/// document holding only these two tables).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    #[serde(default)]
    pub models: BTreeMap<String, ModelEntry>,
    #[serde(default)]
    pub model: ModelSection,
}

/// A configuration or lookup error; the message names the alias and lists the known ones.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("unknown model alias '{alias}' (known: {known})")]
    UnknownAlias { alias: String, known: String },
    #[error("no models configured: add a [models.<alias>] table")]
    Empty,
    #[error("[model] default is not set and several models are configured (known: {known})")]
    NoDefault { known: String },
    #[error("model '{alias}': {message}")]
    Invalid { alias: String, message: String },
    #[error("model '{alias}': cannot build provider: {source}")]
    Build {
        alias: String,
        #[source]
        source: LlmError,
    },
}

/// Timeouts and breaker settings applied to every provider the registry builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryOptions {
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Consecutive unreachable attempts that open an alias's breaker.
    pub breaker_threshold: u32,
    pub breaker_cooldown: Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(600),
            breaker_threshold: 3,
            breaker_cooldown: Duration::from_secs(30),
        }
    }
}

/// One configured alias with its built provider and breaker.
#[derive(Clone)]
pub struct RegisteredModel {
    pub alias: String,
    pub entry: ModelEntry,
    pub provider: Arc<dyn Provider>,
    pub breaker: Arc<CircuitBreaker>,
}

impl std::fmt::Debug for RegisteredModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredModel")
            .field("alias", &self.alias)
            .field("entry", &self.entry)
            .field("provider", &self.provider.name())
            .field("breaker", &self.breaker.state())
            .finish()
    }
}

/// All configured models, resolved by alias.
#[derive(Debug, Clone)]
pub struct ModelRegistry {
    models: BTreeMap<String, RegisteredModel>,
    default: String,
    fallback: Vec<String>,
    agent_model: Option<String>,
}

impl ModelRegistry {
    /// Builds every provider; API keys named by `api_key_env` are read from the process
    /// environment.
    pub fn from_config(config: &RegistryConfig) -> Result<Self, RegistryError> {
        Self::from_config_with(
            config,
            &|name| std::env::var(name).ok(),
            &RegistryOptions::default(),
        )
    }

    /// [`from_config`](Self::from_config) with an explicit environment lookup and options.
    pub fn from_config_with(
        config: &RegistryConfig,
        env: &dyn Fn(&str) -> Option<String>,
        options: &RegistryOptions,
    ) -> Result<Self, RegistryError> {
        if config.models.is_empty() {
            return Err(RegistryError::Empty);
        }
        let mut models = BTreeMap::new();
        for (alias, entry) in &config.models {
            let provider = build_provider(alias, entry, env, options)?;
            models.insert(
                alias.clone(),
                RegisteredModel {
                    alias: alias.clone(),
                    entry: entry.clone(),
                    provider,
                    breaker: Arc::new(CircuitBreaker::new(
                        options.breaker_threshold,
                        options.breaker_cooldown,
                    )),
                },
            );
        }
        let known = known_list(models.keys());
        let check = |alias: &str| {
            if models.contains_key(alias) {
                Ok(alias.to_string())
            } else {
                Err(RegistryError::UnknownAlias {
                    alias: alias.to_string(),
                    known: known.clone(),
                })
            }
        };
        let default = match &config.model.default {
            Some(alias) => check(alias)?,
            None if models.len() == 1 => models.keys().next().cloned().unwrap_or_default(),
            None => return Err(RegistryError::NoDefault { known }),
        };
        let fallback = config
            .model
            .fallback
            .iter()
            .map(|a| check(a))
            .collect::<Result<Vec<_>, _>>()?;
        let agent_model = config.model.agent_model.as_deref().map(check).transpose()?;
        Ok(Self {
            models,
            default,
            fallback,
            agent_model,
        })
    }

    /// Every alias, sorted.
    pub fn aliases(&self) -> Vec<&str> {
        self.models.keys().map(String::as_str).collect()
    }

    /// The `[model] default` alias (or the only one).
    pub fn default_alias(&self) -> &str {
        &self.default
    }

    /// The alias sub-agents use: `agent_model`, else the default.
    pub fn agent_alias(&self) -> &str {
        self.agent_model.as_deref().unwrap_or(&self.default)
    }

    /// The `[model] fallback` aliases in order.
    pub fn fallback_aliases(&self) -> &[String] {
        &self.fallback
    }

    /// Looks an alias up; the error lists the known aliases.
    pub fn get(&self, alias: &str) -> Result<&RegisteredModel, RegistryError> {
        self.models
            .get(alias)
            .ok_or_else(|| RegistryError::UnknownAlias {
                alias: alias.to_string(),
                known: known_list(self.models.keys()),
            })
    }

    /// The chain for `alias`: that model, then the fallback aliases (itself and duplicates
    /// left out).
    pub fn chain(&self, alias: &str) -> Result<FallbackProvider, RegistryError> {
        let mut order = vec![alias.to_string()];
        for a in &self.fallback {
            if !order.contains(a) {
                order.push(a.clone());
            }
        }
        let members = order
            .iter()
            .map(|a| self.get(a).map(FallbackMember::from))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FallbackProvider::new(members))
    }

    /// The chain of the default model.
    pub fn default_chain(&self) -> FallbackProvider {
        self.chain(&self.default)
            .unwrap_or_else(|_| FallbackProvider::new(Vec::new()))
    }

    /// The chain of the sub-agent model.
    pub fn agent_chain(&self) -> FallbackProvider {
        self.chain(self.agent_alias())
            .unwrap_or_else(|_| FallbackProvider::new(Vec::new()))
    }
}

fn known_list<'a>(aliases: impl Iterator<Item = &'a String>) -> String {
    let list: Vec<&str> = aliases.map(String::as_str).collect();
    if list.is_empty() {
        "none".to_string()
    } else {
        list.join(", ")
    }
}

fn build_provider(
    alias: &str,
    entry: &ModelEntry,
    env: &dyn Fn(&str) -> Option<String>,
    options: &RegistryOptions,
) -> Result<Arc<dyn Provider>, RegistryError> {
    let invalid = |message: String| RegistryError::Invalid {
        alias: alias.to_string(),
        message,
    };
    if alias.trim().is_empty() {
        return Err(invalid("the alias is empty".into()));
    }
    if entry.model.trim().is_empty() {
        return Err(invalid("`model` is empty".into()));
    }
    let api_key = match (&entry.api_key, &entry.api_key_env) {
        (Some(_), Some(_)) => {
            return Err(invalid("set `api_key` or `api_key_env`, not both".into()));
        }
        (Some(key), None) => Some(key.clone()),
        (None, Some(var)) => Some(env(var).filter(|k| !k.is_empty()).ok_or_else(|| {
            invalid(format!(
                "environment variable {var} (api_key_env) is not set"
            ))
        })?),
        (None, None) => None,
    };
    if let Some(url) = &entry.base_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(invalid(format!(
            "base_url {url:?} must start with http:// or https://"
        )));
    }
    let build = |source| RegistryError::Build {
        alias: alias.to_string(),
        source,
    };
    match entry.provider {
        ProviderKind::Openai => {
            if entry.thinking_budget.is_some() || entry.web_search_max_uses.is_some() {
                return Err(invalid(
                    "`thinking_budget` and `web_search_max_uses` are anthropic-only".into(),
                ));
            }
            let config = OpenAiConfig {
                api_key,
                capabilities: entry.capabilities(),
                connect_timeout: options.connect_timeout,
                request_timeout: options.request_timeout,
                ..OpenAiConfig::new(
                    entry
                        .base_url
                        .clone()
                        .unwrap_or_else(|| OPENAI_DEFAULT_BASE_URL.to_string()),
                )
            };
            Ok(Arc::new(OpenAiProvider::new(config).map_err(build)?))
        }
        ProviderKind::Anthropic => {
            let mut config = AnthropicConfig {
                api_key,
                thinking_budget: entry.thinking_budget,
                web_search_max_uses: entry.web_search_max_uses,
                capabilities: entry.capabilities(),
                connect_timeout: options.connect_timeout,
                request_timeout: options.request_timeout,
                ..AnthropicConfig::default()
            };
            if let Some(url) = &entry.base_url {
                config.base_url.clone_from(url);
            }
            if let Some(max) = entry.max_tokens {
                config.default_max_tokens = max;
            }
            Ok(Arc::new(AnthropicProvider::new(config).map_err(build)?))
        }
    }
}

/// One model of a [`FallbackProvider`] chain.
#[derive(Clone)]
pub struct FallbackMember {
    pub alias: String,
    /// Replaces the request's `model`.
    pub model: String,
    /// Used when the request has no `max_tokens`.
    pub max_tokens: Option<u32>,
    /// Configured capabilities (else the provider is asked).
    pub capabilities: Option<ModelCapabilities>,
    pub provider: Arc<dyn Provider>,
    pub breaker: Arc<CircuitBreaker>,
}

impl From<&RegisteredModel> for FallbackMember {
    fn from(m: &RegisteredModel) -> Self {
        Self {
            alias: m.alias.clone(),
            model: m.entry.model.clone(),
            max_tokens: m.entry.max_tokens,
            capabilities: m.entry.capabilities(),
            provider: Arc::clone(&m.provider),
            breaker: Arc::clone(&m.breaker),
        }
    }
}

impl std::fmt::Debug for FallbackMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackMember")
            .field("alias", &self.alias)
            .field("model", &self.model)
            .field("provider", &self.provider.name())
            .field("breaker", &self.breaker.state())
            .finish()
    }
}

impl FallbackMember {
    fn bind(&self, request: &ChatRequest) -> ChatRequest {
        ChatRequest {
            model: self.model.clone(),
            max_tokens: request.max_tokens.or(self.max_tokens),
            ..request.clone()
        }
    }
}

/// A [`Provider`] trying its members in order while they are unreachable (see the module
/// documentation for what counts).
#[derive(Debug)]
pub struct FallbackProvider {
    members: Vec<FallbackMember>,
    last_served: Mutex<Option<String>>,
}

impl FallbackProvider {
    pub fn new(members: Vec<FallbackMember>) -> Self {
        Self {
            members,
            last_served: Mutex::new(None),
        }
    }

    /// The aliases of the chain, primary first.
    pub fn aliases(&self) -> Vec<&str> {
        self.members.iter().map(|m| m.alias.as_str()).collect()
    }

    /// The alias that answered the most recent successful call.
    pub fn last_served(&self) -> Option<String> {
        self.last_served.lock().clone()
    }

    async fn try_each<'a, T, F, Fut>(
        &'a self,
        request: &ChatRequest,
        attempt: F,
    ) -> Result<T, LlmError>
    where
        F: Fn(&'a FallbackMember, ChatRequest) -> Fut,
        Fut: Future<Output = Result<T, LlmError>> + 'a,
    {
        let mut last_error = None;
        for member in &self.members {
            let Some(permit) = member.breaker.try_acquire() else {
                tracing::warn!(alias = %member.alias, "model breaker open; trying the next model");
                last_error = Some(LlmError::CircuitOpen);
                continue;
            };
            match attempt(member, member.bind(request)).await {
                Ok(value) => {
                    permit.success();
                    *self.last_served.lock() = Some(member.alias.clone());
                    return Ok(value);
                }
                Err(error) if error.is_retryable() => {
                    permit.failure();
                    tracing::warn!(alias = %member.alias, %error, "model unreachable; trying the next model");
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| LlmError::Connect("no models in the chain".into())))
    }
}

#[async_trait]
impl Provider for FallbackProvider {
    fn name(&self) -> &str {
        self.members
            .first()
            .map_or("fallback", |m| m.provider.name())
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, LlmError> {
        self.try_each(
            request,
            |m, req| async move { m.provider.stream(&req).await },
        )
        .await
    }

    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        self.try_each(
            request,
            |m, req| async move { m.provider.complete(&req).await },
        )
        .await
    }

    /// The primary's capabilities (configured, else asked); the `model` argument is ignored
    /// because every member has its own.
    async fn capabilities(&self, _model: &str) -> Result<ModelCapabilities, LlmError> {
        let Some(primary) = self.members.first() else {
            return Ok(ModelCapabilities::default());
        };
        match primary.capabilities {
            Some(caps) => Ok(caps),
            None => primary.provider.capabilities(&primary.model).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RegistryConfig, serde_json::Error> {
        serde_json::from_str(text)
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = parse(r#"{"models": {"a": {"provider": "openai", "model": "m", "bogus": 1}}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus"), "{err}");
        let err = parse(r#"{"model": {"defualt": "a"}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("defualt"), "{err}");
        let err = parse(r#"{"models": {"a": {"provider": "gemini", "model": "m"}}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("gemini"), "{err}");
    }

    #[test]
    fn vision_is_off_unless_an_entry_says_so() {
        let config = parse(
            r#"{"models": {"eyes": {"provider": "openai", "model": "m", "vision": true},
                           "text": {"provider": "anthropic", "model": "c"}}}"#,
        )
        .unwrap();
        assert!(config.models["eyes"].vision);
        assert!(!config.models["text"].vision);
        let err =
            parse(r#"{"models": {"a": {"provider": "openai", "model": "m", "vision": "yes"}}}"#)
                .unwrap_err()
                .to_string();
        assert!(err.contains("invalid type"), "{err}");
    }

    #[test]
    fn validation_errors_name_the_alias() {
        let mut config = RegistryConfig::default();
        assert!(matches!(
            ModelRegistry::from_config(&config),
            Err(RegistryError::Empty)
        ));
        let mut entry = ModelEntry::new(ProviderKind::Openai, "http://127.0.0.1:9/v1", "m");
        entry.api_key = Some("k".into());
        entry.api_key_env = Some("K".into());
        config.models.insert("a".into(), entry.clone());
        let err = ModelRegistry::from_config(&config).unwrap_err().to_string();
        assert!(
            err.contains("model 'a'") && err.contains("not both"),
            "{err}"
        );

        entry.api_key = None;
        entry.api_key_env = Some("TURNSTONE_TEST_SURELY_UNSET_KEY".into());
        config.models.insert("a".into(), entry.clone());
        let err = ModelRegistry::from_config_with(&config, &|_| None, &RegistryOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("TURNSTONE_TEST_SURELY_UNSET_KEY"), "{err}");

        entry.api_key_env = None;
        entry.thinking_budget = Some(2048);
        config.models.insert("a".into(), entry.clone());
        let err = ModelRegistry::from_config(&config).unwrap_err().to_string();
        assert!(err.contains("anthropic-only"), "{err}");

        entry.thinking_budget = None;
        entry.base_url = Some("127.0.0.1:9".into());
        config.models.insert("a".into(), entry);
        let err = ModelRegistry::from_config(&config).unwrap_err().to_string();
        assert!(err.contains("http://"), "{err}");
    }

    #[test]
    fn default_agent_and_chain_order() {
        let mut config = RegistryConfig::default();
        for alias in ["a", "b", "c"] {
            config.models.insert(
                alias.into(),
                ModelEntry::new(ProviderKind::Anthropic, "http://127.0.0.1:9", alias),
            );
        }
        let err = ModelRegistry::from_config(&config).unwrap_err().to_string();
        assert!(err.contains("a, b, c"), "{err}");
        config.model = ModelSection {
            default: Some("b".into()),
            fallback: vec!["b".into(), "c".into(), "a".into(), "c".into()],
            agent_model: None,
        };
        let registry = ModelRegistry::from_config(&config).unwrap();
        assert_eq!(registry.default_alias(), "b");
        assert_eq!(registry.agent_alias(), "b");
        assert_eq!(registry.default_chain().aliases(), ["b", "c", "a"]);
        assert_eq!(registry.chain("a").unwrap().aliases(), ["a", "b", "c"]);
        config.model.agent_model = Some("zzz".into());
        let err = ModelRegistry::from_config(&config).unwrap_err().to_string();
        assert_eq!(err, "unknown model alias 'zzz' (known: a, b, c)");
    }
}
