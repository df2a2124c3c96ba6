//! `[[auth.tokens]]` of `config.toml` (node spec §7.3) are the node's credentials: a `read`
//! token reads and cannot write, a `full` token writes, anything else is refused — and with
//! them configured the node prints no run-only login token.

use reqwest::Method;
use serde_json::json;

use super::auth_node::{AuthNode, Start};

#[tokio::test]
async fn config_file_tokens_authenticate_with_their_roles() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        r#"
[auth]
enabled = true
[[auth.tokens]]
value = "file-token-read-0123456789"
role = "read"
[[auth.tokens]]
value = "file-token-full-0123456789"
role = "full"
"#,
    )
    .unwrap();
    let node = AuthNode::start_with(Start {
        token: None,
        auth_disabled: false,
        args: vec!["--config".into(), config.to_str().unwrap().into()],
    })
    .await;
    assert!(
        node.printed_value("login token").is_none(),
        "configured tokens, yet a run-only token was printed: {:?}",
        node.printed
    );
    let list = |token: &'static str| {
        let node = &node;
        async move {
            node.call(Method::GET, "/v1/api/workstreams", Some(token), None)
                .await
                .0
        }
    };
    assert_eq!(list("file-token-read-0123456789").await, 200);
    assert_eq!(list("file-token-full-0123456789").await, 200);
    assert_eq!(list("not-a-configured-token").await, 401);
    let create = |token: &'static str| {
        let node = &node;
        async move {
            node.call(
                Method::POST,
                "/v1/api/workstreams/new",
                Some(token),
                Some(json!({})),
            )
            .await
            .0
        }
    };
    assert_eq!(create("file-token-read-0123456789").await, 403);
    assert_eq!(create("file-token-full-0123456789").await, 200);
}
