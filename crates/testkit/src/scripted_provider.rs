//! An in-process [`Provider`] answering with the [`script`](crate::script) rules: no HTTP,
//! no JSON, no waiting. For engine tests and benchmarks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;
use turnstone_llm::{
    ChatRequest, ChatStream, Completion, FinishReason, LlmError, ModelCapabilities, Provider, Role,
    StreamEvent, ToolCall, Usage,
};

use crate::script::{ScriptReply, prompt_tokens, reply_to, split_chunks};

/// A misbehaviour for exactly one call of a [`ScriptedProvider`] (FIFO).
#[derive(Debug)]
pub enum ProviderFault {
    /// `stream()` / `complete()` return this error (before the "first byte").
    Fail(LlmError),
    /// `stream()` succeeds but yields only its first `events` events, then
    /// `Err(LlmError::StreamInterrupted)`, and ends without `Finish`.
    /// `complete()` returns `Err(LlmError::StreamInterrupted)`.
    InterruptAfter { events: usize },
    /// The call never returns (like a backend that accepts and never answers); use it with
    /// cancellation or timeouts.
    Hang,
    /// The call waits until the semaphore gives it a permit (which it keeps), then answers
    /// as usual (it consumes a reply): a test decides when the answer arrives.
    Hold(std::sync::Arc<tokio::sync::Semaphore>),
}

/// A zero-latency scripted [`Provider`].
///
/// Every `stream()`/`complete()` call counts (see [`call_count`](Self::call_count)), takes the
/// next queued fault if any, else the next queued reply, else the rules' reply to the last
/// message. `stream()` yields reasoning chunks, content chunks, then `ToolCalls` (if any),
/// `Usage` and `Finish`, as documented on [`StreamEvent`].
#[derive(Debug)]
pub struct ScriptedProvider {
    name: String,
    capabilities: ModelCapabilities,
    chunk_chars: usize,
    record_requests: bool,
    replies: Mutex<VecDeque<ScriptReply>>,
    faults: Mutex<VecDeque<ProviderFault>>,
    requests: Mutex<Vec<ChatRequest>>,
    calls: AtomicUsize,
}

impl Default for ScriptedProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedProvider {
    /// Name `fake`, default capabilities (32 768-token window), 4-character chunks, recording
    /// requests.
    pub fn new() -> Self {
        Self {
            name: "fake".into(),
            capabilities: ModelCapabilities::default(),
            chunk_chars: 4,
            record_requests: true,
            replies: Mutex::default(),
            faults: Mutex::default(),
            requests: Mutex::default(),
            calls: AtomicUsize::new(0),
        }
    }

    /// The context window `capabilities()` reports.
    #[must_use]
    pub fn with_context_window(mut self, context_window: u32) -> Self {
        self.capabilities.context_window = context_window;
        self
    }

    /// The capabilities `capabilities()` reports.
    #[must_use]
    pub fn with_capabilities(mut self, capabilities: ModelCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Characters per `Content`/`Reasoning` event (at least 1).
    #[must_use]
    pub fn with_chunk_chars(mut self, chunk_chars: usize) -> Self {
        self.chunk_chars = chunk_chars.max(1);
        self
    }

    /// The name `name()` reports.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Stops cloning each request into [`requests`](Self::requests) (for benchmarks).
    #[must_use]
    pub fn without_recording(mut self) -> Self {
        self.record_requests = false;
        self
    }

    /// Serve `reply` to the next call instead of the rules (FIFO).
    pub fn push_reply(&self, reply: ScriptReply) {
        self.replies.lock().push_back(reply);
    }

    /// Serve `fault` to the next call (FIFO; a faulted call does not consume a reply, except
    /// [`ProviderFault::InterruptAfter`] which streams part of one).
    pub fn push_fault(&self, fault: ProviderFault) {
        self.faults.lock().push_back(fault);
    }

    /// Makes the next `n` calls fail with the error `make_error` builds.
    pub fn fail_next(&self, n: usize, make_error: impl Fn() -> LlmError) {
        let mut faults = self.faults.lock();
        for _ in 0..n {
            faults.push_back(ProviderFault::Fail(make_error()));
        }
    }

    /// Number of `stream()` + `complete()` calls so far (failed ones included).
    pub fn call_count(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Every request received, in order (empty with [`without_recording`](Self::without_recording)).
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().clone()
    }

    /// The most recent request, when recording.
    pub fn last_request(&self) -> Option<ChatRequest> {
        self.requests.lock().last().cloned()
    }

    /// Counts and records a call, then decides what it gets.
    async fn begin(&self, request: &ChatRequest) -> Result<Planned, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.record_requests {
            self.requests.lock().push(request.clone());
        }
        let fault = self.faults.lock().pop_front();
        let interrupt_after = match fault {
            Some(ProviderFault::Fail(error)) => return Err(error),
            Some(ProviderFault::InterruptAfter { events }) => Some(events),
            Some(ProviderFault::Hang) => return futures::future::pending().await,
            Some(ProviderFault::Hold(gate)) => {
                if let Ok(permit) = gate.acquire().await {
                    permit.forget();
                }
                None
            }
            None => None,
        };
        let reply = self
            .replies
            .lock()
            .pop_front()
            .unwrap_or_else(|| scripted_reply(request));
        let prompt = prompt_tokens(
            request
                .messages
                .iter()
                .map(|m| m.content.as_deref().unwrap_or("")),
        );
        let completion = reply.completion_tokens();
        let usage = Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            ..Usage::default()
        };
        Ok(Planned {
            reply,
            usage,
            interrupt_after,
        })
    }
}

struct Planned {
    reply: ScriptReply,
    usage: Usage,
    interrupt_after: Option<usize>,
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn scripted_reply(request: &ChatRequest) -> ScriptReply {
    match request.messages.last() {
        Some(last) => reply_to(
            role_name(last.role()),
            last.content.as_deref().unwrap_or(""),
        ),
        None => ScriptReply::text(""),
    }
}

fn tool_calls(reply: &ScriptReply) -> Vec<ToolCall> {
    reply
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| ToolCall {
            id: format!("call_{i}"),
            name: name.clone(),
            arguments: arguments.clone(),
        })
        .collect()
}

fn interrupted() -> LlmError {
    LlmError::StreamInterrupted("scripted interruption (ProviderFault::InterruptAfter)".into())
}

#[async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn stream(&self, request: &ChatRequest) -> Result<ChatStream, LlmError> {
        let Planned {
            reply,
            usage,
            interrupt_after,
        } = self.begin(request).await?;
        let mut events: Vec<Result<StreamEvent, LlmError>> = Vec::new();
        if let Some(reasoning) = &reply.reasoning {
            events.extend(
                split_chunks(reasoning, self.chunk_chars)
                    .into_iter()
                    .map(|piece| Ok(StreamEvent::Reasoning(piece.to_string()))),
            );
        }
        events.extend(
            split_chunks(&reply.text, self.chunk_chars)
                .into_iter()
                .map(|piece| Ok(StreamEvent::Content(piece.to_string()))),
        );
        if !reply.tool_calls.is_empty() {
            events.push(Ok(StreamEvent::ToolCalls(tool_calls(&reply))));
        }
        events.push(Ok(StreamEvent::Usage(usage)));
        events.push(Ok(StreamEvent::Finish(FinishReason::from_wire(
            &reply.finish_reason,
        ))));
        if let Some(after) = interrupt_after {
            events.truncate(after.min(events.len().saturating_sub(1)));
            events.push(Err(interrupted()));
        }
        Ok(Box::pin(futures::stream::iter(events)))
    }

    async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let Planned {
            reply,
            usage,
            interrupt_after,
        } = self.begin(request).await?;
        if interrupt_after.is_some() {
            return Err(interrupted());
        }
        Ok(Completion {
            tool_calls: tool_calls(&reply),
            content: reply.text,
            reasoning: reply.reasoning.unwrap_or_default(),
            usage: Some(usage),
            finish_reason: Some(FinishReason::from_wire(&reply.finish_reason)),
        })
    }

    async fn capabilities(&self, _model: &str) -> Result<ModelCapabilities, LlmError> {
        Ok(self.capabilities)
    }
}
