//! Item 3: admin routes check their RBAC permission, not only the scope. An operator's API
//! token with the `approve` scope still lacks `admin.users` and `admin.skills`. (That every
//! route has a table entry (`proto::routes::NODE_ROUTES`) is walked in the node's own suite:
//! `server::permissions`.)

use reqwest::Method;
use serde_json::json;

use super::auth_node::AuthNode;

#[tokio::test]
async fn an_approve_scoped_token_without_the_permission_is_refused_admin_routes() {
    let node = AuthNode::start().await;
    node.setup_admin().await;
    node.create_user("olga", "operator").await;
    let (olga, _) = node.create_token("olga", "approve").await;

    for (method, path, body) in [
        (Method::GET, "/v1/api/admin/users", None),
        (
            Method::POST,
            "/v1/api/admin/users",
            Some(
                json!({"username": "mallory", "display_name": "M", "password": "12345678",
                        "role": "admin"}),
            ),
        ),
        (Method::GET, "/v1/api/admin/tokens", None),
        (Method::GET, "/v1/api/admin/skills", None),
    ] {
        let (status, reply) = node.call(method.clone(), path, Some(&olga), body).await;
        assert_eq!(status, 403, "{method} {path}: {reply}");
        assert!(
            reply["error"]
                .as_str()
                .unwrap()
                .contains("missing permission"),
            "{reply}"
        );
    }
    // The admin's own session passes, and no second admin was made.
    let admin = node.login("admin").await;
    let (status, users) = node
        .call(Method::GET, "/v1/api/admin/users", Some(&admin), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(users["users"].as_array().unwrap().len(), 2, "{users}");
    // Her scope still lets her do what operators do.
    let (status, _) = node
        .call(
            Method::POST,
            "/v1/api/workstreams/new",
            Some(&olga),
            Some(json!({"name": "ops"})),
        )
        .await;
    assert_eq!(status, 200);
}
