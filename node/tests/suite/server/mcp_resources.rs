//! `read_resource` and `use_prompt` on a node against the real
//! `@modelcontextprotocol/server-everything` over stdio (installed by the MCP crate's
//! `tests/fixtures/setup.sh`), driven by turns of the fake model.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use turnstone_mcp::{McpManager, McpServerConfig, ServerState};
use turnstone_node::{mcp_resource_tools, mcp_tools};

use super::*;

fn fixtures() -> std::path::PathBuf {
    turnstone_testkit::mcp_fixtures::dir()
}

fn ensure_fixtures() {
    turnstone_testkit::mcp_fixtures::ensure()
}

/// A node with server-everything connected as `every` and the resource/prompt tools
/// registered, as `turnstone-server` does when MCP servers are configured.
async fn node_with_everything() -> (TestNode, Arc<McpManager>) {
    ensure_fixtures();
    let script =
        fixtures().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut config =
        McpServerConfig::stdio("every", "node", [script.to_str().unwrap(), "stdio"]).unwrap();
    config.startup_timeout = Duration::from_secs(90);
    config.call_timeout = Duration::from_secs(60);
    let t = TestNode::start().await;
    let mcp = McpManager::start(vec![config]);
    t.node.set_mcp(mcp.clone());
    let registry = t.node.manager.engine().registry();
    mcp_resource_tools::register(&mcp, registry).unwrap();
    t.node
        .manager
        .engine()
        .add_system_section(Arc::new(mcp_resource_tools::PromptCatalog(mcp.clone())));
    let _sync = mcp_tools::spawn_sync(mcp.clone(), registry.clone());
    turnstone_testkit::assert_eventually!(
        mcp.server_state("every") == Some(ServerState::Ready),
        timeout = Duration::from_secs(90),
        "server-everything never became ready: {:?}",
        mcp.status().get("every")
    );
    (t, mcp)
}

/// Sends `message` and returns the turn's tool results (`output`, `is_error`).
async fn turn(t: &TestNode, events: &mut SseClient, message: &str) -> Vec<(String, bool)> {
    let (status, body) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": message}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    events
        .until("turn_complete")
        .await
        .iter()
        .filter(|e| e.kind() == "tool_result")
        .map(|e| {
            (
                e.data["output"].as_str().unwrap_or_default().to_string(),
                e.data["is_error"] == Value::Bool(true),
            )
        })
        .collect()
}

fn call(tool: &str, args: Value) -> String {
    format!("CALL:{tool} {args}")
}

#[tokio::test]
async fn resources_and_prompts_of_a_real_server_through_turns() {
    let (t, mcp) = node_with_everything().await;
    let registry = t.node.manager.engine().registry();
    let task_tools = registry.task_agent_names();
    assert!(
        task_tools.contains(&"read_resource".to_string())
            && task_tools.contains(&"use_prompt".to_string()),
        "{task_tools:?}"
    );
    let ws = t.node.workstream(&t.default_ws).unwrap();
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    events.until("connected").await;

    // A listed resource needs approval, labelled by its URI; its text comes back.
    let first = mcp.resources().first().cloned().expect("resources listed");
    let (status, _) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": call("read_resource", json!({"uri": first.uri}))}),
        )
        .await;
    assert_eq!(status, 200);
    let seen = events.until("approve_request").await;
    let item = &seen.last().unwrap().data["items"][0];
    assert_eq!(item["func_name"], "read_resource");
    assert_eq!(
        item["approval_label"],
        format!("read_resource:{}", first.uri)
    );
    t.post(
        "/v1/api/approve",
        json!({"ws_id": t.default_ws, "approved": true}),
    )
    .await;
    let seen = events.until("turn_complete").await;
    let result = seen.iter().find(|e| e.kind() == "tool_result").unwrap();
    let expected = mcp.read_resource("every", &first.uri).await.unwrap().text;
    assert_eq!(result.data["output"], expected.as_str());

    ws.set_skip_permissions(true);
    // A URI under a template resolves to its server; binary contents are described.
    let results = turn(
        &t,
        &mut events,
        &format!(
            "{}\n{}",
            call(
                "read_resource",
                json!({"uri": "demo://resource/dynamic/text/7"})
            ),
            call(
                "read_resource",
                json!({"uri": "demo://resource/dynamic/blob/7"})
            )
        ),
    )
    .await;
    assert_eq!(results.len(), 2);
    assert!(
        !results[0].1
            && results[0]
                .0
                .starts_with("Resource 7: This is a plaintext resource"),
        "{results:?}"
    );
    assert!(
        !results[1].1
            && results[1].0.starts_with("[binary text/plain, ")
            && results[1].0.ends_with(" bytes]"),
        "{results:?}"
    );

    // An unknown URI: a tool error saying how to find one.
    let results = turn(
        &t,
        &mut events,
        &call("read_resource", json!({"uri": "nope://nothing"})),
    )
    .await;
    assert!(results[0].1);
    assert!(
        results[0]
            .0
            .contains("unknown resource URI 'nope://nothing'")
            && results[0]
                .0
                .contains(&format!("known resources: {}", first.uri))
            && results[0]
                .0
                .contains("demo://resource/dynamic/text/{resourceId}"),
        "{results:?}"
    );

    // A prompt with its required argument renders; without it the error names it.
    let results = turn(
        &t,
        &mut events,
        &call(
            "use_prompt",
            json!({"name": "mcp__every__args-prompt", "arguments": {"city": "Lisbon"}}),
        ),
    )
    .await;
    assert!(!results[0].1, "{results:?}");
    assert!(
        results[0].0.starts_with("[user]: ") && results[0].0.contains("Lisbon"),
        "{results:?}"
    );
    let results = turn(
        &t,
        &mut events,
        &call(
            "use_prompt",
            json!({"name": "args-prompt", "arguments": {}}),
        ),
    )
    .await;
    assert!(results[0].1);
    assert!(
        results[0]
            .0
            .contains("prompt 'mcp__every__args-prompt' needs the argument 'city'"),
        "{results:?}"
    );
    let results = turn(
        &t,
        &mut events,
        &call("use_prompt", json!({"name": "no-such-prompt"})),
    )
    .await;
    assert!(
        results[0].1
            && results[0].0.contains("unknown prompt 'no-such-prompt'")
            && results[0].0.contains("mcp__every__args-prompt"),
        "{results:?}"
    );
    mcp.shutdown().await;
}

/// The system prompt lists the servers' prompts (`<mcp-prompts>`, qualified names, required
/// arguments starred) so the model can find them for `use_prompt`.
#[tokio::test]
async fn the_system_prompt_carries_the_mcp_prompt_catalog() {
    let (t, mcp) = node_with_everything().await;
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    events.until("connected").await;
    turn(&t, &mut events, "hello").await;
    let request = t.llm.last_request().expect("a model request");
    let system = request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(request["messages"][0]["role"], "system");
    let catalog = system
        .split("<mcp-prompts>")
        .nth(1)
        .and_then(|rest| rest.split("</mcp-prompts>").next())
        .unwrap_or_else(|| panic!("no <mcp-prompts> section in {system}"));
    let prompts = mcp.prompts();
    assert!(!prompts.is_empty());
    for p in prompts.iter().take(mcp_resource_tools::PROMPT_CATALOG_MAX) {
        assert!(
            catalog.contains(&format!("- {}", p.qualified_name)),
            "{} missing from {catalog}",
            p.qualified_name
        );
        if let Some(required) = p.arguments.iter().find(|a| a.required) {
            assert!(
                catalog.contains(&format!("{}*", required.name)),
                "{catalog}"
            );
        }
    }
}
