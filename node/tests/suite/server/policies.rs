//! Tool policies, heuristic verdicts and postures through the node: the admin routes
//! (`/v1/api/admin/policies`, `/v1/api/admin/verdicts`) with their scopes and validation, a
//! stored policy applied to a turn and surviving a restart (SQLite), verdicts on
//! `approve_request` items over SSE and recorded with the human's decision, and the
//! `posture` of a workstream (`full` needs the approve scope).

use serde_json::{Value, json};
use turnstone_runtime::auth::{
    AUDIENCE_SERVER, Authenticator, JwtSecret, NewClaims, Permissions, Scopes, mint,
};

use super::*;

const SECRET: &str = "a-test-secret-that-is-long-enough-for-hs256";
const BASH_BLOCKED: &str = "Blocked by tool policy (pattern match for 'bash')";

/// A persistent node whose authenticator also accepts JWTs (a write-scope user).
async fn policy_node(db: &std::path::Path) -> TestNode {
    let auth = Authenticator::new(
        true,
        Some(JwtSecret::new(SECRET)),
        TestNode::test_tokens(),
        AUDIENCE_SERVER,
    );
    TestNode::spawn(Spec {
        db: Some(db.to_path_buf()),
        auth: Some(auth),
        ..Spec::default()
    })
    .await
}

/// A JWT for a user with `scopes` who may create workstreams.
fn user_token(scopes: &str) -> String {
    let mut claims = NewClaims::new("alice", Scopes::parse(scopes), "password", AUDIENCE_SERVER);
    claims.permissions = Permissions::parse("workstreams.create");
    mint(
        &claims,
        &JwtSecret::new(SECRET),
        std::time::Duration::from_secs(600),
    )
    .unwrap()
}

async fn admin(
    t: &TestNode,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    call(t, method, path, FULL, body).await
}

async fn create_policy(t: &TestNode, body: Value) -> (u16, Value) {
    admin(
        t,
        reqwest::Method::POST,
        "/v1/api/admin/policies",
        Some(body),
    )
    .await
}

/// Sends `message` and reads the turn through `turn_complete` (or `approve_request`).
async fn send_until(
    t: &TestNode,
    events: &mut SseClient,
    ws_id: &str,
    message: &str,
    until: &str,
) -> Vec<SseEvent> {
    let (status, body) = t
        .post("/v1/api/send", json!({"ws_id": ws_id, "message": message}))
        .await;
    assert_eq!(status, 200, "{body}");
    events.until(until).await
}

#[tokio::test]
async fn admin_policy_routes_crud_scopes_and_validation() {
    let dir = tempfile::tempdir().unwrap();
    let t = policy_node(&dir.path().join("p.db")).await;

    let (status, row) = create_policy(
        &t,
        json!({"name": "no-mcp", "tool_pattern": "mcp__*", "action": "deny", "priority": 5}),
    )
    .await;
    assert_eq!(status, 201, "{row}");
    assert_eq!(row["action"], "deny");
    assert_eq!(row["priority"], 5);
    assert_eq!(row["enabled"], true);
    assert_eq!(row["source"], "admin");
    let id = row["policy_id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    let (status, _) = create_policy(
        &t,
        json!({"name": "ask-bash", "tool_pattern": "bash", "action": "ask", "priority": 50}),
    )
    .await;
    assert_eq!(status, 201);

    // Read and write credentials are refused on every admin route.
    let write = user_token("write");
    for token in [READ, write.as_str()] {
        for (method, path, body) in [
            (
                reqwest::Method::GET,
                "/v1/api/admin/policies".to_string(),
                None,
            ),
            (
                reqwest::Method::POST,
                "/v1/api/admin/policies".to_string(),
                Some(json!({"name": "x", "tool_pattern": "*", "action": "allow"})),
            ),
            (
                reqwest::Method::PUT,
                format!("/v1/api/admin/policies/{id}"),
                Some(json!({"action": "allow"})),
            ),
            (
                reqwest::Method::DELETE,
                format!("/v1/api/admin/policies/{id}"),
                None,
            ),
            (
                reqwest::Method::GET,
                "/v1/api/admin/verdicts".to_string(),
                None,
            ),
        ] {
            let (status, body) = call(&t, method.clone(), &path, token, body).await;
            assert_eq!(status, 403, "{method} {path}: {body}");
        }
    }

    // Bad input is a 400 that says what is wrong; nothing is created.
    for (body, expected) in [
        (
            json!({"tool_pattern": "*", "action": "deny"}),
            "name, tool_pattern and action are required",
        ),
        (
            json!({"name": "n", "tool_pattern": "*", "action": "block"}),
            "action must be",
        ),
        (
            json!({"name": "n", "tool_pattern": " ", "action": "deny"}),
            "tool_pattern must not be empty",
        ),
        (
            json!({"name": "n", "tool_pattern": "*", "action": "deny", "priority": 5_000_000}),
            "priority must be between",
        ),
        (
            json!({"name": "n", "tool_pattern": "*", "action": "deny", "priority": i64::MIN}),
            "priority must be between",
        ),
        (
            json!({"name": "n", "tool_pattern": "*", "action": "deny", "priority": "high"}),
            "priority",
        ),
        (
            json!({"name": "n", "tool_pattern": "*", "action": "deny", "colour": "red"}),
            "colour",
        ),
    ] {
        let (status, reply) = create_policy(&t, body.clone()).await;
        assert_eq!(status, 400, "{body}: {reply}");
        let message = reply["error"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{body}: {message}");
    }

    // Listed highest priority first.
    let (status, list) = admin(&t, reqwest::Method::GET, "/v1/api/admin/policies", None).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ask-bash", "no-mcp"]);

    // Update: the given fields only; unknown ids are 404, bad values 400.
    let path = format!("/v1/api/admin/policies/{id}");
    let (status, row) = admin(
        &t,
        reqwest::Method::PUT,
        &path,
        Some(json!({"action": "allow", "priority": 99})),
    )
    .await;
    assert_eq!(status, 200, "{row}");
    assert_eq!(
        (
            row["action"].as_str(),
            row["priority"].as_i64(),
            row["name"].as_str()
        ),
        (Some("allow"), Some(99), Some("no-mcp"))
    );
    let (status, reply) = admin(
        &t,
        reqwest::Method::PUT,
        &path,
        Some(json!({"action": "nope"})),
    )
    .await;
    assert_eq!(status, 400, "{reply}");
    let (status, _) = admin(
        &t,
        reqwest::Method::PUT,
        "/v1/api/admin/policies/missing",
        Some(json!({"enabled": false})),
    )
    .await;
    assert_eq!(status, 404);
    // Config-file policies are read-only here.
    let (status, _) = admin(
        &t,
        reqwest::Method::DELETE,
        "/v1/api/admin/policies/config:x",
        None,
    )
    .await;
    assert_eq!(status, 403);

    // Delete, then it is gone.
    let (status, reply) = admin(&t, reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply, json!({"status": "ok", "policy_id": id}));
    let (status, _) = admin(&t, reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_stored_deny_policy_blocks_turns_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let assert_blocked = |events: &[SseEvent]| {
        assert!(
            !kinds(events).contains(&"approve_request"),
            "{:?}",
            kinds(events)
        );
        let info = events
            .iter()
            .find(|e| e.kind() == "tool_info")
            .expect("tool_info");
        assert_eq!(info.data["items"][0]["error"], BASH_BLOCKED);
        let result = events
            .iter()
            .find(|e| e.kind() == "tool_result")
            .expect("tool_result");
        assert_eq!(result.data["output"], BASH_BLOCKED);
        assert_eq!(result.data["is_error"], true);
    };
    {
        let t = policy_node(&db).await;
        let mut events = t
            .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
            .await;
        // Before the policy: asked.
        send_until(
            &t,
            &mut events,
            &t.default_ws,
            "TOOL: echo first",
            "approve_request",
        )
        .await;
        t.post(
            "/v1/api/approve",
            json!({"ws_id": t.default_ws, "approved": false}),
        )
        .await;
        events.until("turn_complete").await;

        let (status, _) = create_policy(
            &t,
            json!({"name": "no-bash", "tool_pattern": "bash", "action": "deny"}),
        )
        .await;
        assert_eq!(status, 201);
        let marker = t.cwd().join("ran");
        let events = send_until(
            &t,
            &mut events,
            &t.default_ws,
            &format!("TOOL: touch {}", marker.display()),
            "turn_complete",
        )
        .await;
        assert_blocked(&events);
        assert!(!marker.exists());
    }
    let t = policy_node(&db).await;
    let (_, list) = admin(&t, reqwest::Method::GET, "/v1/api/admin/policies", None).await;
    assert_eq!(list["policies"][0]["name"], "no-bash");
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    let events = send_until(
        &t,
        &mut events,
        &t.default_ws,
        "TOOL: echo after restart",
        "turn_complete",
    )
    .await;
    assert_blocked(&events);
}

#[tokio::test]
async fn approve_request_items_carry_verdicts_that_are_recorded_with_the_decision() {
    let dir = tempfile::tempdir().unwrap();
    let t = policy_node(&dir.path().join("p.db")).await;
    let ws = t.default_ws.clone();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    // `rm -rf /` itself is refused by the bash tool before any approval; this is critical too.
    let seen = send_until(
        &t,
        &mut events,
        &ws,
        "TOOL: sudo rm -rf /etc\nTOOL: ls",
        "approve_request",
    )
    .await;
    let request = seen.last().unwrap();
    assert_eq!(request.data["judge_pending"], false);
    let items = request.data["items"].as_array().unwrap();
    assert_eq!(items[0]["verdict"]["risk_level"], "critical");
    assert_eq!(items[0]["verdict"]["recommendation"], "deny");
    assert_eq!(items[1]["verdict"]["risk_level"], "low");
    for item in items {
        let v = &item["verdict"];
        assert_eq!(v["tier"], "heuristic");
        assert_eq!(v["call_id"], item["call_id"]);
        assert!(
            v["func_args"].is_string(),
            "func_args is a JSON string: {v}"
        );
        assert!(v["evidence"].is_array());
    }
    let (status, _) = t
        .post("/v1/api/approve", json!({"ws_id": ws, "approved": false}))
        .await;
    assert_eq!(status, 200);
    events.until("turn_complete").await;

    // Recorded (by a task following the event log) with the human's decision.
    let path = format!("/v1/api/admin/verdicts?ws_id={ws}");
    turnstone_testkit::assert_eventually!(
        {
            let (_, list) = admin(&t, reqwest::Method::GET, &path, None).await;
            list["verdicts"]
                .as_array()
                .is_some_and(|v| v.len() == 2 && v.iter().all(|r| r["user_decision"] == "denied"))
        },
        "verdicts not recorded with the decision"
    );
    let (_, list) = admin(
        &t,
        reqwest::Method::GET,
        &format!("{path}&risk_level=critical"),
        None,
    )
    .await;
    let rows = list["verdicts"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["verdict_id"], items[0]["verdict"]["verdict_id"]);
    for (query, expected) in [
        ("limit=0", "limit must be between"),
        ("limit=x", "limit must be a non-negative integer"),
        ("risk_level=severe", "risk_level must be"),
        ("colour=red", "unknown query parameter"),
    ] {
        let (status, reply) = admin(
            &t,
            reqwest::Method::GET,
            &format!("/v1/api/admin/verdicts?{query}"),
            None,
        )
        .await;
        assert_eq!(status, 400, "{query}: {reply}");
        assert!(
            reply["error"]
                .as_str()
                .unwrap_or_default()
                .contains(expected),
            "{query}: {reply}"
        );
    }
}

#[tokio::test]
async fn postures_are_set_at_creation_and_by_route_and_full_needs_approve() {
    let dir = tempfile::tempdir().unwrap();
    let t = policy_node(&dir.path().join("p.db")).await;
    let write = user_token("write");
    let create = |token: String, posture: &'static str| {
        let t = &t;
        async move {
            call(
                t,
                reqwest::Method::POST,
                "/v1/api/workstreams/new",
                &token,
                Some(json!({"name": posture, "posture": posture})),
            )
            .await
        }
    };
    // Anyone who may create may ask for `ask` or `auto-review`; `full` needs approve.
    let (status, reply) = create(write.clone(), "full").await;
    assert_eq!(status, 403, "{reply}");
    assert!(
        reply["error"].as_str().unwrap().contains("approve"),
        "{reply}"
    );
    let (status, reply) = create(write.clone(), "yolo").await;
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["error"].as_str().unwrap().contains("posture must be"),
        "{reply}"
    );
    let (status, reply) = create(write.clone(), "auto-review").await;
    assert_eq!(status, 200, "{reply}");
    let ws = reply["ws_id"].as_str().unwrap().to_string();
    assert_eq!(
        t.node.workstream(&ws).unwrap().posture().as_str(),
        "auto-review"
    );

    // Auto-review: `ls` runs unasked, a critical command is asked about.
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let connected = events.next().await;
    assert_eq!(connected.kind(), "connected");
    assert_eq!(connected.data["posture"], "auto-review");
    let turn = send_until(&t, &mut events, &ws, "TOOL: ls", "turn_complete").await;
    assert!(
        !kinds(&turn).contains(&"approve_request"),
        "{:?}",
        kinds(&turn)
    );
    assert!(kinds(&turn).contains(&"tool_result"));
    send_until(
        &t,
        &mut events,
        &ws,
        "TOOL: sudo rm -rf /etc",
        "approve_request",
    )
    .await;
    t.post("/v1/api/approve", json!({"ws_id": ws, "approved": false}))
        .await;
    events.until("turn_complete").await;

    // The route: write may switch between ask and auto-review, only approve to full.
    let path = format!("/v1/api/workstreams/{ws}/posture");
    let (status, reply) = call(
        &t,
        reqwest::Method::POST,
        &path,
        &write,
        Some(json!({"posture": "ask"})),
    )
    .await;
    assert_eq!(
        (status, reply),
        (200, json!({"ws_id": ws, "posture": "ask"}))
    );
    let (status, _) = call(
        &t,
        reqwest::Method::POST,
        &path,
        &write,
        Some(json!({"posture": "full"})),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = call(
        &t,
        reqwest::Method::POST,
        &path,
        READ,
        Some(json!({"posture": "ask"})),
    )
    .await;
    assert_eq!(status, 403);
    let (status, reply) = call(
        &t,
        reqwest::Method::POST,
        &path,
        FULL,
        Some(json!({"posture": "sideways"})),
    )
    .await;
    assert_eq!(status, 400, "{reply}");
    let (status, _) = call(
        &t,
        reqwest::Method::POST,
        "/v1/api/workstreams/nope/posture",
        FULL,
        Some(json!({"posture": "ask"})),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = call(
        &t,
        reqwest::Method::POST,
        &path,
        FULL,
        Some(json!({"posture": "full"})),
    )
    .await;
    assert_eq!(status, 200);
    let turn = send_until(
        &t,
        &mut events,
        &ws,
        "TOOL: echo everything",
        "turn_complete",
    )
    .await;
    assert!(
        !kinds(&turn).contains(&"approve_request"),
        "{:?}",
        kinds(&turn)
    );
}

#[tokio::test]
async fn a_posture_survives_a_restart_and_a_resume_but_full_is_asked_for_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let mut ids = Vec::new();
    {
        let t = policy_node(&db).await;
        for posture in ["auto-review", "full"] {
            let (status, reply) = t
                .post(
                    "/v1/api/workstreams/new",
                    json!({"name": posture, "posture": posture}),
                )
                .await;
            assert_eq!(status, 200, "{reply}");
            let ws = reply["ws_id"].as_str().unwrap().to_string();
            // A stored turn; its durability covers the setting written before it.
            let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
            send_until(&t, &mut events, &ws, "hello", "turn_complete").await;
            ids.push(ws);
        }
        // Changed by route, stored too.
        let (status, _) = t
            .post(
                &format!("/v1/api/workstreams/{}/posture", ids[0]),
                json!({"posture": "auto-review"}),
            )
            .await;
        assert_eq!(status, 200);
    }
    let t = policy_node(&db).await;
    let posture_of = |ws: &str| t.node.workstream(ws).unwrap().posture().as_str();
    for ws in &ids {
        let (status, reply) = t
            .post("/v1/api/workstreams/new", json!({"resume_ws": ws}))
            .await;
        assert_eq!(status, 200, "{reply}");
    }
    assert_eq!(posture_of(&ids[0]), "auto-review", "restored on resume");
    assert_eq!(
        posture_of(&ids[1]),
        "ask",
        "a stored full posture does not switch approvals off for whoever resumes"
    );
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", ids[0]), None)
        .await;
    let connected = events.next().await;
    assert_eq!(connected.data["posture"], "auto-review");
    // Auto-review decides again after the restart: `ls` runs unasked.
    let turn = send_until(&t, &mut events, &ids[0], "TOOL: ls", "turn_complete").await;
    assert!(
        !kinds(&turn).contains(&"approve_request"),
        "{:?}",
        kinds(&turn)
    );
}
