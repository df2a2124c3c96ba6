//! Whole-cluster tests with the real binaries: `turnstone-fake-llm`, `turnstone-server`
//! nodes, `turnstone-bridge`s, real Redis — and `turnstone-cluster up` itself.
//!
//! The other packages' binaries are looked up next to this test's `target/<profile>/`
//! directory ([`super::processes`]): build them first with `cargo build --workspace --bins`
//! (scripts/test does).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use turnstone_console::model::CONSOLE_VERSION;

use super::*;

/// The scripted model server (`turnstone-fake-llm`) on a free port: the process and its URL.
pub(super) async fn start_llm(dir: &Path) -> (Proc, String) {
    let mut cmd = Command::new(workspace_binary("turnstone-fake-llm"));
    cmd.args(["--port", "0"]);
    let mut llm = Proc::spawn(cmd, dir.join("llm.log"));
    let url = llm.line_after(" listening on ").await;
    (llm, url)
}

pub(super) struct ClusterNode {
    pub(super) url: String,
    pub(super) node: Proc,
    _bridge: Proc,
}

pub(super) async fn start_node(
    dir: &Path,
    prefix: &str,
    id: &str,
    llm: &str,
    version: Option<&str>,
    max_ws: usize,
) -> ClusterNode {
    let cwd = dir.join(id);
    std::fs::create_dir_all(&cwd).unwrap();
    let mut cmd = Command::new(workspace_binary("turnstone-server"));
    cmd.args(["--host", "127.0.0.1", "--port", "0", "--node-id", id])
        .arg("--db-path")
        .arg(cwd.join("node.db"))
        .arg("--cwd")
        .arg(&cwd)
        .args(["--base-url", llm, "--max-workstreams", &max_ws.to_string()])
        .current_dir(&cwd)
        .env("TURNSTONE_JWT_SECRET", SECRET)
        .env("TURNSTONE_AUTH_TOKEN", NODE_TOKEN)
        .env_remove("TURNSTONE_AUTH_ENABLED")
        .env_remove("TURNSTONE_NODE_ID")
        .env_remove("TURNSTONE_ADVERTISED_VERSION");
    if let Some(v) = version {
        cmd.env("TURNSTONE_ADVERTISED_VERSION", v);
    }
    let mut node = Proc::spawn(cmd, dir.join(format!("{id}.log")));
    let url = node.line_after(" listening on ").await;
    let mut cmd = Command::new(workspace_binary("turnstone-bridge"));
    cmd.args([
        "--server-url",
        &url,
        "--redis-url",
        REDIS_URL,
        "--node-id",
        id,
    ])
    .args([
        "--prefix",
        prefix,
        "--heartbeat-ttl",
        "4",
        "--probe-interval-ms",
        "300",
    ])
    .args(["--auth-token", NODE_TOKEN])
    .env("TURNSTONE_JWT_SECRET", SECRET)
    .env_remove("TURNSTONE_NODE_ID");
    let bridge = Proc::spawn(cmd, dir.join(format!("bridge-{id}.log")));
    ClusterNode {
        url,
        node,
        _bridge: bridge,
    }
}

#[tokio::test]
async fn a_whole_cluster_places_flags_drift_proxies_and_notices_a_lost_node() {
    let p = prefix();
    let dir = tempfile::tempdir().unwrap();
    let (_llm, llm_url) = start_llm(dir.path()).await;
    let n1 = start_node(dir.path(), &p, "node-1", &llm_url, None, 50).await;
    let n2 = start_node(dir.path(), &p, "node-2", &llm_url, None, 50).await;
    let n3 = start_node(dir.path(), &p, "node-3", &llm_url, Some("9.9.9"), 100).await;
    let console = TestConsole::start(&p).await;
    console
        .wait_for_nodes(&["node-1", "node-2", "node-3"])
        .await;

    // node-1 gets busier than node-2.
    let http = reqwest::Client::new();
    for i in 0..2 {
        let r = http
            .post(format!("{}/v1/api/workstreams/new", n1.url))
            .bearer_auth(NODE_TOKEN)
            .json(&json!({"name": format!("busy-{i}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    turnstone_testkit::assert_eventually!(
        console.get("/v1/api/cluster/overview").await.1["workstreams"] == 5,
        timeout = Duration::from_secs(20),
        "every workstream seen: {}",
        console.get("/v1/api/cluster/overview").await.1
    );

    // node-3 reports another version: flagged, and skipped although it is the emptiest.
    let (_, o) = console.get("/v1/api/cluster/overview").await;
    assert_eq!(o["version_drift"], true, "{o}");
    assert_eq!(o["versions"], json!([CONSOLE_VERSION, "9.9.9"]));
    assert_eq!(o["drifted_nodes"], json!(["node-3"]));

    let mut sse = console.sse("/v1/api/cluster/events").await;
    assert_eq!(sse.next().await["type"], "snapshot");
    let (status, created) = console
        .post(
            "/v1/api/cluster/workstreams/new",
            r#"{"node_id": "auto", "name": "auto-placed", "initial_message": "hello cluster"}"#,
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["target_node"], "node-2");
    // The bridge created it on node-2; the console hears of it.
    let event = sse
        .until("ws_created", |e| e["name"] == "auto-placed")
        .await;
    assert_eq!(event["node_id"], "node-2", "{event}");
    turnstone_testkit::assert_eventually!(
        console
            .get("/v1/api/cluster/workstreams?search=auto-placed")
            .await
            .1["workstreams"][0]["node"]
            == "node-2",
        timeout = Duration::from_secs(20),
        "the placed workstream is listed on node-2"
    );

    // The proxied node UI in Chromium, with the dashboard around it.
    super::browser::run_script(
        &console.url,
        TOKEN,
        &["node-1", "node-2", "node-3"],
        Some("node-3"),
        "node-1",
        &super::browser::artifacts_dir("console-cluster"),
    )
    .await;

    // node-2 dies: its bridge withdraws the heartbeat, the console reports the loss.
    n2.node.signal(rustix::process::Signal::KILL);
    let lost = sse.until("node_lost", |e| e["node_id"] == "node-2").await;
    assert_eq!(lost, json!({"type": "node_lost", "node_id": "node-2"}));
    let (_, o) = console.get("/v1/api/cluster/overview").await;
    assert_eq!(o["nodes"], 2);
    drop((n1, n3));
}

#[tokio::test]
async fn the_launcher_runs_a_cluster_and_leaves_nothing_behind() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_turnstone-cluster"));
    for sibling in turnstone_console::launcher::SIBLINGS {
        workspace_binary(sibling);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(&bin);
    cmd.args(["up", "--nodes", "2", "--port", "0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env_remove("TURNSTONE_JWT_SECRET")
        .env_remove("TURNSTONE_AUTH_TOKEN");
    let mut launcher = Proc::spawn(cmd, dir.path().join("launcher.log"));
    let stdout = launcher.child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let (mut console_url, mut token, mut pids) = (String::new(), String::new(), Vec::new());
    let up = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(u) = line.strip_prefix("console: ") {
                console_url = u.trim().trim_end_matches('/').to_string();
            } else if let Some(t) = line.strip_prefix("login token: ") {
                token = t.trim().to_string();
            } else if let Some(list) = line.strip_prefix("pids: ") {
                pids = list
                    .split_whitespace()
                    .map(|p| p.parse::<i32>().unwrap())
                    .collect();
            } else if line.starts_with("cluster up") {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(up, Ok(true)),
        "the launcher did not come up; log:\n{}",
        std::fs::read_to_string(&launcher.log).unwrap_or_default()
    );
    assert!(
        console_url.starts_with("http://127.0.0.1:"),
        "{console_url}"
    );
    assert!(token.starts_with("ts_"), "{token}");
    assert_eq!(
        pids.len(),
        7,
        "redis, model, 2 nodes, 2 bridges, console: {pids:?}"
    );

    let http = reqwest::Client::new();
    let get = |path: &str| {
        let req = http
            .get(format!("{console_url}{path}"))
            .bearer_auth(&token)
            .send();
        async move {
            req.await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    turnstone_testkit::assert_eventually!(
        {
            let n = get("/v1/api/cluster/nodes").await;
            n["total"] == 2
                && n["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|x| x["last_seen"].is_number())
        },
        timeout = Duration::from_secs(30),
        "both nodes discovered and polled"
    );
    let created: serde_json::Value = http
        .post(format!("{console_url}/v1/api/cluster/workstreams/new"))
        .bearer_auth(&token)
        .json(&json!({"name": "launched", "initial_message": "hi"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["status"], "ok", "{created}");
    turnstone_testkit::assert_eventually!(
        get("/v1/api/cluster/workstreams?search=launched").await["total"] == 1,
        timeout = Duration::from_secs(30),
        "the workstream made through the console exists"
    );

    // SIGTERM: every child stops, the launcher exits cleanly.
    launcher.signal(rustix::process::Signal::TERM);
    let status = tokio::time::timeout(Duration::from_secs(60), launcher.child.wait())
        .await
        .expect("the launcher stops within 60 s")
        .unwrap();
    assert!(status.success(), "{status:?}");
    for pid in pids {
        let pid = rustix::process::Pid::from_raw(pid).unwrap();
        assert!(
            rustix::process::test_kill_process(pid).is_err(),
            "child {pid:?} still running"
        );
    }
}

#[tokio::test]
async fn the_launcher_names_the_package_when_redis_server_is_missing() {
    for sibling in turnstone_console::launcher::SIBLINGS {
        workspace_binary(sibling);
    }
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_turnstone-cluster"))
        .args(["up", "--nodes", "1"])
        .env("PATH", empty.path())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("redis-server was not found")
            && stderr.contains("Debian package `redis-server`")
            && stderr.contains("--redis-url"),
        "{stderr}"
    );
}
