//! The original Python SDK (turnstone 0.9.6, from PyPI) runs unchanged against our node
//! (node spec §8): `tests/py/sdk_compat.py` drives a `turnstone-server` process — health,
//! workstreams, `send_and_wait` (which needs the per-workstream `ws_state` idle of §2.7),
//! approvals through the event stream and during `send_and_wait`, the dashboard, close.
//!
//! The SDK lives in the venv that `scripts/python-venv` creates (`scripts/test` runs it and
//! exports `TURNSTONE_PY_VENV`); without it this test fails and says so.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// Generous: a debug build on a loaded 2-core machine. Guards against hangs only.
const PROCESS_DEADLINE: Duration = Duration::from_secs(60);

/// The checks the script must report as passed, in order (one `ok <name>: …` line each).
const CHECKS: &[&str] = &[
    "health",
    "auth.rejects_bad_token",
    "setup.rejects_bad_token",
    "setup.with_token",
    "list_workstreams",
    "create_workstream",
    "list_workstreams.includes_new",
    "send_and_wait.not_timed_out",
    "send_and_wait.content",
    "stream_events.connected",
    "send.tool",
    "stream_events.approve_request",
    "stream_events.approve_request.verdict",
    "approve",
    "stream_events.approval_resolved",
    "stream_events.tool_result",
    "stream_events.content",
    "stream_events.ws_state_idle",
    "send_and_wait.approve_request",
    "send_and_wait.approve",
    "send_and_wait.returned",
    "send_and_wait.tool.not_timed_out",
    "send_and_wait.tool_results",
    "send_and_wait.tool.content",
    "dashboard.row",
    "dashboard.aggregate",
    "dashboard.tool_calls",
    "close_workstream",
    "list_workstreams.after_close",
];

/// The venv's interpreter: `$TURNSTONE_PY_VENV`, else the default of `scripts/python-venv`.
pub(crate) fn venv_python() -> PathBuf {
    let venv = match std::env::var_os("TURNSTONE_PY_VENV") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home).join(".cache/turnstone-py-venv")
        }
    };
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "no Python SDK venv at {} ({} is missing): run `scripts/python-venv` (scripts/test \
         does) and set TURNSTONE_PY_VENV to the path it prints",
        venv.display(),
        python.display()
    );
    python
}

/// A running `turnstone-server`, killed when dropped (also when the test panics).
pub(crate) struct Server {
    child: Child,
    /// Kept open: the server must never write to a closed stdout.
    stdout: Lines<BufReader<ChildStdout>>,
    pub(crate) url: String,
    stderr_path: PathBuf,
}

impl Server {
    pub(crate) async fn start(dir: &Path, token: &str) -> Self {
        Self::start_with(dir, token, &[]).await
    }

    /// [`Server::start`] with more flags.
    pub(crate) async fn start_with(dir: &Path, token: &str, extra: &[&str]) -> Self {
        let binary =
            turnstone_e2e::workspace_binary("turnstone-server").unwrap_or_else(|e| panic!("{e}"));
        let stderr_path = dir.join("server.stderr");
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let cwd = dir.join("cwd");
        std::fs::create_dir_all(&cwd).unwrap();
        let mut cmd = Command::new(binary);
        cmd.args(["--host", "127.0.0.1", "--port", "0", "--cwd"])
            .arg(&cwd)
            .args(extra)
            .current_dir(&cwd)
            // The built-in scripted model, and nothing from the caller's shell.
            .env_remove("TURNSTONE_BASE_URL")
            .env_remove("TURNSTONE_MODEL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("TURNSTONE_HOST")
            .env_remove("TURNSTONE_PORT")
            .env_remove("TURNSTONE_NODE_ID")
            .env_remove("TURNSTONE_AUTH_ENABLED")
            .env_remove("TURNSTONE_JWT_SECRET")
            // Storage (where the node has it) defaults to a file in its cwd: the temp dir.
            .env_remove("TURNSTONE_DB_BACKEND")
            .env_remove("TURNSTONE_DB_PATH")
            .env_remove("TURNSTONE_DB_URL")
            .env("TURNSTONE_AUTH_TOKEN", token)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        // Built before anything can panic, so that Drop kills the process in every case.
        let mut server = Self {
            child,
            stdout,
            url: String::new(),
            stderr_path,
        };
        let line = match tokio::time::timeout(PROCESS_DEADLINE, server.stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => panic!(
                "no listening line from turnstone-server: {other:?}\nstderr:\n{}",
                server.stderr()
            ),
        };
        server.url = line
            .split_once(" listening on ")
            .map(|(_, url)| url.trim().to_string())
            .filter(|url| url.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        server
    }

    /// The next line the server prints (within the process deadline).
    pub(crate) async fn next_line(&mut self) -> String {
        match tokio::time::timeout(PROCESS_DEADLINE, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => panic!(
                "no line from turnstone-server: {other:?}\n{}",
                self.stderr()
            ),
        }
    }

    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Already exited is fine; nothing else to do about a failed kill in a destructor.
        let _ = self.child.start_kill();
    }
}

/// Runs the script and returns its exit status, stdout and stderr.
async fn run_script(python: &Path, url: &str, token: &str) -> (ExitStatus, String, String) {
    let mut cmd = super::cluster::python_mq::python_script(python, "sdk_compat.py");
    cmd.args([url, token]);
    // httpx honours proxy variables; the node is on loopback.
    for var in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        cmd.env_remove(var).env_remove(var.to_lowercase());
    }
    let child = cmd.spawn().unwrap();
    let output = tokio::time::timeout(PROCESS_DEADLINE, child.wait_with_output())
        .await
        .expect("sdk_compat.py did not finish in time")
        .unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_original_python_sdk_drives_the_node_unchanged() {
    let python = venv_python();
    let dir = tempfile::tempdir().unwrap();
    let token = format!("sdk-compat-{}", std::process::id());
    let server = Server::start(dir.path(), &token).await;

    let (status, stdout, stderr) = run_script(&python, &server.url, &token).await;
    let report = format!(
        "sdk_compat.py exited with {status}\n--- stdout\n{stdout}--- stderr\n{stderr}\
         --- server stderr\n{}",
        server.stderr()
    );
    assert!(status.success(), "{report}");
    assert!(!stdout.lines().any(|l| l.starts_with("FAIL ")), "{report}");
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .filter_map(|l| l.split_once(':').map(|(name, _)| name))
        .collect();
    assert_eq!(passed, CHECKS, "{report}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("all {} checks passed", CHECKS.len())),
        "{report}"
    );
    drop(server);
}
