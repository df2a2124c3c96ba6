//! `web_search` over MCP (`search_backend = "mcp:<server>:<tool>"`) on a node, against the
//! real FastMCP fixture `search_server.py` over stdio (the MCP crate's
//! `tests/fixtures/setup.sh` makes its venv), driven by turns of the fake model.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use turnstone_mcp::{McpManager, McpServerConfig, McpTransportConfig, ServerState};
use turnstone_node::mcp_search::{McpSlot, backend_for};
use turnstone_tools::{Provenance, WebOptions, WebSearchTool};

use super::*;

fn fixtures() -> std::path::PathBuf {
    turnstone_testkit::mcp_fixtures::dir()
}

fn ensure_fixtures() {
    turnstone_testkit::mcp_fixtures::ensure()
}

fn python() -> String {
    turnstone_testkit::mcp_fixtures::python()
}

/// The search fixture as MCP server `finder`, logging each call's arguments to `log`.
fn finder(log: &Path) -> McpServerConfig {
    ensure_fixtures();
    let script = fixtures().join("search_server.py");
    let mut config =
        McpServerConfig::stdio("finder", python(), [script.to_str().unwrap()]).unwrap();
    config.startup_timeout = Duration::from_secs(90);
    config.call_timeout = Duration::from_secs(60);
    if let McpTransportConfig::Stdio { env, .. } = &mut config.transport {
        env.insert(
            "FIXTURE_SEARCH_LOG".into(),
            log.to_str().unwrap().to_string(),
        );
    }
    config
}

/// Starts MCP with `finder`, fills `slot` (as `turnstone-server` does once MCP starts) and
/// waits until the server is ready.
async fn start_finder(t: &TestNode, slot: &McpSlot, log: &Path) -> Arc<McpManager> {
    let mcp = McpManager::start(vec![finder(log)]);
    t.node.set_mcp(mcp.clone());
    slot.set(mcp.clone());
    turnstone_testkit::assert_eventually!(
        mcp.server_state("finder") == Some(ServerState::Ready),
        timeout = Duration::from_secs(90),
        "the search fixture never became ready: {:?}",
        mcp.status().get("finder")
    );
    mcp
}

/// Registers `web_search` with the backend `spec` names (replacing an earlier one), as the
/// node builds it from `[tools] search_backend`.
fn use_backend(t: &TestNode, spec: &str, slot: &McpSlot) {
    let web = WebOptions {
        enabled: true,
        search_backend: Some(spec.to_string()),
        search: backend_for(Some(spec), slot).unwrap(),
        ..WebOptions::default()
    };
    let registry = t.node.manager.engine().registry();
    registry.remove("web_search");
    registry
        .add(
            Arc::new(WebSearchTool::new(&web).unwrap()),
            Provenance::Builtin,
        )
        .unwrap();
}

/// Runs one turn in which the model calls `web_search` with `args`; returns the tool
/// result (`output`, `is_error`).
async fn search(t: &TestNode, events: &mut SseClient, args: Value) -> (String, bool) {
    let (status, body) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": format!("CALL:web_search {args}")}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let seen = events.until("turn_complete").await;
    let results: Vec<(String, bool)> = seen
        .iter()
        .filter(|e| e.kind() == "tool_result")
        .map(|e| {
            (
                e.data["output"].as_str().unwrap_or_default().to_string(),
                e.data["is_error"] == Value::Bool(true),
            )
        })
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    results.into_iter().next().unwrap()
}

/// The arguments the fixture's tools received, in call order.
fn logged(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn the_model_searches_the_web_through_an_mcp_tool() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let t = TestNode::start().await;
    // The tool is built before MCP starts, as in the server: it finds the manager later.
    let slot = McpSlot::new();
    use_backend(&t, "mcp:finder:search", &slot);
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    events.until("connected").await;

    let (out, is_error) = search(&t, &mut events, json!({"query": "async rust"})).await;
    assert!(is_error, "{out}");
    assert!(
        out.contains("mcp:finder:search: this node has no MCP servers"),
        "{out}"
    );

    let mcp = start_finder(&t, &slot, &log).await;
    let (out, is_error) = search(
        &t,
        &mut events,
        json!({"query": "async rust", "max_results": 2}),
    )
    .await;
    assert!(!is_error, "{out}");
    assert_eq!(
        out,
        "Results for \"async rust\":\n\
         \n1. Tokio - an asynchronous Rust runtime\n   https://tokio.rs/\n   \
         Tokio is an event-driven, non-blocking I/O platform for async Rust.\n\
         \n2. Asynchronous Programming in Rust\n   https://rust-lang.github.io/async-book/\n   \
         The async book explains futures and async Rust."
    );

    // The category reaches the tool's `category` parameter.
    let (out, is_error) = search(
        &t,
        &mut events,
        json!({"query": "rust", "category": "news"}),
    )
    .await;
    assert!(!is_error, "{out}");
    assert!(
        out.contains("1. Rust 1.85 released\n   https://blog.rust-lang.org/")
            && !out.contains("2. "),
        "{out}"
    );
    let (out, is_error) = search(&t, &mut events, json!({"query": "quantum gravity"})).await;
    assert!(!is_error);
    assert_eq!(out, "No results for \"quantum gravity\".");

    assert_eq!(
        logged(&log),
        [
            json!({"tool": "search", "query": "async rust", "max_results": 2, "category": "general"}),
            json!({"tool": "search", "query": "rust", "max_results": 5, "category": "news"}),
            json!({"tool": "search", "query": "quantum gravity", "max_results": 5, "category": "general"}),
        ]
    );
    mcp.shutdown().await;
}

#[tokio::test]
async fn text_answers_and_errors_of_mcp_search_tools() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let t = TestNode::start().await;
    let slot = McpSlot::new();
    let mcp = start_finder(&t, &slot, &log).await;
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    events.until("connected").await;

    // Text blocks with `Title:`/`URL:`/`Description:` become entries; the schema's `q` and
    // `limit` take the query and the count.
    use_backend(&t, "mcp:finder:lookup", &slot);
    let (out, is_error) =
        search(&t, &mut events, json!({"query": "async", "max_results": 2})).await;
    assert!(!is_error, "{out}");
    assert!(
        out.contains(
            "\n1. Tokio - an asynchronous Rust runtime\n   https://tokio.rs/\n   \
             Tokio is an event-driven"
        ) && out.contains(
            "\n2. Asynchronous Programming in Rust\n   https://rust-lang.github.io/async-book/"
        ) && !out.contains("\n3. "),
        "{out}"
    );
    assert_eq!(
        logged(&log).last().unwrap(),
        &json!({"tool": "lookup", "q": "async", "limit": 2})
    );

    // Text without a link is the one result.
    use_backend(&t, "mcp:finder:answer", &slot);
    let (out, is_error) = search(&t, &mut events, json!({"query": "why"})).await;
    assert!(!is_error, "{out}");
    assert_eq!(out, "Results for \"why\":\n\n1. The answer to 'why' is 42.");

    // Errors: the tool's own, a tool the server lacks, a server that is not configured.
    use_backend(&t, "mcp:finder:broken", &slot);
    let (out, is_error) = search(&t, &mut events, json!({"query": "x"})).await;
    assert!(is_error);
    assert!(
        out.starts_with("Error: web search failed: mcp:finder:broken: the tool reported an error:")
            && out.contains("the search index is offline"),
        "{out}"
    );
    use_backend(&t, "mcp:finder:nope", &slot);
    let (out, is_error) = search(&t, &mut events, json!({"query": "x"})).await;
    assert!(is_error);
    assert!(
        out.contains(
            "mcp:finder:nope: MCP server 'finder' has no tool 'nope' \
             (it offers: answer, broken, lookup, search)"
        ),
        "{out}"
    );
    use_backend(&t, "mcp:elsewhere:search", &slot);
    let (out, is_error) = search(&t, &mut events, json!({"query": "x"})).await;
    assert!(is_error);
    assert!(
        out.contains(
            "mcp:elsewhere:search: MCP server 'elsewhere' is not configured (configured: finder)"
        ),
        "{out}"
    );
    mcp.shutdown().await;
}
