//! Configuration parsing and name validation.

use std::time::Duration;

use serde_json::json;
use turnstone_mcp::{
    McpConfigError, McpManager, McpServerConfig, McpTransportConfig, ServerState, load_mcp_json,
    parse_mcp_json, parse_servers_value, parse_toml_config, validate_server_name,
};

#[test]
fn toml_servers_parse_stdio_and_http() {
    let servers = parse_toml_config(
        r#"
[model]
default = "x"

[mcp.servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
cwd = "/srv"
auto_approve = true
tool_timeout_secs = 5

[mcp.servers.github.env]
GITHUB_TOKEN = "ghp_x"

[mcp.servers.remote]
type = "http"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer abc" }
startup_timeout_secs = 2.5
"#,
    )
    .unwrap();
    assert_eq!(servers.len(), 2);
    let gh = &servers[0];
    assert_eq!(gh.name, "github");
    assert!(gh.auto_approve);
    assert_eq!(gh.call_timeout, Duration::from_secs(5));
    match &gh.transport {
        McpTransportConfig::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            assert_eq!(command, "npx");
            assert_eq!(args, &["-y", "@modelcontextprotocol/server-github"]);
            assert_eq!(env.get("GITHUB_TOKEN").map(String::as_str), Some("ghp_x"));
            assert_eq!(cwd.as_deref(), Some(std::path::Path::new("/srv")));
        }
        other => panic!("expected stdio, got {other:?}"),
    }
    let remote = &servers[1];
    assert_eq!(remote.transport_name(), "http");
    assert!(!remote.auto_approve);
    assert_eq!(remote.startup_timeout, Duration::from_millis(2500));
    match &remote.transport {
        McpTransportConfig::Http { url, headers } => {
            assert_eq!(url, "https://mcp.example.com/mcp");
            assert_eq!(
                headers.get("Authorization").map(String::as_str),
                Some("Bearer abc")
            );
        }
        other => panic!("expected http, got {other:?}"),
    }
    // No [mcp] section: no servers.
    assert!(
        parse_toml_config("[model]\ndefault = \"x\"\n")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn mcp_servers_json_parses_with_url_meaning_http_and_disabled_skipped() {
    let servers = parse_mcp_json(
        r#"{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "web": {"url": "http://127.0.0.1:9/mcp"},
            "typed": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
            "off": {"command": "x", "disabled": true}
        }}"#,
    )
    .unwrap();
    let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["fs", "typed", "web"]);
    assert_eq!(servers[0].transport_name(), "stdio");
    assert_eq!(servers[1].transport_name(), "http");
    assert_eq!(servers[2].transport_name(), "http");
}

#[test]
fn names_with_double_underscore_or_bad_characters_are_refused_naming_the_server() {
    for bad in [
        "my__server",
        "",
        "has space",
        "dot.name",
        "ünï",
        "trailing_",
    ] {
        let err = validate_server_name(bad).unwrap_err();
        let McpConfigError::InvalidName { server, .. } = &err else {
            panic!("{bad:?}: expected InvalidName, got {err:?}");
        };
        assert_eq!(server, bad);
        assert!(err.to_string().contains(&format!("'{bad}'")), "{err}");
    }
    assert!(
        validate_server_name("my__server")
            .unwrap_err()
            .to_string()
            .contains("'__'")
    );
    for good in ["github", "my-server", "a_b", "S3", "_x"] {
        validate_server_name(good).unwrap();
    }
    // Through every entry point.
    let toml_err = parse_toml_config("[mcp.servers.a__b]\ncommand = \"x\"\n").unwrap_err();
    assert!(toml_err.to_string().contains("'a__b'"), "{toml_err}");
    let json_err = parse_mcp_json(r#"{"mcpServers": {"x__y": {"command": "c"}}}"#).unwrap_err();
    assert!(
        json_err.to_string().contains("'x__y'") && json_err.to_string().contains("__"),
        "{json_err}"
    );
    assert!(McpServerConfig::stdio("p__q", "c", ["a"]).is_err());
    assert!(McpServerConfig::http("p__q", "http://127.0.0.1:1/mcp").is_err());
}

#[test]
fn malformed_entries_get_clear_errors() {
    let cases = [
        (json!({"nothing": 1}), "needs a `command`"),
        (
            json!({"type": "sse", "url": "http://h/sse"}),
            "not supported",
        ),
        (
            json!({"type": "carrier-pigeon", "command": "x"}),
            "unknown type",
        ),
        (json!({"type": "http"}), "needs a `url`"),
        (json!({"url": "ftp://h/x"}), "http:// or https://"),
        (
            json!({"url": "http://h/mcp", "headers": {"Accept": "x"}}),
            "set by the MCP transport",
        ),
        (
            json!({"url": "http://h/mcp", "headers": {"bad header": "x"}}),
            "not a valid HTTP header name",
        ),
        (
            json!({"command": "x", "args": "not-a-list"}),
            "invalid type",
        ),
        (json!({"command": ""}), "`command` is empty"),
        (
            json!({"command": "x", "startup_timeout_secs": -1}),
            "between 0 and 86400",
        ),
        (json!("just a string"), "expected a table"),
    ];
    for (entry, needle) in cases {
        let err = parse_servers_value(&json!({"srv": entry.clone()})).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("'srv'"),
            "{entry}: error does not name the server: {text}"
        );
        assert!(
            text.contains(needle),
            "{entry}: expected {needle:?} in {text}"
        );
    }
    let err = parse_mcp_json("{\"servers\": 3}").unwrap_err();
    assert!(err.to_string().contains("table of name"), "{err}");
    let err = parse_mcp_json("{").unwrap_err();
    assert!(err.to_string().contains("invalid JSON"), "{err}");
    let err = parse_mcp_json("{\"other\": {}}").unwrap_err();
    assert!(err.to_string().contains("mcpServers"), "{err}");
}

#[test]
fn load_mcp_json_reads_a_file_and_reports_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    std::fs::write(&path, r#"{"mcpServers": {"one": {"command": "true"}}}"#).unwrap();
    let servers = load_mcp_json(&path).unwrap();
    assert_eq!(servers[0].name, "one");
    let missing = dir.path().join("absent.json");
    let err = load_mcp_json(&missing).unwrap_err();
    assert!(matches!(err, McpConfigError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("absent.json"), "{err}");
}

#[tokio::test]
async fn a_hand_built_config_with_a_bad_name_is_reported_failed_not_connected() {
    let mut bad = McpServerConfig::stdio("fine", "true", Vec::<String>::new()).unwrap();
    bad.name = "bad__name".into();
    let mcp = McpManager::start(vec![bad]);
    let status = mcp.status();
    let s = &status["bad__name"];
    let ServerState::Failed { reason } = &s.state else {
        panic!("expected failed, got {:?}", s.state);
    };
    assert!(reason.contains("'__'"), "{reason}");
    assert!(!s.connected);
    assert_eq!(mcp.counts().servers, 1);
    assert_eq!(mcp.counts().errors, 1);
    let err = mcp.refresh(Some("bad__name")).await.unwrap_err();
    assert!(err.to_string().contains("bad__name"), "{err}");
    let err = mcp.refresh(Some("nope")).await.unwrap_err();
    assert_eq!(err.to_string(), "MCP server 'nope' is not configured");
}

fn assert_send_sync<T: Send + Sync>(_: &T) {}
fn assert_send<T: Send>(_: T) {}

#[tokio::test]
async fn the_manager_and_its_futures_can_cross_threads() {
    let mcp = McpManager::start(Vec::new());
    assert_send_sync(&*mcp);
    assert_send(mcp.call_tool("mcp__x__y", json!({})));
    assert_send(mcp.read_resource("x", "memo://y"));
    assert_send(mcp.get_prompt("x", "p", json!({})));
    assert_send(mcp.refresh(None));
    assert_send(mcp.reconnect(None));
    assert_send(mcp.shutdown());
    // No servers: empty, and every lookup is a clear error.
    assert_eq!(mcp.counts(), turnstone_mcp::McpCounts::default());
    assert!(mcp.tools_snapshot().is_empty() && mcp.status().is_empty());
    assert_eq!(mcp.generation(), 0);
    let err = mcp.call_tool("mcp__x__y", json!({})).await.unwrap_err();
    assert_eq!(err.to_string(), "MCP tool 'mcp__x__y' is not available");
    let err = mcp.read_resource("x", "memo://y").await.unwrap_err();
    assert_eq!(err.to_string(), "MCP server 'x' is not configured");
    mcp.refresh(None).await.unwrap();
}

#[test]
fn start_outside_a_runtime_reports_failed_servers_instead_of_panicking() {
    let config = McpServerConfig::stdio("lonely", "true", Vec::<String>::new()).unwrap();
    let mcp = McpManager::start(vec![config]);
    let Some(ServerState::Failed { reason }) = mcp.server_state("lonely") else {
        panic!("expected failed: {:?}", mcp.status());
    };
    assert!(reason.contains("no Tokio runtime"), "{reason}");
}
