//! Item 1: first-user setup needs the bootstrap credential — the configured (or printed)
//! full-access token, or the one-time setup code printed at start — and is 401 without it.

use reqwest::Method;
use serde_json::json;

use super::auth_node::{AuthNode, PASSWORD, Start, TOKEN};

fn admin() -> serde_json::Value {
    json!({"username": "first", "display_name": "First", "password": PASSWORD})
}

#[tokio::test]
async fn setup_without_the_bootstrap_credential_is_refused() {
    let node = AuthNode::start().await;
    let (status, body) = node
        .call(Method::POST, "/v1/api/auth/setup", None, Some(admin()))
        .await;
    assert_eq!(status, 401, "a stranger must not become admin: {body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("bootstrap credential"),
        "{body}"
    );
    let mut wrong = admin();
    wrong["setup_code"] = json!("ts_0000");
    let (status, _) = node
        .call(Method::POST, "/v1/api/auth/setup", None, Some(wrong))
        .await;
    assert_eq!(status, 401);
    // Still no user: the real admin can set up.
    let (_, status_reply) = node
        .call(Method::GET, "/v1/api/auth/status", None, None)
        .await;
    assert_eq!(status_reply["setup_required"], true);
    let (status, body) = node
        .call(
            Method::POST,
            "/v1/api/auth/setup",
            Some(TOKEN),
            Some(admin()),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["role"], "full");
}

#[tokio::test]
async fn the_printed_setup_code_authorises_setup_once() {
    // No configured token and a JWT secret: nothing to log in with but the printed code.
    let node = AuthNode::start_with(Start {
        token: None,
        ..Start::default()
    })
    .await;
    let code = node
        .printed_value("setup code")
        .unwrap_or_else(|| panic!("no setup code printed: {:?}", node.printed));
    let mut body = admin();
    body["setup_code"] = json!(code);
    let (status, reply) = node
        .call(Method::POST, "/v1/api/auth/setup", None, Some(body.clone()))
        .await;
    assert_eq!(status, 200, "{reply}");
    assert!(reply["jwt"].as_str().is_some_and(|j| !j.is_empty()));
    let (status, _) = node
        .call(Method::POST, "/v1/api/auth/setup", None, Some(body))
        .await;
    assert_eq!(status, 409, "setup happens once");
}
