//! Messages API stream events → neutral [`StreamEvent`]s.
//!
//! [`Assembler`] is pure and synchronous: it is fed SSE `data` payloads and told how the body
//! ended. Text deltas become [`StreamEvent::Content`], thinking deltas
//! [`StreamEvent::Reasoning`], client `tool_use` blocks (input streamed as partial JSON) one
//! [`StreamEvent::ToolCalls`] at the end. Server-side web search (`server_tool_use`,
//! `web_search_tool_result`) is reported as notices (info events; `[web search:
//! …]`). At `message_stop` the turn's full block list (thinking with signature, server-tool
//! blocks, citations) is emitted as [`StreamEvent::ProviderData`] (the caller keeps it on the
//! assistant message) and also stored in the [`ReplayMemory`] for callers that keep only text
//! and calls.
//!
//! An `error` event before `message_start` is classified like an HTTP error (rate limit,
//! overloaded → retryable); after it, the stream ends with [`LlmError::StreamInterrupted`].

use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::convert::{ReplayMemory, fingerprint, input_object};
use super::wire::{WireDelta, WireError, WireEvent, WireUsage};
use crate::error::LlmError;
use crate::http::clip;
use crate::sse::SseEvent;
use crate::stream_driver::{self, Assemble};
use crate::types::{FinishReason, ProviderData, StreamEvent, ToolCall, Usage};

/// One content block being received.
#[derive(Debug)]
enum Block {
    Text {
        text: String,
        citations: Vec<Value>,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    /// `tool_use` (client) or `server_tool_use`.
    ToolUse {
        server: bool,
        id: String,
        name: String,
        start_input: Value,
        json: String,
    },
    /// Anything complete at `content_block_start` (`redacted_thinking`,
    /// `web_search_tool_result`, unknown types): replayed as received.
    Raw(Value),
}

impl Block {
    fn from_start(start: Value) -> Self {
        let text = |k: &str| start[k].as_str().unwrap_or_default().to_string();
        match start["type"].as_str().unwrap_or_default() {
            "text" => Self::Text {
                text: text("text"),
                citations: Vec::new(),
            },
            "thinking" => Self::Thinking {
                thinking: text("thinking"),
                signature: text("signature"),
            },
            kind @ ("tool_use" | "server_tool_use") => Self::ToolUse {
                server: kind == "server_tool_use",
                id: text("id"),
                name: text("name"),
                start_input: start.get("input").cloned().unwrap_or_else(|| json!({})),
                json: String::new(),
            },
            _ => Self::Raw(start),
        }
    }

    /// The raw arguments text of a tool-use block.
    fn arguments(start_input: &Value, json: &str) -> String {
        if json.trim().is_empty() {
            match start_input {
                Value::Object(map) if !map.is_empty() => start_input.to_string(),
                _ => "{}".to_string(),
            }
        } else {
            json.to_string()
        }
    }

    /// The block as it is sent back on the next request.
    fn replay_json(&self) -> Value {
        match self {
            Self::Text { text, citations } => {
                let mut b = json!({"type": "text", "text": text});
                if !citations.is_empty() {
                    b["citations"] = Value::Array(citations.clone());
                }
                b
            }
            Self::Thinking {
                thinking,
                signature,
            } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
            Self::ToolUse {
                server,
                id,
                name,
                start_input,
                json,
            } => json!({
                "type": if *server { "server_tool_use" } else { "tool_use" },
                "id": id,
                "name": name,
                "input": input_object(&Self::arguments(start_input, json)),
            }),
            Self::Raw(v) => v.clone(),
        }
    }

    /// Whether the plain neutral history (text + calls) loses something of this block.
    fn needs_replay(&self) -> bool {
        match self {
            Self::Text { citations, .. } => !citations.is_empty(),
            Self::ToolUse { server, .. } => *server,
            Self::Thinking { .. } | Self::Raw(_) => true,
        }
    }
}

/// Event-by-event state of one streamed response.
#[derive(Debug)]
pub(crate) struct Assembler {
    blocks: BTreeMap<usize, Block>,
    /// All text emitted as `Content`, for the replay fingerprint.
    text: String,
    usage: WireUsage,
    saw_usage: bool,
    stop_reason: Option<String>,
    started: bool,
    saw_event: bool,
    done: bool,
    replay: Arc<Mutex<ReplayMemory>>,
}

impl Assembler {
    pub fn new(replay: Arc<Mutex<ReplayMemory>>) -> Self {
        Self {
            blocks: BTreeMap::new(),
            text: String::new(),
            usage: WireUsage::default(),
            saw_usage: false,
            stop_reason: None,
            started: false,
            saw_event: false,
            done: false,
            replay,
        }
    }

    /// Whether any event was received.
    pub fn saw_event(&self) -> bool {
        self.saw_event
    }

    fn on_delta(
        &mut self,
        index: usize,
        delta: WireDelta,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), LlmError> {
        let block = self.blocks.entry(index).or_insert_with(|| match &delta {
            // A delta for a block that never started: tolerate text/thinking.
            WireDelta::ThinkingDelta { .. } | WireDelta::SignatureDelta { .. } => Block::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
            _ => Block::Text {
                text: String::new(),
                citations: Vec::new(),
            },
        });
        match (block, delta) {
            (Block::Text { text, .. }, WireDelta::TextDelta { text: t }) => {
                if !t.is_empty() {
                    text.push_str(&t);
                    self.text.push_str(&t);
                    out.push(StreamEvent::Content(t));
                }
            }
            (Block::Text { citations, .. }, WireDelta::CitationsDelta { citation }) => {
                citations.push(citation);
            }
            (Block::Thinking { thinking, .. }, WireDelta::ThinkingDelta { thinking: t }) => {
                if !t.is_empty() {
                    thinking.push_str(&t);
                    out.push(StreamEvent::Reasoning(t));
                }
            }
            (Block::Thinking { signature, .. }, WireDelta::SignatureDelta { signature: s }) => {
                signature.push_str(&s);
            }
            (Block::ToolUse { json, .. }, WireDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
            }
            (_, WireDelta::Unknown) => {}
            (block, delta) => {
                return Err(LlmError::Malformed(format!(
                    "delta {delta:?} does not fit content block {index} ({})",
                    block_kind(block)
                )));
            }
        }
        Ok(())
    }

    fn merge_usage(&mut self, u: WireUsage) {
        self.saw_usage = true;
        let keep = |new: Option<u64>, old: Option<u64>| new.or(old);
        self.usage = WireUsage {
            input_tokens: keep(u.input_tokens, self.usage.input_tokens),
            output_tokens: keep(u.output_tokens, self.usage.output_tokens),
            cache_creation_input_tokens: keep(
                u.cache_creation_input_tokens,
                self.usage.cache_creation_input_tokens,
            ),
            cache_read_input_tokens: keep(
                u.cache_read_input_tokens,
                self.usage.cache_read_input_tokens,
            ),
        };
    }

    /// An `error` event: classified like an HTTP status before `message_start`.
    fn error_event(&self, error: &WireError) -> LlmError {
        let body = clip(&error.text());
        if self.started {
            return LlmError::StreamInterrupted(format!(
                "backend reported an error mid-stream: {body}"
            ));
        }
        error_for_type(&error.kind, body)
    }
}

fn block_kind(block: &Block) -> &'static str {
    match block {
        Block::Text { .. } => "text",
        Block::Thinking { .. } => "thinking",
        Block::ToolUse { server: true, .. } => "server_tool_use",
        Block::ToolUse { .. } => "tool_use",
        Block::Raw(_) => "raw",
    }
}

/// Neutral usage: prompt tokens count the whole context (fresh + cache written + cache read).
fn usage_of(u: &WireUsage) -> Usage {
    let creation = u.cache_creation_input_tokens.unwrap_or(0);
    let read = u.cache_read_input_tokens.unwrap_or(0);
    let prompt = u.input_tokens.unwrap_or(0) + creation + read;
    let completion = u.output_tokens.unwrap_or(0);
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        cache_creation_tokens: creation,
        cache_read_tokens: read,
        estimated: false,
    }
}

/// The classified error for an Anthropic error `type` (also used for HTTP error bodies).
pub(crate) fn error_for_type(kind: &str, body: String) -> LlmError {
    match kind {
        "rate_limit_error" => LlmError::RateLimited {
            retry_after: None,
            body,
        },
        "overloaded_error" => LlmError::Server {
            status: 529,
            retry_after: None,
            body,
        },
        "api_error" => LlmError::Server {
            status: 500,
            retry_after: None,
            body,
        },
        "authentication_error" => LlmError::Client { status: 401, body },
        "permission_error" => LlmError::Client { status: 403, body },
        "not_found_error" => LlmError::Client { status: 404, body },
        "request_too_large" => LlmError::Client { status: 413, body },
        _ => LlmError::Client { status: 400, body },
    }
}

/// `[web search: "query"]` for a finished `server_tool_use` block.
fn info_for_server_call(name: &str, input: &Value) -> String {
    match input.get("query").and_then(Value::as_str) {
        Some(query) if name == "web_search" => format!("[web search: {query:?}]\n"),
        _ => format!("[server tool {name}: {}]\n", clip(&input.to_string())),
    }
}

/// Info lines for a server-tool result block (`web_search_tool_result`); nothing for other raw
/// blocks.
fn info_for_result(block: &Value) -> Option<StreamEvent> {
    if block["type"] != "web_search_tool_result" {
        return None;
    }
    let content = &block["content"];
    let line = match content.as_array() {
        Some(results) => {
            let shown: Vec<String> = results
                .iter()
                .take(5)
                .map(|r| {
                    format!(
                        "{} <{}>",
                        r["title"].as_str().unwrap_or("(untitled)"),
                        r["url"].as_str().unwrap_or("")
                    )
                })
                .collect();
            let mut line = format!("[web search: {} result(s)", results.len());
            for s in shown {
                line.push_str("\n  - ");
                line.push_str(&s);
            }
            line.push_str("]\n");
            line
        }
        None => format!(
            "[web search failed: {}]\n",
            content["error_code"].as_str().unwrap_or("unknown error")
        ),
    };
    Some(StreamEvent::Notice(line))
}

impl Assemble for Assembler {
    /// Handles one SSE event. An error ends the response.
    fn on_event(&mut self, sse: &SseEvent) -> Result<Vec<StreamEvent>, LlmError> {
        let data = sse.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let event: WireEvent = serde_json::from_str(data).map_err(|e| {
            LlmError::Malformed(format!(
                "event {:?} is not valid JSON ({e}): {}",
                sse.event,
                clip(data)
            ))
        })?;
        self.saw_event = true;
        let mut out = Vec::new();
        match event {
            WireEvent::MessageStart { message } => {
                self.started = true;
                if let Some(u) = message.usage {
                    self.merge_usage(u);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = Block::from_start(content_block);
                match &block {
                    Block::Text { text, .. } if !text.is_empty() => {
                        self.text.push_str(text);
                        out.push(StreamEvent::Content(text.clone()));
                    }
                    Block::Thinking { thinking, .. } if !thinking.is_empty() => {
                        out.push(StreamEvent::Reasoning(thinking.clone()));
                    }
                    Block::Raw(raw) => out.extend(info_for_result(raw)),
                    _ => {}
                }
                self.blocks.insert(index, block);
            }
            WireEvent::ContentBlockDelta { index, delta } => {
                self.on_delta(index, delta, &mut out)?;
            }
            WireEvent::ContentBlockStop { index } => {
                if let Some(Block::ToolUse {
                    server: true,
                    name,
                    start_input,
                    json,
                    ..
                }) = self.blocks.get(&index)
                {
                    let input = input_object(&Block::arguments(start_input, json));
                    out.push(StreamEvent::Notice(info_for_server_call(name, &input)));
                }
            }
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason.filter(|r| !r.is_empty()) {
                    self.stop_reason = Some(reason);
                }
                if let Some(u) = usage {
                    self.merge_usage(u);
                }
            }
            WireEvent::MessageStop => self.done = true,
            WireEvent::Ping | WireEvent::Unknown => {}
            WireEvent::Error { error } => return Err(self.error_event(&error)),
        }
        Ok(out)
    }

    /// Whether `message_stop` was received.
    fn is_done(&self) -> bool {
        self.done
    }

    /// Ends the response after a parse or backend error.
    fn fail(&mut self, error: LlmError) -> Vec<Result<StreamEvent, LlmError>> {
        self.done = true;
        vec![Err(error)]
    }

    /// Ends the response when the body is over (`transport_error` if the connection broke).
    fn end(&mut self, transport_error: Option<String>) -> Vec<Result<StreamEvent, LlmError>> {
        if !self.saw_event {
            return vec![Err(match transport_error {
                Some(e) => LlmError::StreamInterrupted(e),
                None => LlmError::EmptyResponse,
            })];
        }
        if !self.done && (transport_error.is_some() || self.stop_reason.is_none()) {
            let why =
                transport_error.unwrap_or_else(|| "stream ended before message_stop".to_string());
            return vec![Err(LlmError::StreamInterrupted(why))];
        }
        self.done = true;
        let blocks = std::mem::take(&mut self.blocks);
        let calls: Vec<ToolCall> = blocks
            .values()
            .filter_map(|b| match b {
                Block::ToolUse {
                    server: false,
                    id,
                    name,
                    start_input,
                    json,
                } => Some(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Block::arguments(start_input, json),
                }),
                _ => None,
            })
            .collect();
        let mut out = Vec::new();
        if blocks.values().any(Block::needs_replay) {
            let replay: Vec<Value> = blocks.values().map(Block::replay_json).collect();
            let key = fingerprint(&self.text, &calls);
            self.replay.lock().insert(key, replay.clone());
            out.push(Ok(StreamEvent::ProviderData(ProviderData {
                provider: super::PROVIDER_NAME.to_string(),
                blocks: replay,
            })));
        }
        let reason =
            FinishReason::given_or_implied(self.stop_reason.take().as_deref(), !calls.is_empty());
        if !calls.is_empty() {
            out.push(Ok(StreamEvent::ToolCalls(calls)));
        }
        if self.saw_usage {
            out.push(Ok(StreamEvent::Usage(usage_of(&self.usage))));
        }
        out.push(Ok(StreamEvent::Finish(reason)));
        out
    }
}

/// Drives an SSE body into neutral events.
pub(crate) type Driver = stream_driver::Driver<Assembler>;

impl Driver {
    pub fn new<S, E>(bytes: S, replay: Arc<Mutex<ReplayMemory>>) -> Self
    where
        S: Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: Display,
    {
        Self::start(bytes, Assembler::new(replay))
    }

    /// Reads until the first event was processed. A failure before any event (an `error`
    /// event instead of `message_start`, an empty body) is returned here, so it counts as
    /// "before the first byte" for retrying.
    pub async fn prime(&mut self) -> Result<(), LlmError> {
        while !self.ended && !self.assembler.saw_event() {
            self.pump().await;
        }
        if !self.assembler.started
            && let Some(Err(_)) = self.pending.front()
            && let Some(Err(e)) = self.pending.pop_front()
        {
            return Err(e);
        }
        Ok(())
    }
}

/// Keeps `ReplayMemory` size observable in tests.
#[cfg(test)]
pub(crate) fn replay_len(replay: &Mutex<ReplayMemory>) -> usize {
    replay.lock().len()
}
