//! The original Python MQ client (`turnstone.mq.client.TurnstoneClient` from turnstone 0.9.6)
//! drives our node + bridge unchanged: `tests/py/mq_compat.py` creates workstreams,
//! `send_and_wait`s (the reply must be complete, 20 times on fresh workstreams), approves a
//! tool call through the response list, asks for health and closes. `send_and_wait` without a
//! ws_id (the send creates the workstream) is run 20 times and its losses reported, not
//! asserted: the 0.9.6 client subscribes to the new channel only after `ws_created` arrives.
//!
//! The 0.9.6 client keeps its queues under `turnstone:` whatever prefix it is given (cluster
//! spec §5), so this test starts a private `redis-server` on a free port and runs the cluster
//! with the default prefix there. The venv comes from `scripts/python-venv` (see
//! `python_sdk.rs`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::harness::{BridgeProc, Mq, NodeProc, Proc, eventually, free_port};

/// Fresh workstreams per loop of the script.
const RUNS: usize = 20;
/// Guards against hangs only: two loops of 20 turns on a loaded debug build.
const SCRIPT_DEADLINE: Duration = Duration::from_secs(170);

pub(super) fn venv_python() -> PathBuf {
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
        "no Python venv at {}: run `scripts/python-venv` (scripts/test does) and set \
         TURNSTONE_PY_VENV to the path it prints",
        venv.display()
    );
    python
}

/// A throw-away `redis-server` on a free loopback port, without persistence.
pub(super) async fn private_redis() -> (Proc, u16, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("redis-server must be installed (scripts/test installs it)");
    let proc = Proc { child };
    let url = format!("redis://127.0.0.1:{port}/0");
    eventually("private redis-server up", Duration::from_secs(20), || {
        let url = url.clone();
        async move {
            let Ok(client) = redis::Client::open(url.as_str()) else {
                return false;
            };
            match client.get_multiplexed_async_connection().await {
                Ok(mut c) => redis::cmd("PING")
                    .query_async::<String>(&mut c)
                    .await
                    .is_ok(),
                Err(_) => false,
            }
        }
    })
    .await;
    (proc, port, dir)
}

/// `python tests/py/<script>` with a clean Python environment, output piped, killed on drop.
pub(crate) fn python_script(python: &Path, script: &str) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("py")
            .join(script),
    )
    .env("PYTHONDONTWRITEBYTECODE", "1")
    .env("PYTHONUNBUFFERED", "1")
    .env_remove("PYTHONPATH")
    .env_remove("PYTHONHOME")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn the_original_python_mq_client_drives_node_and_bridge_unchanged() {
    let python = venv_python();
    let (_redis, port, _redis_dir) = private_redis().await;
    let url = format!("redis://127.0.0.1:{port}/0");
    let mut mq = Mq::at(&url, "turnstone").await;
    let node = NodeProc::start("py-node").await;
    // The original client's `create_workstream` defaults to `auto_approve=True`: unchanged,
    // it needs a bridge that relays producers' auto-approve (docs/compatibility.md).
    let _bridge =
        BridgeProc::start_with(&node, &url, "turnstone", &["--allow-producer-auto-approve"]).await;

    let mut cmd = python_script(&python, "mq_compat.py");
    cmd.args([
        "127.0.0.1",
        &port.to_string(),
        &node.node_id,
        &RUNS.to_string(),
    ])
    .env(
        "MQ_COMPAT_DEADLINE",
        (SCRIPT_DEADLINE.as_secs() - 10).to_string(),
    );
    let output = tokio::time::timeout(SCRIPT_DEADLINE, cmd.spawn().unwrap().wait_with_output())
        .await
        .expect("mq_compat.py did not finish in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = format!(
        "mq_compat.py exited with {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
        output.status
    );
    assert!(output.status.success(), "{report}");
    assert!(!stdout.lines().any(|l| l.starts_with("FAIL ")), "{report}");
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .filter_map(|l| l.split_once(':').map(|(name, _)| name))
        .collect();
    let existing = format!("runs.existing_ws.{RUNS}");
    let expected = [
        "list_nodes",
        "create_workstream",
        "send_and_wait.not_timed_out",
        "send_and_wait.ok",
        "send_and_wait.ws_id",
        "send_and_wait.content",
        "approve.not_timed_out",
        "approve.approval_request",
        "approve.tool_result",
        "approve.content",
        "health",
        "close_workstream",
        existing.as_str(),
        "runs.new_ws",
    ];
    assert_eq!(passed, expected, "{report}");

    // Nothing went to the dead-letter list and every approval was answered once.
    let dead = mq.dead_letters().await;
    assert!(dead.is_empty(), "dead letters: {dead:?}\n{report}");
    drop(node);
}
