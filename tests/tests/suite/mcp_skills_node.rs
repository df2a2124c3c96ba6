//! MCP prompts as skills through a real `turnstone-server` process: `--mcp-config` names
//! the Python `prompts_server.py` fixture (its prompts read from a file the test rewrites);
//! the prompts appear as read-only `mcp` skills in the admin list, and `/mcp refresh`
//! brings a changed list in (a removed prompt's row goes, a new one comes).

use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::harness::{NodeProc, eventually};

fn fixtures() -> std::path::PathBuf {
    turnstone_testkit::mcp_fixtures::dir()
}

fn python() -> String {
    turnstone_testkit::mcp_fixtures::python()
}

async fn skill_names(node: &NodeProc) -> Vec<String> {
    node.get("/v1/api/admin/skills").await["skills"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|r| r["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

async fn skill(node: &NodeProc, name: &str) -> Value {
    node.get("/v1/api/admin/skills").await["skills"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == name).cloned())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_nodes_mcp_prompts_are_synced_as_read_only_skills() {
    assert!(
        std::path::Path::new(&python()).exists(),
        "the MCP venv is missing: run crates/mcp/tests/fixtures/setup.sh (scripts/services does it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.json");
    std::fs::write(
        &prompts,
        json!([{"name": "greet", "description": "Greets.", "text": "Say hello."}]).to_string(),
    )
    .unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"pr": {
            "command": python(),
            "args": [fixtures().join("prompts_server.py")],
            "env": {"FIXTURE_PROMPTS": prompts}
        }}})
        .to_string(),
    )
    .unwrap();
    let node = NodeProc::start_full(
        "mcp-skills-node",
        Vec::new(),
        vec!["--mcp-config".into(), config.display().to_string()],
    )
    .await;
    eventually(
        "the prompt is synced as a skill",
        Duration::from_secs(30),
        || async {
            skill_names(&node)
                .await
                .contains(&"mcp__pr__greet".to_string())
        },
    )
    .await;
    let row = skill(&node, "mcp__pr__greet").await;
    assert_eq!(row["origin"], "mcp", "{row}");
    assert_eq!(row["mcp_server"], "pr");
    assert_eq!(row["readonly"], true);
    assert_eq!(row["content"], "Say hello.");
    assert_eq!(row["description"], "Greets.");

    // The server's list changes; `/mcp refresh pr` brings it in and the rows follow.
    std::fs::write(
        &prompts,
        json!([{"name": "bye", "description": "Says goodbye.", "text": "Say goodbye."}])
            .to_string(),
    )
    .unwrap();
    let ws = node.get("/v1/api/workstreams").await["workstreams"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, body) = node
        .post(
            "/v1/api/command",
            json!({"ws_id": ws, "command": "/mcp refresh pr"}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    eventually(
        "the refreshed list is synced",
        Duration::from_secs(30),
        || async {
            let names = skill_names(&node).await;
            names.contains(&"mcp__pr__bye".to_string())
                && !names.contains(&"mcp__pr__greet".to_string())
        },
    )
    .await;
    assert_eq!(
        skill(&node, "mcp__pr__bye").await["content"],
        "Say goodbye."
    );
}
