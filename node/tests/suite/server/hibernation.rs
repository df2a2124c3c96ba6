//! Hibernated workstreams over HTTP: an idle workstream leaves memory (counted on
//! `/health` and `/metrics`, still listed), and the next request that names it — send,
//! attach, approve, an event-stream resume, any per-workstream route — brings it back from
//! the store with its whole conversation, once however many ask at the same time.

use std::time::Duration;

use serde_json::{Value, json};
use turnstone_testkit::assert_eventually;

use super::*;

/// Short enough for tests; the sweeper looks every quarter of it (at least 100 ms).
const AFTER: Duration = Duration::from_millis(300);

async fn hibernating_node(
    db: &std::path::Path,
    max_workstreams: usize,
    after: Duration,
) -> TestNode {
    TestNode::spawn(Spec {
        db: Some(db.to_path_buf()),
        manager: ManagerConfig {
            max_workstreams,
            hibernate_after: Some(after),
            ..ManagerConfig::default()
        },
        ..Spec::default()
    })
    .await
}

async fn create(t: &TestNode, name: &str) -> String {
    let (status, body) = t
        .post("/v1/api/workstreams/new", json!({"name": name}))
        .await;
    assert_eq!(status, 200, "{body}");
    body["ws_id"].as_str().unwrap().to_string()
}

/// Sends `message` and waits for its `turn_complete` on a stream opened for it (closed
/// again before returning, so the workstream may hibernate). Returns the events.
async fn turn(t: &TestNode, ws_id: &str, message: &str) -> Vec<SseEvent> {
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    let (status, body) = t
        .post("/v1/api/send", json!({"ws_id": ws_id, "message": message}))
        .await;
    assert_eq!(status, 200, "{body}");
    events.until("turn_complete").await
}

async fn is_hibernated(t: &TestNode, ws_id: &str) -> bool {
    let (_, list) = t.get("/v1/api/workstreams", Some(READ)).await;
    row(&list, ws_id).is_some_and(|r| r["hibernated"] == true)
}

fn row<'a>(list: &'a Value, ws_id: &str) -> Option<&'a Value> {
    list["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == ws_id)
}

async fn health_counts(t: &TestNode) -> Value {
    let (_, health) = t.get("/health", None).await;
    health["workstreams"].clone()
}

async fn metrics_text(t: &TestNode) -> String {
    t.http
        .get(t.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn contents_of_last_request(t: &TestNode) -> Vec<String> {
    t.llm.last_request().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn an_idle_workstream_hibernates_and_a_send_brings_back_its_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let t = hibernating_node(&dir.path().join("node.db"), 50, AFTER).await;
    let ws_id = create(&t, "sleeper").await;
    turn(&t, &ws_id, "remember the blue door").await;

    assert_eventually!(is_hibernated(&t, &ws_id).await, "never hibernated");
    assert!(t.node.workstream(&ws_id).is_none(), "out of memory");
    let (_, list) = t.get("/v1/api/workstreams", Some(READ)).await;
    let listed = row(&list, &ws_id).unwrap();
    assert_eq!(
        (&listed["name"], &listed["state"]),
        (&json!("sleeper"), &json!("idle"))
    );
    let health = health_counts(&t).await;
    assert!(health["hibernated"].as_u64().unwrap() >= 1, "{health}");
    assert_eq!(
        health["total"].as_u64().unwrap(),
        health["hibernated"].as_u64().unwrap() + health["idle"].as_u64().unwrap(),
        "{health}"
    );
    let (_, dashboard) = t.get("/v1/api/dashboard", Some(READ)).await;
    let dash_row = dashboard["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == json!(ws_id))
        .unwrap();
    assert_eq!(dash_row["hibernated"], true);
    assert!(
        dash_row["tokens"].as_u64().unwrap() > 0,
        "totals kept: {dash_row}"
    );

    // The send rehydrates it, and the model sees the earlier exchange.
    let before = t.llm.request_count();
    let (status, body) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": ws_id, "message": "which door?"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eventually!(t.llm.request_count() > before, "the turn never ran");
    let contents = contents_of_last_request(&t);
    assert!(
        contents.iter().any(|c| c == "remember the blue door"),
        "{contents:?}"
    );
    assert!(contents.iter().any(|c| c == "which door?"), "{contents:?}");
    assert!(!is_hibernated(&t, &ws_id).await);
    assert!(t.node.hibernation.rehydrations() >= 1);
    let text = metrics_text(&t).await;
    assert!(
        text.contains("turnstone_workstream_rehydrations_total 1"),
        "{text}"
    );
    assert!(text.contains("turnstone_workstreams_hibernated "), "{text}");
}

#[tokio::test]
async fn an_event_stream_resumes_across_a_hibernation() {
    let dir = tempfile::tempdir().unwrap();
    let t = hibernating_node(&dir.path().join("node.db"), 50, AFTER).await;
    let ws_id = create(&t, "streamed").await;
    let events = turn(&t, &ws_id, "hello").await;
    let seen = events.iter().filter_map(|e| e.id).max().unwrap();
    assert_eventually!(is_hibernated(&t, &ws_id).await, "never hibernated");
    // The workstream's last event (events clients never see may follow the last seen one).
    let last = t.node.manager.hibernated(&ws_id).unwrap().last_seq;
    assert!(last >= seen && last > 2);

    // A client that saw everything resumes with nothing missing and nothing repeated.
    let path = format!("/v1/api/events?ws_id={ws_id}");
    let mut caught_up = t.sse(&path, Some(last)).await;
    assert!(
        t.node.workstream(&ws_id).is_some(),
        "the resume rehydrated it"
    );
    // One that missed the last two events of the earlier life is told so, explicitly.
    let mut behind = t.sse(&path, Some(last - 2)).await;
    let gap = behind.next().await;
    assert_eq!(
        gap.data,
        json!({"type": "events_truncated", "missed_from": last - 1, "missed_to": last})
    );

    let (status, _) = t
        .post("/v1/api/send", json!({"ws_id": ws_id, "message": "again"}))
        .await;
    assert_eq!(status, 200);
    let after = caught_up.until("turn_complete").await;
    let ids: Vec<u64> = after.iter().filter_map(|e| e.id).collect();
    assert!(!ids.is_empty());
    assert!(ids[0] > last, "numbering continues: {ids:?} after {last}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(
        text_of(&after),
        text_of(&behind.until("turn_complete").await)
    );
    assert_eq!(t.node.hibernation.rehydrations(), 1);
}

#[tokio::test]
async fn attach_and_approve_rehydrate_a_hibernated_workstream() {
    let dir = tempfile::tempdir().unwrap();
    let t = hibernating_node(&dir.path().join("node.db"), 50, AFTER).await;
    let ws_id = create(&t, "tools").await;
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws_id, "message": "TOOL: echo approved-before"}),
    )
    .await;
    let request = events.until("approve_request").await.pop().unwrap();
    let request_id = request.data["request_id"].as_str().unwrap().to_string();
    t.post("/v1/api/approve", json!({"ws_id": ws_id, "approved": true}))
        .await;
    events.until("turn_complete").await;
    drop(events);
    let p = t.node.persistence.clone().unwrap();
    assert_eventually!(
        p.approval(&request_id)
            .await
            .is_some_and(|r| r.state == turnstone_store::ApprovalState::Approved),
        "verdict not recorded"
    );
    assert_eventually!(is_hibernated(&t, &ws_id).await, "never hibernated");

    // A late decision is answered from the durable record, by the rehydrated workstream.
    let (status, body) = t
        .post(
            "/v1/api/approve",
            json!({"ws_id": ws_id, "approved": false, "request_id": request_id}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["verdict"]["approved"], true);
    assert!(t.node.workstream(&ws_id).is_some());

    // Hibernated again, an attach shows the whole conversation.
    assert_eventually!(is_hibernated(&t, &ws_id).await, "never hibernated again");
    let mut attached = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    assert_eq!(attached.next().await.kind(), "connected");
    let history = loop {
        let e = attached.next().await;
        if e.kind() == "history" {
            break e;
        }
    };
    let text = history.data["messages"].to_string();
    assert!(text.contains("TOOL: echo approved-before"), "{text}");
    assert!(text.contains("approved-before"), "{text}");
    assert_eq!(t.node.hibernation.rehydrations(), 2);
}

#[tokio::test]
async fn a_hibernated_workstream_can_be_closed() {
    let dir = tempfile::tempdir().unwrap();
    let t = hibernating_node(&dir.path().join("node.db"), 50, AFTER).await;
    let ws_id = create(&t, "doomed").await;
    assert_eventually!(is_hibernated(&t, &ws_id).await, "never hibernated");
    let hibernated = health_counts(&t).await["hibernated"].as_u64().unwrap();

    let (status, body) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": ws_id}))
        .await;
    assert_eq!((status, body), (200, json!({"status": "ok"})));
    let (_, list) = t.get("/v1/api/workstreams", Some(READ)).await;
    assert!(row(&list, &ws_id).is_none(), "{list}");
    assert_eq!(
        health_counts(&t).await["hibernated"].as_u64().unwrap(),
        hibernated - 1
    );
    let (status, _) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": ws_id, "message": "anyone?"}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(
        t.node.hibernation.rehydrations(),
        0,
        "closing does not wake it"
    );
    let p = t.node.persistence.clone().unwrap();
    assert_eventually!(
        p.store
            .get_workstream(&ws_id)
            .await
            .unwrap()
            .is_some_and(|w| w.state == "closed"),
        "closed state not stored"
    );
}

#[tokio::test]
async fn concurrent_requests_rehydrate_a_workstream_once() {
    let dir = tempfile::tempdir().unwrap();
    let t = hibernating_node(&dir.path().join("node.db"), 50, AFTER).await;
    let ws_id = create(&t, "popular").await;
    turn(&t, &ws_id, "one").await;
    assert_eventually!(is_hibernated(&t, &ws_id).await, "never hibernated");

    let path = format!("/v1/api/workstreams/{ws_id}/queue");
    let requests = (0..16).map(|_| t.get(&path, Some(READ)));
    let replies = futures::future::join_all(requests).await;
    for (status, body) in &replies {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["ws_id"], json!(ws_id));
    }
    assert_eq!(t.node.hibernation.rehydrations(), 1, "single flight");
    assert_eq!(
        t.node.workstream(&ws_id).unwrap().history().len(),
        2,
        "one conversation, loaded once"
    );
}

#[tokio::test]
async fn subscribed_and_pending_workstreams_stay_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let t = hibernating_node(&dir.path().join("node.db"), 50, AFTER).await;
    // Watched: an open event stream holds it.
    let watched = create(&t, "watched").await;
    let mut stream = t
        .sse(&format!("/v1/api/events?ws_id={watched}"), None)
        .await;
    assert_eq!(stream.next().await.kind(), "connected");
    // Waiting: a turn waits for an approval (busy, with a decision pending), no stream.
    let waiting = create(&t, "waiting").await;
    let (status, _) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": waiting, "message": "TOOL: echo held"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eventually!(
        t.node
            .workstream(&waiting)
            .is_some_and(|w| w.pending_approval().is_some()),
        "no pending approval"
    );
    // A control workstream idle since after both: once it hibernated, both were due too.
    let control = create(&t, "control").await;
    assert_eventually!(
        is_hibernated(&t, &control).await,
        "control never hibernated"
    );
    assert!(
        t.node.workstream(&watched).is_some(),
        "a subscribed one stays"
    );
    assert!(t.node.workstream(&waiting).is_some(), "a pending one stays");
    assert!(!is_hibernated(&t, &watched).await);

    // Decided and unwatched, both leave memory in turn.
    let (status, _) = t
        .post(
            "/v1/api/approve",
            json!({"ws_id": waiting, "approved": true}),
        )
        .await;
    assert_eq!(status, 200);
    drop(stream);
    assert_eventually!(
        is_hibernated(&t, &waiting).await,
        "decided one never hibernated"
    );
    assert_eventually!(
        is_hibernated(&t, &watched).await,
        "unwatched one never hibernated"
    );
}

#[tokio::test]
async fn a_restart_lists_hibernated_workstreams_and_any_can_be_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let ws_id = {
        let t = hibernating_node(&db, 50, AFTER).await;
        let ws_id = create(&t, "survivor").await;
        turn(&t, &ws_id, "the code is 1234").await;
        assert_eventually!(is_hibernated(&t, &ws_id).await, "never hibernated");
        let p = t.node.persistence.clone().unwrap();
        assert_eventually!(
            p.store
                .get_workstream(&ws_id)
                .await
                .unwrap()
                .is_some_and(|w| w.state == "hibernated"),
            "hibernated state not stored"
        );
        ws_id
    };

    // Second life: long idle time, so nothing hibernates by itself here.
    let t = hibernating_node(&db, 50, Duration::from_secs(3600)).await;
    assert!(is_hibernated(&t, &ws_id).await, "listed again");
    let (_, list) = t.get("/v1/api/workstreams", Some(READ)).await;
    assert_eq!(row(&list, &ws_id).unwrap()["name"], "survivor");
    // (The first life's default workstream hibernated too.)
    assert!(health_counts(&t).await["hibernated"].as_u64().unwrap() >= 1);
    let before = t.llm.request_count();
    let (status, body) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": ws_id, "message": "what is the code?"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eventually!(t.llm.request_count() > before, "the turn never ran");
    let contents = contents_of_last_request(&t);
    assert!(
        contents.iter().any(|c| c == "the code is 1234"),
        "{contents:?}"
    );
}

#[tokio::test]
async fn max_workstreams_bounds_live_workstreams_only() {
    let dir = tempfile::tempdir().unwrap();
    // Two live at most; nothing hibernates by idle time here, only to make room.
    let t = hibernating_node(&dir.path().join("node.db"), 2, Duration::from_secs(3600)).await;
    let mut ids = Vec::new();
    for n in 0..4 {
        ids.push(create(&t, &format!("ws{n}")).await);
    }
    assert_eq!(t.node.manager.len(), 2, "live ones are bounded");
    let health = health_counts(&t).await;
    assert_eq!(health["total"], 5, "{health}");
    assert_eq!(health["hibernated"], 3, "{health}");
    let (_, list) = t.get("/v1/api/workstreams", Some(READ)).await;
    let listed: Vec<&str> = list["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        &listed[1..],
        ids.iter().map(String::as_str).collect::<Vec<_>>(),
        "creation order"
    );

    // The oldest comes back; another makes room; none was closed.
    turn(&t, &ids[0], "back").await;
    assert_eq!(t.node.manager.len(), 2);
    assert_eq!(health_counts(&t).await["total"], 5);
    let text = metrics_text(&t).await;
    assert!(
        text.contains("turnstone_workstreams_evicted_total 0"),
        "hibernated, not evicted"
    );
}

#[tokio::test]
async fn a_rehydrated_workstream_keeps_its_posture_even_full() {
    let dir = tempfile::tempdir().unwrap();
    let t = hibernating_node(&dir.path().join("node.db"), 50, AFTER).await;
    let (status, body) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "unattended", "posture": "full"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let ws_id = body["ws_id"].as_str().unwrap().to_string();
    turn(&t, &ws_id, "hello").await;
    assert_eventually!(is_hibernated(&t, &ws_id).await, "never hibernated");
    // Back in memory, the tool call runs unasked: the stored posture came back with it.
    let events = turn(&t, &ws_id, "TOOL: echo still-full").await;
    let kinds: Vec<&str> = events.iter().map(SseEvent::kind).collect();
    assert!(!kinds.contains(&"approve_request"), "{kinds:?}");
    let result = events
        .iter()
        .find(|e| e.kind() == "tool_result")
        .expect("the call ran");
    assert!(
        result.data["output"]
            .as_str()
            .unwrap()
            .contains("still-full")
    );
    assert!(t.node.hibernation.rehydrations() >= 1);
}
