use serde_json::json;

use super::*;

#[tokio::test]
async fn health_is_public_and_reports_the_node() {
    let t = TestNode::start().await;
    let (status, body) = t.get("/health", None).await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["node_id"], "node-test");
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["max_ws"], 50);
    assert_eq!(body["workstreams"]["total"], 1);
    assert_eq!(body["workstreams"]["idle"], 1);
    assert_eq!(body["backend"]["circuit_state"], "closed");
}

#[tokio::test]
async fn every_api_route_needs_a_token_with_the_right_scope() {
    let t = TestNode::start().await;
    let (status, body) = t.get("/v1/api/workstreams", None).await;
    assert_eq!(status, 401);
    assert_eq!(
        body,
        json!({"error": "Unauthorized: missing or invalid token"})
    );
    let (status, _) = t.get("/v1/api/workstreams", Some("wrong")).await;
    assert_eq!(status, 401);
    let (status, body) = t.get("/v1/api/workstreams", Some(READ)).await;
    assert_eq!(status, 200);
    assert_eq!(body["workstreams"][0]["name"], "default");

    let send = json!({"ws_id": t.default_ws, "message": "hi"}).to_string();
    let (status, body) = t.post_raw("/v1/api/send", send, READ).await;
    assert_eq!(status, 403);
    assert_eq!(
        body,
        json!({"error": "Forbidden: token lacks 'write' scope"})
    );
    assert_eq!(t.llm.request_count(), 0, "a refused request starts nothing");

    // The cookie works too.
    let resp = t
        .http
        .get(t.url("/v1/api/dashboard"))
        .header("cookie", format!("turnstone_auth={READ}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn bad_input_gets_precise_errors() {
    let t = TestNode::start().await;
    let (status, body) = t.post_raw("/v1/api/send", "{not json".into(), FULL).await;
    assert_eq!((status, body), (400, json!({"error": "Invalid JSON body"})));
    let (status, body) = t.post_raw("/v1/api/send", String::new(), FULL).await;
    assert_eq!((status, body), (400, json!({"error": "Invalid JSON body"})));
    let (status, body) = t
        .post("/v1/api/send", json!({"ws_id": "nope", "message": "hi"}))
        .await;
    assert_eq!(
        (status, body),
        (404, json!({"error": "Unknown workstream"}))
    );
    let (status, body) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": "  "}),
        )
        .await;
    assert_eq!((status, body), (400, json!({"error": "Empty message"})));
    let (status, body) = t
        .post("/v1/api/send", json!({"ws_id": 5, "message": "x"}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("ws_id"), "{body}");
    let huge = json!({"ws_id": t.default_ws, "message": "x".repeat(2 * 1024 * 1024)}).to_string();
    let (status, body) = t.post_raw("/v1/api/send", huge, FULL).await;
    assert_eq!(status, 413, "{body}");
    assert!(body["error"].as_str().unwrap().contains("too large"));
    let (status, _) = t.post("/v1/api/approve", json!({"ws_id": "nope"})).await;
    assert_eq!(status, 404);
    assert_eq!(t.llm.request_count(), 0);
}

#[tokio::test]
async fn workstreams_are_created_listed_and_closed() {
    let t = TestNode::start().await;
    let (status, created) = t
        .post("/v1/api/workstreams/new", json!({"name": "second"}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(created["name"], "second");
    assert_eq!(created["resumed"], false);
    let id = created["ws_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    let (_, listed) = t.get("/v1/api/workstreams", Some(FULL)).await;
    let names: Vec<&str> = listed["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "second"]);
    let (_, dash) = t.get("/v1/api/dashboard", Some(FULL)).await;
    assert_eq!(dash["aggregate"]["total_count"], 2);
    assert_eq!(dash["workstreams"][1]["model"], "fake-model");

    let (status, _) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": id}))
        .await;
    assert_eq!(status, 200);
    let (status, body) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": t.default_ws}))
        .await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "Cannot close last workstream"}))
    );
    let (status, _) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": "unknown"}))
        .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_repeated_correlation_id_never_starts_a_second_turn() {
    let t = TestNode::start().await;
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    let body =
        json!({"ws_id": t.default_ws, "message": "only once", "correlation_id": "abc123abc123"});
    let (status, first) = t.post("/v1/api/send", body.clone()).await;
    assert_eq!((status, first), (200, json!({"status": "ok"})));
    events.until("turn_complete").await;
    // The same send again (a redelivery), after the turn and while idle: nothing starts.
    let resp = t
        .http
        .post(t.url("/v1/api/send"))
        .bearer_auth(FULL)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["idempotent-replayed"], "true");
    assert_eq!(
        resp.json::<serde_json::Value>().await.unwrap(),
        json!({"status": "ok"})
    );
    // The Idempotency-Key header works the same way.
    for attempt in 0..2 {
        let resp = t
            .http
            .post(t.url("/v1/api/send"))
            .bearer_auth(FULL)
            .header("idempotency-key", "key-2")
            .json(&json!({"ws_id": t.default_ws, "message": "keyed"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.headers().contains_key("idempotent-replayed"),
            attempt == 1
        );
        if attempt == 0 {
            events.until("turn_complete").await;
        }
    }
    assert_eq!(t.llm.request_count(), 2, "two distinct keys, two turns");
}

#[tokio::test]
async fn concurrent_duplicates_start_exactly_one_turn() {
    let t = TestNode::start().await;
    let body = json!({"ws_id": t.default_ws, "message": "race", "correlation_id": "race00000001"});
    let sends = (0..8).map(|_| t.post("/v1/api/send", body.clone()));
    let results = futures::future::join_all(sends).await;
    assert!(
        results
            .iter()
            .all(|(s, b)| *s == 200 && b["status"] == "ok"),
        "{results:?}"
    );
    turnstone_testkit::assert_eventually!(
        !t.node.workstream(&t.default_ws).unwrap().is_busy(),
        "turn never finished"
    );
    assert_eq!(t.llm.request_count(), 1);
    assert_eq!(t.node.workstream(&t.default_ws).unwrap().history().len(), 2);
}

#[tokio::test]
async fn an_approval_is_decided_once() {
    let t = TestNode::start().await;
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "TOOL: echo approved"}),
    )
    .await;
    let seen = events.until("approve_request").await;
    let request = seen.last().unwrap();
    assert_eq!(request.data["items"][0]["func_name"], "bash");
    let (status, _) = t
        .post(
            "/v1/api/approve",
            json!({"ws_id": t.default_ws, "approved": true}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, body) = t
        .post(
            "/v1/api/approve",
            json!({"ws_id": t.default_ws, "approved": false, "feedback": "late"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["verdict"]["approved"], true);
    assert_eq!(body["verdict"]["request_id"], request.data["request_id"]);
    let rest = events.until("turn_complete").await;
    let results: Vec<_> = rest.iter().filter(|e| e.kind() == "tool_result").collect();
    assert_eq!(results.len(), 1);
    assert!(
        results[0].data["output"]
            .as_str()
            .unwrap()
            .contains("approved")
    );
}

#[tokio::test]
async fn extra_keys_of_the_wrong_type_are_rejected_not_ignored() {
    let t = TestNode::start().await;
    let (status, body) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": "hi", "correlation_id": 5}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("correlation_id"),
        "{body}"
    );
    let (status, body) = t
        .post(
            "/v1/api/approve",
            json!({"ws_id": t.default_ws, "approved": true, "request_id": [1]}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("request_id"),
        "{body}"
    );
    assert_eq!(t.llm.request_count(), 0, "nothing started");
}

#[tokio::test]
async fn the_tool_payload_of_the_latest_request_is_inspectable() {
    let t = TestNode::start().await;
    let path = format!("/v1/api/tools?ws_id={}", t.default_ws);
    let (status, before) = t.get(&path, Some(FULL)).await;
    assert_eq!(status, 200);
    assert_eq!(
        before["prepared"],
        Value::Null,
        "nothing prepared before the first request"
    );
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "inspect me"}),
    )
    .await;
    events.until("turn_complete").await;
    let (_, after) = t.get(&path, Some(FULL)).await;
    let p = &after["prepared"];
    assert_eq!(p["turn"], 1);
    let names: Vec<&str> = p["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"bash") && names.contains(&"read_file"),
        "{names:?}"
    );
    for name in ["git", "man", "math"] {
        let tool = p["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {names:?}"));
        assert_eq!(tool["provenance"], "builtin");
        assert_eq!(tool["residency"], "resident");
    }
    let sha = p["sha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64);
    assert!(sha.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(p["bytes"].as_u64().unwrap() > 100);
    assert!(p["tools"][0]["provenance"].is_string() || p["tools"][0]["provenance"].is_object());
    let (_, unknown) = t.get("/v1/api/tools?ws_id=nope", Some(FULL)).await;
    assert_eq!(unknown["error"], "Unknown workstream");
}
