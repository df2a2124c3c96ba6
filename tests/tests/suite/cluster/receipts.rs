//! Effect receipts across real processes: a node SIGKILLed while a command runs resumes the
//! workstream with an `unknown` receipt the model reads, and a queue producer sees the
//! receipts of a denied batch on `turn_complete` through a real bridge.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use turnstone_testkit::FakeLlm;

use super::harness::*;

/// The `history` event a fresh per-workstream stream starts with.
async fn history(node: &NodeProc, ws_id: &str) -> Value {
    let resp = node
        .http
        .get(format!("{}/v1/api/events?ws_id={ws_id}", node.url))
        .bearer_auth(mint_token())
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let mut stream = resp.bytes_stream();
    let mut buf = String::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("no history event")
            .expect("stream ended")
            .unwrap();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        for (_, v) in take_sse_frames(&mut buf) {
            if v["type"] == "history" {
                return v;
            }
        }
    }
}

/// Waits until the node-wide stream holds a `turn_complete` of `correlation_id`.
async fn turn_complete(node: &NodeProc, correlation_id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(done) = node
            .node_events()
            .await
            .into_iter()
            .find(|v| v["type"] == "turn_complete" && v["correlation_id"] == correlation_id)
        {
            return done;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "turn {correlation_id} did not complete"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A node on the fake model, and a new workstream on it.
async fn node_on(llm: &FakeLlm, node_id: &str) -> (NodeProc, String) {
    let node = NodeProc::start_full(
        node_id,
        Vec::new(),
        vec![
            "--base-url".into(),
            llm.base_url(),
            "--model".into(),
            "fake-model".into(),
        ],
    )
    .await;
    let (status, body) = node.post("/v1/api/workstreams/new", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let ws = body["ws_id"].as_str().unwrap().to_string();
    (node, ws)
}

/// Restarts a SIGKILLed node and resumes `ws_id`; returns the resumed history's tool entries.
async fn restart_and_resume(node: &mut NodeProc, ws_id: &str) -> Vec<Value> {
    node.spawn().await;
    let (status, body) = node
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["resumed"], true, "{body}");
    let replay = history(node, ws_id).await;
    replay["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_node_killed_while_awaiting_approval_resumes_with_a_none_receipt() {
    let llm = FakeLlm::start().await;
    let (mut node, ws) = node_on(&llm, "receipt-ask").await;
    let marker = node.dir.path().join("never");
    let (status, reply) = node
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": format!("TOOL: touch {}", marker.display())}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    eventually("the approval is asked", Duration::from_secs(20), || {
        let node = &node;
        async move {
            node.node_events()
                .await
                .iter()
                .any(|v| v["type"] == "approve_request")
        }
    })
    .await;
    node.kill9();
    // The batch's durable marker says nothing started: `none`, not the cautious `unknown`.
    let tools = restart_and_resume(&mut node, &ws).await;
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["receipt"], "none", "{tools:?}");
    assert!(
        tools[0]["content"]
            .as_str()
            .is_some_and(|c| c.ends_with("Effect: none \u{2014} it never started.")),
        "{tools:?}"
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_node_killed_while_a_command_runs_resumes_with_an_unknown_receipt() {
    let llm = FakeLlm::start().await;
    let (mut node, ws) = node_on(&llm, "receipt-kill").await;
    let pidfile = node.dir.path().join("pid");
    let command = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let (status, reply) = node
        .post_as(
            &approver_token(),
            "/v1/api/send",
            json!({"ws_id": ws, "message": format!("TOOL: {command}"), "auto_approve": true,
                   "correlation_id": "5e1f00000001"}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    eventually("the command runs", Duration::from_secs(20), || {
        let ready = std::fs::read_to_string(&pidfile).is_ok_and(|p| !p.trim().is_empty());
        async move { ready }
    })
    .await;
    let sleeper = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();

    node.kill9();
    // The orphaned `sleep` is not part of the test.
    let _ = std::process::Command::new("kill")
        .args(["-9", &sleeper])
        .status();
    // Closed with a receipt, not dropped: the call, then its `unknown` result.
    let tools = restart_and_resume(&mut node, &ws).await;
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["receipt"], "unknown", "{tools:?}");
    let text = tools[0]["content"].as_str().unwrap();
    assert!(
        text.contains("the node stopped") && text.contains("Effect: unknown"),
        "{text}"
    );
    let replay = history(&node, &ws).await;
    assert!(
        replay["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["tool_calls"][0]["arguments"]
                .as_str()
                .is_some_and(|a| a.contains("exec sleep 30"))),
        "the interrupted call stays in the history: {replay}"
    );

    // The next turn's request tells the model the truth.
    let (status, reply) = node
        .post_as(
            &approver_token(),
            "/v1/api/send",
            json!({"ws_id": ws, "message": "what happened?", "correlation_id": "5e1f00000002"}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    turn_complete(&node, "5e1f00000002").await;
    let request = llm.requests().last().cloned().unwrap();
    let sent: Vec<&Value> = request["messages"].as_array().unwrap().iter().collect();
    let answered = sent
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("no tool message sent: {request}"));
    let content = answered["content"].as_str().unwrap();
    assert!(content.contains("Effect: unknown"), "{content}");
    assert_eq!(
        sent.last().unwrap()["content"],
        "what happened?",
        "{request}"
    );

    // A second restart tells the same story (the marker stays with the stored batch).
    node.restart().await;
    let (status, _) = node
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws}))
        .await;
    assert_eq!(status, 200);
    let replay = history(&node, &ws).await;
    let receipts: Vec<&Value> = replay["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| &m["receipt"])
        .collect();
    assert_eq!(receipts, [&json!("unknown")], "{replay}");
}

#[tokio::test]
async fn a_partial_receipt_of_a_cancel_survives_a_restart_and_a_resume() {
    let llm = FakeLlm::start().await;
    let (mut node, ws) = node_on(&llm, "receipt-cancel").await;
    let (status, reply) = node
        .post_as(
            &approver_token(),
            "/v1/api/send",
            json!({"ws_id": ws, "message": "TOOL: echo working; sleep 30", "auto_approve": true,
                   "correlation_id": "5e1f00000003"}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    eventually("the command prints", Duration::from_secs(20), || {
        let node = &node;
        async move {
            node.node_events()
                .await
                .iter()
                .any(|v| v["type"] == "tool_output_chunk")
        }
    })
    .await;
    let (status, reply) = node.post("/v1/api/cancel", json!({"ws_id": ws})).await;
    assert_eq!(status, 200, "{reply}");
    let done = turn_complete(&node, "5e1f00000003").await;
    assert_eq!(done["receipts"][0]["status"], "partial", "{done}");
    assert_eq!(done["receipts"][0]["func_name"], "bash", "{done}");

    node.kill9();
    let tools = restart_and_resume(&mut node, &ws).await;
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["receipt"], "partial", "{tools:?}");
    assert!(
        tools[0]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Cancelled by user. Effect: partial")),
        "{tools:?}"
    );
}

#[tokio::test]
async fn a_queue_producer_sees_the_receipts_of_a_denied_batch_on_turn_complete() {
    let node = NodeProc::start("receipt-mq").await;
    let mut mq = Mq::shared("receipt").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({"auto_approve": false})).await;
    let ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let mut s = ps.into_on_message();
    let marker = node.dir.path().join("never");
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": format!("TOOL: touch {}", marker.display()),
                "correlation_id": "5e1f0000000a"}),
    )
    .await;
    let request = next_matching(&mut s, "no approval_request", |v| {
        v["type"] == "approval_request"
    })
    .await;
    let rid = request["correlation_id"].as_str().unwrap().to_string();
    let call_id = request["items"][0]["call_id"].as_str().unwrap().to_string();
    mq.push(
        &format!("resp:{rid}"),
        &json!({"type": "approve", "request_id": rid, "approved": false, "feedback": "not that",
                "ws_id": ws}),
    )
    .await;
    let done = next_matching(&mut s, "no turn_complete", |v| v["type"] == "turn_complete").await;
    assert_eq!(done["correlation_id"], "5e1f0000000a");
    assert_eq!(
        done["receipts"],
        json!([{"call_id": call_id, "func_name": "bash", "status": "none"}]),
        "{done}"
    );
    assert!(!marker.exists());
    // The stream keeps it for late consumers, and the typed client decodes it.
    let stored = mq
        .stream(&ws)
        .await
        .into_iter()
        .find(|e| e["type"] == "turn_complete")
        .unwrap();
    assert_eq!(stored["receipts"], done["receipts"]);
    let typed = turnstone_proto::mq::OutboundEvent::decode(stored.to_string().as_bytes()).unwrap();
    match typed {
        turnstone_proto::mq::OutboundEvent::TurnComplete(t) => assert_eq!(
            t.body.receipts[0].status,
            turnstone_proto::receipt::EffectStatus::None
        ),
        other => panic!("{other:?}"),
    }
    mq.cleanup().await;
}
