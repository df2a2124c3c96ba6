//! Shared helpers: the fixture servers and bounded waits.

mod config;
mod http;
mod startup;
mod stdio;

use std::{
    path::PathBuf,
    process::Stdio,
    sync::{Arc, OnceLock},
    time::Duration,
};

use tokio::io::{AsyncBufReadExt, BufReader};
use turnstone_mcp::{McpManager, McpOptions, McpServerConfig, McpTransportConfig, ServerState};
use turnstone_testkit::assert_eventually;

/// Node servers start slowly on a loaded two-core machine: waits are bounded but generous.
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs `setup.sh` once per process, under a file lock (nextest runs tests in parallel
/// processes).
pub fn ensure_fixtures() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let lock = std::env::temp_dir().join("turnstone-mcp-fixtures.lock");
        let out = std::process::Command::new("flock")
            .arg(&lock)
            .arg(fixtures().join("setup.sh"))
            .output()
            .expect("run flock + setup.sh");
        assert!(
            out.status.success(),
            "tests/fixtures/setup.sh failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

pub fn python() -> String {
    let venv = std::env::var("TURNSTONE_MCP_VENV").unwrap_or_else(|_| {
        format!(
            "{}/.cache/turnstone-mcp-venv",
            std::env::var("HOME").unwrap_or_else(|_| "/root".into())
        )
    });
    format!("{venv}/bin/python")
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
