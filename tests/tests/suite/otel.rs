//! OpenTelemetry export: a node started with `OTEL_EXPORTER_OTLP_ENDPOINT` sends its spans
//! (OTLP over HTTP, protobuf) to that endpoint — here a local receiver that records what
//! arrives. Protobuf keeps strings as raw UTF-8, so names can be found in the bytes.
//!
//! One trace per message: a `send` pushed to Redis with a W3C `traceparent` continues that
//! trace through the bridge, the node's request and turn, and the provider call.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turnstone_testkit::FakeLlm;

use super::cluster::harness::*;

/// A minimal HTTP/1.1 receiver: records each request (head and body) and answers 200.
async fn receiver() -> (u16, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let record = record.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let Ok(n) = sock.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() < head_end + 4 + len {
                        continue;
                    }
                    let request: Vec<u8> = buf.drain(..head_end + 4 + len).collect();
                    record.lock().unwrap().push(request);
                    let _ = sock
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                        .await;
                }
            });
        }
    });
    (port, seen)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn a_node_exports_its_request_spans_over_otlp_when_configured() {
    let (port, seen) = receiver().await;
    let node = NodeProc::start_with(
        "otel-a",
        vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
                format!("http://127.0.0.1:{port}"),
            ),
            ("OTEL_SERVICE_NAME".into(), "node-under-test".into()),
            // Export promptly (the SDK's batch delay defaults to 5 s).
            ("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into()),
        ],
    )
    .await;
    let health = node
        .http
        .get(format!("{}/health", node.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    eventually("spans exported", Duration::from_secs(30), || {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().iter().any(|r| {
                contains(r, "POST /v1/traces")
                    && contains(r, "application/x-protobuf")
                    && contains(r, "node-under-test")
                    && contains(r, "request")
                    && contains(r, "/health")
            })
        }
    })
    .await;
}

/// The names of the spans of trace `trace_id` in one OTLP export body. In an encoded
/// `Span` the fields come in number order: `trace_id` (1), `span_id` (2), `trace_state`
/// (3), `parent_span_id` (4), `name` (5), so each span's name follows its trace id.
fn span_names_in_trace(body: &[u8], trace_id: &[u8; 16]) -> Vec<String> {
    fn varint(b: &[u8], i: &mut usize) -> Option<usize> {
        let mut v = 0usize;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*i)?;
            *i += 1;
            v |= usize::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut marker = vec![0x0a, 0x10];
    marker.extend_from_slice(trace_id);
    let mut names = Vec::new();
    for start in 0..body.len().saturating_sub(marker.len()) {
        if body[start..].starts_with(&marker) {
            let mut i = start + marker.len();
            while let Some(tag) = varint(body, &mut i) {
                let Some(len) = varint(body, &mut i) else {
                    break;
                };
                if tag >> 3 == 5 && tag & 7 == 2 {
                    if let Some(name) = body.get(i..i + len) {
                        names.push(String::from_utf8_lossy(name).into_owned());
                    }
                    break;
                }
                // `span_id`, `trace_state`, `parent_span_id`: length-delimited, skip.
                if tag & 7 != 2 || tag >> 3 > 4 {
                    break;
                }
                i += len;
            }
        }
    }
    names
}

fn hex16(hex: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

#[tokio::test]
async fn a_sends_traceparent_makes_one_trace_across_bridge_node_and_provider() {
    let (port, seen) = receiver().await;
    let otel = |service: &str| {
        vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
                format!("http://127.0.0.1:{port}"),
            ),
            ("OTEL_SERVICE_NAME".to_string(), service.to_string()),
            ("OTEL_BSP_SCHEDULE_DELAY".to_string(), "200".to_string()),
        ]
    };
    let llm = FakeLlm::start().await;
    let node = NodeProc::start_full(
        "otel-trace",
        otel("node-under-test"),
        vec![
            "--base-url".into(),
            llm.base_url(),
            "--model".into(),
            "fake-model".into(),
        ],
    )
    .await;
    let mut mq = Mq::shared("otel-trace").await;
    let _bridge =
        BridgeProc::start_with_env(&node, &mq.url, &mq.prefix, otel("bridge-under-test")).await;
    let ws = mq.create_ws("", json!({"name": "traced"})).await;

    let trace_hex = format!("{:032x}", rand::random::<u128>() | 1);
    let producer_span = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace_hex}-{producer_span}-01");
    let mut events = mq
        .subscribe(&[&format!("events:{ws}")])
        .await
        .into_on_message();
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": "trace me", "traceparent": traceparent}),
    )
    .await;
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("no turn_complete")
            .unwrap();
        let v: Value = serde_json::from_str(&m.get_payload::<String>().unwrap()).unwrap();
        if v["type"] == "turn_complete" {
            break;
        }
    }

    // The provider call carries the trace on, from a span of the node (not the producer's).
    let provider = llm.traceparents();
    assert!(
        provider
            .iter()
            .flatten()
            .any(|tp| tp.starts_with(&format!("00-{trace_hex}-")) && !tp.contains(producer_span)),
        "the provider saw {provider:?}, not trace {trace_hex}"
    );

    let trace_id = hex16(&trace_hex);
    let names_of = |service: &str| -> Vec<String> {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|r| contains(r, service))
            .flat_map(|r| span_names_in_trace(r, &trace_id))
            .collect()
    };
    eventually(
        "the trace's spans from both services",
        Duration::from_secs(30),
        || {
            let (bridge, node) = (names_of("bridge-under-test"), names_of("node-under-test"));
            async move {
                bridge.iter().any(|n| n == "inbound")
                    && node.iter().any(|n| n == "request")
                    && node.iter().any(|n| n == "turn")
            }
        },
    )
    .await;
    mq.cleanup().await;
}
