//! Zombies: a fresh heartbeat but failing HTTP, or health that shows no progress — shown in
//! the API, never chosen by `auto`. Also: a node refusing the console's credentials keeps
//! its last data, and MCP counts are summed.

use std::time::Duration;

use serde_json::json;
use turnstone_console::model::CONSOLE_VERSION;

use super::fake_node::FakeNode;
use super::*;

async fn node_row(console: &TestConsole, id: &str) -> serde_json::Value {
    let (_, v) = console.get("/v1/api/cluster/nodes?sort=name").await;
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node_id"] == id)
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

#[tokio::test]
async fn stalled_and_failing_nodes_are_zombies_and_never_placed() {
    let p = prefix();
    let healthy = NodeServer::start("healthy", CONSOLE_VERSION, 10).await;
    healthy.add_workstreams(6).await; // 7 of 10: the fakes look emptier
    let stalled = FakeNode::start("stalled", CONSOLE_VERSION).await;
    let failing = FakeNode::start("failing", CONSOLE_VERSION).await;
    heartbeat(&p, "healthy", &healthy.url, 10).await;
    heartbeat(&p, "stalled", &stalled.url, 50).await;
    heartbeat(&p, "failing", &failing.url, 50).await;
    let console = TestConsole::start_with(&p, |c| {
        c.stall_after = Duration::from_millis(600);
    })
    .await;
    console
        .wait_for_nodes(&["failing", "healthy", "stalled"])
        .await;

    // MCP counts from the two fakes are summed.
    let (_, o) = console.get("/v1/api/cluster/overview").await;
    assert_eq!(o["mcp_servers"], 4);
    assert_eq!(o["mcp_resources"], 10);
    assert_eq!(o["mcp_prompts"], 2);

    // failing: the dashboard starts answering 500 → HTTP failing, data kept.
    *failing.state.dashboard_status.lock().unwrap() = 500;
    turnstone_testkit::assert_eventually!(
        node_row(&console, "failing").await["zombie"] == true,
        "failing node flagged"
    );
    let row = node_row(&console, "failing").await;
    assert_eq!(row["status"], "zombie");
    assert_eq!(row["reachable"], false);
    assert!(
        row["zombie_reason"]
            .as_str()
            .unwrap()
            .contains("HTTP failing"),
        "{row}"
    );
    assert_eq!(row["ws_total"], 1, "the last workstreams are kept");

    // stalled: a busy workstream and a node_seq that never moves.
    turnstone_testkit::assert_eventually!(
        node_row(&console, "stalled").await["zombie"] == true,
        "stalled node flagged"
    );
    let row = node_row(&console, "stalled").await;
    assert!(
        row["zombie_reason"]
            .as_str()
            .unwrap()
            .contains("progress stalled"),
        "{row}"
    );
    assert_eq!(row["reachable"], true);
    let (_, o) = console.get("/v1/api/cluster/overview").await;
    assert_eq!(o["zombie_nodes"], json!(["failing", "stalled"]));

    // Both have far more room than `healthy`, yet auto never picks them.
    for _ in 0..3 {
        let (status, created) = console
            .post("/v1/api/cluster/workstreams/new", r#"{"node_id": "auto"}"#)
            .await;
        assert_eq!(status, 200, "{created}");
        assert_eq!(created["target_node"], "healthy");
    }
    drain(&format!("{p}:inbound:healthy")).await;

    // Progress resumes: no longer a zombie.
    stalled.set_health(|h| h["events"]["node_seq"] = json!(11));
    turnstone_testkit::assert_eventually!(
        node_row(&console, "stalled").await["zombie"] == false,
        "progress clears the flag"
    );
}

#[tokio::test]
async fn a_node_refusing_the_console_keeps_its_last_data_and_is_marked() {
    let p = prefix();
    let fake = FakeNode::start("picky", CONSOLE_VERSION).await;
    heartbeat(&p, "picky", &fake.url, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["picky"]).await;
    assert_eq!(node_row(&console, "picky").await["ws_total"], 1);
    *fake.state.dashboard_status.lock().unwrap() = 401;
    turnstone_testkit::assert_eventually!(
        node_row(&console, "picky").await["auth_failed"] == true,
        "auth failure marked"
    );
    let row = node_row(&console, "picky").await;
    assert_eq!(row["reachable"], false);
    assert_eq!(row["ws_total"], 1);
    assert!(row["last_error"].as_str().unwrap().contains("401"));
    // The collector authenticated with its own service JWT.
    let polls: Vec<_> = fake
        .seen()
        .into_iter()
        .filter(|s| s.path == "/v1/api/dashboard")
        .collect();
    let auth = polls[0].authorization.clone().unwrap();
    let claims = turnstone_runtime::auth::verify(
        auth.strip_prefix("Bearer ").unwrap(),
        &turnstone_runtime::auth::JwtSecret::new(SECRET),
        turnstone_runtime::auth::AUDIENCE_SERVER,
    )
    .unwrap();
    assert_eq!(claims.sub, "console-collector");
    assert!(!claims.scopes.has(turnstone_runtime::auth::Scope::Write));
}
