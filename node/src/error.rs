//! The node crate's error type.

use std::path::PathBuf;

/// Why a node's model backend, or a terminal frontend (`turnstone-cli`), could not start or
/// had to stop.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Config(#[from] turnstone_runtime::ConfigError),
    #[error(
        "provider `{0}` is not supported (expected `openai`, any OpenAI-compatible endpoint, or \
         `anthropic`, the Messages API)"
    )]
    UnsupportedProvider(String),
    /// The provider is known but what it needs is missing (an API key, a model name).
    #[error("{0}")]
    ProviderSetup(String),
    #[error("working directory {path} is not a directory")]
    BadCwd { path: PathBuf },
    #[error("the built-in scripted model could not start: {0}")]
    FakeModel(String),
    #[error("no model to run on: {0}")]
    ModelDetection(String),
    #[error("model client: {0}")]
    Llm(#[from] turnstone_llm::LlmError),
    #[error("tool registry: {0}")]
    Tools(#[from] turnstone_tools::RegistryError),
    #[error(transparent)]
    Workstream(#[from] turnstone_engine::ManagerError),
    #[error("persistence: {0}")]
    Persistence(String),
    #[error("terminal i/o: {0}")]
    Io(#[from] std::io::Error),
}
