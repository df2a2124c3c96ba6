//! Plan review over HTTP: `plan_agent` runs its planner against the fake model, the node
//! shows the plan as `plan_review`, `POST /v1/api/plan` decides it once, attaching clients
//! get it replayed, `GET /v1/api/approvals` lists it, `/v1/api/cancel` rejects it, and the
//! durable record (real SQLite) keeps every round's verdict.

use serde_json::{Value, json};

use super::*;

fn plan_call(goal: &str) -> String {
    format!("CALL:plan_agent {}", json!({ "goal": goal }))
}

/// Sends a `plan_agent` call on the default workstream, approves the call and returns the
/// first `plan_review` event.
async fn start_review(t: &TestNode, events: &mut SseClient, goal: &str) -> SseEvent {
    let (status, _) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": plan_call(goal)}),
        )
        .await;
    assert_eq!(status, 200);
    let request = events.until("approve_request").await.pop().unwrap();
    assert_eq!(request.data["items"][0]["func_name"], "plan_agent");
    t.post(
        "/v1/api/approve",
        json!({"ws_id": t.default_ws, "approved": true}),
    )
    .await;
    events.until("plan_review").await.pop().unwrap()
}

async fn pending_rows(t: &TestNode) -> Vec<Value> {
    let (status, body) = t.get("/v1/api/approvals", Some(FULL)).await;
    assert_eq!(status, 200);
    body["approvals"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_plan_review_is_listed_decided_once_and_the_plan_saved() {
    let t = TestNode::start().await;
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    let goal = "Move the config loader behind a trait";
    let review = start_review(&t, &mut events, goal).await;
    assert_eq!(review.data["content"], goal);
    let request_id = review.data["request_id"].as_str().unwrap().to_string();
    assert!(!request_id.is_empty());
    let (_, listed) = t.get("/v1/api/workstreams", Some(FULL)).await;
    assert_eq!(listed["workstreams"][0]["state"], "attention");

    // Listed for the bridge: the plan_review event with ws_id.
    let rows = pending_rows(&t).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["type"], "plan_review");
    assert_eq!(rows[0]["ws_id"], t.default_ws.as_str());
    assert_eq!(rows[0]["request_id"], request_id.as_str());
    assert_eq!(rows[0]["content"], goal);

    // Write scope: a read token may not answer.
    let body = json!({"ws_id": t.default_ws, "feedback": ""}).to_string();
    let (status, _) = t.post_raw("/v1/api/plan", body, READ).await;
    assert_eq!(status, 403);

    let (status, body) = t
        .post(
            "/v1/api/plan",
            json!({"ws_id": t.default_ws, "feedback": ""}),
        )
        .await;
    assert_eq!((status, body), (200, json!({"status": "ok"})));
    let (status, body) = t
        .post(
            "/v1/api/plan",
            json!({"ws_id": t.default_ws, "feedback": "no"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["verdict"]["decision"], "accept");
    assert_eq!(body["verdict"]["decided_by"], "user");
    assert_eq!(body["verdict"]["request_id"], request_id.as_str());

    let rest = events.until("turn_complete").await;
    let resolved: Vec<&SseEvent> = rest
        .iter()
        .filter(|e| e.kind() == "plan_resolved")
        .collect();
    assert_eq!(resolved.len(), 1, "{:?}", kinds(&rest));
    assert_eq!(resolved[0].data["decision"], "accept");
    let result = rest.iter().find(|e| e.kind() == "tool_result").unwrap();
    let path = t.cwd().join(format!(".plan-{}.md", t.default_ws));
    assert!(
        result.data["output"]
            .as_str()
            .unwrap()
            .ends_with(&format!("[Plan saved to {}]", path.display())),
        "{}",
        result.data
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{goal}\n"));
    assert!(pending_rows(&t).await.is_empty());
}

#[tokio::test]
async fn attaching_replays_the_pending_plan_review_after_the_preamble() {
    let t = TestNode::start().await;
    let path = format!("/v1/api/events?ws_id={}", t.default_ws);
    let mut first = t.sse(&path, None).await;
    let review = start_review(&t, &mut first, "Plan the cache layer").await;

    let mut late = t.sse(&path, None).await;
    let preamble = vec![
        late.next().await,
        late.next().await,
        late.next().await,
        late.next().await,
    ];
    assert_eq!(
        kinds(&preamble),
        ["connected", "status", "history", "plan_review"]
    );
    assert_eq!(preamble[3].data, review.data, "the same review, replayed");
    let history = preamble[2].data["messages"].as_array().unwrap();
    assert_eq!(history[1]["tool_calls"][0]["name"], "plan_agent");
    assert_eq!(history[1]["pending"], true, "the call waits for the review");

    // Rejected from the late client; both see the end of the turn.
    let (status, _) = t
        .post(
            "/v1/api/plan",
            json!({"ws_id": t.default_ws, "feedback": "reject"}),
        )
        .await;
    assert_eq!(status, 200);
    for client in [&mut first, &mut late] {
        let rest = client.until("turn_complete").await;
        let result = rest.iter().find(|e| e.kind() == "tool_result").unwrap();
        assert!(
            result.data["output"]
                .as_str()
                .unwrap()
                .contains("The user rejected this plan"),
            "{}",
            result.data
        );
    }
    assert!(!t.cwd().join(format!(".plan-{}.md", t.default_ws)).exists());
}

#[tokio::test]
async fn cancel_rejects_a_pending_plan_review() {
    let t = TestNode::start().await;
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    start_review(&t, &mut events, "Plan a rename").await;
    let (status, _) = t
        .post("/v1/api/cancel", json!({"ws_id": t.default_ws}))
        .await;
    assert_eq!(status, 200);
    let rest = events.until("turn_complete").await;
    let resolved = rest.iter().find(|e| e.kind() == "plan_resolved").unwrap();
    assert_eq!(resolved.data["decision"], "reject");
    assert_eq!(resolved.data["decided_by"], "cancel");
    assert!(kinds(&rest).contains(&"cancelled"));
    assert!(pending_rows(&t).await.is_empty());
    // A late answer is told the recorded verdict.
    let (status, body) = t
        .post(
            "/v1/api/plan",
            json!({"ws_id": t.default_ws, "feedback": ""}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["verdict"]["decided_by"], "cancel");
}

#[tokio::test]
async fn plan_bodies_are_checked_and_nothing_pending_is_ok() {
    let t = TestNode::start().await;
    let (status, body) = t
        .post("/v1/api/plan", json!({"ws_id": "nope", "feedback": ""}))
        .await;
    assert_eq!(
        (status, body),
        (404, json!({"error": "Unknown workstream"}))
    );
    let (status, body) = t
        .post(
            "/v1/api/plan",
            json!({"ws_id": t.default_ws, "feedback": 5}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("feedback"),
        "{body}"
    );
    let (status, body) = t
        .post(
            "/v1/api/plan",
            json!({"ws_id": t.default_ws, "feedback": "", "request_id": [1]}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    // Nothing was ever reviewed: ok, as the original.
    let (status, body) = t
        .post(
            "/v1/api/plan",
            json!({"ws_id": t.default_ws, "feedback": ""}),
        )
        .await;
    assert_eq!((status, body), (200, json!({"status": "ok"})));
    assert_eq!(t.llm.request_count(), 0);
}

#[tokio::test]
async fn every_review_round_is_recorded_durably() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestNode::start_persistent(&dir.path().join("node.db")).await;
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    let goal = "Plan the storage migration";
    let first = start_review(&t, &mut events, goal).await;
    let first_id = first.data["request_id"].as_str().unwrap().to_string();
    t.post(
        "/v1/api/plan",
        json!({"ws_id": t.default_ws, "feedback": "add a backup step", "request_id": first_id}),
    )
    .await;
    let second = events.until("plan_review").await.pop().unwrap();
    let second_id = second.data["request_id"].as_str().unwrap().to_string();
    assert_ne!(first_id, second_id, "each round is its own review");
    assert!(
        second.data["content"]
            .as_str()
            .unwrap()
            .contains("add a backup step")
    );
    let p = t.node.persistence.clone().unwrap();
    turnstone_testkit::assert_eventually!(
        p.approval(&first_id)
            .await
            .is_some_and(|r| r.state == turnstone_store::ApprovalState::Denied),
        "the refinement verdict is not recorded"
    );
    let record = p.approval(&first_id).await.unwrap();
    assert_eq!(record.verdict, "refine");
    assert_eq!(record.feedback, "add a backup step");
    assert_eq!(record.decided_by, "user");
    assert_eq!(record.payload["type"], "plan_review");
    assert_eq!(record.payload["content"], goal);
    turnstone_testkit::assert_eventually!(
        p.approval(&second_id).await.is_some(),
        "the second review is not recorded"
    );

    // A reply naming the first (decided) round is answered from the record, and does not
    // touch the pending second one.
    let (status, body) = t
        .post(
            "/v1/api/plan",
            json!({"ws_id": t.default_ws, "feedback": "", "request_id": first_id}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["verdict"]["decision"], "refine");
    assert_eq!(body["verdict"]["state"], "denied");
    assert_eq!(
        pending_rows(&t).await.len(),
        1,
        "the second round still waits"
    );

    let (status, _) = t
        .post(
            "/v1/api/plan",
            json!({"ws_id": t.default_ws, "feedback": "", "request_id": second_id}),
        )
        .await;
    assert_eq!(status, 200);
    events.until("turn_complete").await;
    turnstone_testkit::assert_eventually!(
        p.approval(&second_id).await.is_some_and(|r| r.state
            == turnstone_store::ApprovalState::Approved
            && r.verdict == "accept"),
        "the acceptance is not recorded"
    );
}
