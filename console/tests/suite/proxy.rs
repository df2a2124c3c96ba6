//! The reverse proxy: a real node's UI and API through `/node/{id}/`, streaming without
//! buffering, the per-request JWT, and every refusal (unknown node, node down,
//! unauthenticated — which never reaches the node).

use serde_json::json;
use turnstone_console::model::CONSOLE_VERSION;
use turnstone_runtime::auth::{AUDIENCE_SERVER, JwtSecret, Scope, verify};

use super::fake_node::FakeNode;
use super::*;

#[tokio::test]
async fn a_real_node_is_usable_through_the_proxy() {
    let p = prefix();
    let a = NodeServer::start("node-a", CONSOLE_VERSION, 10).await;
    heartbeat(&p, "node-a", &a.url, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["node-a"]).await;

    // The page: rewritten asset URLs, the banner, the shim.
    let resp = console
        .http
        .get(console.url("/node/node-a/?ws_id=x"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/html; charset=utf-8");
    assert!(resp.headers().get("content-security-policy").is_none());
    let html = resp.text().await.unwrap();
    assert!(
        html.contains("src=\"/node/node-a/static/app.js\""),
        "{html}"
    );
    assert!(
        !html.contains("src=\"/static/"),
        "every asset URL is prefixed"
    );
    assert!(html.contains("turnstone-console-banner"));
    assert!(html.contains("var P=\"/node/node-a\""));
    let js = console
        .http
        .get(console.url("/node/node-a/static/app.js"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), 200);
    assert!(
        js.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("javascript")
    );

    // The API with the console's credentials (the node trusts the minted JWT).
    let (status, list) = console.get("/node/node-a/v1/api/workstreams").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["workstreams"][0]["id"], a.default_ws.as_str());

    // A turn: the event stream flows through, the send is a proxied POST.
    let mut sse = console
        .sse(&format!(
            "/node/node-a/v1/api/events?ws_id={}",
            a.default_ws
        ))
        .await;
    let (status, sent) = console
        .post(
            "/node/node-a/v1/api/send",
            &json!({"ws_id": a.default_ws, "message": "through the proxy"}).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{sent}");
    let done = sse.until("turn_complete", |_| true).await;
    assert_eq!(done["content"], "through the proxy");
    assert!(
        sse.raw.contains("\r\n"),
        "the node's framing is relayed unchanged"
    );

    // Unknown node paths on a known node come back with the node's own status.
    let resp = console
        .http
        .get(console.url("/node/node-a/v1/api/nope"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

/// A W3C trace context as a caller sends it.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test]
async fn streams_are_not_buffered_and_carry_a_fresh_user_jwt() {
    let p = prefix();
    let fake = FakeNode::start("fake", CONSOLE_VERSION).await;
    heartbeat(&p, "fake", &fake.url, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["fake"]).await;

    // The first frame arrives while the node holds the stream open: nothing is buffered.
    let resp = console
        .http
        .get(console.url("/node/fake/v1/api/events?ws_id=w"))
        .bearer_auth(READ_TOKEN)
        .header("last-event-id", "41")
        .header("traceparent", TRACEPARENT)
        .header("cookie", "turnstone_auth=console-session")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "text/event-stream; charset=utf-8"
    );
    assert_eq!(resp.headers()["cache-control"], "no-store");
    assert_eq!(resp.headers()["x-accel-buffering"], "no");
    let mut sse = SseClient::new(resp);
    let first = sse.next().await;
    assert_eq!(
        first,
        json!({"type": "first", "n": 42}),
        "resumed after Last-Event-ID"
    );
    fake.state.release.notify_one();
    assert_eq!(sse.next().await, json!({"type": "second", "n": 43}));
    assert!(
        sse.raw.starts_with("id: 42\r\n"),
        "raw bytes relayed: {:?}",
        sse.raw
    );

    let seen = fake.seen_proxied();
    let req = seen
        .iter()
        .find(|s| s.path.starts_with("/v1/api/events"))
        .unwrap();
    assert_eq!(req.path, "/v1/api/events?ws_id=w", "query kept");
    assert_eq!(req.last_event_id.as_deref(), Some("41"));
    assert_eq!(
        req.traceparent.as_deref(),
        Some(TRACEPARENT),
        "the caller's trace goes on to the node"
    );
    assert_eq!(
        req.cookie, None,
        "the browser's cookies stay at the console"
    );
    let auth = req.authorization.as_deref().unwrap();
    assert_ne!(
        auth,
        format!("Bearer {READ_TOKEN}"),
        "never the caller's own token"
    );
    let claims = verify(
        auth.strip_prefix("Bearer ").unwrap(),
        &JwtSecret::new(SECRET),
        AUDIENCE_SERVER,
    )
    .unwrap();
    assert_eq!(claims.src, "console-proxy");
    assert_eq!(claims.exp - claims.iat.unwrap(), 300);
    assert!(
        claims.scopes.has(Scope::Read) && !claims.scopes.has(Scope::Write),
        "the caller's scopes"
    );

    // POST: body and content type forwarded; the node's Set-Cookie is not relayed.
    let resp = console
        .http
        .post(console.url("/node/fake/v1/api/send"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"message":"hi"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let echo: serde_json::Value = resp.json().await.unwrap();
    // The console opts every send in to the node's queue (issue 20) …
    let forwarded: serde_json::Value =
        serde_json::from_str(echo["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        forwarded,
        serde_json::json!({"message": "hi", "queue": true})
    );
    assert_eq!(echo["content_type"], "application/json");
    // … unless the caller said otherwise.
    let resp = console
        .http
        .post(console.url("/node/fake/v1/api/send"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"message":"hi","queue":false}"#)
        .send()
        .await
        .unwrap();
    let echo: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(echo["body"], r#"{"message":"hi","queue":false}"#);
    let page = console
        .http
        .get(console.url("/node/fake/"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(page.headers().get("set-cookie").is_none());
    // Each request's token carries that request's caller (read above, full here).
    let auths: Vec<String> = fake
        .seen_proxied()
        .iter()
        .filter_map(|s| s.authorization.clone())
        .collect();
    assert!(auths.len() >= 3);
    let write_claims = verify(
        auths[1].strip_prefix("Bearer ").unwrap(),
        &JwtSecret::new(SECRET),
        AUDIENCE_SERVER,
    )
    .unwrap();
    assert!(write_claims.scopes.has(Scope::Write));
}

#[tokio::test]
async fn refusals_are_clear_and_unauthenticated_requests_never_reach_a_node() {
    let p = prefix();
    let fake = FakeNode::start("fake", CONSOLE_VERSION).await;
    heartbeat(&p, "fake", &fake.url, 10).await;
    // A node whose heartbeat is fresh but whose port is closed.
    let closed = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    heartbeat(&p, "down", &closed, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["down", "fake"]).await;

    for path in [
        "/node/ghost/",
        "/node/ghost/v1/api/workstreams",
        "/node/bad%20id/health",
    ] {
        let (status, body) = console.get(path).await;
        assert_eq!(
            (status, body),
            (404, json!({"error": "Node not found"})),
            "{path}"
        );
    }
    let (status, body) = console.get("/node/down/v1/api/workstreams").await;
    assert_eq!((status, body), (502, json!({"error": "Node unreachable"})));
    let (status, _) = console.get("/node/down/").await;
    assert_eq!(status, 502);

    let before = fake.seen_proxied().len();
    for path in [
        "/node/fake/",
        "/node/fake/v1/api/events?ws_id=w",
        "/node/fake/static/style.css",
        "/node/fake/health",
    ] {
        let (status, body) = console.get_as(path, None).await;
        assert_eq!(status, 401, "{path}");
        assert_eq!(body["error"], "Unauthorized: missing or invalid token");
        assert_eq!(console.get_as(path, Some("forged")).await.0, 401, "{path}");
    }
    let resp = console
        .http
        .post(console.url("/node/fake/v1/api/send"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    // A read-only caller cannot write through the proxy either.
    let resp = console
        .http
        .post(console.url("/node/fake/v1/api/send"))
        .bearer_auth(READ_TOKEN)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(
        fake.seen_proxied().len(),
        before,
        "nothing reached the node"
    );

    // A browser without a session is sent to the console's sign-in instead.
    let resp = console
        .http
        .get(console.url("/node/fake/?ws_id=abc"))
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 303);
    assert_eq!(
        resp.headers()["location"],
        "/?next=%2Fnode%2Ffake%2F%3Fws_id%3Dabc"
    );
    // /node/{id} without the slash redirects to the page.
    let resp = console
        .http
        .get(console.url("/node/fake"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 308);
}
