//! Item 12: what a client can make the node hold is bounded — idempotency keys are at most
//! 256 bytes, and one identity may hold only so many event streams open.

use reqwest::Method;
use serde_json::json;

use super::auth_node::{AuthNode, Start, TOKEN};

#[tokio::test]
async fn oversized_idempotency_keys_are_refused() {
    let node = AuthNode::start().await;
    let (_, list) = node
        .call(Method::GET, "/v1/api/workstreams", Some(TOKEN), None)
        .await;
    let ws = list["workstreams"][0]["id"].as_str().unwrap().to_string();
    let long = "k".repeat(257);
    let (status, body) = node
        .call(
            Method::POST,
            "/v1/api/send",
            Some(TOKEN),
            Some(json!({"ws_id": ws, "message": "hi", "correlation_id": long})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("too long"),
        "{body}"
    );
    let resp = node
        .http
        .post(node.url("/v1/api/workstreams/new"))
        .bearer_auth(TOKEN)
        .header("idempotency-key", "i".repeat(10_000))
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    // 256 bytes is fine.
    let (status, body) = node
        .call(
            Method::POST,
            "/v1/api/workstreams/new",
            Some(TOKEN),
            Some(json!({"name": "ok", "correlation_id": "c".repeat(256)})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn event_streams_per_identity_are_capped() {
    let node = AuthNode::start_with(Start {
        args: vec!["--sse-per-identity".into(), "3".into()],
        ..Start::default()
    })
    .await;
    let open = || {
        node.http
            .get(node.url("/v1/api/events/global"))
            .bearer_auth(TOKEN)
            .send()
    };
    let mut streams = Vec::new();
    for _ in 0..3 {
        let resp = open().await.unwrap();
        assert_eq!(resp.status(), 200);
        streams.push(resp);
    }
    let refused = open().await.unwrap();
    assert_eq!(refused.status(), 429);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("event streams"),
        "{body}"
    );
    // Closing one frees its slot.
    drop(streams.pop());
    turnstone_testkit::assert_eventually!(open().await.unwrap().status() == 200);
}
