//! Settings and model definitions made in the console reach every node (issue 15 item 3):
//! real Redis, two `turnstone-server` nodes on their own SQLite with their bridges, and a
//! `turnstone-console` on its own SQLite — so the console pushes its state to the nodes.
//! Everything is observed through what the nodes do: an approval that times out after the
//! console's timeout, a workstream that runs on the alias the console added (the request
//! reaches that alias's model server), the same after a node restart, and a change made
//! while a node was down is in force once it returns.

use std::time::Duration;

use serde_json::{Value, json};
use turnstone_testkit::FakeLlm;

use super::super::security::console_proc::ConsoleProc;
use super::harness::*;

impl ConsoleProc {
    pub(super) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(Self::token());
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }
}

/// Waits until the console lists `node_id` as reachable.
pub(super) async fn wait_reachable(console: &ConsoleProc, node_id: &str) {
    turnstone_testkit::assert_eventually!(
        console
            .node(node_id)
            .await
            .is_some_and(|n| n["reachable"] == true),
        timeout = Duration::from_secs(60),
        "the console never reached {node_id}"
    );
}

/// Starts a turn that asks for a `bash` approval nobody gives; the feedback of its
/// `approval_resolved` (the timeout's message).
async fn timed_out_approval(node: &NodeProc) -> String {
    let (status, body) = node.post("/v1/api/workstreams/new", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let ws = body["ws_id"].as_str().unwrap().to_string();
    let (status, body) = node
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": "TOOL: echo never-approved"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut feedback = None;
    for _ in 0..100 {
        feedback = node
            .node_events()
            .await
            .into_iter()
            .find(|v| v["type"] == "approval_resolved" && v["ws_id"] == ws.as_str())
            .map(|v| v["feedback"].as_str().unwrap_or_default().to_string());
        if feedback.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    feedback.unwrap_or_else(|| panic!("{}: the approval never resolved", node.node_id))
}

/// Creates a workstream on `alias` and runs one turn on it; the workstream's dashboard row.
async fn turn_on_alias(node: &NodeProc, alias: &str, message: &str) -> Value {
    let (status, body) = node
        .post("/v1/api/workstreams/new", json!({"model": alias}))
        .await;
    assert_eq!(status, 200, "{}: {body}", node.node_id);
    let ws = body["ws_id"].as_str().unwrap().to_string();
    let (status, body) = node
        .post("/v1/api/send", json!({"ws_id": ws, "message": message}))
        .await;
    assert_eq!(status, 200, "{body}");
    let mut row = Value::Null;
    for _ in 0..100 {
        let done = node
            .node_events()
            .await
            .iter()
            .any(|v| v["type"] == "turn_complete" && v["ws_id"] == ws.as_str());
        if done {
            let dash = node.get("/v1/api/dashboard").await;
            row = dash["workstreams"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["id"] == ws.as_str())
                .cloned()
                .unwrap_or(Value::Null);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        !row.is_null(),
        "{}: the turn on {alias} never completed",
        node.node_id
    );
    row
}

/// The model names of the requests `llm` got that carry `message` (the turn's, and the
/// title request after a workstream's first exchange).
fn asked_of(llm: &FakeLlm, message: &str) -> Vec<String> {
    llm.requests()
        .iter()
        .filter(|r| r.to_string().contains(message))
        .map(|r| r["model"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_settings_and_models_are_in_force_on_every_node_and_survive_restarts() {
    let mut mq = Mq::shared("cset").await;
    let a = NodeProc::start("cset-a").await;
    let mut b = NodeProc::start("cset-b").await;
    let _bridge_a = BridgeProc::start(&a, &mq.url, &mq.prefix).await;
    let _bridge_b = BridgeProc::start(&b, &mq.url, &mq.prefix).await;
    let console = ConsoleProc::start(&mq.url, &mq.prefix, &[]).await;
    wait_reachable(&console, "cset-a").await;
    wait_reachable(&console, "cset-b").await;

    // Bad input never reaches a node.
    let (status, body) = console
        .send(
            reqwest::Method::PUT,
            "/v1/api/admin/settings/server.no_such_key",
            Some(json!({"value": 1})),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], "Unknown setting: server.no_such_key");

    // 1. The approval timeout, changed once in the console, is in force on both nodes.
    let (status, body) = console
        .send(
            reqwest::Method::PUT,
            "/v1/api/admin/settings/server.approval_timeout",
            Some(json!({"value": 2})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for id in ["cset-a", "cset-b"] {
        assert_eq!(
            body["reload"]["results"][id]["applied"]["server.approval_timeout"], 2,
            "{id}: {body}"
        );
    }
    for node in [&a, &b] {
        let started = tokio::time::Instant::now();
        let feedback = timed_out_approval(node).await;
        assert_eq!(
            feedback, "Approval timed out after 2.0 s",
            "{}",
            node.node_id
        );
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    // 2. A model alias added in the console: a new workstream on each node runs on it, and
    //    the request reaches that alias's model server with its model name.
    let llm = FakeLlm::start().await;
    let (status, body) = console
        .send(
            reqwest::Method::POST,
            "/v1/api/admin/models",
            Some(json!({
                "alias": "console-fast",
                "model": "fast-model-x",
                "provider": "openai",
                "base_url": llm.base_url(),
                "api_key": "sk-console-secret",
            })),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert!(
        !body.to_string().contains("sk-console-secret"),
        "the key is never returned: {body}"
    );
    assert_eq!(body["definition"]["has_api_key"], true);
    for id in ["cset-a", "cset-b"] {
        let aliases = &body["reload"]["results"][id]["aliases"];
        assert!(
            aliases
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == "console-fast")),
            "{id}: {body}"
        );
    }
    for node in [&a, &b] {
        let message = format!("hello from {}", node.node_id);
        let row = turn_on_alias(node, "console-fast", &message).await;
        assert_eq!(row["model_alias"], "console-fast", "{row}");
        assert_eq!(row["model"], "fast-model-x", "{row}");
        let asked = asked_of(&llm, &message);
        assert!(
            !asked.is_empty(),
            "{}: the alias's server was not asked",
            node.node_id
        );
        assert!(asked.iter().all(|m| m == "fast-model-x"), "{asked:?}");
    }
    let (_, models) = console
        .send(reqwest::Method::GET, "/v1/api/admin/models", None)
        .await;
    assert_eq!(
        models["nodes"]["cset-b"]["console-fast"]["source"], "db",
        "{models}"
    );

    // 3. A node restarted afterwards still has both (its own store holds them).
    b.kill9();
    b.spawn().await;
    assert_eq!(
        timed_out_approval(&b).await,
        "Approval timed out after 2.0 s",
        "after a restart"
    );
    let row = turn_on_alias(&b, "console-fast", "after the restart").await;
    assert_eq!(row["model"], "fast-model-x");
    assert!(!asked_of(&llm, "after the restart").is_empty());

    // 4. A change made while a node is down is in force once it returns (the console
    //    pushes to a node that joins again).
    b.kill9();
    turnstone_testkit::assert_eventually!(
        console.node("cset-b").await.is_none(),
        timeout = Duration::from_secs(30),
        "the console still lists the stopped node"
    );
    let (status, body) = console
        .send(
            reqwest::Method::PUT,
            "/v1/api/admin/settings/server.approval_timeout",
            Some(json!({"value": 3})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["reload"]["results"]["cset-a"]["applied"]["server.approval_timeout"],
        3
    );
    assert!(body["reload"]["results"].get("cset-b").is_none(), "{body}");
    b.spawn().await;
    wait_reachable(&console, "cset-b").await;
    turnstone_testkit::assert_eventually!(
        b.post("/v1/api/_internal/config-reload", json!(null))
            .await
            .1["applied"]["server.approval_timeout"]
            == 3,
        timeout = Duration::from_secs(20),
        "the returning node never got the new timeout"
    );
    assert_eq!(
        timed_out_approval(&b).await,
        "Approval timed out after 3.0 s"
    );

    // Removing the setting puts each node back on its own flag (3600 s here).
    let (status, body) = console
        .send(
            reqwest::Method::DELETE,
            "/v1/api/admin/settings/server.approval_timeout",
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for id in ["cset-a", "cset-b"] {
        assert!(
            body["reload"]["results"][id]["applied"]
                .get("server.approval_timeout")
                .is_none(),
            "{id}: {body}"
        );
    }
    mq.cleanup().await;
}
