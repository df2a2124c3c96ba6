//! Item 5: cross-site requests and DNS rebinding. A cookie-authenticated mutation needs JSON
//! and a matching `Origin`; a node without auth answers only to loopback host names; the
//! cookie's `Secure` believes `X-Forwarded-Proto` only from a `--trusted-proxy`.

use reqwest::Method;
use serde_json::json;

use super::auth_node::{AuthNode, Start, TOKEN};

async fn session_cookie(node: &AuthNode) -> String {
    let resp = node
        .http
        .post(node.url("/v1/api/auth/login"))
        .json(&json!({"token": TOKEN}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let cookie = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    cookie.split(';').next().unwrap().to_string()
}

async fn workstream_names(node: &AuthNode) -> Vec<String> {
    let (_, list) = node
        .call(Method::GET, "/v1/api/workstreams", Some(TOKEN), None)
        .await;
    list["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn a_cross_site_cookie_post_is_refused() {
    let node = AuthNode::start().await;
    let cookie = session_cookie(&node).await;
    let create = |content_type: &'static str, origin: Option<&'static str>, name: &str| {
        let mut req = node
            .http
            .post(node.url("/v1/api/workstreams/new"))
            .header("cookie", &cookie)
            .header("content-type", content_type)
            .body(json!({ "name": name }).to_string());
        if let Some(origin) = origin {
            req = req.header("origin", origin);
        }
        req.send()
    };
    let plain = create("text/plain", Some("http://evil.example"), "csrf-plain")
        .await
        .unwrap();
    assert!(
        plain.status() == 403 || plain.status() == 415,
        "text/plain cross-site POST: {}",
        plain.status()
    );
    let json = create("application/json", Some("http://evil.example"), "csrf-json")
        .await
        .unwrap();
    assert_eq!(json.status(), 403, "foreign Origin");
    let form = create("text/plain", None, "csrf-no-origin").await.unwrap();
    assert_eq!(form.status(), 415, "a cookie POST must carry JSON");
    let names = workstream_names(&node).await;
    assert!(
        !names.iter().any(|n| n.starts_with("csrf")),
        "created: {names:?}"
    );
    // Same origin with JSON works (what the web UI does).
    let own = node.url("");
    let resp = node
        .http
        .post(node.url("/v1/api/workstreams/new"))
        .header("cookie", &cookie)
        .header("origin", own.trim_end_matches('/'))
        .json(&json!({"name": "same-site"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn without_auth_only_loopback_host_names_are_served() {
    let node = AuthNode::start_with(Start {
        token: None,
        auth_disabled: true,
        ..Start::default()
    })
    .await;
    let get = |host: &'static str| {
        node.http
            .get(node.url("/v1/api/workstreams"))
            .header("host", host)
            .send()
    };
    assert_eq!(
        get("evil.example").await.unwrap().status(),
        403,
        "rebinding"
    );
    assert_eq!(get("localhost").await.unwrap().status(), 200);
    let (status, _) = node
        .call(Method::GET, "/v1/api/workstreams", None, None)
        .await;
    assert_eq!(status, 200, "127.0.0.1 is loopback");
}

#[tokio::test]
async fn secure_cookies_trust_forwarded_proto_only_from_a_trusted_proxy() {
    let login = |node: &AuthNode| {
        node.http
            .post(node.url("/v1/api/auth/login"))
            .header("x-forwarded-proto", "https")
            .json(&json!({"token": TOKEN}))
            .send()
    };
    let direct = AuthNode::start().await;
    let resp = login(&direct).await.unwrap();
    let cookie = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        !cookie.contains("Secure"),
        "believed a client's header: {cookie}"
    );
    drop(direct);

    let proxied = AuthNode::start_with(Start {
        args: vec!["--trusted-proxy".into(), "127.0.0.1".into()],
        ..Start::default()
    })
    .await;
    let resp = login(&proxied).await.unwrap();
    let cookie = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.ends_with("; Secure"), "{cookie}");
}
