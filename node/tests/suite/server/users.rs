//! Stored users and `ts_` API tokens: first-user setup, password login, token
//! administration, and tokens authenticating (scopes, expiry, revocation) on real routes.

use serde_json::{Value, json};
use turnstone_runtime::auth::{AUDIENCE_SERVER, Authenticator, JwtSecret};

use super::*;

const SECRET: &str = "a-test-secret-that-is-long-enough-for-hs256";

/// A node with storage (no user yet), a JWT secret and the test config tokens.
pub async fn node_with_users() -> (TestNode, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let auth = Authenticator::new(
        true,
        Some(JwtSecret::new(SECRET)),
        TestNode::test_tokens(),
        AUDIENCE_SERVER,
    );
    let t = TestNode::spawn(Spec {
        db: Some(dir.path().join("users.db")),
        auth: Some(auth),
        ..Spec::default()
    })
    .await;
    (t, dir)
}

async fn send(
    t: &TestNode,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut req = t.http.request(method, t.url(path));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, resp.json().await.unwrap_or(Value::Null), headers)
}

#[tokio::test]
async fn setup_login_tokens_scopes_expiry_and_revocation() {
    let (t, _dir) = node_with_users().await;
    use reqwest::Method;

    let (_, status, _) = send(&t, Method::GET, "/v1/api/auth/status", None, None).await;
    assert_eq!(
        status,
        json!({"auth_enabled": true, "has_users": false, "setup_required": true})
    );

    // Setup validates as the original, then creates the admin once.
    let admin = json!({"username": "ada", "display_name": "Ada L", "password": "correct horse"});
    // Without the bootstrap credential (a full-access token or the setup code) it is refused.
    for (token, body) in [
        (None, admin.clone()),
        (Some(READ), admin.clone()),
        (
            None,
            json!({"username": "ada", "display_name": "Ada", "password": "correct horse",
                      "setup_code": "ts_not-the-code"}),
        ),
    ] {
        let (code, body, _) = send(&t, Method::POST, "/v1/api/auth/setup", token, Some(body)).await;
        assert_eq!(code, 401, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("bootstrap credential"),
            "{body}"
        );
    }
    let (code, body, _) = send(
        &t,
        Method::POST,
        "/v1/api/auth/setup",
        Some(FULL),
        Some(json!({"username": "bad name", "display_name": "x", "password": "12345678"})),
    )
    .await;
    assert_eq!(
        (code, body["error"].as_str()),
        (
            400,
            Some("Invalid username (1-64 chars: letters, digits, . _ -)")
        )
    );
    let (code, body, _) = send(
        &t,
        Method::POST,
        "/v1/api/auth/setup",
        Some(FULL),
        Some(json!({"username": "ada", "display_name": "Ada", "password": "short"})),
    )
    .await;
    assert_eq!(
        (code, body["error"].as_str()),
        (400, Some("Password must be at least 8 characters"))
    );
    let (code, setup, headers) = send(
        &t,
        Method::POST,
        "/v1/api/auth/setup",
        Some(FULL),
        Some(admin.clone()),
    )
    .await;
    assert_eq!(code, 200, "{setup}");
    assert_eq!(setup["status"], "ok");
    assert_eq!(setup["role"], "full");
    assert_eq!(setup["scopes"], "approve,read,write");
    assert!(
        setup["permissions"]
            .as_str()
            .unwrap()
            .contains("admin.users")
    );
    let user_id = setup["user_id"].as_str().unwrap().to_string();
    assert_eq!(user_id.len(), 32);
    let jwt = setup["jwt"].as_str().unwrap().to_string();
    assert!(
        headers["set-cookie"]
            .to_str()
            .unwrap()
            .starts_with("turnstone_auth=")
    );
    let (code, body, _) = send(
        &t,
        Method::POST,
        "/v1/api/auth/setup",
        Some(FULL),
        Some(admin.clone()),
    )
    .await;
    assert_eq!(
        (code, body["error"].as_str()),
        (409, Some("Setup already completed"))
    );
    let (_, status, _) = send(&t, Method::GET, "/v1/api/auth/status", None, None).await;
    assert_eq!(status["has_users"], true);
    assert_eq!(status["setup_required"], false);

    // Password login: right password → JWT for this user; wrong one or unknown user → 401.
    let (code, login, _) = send(
        &t,
        Method::POST,
        "/v1/api/auth/login",
        None,
        Some(json!({"username": "ada", "password": "correct horse"})),
    )
    .await;
    assert_eq!(code, 200, "{login}");
    assert_eq!(login["user_id"], user_id.as_str());
    let session = login["jwt"].as_str().unwrap().to_string();
    for wrong in [
        json!({"username": "ada", "password": "wrong horse"}),
        json!({"username": "nobody", "password": "correct horse"}),
        json!({"username": "ada", "password": ""}),
    ] {
        let (code, body, _) = send(&t, Method::POST, "/v1/api/auth/login", None, Some(wrong)).await;
        assert_eq!(
            (code, body["error"].as_str()),
            (401, Some("Invalid credentials"))
        );
    }
    let (code, who, _) = send(&t, Method::GET, "/v1/api/auth/whoami", Some(&session), None).await;
    assert_eq!(code, 200);
    assert_eq!(who["user_id"], user_id.as_str());

    // Administration needs the approve scope: the read config token is refused.
    let (code, _, _) = send(&t, Method::GET, "/v1/api/admin/users", Some(READ), None).await;
    assert_eq!(code, 403);
    let (code, users, _) = send(&t, Method::GET, "/v1/api/admin/users", Some(&jwt), None).await;
    assert_eq!(code, 200);
    assert_eq!(users["users"][0]["username"], "ada");
    assert!(users["users"][0].get("password_hash").is_none());

    // A viewer user and a read-only token of theirs.
    let (code, viewer, _) = send(
        &t,
        Method::POST,
        "/v1/api/admin/users",
        Some(&session),
        Some(json!({"username": "vic", "display_name": "Vic", "password": "viewer-pass", "role": "viewer"})),
    )
    .await;
    assert_eq!(code, 201, "{viewer}");
    let (code, read_token, _) = send(
        &t,
        Method::POST,
        "/v1/api/admin/tokens",
        Some(&session),
        Some(json!({"username": "vic", "name": "dash", "scopes": "read"})),
    )
    .await;
    assert_eq!(code, 201, "{read_token}");
    let raw_read = read_token["token"].as_str().unwrap().to_string();
    assert!(
        raw_read.starts_with("ts_") && raw_read.len() == 67,
        "{raw_read}"
    );
    assert_eq!(read_token["token_prefix"], &raw_read[..8]);

    // The admin's write token works on a write route; the viewer's read token gets 403 there
    // and 200 on a read route.
    let (code, write_token, _) = send(
        &t,
        Method::POST,
        "/v1/api/admin/tokens",
        Some(&session),
        Some(json!({"user_id": user_id, "name": "ci", "scopes": "write,read"})),
    )
    .await;
    assert_eq!(code, 201);
    let raw_write = write_token["token"].as_str().unwrap().to_string();
    let (code, _, _) = send(
        &t,
        Method::GET,
        "/v1/api/workstreams",
        Some(&raw_read),
        None,
    )
    .await;
    assert_eq!(code, 200);
    let (code, body, _) = send(
        &t,
        Method::POST,
        "/v1/api/workstreams/new",
        Some(&raw_read),
        Some(json!({"name": "nope"})),
    )
    .await;
    assert_eq!(
        (code, body["error"].as_str()),
        (403, Some("Forbidden: token lacks 'write' scope"))
    );
    let (code, created, _) = send(
        &t,
        Method::POST,
        "/v1/api/workstreams/new",
        Some(&raw_write),
        Some(json!({"name": "by-token"})),
    )
    .await;
    assert_eq!(code, 200, "{created}");
    let (code, who, _) = send(
        &t,
        Method::GET,
        "/v1/api/auth/whoami",
        Some(&raw_write),
        None,
    )
    .await;
    assert_eq!(
        (code, who["user_id"].as_str()),
        (200, Some(user_id.as_str()))
    );
    // A token logs in like any other credential.
    let (code, login, _) = send(
        &t,
        Method::POST,
        "/v1/api/auth/login",
        None,
        Some(json!({"token": raw_read})),
    )
    .await;
    assert_eq!((code, login["role"].as_str()), (200, Some("read")));

    // Listing never shows the raw token; revoking one makes it fail at once.
    let (_, list, _) = send(
        &t,
        Method::GET,
        "/v1/api/admin/tokens",
        Some(&session),
        None,
    )
    .await;
    let tokens = list["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 2);
    assert!(tokens.iter().all(|t| t.get("token").is_none()));
    let read_id = read_token["token_id"].as_str().unwrap();
    let (code, _, _) = send(
        &t,
        Method::DELETE,
        &format!("/v1/api/admin/tokens/{read_id}"),
        Some(&session),
        None,
    )
    .await;
    assert_eq!(code, 200);
    let (code, body, _) = send(
        &t,
        Method::GET,
        "/v1/api/workstreams",
        Some(&raw_read),
        None,
    )
    .await;
    assert_eq!(
        (code, body["error"].as_str()),
        (401, Some("Unauthorized: missing or invalid token"))
    );
    let (code, _, _) = send(
        &t,
        Method::DELETE,
        &format!("/v1/api/admin/tokens/{read_id}"),
        Some(&session),
        None,
    )
    .await;
    assert_eq!(code, 404);

    // An expired token is refused: write one whose expiry is in the past, straight to the store.
    let store = t.node.persistence.as_ref().unwrap().store.clone();
    let raw_old = turnstone_runtime::auth::generate_api_token().unwrap();
    store
        .create_api_token(turnstone_store::NewApiToken {
            token_hash: turnstone_runtime::auth::hash_api_token(&raw_old),
            token_prefix: raw_old[..8].to_string(),
            user_id: user_id.clone(),
            name: "old".into(),
            scopes: "read".into(),
            expires: Some("2020-01-01T00:00:00+00:00".into()),
        })
        .await
        .unwrap();
    let (code, _, _) = send(&t, Method::GET, "/v1/api/workstreams", Some(&raw_old), None).await;
    assert_eq!(code, 401, "expired");

    // Bad admin input: unknown scope, unknown user, unknown role, duplicate username.
    for (body, want) in [
        (json!({"username": "ada", "scopes": "root"}), 400),
        (json!({"username": "ghost"}), 404),
        (json!({"name": "no owner"}), 400),
    ] {
        let (code, reply, _) = send(
            &t,
            Method::POST,
            "/v1/api/admin/tokens",
            Some(&session),
            Some(body),
        )
        .await;
        assert_eq!(code, want, "{reply}");
        assert!(reply["error"].is_string());
    }
    for (body, want) in [
        (
            json!({"username": "x1", "display_name": "X", "password": "longenough", "role": "god"}),
            400,
        ),
        (
            json!({"username": "vic", "display_name": "V", "password": "longenough"}),
            400,
        ),
    ] {
        let (code, reply, _) = send(
            &t,
            Method::POST,
            "/v1/api/admin/users",
            Some(&session),
            Some(body),
        )
        .await;
        assert_eq!(code, want, "{reply}");
    }
}

#[tokio::test]
async fn without_storage_setup_is_unavailable_and_password_login_fails() {
    let auth = Authenticator::new(
        true,
        Some(JwtSecret::new(SECRET)),
        TestNode::test_tokens(),
        AUDIENCE_SERVER,
    );
    let t = TestNode::start_with_auth(auth, |_| {}).await;
    let (code, body, _) = send(
        &t,
        reqwest::Method::POST,
        "/v1/api/auth/setup",
        None,
        Some(json!({"username": "ada", "display_name": "Ada", "password": "correct horse"})),
    )
    .await;
    assert_eq!(
        (code, body["error"].as_str()),
        (503, Some("Storage not available"))
    );
    let (code, _, _) = send(
        &t,
        reqwest::Method::POST,
        "/v1/api/auth/login",
        None,
        Some(json!({"username": "ada", "password": "correct horse"})),
    )
    .await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn oidc_routes_say_it_is_not_configured() {
    let t = TestNode::start().await;
    let (code, body, _) = send(
        &t,
        reqwest::Method::GET,
        "/v1/api/auth/oidc/authorize",
        None,
        None,
    )
    .await;
    assert_eq!(
        (code, body["error"].as_str()),
        (404, Some("OIDC not configured"))
    );
    let no_redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resp = no_redirect
        .get(t.url("/v1/api/auth/oidc/callback?code=x&state=y"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 302, "public, no auth needed");
    assert_eq!(
        resp.headers()["location"],
        "/?oidc_error=OIDC%20not%20configured"
    );
}
