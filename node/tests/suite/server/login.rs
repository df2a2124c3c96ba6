//! The auth endpoints: login (config tokens, JWTs, the failure limiter), logout, status,
//! whoami.

use serde_json::{Value, json};
use turnstone_runtime::auth::{
    AUDIENCE_SERVER, Authenticator, JwtSecret, NewClaims, Permissions, Scopes, mint, verify,
};

use super::*;

const SECRET: &str = "a-test-secret-that-is-long-enough-for-hs256";

const COOKIE_ATTRS: &str = "Path=/; HttpOnly; SameSite=Lax; Max-Age=86400";

struct Reply {
    status: u16,
    body: Value,
    headers: reqwest::header::HeaderMap,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn login(t: &TestNode, body: &str, extra: Option<(&str, &str)>) -> Reply {
    let mut req = t
        .http
        .post(t.url("/v1/api/auth/login"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some((name, value)) = extra {
        req = req.header(name, value);
    }
    let resp = req.send().await.unwrap();
    Reply {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.json().await.unwrap_or(Value::Null),
    }
}

fn token_body(token: &str) -> String {
    json!({ "token": token }).to_string()
}

async fn with_secret() -> TestNode {
    let auth = Authenticator::new(
        true,
        Some(JwtSecret::new(SECRET)),
        TestNode::test_tokens(),
        AUDIENCE_SERVER,
    );
    TestNode::start_with_auth(auth, |_| {}).await
}

async fn without_auth() -> TestNode {
    let auth = Authenticator::new(false, None, TestNode::test_tokens(), AUDIENCE_SERVER);
    TestNode::start_with_auth(auth, |_| {}).await
}

#[tokio::test]
async fn login_with_config_tokens_reports_role_and_scopes_and_sets_the_cookie() {
    let t = TestNode::start().await;

    let full = login(&t, &token_body(FULL), None).await;
    assert_eq!(full.status, 200);
    assert_eq!(
        full.body,
        json!({"status": "ok", "role": "full", "scopes": "approve,read,write"}),
        "no jwt without a secret, no user_id for a config token"
    );
    assert_eq!(
        full.header("set-cookie"),
        Some(format!("turnstone_auth={FULL}; {COOKIE_ATTRS}").as_str())
    );

    let read = login(&t, &token_body(READ), None).await;
    assert_eq!(read.status, 200);
    assert_eq!(
        read.body,
        json!({"status": "ok", "role": "read", "scopes": "read"})
    );
    assert_eq!(
        read.header("set-cookie"),
        Some(format!("turnstone_auth={READ}; {COOKIE_ATTRS}").as_str())
    );

    // The cookie it set authenticates the next request.
    let resp = t
        .http
        .get(t.url("/v1/api/workstreams"))
        .header("cookie", format!("turnstone_auth={READ}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // `X-Forwarded-Proto` from a peer that is not a trusted proxy is not believed.
    let https = login(&t, &token_body(FULL), Some(("x-forwarded-proto", "https"))).await;
    assert_eq!(
        https.header("set-cookie"),
        Some(format!("turnstone_auth={FULL}; {COOKIE_ATTRS}").as_str())
    );
}

#[tokio::test]
async fn the_cookie_is_secure_behind_a_trusted_https_proxy() {
    let t = TestNode::spawn(Spec {
        options: NodeOptions {
            ratelimit: turnstone_node::server::ratelimit::RateLimitConfig {
                trusted_proxies: turnstone_node::server::ratelimit::Cidr::parse_list("127.0.0.1")
                    .unwrap(),
                ..Default::default()
            },
            ..NodeOptions::default()
        },
        ..Spec::default()
    })
    .await;
    let https = login(&t, &token_body(FULL), Some(("x-forwarded-proto", "https"))).await;
    assert_eq!(
        https.header("set-cookie"),
        Some(format!("turnstone_auth={FULL}; {COOKIE_ATTRS}; Secure").as_str())
    );
    let plain = login(&t, &token_body(FULL), None).await;
    assert!(!plain.header("set-cookie").unwrap().contains("Secure"));
}

#[tokio::test]
async fn login_returns_a_jwt_when_the_node_has_a_secret() {
    let t = with_secret().await;
    let reply = login(&t, &token_body(FULL), None).await;
    assert_eq!(reply.status, 200);
    let body = reply.body.as_object().unwrap();
    let keys: Vec<&str> = body.keys().map(String::as_str).collect();
    assert_eq!(keys, ["status", "role", "scopes", "jwt"]);
    assert_eq!(body["role"], "full");
    assert_eq!(body["scopes"], "approve,read,write");
    let jwt = body["jwt"].as_str().unwrap();
    let claims = verify(jwt, &JwtSecret::new(SECRET), AUDIENCE_SERVER).unwrap();
    assert_eq!(claims.sub, "");
    assert_eq!(claims.src, "config");
    assert_eq!(claims.scopes.to_string(), "approve,read,write");
    assert_eq!(
        reply.header("set-cookie"),
        Some(format!("turnstone_auth={jwt}; {COOKIE_ATTRS}").as_str()),
        "the cookie carries the JWT, not the raw token"
    );

    // The JWT is a credential of this node.
    let (status, _) = t.get("/v1/api/dashboard", Some(jwt)).await;
    assert_eq!(status, 200);

    // A read token's JWT is read-only.
    let read = login(&t, &token_body(READ), None).await;
    let read_jwt = read.body["jwt"].as_str().unwrap().to_string();
    let send = json!({"ws_id": t.default_ws, "message": "hi"}).to_string();
    let (status, body) = t.post_raw("/v1/api/send", send, &read_jwt).await;
    assert_eq!(status, 403);
    assert_eq!(body["error"], "Forbidden: token lacks 'write' scope");
}

#[tokio::test]
async fn bad_credentials_and_bad_json_are_refused() {
    let t = TestNode::start().await;
    let invalid = json!({"error": "Invalid credentials"});

    let wrong = login(&t, &token_body("not-a-token"), None).await;
    assert_eq!((wrong.status, &wrong.body), (401, &invalid));
    assert!(wrong.header("set-cookie").is_none());

    // No user storage yet: password logins cannot succeed.
    let password = json!({"username": "admin", "password": FULL}).to_string();
    let reply = login(&t, &password, None).await;
    assert_eq!((reply.status, &reply.body), (401, &invalid));

    let empty = login(&t, "{}", None).await;
    assert_eq!((empty.status, &empty.body), (401, &invalid));

    let bad = login(&t, "{not json", None).await;
    assert_eq!(
        (bad.status, bad.body),
        (400, json!({"error": "Invalid JSON body"}))
    );
    let none = login(&t, "", None).await;
    assert_eq!(none.status, 400);
}

#[tokio::test]
async fn the_sixth_failed_login_from_one_address_is_throttled() {
    let t = TestNode::start().await;
    for attempt in 1..=4 {
        let reply = login(&t, &token_body("wrong"), None).await;
        assert_eq!(reply.status, 401, "failure {attempt}");
    }
    // Successful logins do not count.
    for _ in 0..10 {
        assert_eq!(login(&t, &token_body(FULL), None).await.status, 200);
    }
    // Bad JSON is not a login attempt.
    assert_eq!(login(&t, "{", None).await.status, 400);
    assert_eq!(login(&t, &token_body("wrong"), None).await.status, 401);

    let throttled = login(&t, &token_body("wrong"), None).await;
    assert_eq!(throttled.status, 429);
    assert_eq!(throttled.body, json!({"error": "Too many login attempts"}));
    let retry: u64 = throttled.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=300).contains(&retry), "Retry-After {retry}");

    // While throttled even the right token is refused.
    let right = login(&t, &token_body(FULL), None).await;
    assert_eq!(right.status, 429);

    // The rest of the API is not affected.
    let (status, _) = t.get("/v1/api/workstreams", Some(FULL)).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn logout_clears_the_cookie_without_credentials() {
    let t = TestNode::start().await;
    let resp = t
        .http
        .post(t.url("/v1/api/auth/logout"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["set-cookie"].to_str().unwrap(),
        "turnstone_auth=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"
    );
    assert_eq!(resp.json::<Value>().await.unwrap(), json!({"status": "ok"}));
}

#[tokio::test]
async fn status_tells_the_login_ui_whether_setup_is_needed() {
    // Without storage there can be no users, so no setup either (it would answer 503).
    let t = TestNode::start().await;
    let (status, body) = t.get("/v1/api/auth/status", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"auth_enabled": true, "has_users": false, "setup_required": false})
    );

    let open = without_auth().await;
    let (status, body) = open.get("/v1/api/auth/status", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"auth_enabled": false, "has_users": false, "setup_required": false})
    );
}

#[tokio::test]
async fn whoami_needs_a_user_identity() {
    let t = with_secret().await;
    let (status, body) = t.get("/v1/api/auth/whoami", None).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"], "Unauthorized: missing or invalid token");

    // Config tokens carry no user.
    let (status, body) = t.get("/v1/api/auth/whoami", Some(READ)).await;
    assert_eq!((status, body), (401, json!({"error": "Not authenticated"})));

    let claims = NewClaims::new("u-123", Scopes::parse("read"), "password", AUDIENCE_SERVER)
        .with_permissions(Permissions::parse("write,read"));
    let jwt = mint(
        &claims,
        &JwtSecret::new(SECRET),
        std::time::Duration::from_secs(600),
    )
    .unwrap();
    let (status, body) = t.get("/v1/api/auth/whoami", Some(&jwt)).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"user_id": "u-123", "permissions": "read,write"})
    );

    // Logging in with that JWT reports the user.
    let reply = login(&t, &token_body(&jwt), None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["user_id"], "u-123");
    assert_eq!(reply.body["permissions"], "read,write");
    assert_eq!(reply.body["role"], "read");

    let open = without_auth().await;
    let (status, body) = open.get("/v1/api/auth/whoami", None).await;
    assert_eq!((status, body), (401, json!({"error": "Not authenticated"})));
}
