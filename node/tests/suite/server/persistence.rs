use serde_json::json;

use super::*;

#[tokio::test]
async fn conversations_and_verdicts_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");

    // First life: a text turn and an approved tool call, then the node stops.
    let (ws_id, request_id, seen_history) = {
        let t = TestNode::start_persistent(&db).await;
        let mut events = t
            .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
            .await;
        t.post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": "remember me"}),
        )
        .await;
        events.until("turn_complete").await;
        t.post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": "TOOL: echo persisted"}),
        )
        .await;
        let request = events.until("approve_request").await.pop().unwrap();
        let request_id = request.data["request_id"].as_str().unwrap().to_string();
        t.post(
            "/v1/api/approve",
            json!({"ws_id": t.default_ws, "approved": true}),
        )
        .await;
        events.until("turn_complete").await;
        let (_, _) = t
            .post(
                "/v1/api/command",
                json!({"ws_id": t.default_ws, "command": "/name keeper"}),
            )
            .await;
        let history = t.node.workstream(&t.default_ws).unwrap().history();
        let p = t.node.persistence.clone().unwrap();
        p.writer.flush().await.unwrap();
        // The verdict is recorded by a task following the event log.
        turnstone_testkit::assert_eventually!(
            p.approval(&request_id)
                .await
                .is_some_and(|r| r.state == turnstone_store::ApprovalState::Approved),
            "verdict not recorded"
        );
        turnstone_testkit::assert_eventually!(
            p.store
                .get_workstream(&t.default_ws)
                .await
                .unwrap()
                .is_some_and(|w| w.alias.as_deref() == Some("keeper")),
            "alias not recorded"
        );
        (t.default_ws.clone(), request_id, history)
    };

    // Second life on the same file.
    let t = TestNode::start_persistent(&db).await;
    let (status, saved) = t.get("/v1/api/workstreams/saved", Some(FULL)).await;
    assert_eq!(status, 200);
    let row = saved["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["ws_id"] == json!(ws_id))
        .cloned()
        .expect("the first life's workstream is listed");
    assert_eq!(row["alias"], "keeper");
    assert!(row["message_count"].as_i64().unwrap() >= 5, "{row}");

    let (status, resumed) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": "keeper"}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["ws_id"], json!(ws_id));
    assert_eq!(resumed["resumed"], true);
    let live = t.node.workstream(&ws_id).unwrap();
    assert_eq!(
        live.history(),
        seen_history,
        "the resumed conversation is what the provider saw"
    );

    // A late decision on the old request is answered from the durable record.
    let (status, body) = t
        .post(
            "/v1/api/approve",
            json!({"ws_id": ws_id, "approved": false, "request_id": request_id}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["verdict"]["approved"], true);
    assert_eq!(body["verdict"]["decided_by"], "user");

    // The resumed workstream continues, and the model sees the old context.
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws_id, "message": "and now?"}),
    )
    .await;
    events.until("turn_complete").await;
    let request = t.llm.last_request().unwrap();
    let contents: Vec<String> = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(contents.iter().any(|c| c == "remember me"), "{contents:?}");

    let (status, body) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"resume_ws": "no-such-thing"}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn a_crash_mid_approval_resumes_with_a_none_receipt_for_the_interrupted_call() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let (ws_id, complete_history) = {
        let t = TestNode::start_persistent(&db).await;
        let mut events = t
            .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
            .await;
        // A batch of two parallel calls, approved, then a turn interrupted mid-approval.
        t.post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": "TOOL: echo a\nTOOL: echo b"}),
        )
        .await;
        events.until("approve_request").await;
        t.post(
            "/v1/api/approve",
            json!({"ws_id": t.default_ws, "approved": true}),
        )
        .await;
        events.until("turn_complete").await;
        let complete = t.node.workstream(&t.default_ws).unwrap().history();
        t.post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": "TOOL: echo interrupted"}),
        )
        .await;
        events.until("approve_request").await;
        // The process dies here: what was queued reaches the disk, nothing else happens.
        t.node
            .persistence
            .as_ref()
            .unwrap()
            .writer
            .flush()
            .await
            .unwrap();
        (t.default_ws.clone(), complete)
    };
    assert_eq!(
        complete_history.len(),
        5,
        "user, assistant with 2 calls, 2 results, reply: {complete_history:#?}"
    );

    let t = TestNode::start_persistent(&db).await;
    let (status, _) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200);
    let resumed = t.node.workstream(&ws_id).unwrap().history();
    // The interrupted batch is closed, not dropped: its call is answered with a receipt, and
    // the batch's durable marker says the call never started (it awaited approval).
    let mut expected = complete_history.clone();
    expected.push(turnstone_llm::ChatMessage::user("TOOL: echo interrupted"));
    let call = resumed[6].tool_calls.clone();
    assert_eq!(call.len(), 1, "{resumed:#?}");
    assert!(call[0].arguments.contains("echo interrupted"));
    expected.push(turnstone_llm::ChatMessage::assistant(None, call.clone()));
    expected.push(turnstone_llm::ChatMessage::tool(
        call[0].id.clone(),
        "Interrupted: the node stopped during this tool batch. Effect: none \u{2014} it never \
         started.",
    ));
    assert_eq!(resumed, expected);
}

#[tokio::test]
async fn a_tool_set_intent_is_stored_as_intent_and_restored_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let ws_id = {
        let t = TestNode::start_persistent(&db).await;
        // Bad input: a named error, nothing changes.
        let (status, body) = t
            .post(
                "/v1/api/tools",
                json!({"ws_id": t.default_ws, "intent": {"toolset": "no-such-set"}}),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"].as_str().unwrap().contains("no-such-set"),
            "{body}"
        );
        let (status, _) = t
            .post(
                "/v1/api/tools",
                json!({"ws_id": t.default_ws, "intent": "bash"}),
            )
            .await;
        assert_eq!(status, 400);
        let (status, _) = t
            .post("/v1/api/tools", json!({"ws_id": "nope", "intent": {}}))
            .await;
        assert_eq!(status, 404);
        let (status, body) = t
            .post(
                "/v1/api/tools",
                json!({"ws_id": t.default_ws, "intent": {"disabled": ["bash"]}}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["intent"]["disabled"], json!(["bash"]));
        // Stored as the intent, not as a list of tools.
        let stored = t
            .node
            .persistence
            .clone()
            .unwrap()
            .store
            .load_config(&t.default_ws)
            .await
            .unwrap();
        let intent: Value = serde_json::from_str(&stored["tool_intent"]).unwrap();
        assert_eq!(intent["disabled"], json!(["bash"]));
        assert!(
            !stored["tool_intent"].contains("read_file"),
            "never materialised: {stored:?}"
        );
        // It applies from the next turn: bash is gone from the request's tool array.
        let mut events = t
            .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
            .await;
        t.post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": "hi"}),
        )
        .await;
        events.until("turn_complete").await;
        let (_, tools) = t
            .get(&format!("/v1/api/tools?ws_id={}", t.default_ws), Some(FULL))
            .await;
        let names: Vec<&str> = tools["prepared"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(
            !names.contains(&"bash") && names.contains(&"read_file"),
            "{names:?}"
        );
        t.flush_store().await;
        t.default_ws.clone()
    };
    let t = TestNode::start_persistent(&db).await;
    let (status, body) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200, "{body}");
    let ws = t.node.workstream(&ws_id).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&ws.tool_intent().to_json()).unwrap()["disabled"],
        json!(["bash"])
    );
}

/// A repeated send (same `correlation_id`) while the first attempt still waits for its
/// commit is answered only once the message is durable: acknowledging it earlier would lose
/// an acknowledged message if the node died before the commit. The database is held locked
/// by a second connection so the first commit cannot happen yet.
#[tokio::test]
async fn a_repeated_send_is_answered_only_once_the_first_attempt_is_durable() {
    use sqlx::Connection as _;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let t = TestNode::start_persistent(&db).await;
    let mut locker = sqlx::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut locker)
        .await
        .unwrap();
    let body =
        json!({"ws_id": t.default_ws, "message": "only once", "correlation_id": "k-durable"});
    let first = tokio::spawn({
        let (url, body) = (t.base.clone(), body.clone());
        async move { post_json(&url, body).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let repeat = tokio::spawn({
        let (url, body) = (t.base.clone(), body.clone());
        async move { post_json(&url, body).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !first.is_finished() && !repeat.is_finished(),
        "a send was acknowledged while its message could not be committed"
    );
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    let (s1, b1) = first.await.unwrap();
    let (s2, b2) = repeat.await.unwrap();
    assert_eq!((s1, s2), (200, 200), "{b1} {b2}");
    assert_eq!(b2["status"], "ok", "{b2}");
    let p = t.node.persistence.clone().unwrap();
    p.writer.flush().await.unwrap();
    let users = p
        .store
        .load_messages(&t.default_ws)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.role == "user" && m.content.as_deref() == Some("only once"))
        .count();
    assert_eq!(users, 1, "the repeat ran the message again");
}

async fn post_json(url: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/api/send"))
        .bearer_auth(FULL)
        .json(&body)
        .send()
        .await
        .unwrap();
    (
        resp.status().as_u16(),
        resp.json().await.unwrap_or_default(),
    )
}
