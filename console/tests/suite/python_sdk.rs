//! The original Python console SDK (`turnstone.sdk.TurnstoneConsole`, turnstone 0.9.6) runs
//! unchanged against our console: `tests/py/console_compat.py` reads overview, nodes,
//! workstreams, node detail and the snapshot, creates workstreams (auto, named, pool) and
//! opens the cluster event stream. The SDK lives in the venv `scripts/python-venv` creates
//! (`$TURNSTONE_PY_VENV`, else its default path); without it this test fails and says so.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use turnstone_console::model::CONSOLE_VERSION;

use super::*;

const CHECKS: &[&str] = &[
    "health",
    "overview.nodes",
    "overview.workstreams",
    "overview.states",
    "overview.versions",
    "nodes",
    "nodes.fields",
    "nodes.paged",
    "workstreams",
    "workstreams.fields",
    "workstreams.filtered",
    "workstreams.search",
    "node_detail",
    "snapshot",
    "create_workstream.auto",
    "create_workstream.node",
    "create_workstream.pool",
    "create_workstream.unknown_node",
    "stream_cluster_events.snapshot",
];

fn venv_python() -> PathBuf {
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
        "no Python SDK venv at {}: run `scripts/python-venv` (scripts/test does) and set \
         TURNSTONE_PY_VENV to the path it prints",
        venv.display()
    );
    python
}

#[tokio::test]
async fn the_original_python_console_sdk_works_unchanged() {
    let python = venv_python();
    let p = prefix();
    let busy = NodeServer::start("node-busy", CONSOLE_VERSION, 10).await;
    let empty = NodeServer::start("node-empty", CONSOLE_VERSION, 10).await;
    busy.add_workstreams(3).await;
    heartbeat(&p, "node-busy", &busy.url, 10).await;
    heartbeat(&p, "node-empty", &empty.url, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["node-busy", "node-empty"]).await;
    turnstone_testkit::assert_eventually!(
        console.get("/v1/api/cluster/overview").await.1["workstreams"] == 5,
        "all workstreams polled"
    );

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/py/console_compat.py");
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(&script)
        .args([console.url.as_str(), TOKEN, "node-empty", "node-busy"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONHOME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for var in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        cmd.env_remove(var).env_remove(var.to_lowercase());
    }
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        cmd.spawn().unwrap().wait_with_output(),
    )
    .await
    .expect("console_compat.py finishes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = format!(
        "exit {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
        output.status
    );
    assert!(output.status.success(), "{report}");
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .filter_map(|l| l.split_once(':').map(|(n, _)| n))
        .collect();
    assert_eq!(passed, CHECKS, "{report}");

    // What the SDK asked for really reached the queues.
    let auto = drain(&format!("{p}:inbound:node-empty")).await;
    assert_eq!(auto.len(), 1, "{auto:?}");
    assert_eq!(auto[0]["name"], "from-python");
    assert_eq!(auto[0]["initial_message"], "hello");
    let directed = drain(&format!("{p}:inbound:node-busy")).await;
    assert_eq!(directed.len(), 1);
    assert_eq!(directed[0]["name"], "directed");
    assert_eq!(drain(&format!("{p}:inbound")).await.len(), 1);
}
