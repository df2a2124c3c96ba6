//! # turnstone-llm
//!
//! Owns talking to language models: the provider-neutral chat types ([`types`]), the
//! [`Provider`] trait, the OpenAI-compatible adapter ([`openai`]), the Anthropic Messages
//! adapter ([`anthropic`]), `<think>` tag splitting ([`think`]), joining the text deltas
//! that arrived together ([`join`]), retry before the first byte
//! and the circuit breaker ([`resilience`]), and the `[models.*]` registry with its fallback
//! chain ([`registry`]), and the Cohere/Jina-compatible reranking client ([`rerank`]).
//!
//! It must not know about tools, sessions, workstreams or storage: a tool is only a
//! [`ToolSpec`] here and a conversation only a list of [`ChatMessage`]s.

pub mod anthropic;
pub mod error;
pub mod estimate;
mod http;
pub mod join;
pub mod openai;
pub mod provider;
pub mod registry;
pub mod rerank;
pub mod resilience;
mod sse;
mod stream_driver;
pub mod think;
pub mod types;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use error::LlmError;
pub use join::join_ready_deltas;
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use provider::Provider;
pub use registry::{
    FallbackProvider, ModelEntry, ModelRegistry, ModelSection, ProviderKind, RegistryConfig,
    RegistryError,
};
pub use rerank::{RerankClient, RerankConfig, RerankError, RerankResult};
pub use resilience::{BreakerPermit, BreakerState, CircuitBreaker, Resilient, RetryPolicy};
pub use types::*;
