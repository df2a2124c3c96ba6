//! Real stdio servers: `server-filesystem` and `server-everything` (npm) and the low-level
//! Python fixture (method-not-found on one list, tool errors, a crash in the middle of a
//! call).

use serde_json::json;
use std::sync::Arc;

use turnstone_mcp::{McpError, McpManager, McpOptions, ServerState};
use turnstone_testkit::assert_eventually;

use super::{
    READY_TIMEOUT, alive, node_server, python_stdio, quick_options, start, wait_ready, with_env,
};

#[tokio::test]
async fn filesystem_server_tools_have_real_effects() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("hello.txt"), "hello from turnstone\n").unwrap();
    let mcp = start(vec![node_server(
        "fs",
        "server-filesystem",
        &[root.to_str().unwrap()],
    )]);
    wait_ready(&mcp, "fs").await;

    let tools = mcp.tools_snapshot();
    let names: Vec<&str> = tools.iter().map(|t| t.qualified_name.as_str()).collect();
    for expected in [
        "mcp__fs__read_text_file",
        "mcp__fs__write_file",
        "mcp__fs__list_directory",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "the snapshot is ordered by name");
    let read = mcp.tool("mcp__fs__read_text_file").unwrap();
    assert_eq!(read.server, "fs");
    assert_eq!(read.name, "read_text_file");
    assert!(!read.description.is_empty());
    assert!(read.prefixed_description().starts_with("[MCP: fs] "));
    assert_eq!(read.input_schema["type"], "object");
    assert!(
        read.input_schema["properties"]["path"].is_object(),
        "{}",
        read.input_schema
    );
    assert!(read.needs_approval(), "MCP tools need approval by default");

    let path = root.join("hello.txt");
    let out = mcp
        .call_tool("mcp__fs__read_text_file", json!({"path": path}))
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("hello from turnstone"), "{}", out.text);

    let written = root.join("written.txt");
    let out = mcp
        .call_tool(
            "mcp__fs__write_file",
            json!({"path": written, "content": "made by MCP"}),
        )
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "made by MCP");

    let out = mcp
        .call_tool("mcp__fs__list_directory", json!({"path": root}))
        .await
        .unwrap();
    assert!(
        out.text.contains("hello.txt") && out.text.contains("written.txt"),
        "{}",
        out.text
    );

    // Outside the allowed directory: the server's own error, flagged as such.
    let out = mcp
        .call_tool("mcp__fs__read_text_file", json!({"path": "/etc/hostname"}))
        .await
        .unwrap();
    assert!(
        out.is_error,
        "expected is_error for a path outside the root: {}",
        out.text
    );

    // Bad input never reaches the server.
    let err = mcp
        .call_tool("mcp__fs__read_text_file", json!("x"))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::InvalidArguments { .. }), "{err:?}");
    let err = mcp.call_tool("mcp__fs__nope", json!({})).await.unwrap_err();
    assert_eq!(err.to_string(), "MCP tool 'mcp__fs__nope' is not available");

    // The filesystem server declares no resources or prompts.
    let counts = mcp.counts();
    assert_eq!(
        (
            counts.servers,
            counts.connected,
            counts.resources,
            counts.prompts
        ),
        (1, 1, 0, 0)
    );
    assert_eq!(counts.tools, tools.len());
    let status = &mcp.status()["fs"];
    assert!(status.connected && status.error.is_empty(), "{status:?}");
    assert_eq!(status.transport, "stdio");
    assert!(status.command.starts_with("node "), "{}", status.command);
    mcp.shutdown().await;
}

#[tokio::test]
async fn everything_server_tools_resources_templates_and_prompts() {
    let mcp = start(vec![node_server("every", "server-everything", &["stdio"])]);
    wait_ready(&mcp, "every").await;

    let sum = mcp.tool("mcp__every__get-sum").expect("get-sum discovered");
    assert_eq!(sum.annotations.read_only_hint, Some(true));
    assert_eq!(sum.annotations.destructive_hint, Some(false));
    let out = mcp
        .call_tool("mcp__every__get-sum", json!({"a": 2, "b": 40}))
        .await
        .unwrap();
    assert!(out.text.contains("42"), "{}", out.text);
    let out = mcp
        .call_tool("mcp__every__echo", json!({"message": "round trip"}))
        .await
        .unwrap();
    assert!(out.text.contains("round trip"), "{}", out.text);
    let out = mcp
        .call_tool("mcp__every__get-tiny-image", json!({}))
        .await
        .unwrap();
    assert!(out.text.contains("[image/png data, "), "{}", out.text);

    let resources = mcp.resources();
    assert!(!resources.is_empty(), "resources discovered");
    assert!(resources.iter().all(|r| r.server == "every"));
    let templates = mcp.resource_templates();
    assert!(
        templates
            .iter()
            .any(|t| t.uri_template.contains("{resourceId}")),
        "{templates:?}"
    );
    let first = &resources[0];
    assert_eq!(mcp.resource_server(&first.uri).as_deref(), Some("every"));
    let contents = mcp.read_resource("every", &first.uri).await.unwrap();
    assert_ne!(contents.text, "(empty resource)");
    // A URI under a template's static prefix resolves to its server and reads.
    let dynamic = "demo://resource/dynamic/text/1";
    assert_eq!(mcp.resource_server(dynamic).as_deref(), Some("every"));
    let contents = mcp.read_resource("every", dynamic).await.unwrap();
    assert!(!contents.contents.is_empty());

    let prompts = mcp.prompts();
    let args_prompt = prompts
        .iter()
        .find(|p| p.name == "args-prompt")
        .expect("args-prompt discovered");
    assert_eq!(args_prompt.qualified_name, "mcp__every__args-prompt");
    assert!(
        args_prompt
            .arguments
            .iter()
            .any(|a| a.name == "city" && a.required)
    );
    let rendered = mcp
        .get_prompt("every", "args-prompt", json!({"city": "Lisbon"}))
        .await
        .unwrap();
    assert!(rendered.text.starts_with("[user]: "), "{}", rendered.text);
    assert!(rendered.text.contains("Lisbon"), "{}", rendered.text);
    let err = mcp
        .get_prompt("every", "no-such-prompt", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::UnknownPrompt { .. }), "{err:?}");

    let counts = mcp.counts();
    assert_eq!(counts.resources, resources.len() + templates.len());
    assert_eq!(counts.prompts, prompts.len());
    mcp.shutdown().await;
}

#[tokio::test]
async fn method_not_found_on_templates_keeps_tools_and_resources() {
    let mcp = start(vec![python_stdio("py")]);
    wait_ready(&mcp, "py").await;
    let names: Vec<String> = mcp.tools_snapshot().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["crash", "env", "fail", "ping"]);
    assert_eq!(
        mcp.tool("mcp__py__env").unwrap().annotations.read_only_hint,
        Some(true)
    );
    // resources/templates/list answered -32601: no templates, no error, resources kept.
    assert!(mcp.resource_templates().is_empty());
    let resources = mcp.resources();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].uri, "memo://one");
    let status = &mcp.status()["py"];
    assert!(
        status.error.is_empty(),
        "method-not-found is not an error: {}",
        status.error
    );
    assert_eq!(
        (status.tools, status.resources, status.resource_templates),
        (4, 1, 0)
    );
    let memo = mcp.read_resource("py", "memo://one").await.unwrap();
    assert_eq!(memo.text, "the first memo");

    // A tool error is a result with is_error, not an McpError.
    let out = mcp.call_tool("mcp__py__fail", json!({})).await.unwrap();
    assert!(out.is_error);
    assert!(out.text.contains("deliberate failure"), "{}", out.text);
    // The server has no prompts: prompts/get is refused before it is sent.
    let err = mcp
        .get_prompt("py", "anything", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::UnknownPrompt { .. }), "{err:?}");
    mcp.shutdown().await;
}

#[tokio::test]
async fn configured_env_reaches_the_server() {
    let mcp = start(vec![with_env(
        python_stdio("py"),
        "FIXTURE_GREETING",
        "hi there",
    )]);
    wait_ready(&mcp, "py").await;
    let out = mcp
        .call_tool("mcp__py__env", json!({"name": "FIXTURE_GREETING"}))
        .await
        .unwrap();
    assert_eq!(out.text, "hi there");
    mcp.shutdown().await;
}

#[tokio::test]
async fn the_server_gets_only_the_allow_listed_environment() {
    // cargo sets CARGO_PKG_NAME for the tests: a variable of the node that is not allowed.
    assert!(
        std::env::var("CARGO_PKG_NAME").is_ok(),
        "cargo sets CARGO_PKG_NAME"
    );
    let read = |mcp: Arc<McpManager>, name: &'static str| async move {
        mcp.call_tool("mcp__py__env", json!({"name": name}))
            .await
            .unwrap()
            .text
    };
    let mcp = start(vec![python_stdio("py")]);
    wait_ready(&mcp, "py").await;
    assert_eq!(read(mcp.clone(), "CARGO_PKG_NAME").await, "<unset>");
    assert_ne!(read(mcp.clone(), "PATH").await, "<unset>");
    mcp.shutdown().await;

    // Named in the passthrough list (env_passthrough): it reaches the server.
    let mcp = McpManager::start_with(
        vec![python_stdio("py")],
        McpOptions {
            child_env: turnstone_tools::ChildEnv::new(["CARGO_PKG_*".to_string()]),
            ..quick_options()
        },
    );
    wait_ready(&mcp, "py").await;
    assert_eq!(read(mcp.clone(), "CARGO_PKG_NAME").await, "turnstone-mcp");
    mcp.shutdown().await;
}

fn pid_of(text: &str) -> u32 {
    text.strip_prefix("pong ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{text:?}"))
}

#[tokio::test]
async fn a_crash_mid_call_is_a_clear_error_and_the_server_comes_back() {
    let mcp = start(vec![python_stdio("py")]);
    wait_ready(&mcp, "py").await;
    let before = pid_of(
        &mcp.call_tool("mcp__py__ping", json!({}))
            .await
            .unwrap()
            .text,
    );
    let generation = mcp.generation();

    let err = mcp
        .call_tool("mcp__py__crash", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Disconnected { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("MCP server 'py' disconnected during tools/call 'crash'"),
        "{text}"
    );
    assert!(text.contains("reconnecting"), "{text}");

    // Reconnected in the background, with a full rediscovery, to a new process.
    assert_eventually!(
        mcp.status()["py"].reconnects == 1 && mcp.server_state("py") == Some(ServerState::Ready),
        timeout = READY_TIMEOUT,
        "never reconnected: {:?}",
        mcp.status()["py"]
    );
    let after = pid_of(
        &mcp.call_tool("mcp__py__ping", json!({}))
            .await
            .unwrap()
            .text,
    );
    assert_ne!(before, after, "a new server process answers");
    assert!(!alive(before), "the crashed process is gone");
    assert_eq!(mcp.tools_snapshot().len(), 4);
    // The tools stayed offered through the reconnect: nothing changed for consumers.
    assert_eq!(mcp.generation(), generation);
    mcp.shutdown().await;
}

#[tokio::test]
async fn refresh_and_reconnect_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra-tools");
    let config = with_env(
        python_stdio("py"),
        "FIXTURE_EXTRA_TOOLS",
        extra.to_str().unwrap(),
    );
    let mcp = start(vec![config]);
    wait_ready(&mcp, "py").await;
    assert!(mcp.tool("mcp__py__quiet").is_none());
    // The server's list changes without a notification: only a refresh brings it in.
    std::fs::write(&extra, "quiet\n").unwrap();
    let generation = mcp.generation();
    mcp.refresh(Some("py")).await.unwrap();
    assert!(
        mcp.tool("mcp__py__quiet").is_some(),
        "{:?}",
        mcp.tools_snapshot()
    );
    assert_eq!(mcp.generation(), generation + 1);
    let out = mcp.call_tool("mcp__py__quiet", json!({})).await.unwrap();
    assert_eq!(out.text, "quiet ok");
    // Nothing changed: a refresh of all servers leaves the generation alone.
    mcp.refresh(None).await.unwrap();
    assert_eq!(mcp.generation(), generation + 1);
    let before = pid_of(
        &mcp.call_tool("mcp__py__ping", json!({}))
            .await
            .unwrap()
            .text,
    );
    mcp.reconnect(Some("py")).await.unwrap();
    assert_eq!(mcp.server_state("py"), Some(ServerState::Ready));
    let after = pid_of(
        &mcp.call_tool("mcp__py__ping", json!({}))
            .await
            .unwrap()
            .text,
    );
    assert_ne!(before, after);
    assert_eq!(mcp.status()["py"].reconnects, 1);
    assert!(matches!(
        mcp.refresh(Some("ghost")).await.unwrap_err(),
        McpError::UnknownServer(_)
    ));
    mcp.shutdown().await;
    assert_eventually!(
        !alive(after),
        timeout = READY_TIMEOUT,
        "shutdown leaves no child"
    );
    assert_eq!(mcp.refresh(None).await.unwrap_err(), McpError::ShutDown);
}

#[tokio::test]
async fn a_refresh_interval_picks_up_unannounced_changes() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra-tools");
    let config = with_env(
        python_stdio("py"),
        "FIXTURE_EXTRA_TOOLS",
        extra.to_str().unwrap(),
    );
    let mcp = turnstone_mcp::McpManager::start_with(
        vec![config],
        turnstone_mcp::McpOptions {
            refresh_interval: Some(std::time::Duration::from_millis(200)),
            ..super::quick_options()
        },
    );
    wait_ready(&mcp, "py").await;
    assert!(mcp.tool("mcp__py__polled").is_none());
    std::fs::write(&extra, "polled\n").unwrap();
    assert_eventually!(
        mcp.tool("mcp__py__polled").is_some(),
        timeout = READY_TIMEOUT,
        "the periodic refresh never listed the new tool"
    );
    mcp.shutdown().await;
}
