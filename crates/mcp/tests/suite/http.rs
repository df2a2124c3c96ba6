//! The FastMCP fixture over streamable HTTP: a tool added at run time appears without a
//! restart (via `notifications/tools/list_changed`), configured headers arrive.

use std::time::Duration;

use serde_json::json;
use turnstone_mcp::{McpServerConfig, McpTransportConfig, ServerState};
use turnstone_testkit::assert_eventually;

use super::{FastMcp, READY_TIMEOUT, start, wait_ready};

fn http(name: &str, url: &str) -> McpServerConfig {
    let mut c = McpServerConfig::http(name, url).unwrap();
    c.startup_timeout = READY_TIMEOUT;
    c
}

#[tokio::test]
async fn a_tool_added_at_run_time_appears_without_restart() {
    let server = FastMcp::spawn().await;
    let mcp = start(vec![http("dyn", &server.url)]);
    wait_ready(&mcp, "dyn").await;
    let names = |m: &turnstone_mcp::McpManager| -> Vec<String> {
        m.tools_snapshot()
            .into_iter()
            .map(|t| t.qualified_name)
            .collect()
    };
    assert_eq!(
        names(&mcp),
        ["mcp__dyn__add_tool", "mcp__dyn__echo", "mcp__dyn__header"]
    );
    assert_eq!(mcp.status()["dyn"].transport, "http");
    assert_eq!(mcp.status()["dyn"].url, server.url);
    let out = mcp
        .call_tool("mcp__dyn__echo", json!({"text": "over http"}))
        .await
        .unwrap();
    assert_eq!(out.text, "echo: over http");

    let generation = mcp.generation();
    let changes = mcp.subscribe();
    let out = mcp
        .call_tool("mcp__dyn__add_tool", json!({"name": "late_tool"}))
        .await
        .unwrap();
    assert_eq!(out.text, "added late_tool");
    // No refresh() call: the list_changed notification alone brings the new tool in.
    assert_eventually!(
        mcp.tool("mcp__dyn__late_tool").is_some(),
        timeout = READY_TIMEOUT,
        "the added tool never appeared: {:?}",
        names(&mcp)
    );
    assert!(mcp.generation() > generation);
    assert!(changes.has_changed().unwrap(), "subscribers are told");
    assert_eq!(
        names(&mcp),
        [
            "mcp__dyn__add_tool",
            "mcp__dyn__echo",
            "mcp__dyn__header",
            "mcp__dyn__late_tool"
        ]
    );
    let late = mcp.tool("mcp__dyn__late_tool").unwrap();
    assert_eq!(late.description, "Added at run time: late_tool");
    let out = mcp
        .call_tool("mcp__dyn__late_tool", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(out.text, "late_tool says hi");

    // Resources and prompts over HTTP too.
    assert_eq!(
        mcp.resource_server("memo://greeting").as_deref(),
        Some("dyn")
    );
    let memo = mcp.read_resource("dyn", "memo://greeting").await.unwrap();
    assert_eq!(memo.text, "hello from fastmcp");
    let prompt = mcp
        .get_prompt("dyn", "review", json!({"code": "fn main() {}"}))
        .await
        .unwrap();
    assert_eq!(prompt.text, "[user]: Please review this code: fn main() {}");
    // A JSON-RPC error from the server (unknown resource) is a clear error.
    let err = mcp
        .read_resource("dyn", "memo://missing")
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("MCP server 'dyn' answered resources/read"),
        "{err}"
    );
    mcp.shutdown().await;
}

#[tokio::test]
async fn configured_headers_are_sent() {
    let server = FastMcp::spawn().await;
    let mut config = http("hdr", &server.url);
    if let McpTransportConfig::Http { headers, .. } = &mut config.transport {
        headers.insert("X-Turnstone-Test".into(), "abc123".into());
    }
    let mcp = start(vec![config]);
    wait_ready(&mcp, "hdr").await;
    let out = mcp
        .call_tool("mcp__hdr__header", json!({"name": "x-turnstone-test"}))
        .await
        .unwrap();
    assert_eq!(out.text, "abc123");
    mcp.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_http_server_fails_with_its_reason() {
    // A port nobody listens on: bind, note, close.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut config = http("down", &format!("http://127.0.0.1:{port}/mcp"));
    config.startup_timeout = Duration::from_secs(20);
    let mcp = start(vec![config]);
    assert_eventually!(
        matches!(mcp.server_state("down"), Some(ServerState::Failed { .. })),
        timeout = READY_TIMEOUT,
        "{:?}",
        mcp.status()
    );
    let status = &mcp.status()["down"];
    assert!(!status.connected);
    assert!(!status.error.is_empty());
    assert!(status.error.chars().count() <= 256);
    assert!(
        status.error.contains("Connection refused"),
        "the root cause is shown: {}",
        status.error
    );
    assert_eq!(mcp.counts().errors, 1);
    assert!(mcp.tools_snapshot().is_empty());
    mcp.shutdown().await;
}

#[tokio::test]
async fn an_http_server_that_goes_away_comes_back_with_a_full_rediscovery() {
    let mut server = FastMcp::spawn().await;
    let mcp = start(vec![http("dyn", &server.url)]);
    wait_ready(&mcp, "dyn").await;
    mcp.call_tool("mcp__dyn__add_tool", json!({"name": "ephemeral"}))
        .await
        .unwrap();
    assert_eventually!(
        mcp.tool("mcp__dyn__ephemeral").is_some(),
        timeout = READY_TIMEOUT,
        "the added tool never appeared"
    );

    server.kill().await;
    let err = mcp
        .call_tool("mcp__dyn__echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("MCP server 'dyn' "), "{text}");
    assert!(
        !text.contains("Transport ["),
        "no type names in errors: {text}"
    );
    assert_eventually!(
        mcp.server_state("dyn") != Some(ServerState::Ready),
        timeout = READY_TIMEOUT,
        "the loss was never noticed"
    );

    // The server comes back on the same port as a new process (without the added tool):
    // the reconnect ends in a full rediscovery.
    let _again = FastMcp::spawn_on(server.port).await;
    assert_eventually!(
        mcp.server_state("dyn") == Some(ServerState::Ready),
        timeout = READY_TIMEOUT,
        "never reconnected: {:?}",
        mcp.status()["dyn"]
    );
    let names: Vec<String> = mcp.tools_snapshot().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["add_tool", "echo", "header"]);
    assert_eq!(mcp.status()["dyn"].reconnects, 1);
    let out = mcp
        .call_tool("mcp__dyn__echo", json!({"text": "back"}))
        .await
        .unwrap();
    assert_eq!(out.text, "echo: back");
    mcp.shutdown().await;
}
