//! Start-up isolation: a server that hangs or cannot start never delays `start` or the
//! other servers.

use std::time::Duration;

use serde_json::json;
use turnstone_mcp::{McpError, McpManager, McpOptions, ServerState};
use turnstone_testkit::assert_eventually;

use super::{READY_TIMEOUT, python_stdio, quick_options, stdio, wait_ready};

#[tokio::test]
async fn a_hanging_server_does_not_delay_start_or_the_others() {
    // `sleep` never answers initialize; its startup timeout is far away.
    let mut hang = stdio("hang", "sleep", &["100000"]);
    hang.startup_timeout = Duration::from_secs(600);
    let mcp = McpManager::start_with(
        vec![hang, python_stdio("ok")],
        McpOptions {
            call_wait: Duration::from_millis(300),
            ..quick_options()
        },
    );
    // `start` returned while nothing is connected yet.
    assert_eq!(mcp.server_state("hang"), Some(ServerState::Connecting));
    assert_eq!(mcp.counts().servers, 2);

    wait_ready(&mcp, "ok").await;
    // The other server is ready and usable while the hanging one is still connecting.
    assert_eq!(mcp.server_state("hang"), Some(ServerState::Connecting));
    let out = mcp.call_tool("mcp__ok__ping", json!({})).await.unwrap();
    assert!(out.text.starts_with("pong "), "{}", out.text);
    assert_eq!(mcp.counts().connected, 1);
    assert!(mcp.tools_snapshot().iter().all(|t| t.server == "ok"));

    // A call to the hanging server waits only `call_wait`, then says why.
    let err = mcp.read_resource("hang", "memo://x").await.unwrap_err();
    assert!(matches!(err, McpError::NotConnected { .. }), "{err:?}");
    assert!(err.to_string().contains("still connecting"), "{err}");
    mcp.shutdown().await;
}

#[tokio::test]
async fn a_hanging_server_times_out_into_failed() {
    let mut hang = stdio("hang", "sleep", &["100000"]);
    hang.startup_timeout = Duration::from_millis(500);
    let mcp = McpManager::start(vec![hang]);
    assert_eventually!(
        matches!(mcp.server_state("hang"), Some(ServerState::Failed { .. })),
        timeout = READY_TIMEOUT,
        "{:?}",
        mcp.status()
    );
    let Some(ServerState::Failed { reason }) = mcp.server_state("hang") else {
        unreachable!()
    };
    assert!(reason.contains("timed out after 0.5s"), "{reason}");
    let err = mcp.read_resource("hang", "memo://x").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("is not connected (failed: timed out"),
        "{err}"
    );
    mcp.shutdown().await;
}

#[tokio::test]
async fn a_missing_command_fails_with_its_reason_and_others_work() {
    let missing = stdio("missing", "/nonexistent/turnstone-mcp-server", &[]);
    // A server that exits at once, saying why on stderr.
    let exits = stdio(
        "exits",
        "sh",
        &["-c", "echo 'fatal: no config' >&2; exit 2"],
    );
    let mcp = McpManager::start_with(vec![missing, exits, python_stdio("ok")], quick_options());
    wait_ready(&mcp, "ok").await;
    assert_eventually!(
        matches!(
            mcp.server_state("missing"),
            Some(ServerState::Failed { .. })
        ) && matches!(mcp.server_state("exits"), Some(ServerState::Failed { .. })),
        timeout = READY_TIMEOUT,
        "{:?}",
        mcp.status()
    );
    let status = mcp.status();
    assert!(
        status["missing"]
            .error
            .contains("cannot start `/nonexistent/turnstone-mcp-server`"),
        "{}",
        status["missing"].error
    );
    assert!(
        status["exits"].error.contains("fatal: no config"),
        "{}",
        status["exits"].error
    );
    assert!(mcp.call_tool("mcp__ok__ping", json!({})).await.is_ok());
    let counts = mcp.counts();
    assert_eq!((counts.servers, counts.connected, counts.errors), (3, 1, 2));
    mcp.shutdown().await;
}
