//! The Anthropic-shaped HTTP fake: `POST /v1/messages` on 127.0.0.1, streaming the Messages
//! API events (`message_start`, `ping`, `content_block_start/delta/stop` with `text_delta`,
//! `thinking_delta`, `signature_delta`, `input_json_delta`, `message_delta` with usage and
//! `stop_reason`, `message_stop`, and `error`), answering with the [`script`](crate::script)
//! rules, per-request overrides and injected faults.
//!
//! Script mapping: the last message decides. A user message whose last block is a
//! `tool_result` counts as a `tool` message (its text is the result's content); otherwise its
//! text blocks, joined by `\n`, are the user text. Rules as in the crate docs (`TOOL:`,
//! `CALL:`, `THINK:`, echo), plus, for this fake only, a line `SEARCH: <query>` that makes
//! the reply start with a server-side web search (`server_tool_use` +
//! `web_search_tool_result` with two results) before the rest of the reply.
//!
//! Like the real API the fake rejects (HTTP 400, `invalid_request_error`): a missing
//! `anthropic-version` header, a body without `model`/`max_tokens`/`messages`, a role other
//! than `user`/`assistant`, empty content or empty text blocks, a `tool_result` that does not
//! answer a `tool_use` of the assistant message right before it, a `thinking` block whose
//! signature it did not issue, and — with `thinking` enabled — a tool loop continued without
//! the assistant turn's thinking block. With [`FakeAnthropicConfig::api_key`] set, a wrong
//! `x-api-key` gets 401 `authentication_error`.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::error::TestkitError;
use crate::script::{ScriptMessage, ScriptReply, prompt_tokens, reply_for, split_chunks};

/// Settings of a [`FakeAnthropic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeAnthropicConfig {
    /// When set, requests must carry exactly this `x-api-key`.
    pub api_key: Option<String>,
    /// Characters per streamed text / thinking / partial-JSON delta (at least 1).
    pub chunk_chars: usize,
    /// Reported as `cache_read_input_tokens` in `message_start`.
    pub cache_read_tokens: u64,
}

impl Default for FakeAnthropicConfig {
    fn default() -> Self {
        Self {
            api_key: None,
            chunk_chars: 4,
            cache_read_tokens: 0,
        }
    }
}

/// A misbehaviour served to exactly one accepted request (FIFO).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnthropicFault {
    /// This HTTP status with an optional `Retry-After: <seconds>` and this body (sent as
    /// `application/json` when it parses as JSON).
    Status {
        code: u16,
        retry_after: Option<u64>,
        body: String,
    },
    /// The first `after_events` events of the normal stream, then an `error` event of this
    /// type (`overloaded_error`, `api_error`, …) and the end of the body.
    ErrorEvent {
        after_events: usize,
        error_type: String,
        message: String,
    },
    /// The first `after_events` events, then the connection is aborted.
    DropMidStream { after_events: usize },
    /// Each value sent as `event: <its "type">` + `data: <value>`, nothing else.
    RawEvents(Vec<Value>),
    /// Accept the request and never answer (until the server is dropped).
    Hang,
}

/// Headers of one received request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedHeaders {
    pub api_key: Option<String>,
    pub anthropic_version: Option<String>,
}

/// A running fake Anthropic server. Dropping the handle stops it.
#[derive(Debug)]
pub struct FakeAnthropic {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _shutdown: watch::Sender<bool>,
}

#[derive(Debug)]
struct Shared {
    config: FakeAnthropicConfig,
    replies: Mutex<VecDeque<ScriptReply>>,
    faults: Mutex<VecDeque<AnthropicFault>>,
    requests: Mutex<Vec<(Value, RecordedHeaders)>>,
    responses: AtomicU64,
    shutdown: watch::Receiver<bool>,
}

/// The signature the fake issues for a thinking text (and expects back).
pub fn fake_signature(thinking: &str) -> String {
    let mut h = DefaultHasher::new();
    thinking.hash(&mut h);
    format!("fakesig-{:016x}", h.finish())
}

impl FakeAnthropic {
    /// Starts a server with the default configuration on `127.0.0.1:<random port>`.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (a broken test environment).
    pub async fn start() -> Self {
        Self::start_with(FakeAnthropicConfig::default()).await
    }

    /// Starts a server with `config` on `127.0.0.1:<random port>`.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (a broken test environment).
    pub async fn start_with(config: FakeAnthropicConfig) -> Self {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        match Self::bind(addr, config).await {
            Ok(fake) => fake,
            Err(e) => panic!("turnstone-testkit: {e}"),
        }
    }

    /// Starts a server on `addr` (port 0 picks one). Must be called inside a tokio runtime.
    pub async fn bind(addr: SocketAddr, config: FakeAnthropicConfig) -> Result<Self, TestkitError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| TestkitError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| TestkitError::Bind { addr, source })?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            config,
            replies: Mutex::default(),
            faults: Mutex::default(),
            requests: Mutex::default(),
            responses: AtomicU64::new(0),
            shutdown: shutdown_rx.clone(),
        });
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(Arc::clone(&shared));
        let mut stop = shutdown_rx;
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        });
        tokio::spawn(async move {
            if let Err(e) = server.await {
                tracing::warn!(error = %e, "fake-anthropic server ended with an error");
            }
        });
        Ok(Self {
            shared,
            addr,
            _shutdown: shutdown_tx,
        })
    }

    /// `http://127.0.0.1:<port>`: the Anthropic `base_url` (requests go to `/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve `reply` to the next accepted request instead of the rules (FIFO).
    pub fn push_reply(&self, reply: ScriptReply) {
        self.shared.replies.lock().push_back(reply);
    }

    /// Serve `fault` to the next accepted request (FIFO). Rejected requests (400/401) consume
    /// neither a fault nor a reply.
    pub fn push_fault(&self, fault: AnthropicFault) {
        self.shared.faults.lock().push_back(fault);
    }

    /// Bodies of every request received, in order (a non-JSON body as a JSON string).
    pub fn requests(&self) -> Vec<Value> {
        self.shared
            .requests
            .lock()
            .iter()
            .map(|(b, _)| b.clone())
            .collect()
    }

    /// The most recent request body.
    pub fn last_request(&self) -> Option<Value> {
        self.shared.requests.lock().last().map(|(b, _)| b.clone())
    }

    /// Headers of the most recent request.
    pub fn last_headers(&self) -> Option<RecordedHeaders> {
        self.shared.requests.lock().last().map(|(_, h)| h.clone())
    }

    /// How many requests were received (including rejected and faulted ones).
    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().len()
    }
}

fn error_response(status: StatusCode, kind: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
    )
        .into_response()
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let recorded = RecordedHeaders {
        api_key: header_text(&headers, "x-api-key"),
        anthropic_version: header_text(&headers, "anthropic-version"),
    };
    let value = serde_json::from_slice::<Value>(&body);
    shared.requests.lock().push((
        match &value {
            Ok(v) => v.clone(),
            Err(_) => Value::String(String::from_utf8_lossy(&body).into_owned()),
        },
        recorded.clone(),
    ));
    if let Some(expected) = &shared.config.api_key
        && recorded.api_key.as_ref() != Some(expected)
    {
        return error_response(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        );
    }
    if recorded.anthropic_version.is_none() {
        return error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "anthropic-version: header is required",
        );
    }
    let request = match value
        .map_err(|e| format!("invalid JSON body: {e}"))
        .and_then(|v| validate(&v).map(|()| v))
    {
        Ok(v) => v,
        Err(message) => {
            return error_response(StatusCode::BAD_REQUEST, "invalid_request_error", &message);
        }
    };
    let fault = shared.faults.lock().pop_front();
    if fault == Some(AnthropicFault::Hang) {
        let mut stop = shared.shutdown.clone();
        let _ = stop.wait_for(|stopped| *stopped).await;
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "fake-anthropic shutting down",
        );
    }
    match fault {
        Some(AnthropicFault::Status {
            code,
            retry_after,
            body,
        }) => status_response(code, retry_after, body),
        Some(AnthropicFault::RawEvents(events)) => {
            sse_response(events.iter().map(|e| Part::Data(sse_frame(e))).collect())
        }
        Some(AnthropicFault::ErrorEvent {
            after_events,
            error_type,
            message,
        }) => {
            let mut parts = normal_parts(&shared, &request);
            parts.truncate(after_events);
            let error = json!({"type": "error", "error": {"type": error_type, "message": message}});
            parts.push(Part::Data(sse_frame(&error)));
            sse_response(parts)
        }
        Some(AnthropicFault::DropMidStream { after_events }) => {
            let mut parts = normal_parts(&shared, &request);
            parts.truncate(after_events.min(parts.len().saturating_sub(1)));
            parts.push(Part::Abort);
            sse_response(parts)
        }
        Some(AnthropicFault::Hang) | None => {
            if request["stream"] == true {
                sse_response(normal_parts(&shared, &request))
            } else {
                let (reply, search) = next_reply(&shared, &request);
                let n = shared.responses.fetch_add(1, Ordering::Relaxed);
                let events = reply_events(&shared.config, &request, &reply, search.as_deref(), n);
                (StatusCode::OK, axum::Json(message_json(&events))).into_response()
            }
        }
    }
}

fn status_response(code: u16, retry_after: Option<u64>, body: String) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    let mut response = (status, [(header::CONTENT_TYPE, content_type)], body).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// Checks the request the way the real API would (see the module docs).
fn validate(body: &Value) -> Result<(), String> {
    if !body["model"].is_string() {
        return Err("model: Field required".into());
    }
    if !body["max_tokens"].is_u64() {
        return Err("max_tokens: Field required".into());
    }
    let Some(messages) = body["messages"].as_array() else {
        return Err("messages: Field required".into());
    };
    let thinking_on = body["thinking"]["type"] == "enabled";
    let mut previous_tool_uses: Vec<String> = Vec::new();
    let mut previous_starts_with_thinking = false;
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role != "user" && role != "assistant" {
            return Err(format!("messages.{i}.role: unexpected role {role:?}"));
        }
        let blocks: Vec<Value> = match &message["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(blocks) => blocks.clone(),
            _ => return Err(format!("messages.{i}.content: Field required")),
        };
        if blocks.is_empty() {
            return Err(format!(
                "messages.{i}: all messages must have non-empty content"
            ));
        }
        for (j, block) in blocks.iter().enumerate() {
            match block["type"].as_str().unwrap_or_default() {
                "text" if block["text"].as_str().is_none_or(str::is_empty) => {
                    return Err(format!(
                        "messages.{i}.content.{j}: text content blocks must be non-empty"
                    ));
                }
                "tool_result" => {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    if role != "user" || !previous_tool_uses.iter().any(|t| t == id) {
                        return Err(format!(
                            "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}"
                        ));
                    }
                }
                "thinking" => {
                    let thinking = block["thinking"].as_str().unwrap_or_default();
                    if block["signature"].as_str() != Some(fake_signature(thinking).as_str()) {
                        return Err(format!(
                            "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                        ));
                    }
                }
                _ => {}
            }
        }
        if role == "assistant" {
            previous_tool_uses = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .filter_map(|b| b["id"].as_str().map(str::to_string))
                .collect();
            previous_starts_with_thinking = blocks
                .first()
                .is_some_and(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking");
        } else {
            let continues_loop = blocks.iter().any(|b| b["type"] == "tool_result");
            if thinking_on
                && continues_loop
                && i + 1 == messages.len()
                && !previous_starts_with_thinking
            {
                return Err("Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block".into());
            }
            previous_tool_uses.clear();
        }
    }
    Ok(())
}

/// Text of a block list (or a plain string).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The last message reduced for the script rules, and a `SEARCH:` query if any.
fn script_input(request: &Value) -> (ScriptMessage, Option<String>) {
    let Some(last) = request["messages"].as_array().and_then(|m| m.last()) else {
        return (ScriptMessage::user(""), None);
    };
    if let Some(blocks) = last["content"].as_array()
        && let Some(result) = blocks.last().filter(|b| b["type"] == "tool_result")
    {
        return (ScriptMessage::tool(text_of(&result["content"])), None);
    }
    let text = text_of(&last["content"]);
    let mut search = None;
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| match line.trim_start().strip_prefix("SEARCH:") {
            Some(q) => {
                search = Some(q.trim().to_string());
                false
            }
            None => true,
        })
        .collect();
    let role = last["role"].as_str().unwrap_or("user");
    (ScriptMessage::new(role, kept.join("\n")), search)
}

fn next_reply(shared: &Shared, request: &Value) -> (ScriptReply, Option<String>) {
    let (message, search) = script_input(request);
    let reply = shared
        .replies
        .lock()
        .pop_front()
        .unwrap_or_else(|| reply_for(std::slice::from_ref(&message)));
    (reply, search)
}

/// The Anthropic `stop_reason` for a script finish reason.
fn stop_reason(finish: &str) -> &str {
    match finish {
        "stop" => "end_turn",
        "tool_calls" => "tool_use",
        "length" => "max_tokens",
        other => other,
    }
}

/// Every event of a normal reply, in order.
fn reply_events(
    config: &FakeAnthropicConfig,
    request: &Value,
    reply: &ScriptReply,
    search: Option<&str>,
    n: u64,
) -> Vec<Value> {
    let chunk = config.chunk_chars;
    let mut contents: Vec<String> = vec![text_of(&request["system"])];
    if let Some(messages) = request["messages"].as_array() {
        contents.extend(messages.iter().map(|m| text_of(&m["content"])));
    }
    let prompt = prompt_tokens(contents.iter().map(String::as_str));
    let mut events = vec![
        json!({"type": "message_start", "message": {
            "id": format!("msg_fake_{n}"), "type": "message", "role": "assistant",
            "model": request["model"], "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": prompt, "output_tokens": 1,
                      "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": config.cache_read_tokens}}}),
        json!({"type": "ping"}),
    ];
    let mut index = 0;
    let mut block = |events: &mut Vec<Value>, start: Value, deltas: Vec<Value>| {
        events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        for delta in deltas {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    };
    let json_deltas = |text: &str| -> Vec<Value> {
        split_chunks(text, chunk)
            .into_iter()
            .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
            .collect()
    };
    if let Some(query) = search {
        let id = format!("srvtoolu_fake_{n}");
        block(
            &mut events,
            json!({"type": "server_tool_use", "id": id, "name": "web_search", "input": {}}),
            json_deltas(&json!({"query": query}).to_string()),
        );
        let results: Vec<Value> = (1..=2)
            .map(|i| {
                json!({"type": "web_search_result", "url": format!("https://example.invalid/{i}"),
                       "title": format!("Result {i} for {query}"),
                       "encrypted_content": format!("enc-{i}"), "page_age": null})
            })
            .collect();
        block(
            &mut events,
            json!({"type": "web_search_tool_result", "tool_use_id": id, "content": results}),
            Vec::new(),
        );
    }
    if let Some(thinking) = &reply.reasoning {
        let mut deltas: Vec<Value> = split_chunks(thinking, chunk)
            .into_iter()
            .map(|p| json!({"type": "thinking_delta", "thinking": p}))
            .collect();
        deltas.push(json!({"type": "signature_delta", "signature": fake_signature(thinking)}));
        block(
            &mut events,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            deltas,
        );
    }
    if !reply.text.is_empty() {
        let deltas = split_chunks(&reply.text, chunk)
            .into_iter()
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect();
        block(&mut events, json!({"type": "text", "text": ""}), deltas);
    }
    for (i, (name, arguments)) in reply.tool_calls.iter().enumerate() {
        block(
            &mut events,
            json!({"type": "tool_use", "id": format!("toolu_fake_{n}_{i}"), "name": name, "input": {}}),
            json_deltas(arguments),
        );
    }
    events.push(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason(&reply.finish_reason), "stop_sequence": null},
        "usage": {"output_tokens": reply.completion_tokens()}}));
    events.push(json!({"type": "message_stop"}));
    events
}

/// The non-streamed message equivalent to `events`.
fn message_json(events: &[Value]) -> Value {
    let mut message = events
        .first()
        .map(|e| e["message"].clone())
        .unwrap_or_default();
    let mut content: Vec<Value> = Vec::new();
    let mut partial_json: Vec<String> = Vec::new();
    for event in events {
        match event["type"].as_str().unwrap_or_default() {
            "content_block_start" => {
                content.push(event["content_block"].clone());
                partial_json.push(String::new());
            }
            "content_block_delta" => {
                let (Some(block), Some(json)) = (content.last_mut(), partial_json.last_mut())
                else {
                    continue;
                };
                let delta = &event["delta"];
                for (kind, field) in [
                    ("text_delta", "text"),
                    ("thinking_delta", "thinking"),
                    ("signature_delta", "signature"),
                ] {
                    if delta["type"] == kind {
                        let text = format!(
                            "{}{}",
                            block[field].as_str().unwrap_or_default(),
                            delta[field].as_str().unwrap_or_default()
                        );
                        block[field] = Value::String(text);
                    }
                }
                if delta["type"] == "input_json_delta" {
                    json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    block["input"] = serde_json::from_str(json).unwrap_or_else(|_| json!({}));
                }
            }
            "message_delta" => {
                message["stop_reason"] = event["delta"]["stop_reason"].clone();
                message["usage"]["output_tokens"] = event["usage"]["output_tokens"].clone();
            }
            _ => {}
        }
    }
    message["content"] = Value::Array(content);
    message
}

fn normal_parts(shared: &Shared, request: &Value) -> Vec<Part> {
    let (reply, search) = next_reply(shared, request);
    let n = shared.responses.fetch_add(1, Ordering::Relaxed);
    reply_events(&shared.config, request, &reply, search.as_deref(), n)
        .iter()
        .map(|e| Part::Data(sse_frame(e)))
        .collect()
}

fn sse_frame(event: &Value) -> Bytes {
    Bytes::from(format!(
        "event: {}\ndata: {event}\n\n",
        event["type"].as_str().unwrap_or("message")
    ))
}

/// One piece of a response body: bytes, or the point where the connection is aborted.
#[derive(Debug)]
enum Part {
    Data(Bytes),
    Abort,
}

fn sse_response(parts: Vec<Part>) -> Response {
    let stream = futures::stream::iter(parts).then(|part| async move {
        match part {
            Part::Data(bytes) => Ok(bytes),
            Part::Abort => {
                // Let hyper flush what was sent before aborting the connection.
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(10)).await;
                Err(io::Error::other(
                    "turnstone-testkit: connection dropped mid-stream (AnthropicFault::DropMidStream)",
                ))
            }
        }
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(messages: Value) -> Value {
        json!({"model": "m", "max_tokens": 10, "messages": messages})
    }

    #[test]
    fn validation_mirrors_the_api() {
        assert!(validate(&req(json!([{"role": "user", "content": "hi"}]))).is_ok());
        assert!(validate(&json!({"model": "m", "messages": []})).is_err());
        let orphan = req(json!([{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "x", "content": "o"}]}]));
        assert!(validate(&orphan).unwrap_err().contains("tool_use_id"));
        let empty = req(json!([{"role": "user", "content": [{"type": "text", "text": ""}]}]));
        assert!(validate(&empty).unwrap_err().contains("non-empty"));
        let forged = req(json!([
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "nope"}]}
        ]));
        assert!(validate(&forged).unwrap_err().contains("signature"));
    }

    #[test]
    fn events_carry_thinking_search_and_tools() {
        let reply =
            ScriptReply::tool_calls([("bash", "{\"command\":\"ls\"}")]).with_reasoning("hm");
        let events = reply_events(
            &FakeAnthropicConfig::default(),
            &req(json!([{"role": "user", "content": "x"}])),
            &reply,
            Some("q"),
            3,
        );
        let types: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "content_block_start")
            .map(|e| e["content_block"]["type"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            types,
            [
                "server_tool_use",
                "web_search_tool_result",
                "thinking",
                "tool_use"
            ]
        );
        let message = message_json(&events);
        assert_eq!(message["stop_reason"], "tool_use");
        assert_eq!(message["content"][2]["signature"], fake_signature("hm"));
        assert_eq!(message["content"][3]["input"], json!({"command": "ls"}));
    }
}
