//! The cluster API against real nodes: discovery from heartbeats, overview and node fields,
//! workstream queries, drift, placement into the right Redis queue, and bad input.

use serde_json::json;
use turnstone_console::model::CONSOLE_VERSION;

use super::*;

#[tokio::test]
async fn two_nodes_are_aggregated_and_auto_placement_picks_the_emptier() {
    let p = prefix();
    let a = NodeServer::start("node-a", CONSOLE_VERSION, 10).await;
    let b = NodeServer::start("node-b", CONSOLE_VERSION, 10).await;
    a.add_workstreams(3).await; // a: 4 of 10, b: 1 of 10
    heartbeat(&p, "node-a", &a.url, 10).await;
    heartbeat(&p, "node-b", &b.url, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["node-a", "node-b"]).await;
    turnstone_testkit::assert_eventually!(
        console.get("/v1/api/cluster/overview").await.1["workstreams"] == 5,
        "five workstreams in the overview"
    );

    let (status, o) = console.get("/v1/api/cluster/overview").await;
    assert_eq!(status, 200);
    assert_eq!(o["nodes"], 2);
    assert_eq!(o["states"]["idle"], 5);
    assert_eq!(o["version_drift"], false);
    assert_eq!(o["versions"], json!([CONSOLE_VERSION]));
    assert_eq!(o["capacity"], json!({"max_ws": 20, "used": 5, "free": 15}));
    assert!(
        o.get("mcp_servers").is_none(),
        "no MCP servers, no MCP keys"
    );

    let (_, nodes) = console.get("/v1/api/cluster/nodes?sort=name").await;
    assert_eq!(nodes["total"], 2);
    let na = &nodes["nodes"][0];
    assert_eq!(na["node_id"], "node-a");
    assert_eq!(na["server_url"], a.url.as_str());
    assert_eq!(na["ws_total"], 4);
    assert_eq!(na["ws_idle"], 4);
    assert_eq!(na["max_ws"], 10);
    assert_eq!(na["reachable"], true);
    assert_eq!(na["status"], "ok");
    assert_eq!(na["version"], CONSOLE_VERSION);
    assert_eq!(na["health"]["node_id"], "node-a");
    assert_eq!(na["placeable"], true);

    // Workstreams: filters, search, pagination.
    let (_, ws) = console
        .get("/v1/api/cluster/workstreams?node=node-a&per_page=3&page=2&sort=name")
        .await;
    assert_eq!(ws["total"], 4);
    assert_eq!(ws["pages"], 2);
    assert_eq!(ws["page"], 2);
    assert_eq!(ws["workstreams"].as_array().unwrap().len(), 1);
    let (_, found) = console
        .get("/v1/api/cluster/workstreams?search=EXTRA-1")
        .await;
    assert_eq!(found["total"], 1);
    assert_eq!(found["workstreams"][0]["node"], "node-a");
    let (_, detail) = console.get("/v1/api/cluster/node/node-b").await;
    assert_eq!(detail["workstreams"][0]["id"], b.default_ws.as_str());
    assert!(detail["aggregate"]["total_count"].is_u64());

    // auto → the emptier node's own queue, as a create_workstream message.
    let (status, created) = console
        .post(
            "/v1/api/cluster/workstreams/new",
            r#"{"node_id": "auto", "name": "placed", "initial_message": "hello"}"#,
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["status"], "ok");
    assert_eq!(created["target_node"], "node-b");
    let queued = drain(&format!("{p}:inbound:node-b")).await;
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0]["type"], "create_workstream");
    assert_eq!(queued[0]["target_node"], "node-b");
    assert_eq!(queued[0]["name"], "placed");
    assert_eq!(queued[0]["initial_message"], "hello");
    assert_eq!(queued[0]["correlation_id"], created["correlation_id"]);
    assert_eq!(queued[0]["auto_approve"], false);

    // pool → the shared queue; a named node → its queue.
    let (_, pool) = console
        .post("/v1/api/cluster/workstreams/new", r#"{"node_id": "pool"}"#)
        .await;
    assert_eq!(pool["target_node"], "pool");
    let shared = drain(&format!("{p}:inbound")).await;
    assert_eq!(shared.len(), 1);
    assert_eq!(shared[0]["target_node"], "");
    let (_, named) = console
        .post(
            "/v1/api/cluster/workstreams/new",
            r#"{"node_id": "node-a", "name": null}"#,
        )
        .await;
    assert_eq!(named["target_node"], "node-a");
    assert_eq!(drain(&format!("{p}:inbound:node-a")).await.len(), 1);
}

#[tokio::test]
async fn a_node_on_another_version_is_flagged_and_skipped_by_auto() {
    let p = prefix();
    let a = NodeServer::start("node-a", CONSOLE_VERSION, 10).await;
    let b = NodeServer::start("node-b", CONSOLE_VERSION, 10).await;
    let old = NodeServer::start("node-old", "0.0.1-old", 100).await;
    a.add_workstreams(2).await;
    b.add_workstreams(1).await;
    for n in [&a, &b, &old] {
        heartbeat(
            &p,
            &n.node_id,
            &n.url,
            if n.node_id == "node-old" { 100 } else { 10 },
        )
        .await;
    }
    let console = TestConsole::start(&p).await;
    console
        .wait_for_nodes(&["node-a", "node-b", "node-old"])
        .await;
    turnstone_testkit::assert_eventually!(
        console.get("/v1/api/cluster/overview").await.1["version_drift"] == true,
        "drift seen"
    );
    let (_, o) = console.get("/v1/api/cluster/overview").await;
    assert_eq!(o["versions"], json!(["0.0.1-old", CONSOLE_VERSION]));
    assert_eq!(o["majority_version"], CONSOLE_VERSION);
    assert_eq!(o["drifted_nodes"], json!(["node-old"]));
    let (_, nodes) = console.get("/v1/api/cluster/nodes?sort=name").await;
    let old_row = &nodes["nodes"][2];
    assert_eq!(old_row["node_id"], "node-old");
    assert_eq!(old_row["version_drift"], true);
    assert_eq!(old_row["placeable"], false);
    assert_eq!(nodes["nodes"][0]["version_drift"], false);
    let (_, health) = console.get_as("/health", None).await;
    assert_eq!(health["version_drift"], true);
    assert_eq!(health["service"], "turnstone-console");

    // node-old has by far the most free capacity, but auto skips it.
    let (_, created) = console
        .post("/v1/api/cluster/workstreams/new", r#"{"node_id": ""}"#)
        .await;
    assert_eq!(created["target_node"], "node-b");
    // The console's metrics show the drift too.
    let metrics = console
        .http
        .get(console.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("turnstone_console_version_drift 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("turnstone_console_node_version_drift{node_id=\"node-old\"} 1"),
        "{metrics}"
    );
    drain(&format!("{p}:inbound:node-b")).await;
}

#[tokio::test]
async fn bad_input_gets_a_clear_4xx() {
    let p = prefix();
    let console = TestConsole::start(&p).await;
    for (path, needle) in [
        (
            "/v1/api/cluster/workstreams?page=0",
            "page must be an integer",
        ),
        (
            "/v1/api/cluster/workstreams?page=abc",
            "page must be an integer",
        ),
        (
            "/v1/api/cluster/workstreams?per_page=500",
            "per_page must be an integer",
        ),
        (
            "/v1/api/cluster/workstreams?sort=bogus",
            "sort must be one of",
        ),
        ("/v1/api/cluster/nodes?limit=0", "limit must be an integer"),
        (
            "/v1/api/cluster/nodes?offset=-1",
            "offset must be an integer",
        ),
        ("/v1/api/cluster/nodes?sort=up", "sort must be one of"),
    ] {
        let (status, body) = console.get(path).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(needle),
            "{path}: {body}"
        );
    }
    let (status, body) = console.get("/v1/api/cluster/node/nope").await;
    assert_eq!((status, body), (404, json!({"error": "Node not found"})));
    let (status, body) = console.get("/v1/api/cluster/node/a/b").await;
    assert_eq!((status, body), (400, json!({"error": "Invalid node ID"})));

    let create = "/v1/api/cluster/workstreams/new";
    let (status, body) = console.post(create, "{not json").await;
    assert_eq!((status, body), (400, json!({"error": "Invalid JSON body"})));
    let (status, body) = console.post(create, "[1, 2]").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = console.post(create, r#"{"name": 5}"#).await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"],
        "node_id, name, model, initial_message, skill, and resume_ws must be strings"
    );
    let (status, body) = console.post(create, r#"{"node_id": "ghost"}"#).await;
    assert_eq!((status, body), (404, json!({"error": "Node not found"})));
    let (status, body) = console.post(create, r#"{"node_id": "auto"}"#).await;
    assert_eq!(
        (status, body),
        (503, json!({"error": "No reachable nodes available"}))
    );

    // Auth: no token, a bad token, and a read token on a write route.
    let (status, body) = console.get_as("/v1/api/cluster/overview", None).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"], "Unauthorized: missing or invalid token");
    assert_eq!(
        console
            .get_as("/v1/api/cluster/overview", Some("wrong"))
            .await
            .0,
        401
    );
    assert_eq!(
        console
            .get_as("/v1/api/cluster/overview", Some(READ_TOKEN))
            .await
            .0,
        200
    );
    let resp = console
        .http
        .post(console.url(create))
        .bearer_auth(READ_TOKEN)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "Forbidden: token lacks 'write' scope");
    // Unknown routes are JSON 404s.
    assert_eq!(console.get("/v1/api/nope").await.0, 404);
}

#[tokio::test]
async fn login_sets_a_console_cookie_that_authenticates() {
    let console = TestConsole::start(&prefix()).await;
    let resp = console
        .http
        .post(console.url("/v1/api/auth/login"))
        .json(&json!({"token": TOKEN}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let cookie = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.starts_with("turnstone_auth=") && cookie.contains("HttpOnly"));
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["role"], "full");
    let jwt = body["jwt"].as_str().unwrap();
    let cookie_pair = cookie.split(';').next().unwrap();
    let resp = console
        .http
        .get(console.url("/v1/api/cluster/overview"))
        .header("cookie", cookie_pair)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        console
            .get_as("/v1/api/cluster/overview", Some(jwt))
            .await
            .0,
        200
    );
    let bad = console
        .http
        .post(console.url("/v1/api/auth/login"))
        .json(&json!({"token": "nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    // The page and its files are public.
    let page = console.http.get(console.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'self'")
    );
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("<title>turnstone console</title>")
    );
    for f in ["app.js", "style.css", "favicon.svg"] {
        let r = console
            .http
            .get(console.url(&format!("/static/{f}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{f}");
    }
}

#[tokio::test]
async fn repeated_failed_logins_are_limited() {
    let console = TestConsole::start(&prefix()).await;
    let login = |token: &'static str| {
        console
            .http
            .post(console.url("/v1/api/auth/login"))
            .json(&json!({ "token": token }))
            .send()
    };
    for _ in 0..5 {
        assert_eq!(login("wrong").await.unwrap().status(), 401);
    }
    let blocked = login(TOKEN).await.unwrap();
    assert_eq!(blocked.status(), 429, "even the right token waits");
    let retry: u64 = blocked.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=300).contains(&retry), "{retry}");
    let body: serde_json::Value = blocked.json().await.unwrap();
    assert_eq!(body["error"], "Too many login attempts");
    // Bearer tokens on the API are not affected.
    assert_eq!(console.get("/v1/api/cluster/overview").await.0, 200);
}
