//! OpenTelemetry export: a node started with `OTEL_EXPORTER_OTLP_ENDPOINT` sends its spans
//! (OTLP over HTTP, protobuf) to that endpoint — here a local receiver that records what
//! arrives. Protobuf keeps strings as raw UTF-8, so names can be found in the bytes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
