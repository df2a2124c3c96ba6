//! Item 7: sessions can be revoked. A deleted user's JWT, a logged-out session and the JWT
//! minted from a revoked API token are refused on the next request, and logging in with a
//! JWT never mints one that outlives it.

use reqwest::Method;
use serde_json::json;
use std::time::Duration;

use turnstone_runtime::auth::{AUDIENCE_SERVER, JwtSecret, NewClaims, Scopes, mint, verify};

use super::auth_node::{AuthNode, SECRET, TOKEN};

#[tokio::test]
async fn a_deleted_users_jwt_stops_working_and_cannot_be_renewed() {
    let node = AuthNode::start().await;
    node.setup_admin().await;
    let bob = node.create_user("bob", "operator").await;
    let jwt = node.login("bob").await;
    let (status, who) = node
        .call(Method::GET, "/v1/api/auth/whoami", Some(&jwt), None)
        .await;
    assert_eq!((status, who["user_id"].as_str()), (200, Some(bob.as_str())));

    let (status, _) = node
        .call(
            Method::DELETE,
            &format!("/v1/api/admin/users/{bob}"),
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = node
        .call(Method::GET, "/v1/api/workstreams", Some(&jwt), None)
        .await;
    assert_eq!(status, 401, "a deleted user's session must end");
    let (status, _) = node
        .call(
            Method::POST,
            "/v1/api/auth/login",
            None,
            Some(json!({"token": jwt})),
        )
        .await;
    assert_eq!(status, 401, "nor may it be exchanged for a fresh one");
}

#[tokio::test]
async fn logout_ends_the_session() {
    let node = AuthNode::start().await;
    node.setup_admin().await;
    node.create_user("carol", "operator").await;
    let jwt = node.login("carol").await;
    let (status, _) = node
        .call(Method::GET, "/v1/api/workstreams", Some(&jwt), None)
        .await;
    assert_eq!(status, 200);
    let (status, _) = node
        .call(Method::POST, "/v1/api/auth/logout", Some(&jwt), None)
        .await;
    assert_eq!(status, 200);
    let (status, _) = node
        .call(Method::GET, "/v1/api/workstreams", Some(&jwt), None)
        .await;
    assert_eq!(status, 401, "a logged-out session must be refused");
    // A new login works again.
    let fresh = node.login("carol").await;
    let (status, _) = node
        .call(Method::GET, "/v1/api/workstreams", Some(&fresh), None)
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_revoked_api_tokens_sessions_end_and_relogin_never_extends() {
    let node = AuthNode::start().await;
    node.setup_admin().await;
    node.create_user("dave", "operator").await;
    let (raw, token_id) = node.create_token("dave", "read").await;
    let login = |credential: String| {
        let node = &node;
        async move {
            node.call(
                Method::POST,
                "/v1/api/auth/login",
                None,
                Some(json!({"token": credential})),
            )
            .await
        }
    };
    let (status, reply) = login(raw.clone()).await;
    assert_eq!(status, 200, "{reply}");
    let jwt = reply["jwt"].as_str().unwrap().to_string();

    // Re-login with a JWT: the new one expires no later than the one it came from.
    let secret = JwtSecret::new(SECRET);
    let short = mint(
        &NewClaims::new("", Scopes::read_only(), "config", AUDIENCE_SERVER),
        &secret,
        Duration::from_secs(60),
    )
    .unwrap();
    let (status, again) = login(short.clone()).await;
    assert_eq!(status, 200, "{again}");
    let first = verify(&short, &secret, AUDIENCE_SERVER).unwrap();
    let second = verify(again["jwt"].as_str().unwrap(), &secret, AUDIENCE_SERVER).unwrap();
    assert!(
        second.exp <= first.exp,
        "re-login extended a 60 s credential to {} s",
        second.exp - first.iat.unwrap_or_default()
    );

    let (status, _) = node
        .call(
            Method::DELETE,
            &format!("/v1/api/admin/tokens/{token_id}"),
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(status, 200);
    for credential in [raw, jwt] {
        let (status, _) = node
            .call(Method::GET, "/v1/api/workstreams", Some(&credential), None)
            .await;
        assert_eq!(status, 401, "revoked token's credential still works");
    }
}
