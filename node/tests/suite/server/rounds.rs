//! Parallel approval rounds over HTTP (seed 000 "Phase 2"): two sub-agents wait at once on
//! one workstream, each round is listed, replayed and decided by its own id.

use serde_json::{Value, json};

use super::*;

fn delegate(prompt: &str) -> String {
    format!("CALL:task_agent {}", json!({ "prompt": prompt }))
}

async fn approve(t: &TestNode, body: Value) -> (u16, Value) {
    t.post("/v1/api/approve", body).await
}

#[tokio::test]
async fn two_sub_agents_wait_at_once_and_each_round_is_decided_by_its_own_id() {
    let t = TestNode::start().await;
    two_rounds_decided(&t).await;
}

#[tokio::test]
async fn each_round_has_its_own_durable_record() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestNode::start_persistent(&dir.path().join("node.db")).await;
    let (one, two) = two_rounds_decided(&t).await;
    let p = t.node.persistence.clone().unwrap();
    p.writer.flush().await.unwrap();
    let request = |r: &Value| r["request_id"].as_str().unwrap().to_string();
    // The recorder follows each round by its cycle_id: each request gets its own verdict.
    turnstone_testkit::assert_eventually!(
        p.approval(&request(&one)).await.is_some_and(|r| {
            r.state == turnstone_store::ApprovalState::Approved && r.decided_by == "user"
        }),
        "round one's verdict not recorded"
    );
    turnstone_testkit::assert_eventually!(
        p.approval(&request(&two)).await.is_some_and(|r| {
            r.state == turnstone_store::ApprovalState::Denied && r.feedback == "not two"
        }),
        "round two's verdict not recorded"
    );
    let stored = p.approval(&request(&one)).await.unwrap();
    assert_eq!(stored.payload["cycle_id"], one["cycle_id"]);
}

/// Runs the scenario on `t` and returns the two sub-agents' `approve_request` payloads
/// (the approved one, the denied one).
async fn two_rounds_decided(t: &TestNode) -> (Value, Value) {
    let ws = t.default_ws.clone();
    let path = format!("/v1/api/events?ws_id={ws}");
    let mut events = t.sse(&path, None).await;
    let (one, two) = (t.cwd().join("one.txt"), t.cwd().join("two.txt"));
    let message = format!(
        "{}\n{}",
        delegate(&format!("TOOL: echo one > {}", one.display())),
        delegate(&format!("TOOL: echo two > {}", two.display()))
    );
    t.post("/v1/api/send", json!({"ws_id": ws, "message": message}))
        .await;

    // The parent's own round (the two task_agent calls), approved the original's way: no id.
    let parent = events.until("approve_request").await.pop().unwrap();
    assert_eq!(parent.data["cycle_id"].as_str().unwrap().len(), 16);
    assert_eq!(parent.data["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        approve(t, json!({"ws_id": ws, "approved": true})).await.0,
        200
    );

    // Each sub-agent asks through the parent: two more rounds, pending together.
    let mut rounds = [
        events.until("approve_request").await.pop().unwrap().data,
        events.until("approve_request").await.pop().unwrap().data,
    ];
    rounds.sort_by_key(|r| {
        !r["items"][0]["header"]
            .as_str()
            .unwrap()
            .contains("echo one")
    });
    let cycle = |r: &Value| r["cycle_id"].as_str().unwrap().to_string();
    let call = |r: &Value| r["items"][0]["call_id"].as_str().unwrap().to_string();
    let (round_one, round_two) = (&rounds[0], &rounds[1]);
    assert_ne!(cycle(round_one), cycle(round_two));
    assert_ne!(call(round_one), call(round_two));
    assert!(call(round_one).starts_with("agent-"), "{round_one}");

    // Listed, and replayed to a client that attaches now, both of them.
    let (status, listed) = t.get("/v1/api/approvals", Some(FULL)).await;
    assert_eq!(status, 200);
    let mut listed: Vec<String> = listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ws_id"] == json!(ws) && r["type"] == "approve_request")
        .map(cycle)
        .collect();
    listed.sort();
    let mut expected = vec![cycle(round_one), cycle(round_two)];
    expected.sort();
    assert_eq!(listed, expected);
    let mut late = t.sse(&path, None).await;
    let mut replayed = Vec::new();
    while replayed.len() < 2 {
        let e = late.next().await;
        assert!(
            ["connected", "status", "history", "approve_request"].contains(&e.kind()),
            "{}",
            e.kind()
        );
        if e.kind() == "approve_request" {
            replayed.push(cycle(&e.data));
        }
        if e.kind() == "history" {
            // The parent's task_agent calls are running, not awaiting a decision.
            let calls = e.data["messages"]
                .as_array()
                .unwrap()
                .iter()
                .rfind(|m| m["tool_calls"].is_array())
                .cloned()
                .unwrap();
            assert_eq!(calls["tool_calls"][0]["name"], "task_agent");
            assert!(calls.get("pending").is_none(), "{calls}");
        }
    }
    replayed.sort();
    assert_eq!(replayed, expected);

    // Ids that name no round: 404.
    for wrong in [
        json!({"ws_id": ws, "approved": true, "cycle_id": "ffffffffffffffff"}),
        json!({"ws_id": ws, "approved": true, "call_id": "agent-999/call_7"}),
        json!({"ws_id": ws, "approved": true, "request_id": "ffffffffffff"}),
    ] {
        let (status, body) = approve(t, wrong.clone()).await;
        assert_eq!(status, 404, "{wrong}: {body}");
        assert_eq!(body["error"], "Unknown approval");
    }
    assert!(
        !one.exists() && !two.exists(),
        "nothing ran before its decision"
    );

    // One by a member call_id, the other by its cycle_id.
    let by_call = json!({"ws_id": ws, "approved": true, "call_id": call(round_one)});
    assert_eq!(approve(t, by_call.clone()).await.0, 200);
    let by_cycle = json!({"ws_id": ws, "approved": false, "feedback": "not two",
                          "cycle_id": cycle(round_two)});
    assert_eq!(approve(t, by_cycle).await.0, 200);
    // Decided once: a repeat is 409 with the round's verdict.
    let (status, body) = approve(t, by_call).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["verdict"]["cycle_id"], json!(cycle(round_one)));
    assert_eq!(body["verdict"]["approved"], true);
    let (status, body) = approve(
        t,
        json!({"ws_id": ws, "approved": true, "cycle_id": cycle(round_two)}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["verdict"]["feedback"], "not two");

    let rest = events.until("turn_complete").await;
    let resolved: Vec<(bool, String)> = rest
        .iter()
        .filter(|e| e.kind() == "approval_resolved")
        .map(|e| (e.data["approved"] == true, cycle(&e.data)))
        .collect();
    assert_eq!(
        resolved,
        [(true, cycle(round_one)), (false, cycle(round_two))],
        "each resolution names its round"
    );
    assert_eq!(std::fs::read_to_string(&one).unwrap(), "one\n");
    assert!(!two.exists(), "the denied round's call never ran");
    let (_, listed) = t.get("/v1/api/approvals", Some(FULL)).await;
    assert_eq!(listed["approvals"], json!([]));
    (round_one.clone(), round_two.clone())
}
