//! Item 4: `/metrics` stays small whatever paths clients request (labels are route
//! templates), public `/health` and `/metrics` name no workstream, and `--metrics-auth`
//! puts `/metrics` behind a token.

use reqwest::Method;
use serde_json::json;

use super::auth_node::{AuthNode, Start, TOKEN};

const SECRET_NAME: &str = "acquisition-of-initech";

#[tokio::test]
async fn random_paths_do_not_grow_metrics_and_names_stay_private() {
    let node = AuthNode::start().await;
    let (status, _) = node
        .call(
            Method::POST,
            "/v1/api/workstreams/new",
            Some(TOKEN),
            Some(json!({"name": SECRET_NAME})),
        )
        .await;
    assert_eq!(status, 200);
    let before = node.get_text("/metrics").await.len();
    for i in 0..200 {
        let junk: String = (0..2_000)
            .map(|j| char::from(b'a' + ((i + j) % 26) as u8))
            .collect();
        let _ = node
            .http
            .get(node.url(&format!("/{i}{junk}")))
            .send()
            .await
            .unwrap();
    }
    let metrics = node.get_text("/metrics").await;
    assert!(
        metrics.len() < before + 4_096,
        "/metrics grew from {before} to {} bytes after 200 junk paths",
        metrics.len()
    );
    assert!(
        !metrics.contains(SECRET_NAME),
        "public /metrics names a workstream"
    );
    let health = node.get_text("/health").await;
    assert!(
        !health.contains(SECRET_NAME),
        "public /health names a workstream"
    );
}

#[tokio::test]
async fn metrics_auth_requires_a_token() {
    let node = AuthNode::start_with(Start {
        args: vec!["--metrics-auth".into()],
        ..Start::default()
    })
    .await;
    let anonymous = node.http.get(node.url("/metrics")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let with_token = node
        .http
        .get(node.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(with_token.status(), 200);
    // Health stays public for probes.
    let (status, _) = node.call(Method::GET, "/health", None, None).await;
    assert_eq!(status, 200);
}
