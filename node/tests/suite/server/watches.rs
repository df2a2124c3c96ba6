//! Watches end to end: the scripted model creates a watch with the `watch` tool, the runner
//! polls the real command against the real SQLite store, and a fired watch comes back to
//! the workstream as a message that runs a turn — also when the workstream was busy, and
//! after a restart. Bad requests are tool errors; the HTTP routes list and cancel.

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use turnstone_llm::{ChatMessage, Role};
use turnstone_node::watch_runner::WatchRunnerConfig;
use turnstone_store::{NewWatch, Store, WatchPoll};
use turnstone_testkit::assert_eventually;

use super::*;

fn fast_runner() -> WatchRunnerConfig {
    WatchRunnerConfig {
        tick: Duration::from_millis(100),
        command_timeout: Duration::from_secs(20),
        ..WatchRunnerConfig::default()
    }
}

async fn watching_node(db: &Path) -> TestNode {
    TestNode::spawn(Spec {
        db: Some(db.to_path_buf()),
        watches: Some(fast_runner()),
        ..Spec::default()
    })
    .await
}

fn store(t: &TestNode) -> std::sync::Arc<dyn Store> {
    t.node.persistence.as_ref().unwrap().store.clone()
}

/// The message that makes the scripted model call `watch` with these arguments.
fn call_watch(args: Value) -> String {
    format!("CALL:watch {args}")
}

fn text_of_message(m: &ChatMessage) -> String {
    m.content.clone().unwrap_or_default()
}

fn user_texts(history: &[ChatMessage]) -> Vec<String> {
    history
        .iter()
        .filter(|m| m.role == Some(Role::User))
        .map(text_of_message)
        .collect()
}

/// Makes a watch due now, as if its interval had passed (the shortest is 10 s).
async fn make_due(store: &dyn Store, watch_id: &str) {
    let w = store.get_watch(watch_id).await.unwrap().unwrap();
    let poll = WatchPoll {
        output: w.last_output.unwrap_or_default(),
        exit_code: w.last_exit_code.unwrap_or(0),
        poll_count: w.poll_count,
        next_poll: Some(SystemTime::now() - Duration::from_secs(1)),
    };
    assert!(store.record_watch_poll(watch_id, &poll).await.unwrap());
}

async fn only_watch(t: &TestNode, ws_id: &str) -> Value {
    let (status, body) = t
        .get(&format!("/v1/api/watches?ws_id={ws_id}"), Some(FULL))
        .await;
    assert_eq!(status, 200, "{body}");
    let rows = body["watches"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{body}");
    rows[0].clone()
}

#[tokio::test]
async fn a_watch_created_by_the_model_fires_into_its_workstream_and_runs_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let t = watching_node(&dir.path().join("node.db")).await;
    let ws = t.default_ws.clone();
    let cwd = t.node.manager.engine().config().cwd.clone();
    std::fs::write(cwd.join("status.txt"), "pending\n").unwrap();
    assert!(t.node.manager.engine().registry().get("watch").is_some());

    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let message = call_watch(json!({
        "action": "create", "command": "cat status.txt", "name": "build",
        "poll_every": "10s", "stop_on": "\"done\" in output"
    }));
    t.post("/v1/api/send", json!({"ws_id": ws, "message": message}))
        .await;
    let request = events.until("approve_request").await.pop().unwrap();
    assert_eq!(request.data["items"][0]["approval_label"], "watch");
    let (status, _) = t
        .post("/v1/api/approve", json!({"ws_id": ws, "approved": true}))
        .await;
    assert_eq!(status, 200);
    let created = events.until("turn_complete").await;
    let result = created.iter().find(|e| e.kind() == "tool_result").unwrap();
    assert!(
        result.data["output"]
            .as_str()
            .unwrap()
            .starts_with("Watch 'build' created"),
        "{}",
        result.data
    );

    // Listed with every column; the first poll runs at once and sets the baseline.
    let row = only_watch(&t, &ws).await;
    assert_eq!(row["name"], "build");
    assert_eq!(row["node_id"], "node-test");
    assert_eq!(row["interval_secs"], 10.0);
    assert_eq!(row["active"], 1);
    assert_eq!(row["created_by"], "model");
    assert_eq!(row.as_object().unwrap().len(), 17);
    let watch_id = row["watch_id"].as_str().unwrap().to_string();
    let store = store(&t);
    assert_eventually!(
        store
            .get_watch(&watch_id)
            .await
            .unwrap()
            .is_some_and(|w| w.poll_count == 1),
        "the first poll was not recorded"
    );
    let polled = store.get_watch(&watch_id).await.unwrap().unwrap();
    assert_eq!(polled.last_output.as_deref(), Some("pending\n"));
    assert!(polled.active, "not done yet");

    // The file says done; at the next poll the watch fires and a turn runs on its notice.
    std::fs::write(cwd.join("status.txt"), "all done\n").unwrap();
    make_due(store.as_ref(), &watch_id).await;
    let turn = events.until("turn_complete").await;
    let info = turn.iter().find(|e| e.kind() == "info").unwrap();
    assert_eq!(
        info.data["message"],
        "[watch 'build' triggered: condition met]"
    );
    let reply = turn.last().unwrap().data["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reply.starts_with("[watch 'build' triggered: condition met]\ncommand: cat status.txt\nexit code: 0\npolls: 2/100\n"),
        "the model saw the notice: {reply}"
    );
    assert!(reply.ends_with("\n\nall done\n"), "{reply}");

    let history = t.node.workstream(&ws).unwrap().history();
    let users = user_texts(&history);
    assert_eq!(users.len(), 2, "{users:?}");
    assert!(
        users[1].starts_with("[watch 'build' triggered"),
        "{users:?}"
    );
    assert_eq!(history.last().unwrap().role, Some(Role::Assistant));

    // The watch ended (right after the delivery) with the poll recorded.
    assert_eventually!(
        !store.get_watch(&watch_id).await.unwrap().unwrap().active,
        "the delivered watch was not ended"
    );
    let ended = store.get_watch(&watch_id).await.unwrap().unwrap();
    assert_eq!(ended.poll_count, 2);
    assert_eq!(ended.last_output.as_deref(), Some("all done\n"));
    let (_, body) = t.get("/v1/api/watches", Some(FULL)).await;
    assert_eq!(body, json!({"watches": []}));
}

/// A secret the watched command prints is redacted before the poll is stored and before
/// the notice reaches the workstream (the output guard).
#[tokio::test]
async fn a_watchs_poll_output_passes_the_output_guard() {
    let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let dir = tempfile::tempdir().unwrap();
    let t = watching_node(&dir.path().join("node.db")).await;
    let ws = t.default_ws.clone();
    let cwd = t.node.manager.engine().config().cwd.clone();
    std::fs::write(cwd.join("status.txt"), format!("pending {token}\n")).unwrap();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let message = call_watch(json!({
        "action": "create", "command": "cat status.txt", "name": "leaky",
        "poll_every": "10s", "stop_on": "\"done\" in output"
    }));
    t.post("/v1/api/send", json!({"ws_id": ws, "message": message}))
        .await;
    events.until("approve_request").await;
    t.post("/v1/api/approve", json!({"ws_id": ws, "approved": true}))
        .await;
    events.until("turn_complete").await;
    let watch_id = only_watch(&t, &ws).await["watch_id"]
        .as_str()
        .unwrap()
        .to_string();
    let store = store(&t);
    assert_eventually!(
        store
            .get_watch(&watch_id)
            .await
            .unwrap()
            .is_some_and(|w| w.poll_count == 1),
        "the first poll was not recorded"
    );
    let polled = store.get_watch(&watch_id).await.unwrap().unwrap();
    let stored = polled.last_output.unwrap_or_default();
    assert!(
        stored.starts_with("pending [REDACTED:") && !stored.contains(token),
        "{stored}"
    );

    std::fs::write(cwd.join("status.txt"), format!("done {token}\n")).unwrap();
    make_due(store.as_ref(), &watch_id).await;
    let turn = events.until("turn_complete").await;
    let reply = turn.last().unwrap().data["content"].as_str().unwrap();
    assert!(reply.contains("done [REDACTED:"), "{reply}");
    let history = serde_json::to_string(&t.node.workstream(&ws).unwrap().history()).unwrap();
    assert!(!history.contains(token), "{history}");
    assert_eventually!(
        !store.get_watch(&watch_id).await.unwrap().unwrap().active,
        "the delivered watch was not ended"
    );
    let ended = store.get_watch(&watch_id).await.unwrap().unwrap();
    assert!(!ended.last_output.unwrap_or_default().contains(token));
}

#[tokio::test]
async fn bad_watch_requests_are_tool_errors_and_the_workstream_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let t = watching_node(&dir.path().join("node.db")).await;
    // Auto-approve: creating watches needs no prompt, so the limits are what refuses.
    let (_, created) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "watcher", "auto_approve": true}),
        )
        .await;
    let ws = created["ws_id"].as_str().unwrap().to_string();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let mut turn = async |message: String| -> Vec<String> {
        t.post("/v1/api/send", json!({"ws_id": ws, "message": message}))
            .await;
        events
            .until("turn_complete")
            .await
            .iter()
            .filter(|e| e.kind() == "tool_result")
            .map(|e| e.data["output"].as_str().unwrap().to_string())
            .collect()
    };
    let watch = |name: &str, extra: Value| {
        let mut args =
            json!({"action": "create", "command": "sleep 0", "name": name, "poll_every": "1h"});
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        call_watch(args)
    };

    for (extra, expected) in [
        (
            json!({"stop_on": "output.contains('x') and foo"}),
            "invalid stop_on expression at position 26: unknown name 'foo'",
        ),
        (json!({"stop_on": "exit_code = 1"}), "'=' is not allowed"),
        (
            json!({"poll_every": "5s"}),
            "poll_every must be between 10s and 24h",
        ),
        (
            json!({"poll_every": "25h"}),
            "poll_every must be between 10s and 24h",
        ),
    ] {
        let results = turn(watch("bad", extra)).await;
        assert_eq!(results.len(), 1);
        assert!(results[0].contains(expected), "{}", results[0]);
    }
    assert_eq!(store(&t).count_active_watches(&ws).await.unwrap(), 0);

    // Five in one batch (parallel calls) are fine; a sixth and a duplicate name are not.
    let five: Vec<String> = (1..=5)
        .map(|i| watch(&format!("w{i}"), json!({})))
        .collect();
    let results = turn(five.join("\n")).await;
    assert_eq!(results.len(), 5);
    assert!(
        results.iter().all(|r| r.starts_with("Watch 'w")),
        "{results:?}"
    );
    let results = turn(watch("w6", json!({}))).await;
    assert!(
        results[0].contains("already has 5 active watches"),
        "{results:?}"
    );
    let results = turn(call_watch(json!({"action": "cancel", "name": "w5"}))).await;
    assert!(results[0].starts_with("Watch 'w5' (id "), "{results:?}");
    let results = turn(watch("w1", json!({}))).await;
    assert!(
        results[0].contains("named 'w1' is already active"),
        "{results:?}"
    );
    let results = turn(call_watch(json!({"action": "list"}))).await;
    assert!(
        results[0].starts_with("4 active watches:\n- w1 (id "),
        "{results:?}"
    );
    let results = turn(call_watch(json!({"action": "explode"}))).await;
    assert!(
        results[0].contains("unknown action 'explode'"),
        "{results:?}"
    );

    // The workstream still answers normally.
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws, "message": "still here?"}),
    )
    .await;
    let done = events.until("turn_complete").await;
    assert_eq!(done.last().unwrap().data["content"], "still here?");
    assert_eq!(store(&t).count_active_watches(&ws).await.unwrap(), 4);
}

#[tokio::test]
async fn a_notice_waits_while_the_workstream_is_busy_and_is_not_polled_twice() {
    let dir = tempfile::tempdir().unwrap();
    let t = watching_node(&dir.path().join("node.db")).await;
    let ws = t.default_ws.clone();
    let log = dir.path().join("polls.log");
    let store = store(&t);
    let watch = store
        .create_watch(NewWatch {
            watch_id: None,
            ws_id: ws.clone(),
            node_id: "node-test".into(),
            name: "ready".into(),
            command: format!("echo polled >> {}; echo ready", log.display()),
            interval_secs: 10.0,
            stop_on: Some("'ready' in output".into()),
            max_polls: 100,
            created_by: "test".into(),
            first_poll: SystemTime::now() + Duration::from_secs(3600),
        })
        .await
        .unwrap();

    // A turn waits for approval: the workstream is busy when the watch fires.
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws, "message": "TOOL: echo hold"}),
    )
    .await;
    events.until("approve_request").await;
    make_due(store.as_ref(), &watch.watch_id).await;
    assert_eventually!(log.exists(), "the watch was never polled");
    // Fired but held: not delivered, not ended.
    assert!(
        store
            .get_watch(&watch.watch_id)
            .await
            .unwrap()
            .unwrap()
            .active
    );

    t.post("/v1/api/approve", json!({"ws_id": ws, "approved": true}))
        .await;
    let first = events.until("turn_complete").await;
    assert_eq!(first.last().unwrap().data["content"], "done: hold");
    let second = events.until("turn_complete").await;
    let content = second.last().unwrap().data["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        content.starts_with("[watch 'ready' triggered: condition met]"),
        "{content}"
    );
    assert_eventually!(
        !store
            .get_watch(&watch.watch_id)
            .await
            .unwrap()
            .unwrap()
            .active,
        "the delivered watch was not ended"
    );
    // The held notice was delivered, not regenerated by polling again.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "polled\n");
}

#[tokio::test]
async fn a_persisted_watch_fires_after_a_restart_into_the_resumed_workstream() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let status = dir.path().join("deploy.txt");
    std::fs::write(&status, "deploying\n").unwrap();

    // First life: the model creates the watch; it is polled once; the node goes away.
    let (ws, watch_id) = {
        let mut t = watching_node(&db).await;
        let (_, created) = t
            .post(
                "/v1/api/workstreams/new",
                json!({"name": "deployer", "auto_approve": true}),
            )
            .await;
        let ws = created["ws_id"].as_str().unwrap().to_string();
        let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
        let message = call_watch(json!({
            "action": "create", "command": format!("cat {}", status.display()),
            "name": "deploy", "poll_every": "30m"
        }));
        t.post("/v1/api/send", json!({"ws_id": ws, "message": message}))
            .await;
        events.until("turn_complete").await;
        let watch_id = only_watch(&t, &ws).await["watch_id"]
            .as_str()
            .unwrap()
            .to_string();
        let store = store(&t);
        assert_eventually!(
            store
                .get_watch(&watch_id)
                .await
                .unwrap()
                .is_some_and(|w| w.poll_count == 1),
            "the first poll was not recorded"
        );
        t.watch_runner.take().unwrap().stop().await;
        t.node
            .persistence
            .as_ref()
            .unwrap()
            .writer
            .flush()
            .await
            .unwrap();
        (ws, watch_id)
    };

    // While it was down the output changed, and the next poll became overdue.
    std::fs::write(&status, "deployed\n").unwrap();
    let w = {
        let store = turnstone_store::connect(&turnstone_store::StoreConfig::sqlite(&db))
            .await
            .unwrap();
        make_due(store.as_ref(), &watch_id).await;
        let w = store.get_watch(&watch_id).await.unwrap().unwrap();
        store.close().await;
        w
    };
    assert!(w.active && w.stop_on.is_none());

    // Second life: the overdue watch is polled on recovery, fires (output changed), and its
    // workstream — not loaded in this life — is resumed from the store to take the notice.
    let t = watching_node(&db).await;
    assert_eventually!(
        t.node.workstream(&ws).is_some_and(|w| w
            .history()
            .last()
            .is_some_and(|m| m.role == Some(Role::Assistant)
                && text_of_message(m).starts_with("[watch 'deploy' triggered: output changed]"))),
        "the notice never reached the resumed workstream"
    );
    let history = t.node.workstream(&ws).unwrap().history();
    let users = user_texts(&history);
    assert!(
        users[0].starts_with("CALL:watch"),
        "the history came back: {users:?}"
    );
    let notice = users.last().unwrap();
    assert!(notice.contains("mode: fire on output change"), "{notice}");
    assert!(notice.ends_with("\n\ndeployed\n"), "{notice}");
    assert_eventually!(
        !store(&t)
            .get_watch(&watch_id)
            .await
            .unwrap()
            .unwrap()
            .active,
        "the delivered watch was not ended"
    );
}

#[tokio::test]
async fn the_api_lists_this_nodes_watches_and_cancels_with_write_scope() {
    let dir = tempfile::tempdir().unwrap();
    // Persistence but no runner: rows stay as written.
    let t = TestNode::start_persistent(&dir.path().join("node.db")).await;
    let store = store(&t);
    let make = async |ws_id: &str, node_id: &str, name: &str| {
        store
            .create_watch(NewWatch {
                watch_id: None,
                ws_id: ws_id.into(),
                node_id: node_id.into(),
                name: name.into(),
                command: "true".into(),
                interval_secs: 60.0,
                stop_on: None,
                max_polls: 5,
                created_by: "test".into(),
                first_poll: SystemTime::now(),
            })
            .await
            .unwrap()
            .watch_id
    };
    let mine = make("ws-a", "node-test", "mine").await;
    let also_mine = make("ws-b", "node-test", "also").await;
    let theirs = make("ws-c", "node-other", "theirs").await;

    let (status, body) = t.get("/v1/api/watches", Some(READ)).await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = body["watches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["watch_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str(), also_mine.as_str()], "this node's only");
    let row = &body["watches"][0];
    for column in [
        "watch_id",
        "ws_id",
        "node_id",
        "name",
        "command",
        "interval_secs",
        "stop_on",
        "max_polls",
        "poll_count",
        "last_output",
        "last_exit_code",
        "last_poll",
        "next_poll",
        "active",
        "created_by",
        "created",
        "updated",
    ] {
        assert!(row.get(column).is_some(), "{column} missing: {row}");
    }
    assert_eq!(row["stop_on"], Value::Null);
    let (_, body) = t.get("/v1/api/watches?ws_id=ws-c", Some(FULL)).await;
    assert_eq!(body["watches"][0]["watch_id"], json!(theirs));

    // Cancel needs write; unknown ids and other nodes' watches are refused.
    let cancel = |id: &str| format!("/v1/api/watches/{id}/cancel");
    let (status, _) = t.post_raw(&cancel(&mine), "{}".into(), READ).await;
    assert_eq!(status, 403);
    let (status, body) = t.post(&cancel("nope"), json!({})).await;
    assert_eq!((status, body), (404, json!({"error": "Watch not found"})));
    let (status, body) = t.post(&cancel(&theirs), json!({})).await;
    assert_eq!(
        (status, body),
        (403, json!({"error": "Watch belongs to another node"}))
    );
    let (status, body) = t.post(&cancel(&mine), json!({})).await;
    assert_eq!(
        (status, body),
        (200, json!({"status": "ok", "watch_id": mine}))
    );
    assert!(!store.get_watch(&mine).await.unwrap().unwrap().active);
    let (_, body) = t.get("/v1/api/watches", Some(FULL)).await;
    assert_eq!(body["watches"].as_array().unwrap().len(), 1);

    // Without persistence: nothing to list, and cancel says why.
    let bare = TestNode::start().await;
    let (status, body) = bare.get("/v1/api/watches", Some(FULL)).await;
    assert_eq!((status, body), (200, json!({"watches": []})));
    let (status, body) = bare.post(&cancel("x"), json!({})).await;
    assert_eq!(
        (status, body),
        (500, json!({"error": "Storage unavailable"}))
    );
    assert!(bare.node.manager.engine().registry().get("watch").is_none());
}

/// Each poll prints the call that makes the model create the next watch of the chain (a new
/// name each time), until the file `stop` exists.
const CHAIN: &str = r#"if [ -f stop ]; then echo stopped; exit 0; fi
n=$(( $(cat n 2>/dev/null || echo 0) + 1 ))
echo "$n" > n
printf 'CALL:watch {"action": "create", "command": "bash chain.sh", "name": "link%s", "poll_every": "10s", "stop_on": "exit_code == 0"}\n' "$n"
"#;

#[tokio::test]
async fn a_chain_of_watch_turns_is_held_after_five_until_a_human_writes() {
    let dir = tempfile::tempdir().unwrap();
    let t = watching_node(&dir.path().join("node.db")).await;
    let (_, created) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "chain", "auto_approve": true}),
        )
        .await;
    let ws = created["ws_id"].as_str().unwrap().to_string();
    let cwd = t.node.manager.engine().config().cwd.clone();
    std::fs::write(cwd.join("chain.sh"), CHAIN).unwrap();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let mut seen = Vec::new();

    // A human starts the chain: every watch's notice makes the model create the next one.
    let first = call_watch(json!({
        "action": "create", "command": "bash chain.sh", "name": "link0",
        "poll_every": "10s", "stop_on": "exit_code == 0"
    }));
    t.post("/v1/api/send", json!({"ws_id": ws, "message": first}))
        .await;
    let held = loop {
        let event = events.next().await;
        seen.push(event.clone());
        if event.kind() == "info"
            && event.data["message"]
                .as_str()
                .is_some_and(|m| m.contains(" held: "))
        {
            break event;
        }
    };
    assert_eq!(
        held.data["message"],
        "[watch 'link5' held: 5 watch-triggered turns in a row without a user message \
         (limit 5); it is delivered after your next message]"
    );
    // Five watch turns ran after the human's message; the sixth notice was not delivered…
    let handle = t.node.workstream(&ws).unwrap();
    let users = user_texts(&handle.history());
    assert_eq!(users.len(), 6, "{users:?}");
    for (i, notice) in users[1..].iter().enumerate() {
        assert!(
            notice.starts_with(&format!("[watch 'link{i}' triggered: condition met]")),
            "{users:?}"
        );
    }
    // …and is not lost: its watch is still active, its notice pending.
    let active = store(&t)
        .list_active_watches(Some(ws.as_str()), None)
        .await
        .unwrap();
    assert_eq!(
        active.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(),
        ["link5"]
    );

    // A human message ends the run: the held notice is delivered right after its turn,
    // and the chain (now told to stop) runs on until it ends by itself.
    std::fs::write(cwd.join("stop"), "").unwrap();
    t.post("/v1/api/send", json!({"ws_id": ws, "message": "carry on"}))
        .await;
    for _ in 0..3 {
        seen.extend(events.until("turn_complete").await);
    }
    let users = user_texts(&handle.history());
    assert_eq!(users.len(), 9, "{users:?}");
    assert_eq!(users[6], "carry on");
    assert!(
        users[7].starts_with("[watch 'link5' triggered: condition met]"),
        "the held notice came right after the human message: {users:?}"
    );
    assert!(
        users[8].starts_with("[watch 'link6' triggered: condition met]")
            && users[8].ends_with("\n\nstopped\n"),
        "{users:?}"
    );
    // The workstream was told once, not at every tick it waited.
    let held_infos = seen
        .iter()
        .filter(|e| {
            e.kind() == "info"
                && e.data["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(" held: "))
        })
        .count();
    assert_eq!(held_infos, 1);
    assert_eventually!(
        store(&t)
            .list_active_watches(Some(ws.as_str()), None)
            .await
            .unwrap()
            .is_empty(),
        "the last watches were not ended"
    );
}
