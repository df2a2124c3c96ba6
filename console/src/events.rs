//! `GET /v1/api/cluster/events` (cluster spec §6.4): the snapshot first (with
//! `"type": "snapshot"`), then every fanned-out event (`node_joined`, `node_lost`,
//! `ws_created`, `ws_closed`, `ws_rename`, `cluster_state`, and anything else the bridges
//! publish), one `data: <json>` frame each, with a `: ping - <UTC time>` comment every few
//! seconds. Lines end in CRLF, as sse-starlette writes them.
//!
//! A client that reads too slowly to keep within the last `sse_queue` events is never
//! silently skipped ahead: it is sent a fresh snapshot with `"resync": true` and `"missed":
//! <events>` (counted in `turnstone_console_sse_dropped_total` and
//! `turnstone_console_sse_resyncs_total`), and the stream goes on from there.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use turnstone_proto::ids::now_timestamp;

use crate::model::Cluster;
use crate::state::Console;

/// One `data:` frame.
pub fn data_frame(v: &Value) -> Bytes {
    let mut out = b"data: ".to_vec();
    // Writing a `Value` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut out, v);
    out.extend_from_slice(b"\r\n\r\n");
    Bytes::from(out)
}

/// One keep-alive comment.
pub fn ping_frame() -> Bytes {
    Bytes::from(format!(": ping - {}\r\n\r\n", utc_now()))
}

/// `YYYY-MM-DD HH:MM:SS.ffffff+00:00`, like Python's `datetime.now(timezone.utc)`.
pub fn utc_now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format_utc(d.as_secs(), d.subsec_micros())
}

fn format_utc(secs: u64, micros: u32) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{micros:06}+00:00",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// The SSE response headers the original sends.
pub fn sse_headers(response: &mut Response) {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
}

/// The handler.
pub async fn cluster_events(State(console): State<Arc<Console>>) -> Response {
    let stream = cluster_stream(&console, data_frame, Some(ping_frame));
    let mut response = Body::from_stream(stream).into_response();
    sse_headers(&mut response);
    response
}

/// The cluster stream (SSE and gRPC `WatchCluster` alike): the snapshot, then every
/// fanned-out event, each made into a `T` by `frame`; with `ping`, a keep-alive every
/// `sse_ping`. A client that falls `sse_queue` events behind gets a fresh snapshot marked
/// `"resync": true` instead of the events it missed. When the console stops, a last
/// `stream_closing` event, then the end.
pub fn cluster_stream<T: Send + 'static>(
    console: &Console,
    frame: fn(&Value) -> T,
    ping: Option<fn() -> T>,
) -> impl futures::Stream<Item = Result<T, Infallible>> + Send + 'static {
    let collector = console.collector.clone();
    // Registered now (the model and the events after it), built in the stream's task.
    let (model, mut rx) = collector.subscribe();
    let ping_every = collector.config.sse_ping;
    let shutdown = console.shutdown.clone();
    async_stream(move |tx| async move {
        let first = frame(&snapshot_event(&model, None));
        drop(model);
        if tx.send(first).await.is_err() {
            return;
        }
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
        loop {
            let next = tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) => frame(&ev),
                    Err(RecvError::Lagged(missed)) => {
                        collector.count_resync(missed);
                        let (model, fresh) = collector.subscribe();
                        rx = fresh;
                        frame(&snapshot_event(&model, Some(missed)))
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick(), if ping.is_some() => match ping {
                    Some(ping) => ping(),
                    None => continue,
                },
                _ = shutdown.cancelled() => {
                    // The console stops: a last event (clients that do not know it ignore
                    // it), then the stream ends and clients reconnect.
                    let _ = tx.send(frame(&stream_closing())).await;
                    return;
                }
            };
            if tx.send(next).await.is_err() {
                return; // the client went away
            }
        }
    })
}

/// The snapshot frame: `{"type": "snapshot", nodes, overview, timestamp}`, plus
/// `"resync": true, "missed": n` when it replaces `n` events the client fell behind on.
pub fn snapshot_event(model: &Cluster, missed: Option<u64>) -> Value {
    let mut snapshot = model.snapshot(now_timestamp());
    if let Some(o) = snapshot.as_object_mut() {
        o.insert("type".into(), json!("snapshot"));
        if let Some(missed) = missed {
            o.insert("resync".into(), json!(true));
            o.insert("missed".into(), json!(missed));
        }
    }
    snapshot
}

/// The final event of a cluster stream when the console shuts down.
pub fn stream_closing() -> Value {
    json!({"type": "stream_closing", "reason": "console_shutdown"})
}

/// A byte stream fed by a task; the task ends when the receiver (the response body) is
/// dropped, because its next send fails.
fn async_stream<T, F, Fut>(
    f: F,
) -> impl futures::Stream<Item = Result<T, Infallible>> + Send + 'static
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<T>(16);
    let task = tokio::spawn(f(tx));
    let guard = AbortOnDrop(task);
    futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv().await.map(|b| (Ok(b), (rx, guard)))
    })
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting_matches_python() {
        assert_eq!(format_utc(0, 0), "1970-01-01 00:00:00.000000+00:00");
        assert_eq!(
            format_utc(1_795_948_743, 501_477),
            "2026-11-29 10:39:03.501477+00:00"
        );
        assert_eq!(
            format_utc(951_782_400, 0),
            "2000-02-29 00:00:00.000000+00:00"
        );
    }

    #[test]
    fn frames_use_crlf() {
        assert_eq!(
            data_frame(&serde_json::json!({"type": "x"})),
            Bytes::from("data: {\"type\":\"x\"}\r\n\r\n")
        );
        assert!(ping_frame().starts_with(b": ping - "));
        assert!(ping_frame().ends_with(b"\r\n\r\n"));
    }
}
