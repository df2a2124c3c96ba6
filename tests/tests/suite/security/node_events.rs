//! Reading one workstream's events from a real node (the node-wide stream), for the
//! security tests that drive turns with the built-in scripted model (`CALL:<tool> <json>`).

use std::time::Duration;

use serde_json::{Value, json};

use super::super::cluster::harness::{NodeProc, eventually};

/// Creates a workstream and returns its id.
pub async fn create_ws(node: &NodeProc, name: &str) -> String {
    let (status, created) = node
        .post("/v1/api/workstreams/new", json!({"name": name}))
        .await;
    assert_eq!(status, 200, "{created}");
    created["ws_id"].as_str().unwrap().to_string()
}

/// Events of `ws` the node has emitted so far.
pub async fn ws_events(node: &NodeProc, ws: &str) -> Vec<Value> {
    node.node_events()
        .await
        .into_iter()
        .filter(|e| e["ws_id"] == ws)
        .collect()
}

/// Sends `message` and waits (bounded) until `ws`'s events so far satisfy `done`; returns
/// them.
pub async fn send_until(
    node: &NodeProc,
    ws: &str,
    message: &str,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let (status, reply) = node
        .post("/v1/api/send", json!({"ws_id": ws, "message": message}))
        .await;
    assert_eq!(status, 200, "{reply}");
    let done = &done;
    eventually(what, Duration::from_secs(30), || async move {
        done(&ws_events(node, ws).await)
    })
    .await;
    ws_events(node, ws).await
}

/// Calls `tool` with `args` (`CALL:<tool> <args>`) in a new workstream `ws_name` and waits
/// for its result: the output.
pub async fn call_output(node: &NodeProc, ws_name: &str, tool: &str, args: &Value) -> String {
    let ws = create_ws(node, ws_name).await;
    let events = send_until(
        node,
        &ws,
        &format!("CALL:{tool} {args}"),
        &format!("the {tool} result"),
        |events| count(events, "tool_result") >= 1,
    )
    .await;
    events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .and_then(|e| e["output"].as_str())
        .unwrap()
        .to_string()
}

/// How many of `events` have type `kind`.
pub fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

/// Waits until `ws` has completed `turns` turns.
pub async fn await_turns(node: &NodeProc, ws: &str, turns: usize) {
    eventually(
        &format!("{turns} turns complete"),
        Duration::from_secs(30),
        || async move {
            ws_events(node, ws)
                .await
                .iter()
                .filter(|e| e["type"] == "turn_complete")
                .count()
                >= turns
        },
    )
    .await;
}
