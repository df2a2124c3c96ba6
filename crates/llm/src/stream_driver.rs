//! Driving a provider's stream assembler from a response body: both adapters read SSE events,
//! feed them to their (pure, synchronous) assembler and hand out the neutral events it makes,
//! in the same way; only the assembler differs.

use std::collections::VecDeque;
use std::fmt::Display;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::error::LlmError;
use crate::sse::{SseEvent, SseEvents};
use crate::types::{ChatStream, StreamEvent};

/// One provider's turning of SSE events into neutral events.
pub(crate) trait Assemble: Send + 'static {
    /// The events of one SSE event; an `Err` ends the stream (see [`Assemble::fail`]).
    fn on_event(&mut self, sse: &SseEvent) -> Result<Vec<StreamEvent>, LlmError>;
    /// Whether the stream said it is complete.
    fn is_done(&self) -> bool;
    /// The last items after `error` ended the stream.
    fn fail(&mut self, error: LlmError) -> Vec<Result<StreamEvent, LlmError>>;
    /// The last items when the body ended (`transport_error`: how, if it broke off).
    fn end(&mut self, transport_error: Option<String>) -> Vec<Result<StreamEvent, LlmError>>;
}

/// Reads a body's SSE events into an assembler and queues what it makes.
pub(crate) struct Driver<A> {
    events: SseEvents,
    pub(crate) assembler: A,
    pub(crate) pending: VecDeque<Result<StreamEvent, LlmError>>,
    pub(crate) ended: bool,
}

impl<A: Assemble> Driver<A> {
    pub(crate) fn start<S, E>(bytes: S, assembler: A) -> Self
    where
        S: Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: Display,
    {
        Self {
            events: crate::sse::events(bytes),
            assembler,
            pending: VecDeque::new(),
            ended: false,
        }
    }

    fn on_sse(&mut self, sse: &SseEvent) {
        if self.ended {
            return;
        }
        match self.assembler.on_event(sse) {
            Ok(events) => self.pending.extend(events.into_iter().map(Ok)),
            Err(error) => {
                self.pending.extend(self.assembler.fail(error));
                self.ended = true;
                return;
            }
        }
        if self.assembler.is_done() {
            self.pending.extend(self.assembler.end(None));
            self.ended = true;
        }
    }

    /// Reads one SSE event (or the end of the body) and processes it.
    pub(crate) async fn pump(&mut self) {
        match self.events.next().await {
            Some(Ok(sse)) => self.on_sse(&sse),
            Some(Err(e)) => {
                let events = self.assembler.end(Some(format!("connection lost: {e}")));
                self.pending.extend(events);
                self.ended = true;
            }
            None => {
                if !self.ended {
                    self.pending.extend(self.assembler.end(None));
                    self.ended = true;
                }
            }
        }
    }

    /// The neutral event stream.
    pub(crate) fn into_stream(self) -> ChatStream {
        Box::pin(futures::stream::unfold(self, |mut d| async move {
            loop {
                if let Some(item) = d.pending.pop_front() {
                    return Some((item, d));
                }
                if d.ended {
                    return None;
                }
                d.pump().await;
            }
        }))
    }
}
