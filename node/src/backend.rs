//! The model backend a terminal frontend runs its engine on: a real OpenAI-compatible
//! endpoint, or — without a base URL — the scripted fake model started in-process on
//! `127.0.0.1` (handy for trying the client and for its tests).

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
        turnstone_testkit::FakeLlmConfig::default(),
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
        let (fake, base_url) = match base_url {
            Some(url) => (None, url.to_string()),
            None => {
                let (fake, url) = start_scripted().await?;
                (Some(fake), url)
            }
        };
        let mut config = OpenAiConfig::new(base_url.clone());
        config.api_key = api_key;
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
