//! The dashboard and a proxied node UI in a real headless Chromium
//! (`console/tests/browser/console.test.mjs`, with `playwright-core`): sign-in, live node
//! and workstream tables, drift flag, filters, the create dialog, click-through to
//! `/node/{id}/?ws_id=…`, and a message streamed through the proxy. Screenshots are kept in
//! `target/browser-artifacts/console*/`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use turnstone_console::model::CONSOLE_VERSION;

use super::*;

const CHROMIUM: &str = "/usr/bin/chromium";

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// Where screenshots go.
pub fn artifacts_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/browser-artifacts")
        .join(name)
}

/// Makes sure Chromium and playwright-core are there (installs the latter with `npm ci`
/// from the lock file when missing).
async fn ensure_tools() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "Chromium is missing at {CHROMIUM}: apt-get install chromium (scripts/services does it)"
    );
    let dir = browser_dir();
    if !dir.join("node_modules/playwright-core").exists() {
        let status = tokio::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .status()
            .await
            .expect("npm is installed");
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
}

/// Runs one browser script (`tests/browser/<script>`) with `vars` and the common ones;
/// panics with its output unless it exits 0 printing `marker`.
async fn run_browser(
    script: &str,
    marker: &str,
    console_url: &str,
    token: &str,
    artifacts: &Path,
    vars: &[(&str, &str)],
) {
    ensure_tools().await;
    std::fs::create_dir_all(artifacts).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(script)
        .current_dir(browser_dir())
        .env("CONSOLE_URL", console_url)
        .env("TURNSTONE_TOKEN", token)
        .env("TURNSTONE_CHROMIUM", CHROMIUM)
        .env("TURNSTONE_ARTIFACTS", artifacts)
        .env("TURNSTONE_PROFILE", profile.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("node is installed");
    let output = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the browser test finishes within 180 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(marker),
        "browser test {script} failed ({})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
}

/// Runs the dashboard script against a console; panics with its output on failure.
pub async fn run_script(
    console_url: &str,
    token: &str,
    nodes: &[&str],
    drift: Option<&str>,
    message_node: &str,
    artifacts: &Path,
) {
    let nodes = nodes.join(",");
    run_browser(
        "console.test.mjs",
        "console browser test: all steps passed",
        console_url,
        token,
        artifacts,
        &[
            ("EXPECT_NODES", &nodes),
            ("EXPECT_DRIFT", drift.unwrap_or("")),
            ("MESSAGE_NODE", message_node),
        ],
    )
    .await;
    for shot in ["console.png", "proxied-node.png", "console-dark.png"] {
        assert!(artifacts.join(shot).exists(), "screenshot {shot}");
    }
}

/// The Admin area (users, scheduled tasks, settings, models) on a console with storage, in
/// Chromium.
#[tokio::test]
async fn the_admin_area_manages_users_and_schedules_in_chromium() {
    let db = super::db::sqlite().await;
    let p = prefix();
    // A node with one memory, for the memories tab.
    let node = super::fake_node::FakeNode::start("node-m", CONSOLE_VERSION).await;
    *node.state.memories.lock().unwrap() = vec![serde_json::json!({
        "memory_id": "m-1", "name": "ui-memo", "description": "", "type": "project",
        "scope": "global", "scope_id": "", "content": "remember the browser",
    })];
    heartbeat(&p, "node-m", &node.url, 10).await;
    // Three model calls today, for the usage tab: ui-big once, ui-small twice.
    for (model, prompt, completion, tools) in [
        ("ui-big", 1200, 100, 1),
        ("ui-small", 200, 30, 2),
        ("ui-small", 100, 20, 0),
    ] {
        db.store
            .record_usage(turnstone_store::NewUsageEvent {
                user_id: "ui-user".into(),
                ws_id: "ws-ui".into(),
                node_id: "node-m".into(),
                model: model.into(),
                prompt_tokens: prompt,
                completion_tokens: completion,
                tool_calls_count: tools,
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let console = TestConsole::start_with_store(&p, db.store.clone()).await;
    console.wait_for_nodes(&["node-m"]).await;
    let artifacts = artifacts_dir("console-admin");
    run_browser(
        "admin.test.mjs",
        "admin browser test: all steps passed",
        &console.url,
        TOKEN,
        &artifacts,
        &[],
    )
    .await;
    for shot in [
        "admin-users.png",
        "admin-schedules.png",
        "admin-settings.png",
        "admin-models.png",
        "admin-models-reranker.png",
        "new-ws-pickers.png",
        "admin-tokens.png",
        "admin-policies.png",
        "admin-skills.png",
        "admin-memories.png",
        "admin-roles.png",
        "admin-usage.png",
        "admin-viewer.png",
    ] {
        assert!(artifacts.join(shot).exists(), "screenshot {shot}");
    }
    // What the browser did is in the store.
    let (_, users) = console.get("/v1/api/admin/users").await;
    assert_eq!(users["users"][0]["username"], "ui-user", "{users}");
    let (_, tasks) = console.get("/v1/api/admin/schedules").await;
    assert_eq!(
        tasks["tasks"],
        serde_json::json!([]),
        "the task was deleted"
    );
    // The setting saved in the browser is stored (the reset one is gone); the model too.
    let settings = db.store.list_settings().await.unwrap();
    let stored: Vec<(&str, &str)> = settings
        .iter()
        .map(|r| (r.key.as_str(), r.value.as_str()))
        .collect();
    assert_eq!(stored, [("tools.search", "\"off\"")]);
    assert_eq!(db.store.list_model_definitions().await.unwrap(), []);
    // The role assigned, the token revoked, the policy changed, the skill and memory gone.
    assert_eq!(
        users["users"][0]["roles"],
        serde_json::json!(["builtin-operator"])
    );
    assert!(db.store.list_api_tokens(None).await.unwrap().is_empty());
    let policies = db.store.list_tool_policies(None).await.unwrap();
    assert_eq!(
        policies
            .iter()
            .map(|p| (p.name.as_str(), p.action.as_str(), p.priority))
            .collect::<Vec<_>>(),
        [("ui-no-bash", "ask", 5)]
    );
    assert!(db.store.list_skills(false).await.unwrap().is_empty());
    assert!(node.state.memories.lock().unwrap().is_empty());
    // The role made with checkboxes is stored; the second one is gone.
    let roles = db.store.list_roles().await.unwrap();
    let made: Vec<(&str, &str, &str)> = roles
        .iter()
        .filter(|r| !r.builtin)
        .map(|r| {
            (
                r.name.as_str(),
                r.display_name.as_str(),
                r.permissions.as_str(),
            )
        })
        .collect();
    assert_eq!(made, [("ui-auditor", "UI auditor", "admin.usage,read")]);
}

#[tokio::test]
async fn the_dashboard_and_a_proxied_node_ui_work_in_chromium() {
    let p = prefix();
    let a = NodeServer::start("node-a", CONSOLE_VERSION, 10).await;
    let b = NodeServer::start("node-b", CONSOLE_VERSION, 10).await;
    let old = NodeServer::start("node-old", "0.0.1-old", 50).await;
    a.add_workstreams(2).await;
    for n in [&a, &b, &old] {
        heartbeat(&p, &n.node_id, &n.url, 10).await;
    }
    let console = TestConsole::start(&p).await;
    console
        .wait_for_nodes(&["node-a", "node-b", "node-old"])
        .await;
    run_script(
        &console.url,
        TOKEN,
        &["node-a", "node-b", "node-old"],
        Some("node-old"),
        "node-a",
        &artifacts_dir("console"),
    )
    .await;
    // The dialog's auto create went to the emptier, non-drifted node.
    let queued = drain(&format!("{p}:inbound:node-b")).await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["name"], "dialog-made");
    // The message sent through the proxied UI really ran on node-a.
    let made = a
        .workstream_named("from-browser")
        .await
        .expect("the workstream made through the proxy");
    let history = a.history(&made).await;
    assert!(
        history
            .iter()
            .any(|m| m["content"] == "Hello through the console proxy"),
        "{history:?}"
    );
}
