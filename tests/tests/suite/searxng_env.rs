//! `$TURNSTONE_SEARXNG_URL` configures `web_search` of a real node: a tiny local server that
//! answers like SearxNG's JSON API receives the query and its results reach the model.

use std::sync::Arc;

use serde_json::json;
use std::sync::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::cluster::harness::NodeProc;
use super::security::node_events::call_output;

/// A SearxNG stand-in on a free loopback port: every request line it received, and its URL.
pub(super) async fn fake_searxng() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&request);
            record
                .lock()
                .unwrap()
                .push(text.lines().next().unwrap_or("").to_string());
            let body = json!({
                "query": "turnstone",
                "results": [
                    {"title": "Turnstone from the fake SearxNG", "url": "https://example.org/ts",
                     "content": "A multi-node orchestration cluster."},
                    {"title": "Second hit", "url": "https://example.org/2", "content": "More."}
                ]
            })
            .to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
    });
    (url, seen)
}

#[tokio::test]
async fn turnstone_searxng_url_configures_web_search() {
    let (url, seen) = fake_searxng().await;
    let node = NodeProc::start_full(
        "searxng-env",
        vec![("TURNSTONE_SEARXNG_URL".into(), url.clone())],
        vec!["--skip-permissions".into()],
    )
    .await;
    let output = call_output(
        &node,
        "search",
        "web_search",
        &json!({"query": "turnstone cluster", "max_results": 2}),
    )
    .await;
    assert!(
        output.contains("Turnstone from the fake SearxNG")
            && output.contains("https://example.org/ts"),
        "{output}"
    );
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(
        requests[0].starts_with("GET /search?q=turnstone+cluster&format=json"),
        "{requests:?}"
    );
}
