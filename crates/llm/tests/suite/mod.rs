//! Anthropic adapter and model registry tests against real local HTTP fakes.

mod anthropic;
mod openai_server;
mod registry;
mod rerank;
