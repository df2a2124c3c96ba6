//! Text deltas the model had already sent, joined into one.
//!
//! A model's stream often hands over several text deltas at once: a network read that
//! carried several server-sent events, or a provider that produces its reply faster than it
//! is consumed. [`join_ready_deltas`] passes each delta on with the deltas of the same kind
//! that are ready behind it, so what the engine emits (and every stream, bridge and client
//! after it carries) is one event per batch the model delivered, not one per token. It never
//! waits for a delta: a delta that is not ready yet starts the next event, so no latency is
//! added and a model streaming token by token is seen token by token.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use crate::error::LlmError;
use crate::types::{ChatStream, StreamEvent};

/// A joined delta stops growing at this many bytes (a reply that was all ready at once still
/// streams in pieces of a size a frontend renders in one go).
pub const JOINED_DELTA_MAX_BYTES: usize = 16 * 1024;

/// `stream` with each `Content` (or `Reasoning`) delta joined to the deltas of the same kind
/// that are already available behind it. Everything else passes through unchanged and in
/// order.
pub fn join_ready_deltas(stream: ChatStream) -> ChatStream {
    Box::pin(Joined {
        inner: stream,
        held: None,
        ended: false,
    })
}

struct Joined {
    inner: ChatStream,
    /// An item read while joining that ends the joined delta; it is the next one handed out.
    held: Option<Result<StreamEvent, LlmError>>,
    /// The inner stream ended (it is not polled again).
    ended: bool,
}

/// The kind and text of a text delta, or the event back when it is something else.
fn text_delta(event: StreamEvent) -> Result<(bool, String), StreamEvent> {
    match event {
        StreamEvent::Content(text) => Ok((false, text)),
        StreamEvent::Reasoning(text) => Ok((true, text)),
        other => Err(other),
    }
}

fn rebuild(reasoning: bool, text: String) -> StreamEvent {
    if reasoning {
        StreamEvent::Reasoning(text)
    } else {
        StreamEvent::Content(text)
    }
}

impl Stream for Joined {
    type Item = Result<StreamEvent, LlmError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let first = match this.held.take() {
            Some(item) => item,
            None if this.ended => return Poll::Ready(None),
            None => match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => item,
                Poll::Ready(None) => {
                    this.ended = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            },
        };
        let (reasoning, mut text) = match first.map(text_delta) {
            Ok(Ok(delta)) => delta,
            Ok(Err(other)) => return Poll::Ready(Some(Ok(other))),
            Err(e) => return Poll::Ready(Some(Err(e))),
        };
        while !this.ended && text.len() < JOINED_DELTA_MAX_BYTES {
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(event))) => match text_delta(event) {
                    Ok((kind, more)) if kind == reasoning => text.push_str(&more),
                    Ok((kind, more)) => {
                        this.held = Some(Ok(rebuild(kind, more)));
                        break;
                    }
                    Err(other) => {
                        this.held = Some(Ok(other));
                        break;
                    }
                },
                Poll::Ready(Some(Err(e))) => {
                    this.held = Some(Err(e));
                    break;
                }
                Poll::Ready(None) => this.ended = true,
                // Not sent yet: this delta goes out now, the next one starts the next event.
                Poll::Pending => break,
            }
        }
        Poll::Ready(Some(Ok(rebuild(reasoning, text))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::FinishReason;
    use futures::StreamExt;

    fn joined(items: Vec<Result<StreamEvent, LlmError>>) -> Vec<Result<StreamEvent, LlmError>> {
        futures::executor::block_on(
            join_ready_deltas(Box::pin(futures::stream::iter(items))).collect::<Vec<_>>(),
        )
    }

    fn content(t: &str) -> Result<StreamEvent, LlmError> {
        Ok(StreamEvent::Content(t.into()))
    }

    fn reasoning(t: &str) -> Result<StreamEvent, LlmError> {
        Ok(StreamEvent::Reasoning(t.into()))
    }

    fn finish() -> Result<StreamEvent, LlmError> {
        Ok(StreamEvent::Finish(FinishReason::Stop))
    }

    fn same(a: &[Result<StreamEvent, LlmError>], b: &[Result<StreamEvent, LlmError>]) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    #[test]
    fn ready_deltas_of_one_kind_become_one_and_the_rest_keeps_its_order() {
        let out = joined(vec![
            reasoning("let me "),
            reasoning("think"),
            content("Hel"),
            content("lo, "),
            content("world"),
            Ok(StreamEvent::Notice("searched".into())),
            content("!"),
            finish(),
        ]);
        let want = vec![
            reasoning("let me think"),
            content("Hello, world"),
            Ok(StreamEvent::Notice("searched".into())),
            content("!"),
            finish(),
        ];
        assert!(same(&out, &want), "{out:?}");
    }

    #[test]
    fn an_error_ends_the_joined_delta_and_still_arrives() {
        let out = joined(vec![
            content("partial "),
            content("text"),
            Err(LlmError::StreamInterrupted("cut".into())),
        ]);
        let want = vec![
            content("partial text"),
            Err(LlmError::StreamInterrupted("cut".into())),
        ];
        assert!(same(&out, &want), "{out:?}");
    }

    #[test]
    fn a_joined_delta_stops_growing_at_its_cap() {
        let piece = "x".repeat(1024);
        let n = 2 * JOINED_DELTA_MAX_BYTES / 1024 + 1;
        let out = joined((0..n).map(|_| content(&piece)).collect());
        let sizes: Vec<usize> = out
            .iter()
            .map(|e| match e {
                Ok(StreamEvent::Content(t)) => t.len(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            sizes,
            vec![JOINED_DELTA_MAX_BYTES, JOINED_DELTA_MAX_BYTES, 1024]
        );
    }

    #[tokio::test]
    async fn a_delta_not_sent_yet_is_never_waited_for() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut stream = join_ready_deltas(Box::pin(rx));
        tx.unbounded_send(content("a")).unwrap();
        tx.unbounded_send(content("b")).unwrap();
        // Both were sent: one event.
        assert!(same(&[stream.next().await.unwrap()], &[content("ab")]));
        // The next one is not sent yet: the stream waits for it, then hands it on alone.
        let later = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx.unbounded_send(content("c")).unwrap();
            tx
        });
        assert!(same(&[stream.next().await.unwrap()], &[content("c")]));
        drop(later.await.unwrap());
        assert!(stream.next().await.is_none());
    }
}
