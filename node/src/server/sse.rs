//! Server-Sent Events framed like the original (`data: <json>` lines, CRLF, a `: ping`
//! comment every few seconds) plus `id: <seq>` lines so clients can resume with
//! `Last-Event-ID`.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use parking_lot::Mutex;
use serde_json::Value;

/// One SSE frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// An event with an optional id.
    Event { id: Option<u64>, data: Value },
    /// An event already serialised (its JSON text), with an optional id.
    Json { id: Option<u64>, json: String },
    /// A keep-alive comment.
    Ping,
}

impl Frame {
    pub fn event(id: Option<u64>, data: Value) -> Self {
        Self::Event { id, data }
    }

    /// An event from a typed value, serialised once, straight to text.
    pub fn typed(id: Option<u64>, value: &impl serde::Serialize) -> Self {
        Self::Json {
            id,
            // Cannot fail: every key is a string and no wire type's Serialize errors.
            json: serde_json::to_string(value).unwrap_or_default(),
        }
    }

    /// The bytes on the wire.
    pub fn encode(&self) -> Bytes {
        match self {
            Self::Event { id, data } => data_frame(*id, &data.to_string()),
            Self::Json { id, json } => data_frame(*id, json),
            Self::Ping => Bytes::from(format!("\u{3a} ping - {}\r\n\r\n", utc_now())),
        }
    }
}

fn data_frame(id: Option<u64>, json: &str) -> Bytes {
    let mut out = String::with_capacity(json.len() + 32);
    if let Some(id) = id {
        out.push_str(&format!("id: {id}\r\n"));
    }
    out.push_str("data: ");
    out.push_str(json);
    out.push_str("\r\n\r\n");
    Bytes::from(out)
}

fn utc_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:06}", now.as_secs(), now.subsec_micros())
}

/// The `Last-Event-ID` a reconnecting client sent, if it is a number.
pub fn last_event_id(headers: &HeaderMap) -> Option<u64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Interval between keep-alive comments.
pub const PING_INTERVAL: Duration = Duration::from_secs(5);

/// Turns a stream of frames into an SSE response with the original's headers.
pub fn response(frames: impl Stream<Item = Frame> + Send + 'static) -> Response {
    use futures::StreamExt;
    let body = Body::from_stream(frames.map(|f| Ok::<_, std::convert::Infallible>(f.encode())));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// The routes that answer with an event stream (their open connections are capped).
pub const STREAM_ROUTES: &[&str] = &[
    "/v1/api/events",
    "/v1/api/events/global",
    "/v1/api/events/node",
];

/// Open event streams per identity: each takes a slot for as long as its body lives.
#[derive(Debug, Default)]
pub struct StreamSlots {
    open: Mutex<std::collections::HashMap<String, usize>>,
}

/// One open stream's slot; gives it back when dropped.
pub struct StreamSlot {
    slots: std::sync::Arc<StreamSlots>,
    key: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock();
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

impl StreamSlots {
    /// A slot for `key`, or `None` when it already holds `max` open streams.
    pub fn acquire(self: &std::sync::Arc<Self>, key: &str, max: usize) -> Option<StreamSlot> {
        let mut open = self.open.lock();
        let n = open.entry(key.to_string()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(StreamSlot {
            slots: self.clone(),
            key: key.to_string(),
        })
    }
}

/// Middleware (inside auth): an event stream takes a slot of the caller's identity for as
/// long as it is open; past the node's `sse_per_identity` it is `429` with a clear error.
pub async fn limit_streams(
    axum::extract::State(node): axum::extract::State<std::sync::Arc<super::state::Node>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let is_stream = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .is_some_and(|m| STREAM_ROUTES.contains(&m.as_str()));
    if !is_stream {
        return next.run(req).await;
    }
    let key = req
        .extensions()
        .get::<turnstone_runtime::auth::Identity>()
        .map_or_else(
            || "anonymous".to_string(),
            |i| format!("{}/{}", i.source, i.user_id),
        );
    let max = node.options.sse_per_identity;
    let Some(slot) = node.stream_slots.acquire(&key, max) else {
        return (
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            axum::Json(serde_json::json!({
                "error": format!(
                    "Too many open event streams for this identity (at most {max}); close one first"
                )
            })),
        )
            .into_response();
    };
    hold_while_streaming(next.run(req).await, slot)
}

/// `response` with `guard` kept alive until its body has been sent or dropped: what an
/// open stream holds (a stream slot, an open-stream gauge) is released when it ends.
pub fn hold_while_streaming<G: Send + 'static>(response: Response, guard: G) -> Response {
    use futures::StreamExt;
    let (parts, body) = response.into_parts();
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _open = &guard;
        chunk
    }));
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_use_crlf_and_carry_ids() {
        let f = Frame::event(
            Some(7),
            serde_json::json!({"type": "content", "text": "hi"}),
        );
        assert_eq!(
            f.encode(),
            Bytes::from("id: 7\r\ndata: {\"type\":\"content\",\"text\":\"hi\"}\r\n\r\n")
        );
        let no_id = Frame::event(None, serde_json::json!({"type": "connected"}));
        assert!(no_id.encode().starts_with(b"data: "));
        assert!(Frame::Ping.encode().starts_with(b": ping - "));
    }

    #[test]
    fn last_event_id_is_parsed_leniently() {
        let mut h = HeaderMap::new();
        assert_eq!(last_event_id(&h), None);
        h.insert("last-event-id", HeaderValue::from_static(" 42 "));
        assert_eq!(last_event_id(&h), Some(42));
        h.insert("last-event-id", HeaderValue::from_static("nope"));
        assert_eq!(last_event_id(&h), None);
    }
}
