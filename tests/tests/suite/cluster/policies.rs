//! Tool policies on the bridge path: a queue-driven workstream's batches are decided by the
//! node's engine, so a `deny` (stored through the admin route, or read-only from
//! `config.toml` `[[policies]]`) blocks the call without an `approval_request` reaching the
//! queue, and an `allow` runs it unasked — real `turnstone-server` and `turnstone-bridge`
//! processes and real Redis.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use super::harness::*;

async fn next_json(s: &mut (impl futures::Stream<Item = redis::Msg> + Unpin)) -> Value {
    let m = tokio::time::timeout(Duration::from_secs(20), s.next())
        .await
        .expect("no event")
        .unwrap();
    serde_json::from_str(&m.get_payload::<String>().unwrap()).unwrap()
}

/// Sends `message` through the queue and collects the workstream's events through
/// `turn_complete` (an `approval_request` on the way fails the test).
pub(super) async fn queued_turn(
    mq: &mut Mq,
    ws: &str,
    message: &str,
    correlation_id: &str,
) -> Vec<Value> {
    let ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let mut s = ps.into_on_message();
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": message, "correlation_id": correlation_id}),
    )
    .await;
    let mut events = Vec::new();
    loop {
        let v = next_json(&mut s).await;
        assert_ne!(v["type"], "approval_request", "policies decide: {v}");
        let done = v["type"] == "turn_complete";
        events.push(v);
        if done {
            return events;
        }
    }
}

pub(super) fn outputs(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .map(|e| e["output"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn stored_policies_decide_queue_driven_batches() {
    let node = NodeProc::start("pol-a").await;
    let mut mq = Mq::shared("pol").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let (status, body) = node
        .post(
            "/v1/api/admin/policies",
            json!({"name": "no-rm", "tool_pattern": "bash", "action": "deny", "priority": 1}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let ws = mq.create_ws("", json!({"auto_approve": false})).await;
    let marker = node.dir.path().join("ran");
    let events = queued_turn(
        &mut mq,
        &ws,
        &format!("TOOL: touch {}", marker.display()),
        "b10c00000001",
    )
    .await;
    assert_eq!(
        outputs(&events),
        ["Blocked by tool policy (pattern match for 'bash')"]
    );
    assert!(!marker.exists(), "a denied call never runs");
    assert_eq!(events.last().unwrap()["correlation_id"], "b10c00000001");

    // A higher-priority allow lets the same tool run unasked.
    let (status, _) = node
        .post(
            "/v1/api/admin/policies",
            json!({"name": "echo-ok", "tool_pattern": "bash", "action": "allow", "priority": 10}),
        )
        .await;
    assert_eq!(status, 201);
    let events = queued_turn(&mut mq, &ws, "TOOL: echo allowed", "a110e0000001").await;
    assert!(outputs(&events)[0].contains("allowed"), "{events:?}");
    let prompts = mq
        .stream(&ws)
        .await
        .iter()
        .filter(|e| e["type"] == "approval_request")
        .count();
    assert_eq!(prompts, 0, "no approval ever reached the queue");
    mq.cleanup().await;
}

#[tokio::test]
async fn config_file_policies_apply_and_are_read_only() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "[[policies]]\nname = \"no-bash\"\ntool_pattern = \"bash\"\naction = \"deny\"\n",
    )
    .unwrap();
    let node = NodeProc::start_full(
        "pol-cfg",
        Vec::new(),
        vec!["--config".into(), config.path().display().to_string()],
    )
    .await;
    let list = node.get("/v1/api/admin/policies").await;
    assert_eq!(list["policies"][0]["policy_id"], "config:no-bash");
    assert_eq!(list["policies"][0]["source"], "config");
    let r = node
        .http
        .delete(format!("{}/v1/api/admin/policies/config:no-bash", node.url))
        .bearer_auth(node.token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    let mut mq = Mq::shared("polcfg").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({"auto_approve": false})).await;
    let events = queued_turn(&mut mq, &ws, "TOOL: echo no", "cf9000000001").await;
    assert_eq!(
        outputs(&events),
        ["Blocked by tool policy (pattern match for 'bash')"]
    );
    mq.cleanup().await;
}
