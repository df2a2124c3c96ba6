//! The admin fan-out (cluster spec §6.5) against scripted nodes: watches merged, filled and
//! sorted across nodes, an unreachable node reported in `errors`, cancels relayed to the
//! owning node (its 404 included), MCP status merged per server, reloads per node, models
//! per node, and the approve scope.

use serde_json::json;
use turnstone_console::model::CONSOLE_VERSION;
use turnstone_runtime::auth::{AUDIENCE_SERVER, JwtSecret, Scope, verify};

use super::fake_node::FakeNode;
use super::*;

/// A URL nothing listens on (a freed port: connection refused).
async fn dead_url() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    drop(l);
    url
}

/// Two scripted nodes and a dead one, all discovered by a console.
async fn cluster() -> (TestConsole, FakeNode, FakeNode) {
    let p = prefix();
    let a = FakeNode::start("node-a", CONSOLE_VERSION).await;
    let b = FakeNode::start("node-b", CONSOLE_VERSION).await;
    heartbeat(&p, "node-a", &a.url, 10).await;
    heartbeat(&p, "node-b", &b.url, 10).await;
    heartbeat(&p, "node-dead", &dead_url().await, 10).await;
    let console = TestConsole::start(&p).await;
    console
        .wait_for_nodes(&["node-a", "node-b", "node-dead"])
        .await;
    (console, a, b)
}

async fn post_as(console: &TestConsole, path: &str, body: &str, token: &str) -> (u16, Value) {
    let resp = console
        .http
        .post(console.url(path))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn watches_are_merged_sorted_and_cancelled_on_their_node() {
    let (console, a, b) = cluster().await;
    *a.state.watches.lock().unwrap() = vec![
        json!({"watch_id": "a1", "ws_id": "w", "node_id": "", "name": "old-active", "active": 1,
               "created": "2026-01-01T00:00:00"}),
        json!({"watch_id": "a2", "ws_id": "w", "name": "inactive-newest", "active": 0,
               "created": "2026-01-09T00:00:00"}),
    ];
    *b.state.watches.lock().unwrap() = vec![
        json!({"watch_id": "b1", "ws_id": "w", "node_id": "node-b-self", "name": "new-active",
               "active": 1, "created": "2026-01-05T00:00:00"}),
    ];

    let (status, v) = console.get("/v1/api/admin/watches").await;
    assert_eq!(status, 200, "{v}");
    let rows = v["watches"].as_array().unwrap();
    let ids: Vec<&str> = rows
        .iter()
        .map(|w| w["watch_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["b1", "a1", "a2"], "active first, then newest created");
    // An empty or missing node_id is the answering node's; a present one is kept.
    assert_eq!(rows[1]["node_id"], "node-a");
    assert_eq!(rows[2]["node_id"], "node-a");
    assert_eq!(rows[0]["node_id"], "node-b-self");
    // The dead node is skipped and named.
    let errors = v["errors"].as_object().unwrap();
    assert_eq!(errors.keys().collect::<Vec<_>>(), ["node-dead"], "{v}");

    // The fan-out presented a fresh JWT for the nodes, carrying the approve scope.
    let seen = a
        .seen_proxied()
        .into_iter()
        .find(|s| s.path == "/v1/api/watches")
        .expect("node-a was asked for its watches");
    let auth = seen.authorization.expect("an Authorization header");
    let claims = verify(
        auth.strip_prefix("Bearer ").unwrap(),
        &JwtSecret::new(SECRET),
        AUDIENCE_SERVER,
    )
    .unwrap();
    assert_eq!(claims.src, "console-proxy");
    assert!(claims.scopes.has(Scope::Approve));

    // Cancel with node_id in the body: relayed to node-a, which deactivates the watch.
    let (status, v) = console
        .post(
            "/v1/api/admin/watches/a1/cancel",
            r#"{"node_id": "node-a"}"#,
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v, json!({"status": "ok", "watch_id": "a1"}));
    assert_eq!(a.state.watches.lock().unwrap()[0]["active"], 0);
    assert!(
        !b.seen_proxied().iter().any(|s| s.path.contains("cancel")),
        "only the owning node is asked"
    );

    // With node_id in the query; node-b does not know a1: its 404 comes back as is.
    let (status, v) = console
        .post("/v1/api/admin/watches/a1/cancel?node_id=node-b", "")
        .await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(v, json!({"error": "Watch not found"}));

    // Unknown node, missing node_id, a dead node, bad JSON.
    let (status, v) = console
        .post(
            "/v1/api/admin/watches/a1/cancel",
            r#"{"node_id": "node-zzz"}"#,
        )
        .await;
    assert_eq!(
        (status, v),
        (404, json!({"error": "Unknown node: node-zzz"}))
    );
    let (status, v) = console.post("/v1/api/admin/watches/a1/cancel", "{}").await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("node_id"));
    let (status, v) = console
        .post("/v1/api/admin/watches/a1/cancel?node_id=node-dead", "")
        .await;
    assert_eq!((status, v), (502, json!({"error": "Node unreachable"})));
    let (status, v) = console
        .post("/v1/api/admin/watches/a1/cancel", "{not json")
        .await;
    assert_eq!((status, v), (400, json!({"error": "Invalid JSON body"})));
}

#[tokio::test]
async fn mcp_status_is_merged_per_server_and_reload_answers_per_node() {
    let (console, a, b) = cluster().await;
    *a.state.mcp_status.lock().unwrap() =
        json!({"git": {"state": "connected", "tools": 3}, "web": {"state": "failed"}});
    *b.state.mcp_status.lock().unwrap() = json!({"git": {"state": "connected", "tools": 3}});

    let (status, v) = console.get("/v1/api/admin/mcp-servers").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["servers"],
        json!({
            "git": {"nodes": {
                "node-a": {"state": "connected", "tools": 3},
                "node-b": {"state": "connected", "tools": 3},
            }},
            "web": {"nodes": {"node-a": {"state": "failed"}}},
        })
    );
    assert!(v["errors"]["node-dead"].is_string(), "{v}");

    let (status, v) = console.post("/v1/api/admin/mcp-servers/reload", "").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "ok");
    assert_eq!(
        v["results"]["node-a"],
        json!({"status": "ok", "servers": 2})
    );
    assert_eq!(
        v["results"]["node-b"],
        json!({"status": "ok", "servers": 1})
    );
    assert!(v["results"]["node-dead"]["error"].is_string(), "{v}");
    for node in [&a, &b] {
        assert_eq!(
            node.seen_proxied()
                .iter()
                .filter(|s| s.path == "/v1/api/_internal/mcp-reload")
                .count(),
            1
        );
    }
}

#[tokio::test]
async fn models_are_listed_per_node() {
    let (console, a, b) = cluster().await;
    let info = json!({"model": "gpt-x", "provider": "openai", "source": "config",
                      "context_window": 128000, "enabled": true});
    *a.state.models.lock().unwrap() = json!({"default": info});
    *b.state.models.lock().unwrap() = json!({"default": info, "fast": info});

    let (status, v) = console.get("/v1/api/admin/models").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["nodes"]["node-a"], json!({"default": info}));
    assert_eq!(v["nodes"]["node-b"]["fast"]["model"], "gpt-x");
    assert!(v["nodes"].get("node-dead").is_none());
    assert!(v["errors"]["node-dead"].is_string(), "{v}");
}

#[tokio::test]
async fn the_admin_fan_out_needs_the_approve_scope() {
    let p = prefix();
    let a = FakeNode::start("node-a", CONSOLE_VERSION).await;
    heartbeat(&p, "node-a", &a.url, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["node-a"]).await;
    for path in [
        "/v1/api/admin/watches",
        "/v1/api/admin/mcp-servers",
        "/v1/api/admin/models",
    ] {
        let (status, v) = console.get_as(path, Some(READ_TOKEN)).await;
        assert_eq!(status, 403, "{path}: {v}");
        let (status, _) = console.get_as(path, None).await;
        assert_eq!(status, 401, "{path}");
    }
    for path in [
        "/v1/api/admin/watches/a1/cancel?node_id=node-a",
        "/v1/api/admin/mcp-servers/reload",
    ] {
        let (status, v) = post_as(&console, path, "", READ_TOKEN).await;
        assert_eq!(status, 403, "{path}: {v}");
    }
    assert!(
        a.seen_proxied().is_empty(),
        "a refused request never reaches a node: {:?}",
        a.seen_proxied()
    );
}

#[tokio::test]
async fn a_real_node_answers_every_fan_out() {
    let p = prefix();
    let a = NodeServer::start("node-a", CONSOLE_VERSION, 10).await;
    heartbeat(&p, "node-a", &a.url, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["node-a"]).await;

    // The node accepts the minted JWT (approve scope) on its watches and _internal routes.
    let (status, v) = console.get("/v1/api/admin/watches").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["errors"], json!({}), "{v}");
    assert!(v["watches"].is_array(), "{v}");
    let (status, v) = console.get("/v1/api/admin/mcp-servers").await;
    assert_eq!((status, &v["errors"]), (200, &json!({})), "{v}");
    let (status, v) = console.get("/v1/api/admin/models").await;
    assert_eq!((status, &v["errors"]), (200, &json!({})), "{v}");
    assert!(v["nodes"]["node-a"].is_object(), "{v}");
    let (status, v) = console.post("/v1/api/admin/mcp-servers/reload", "").await;
    assert_eq!(status, 200, "{v}");
    assert!(v["results"]["node-a"].get("error").is_none(), "{v}");
    // A cancel on a node without storage: the node's own refusal comes back unchanged.
    let (status, v) = console
        .post("/v1/api/admin/watches/00ff/cancel?node_id=node-a", "")
        .await;
    assert_eq!((status, v), (500, json!({"error": "Storage unavailable"})));
}
