//! The model backend a node or a terminal frontend runs its engine on: a real
//! OpenAI-compatible endpoint, Anthropic's Messages API, or — without a base URL — the
//! scripted fake model started in-process on `127.0.0.1` (handy for trying the client and
//! for its tests).
//!
//! [`connect_target`] is the one place that turns `--provider`, `--base-url`, `--api-key`
//! and `--model` into a connected [`Backend`] and the model name requests carry; the node,
//! the terminal client and `turnstone-eval` all call it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use turnstone_engine::{Engine, EngineConfig};
use turnstone_llm::{CircuitBreaker, OpenAiConfig, OpenAiProvider, Resilient, RetryPolicy};
use turnstone_tools::ToolRegistry;

use crate::error::NodeError;

/// The in-process scripted model (none in builds without the `scripted-model` feature).
#[cfg(feature = "scripted-model")]
type ScriptedModel = turnstone_testkit::FakeLlm;
#[cfg(not(feature = "scripted-model"))]
type ScriptedModel = std::convert::Infallible;

/// Starts the scripted model on `127.0.0.1`; returns it (keep it alive) and its base URL.
#[cfg(feature = "scripted-model")]
async fn start_scripted() -> Result<(ScriptedModel, String), NodeError> {
    let fake = turnstone_testkit::FakeLlm::bind(
        std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
        turnstone_testkit::FakeLlmConfig {
            record_requests: false,
            ..turnstone_testkit::FakeLlmConfig::default()
        },
    )
    .await
    .map_err(|e| NodeError::FakeModel(e.to_string()))?;
    let url = fake.base_url();
    Ok((fake, url))
}

#[cfg(not(feature = "scripted-model"))]
async fn start_scripted() -> Result<(ScriptedModel, String), NodeError> {
    Err(NodeError::FakeModel(
        "this build has none (feature `scripted-model` of turnstone-node); pass --base-url".into(),
    ))
}

/// A connected model: the resilient client, where it points, and the in-process fake model
/// (kept alive as long as this value) when one was started.
pub struct Backend {
    pub provider: Resilient,
    pub base_url: String,
    fake: Option<ScriptedModel>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("base_url", &self.base_url)
            .field("scripted", &self.fake.is_some())
            .finish()
    }
}

impl Backend {
    /// Connects to `base_url`, or starts the scripted model when it is `None`.
    pub async fn connect(
        base_url: Option<&str>,
        api_key: Option<String>,
    ) -> Result<Self, NodeError> {
        Self::connect_seeded(base_url, api_key, None).await
    }

    /// [`Backend::connect`] with a sampling seed sent with every request.
    pub async fn connect_seeded(
        base_url: Option<&str>,
        api_key: Option<String>,
        seed: Option<u64>,
    ) -> Result<Self, NodeError> {
        let (fake, base_url) = match base_url {
            Some(url) => (None, url.to_string()),
            None => {
                let (fake, url) = start_scripted().await?;
                (Some(fake), url)
            }
        };
        let mut config = OpenAiConfig::new(base_url.clone());
        config.api_key = api_key;
        config.seed = seed;
        let provider = Resilient::new(
            Arc::new(OpenAiProvider::new(config)?),
            RetryPolicy::default(),
            Arc::new(CircuitBreaker::default()),
        );
        Ok(Self {
            provider,
            base_url,
            fake,
        })
    }

    /// A backend on an already built provider (Anthropic, or a model registry's fallback
    /// chain); `label` is what logs show as its address.
    pub fn from_provider(provider: Arc<dyn turnstone_llm::Provider>, label: String) -> Self {
        Self {
            provider: Resilient::new(
                provider,
                RetryPolicy::default(),
                Arc::new(CircuitBreaker::default()),
            ),
            base_url: label,
            fake: None,
        }
    }

    /// Whether this is the built-in scripted model.
    pub fn is_scripted(&self) -> bool {
        self.fake.is_some()
    }

    /// Builds an engine with the built-in tools on this backend. The returned engine holds
    /// its own client; keep `self` alive for the scripted model to keep serving.
    pub async fn engine(&self, config: EngineConfig) -> Result<Arc<Engine>, NodeError> {
        let tools = Arc::new(ToolRegistry::with_builtins()?);
        Ok(Engine::new(self.provider.clone(), tools, config).await)
    }

    /// [`Backend::engine`] with configured built-in tools (the web tools, their limits).
    pub async fn engine_with(
        &self,
        config: EngineConfig,
        options: &turnstone_tools::BuiltinOptions,
    ) -> Result<Arc<Engine>, NodeError> {
        let tools = Arc::new(ToolRegistry::with_builtin_options(options)?);
        Ok(Engine::new(self.provider.clone(), tools, config).await)
    }
}

/// The model providers [`connect_target`] speaks.
pub const PROVIDERS: &[&str] = &["openai", "anthropic"];

/// Where Anthropic's Messages API is when no base URL is given.
pub const ANTHROPIC_DEFAULT_URL: &str = "https://api.anthropic.com";

/// The model service a frontend talks to, as its flags and config file name it.
#[derive(Clone, Default)]
pub struct ModelTarget {
    /// `openai` (any OpenAI-compatible endpoint) or `anthropic` (the Messages API).
    pub provider: String,
    /// The endpoint. `None`: the scripted model (`openai`) or [`ANTHROPIC_DEFAULT_URL`].
    pub base_url: Option<String>,
    /// The endpoint's key (never logged; `Debug` hides it). `anthropic` needs one.
    pub api_key: Option<String>,
    /// The model requests name. `None`: the first model the endpoint lists (`openai`);
    /// `anthropic` needs one.
    pub model: Option<String>,
    /// Sampling seed sent with every request (`openai` only; Anthropic has none).
    pub seed: Option<u64>,
}

impl std::fmt::Debug for ModelTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelTarget")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("seed", &self.seed)
            .finish()
    }
}

/// `provider` when it is one [`connect_target`] speaks, else
/// [`NodeError::UnsupportedProvider`].
pub fn check_provider(provider: &str) -> Result<(), NodeError> {
    if PROVIDERS.contains(&provider) {
        Ok(())
    } else {
        Err(NodeError::UnsupportedProvider(provider.to_string()))
    }
}

/// The API key a provider finds in the environment when none is given: `TURNSTONE_API_KEY`,
/// then the vendor's own variable (`ANTHROPIC_API_KEY` or `OPENAI_API_KEY`, never the other
/// vendor's: a key is not sent where it does not belong); each name
/// `X` may also be given as `X_FILE` (a file holding the key, as every secret of the
/// services). Giving both `X` and `X_FILE` is an error naming them.
pub fn env_api_key(
    provider: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, NodeError> {
    let names: &[&str] = match provider {
        "anthropic" => &["TURNSTONE_API_KEY", "ANTHROPIC_API_KEY"],
        _ => &["TURNSTONE_API_KEY", "OPENAI_API_KEY"],
    };
    for name in names {
        if let Some(key) = env_secret(name, env)? {
            return Ok(Some(key));
        }
    }
    Ok(None)
}

/// A secret from the environment variable `name`, or from the file `name_FILE` names;
/// `None` when neither is set. Giving both is an error naming them.
pub fn env_secret(
    name: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, NodeError> {
    let file_var = format!("{name}_FILE");
    let inline = env(name).filter(|v| !v.is_empty());
    let file = env(&file_var).filter(|v| !v.trim().is_empty());
    match (inline, file) {
        (Some(_), Some(_)) => Err(NodeError::Config(turnstone_runtime::ConfigError::Env {
            var: file_var,
            message: format!("{name} is given too; give the key one way only"),
        })),
        (Some(key), None) => Ok(Some(key)),
        (None, Some(path)) => Ok(Some(turnstone_runtime::settings::read_secret_file(
            &file_var,
            std::path::Path::new(&path),
        )?)),
        (None, None) => Ok(None),
    }
}

/// Connects to `target` and returns the backend with the model name requests carry. An
/// OpenAI-compatible target without a model asks the endpoint for its list (for up to
/// `detect_wait`, see [`detect_model`]); `anthropic` needs a key and a model.
pub async fn connect_target(
    target: &ModelTarget,
    detect_wait: Duration,
) -> Result<(Backend, String), NodeError> {
    check_provider(&target.provider)?;
    if target.provider == "anthropic" {
        let url = target
            .base_url
            .clone()
            .unwrap_or_else(|| ANTHROPIC_DEFAULT_URL.to_string());
        let mut config = turnstone_llm::AnthropicConfig::new(url.clone());
        config.api_key = target.api_key.clone().filter(|k| !k.is_empty());
        if config.api_key.is_none() {
            return Err(NodeError::ProviderSetup(
                "--provider anthropic needs an API key: --api-key, ANTHROPIC_API_KEY or \
                 ANTHROPIC_API_KEY_FILE"
                    .into(),
            ));
        }
        let model = target
            .model
            .clone()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| NodeError::ProviderSetup("--provider anthropic needs --model".into()))?;
        let provider = turnstone_llm::AnthropicProvider::new(config)?;
        return Ok((Backend::from_provider(Arc::new(provider), url), model));
    }
    let backend = Backend::connect_seeded(
        target.base_url.as_deref(),
        target.api_key.clone(),
        target.seed,
    )
    .await?;
    let model = match target.model.clone().filter(|m| !m.is_empty()) {
        Some(model) => model,
        None => {
            // The endpoint's first model (the scripted model lists its own).
            let model =
                detect_model(&backend.base_url, target.api_key.clone(), detect_wait).await?;
            tracing::info!(
                model = %model,
                url = %backend.base_url,
                "no model given: using the first model the endpoint lists"
            );
            model
        }
    };
    Ok((backend, model))
}

/// A backend built from a config file's model registry (`[models.*]`, `[model]`).
#[derive(Debug)]
pub struct RegistryBackend {
    /// The default alias's fallback chain.
    pub backend: Backend,
    /// The default alias's model name.
    pub model: String,
    /// The default alias.
    pub alias: String,
    /// The model `task_agent` sub-agents run on when `[model] agent_model` names another
    /// alias.
    pub agent_model: Option<turnstone_engine::AgentModel>,
    /// The registry, for per-workstream `/model <alias>` switching.
    pub registry: turnstone_llm::ModelRegistry,
}

/// Builds the backend of a model registry (the node's and the terminal client's
/// `[models.*]` tables): the default alias's fallback chain, and the sub-agent model.
pub fn connect_registry(
    config: &turnstone_llm::RegistryConfig,
) -> Result<RegistryBackend, NodeError> {
    let registry = turnstone_llm::ModelRegistry::from_config(config)
        .map_err(|e| NodeError::ProviderSetup(format!("[models]: {e}")))?;
    let alias = registry.default_alias().to_string();
    let model = registry
        .get(&alias)
        .map_err(|e| NodeError::ProviderSetup(format!("[models]: {e}")))?
        .entry
        .model
        .clone();
    tracing::info!(alias, model, aliases = ?registry.aliases(), "model registry");
    let agent_alias = registry.agent_alias().to_string();
    let agent_model = if agent_alias == alias {
        None
    } else {
        let agent = registry
            .get(&agent_alias)
            .map_err(|e| NodeError::ProviderSetup(format!("[model] agent_model: {e}")))?;
        tracing::info!(alias = %agent_alias, model = %agent.entry.model, "sub-agent model");
        Some(turnstone_engine::AgentModel {
            model: agent.entry.model.clone(),
            provider: Backend::from_provider(
                Arc::new(registry.agent_chain()),
                format!("registry:{agent_alias}"),
            )
            .provider,
        })
    };
    let backend = Backend::from_provider(
        Arc::new(registry.default_chain()),
        format!("registry:{alias}"),
    );
    Ok(RegistryBackend {
        backend,
        model,
        alias,
        agent_model,
        registry,
    })
}

/// How long a node started without `--model` keeps asking the endpoint for its model list
/// (a model server that is still loading answers 503 or refuses connections) before it gives
/// up and fails to start.
pub const DEFAULT_MODEL_DETECT_WAIT: Duration = Duration::from_secs(60);

/// The model a node runs on when `--model` is not given: the first id the endpoint lists
/// (`GET <base_url>/models`). An endpoint that cannot be reached (or answers an error) is
/// asked again with growing pauses for up to `wait`; then, or at once when the list is
/// empty, start-up fails with [`NodeError::ModelDetection`] saying why and what to do.
pub async fn detect_model(
    base_url: &str,
    api_key: Option<String>,
    wait: Duration,
) -> Result<String, NodeError> {
    let mut config = OpenAiConfig::new(base_url.to_string());
    config.api_key = api_key;
    config.connect_timeout = Duration::from_secs(5);
    config.request_timeout = Duration::from_secs(15);
    let provider = OpenAiProvider::new(config)?;
    let models_url = format!("{}/models", base_url.trim_end_matches('/'));
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(250);
    loop {
        let error = match provider.list_models().await {
            Ok(ids) => {
                return ids.into_iter().next().ok_or_else(|| {
                    NodeError::ModelDetection(format!(
                        "{models_url} lists no models; pass --model (or TURNSTONE_MODEL)"
                    ))
                });
            }
            Err(e) => e,
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(NodeError::ModelDetection(format!(
                "cannot list the models at {models_url} (tried for {}s): {error}; start the \
                 model server, or pass --model (or TURNSTONE_MODEL)",
                wait.as_secs()
            )));
        }
        tracing::warn!(url = %models_url, error = %error, "model list unavailable; asking again");
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

/// The tools' working directory: `cwd` when given (it must exist), else the process's.
pub fn resolve_cwd(cwd: Option<PathBuf>) -> Result<PathBuf, NodeError> {
    match cwd {
        Some(path) if path.is_dir() => Ok(path),
        Some(path) => Err(NodeError::BadCwd { path }),
        None => Ok(std::env::current_dir()?),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn keys_come_from_the_providers_own_variables_or_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, "from-file\n").unwrap();
        let file = file.to_str().unwrap();
        let openai = env(&[("OPENAI_API_KEY", "sk-openai")]);
        assert_eq!(
            env_api_key("openai", &openai).unwrap().as_deref(),
            Some("sk-openai")
        );
        assert_eq!(env_api_key("anthropic", &openai).unwrap(), None);
        let both = env(&[
            ("TURNSTONE_API_KEY", "generic"),
            ("OPENAI_API_KEY", "sk-openai"),
        ]);
        assert_eq!(
            env_api_key("openai", &both).unwrap().as_deref(),
            Some("generic")
        );
        let from_file = env(&[("ANTHROPIC_API_KEY_FILE", file)]);
        assert_eq!(
            env_api_key("anthropic", &from_file).unwrap().as_deref(),
            Some("from-file")
        );
        let twice = env(&[("OPENAI_API_KEY", "x"), ("OPENAI_API_KEY_FILE", file)]);
        let err = env_api_key("openai", &twice).unwrap_err().to_string();
        assert!(err.contains("OPENAI_API_KEY_FILE"), "{err}");
        let missing = env(&[("TURNSTONE_API_KEY_FILE", "/nonexistent/key")]);
        let err = env_api_key("openai", &missing).unwrap_err().to_string();
        assert!(err.contains("TURNSTONE_API_KEY_FILE"), "{err}");
    }

    #[tokio::test]
    async fn targets_missing_what_they_need_are_refused_before_connecting() {
        let wait = Duration::from_secs(1);
        let target = |provider: &str, key: Option<&str>, model: Option<&str>| ModelTarget {
            provider: provider.into(),
            base_url: Some("http://127.0.0.1:9".into()),
            api_key: key.map(String::from),
            model: model.map(String::from),
            seed: None,
        };
        let err = connect_target(&target("bedrock", None, None), wait)
            .await
            .unwrap_err();
        assert!(matches!(err, NodeError::UnsupportedProvider(ref p) if p == "bedrock"));
        let err = connect_target(&target("anthropic", None, Some("m")), wait)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
        let err = connect_target(&target("anthropic", Some("k"), None), wait)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("needs --model"), "{err}");
        let (backend, model) = connect_target(&target("anthropic", Some("k"), Some("m")), wait)
            .await
            .unwrap();
        assert_eq!(
            (backend.base_url.as_str(), model.as_str()),
            ("http://127.0.0.1:9", "m")
        );
        assert!(!format!("{:?}", target("openai", Some("sk-x"), None)).contains("sk-x"));
    }

    #[cfg(feature = "scripted-model")]
    #[tokio::test]
    async fn without_a_model_the_endpoints_first_is_used() {
        let (backend, model) = connect_target(
            &ModelTarget {
                provider: "openai".into(),
                ..ModelTarget::default()
            },
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert!(backend.is_scripted());
        assert_eq!(model, "fake-model");
    }
}
