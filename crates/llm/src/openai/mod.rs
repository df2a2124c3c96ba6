//! OpenAI-compatible chat-completions adapter (vLLM, llama.cpp, SGLang, OpenAI itself).
//!
//! Three layers: `wire` (serde shapes), the transport in this file (one shared
//! `reqwest::Client`, status classification before the first byte) and the stream logic in
//! `assemble` + `sse` (SSE payloads → [`StreamEvent`]s).

mod assemble;
mod wire;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::error::LlmError;
use crate::http::{self, clip};
use crate::provider::Provider;
use crate::think::ThinkSplitter;
use crate::types::{
    ChatRequest, ChatStream, Completion, FinishReason, ModelCapabilities, StreamEvent, ToolCall,
};
use assemble::{event_stream, fill_missing_ids};
use wire::{WireChunk, WireRequest, error_text};

/// Configuration of one OpenAI-compatible backend (its `Debug` output hides the API key).
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL including the version prefix, e.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Configured capabilities; when set, the backend's model list is never asked.
    pub capabilities: Option<ModelCapabilities>,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Time allowed until the response head (and, per read, between body chunks).
    pub request_timeout: Duration,
    /// Extra headers sent with every request.
    pub extra_headers: BTreeMap<String, String>,
    /// Sent as the request's `seed` (reproducible sampling where the server honours it;
    /// `turnstone-eval --seed`); `None`: no seed.
    pub seed: Option<u64>,
}

impl OpenAiConfig {
    /// Defaults for `base_url`: no key, 10 s connect timeout, 600 s request timeout.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            capabilities: None,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(600),
            extra_headers: BTreeMap::new(),
            seed: None,
        }
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("capabilities", &self.capabilities)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field(
                "extra_headers",
                &self.extra_headers.keys().collect::<Vec<_>>(),
            )
            .field("seed", &self.seed)
            .finish()
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self::new("http://127.0.0.1:8000/v1")
    }
}

/// The OpenAI-compatible [`Provider`].
#[derive(Debug)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    client: reqwest::Client,
    capabilities_cache: Mutex<HashMap<String, ModelCapabilities>>,
}

impl OpenAiProvider {
    /// Builds the provider and its HTTP client. Fails (as [`LlmError::Connect`]) only on an
    /// invalid extra header or an HTTP client that cannot be built.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let client = http::client(http::ClientSettings {
            headers: HeaderMap::new(),
            extra_headers: &config.extra_headers,
            credential: config
                .api_key
                .as_ref()
                .map(|key| (reqwest::header::AUTHORIZATION, format!("Bearer {key}"))),
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
        })?;
        Ok(Self {
            config,
            client,
            capabilities_cache: Mutex::new(HashMap::new()),
        })
    }

    /// The configuration this provider was built with.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.config.base_url.trim_end_matches('/'))
    }

    /// Sends a request and waits for a successful response head.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, LlmError> {
        match http::response_head(request, self.config.request_timeout).await? {
            Ok(response) => Ok(response),
            Err((failed, response)) => {
                let body = read_error_body(response).await;
                Err(failed.error(body))
            }
        }
    }

    /// The server's model list (`GET /models`) as JSON.
    async fn model_list(&self) -> Result<Value, LlmError> {
        let response = self.send(self.client.get(self.url("models"))).await?;
        let body = self.read_body(response).await?;
        serde_json::from_slice(&body)
            .map_err(|e| LlmError::Malformed(format!("model list is not JSON: {e}")))
    }

    /// The ids of the models the server lists (`GET /models`), in its order. What a node
    /// started without `--model` runs on is the first of them.
    pub async fn list_models(&self) -> Result<Vec<String>, LlmError> {
        let list = self.model_list().await?;
        Ok(model_entries(&list).iter().filter_map(model_id).collect())
    }

    /// The context window the server runs with, when it tells: llama.cpp's `GET /props`
    /// (at the server's root, beside `/v1`): the per-slot `default_generation_settings.n_ctx`
    /// (what one request can fill), else the top-level `n_ctx`. `None` when the server has
    /// no such endpoint or says nothing usable (never an error: the configured or listed
    /// window applies then).
    pub async fn server_context_window(&self) -> Option<u32> {
        let base = self.config.base_url.trim_end_matches('/');
        let root = base.strip_suffix("/v1").unwrap_or(base);
        let response = self
            .send(self.client.get(format!("{root}/props")))
            .await
            .ok()?;
        let body = self.read_body(response).await.ok()?;
        let props: Value = serde_json::from_slice(&body).ok()?;
        context_from_props(&props)
    }

    async fn fetch_capabilities(&self, model: &str) -> Result<ModelCapabilities, LlmError> {
        let list = self.model_list().await?;
        let mut caps = capabilities_from_model_list(&list, model);
        if let Some(window) = self.server_context_window().await {
            caps.context_window = window;
        }
        Ok(caps)
    }

    async fn read_body(&self, response: reqwest::Response) -> Result<bytes::Bytes, LlmError> {
        tokio::time::timeout(self.config.request_timeout, response.bytes())
            .await
            .map_err(|_| LlmError::Timeout("response body not complete in time".into()))?
            .map_err(|e| LlmError::StreamInterrupted(format!("reading response body: {e}")))
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, LlmError> {
        let body = WireRequest::new(request, true).with_seed(self.config.seed);
        let builder = self
            .client
            .post(self.url("chat/completions"))
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body);
        let response = self.send(builder).await?;
        if is_json(&response) {
            // The server ignored `stream: true` and sent one JSON completion.
            let body = self.read_body(response).await?;
            let events = completion_events(parse_completion(&body));
            return Ok(crate::estimate::with_usage_estimate(
                Box::pin(futures::stream::iter(events)),
                crate::estimate::PromptEstimate::of(request),
            ));
        }
        tracing::debug!(model = %request.model, "chat stream started");
        // Servers that stream no usage chunk (llama-cpp-python) get an estimate.
        Ok(crate::estimate::with_usage_estimate(
            event_stream(response.bytes_stream()),
            crate::estimate::PromptEstimate::of(request),
        ))
    }

    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let body = WireRequest::new(request, false).with_seed(self.config.seed);
        let builder = self.client.post(self.url("chat/completions")).json(&body);
        let response = self.send(builder).await?;
        let body = self.read_body(response).await?;
        parse_completion(&body)
    }

    async fn capabilities(&self, model: &str) -> Result<ModelCapabilities, LlmError> {
        if let Some(configured) = self.config.capabilities {
            return Ok(configured);
        }
        if let Some(cached) = self.capabilities_cache.lock().get(model) {
            return Ok(*cached);
        }
        let found = self.fetch_capabilities(model).await?;
        self.capabilities_cache
            .lock()
            .insert(model.to_string(), found);
        Ok(found)
    }
}

/// Whether the response is a single JSON document rather than an event stream.
fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// A whole completion replayed as stream events (same order guarantees as a real stream).
fn completion_events(
    completion: Result<Completion, LlmError>,
) -> Vec<Result<StreamEvent, LlmError>> {
    let c = match completion {
        Ok(c) => c,
        Err(e) => return vec![Err(e)],
    };
    let mut out = Vec::new();
    if !c.reasoning.is_empty() {
        out.push(Ok(StreamEvent::Reasoning(c.reasoning)));
    }
    if !c.content.is_empty() {
        out.push(Ok(StreamEvent::Content(c.content)));
    }
    let has_calls = !c.tool_calls.is_empty();
    if has_calls {
        out.push(Ok(StreamEvent::ToolCalls(c.tool_calls)));
    }
    if let Some(usage) = c.usage {
        out.push(Ok(StreamEvent::Usage(usage)));
    }
    let reason = c.finish_reason.unwrap_or(if has_calls {
        FinishReason::ToolCalls
    } else {
        FinishReason::Stop
    });
    out.push(Ok(StreamEvent::Finish(reason)));
    out
}

/// The body of an error response, clipped; never fails.
async fn read_error_body(response: reqwest::Response) -> String {
    let Some(text) = http::error_text(response).await else {
        return String::new();
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(json) => match json.get("error") {
            Some(error) => clip(&error_text(error)),
            None => clip(&text),
        },
        Err(_) => clip(&text),
    }
}

/// Parses a non-streamed completion body.
fn parse_completion(body: &[u8]) -> Result<Completion, LlmError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(LlmError::EmptyResponse);
    }
    let reply: WireChunk = serde_json::from_slice(body).map_err(|e| {
        LlmError::Malformed(format!(
            "completion is not valid JSON ({e}): {}",
            clip(&String::from_utf8_lossy(body))
        ))
    })?;
    if let Some(error) = &reply.error {
        return Err(LlmError::Malformed(format!(
            "backend error: {}",
            error_text(error)
        )));
    }
    let usage = reply.usage.as_ref().map(Into::into);
    let Some(choice) = reply.choices.unwrap_or_default().into_iter().next() else {
        return Err(LlmError::EmptyResponse);
    };
    let message = choice.message.or(choice.delta).unwrap_or_default();
    let mut completion = Completion {
        usage,
        finish_reason: choice.finish_reason.as_deref().map(FinishReason::from_wire),
        ..Completion::default()
    };
    for reasoning in [message.reasoning_content, message.reasoning]
        .into_iter()
        .flatten()
    {
        completion.reasoning.push_str(&reasoning);
    }
    let mut splitter = ThinkSplitter::new();
    let mut pieces = splitter.push(message.content.as_deref().unwrap_or(""));
    pieces.extend(splitter.finish());
    for piece in pieces {
        match piece {
            crate::think::Piece::Content(t) => completion.content.push_str(&t),
            crate::think::Piece::Reasoning(t) => completion.reasoning.push_str(&t),
        }
    }
    completion.tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| {
            let function = call.function.unwrap_or_default();
            ToolCall {
                id: call.id.unwrap_or_default(),
                arguments: function.arguments_text(),
                name: function.name.unwrap_or_default(),
            }
        })
        .collect();
    fill_missing_ids(&mut completion.tool_calls);
    Ok(completion)
}

/// Reads the capabilities of `model` from a `/models` answer (`{"data": [...]}`,
/// `{"models": [...]}` or a bare list). Unknown model or no context field → defaults.
fn capabilities_from_model_list(list: &Value, model: &str) -> ModelCapabilities {
    let entries = model_entries(list);
    let entry = entries
        .iter()
        .find(|e| model_id(e).as_deref() == Some(model))
        .or(if entries.len() == 1 {
            entries.first()
        } else {
            None
        });
    let mut caps = ModelCapabilities::default();
    let Some(entry) = entry else { return caps };
    let number = |v: Option<&Value>| v.and_then(Value::as_u64).filter(|n| *n > 0);
    let context = ["max_model_len", "context_length", "context_window"]
        .iter()
        .find_map(|k| number(entry.get(*k)))
        .or_else(|| number(entry.get("meta").and_then(|m| m.get("n_ctx_train"))));
    if let Some(context) = context {
        caps.context_window = u32::try_from(context).unwrap_or(u32::MAX);
    }
    let max_output = ["max_output_tokens", "max_completion_tokens"]
        .iter()
        .find_map(|k| number(entry.get(*k)));
    if let Some(max_output) = max_output {
        caps.max_output_tokens = u32::try_from(max_output).unwrap_or(u32::MAX);
    }
    caps
}

/// The entries of a `/models` answer: `{"data": [...]}`, `{"models": [...]}` or a bare list.
fn model_entries(list: &Value) -> &[Value] {
    match list {
        Value::Array(items) => items,
        Value::Object(map) => ["data", "models"]
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_array))
            .map_or(&[], Vec::as_slice),
        _ => &[],
    }
}

/// The id of one `/models` entry (`id`, else `model`, else `name`); blank ids are none.
fn model_id(entry: &Value) -> Option<String> {
    ["id", "model", "name"]
        .iter()
        .find_map(|k| entry.get(*k).and_then(Value::as_str))
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

/// The context window in a llama.cpp `/props` answer (see
/// [`OpenAiProvider::server_context_window`]).
fn context_from_props(props: &Value) -> Option<u32> {
    let number = |v: Option<&Value>| {
        v.and_then(Value::as_u64)
            .filter(|n| *n > 0)
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
    };
    number(props.pointer("/default_generation_settings/n_ctx")).or(number(props.get("n_ctx")))
}

#[cfg(test)]
mod tests;
