//! The `Provider` seam: one trait every backend adapter implements.

use async_trait::async_trait;

use crate::error::LlmError;
use crate::types::{ChatRequest, ChatStream, Completion, ModelCapabilities};

/// A chat backend. Implementations do one HTTP exchange per call and no retrying:
/// retry and circuit breaking are layered on top by [`crate::Resilient`].
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// Short provider name for logs and metrics (`openai`, `anthropic`, `fake`).
    fn name(&self) -> &str;

    /// Starts a streaming completion. Returns once the response head arrived and looks valid
    /// (the "first byte" boundary: errors before it are retryable, errors after it are not).
    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, LlmError>;

    /// A non-streaming completion (titles, compaction, judges).
    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError>;

    /// Capabilities of `model`, from configuration or the backend's model list.
    async fn capabilities(&self, model: &str) -> Result<ModelCapabilities, LlmError>;
}
