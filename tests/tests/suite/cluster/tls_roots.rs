//! Outbound HTTPS in an image without a CA store: the node's HTTP clients trust the bundled
//! roots when the system has none (here: `SSL_CERT_FILE`/`SSL_CERT_DIR` pointing at nothing,
//! which is where rustls looks for the system's roots).

use super::harness::*;

#[tokio::test]
async fn the_node_starts_without_any_system_ca_roots() {
    let empty = tempfile::tempdir().unwrap();
    let file = empty.path().join("none.pem");
    std::fs::write(&file, "").unwrap();
    let node = NodeProc::start_with(
        "no-roots",
        vec![
            ("SSL_CERT_FILE".into(), file.to_str().unwrap().into()),
            ("SSL_CERT_DIR".into(), empty.path().to_str().unwrap().into()),
        ],
    )
    .await;
    let health = node.get("/health").await;
    assert_eq!(health["status"], "ok", "{health}");
    // A turn goes through the model client that failed to build before.
    let (status, body) = node
        .post(
            "/v1/api/workstreams/new",
            serde_json::json!({"name": "tls"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}
