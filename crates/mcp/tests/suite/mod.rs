//! Shared helpers: the fixture servers and bounded waits.

mod config;
mod http;
mod startup;
mod stdio;

use std::{process::Stdio, sync::Arc, time::Duration};

use tokio::io::{AsyncBufReadExt, BufReader};
use turnstone_mcp::{McpManager, McpOptions, McpServerConfig, McpTransportConfig, ServerState};
use turnstone_testkit::assert_eventually;

/// Node servers start slowly on a loaded two-core machine: waits are bounded but generous.
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);

pub fn fixtures() -> std::path::PathBuf {
    turnstone_testkit::mcp_fixtures::dir()
}

pub fn ensure_fixtures() {
    turnstone_testkit::mcp_fixtures::ensure()
}

pub fn python() -> String {
    turnstone_testkit::mcp_fixtures::python()
}

/// A stdio server config with test-friendly timeouts.
pub fn stdio(name: &str, command: &str, args: &[&str]) -> McpServerConfig {
    let mut c = McpServerConfig::stdio(name, command, args.iter().copied()).unwrap();
    c.startup_timeout = READY_TIMEOUT;
    c.call_timeout = Duration::from_secs(60);
    c
}

pub fn node_server(name: &str, package: &str, args: &[&str]) -> McpServerConfig {
    ensure_fixtures();
    let script = fixtures()
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    let mut all = vec![script.to_str().unwrap()];
    all.extend_from_slice(args);
    stdio(name, "node", &all)
}

/// The low-level Python stdio server (`stdio_server.py`).
pub fn python_stdio(name: &str) -> McpServerConfig {
    ensure_fixtures();
    let script = fixtures().join("stdio_server.py");
    stdio(name, &python(), &[script.to_str().unwrap()])
}

pub fn with_env(mut c: McpServerConfig, key: &str, value: &str) -> McpServerConfig {
    if let McpTransportConfig::Stdio { env, .. } = &mut c.transport {
        env.insert(key.into(), value.into());
    }
    c
}

/// Options with a short backoff so reconnect tests do not idle.
pub fn quick_options() -> McpOptions {
    McpOptions {
        backoff_initial: Duration::from_millis(100),
        backoff_max: Duration::from_secs(2),
        ..McpOptions::default()
    }
}

pub async fn wait_ready(mcp: &McpManager, server: &str) {
    assert_eventually!(
        mcp.server_state(server) == Some(ServerState::Ready),
        timeout = READY_TIMEOUT,
        "server {server} never became ready: {:?}",
        mcp.status().get(server)
    );
}

pub fn start(configs: Vec<McpServerConfig>) -> Arc<McpManager> {
    McpManager::start_with(configs, quick_options())
}

/// The FastMCP streamable-HTTP fixture, killed on drop.
pub struct FastMcp {
    child: tokio::process::Child,
    pub url: String,
    pub port: u16,
}

impl FastMcp {
    pub async fn spawn() -> Self {
        Self::spawn_on(0).await
    }

    /// On a given port (0: a free one).
    pub async fn spawn_on(port: u16) -> Self {
        ensure_fixtures();
        let mut child = tokio::process::Command::new(python())
            .arg(fixtures().join("fastmcp_http.py"))
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn fastmcp_http.py");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(READY_TIMEOUT, lines.next_line())
            .await
            .expect("fastmcp_http.py printed no port in time")
            .unwrap()
            .expect("fastmcp_http.py exited before printing its port");
        let port: u16 = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
            port,
        }
    }

    /// Kills the server and waits until it is gone.
    pub async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }
}

/// Whether a process exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    turnstone_testkit::process_running(pid)
}
