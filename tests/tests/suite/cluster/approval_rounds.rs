//! Parallel approval rounds through the bridge: two sub-agents of one workstream wait at
//! once, each round is published with its own `cycle_id` and request, and each reply is
//! relayed from its own response list (the relay is keyed by round, not by workstream).

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

async fn next_request(s: &mut (impl futures::Stream<Item = redis::Msg> + Unpin)) -> Value {
    loop {
        let v = next_json(s).await;
        if v["type"] == "approval_request" {
            return v;
        }
    }
}

fn delegate(prompt: &str) -> String {
    format!("CALL:task_agent {}", json!({ "prompt": prompt }))
}

#[tokio::test]
async fn two_pending_rounds_of_one_workstream_are_relayed_each_from_its_own_list() {
    let node = NodeProc::start("rounds-a").await;
    let mut mq = Mq::shared("rounds").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({"auto_approve": false})).await;
    let ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let mut s = ps.into_on_message();
    let message = format!(
        "{}\n{}",
        delegate("TOOL: echo sub-one"),
        delegate("TOOL: echo sub-two")
    );
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": message, "correlation_id": "b22222222222"}),
    )
    .await;

    // The parent's own round: both task_agent calls.
    let parent = next_request(&mut s).await;
    assert_eq!(parent["items"].as_array().unwrap().len(), 2);
    assert_eq!(parent["cycle_id"].as_str().unwrap().len(), 16, "{parent}");
    let rid = parent["correlation_id"].as_str().unwrap().to_string();
    mq.push(
        &format!("resp:{rid}"),
        &json!({"type": "approve", "request_id": rid, "approved": true}),
    )
    .await;

    // Each sub-agent asks through the workstream: two rounds pending at once.
    let mut rounds = [next_request(&mut s).await, next_request(&mut s).await];
    rounds.sort_by_key(|r| {
        !r["items"][0]["header"]
            .as_str()
            .unwrap()
            .contains("sub-one")
    });
    let (one, two) = (&rounds[0], &rounds[1]);
    assert!(
        two["items"][0]["header"]
            .as_str()
            .unwrap()
            .contains("sub-two")
    );
    assert_ne!(one["cycle_id"], two["cycle_id"]);
    assert_ne!(one["correlation_id"], two["correlation_id"]);
    let rid = |r: &Value| r["correlation_id"].as_str().unwrap().to_string();

    // The later round is answered first: each reply reaches its own round.
    mq.push(
        &format!("resp:{}", rid(two)),
        &json!({"type": "approve", "request_id": rid(two), "approved": false, "feedback": "not two"}),
    )
    .await;
    mq.push(
        &format!("resp:{}", rid(one)),
        &json!({"type": "approve", "request_id": rid(one), "approved": true}),
    )
    .await;
    let mut results = Vec::new();
    loop {
        let v = next_json(&mut s).await;
        if v["type"] == "tool_result" && v["name"] == "task_agent" {
            results.push(v["output"].as_str().unwrap().to_string());
        }
        if v["type"] == "turn_complete" {
            assert_eq!(v["correlation_id"], "b22222222222");
            break;
        }
    }
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results.iter().any(|r| r.contains("done: sub-one")),
        "the approved round ran: {results:?}"
    );
    assert!(
        results
            .iter()
            .any(|r| r.contains("Denied by user: not two")),
        "the denied round got its own feedback: {results:?}"
    );
    let stream = mq.stream(&ws).await;
    let cycles: Vec<&Value> = stream
        .iter()
        .filter(|e| e["type"] == "approval_request")
        .map(|e| &e["cycle_id"])
        .collect();
    assert_eq!(cycles.len(), 3, "one publication per round");
    // Nothing left to relay: the node lists no pending round.
    let pending = node.get("/v1/api/approvals").await;
    assert_eq!(pending["approvals"], json!([]), "{pending}");
    assert!(mq.dead_letters().await.is_empty(), "no reply was refused");
    mq.cleanup().await;
}
