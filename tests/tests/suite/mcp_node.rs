//! MCP through the node: a real MCP server (the `mcp` PyPI package over stdio) configured
//! with `--mcp-config`; its tools reach the model as `mcp__{server}__{tool}`, need approval,
//! and run; `/health` and `_internal/mcp-status` report the server.

use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::harness::{NodeProc, eventually};

fn fixtures() -> std::path::PathBuf {
    turnstone_testkit::mcp_fixtures::dir()
}

fn python() -> String {
    turnstone_testkit::mcp_fixtures::python()
}

#[tokio::test]
async fn an_mcp_servers_tools_are_offered_approved_and_run_through_the_node() {
    assert!(
        std::path::Path::new(&python()).exists(),
        "the MCP venv is missing: run crates/mcp/tests/fixtures/setup.sh (scripts/services does it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "py": {"command": python(), "args": [fixtures().join("stdio_server.py")]},
            "broken": {"command": "/nonexistent/mcp-server"}
        }})
        .to_string(),
    )
    .unwrap();
    let node = NodeProc::start_full(
        "mcp-node",
        Vec::new(),
        vec!["--mcp-config".into(), config.display().to_string()],
    )
    .await;
    // The broken server does not hold the node back; the good one connects.
    eventually(
        "the MCP server is ready",
        Duration::from_secs(30),
        || async {
            let h = node.get("/health").await;
            h["mcp"]["servers"] == 2 && h["mcp"]["connected"] == 1
        },
    )
    .await;
    let status = node.get("/v1/api/_internal/mcp-status").await;
    assert!(status["servers"]["py"].is_object(), "{status}");
    assert!(status["servers"]["broken"].is_object(), "{status}");

    let ws = node.get("/v1/api/workstreams").await["workstreams"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _) = node
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": "CALL:mcp__py__ping {}", "correlation_id": "3c9000000001"}),
        )
        .await;
    assert_eq!(code, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let request_id = loop {
        let pending = node.get("/v1/api/approvals").await;
        if let Some(r) = pending["approvals"][0]["request_id"].as_str() {
            assert_eq!(
                pending["approvals"][0]["items"][0]["func_name"],
                "mcp__py__ping"
            );
            break r.to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no approval request for the MCP call"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (code, body) = node
        .post(
            "/v1/api/approve",
            json!({"ws_id": ws, "request_id": request_id, "approved": true}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let result: Value = loop {
        let found = node
            .node_events()
            .await
            .into_iter()
            .find(|e| e["type"] == "tool_result" && e["name"] == "mcp__py__ping");
        if let Some(r) = found {
            break r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the MCP tool did not run"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        result["output"].as_str().unwrap().starts_with("pong "),
        "{result}"
    );

    // `/mcp` lists the servers; `/mcp refresh <server>` rediscovers one on demand; an
    // unknown server or action is a clear error event.
    for (command, kind, want) in [
        ("/mcp", "info", "py: connected — "),
        ("/mcp refresh py", "info", "MCP refreshed:\npy: connected"),
        (
            "/mcp refresh nope",
            "error",
            "Unknown MCP server 'nope'. Configured: ",
        ),
        (
            "/mcp frobnicate",
            "error",
            "Unknown /mcp action 'frobnicate'",
        ),
    ] {
        let (code, body) = node
            .post("/v1/api/command", json!({"ws_id": ws, "command": command}))
            .await;
        assert_eq!(code, 200, "{body}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let seen = node.node_events().await.into_iter().any(|e| {
                e["type"] == kind && e["message"].as_str().is_some_and(|m| m.contains(want))
            });
            if seen {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {kind} event containing {want:?} after {command}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
