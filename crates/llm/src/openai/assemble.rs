//! Turns streamed `chat.completion.chunk` payloads into the neutral [`StreamEvent`]s.
//!
//! Pure and synchronous: [`StreamAssembler`] is fed SSE `data` payloads and told how the body
//! ended; [`event_stream`] drives it from any byte stream (a reqwest body or, in tests, fixed
//! chunks).

use std::fmt::Display;

use bytes::Bytes;
use futures::Stream;

use super::wire::{WireChunk, WireDelta, WireToolCallDelta, error_text};
use crate::error::LlmError;
use crate::http::clip;
use crate::sse::SseEvent;
use crate::stream_driver::{Assemble, Driver};
use crate::think::{Piece, ThinkSplitter};
use crate::types::{ChatStream, FinishReason, StreamEvent, ToolCall, Usage};

/// A fresh tool-call id for servers that omit it: `call_` and 32 hex digits.
pub(crate) fn new_call_id() -> String {
    format!("call_{:032x}", rand::random::<u128>())
}

/// Fills empty ids with [`new_call_id`].
pub(crate) fn fill_missing_ids(calls: &mut [ToolCall]) {
    for call in calls.iter_mut().filter(|c| c.id.is_empty()) {
        call.id = new_call_id();
    }
}

/// Converts splitter output into stream events.
pub(crate) fn piece_events(pieces: Vec<Piece>) -> impl Iterator<Item = StreamEvent> {
    pieces.into_iter().map(|p| match p {
        Piece::Content(t) => StreamEvent::Content(t),
        Piece::Reasoning(t) => StreamEvent::Reasoning(t),
    })
}

/// A tool call being assembled from deltas.
#[derive(Debug)]
struct PartialCall {
    wire_index: usize,
    id: String,
    name: String,
    arguments: String,
}

/// Chunk-by-chunk state of one streamed response.
#[derive(Debug, Default)]
pub(crate) struct StreamAssembler {
    splitter: ThinkSplitter,
    /// In order of first appearance.
    calls: Vec<PartialCall>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    saw_chunk: bool,
    done: bool,
}

impl StreamAssembler {
    /// Handles one SSE `data` payload. An error ends the response.
    pub fn on_data(&mut self, data: &str) -> Result<Vec<StreamEvent>, LlmError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let chunk: WireChunk = serde_json::from_str(data).map_err(|e| {
            LlmError::Malformed(format!("chunk is not valid JSON ({e}): {}", clip(data)))
        })?;
        if let Some(error) = &chunk.error {
            return Err(LlmError::StreamInterrupted(format!(
                "backend reported an error mid-stream: {}",
                error_text(error)
            )));
        }
        self.saw_chunk = true;
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.into());
        }
        let mut events = Vec::new();
        // Only the first choice is used (we never ask for n > 1).
        let choice = chunk
            .choices
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0);
        if let Some(choice) = choice {
            if let Some(delta) = choice.delta.or(choice.message) {
                self.on_delta(delta, &mut events);
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(events)
    }

    fn on_delta(&mut self, delta: WireDelta, events: &mut Vec<StreamEvent>) {
        for reasoning in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            if !reasoning.is_empty() {
                events.push(StreamEvent::Reasoning(reasoning));
            }
        }
        if let Some(content) = delta.content.filter(|c| !c.is_empty()) {
            events.extend(piece_events(self.splitter.push(&content)));
        }
        let tool_deltas = delta.tool_calls.unwrap_or_default();
        if !tool_deltas.is_empty() {
            events.extend(piece_events(self.splitter.flush()));
        }
        for (position, tool_delta) in tool_deltas.into_iter().enumerate() {
            self.on_tool_delta(position, tool_delta);
        }
    }

    fn on_tool_delta(&mut self, position: usize, delta: WireToolCallDelta) {
        let id = delta.id.filter(|s| !s.is_empty());
        let slot = self.slot_for(delta.index, position, id.as_deref());
        let call = &mut self.calls[slot];
        if call.id.is_empty()
            && let Some(id) = id
        {
            call.id = id;
        }
        if let Some(function) = delta.function {
            let arguments = function.arguments_text();
            // First non-empty name wins: llama.cpp repeats id, type and name on every delta.
            if call.name.is_empty()
                && let Some(name) = function.name.filter(|n| !n.is_empty())
            {
                call.name = name;
            }
            call.arguments.push_str(&arguments);
        }
    }

    /// Which partial call a delta belongs to.
    fn slot_for(&mut self, index: Option<usize>, position: usize, id: Option<&str>) -> usize {
        let next_index = self
            .calls
            .iter()
            .map(|c| c.wire_index + 1)
            .max()
            .unwrap_or(0);
        let wire_index = match index {
            Some(i) => i,
            // No index: a known id continues its call, a new id starts one, no id continues
            // the latest call (or the one at this array position).
            None => match id {
                Some(id) => match self.calls.iter().find(|c| c.id == id) {
                    Some(c) => c.wire_index,
                    None => next_index,
                },
                None => self.calls.last().map_or(position, |c| c.wire_index),
            },
        };
        let existing = self.calls.iter().rposition(|c| c.wire_index == wire_index);
        match existing {
            // A different id at an index already in use starts a new call (servers that
            // send every complete call at index 0).
            Some(at)
                if id
                    .is_some_and(|id| !self.calls[at].id.is_empty() && self.calls[at].id != id) =>
            {
                self.push_call(next_index.max(wire_index + 1))
            }
            Some(at) => at,
            None => self.push_call(wire_index),
        }
    }

    fn push_call(&mut self, wire_index: usize) -> usize {
        self.calls.push(PartialCall {
            wire_index,
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        self.calls.len() - 1
    }
}

/// The OpenAI-compatible stream reads only the `data` of each event.
impl Assemble for StreamAssembler {
    fn on_event(&mut self, sse: &SseEvent) -> Result<Vec<StreamEvent>, LlmError> {
        self.on_data(&sse.data)
    }

    /// Whether `[DONE]` was received.
    fn is_done(&self) -> bool {
        self.done
    }

    /// Ends the response after a parse or backend error: held-back text, then the error.
    fn fail(&mut self, error: LlmError) -> Vec<Result<StreamEvent, LlmError>> {
        let mut out: Vec<_> = piece_events(self.splitter.finish()).map(Ok).collect();
        out.push(Err(error));
        out
    }

    /// Ends the response when the body is over (`transport_error` if the connection broke).
    fn end(&mut self, transport_error: Option<String>) -> Vec<Result<StreamEvent, LlmError>> {
        if !self.saw_chunk {
            return vec![Err(match transport_error {
                Some(e) => LlmError::StreamInterrupted(e),
                None => LlmError::EmptyResponse,
            })];
        }
        let mut out: Vec<_> = piece_events(self.splitter.finish()).map(Ok).collect();
        if !self.done && self.finish_reason.is_none() {
            let why = transport_error.unwrap_or_else(|| "stream ended before [DONE]".to_string());
            out.push(Err(LlmError::StreamInterrupted(why)));
            return out;
        }
        let mut calls = std::mem::take(&mut self.calls);
        calls.sort_by_key(|c| c.wire_index); // stable: ties keep order of appearance
        let mut calls: Vec<ToolCall> = calls
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        fill_missing_ids(&mut calls);
        let reason =
            FinishReason::given_or_implied(self.finish_reason.take().as_deref(), !calls.is_empty());
        if !calls.is_empty() {
            out.push(Ok(StreamEvent::ToolCalls(calls)));
        }
        if let Some(usage) = self.usage.take() {
            out.push(Ok(StreamEvent::Usage(usage)));
        }
        out.push(Ok(StreamEvent::Finish(reason)));
        out
    }
}

/// Drives an SSE body into the neutral event stream.
pub(crate) fn event_stream<S, E>(bytes: S) -> ChatStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Display,
{
    Driver::start(bytes, StreamAssembler::default()).into_stream()
}
