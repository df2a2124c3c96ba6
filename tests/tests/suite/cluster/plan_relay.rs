//! Plan review through the queue: the node's `plan_review` is published with a request id,
//! and `plan_feedback` replies on `resp:{request_id}` reach `POST /v1/api/plan` through the
//! bridge — a refinement round, then an acceptance — against a real node, bridge and Redis.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use super::harness::*;

async fn next_json(s: &mut (impl futures::Stream<Item = redis::Msg> + Unpin)) -> Value {
    let m = tokio::time::timeout(Duration::from_secs(30), s.next())
        .await
        .expect("no event")
        .unwrap();
    serde_json::from_str(&m.get_payload::<String>().unwrap()).unwrap()
}

async fn until(s: &mut (impl futures::Stream<Item = redis::Msg> + Unpin), kind: &str) -> Value {
    loop {
        let v = next_json(s).await;
        if v["type"] == kind {
            return v;
        }
    }
}

#[tokio::test]
async fn plan_feedback_replies_are_relayed_to_the_node() {
    let node = NodeProc::start("plan-a").await;
    let mut mq = Mq::shared("plan").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({"auto_approve": false})).await;
    let ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let mut s = ps.into_on_message();
    let goal = "Plan the relay check";
    mq.push(
        "inbound",
        &json!({
            "type": "send",
            "ws_id": ws,
            "message": format!("CALL:plan_agent {}", json!({"goal": goal})),
            "correlation_id": "b22222222222",
        }),
    )
    .await;
    // The plan_agent call needs approval first.
    let request = until(&mut s, "approval_request").await;
    assert_eq!(request["items"][0]["func_name"], "plan_agent");
    let rid = request["correlation_id"].as_str().unwrap().to_string();
    mq.push(
        &format!("resp:{rid}"),
        &json!({"type": "approve", "request_id": rid, "approved": true, "ws_id": ws}),
    )
    .await;

    let review = until(&mut s, "plan_review").await;
    assert_eq!(review["content"], goal);
    let first = review["correlation_id"].as_str().unwrap().to_string();
    assert!(!first.is_empty(), "the review carries its request id");
    mq.push(
        &format!("resp:{first}"),
        &json!({"type": "plan_feedback", "request_id": first, "feedback": "add a dry run", "ws_id": ws}),
    )
    .await;

    // The feedback reached the node: the planner ran again and a new review is shown.
    let revised = until(&mut s, "plan_review").await;
    let second = revised["correlation_id"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    assert!(
        revised["content"]
            .as_str()
            .unwrap()
            .contains("add a dry run"),
        "{revised}"
    );
    mq.push(
        &format!("resp:{second}"),
        &json!({"type": "plan_feedback", "request_id": second, "feedback": "", "ws_id": ws}),
    )
    .await;
    let mut output = None;
    loop {
        let v = next_json(&mut s).await;
        if v["type"] == "tool_result" {
            output = Some(v["output"].as_str().unwrap().to_string());
        }
        if v["type"] == "turn_complete" {
            assert_eq!(v["correlation_id"], "b22222222222");
            break;
        }
    }
    let output = output.expect("the plan_agent result");
    assert!(output.contains("[Plan saved to "), "{output}");
    let saved = node.dir.path().join(format!(".plan-{ws}.md"));
    assert!(
        std::fs::read_to_string(&saved)
            .unwrap()
            .contains("add a dry run"),
        "the revised plan is saved"
    );
    mq.cleanup().await;
}
