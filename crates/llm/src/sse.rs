//! The Server-Sent Events of both provider adapters: one response body in, its events out.
//!
//! Parsing is `eventsource-stream`'s (lines ending in `\n`, `\r\n` or `\r`, split anywhere
//! across network reads; comments such as `: ping` keep-alives, `id:` and `retry:` are not
//! events; `data:` lines joined with `\n`). The OpenAI-compatible stream only reads `data`;
//! the Anthropic stream also the `event` name.
//!
//! Two steps around the crate, each for a behaviour it does not have:
//! * **An unterminated last event is still dispatched.** Some OpenAI-compatible servers
//!   (llama.cpp's among them) end the body right after the last `data:` line without the
//!   blank line that dispatches it. The SSE spec (and so the crate) drops such an event,
//!   which would lose the final chunk or the `[DONE]`; the body is therefore followed by a
//!   blank line, which completes a pending event and is a no-op otherwise.
//! * **Invalid UTF-8 becomes U+FFFD** (as the SSE spec decodes a stream) and a code point
//!   split across reads stays whole. The crate would instead hold back everything after an
//!   invalid byte until the body ends and then fail.

use std::fmt::Display;
use std::pin::Pin;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field; empty when absent (or `message`, the SSE default type).
    pub event: String,
    pub data: String,
}

/// The events of one body. An `Err` (the transport's failure, as text) is the last item.
pub(crate) type SseEvents = Pin<Box<dyn Stream<Item = Result<SseEvent, String>> + Send>>;

/// Decodes a response body into its events.
pub(crate) fn events<S, E>(body: S) -> SseEvents
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Display,
{
    let text = futures::stream::unfold(
        (Box::pin(body), Vec::new(), false),
        |(mut body, mut carry, ended)| async move {
            if ended {
                return None;
            }
            match body.next().await {
                Some(Ok(bytes)) => {
                    let text = decode_lossy(&mut carry, &bytes);
                    Some((Ok(text), (body, carry, false)))
                }
                Some(Err(e)) => Some((Err(e.to_string()), (body, carry, true))),
                None => {
                    // End of body: what is left of a split code point, then the blank line
                    // that dispatches an unterminated last event.
                    let mut tail = String::from_utf8_lossy(&carry).into_owned();
                    tail.push_str("\n\n");
                    Some((Ok(tail), (body, Vec::new(), true)))
                }
            }
        },
    );
    Box::pin(text.eventsource().map(|item| match item {
        Ok(event) => Ok(SseEvent {
            event: if event.event == "message" {
                String::new()
            } else {
                event.event
            },
            data: event.data,
        }),
        Err(EventStreamError::Transport(e)) => Err(e),
        Err(e) => Err(format!("malformed event stream: {e}")),
    }))
}

/// `carry` + `chunk` as text: invalid sequences replaced, an incomplete code point at the end
/// kept in `carry` for the next chunk.
fn decode_lossy(carry: &mut Vec<u8>, chunk: &[u8]) -> String {
    carry.extend_from_slice(chunk);
    let mut out = String::with_capacity(carry.len());
    let mut rest: &[u8] = carry;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                out.push_str(valid);
                rest = &[];
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                out.push_str(&String::from_utf8_lossy(valid));
                match e.error_len() {
                    Some(len) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        rest = &after[len..];
                    }
                    None => {
                        rest = after;
                        break;
                    }
                }
            }
        }
    }
    *carry = rest.to_vec();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    /// Every event of a body that arrives in `chunks`.
    fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let body: Vec<Result<Bytes, std::convert::Infallible>> = chunks
            .iter()
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures::executor::block_on(
            events(futures::stream::iter(body))
                .map(|e| e.unwrap())
                .collect(),
        )
    }

    fn bytewise(body: &str) -> Vec<&[u8]> {
        body.as_bytes().chunks(1).collect()
    }

    #[test]
    fn named_events_split_anywhere() {
        let body = "event: ping\ndata: {\"type\":\"ping\"}\n\n: c\n\nevent: message_stop\r\ndata: {}\r\n\r\n";
        assert_eq!(
            decode(&bytewise(body)),
            vec![ev("ping", "{\"type\":\"ping\"}"), ev("message_stop", "{}")]
        );
    }

    #[test]
    fn unterminated_event_is_flushed_and_name_resets() {
        assert_eq!(
            decode(&[b"event: a\ndata: 1\n\ndata: 2"]),
            vec![ev("a", "1"), ev("", "2")]
        );
    }

    #[test]
    fn splits_events_and_ignores_comments_and_other_fields() {
        let out = decode(&[
            b": keep-alive\n\nevent: x\nid: 1\ndata: {\"a\":1}\n\ndata: [DO",
            b"NE]\r\n\r\n",
        ]);
        assert_eq!(out, vec![ev("x", "{\"a\":1}"), ev("", "[DONE]")]);
    }

    #[test]
    fn multi_line_data_and_cr_only_line_endings() {
        assert_eq!(
            decode(&[b"data: a\rdata:b\r\rdata: c\r"]),
            vec![ev("", "a\nb"), ev("", "c")]
        );
    }

    #[test]
    fn byte_by_byte_gives_the_same_result() {
        let body = "data: {\"x\":\"é\"}\r\n\r\n: ping\n\ndata: [DONE]\n\n";
        assert_eq!(
            decode(&bytewise(body)),
            vec![ev("", "{\"x\":\"é\"}"), ev("", "[DONE]")]
        );
    }

    #[test]
    fn unterminated_last_event_is_flushed_at_finish() {
        assert_eq!(decode(&[b"data: tail"]), vec![ev("", "tail")]);
    }

    #[test]
    fn invalid_utf8_is_replaced_and_later_events_flow() {
        assert_eq!(
            decode(&[b"data: a\xff\xfeb\n\n", b"data: next\n\n"]),
            vec![ev("", "a\u{fffd}\u{fffd}b"), ev("", "next")]
        );
    }

    #[test]
    fn a_transport_error_ends_the_events() {
        let body = futures::stream::iter(vec![
            Ok(Bytes::from_static(b"data: 1\n\ndata: cut")),
            Err("reset by peer"),
        ]);
        let out: Vec<_> = futures::executor::block_on(events(body).collect());
        assert_eq!(out, vec![Ok(ev("", "1")), Err("reset by peer".to_string())]);
    }
}
