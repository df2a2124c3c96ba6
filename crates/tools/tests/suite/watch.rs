//! The `watch` tool over an in-memory [`WatchBackend`] (argument handling, limits, list and
//! cancel), and one poll of a real command with `run_poll`. The node's suite runs the same
//! tool over the real store.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::{Value, json};
use turnstone_tools::watch::{
    MAX_OUTPUT_CHARS, WatchBackend, WatchEntry, WatchRequest, bound_output, run_poll,
};
use turnstone_tools::{ChildEnv, NoOutput, Tool, ToolContext, ToolOutput, WatchTool};

/// Watches kept in a vector; `fail` makes every call fail like a broken database.
#[derive(Default)]
struct MemoryBackend {
    rows: Mutex<Vec<(WatchRequest, WatchEntry, bool)>>,
    fail: Mutex<bool>,
}

#[async_trait]
impl WatchBackend for MemoryBackend {
    async fn create(&self, request: WatchRequest) -> Result<WatchEntry, String> {
        if *self.fail.lock() {
            return Err("database is locked".into());
        }
        let mut rows = self.rows.lock();
        let entry = WatchEntry {
            watch_id: format!("{:032x}", rows.len() + 0xabc0),
            name: request.name.clone(),
            command: request.command.clone(),
            interval_secs: request.interval_secs,
            stop_on: request.stop_on.clone(),
            max_polls: request.max_polls,
            poll_count: 0,
            last_poll: None,
            next_poll: Some("2026-01-01T00:00:00.000000+00:00".into()),
        };
        rows.push((request, entry.clone(), true));
        Ok(entry)
    }

    async fn active(&self, ws_id: &str) -> Result<Vec<WatchEntry>, String> {
        if *self.fail.lock() {
            return Err("database is locked".into());
        }
        Ok(self
            .rows
            .lock()
            .iter()
            .filter(|(r, _, active)| *active && r.ws_id == ws_id)
            .map(|(_, e, _)| e.clone())
            .collect())
    }

    async fn cancel(&self, watch_id: &str) -> Result<bool, String> {
        let mut rows = self.rows.lock();
        for (_, e, active) in rows.iter_mut() {
            if e.watch_id == watch_id && *active {
                *active = false;
                return Ok(true);
            }
        }
        Ok(false)
    }
}

fn setup() -> (Arc<MemoryBackend>, WatchTool, ToolContext) {
    let backend = Arc::new(MemoryBackend::default());
    let tool = WatchTool::new(backend.clone()).unwrap();
    let ctx = ToolContext::new("/tmp").for_workstream("ws-1", "node-a");
    (backend, tool, ctx)
}

async fn call(tool: &WatchTool, args: Value, ctx: &ToolContext) -> Result<ToolOutput, String> {
    let prepared = tool.prepare(args, ctx)?;
    Ok(tool.execute(&prepared, ctx, &NoOutput).await)
}

fn create(name: &str) -> Value {
    json!({"action": "create", "command": "cat status.txt", "name": name,
           "poll_every": "30s", "stop_on": "\"done\" in output"})
}

#[tokio::test]
async fn create_needs_approval_and_records_the_watch() {
    let (backend, tool, ctx) = setup();
    let prepared = tool.prepare(create("ci"), &ctx).unwrap();
    assert!(prepared.needs_approval);
    assert_eq!(prepared.approval_label, "watch");
    assert_eq!(
        prepared.header,
        "⚙ watch: create 'ci' every 30s: cat status.txt"
    );
    assert!(
        prepared.preview.contains("stop on: \"done\" in output"),
        "{}",
        prepared.preview
    );

    let out = tool.execute(&prepared, &ctx, &NoOutput).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("Watch 'ci' created (id 00000000)"),
        "{}",
        out.content
    );
    let rows = backend.rows.lock();
    let (request, _, active) = &rows[0];
    assert!(*active);
    assert_eq!(
        *request,
        WatchRequest {
            ws_id: "ws-1".into(),
            node_id: "node-a".into(),
            name: "ci".into(),
            command: "cat status.txt".into(),
            interval_secs: 30.0,
            stop_on: Some("\"done\" in output".into()),
            max_polls: 100,
            created_by: "model".into(),
        }
    );
}

#[tokio::test]
async fn list_and_cancel_are_auto_approved_and_work_by_name_or_id_prefix() {
    let (backend, tool, ctx) = setup();
    assert_eq!(
        call(&tool, json!({"action": "list"}), &ctx)
            .await
            .unwrap()
            .content,
        "No active watches."
    );
    for name in ["ci", "deploy"] {
        call(&tool, create(name), &ctx).await.unwrap();
    }
    let list = tool.prepare(json!({"action": "list"}), &ctx).unwrap();
    assert!(!list.needs_approval);
    let text = tool.execute(&list, &ctx, &NoOutput).await.content;
    assert!(text.starts_with("2 active watches:\n- ci (id "), "{text}");
    assert!(text.contains("`cat status.txt` every 30s, polls 0/100, stop_on: \"done\" in output"));

    let cancel = tool
        .prepare(json!({"action": "cancel", "name": "deploy"}), &ctx)
        .unwrap();
    assert!(!cancel.needs_approval);
    let out = tool.execute(&cancel, &ctx, &NoOutput).await;
    assert!(
        out.content.starts_with("Watch 'deploy' (id "),
        "{}",
        out.content
    );
    assert!(!backend.rows.lock()[1].2);

    // By id prefix; ambiguous and unknown keys are errors that list what exists.
    let out = call(&tool, json!({"action": "cancel", "name": "0000"}), &ctx)
        .await
        .unwrap();
    assert!(
        !out.is_error,
        "only one active watch matches: {}",
        out.content
    );
    assert!(!backend.rows.lock()[0].2);
    call(&tool, create("a"), &ctx).await.unwrap();
    call(&tool, create("b"), &ctx).await.unwrap();
    let out = call(&tool, json!({"action": "cancel", "name": "000"}), &ctx)
        .await
        .unwrap();
    assert!(
        out.is_error && out.content.contains("matches 2 watches"),
        "{}",
        out.content
    );
    let out = call(&tool, json!({"action": "cancel", "name": "zzz"}), &ctx)
        .await
        .unwrap();
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content.contains("Active watches: a (0000"),
        "{}",
        out.content
    );
    let e = tool.prepare(json!({"action": "cancel"}), &ctx).unwrap_err();
    assert!(e.contains("cancel needs 'name'"), "{e}");
}

#[tokio::test]
async fn the_sixth_watch_and_duplicate_names_are_refused() {
    let (backend, tool, ctx) = setup();
    for i in 0..5 {
        let out = call(&tool, create(&format!("w{i}")), &ctx).await.unwrap();
        assert!(!out.is_error, "{}", out.content);
    }
    let out = call(&tool, create("w5"), &ctx).await.unwrap();
    assert!(out.is_error);
    assert!(
        out.content.contains("already has 5 active watches"),
        "{}",
        out.content
    );
    // Another workstream has its own budget; cancelling frees a slot.
    let other = ToolContext::new("/tmp").for_workstream("ws-2", "node-a");
    assert!(!call(&tool, create("w0"), &other).await.unwrap().is_error);
    call(&tool, json!({"action": "cancel", "name": "w4"}), &ctx)
        .await
        .unwrap();
    let dup = call(&tool, create("w0"), &ctx).await.unwrap();
    assert!(dup.is_error && dup.content.contains("named 'w0' is already active"));
    assert!(!call(&tool, create("w4"), &ctx).await.unwrap().is_error);
    assert_eq!(backend.rows.lock().len(), 7);
}

#[tokio::test]
async fn parallel_creates_respect_the_limit() {
    let (backend, tool, ctx) = setup();
    let tool = Arc::new(tool);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let (tool, ctx) = (tool.clone(), ctx.clone());
        tasks.spawn(async move { call(&tool, create(&format!("p{i}")), &ctx).await });
    }
    let mut ok = 0;
    while let Some(done) = tasks.join_next().await {
        if !done.unwrap().unwrap().is_error {
            ok += 1;
        }
    }
    assert_eq!(ok, 5);
    assert_eq!(backend.rows.lock().len(), 5);
}

#[tokio::test]
async fn bad_arguments_and_storage_failures_are_tool_errors() {
    let (backend, tool, ctx) = setup();
    for (args, expected) in [
        (json!({"action": "remove"}), "unknown action 'remove'"),
        (
            json!({"command": "ls"}),
            "missing required argument 'action'",
        ),
        (
            json!({"action": "create", "command": "ls", "name": "n", "poll_every": "5s"}),
            "between 10s and 24h",
        ),
        (
            json!({"action": "create", "command": "ls", "name": "n", "stop_on": "import os"}),
            "invalid stop_on expression at position 1: unknown name 'import'",
        ),
    ] {
        let e = tool.prepare(args.clone(), &ctx).unwrap_err();
        assert!(e.contains(expected), "{args}: {e}");
    }
    // A hand-built `Prepared` is checked again at execution.
    let mut prepared = tool.prepare(create("x"), &ctx).unwrap();
    prepared.args["poll_every"] = json!("1s");
    let out = tool.execute(&prepared, &ctx, &NoOutput).await;
    assert!(out.is_error && out.content.contains("between 10s"));
    // Without a workstream there is nothing to attach a watch to.
    let out = call(&tool, create("x"), &ToolContext::new("/tmp"))
        .await
        .unwrap();
    assert!(out.is_error && out.content.contains("belong to a workstream"));

    *backend.fail.lock() = true;
    let out = call(&tool, create("x"), &ctx).await.unwrap();
    assert!(
        out.is_error && out.content.contains("database is locked"),
        "{}",
        out.content
    );
    let out = call(&tool, json!({"action": "list"}), &ctx).await.unwrap();
    assert!(out.is_error && out.content.contains("cannot read watches"));
}

#[test]
fn metadata_matches_the_reference_table() {
    let (_, tool, _) = setup();
    let def = tool.definition();
    assert_eq!(def.name, "watch");
    assert!(!def.meta.agent && !def.meta.task_agent && !def.meta.auto_approve);
    assert_eq!(def.meta.primary_key.as_deref(), Some("command"));
    assert_eq!(def.parameters["required"], json!(["action"]));
    assert_eq!(
        def.parameters["properties"]["action"]["enum"],
        json!(["create", "list", "cancel"])
    );
}

#[tokio::test]
async fn a_poll_runs_the_command_in_the_directory_with_both_streams() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("status.txt"), "pending\n").unwrap();
    let poll = run_poll(
        "cat status.txt; echo oops >&2; exit 3",
        dir.path(),
        Duration::from_secs(20),
        &ChildEnv::default(),
    )
    .await;
    assert_eq!(poll.output, "pending\n\n[stderr]\noops\n");
    assert_eq!(poll.exit_code, 3);

    let poll = run_poll(
        "echo only-err >&2",
        dir.path(),
        Duration::from_secs(20),
        &ChildEnv::default(),
    )
    .await;
    assert_eq!((poll.output.as_str(), poll.exit_code), ("only-err\n", 0));
}

#[tokio::test]
async fn a_poll_is_bounded_in_size_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let poll = run_poll(
        "head -c 200000 /dev/zero | tr '\\0' x",
        dir.path(),
        Duration::from_secs(20),
        &ChildEnv::default(),
    )
    .await;
    assert!(
        poll.output
            .ends_with(&format!("\n[truncated at {MAX_OUTPUT_CHARS} chars]"))
    );
    assert_eq!(poll.output, bound_output(&"x".repeat(200_000)));

    // A timeout kills the whole process group (the background sleeper too) and says so.
    let poll = run_poll(
        "sleep 30 & echo $! > sleeper.pid; wait",
        dir.path(),
        Duration::from_millis(500),
        &ChildEnv::default(),
    )
    .await;
    assert_eq!(poll.exit_code, -1);
    assert_eq!(poll.output, "[command timed out after 0.5s]");
    let pid = std::fs::read_to_string(dir.path().join("sleeper.pid")).unwrap();
    let pid: u32 = pid.trim().parse().unwrap();
    assert!(
        super::eventually(|| super::bash::process_gone(pid)).await,
        "the background sleeper survived the timeout"
    );
}

#[tokio::test]
async fn a_command_that_leaves_a_background_job_still_finishes() {
    let dir = tempfile::tempdir().unwrap();
    // The job keeps the output pipe open; the poll ends anyway (not by its timeout).
    let poll = run_poll(
        "echo hi; sleep 30 &",
        dir.path(),
        Duration::from_secs(20),
        &ChildEnv::default(),
    )
    .await;
    assert_eq!((poll.output.as_str(), poll.exit_code), ("hi\n", 0));
}
