//! # turnstone-llm
//!
//! Owns talking to language models: the provider-neutral chat types ([`types`]), the
//! [`Provider`] trait, the OpenAI-compatible adapter ([`openai`]), `<think>` tag splitting
//! ([`think`]), retry before the first byte and the circuit breaker ([`resilience`]).
//!
//! It must not know about tools, sessions, workstreams or storage: a tool is only a
//! [`ToolSpec`] here and a conversation only a list of [`ChatMessage`]s.

pub mod error;
pub mod openai;
pub mod provider;
pub mod resilience;
pub mod think;
pub mod types;

pub use error::LlmError;
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use provider::Provider;
pub use resilience::{BreakerPermit, BreakerState, CircuitBreaker, Resilient, RetryPolicy};
pub use types::*;
