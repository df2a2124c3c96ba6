//! Anthropic Messages API adapter (`POST {base_url}/v1/messages`, streaming).
//!
//! Three layers: `wire` (serde shapes), the transport in this file (one shared
//! `reqwest::Client`, `x-api-key` + `anthropic-version` headers, status classification before
//! the first byte) and the logic in `convert` (neutral history → content blocks) and `stream`
//! (SSE events → [`StreamEvent`]s).
//!
//! ## Thinking blocks and replay
//!
//! An assistant turn whose blocks carry more than text and tool calls (`thinking` with its
//! `signature`, `redacted_thinking`, `server_tool_use`, `web_search_tool_result`, text with
//! citations) ends its stream with [`StreamEvent::ProviderData`] holding the full block
//! list. The engine keeps it on the neutral message ([`ChatMessage::provider_data`](crate::ChatMessage::provider_data)),
//! where it is persisted and survives a resume; when the message comes back in a later
//! request, those blocks are sent byte-for-byte, so thinking signatures verify and the prompt
//! cache prefix stays stable.
//!
//! For callers that keep only text and calls, the provider also remembers the blocks, keyed
//! by a fingerprint of the text and calls (per instance, bounded to 512 turns), and replays
//! them for a message without provider data. If a request continues a tool loop whose
//! thinking block is known neither way, extended thinking is switched off for that one
//! request instead of letting the API reject it.
//!
//! ## Errors
//!
//! HTTP 429 → [`LlmError::RateLimited`] (with `Retry-After`), 5xx and 529 (overloaded) →
//! [`LlmError::Server`], other 4xx → [`LlmError::Client`]; an `error` event that arrives
//! before `message_start` is classified the same way and returned from
//! [`Provider::stream`], so [`crate::Resilient`] retries it unchanged.

mod convert;
mod stream;
mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::error::LlmError;
use crate::http::{self, clip};
use crate::provider::Provider;
use crate::types::{ChatRequest, ChatStream, Completion, ModelCapabilities, StreamEvent};
use convert::{ReplayMemory, convert, fingerprint_of, tool_json};
use stream::{Driver, error_for_type};
use wire::{WireErrorBody, WireRequest, WireThinking};

/// The `anthropic-version` header value this adapter speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The public API endpoint (without `/v1`).
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The `provider` name of the [`crate::ProviderData`] this adapter produces and replays.
pub const PROVIDER_NAME: &str = "anthropic";

/// Smallest thinking budget the API accepts.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// Configuration of one Anthropic backend (its `Debug` output hides the API key).
#[derive(Clone)]
pub struct AnthropicConfig {
    /// Base URL **without** the version prefix, e.g. `https://api.anthropic.com`; requests go
    /// to `{base_url}/v1/messages`.
    pub base_url: String,
    /// Sent as `x-api-key` when set.
    pub api_key: Option<String>,
    /// `max_tokens` when the request gives none (the API requires the field).
    pub default_max_tokens: u32,
    /// `Some(budget)` enables extended thinking with this `budget_tokens` (at least 1024;
    /// clamped below `max_tokens`). Temperature is not sent while thinking is on.
    pub thinking_budget: Option<u32>,
    /// `Some(n)` adds the server-side `web_search` tool with `max_uses = n` (a client tool
    /// named `web_search` is then left out of the request).
    pub web_search_max_uses: Option<u32>,
    /// Mark the system prompt, the tool list and the last message for prompt caching.
    pub prompt_caching: bool,
    /// Reported by [`Provider::capabilities`]; default 200 000 / `default_max_tokens`.
    pub capabilities: Option<ModelCapabilities>,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Time allowed until the response head (and, per read, between body chunks).
    pub request_timeout: Duration,
    /// Extra headers sent with every request (e.g. `anthropic-beta`).
    pub extra_headers: BTreeMap<String, String>,
}

impl AnthropicConfig {
    /// Defaults for `base_url`: no key, 8192 max tokens, no thinking, no server web search,
    /// prompt caching on, 10 s connect timeout, 600 s request timeout.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            default_max_tokens: 8192,
            thinking_budget: None,
            web_search_max_uses: None,
            prompt_caching: true,
            capabilities: None,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(600),
            extra_headers: BTreeMap::new(),
        }
    }
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self::new(DEFAULT_BASE_URL)
    }
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("default_max_tokens", &self.default_max_tokens)
            .field("thinking_budget", &self.thinking_budget)
            .field("web_search_max_uses", &self.web_search_max_uses)
            .field("prompt_caching", &self.prompt_caching)
            .field("capabilities", &self.capabilities)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field(
                "extra_headers",
                &self.extra_headers.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The Anthropic Messages [`Provider`].
#[derive(Debug)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    client: reqwest::Client,
    replay: Arc<Mutex<ReplayMemory>>,
}

impl AnthropicProvider {
    /// Builds the provider and its HTTP client. Fails (as [`LlmError::Connect`]) only on an
    /// invalid header or an HTTP client that cannot be built.
    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        let client = http::client(http::ClientSettings {
            headers,
            extra_headers: &config.extra_headers,
            credential: config
                .api_key
                .clone()
                .map(|key| (HeaderName::from_static("x-api-key"), key)),
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
        })?;
        Ok(Self {
            config,
            client,
            replay: Arc::new(Mutex::new(ReplayMemory::default())),
        })
    }

    /// The configuration this provider was built with.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    fn url(&self) -> String {
        format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'))
    }

    /// The JSON body sent for `request` (exposed for inspection and tests).
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let replay = |m: &crate::types::ChatMessage| {
            if let Some(data) = m
                .provider_data
                .as_ref()
                .filter(|d| d.provider == PROVIDER_NAME && !d.blocks.is_empty())
            {
                return Some(data.blocks.clone());
            }
            self.replay.lock().get(fingerprint_of(m)).cloned()
        };
        let converted = convert(&request.messages, &replay);
        let max_tokens = request
            .max_tokens
            .unwrap_or(self.config.default_max_tokens)
            .max(1);
        let thinking = self
            .config
            .thinking_budget
            .map(|b| b.min(max_tokens.saturating_sub(1)))
            .filter(|b| *b >= MIN_THINKING_BUDGET)
            .filter(|_| !converted.open_tool_loop_without_thinking)
            .map(|budget_tokens| WireThinking {
                kind: "enabled",
                budget_tokens,
            });
        let cache = self.config.prompt_caching;
        let mut system: Vec<Value> = converted
            .system
            .iter()
            .map(|text| json!({"type": "text", "text": text}))
            .collect();
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .filter(|t| self.config.web_search_max_uses.is_none() || t.name != "web_search")
            .map(tool_json)
            .collect();
        if let Some(max_uses) = self.config.web_search_max_uses {
            tools.push(json!({
                "type": "web_search_20250305",
                "name": "web_search",
                "max_uses": max_uses,
            }));
        }
        let mut messages = converted.messages;
        if cache {
            let mark = |block: Option<&mut Value>| {
                if let Some(block @ Value::Object(_)) = block {
                    block["cache_control"] = json!({"type": "ephemeral"});
                }
            };
            mark(system.last_mut());
            mark(tools.last_mut());
            let last_block = messages.last_mut().and_then(|m| m.content.last_mut());
            if last_block
                .as_ref()
                .is_some_and(|b| b["type"] == "text" || b["type"] == "tool_result")
            {
                mark(last_block);
            }
        }
        let body = WireRequest {
            model: &request.model,
            max_tokens,
            system,
            messages,
            tools,
            temperature: request.temperature.filter(|_| thinking.is_none()),
            thinking,
            stream: true,
        };
        serde_json::to_value(&body).unwrap_or(Value::Null)
    }

    /// Sends a request and waits for a successful response head.
    async fn send(&self, body: &Value) -> Result<reqwest::Response, LlmError> {
        let request = self
            .client
            .post(self.url())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(body);
        let (failed, response) =
            match http::response_head(request, self.config.request_timeout).await? {
                Ok(response) => return Ok(response),
                Err(failed) => failed,
            };
        let retry_after = failed.retry_after;
        let (kind, body) = read_error_body(response).await;
        Err(match failed.error(body) {
            LlmError::Client { status, body } => match error_for_type(&kind, String::new()) {
                // An overloaded/rate-limit error type under an odd status is still retryable.
                LlmError::Server { status, .. } => LlmError::Server {
                    status,
                    retry_after,
                    body,
                },
                LlmError::RateLimited { .. } => LlmError::RateLimited { retry_after, body },
                _ => LlmError::Client { status, body },
            },
            error => error,
        })
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        PROVIDER_NAME
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, LlmError> {
        let body = self.request_body(request);
        let response = self.send(&body).await?;
        let mut driver = Driver::new(response.bytes_stream(), Arc::clone(&self.replay));
        tokio::time::timeout(self.config.request_timeout, driver.prime())
            .await
            .map_err(|_| LlmError::Timeout("no stream event in time".into()))??;
        tracing::debug!(model = %request.model, "anthropic stream started");
        Ok(driver.into_stream())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let mut stream = self.stream(request).await?;
        let mut completion = Completion::default();
        while let Some(item) = stream.next().await {
            match item? {
                StreamEvent::Content(t) => completion.content.push_str(&t),
                StreamEvent::Reasoning(t) => completion.reasoning.push_str(&t),
                StreamEvent::ToolCalls(calls) => completion.tool_calls = calls,
                StreamEvent::Usage(u) => completion.usage = Some(u),
                StreamEvent::Finish(f) => completion.finish_reason = Some(f),
                StreamEvent::ProviderData(_) | StreamEvent::Notice(_) => {}
            }
        }
        if completion.finish_reason.is_none() {
            return Err(LlmError::StreamInterrupted(
                "stream ended before message_stop".into(),
            ));
        }
        Ok(completion)
    }

    async fn capabilities(&self, _model: &str) -> Result<ModelCapabilities, LlmError> {
        Ok(self.config.capabilities.unwrap_or(ModelCapabilities {
            context_window: 200_000,
            max_output_tokens: self.config.default_max_tokens,
        }))
    }
}

/// The error `type` and a clipped message of an error response; never fails.
async fn read_error_body(response: reqwest::Response) -> (String, String) {
    let Some(text) = http::error_text(response).await else {
        return (String::new(), String::new());
    };
    match serde_json::from_str::<WireErrorBody>(&text) {
        Ok(WireErrorBody { error: Some(e) }) => (e.kind.clone(), clip(&e.text())),
        _ => (String::new(), clip(&text)),
    }
}

#[cfg(test)]
mod tests;
