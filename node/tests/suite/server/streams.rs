use serde_json::json;

use super::*;

#[tokio::test]
async fn attaching_replays_connected_history_and_the_pending_approval() {
    let t = TestNode::start().await;
    let path = format!("/v1/api/events?ws_id={}", t.default_ws);
    let mut first = t.sse(&path, None).await;
    assert_eq!(first.next().await.kind(), "connected");
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "TOOL: echo pending"}),
    )
    .await;
    first.until("approve_request").await;

    let mut late = t.sse(&path, None).await;
    let preamble = vec![
        late.next().await,
        late.next().await,
        late.next().await,
        late.next().await,
    ];
    assert_eq!(
        kinds(&preamble),
        ["connected", "status", "history", "approve_request"]
    );
    assert_eq!(preamble[0].data["model"], "fake-model");
    let history = preamble[2].data["messages"].as_array().unwrap();
    assert_eq!(history[0]["content"], "TOOL: echo pending");
    assert_eq!(history[1]["pending"], true);
    assert_eq!(history[1]["tool_calls"][0]["name"], "bash");
    t.post(
        "/v1/api/approve",
        json!({"ws_id": t.default_ws, "approved": true}),
    )
    .await;
    // Both attached clients see the rest of the turn.
    for client in [&mut first, &mut late] {
        let rest = client.until("turn_complete").await;
        assert!(text_of(&rest).starts_with("done: "));
    }
}

#[tokio::test]
async fn per_workstream_stream_ends_the_turn_with_ws_state_for_the_original_sdk() {
    let t = TestNode::start().await;
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "hello node"}),
    )
    .await;
    let seen = events.until("turn_complete").await;
    assert_eq!(text_of(&seen), "hello node");
    let ws_state = seen
        .iter()
        .find(|e| e.kind() == "ws_state")
        .expect("ws_state on the per-ws stream");
    assert_eq!(ws_state.data["state"], "idle");
    assert_eq!(ws_state.data["content"], "hello node");
    assert_eq!(ws_state.data["ws_id"], t.default_ws.as_str());
    let ids: Vec<u64> = seen.iter().filter_map(|e| e.id).collect();
    // Increasing; engine-internal events (activity) take ids the per-workstream stream skips.
    assert!(ids.windows(2).all(|w| w[1] > w[0]), "ids increase: {ids:?}");
    assert!(
        !kinds(&seen).contains(&"activity"),
        "engine-internal events stay internal"
    );
}

#[tokio::test]
async fn a_reconnecting_client_gets_exactly_the_missed_events() {
    let t = TestNode::start().await;
    let path = format!("/v1/api/events?ws_id={}", t.default_ws);
    let mut client = t.sse(&path, None).await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "first message here"}),
    )
    .await;
    let before = client.until("turn_complete").await;
    let last_id = before.iter().filter_map(|e| e.id).max().unwrap();
    drop(client);

    // Events happen while the client is away.
    let mut watcher = t.sse(&path, None).await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "while you were away"}),
    )
    .await;
    let missed = watcher.until("turn_complete").await;
    let missed_ids: Vec<u64> = missed.iter().filter_map(|e| e.id).collect();

    let mut resumed = t.sse(&path, Some(last_id)).await;
    let replay = resumed.until("turn_complete").await;
    let replay_ids: Vec<u64> = replay.iter().filter_map(|e| e.id).collect();
    assert_eq!(
        replay_ids, missed_ids,
        "exactly the missed events, no more, no fewer"
    );
    assert_eq!(replay_ids[0], last_id + 1);
    assert_eq!(text_of(&replay), "while you were away");
    assert!(
        !kinds(&replay).contains(&"connected"),
        "a resume is not an attach"
    );
}

#[tokio::test]
async fn the_node_stream_orders_every_workstream_and_reports_turn_completion() {
    let t = TestNode::start().await;
    let (_, second) = t
        .post("/v1/api/workstreams/new", json!({"name": "b"}))
        .await;
    let second = second["ws_id"].as_str().unwrap().to_string();
    let mut node = t.sse("/v1/api/events/node", None).await;
    let hello = node.next().await;
    assert_eq!(hello.kind(), "node_hello");
    assert_eq!(hello.id, None, "the hello is not a position in the log");
    assert_eq!(hello.data["reset"], false);
    let boot = hello.data["boot"].as_u64().unwrap();
    assert!(boot > 0);
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "one", "correlation_id": "c00000000001"}),
    )
    .await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": second, "message": "two", "correlation_id": "c00000000002"}),
    )
    .await;
    let mut completions = Vec::new();
    let mut seen = Vec::new();
    while completions.len() < 2 {
        let e = node.next().await;
        if e.kind() == "turn_complete" {
            completions.push((
                e.data["correlation_id"].as_str().unwrap().to_string(),
                e.data["content"].clone(),
                e.data["ws_id"].clone(),
            ));
        }
        seen.push(e);
    }
    completions.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        completions[0],
        ("c00000000001".into(), json!("one"), json!(t.default_ws))
    );
    assert_eq!(
        completions[1],
        ("c00000000002".into(), json!("two"), json!(second))
    );
    let node_seqs: Vec<u64> = seen.iter().map(|e| e.id.unwrap()).collect();
    assert!(
        node_seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "{node_seqs:?}"
    );
    for ws in [&t.default_ws, &second] {
        let ws_seqs: Vec<u64> = seen
            .iter()
            .filter(|e| e.data["ws_id"] == json!(ws))
            .map(|e| e.data["ws_seq"].as_u64().unwrap())
            .collect();
        assert!(
            ws_seqs.windows(2).all(|w| w[1] > w[0]),
            "per-workstream order kept: {ws_seqs:?}"
        );
    }

    // Resume from the middle: the rest, in the same order.
    let middle = node_seqs[node_seqs.len() / 2];
    let mut resumed = t.sse("/v1/api/events/node", Some(middle)).await;
    assert_eq!(resumed.next().await.kind(), "node_hello");
    let expected: Vec<u64> = node_seqs.iter().copied().filter(|s| *s > middle).collect();
    let mut got = Vec::new();
    while got.len() < expected.len() {
        got.push(resumed.next().await.id.unwrap());
    }
    assert_eq!(got, expected);

    // A resume point of another boot means nothing here: everything retained, flagged.
    let path = format!("/v1/api/events/node?boot={}&from={middle}", boot + 1);
    let mut other_boot = t.sse(&path, None).await;
    let hello = other_boot.next().await;
    assert_eq!(hello.data["reset"], true, "{:?}", hello.data);
    assert_eq!(hello.data["boot"], json!(boot));
    let first = other_boot.next().await;
    assert!(
        first.id.unwrap() < node_seqs[0],
        "the replay starts at the oldest retained event, not at the foreign resume point"
    );
    // The same boot resumes normally.
    let path = format!("/v1/api/events/node?boot={boot}&from={middle}");
    let mut same_boot = t.sse(&path, None).await;
    assert_eq!(same_boot.next().await.data["reset"], false);
    assert_eq!(same_boot.next().await.id, Some(middle + 1));
}

#[tokio::test]
async fn bad_node_stream_parameters_are_json_400s() {
    let t = TestNode::start().await;
    for query in ["from=abc", "boot=-1", "from=1.5"] {
        let (status, body) = t
            .get(&format!("/v1/api/events/node?{query}"), Some(FULL))
            .await;
        assert_eq!(status, 400, "{query}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("must be a non-negative integer"),
            "{query}: {body}"
        );
    }
}

#[tokio::test]
async fn the_global_stream_carries_states_activity_and_closures() {
    let t = TestNode::start().await;
    let mut global = t.sse("/v1/api/events/global", None).await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "global view"}),
    )
    .await;
    let mut states = Vec::new();
    loop {
        let e = global.next().await;
        assert!(
            ["ws_state", "ws_activity"].contains(&e.kind()),
            "{:?}",
            e.data
        );
        if e.kind() == "ws_state" {
            states.push(e.data["state"].as_str().unwrap().to_string());
            if e.data["state"] == "idle" {
                assert_eq!(e.data["content"], "global view");
                break;
            }
        }
    }
    assert_eq!(states, ["thinking", "idle"]);

    let (_, made) = t.post("/v1/api/workstreams/new", json!({})).await;
    // Eviction and idle closes are announced; an explicit close is not (as the original).
    t.node.announce_closed(&turnstone_engine::Closed {
        ws_id: made["ws_id"].as_str().unwrap().into(),
        name: "x".into(),
        reason: "idle",
    });
    let e = global.next().await;
    assert_eq!(e.kind(), "ws_closed");
    assert_eq!(e.data["reason"], "idle");
}

#[tokio::test]
async fn an_explicit_close_is_on_the_node_stream_but_not_the_global_one() {
    let t = TestNode::start().await;
    let (_, made) = t
        .post("/v1/api/workstreams/new", json!({"name": "short-lived"}))
        .await;
    let id = made["ws_id"].as_str().unwrap().to_string();
    let mut node = t.sse("/v1/api/events/node", None).await;
    let hello = node.next().await;
    assert_eq!(hello.kind(), "node_hello", "{:?}", hello.data);
    let mut global = t.sse("/v1/api/events/global", None).await;
    let (status, _) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": id}))
        .await;
    assert_eq!(status, 200);
    let e = node.next().await;
    assert_eq!(e.kind(), "ws_closed");
    assert_eq!(e.data["reason"], "closed");
    assert_eq!(e.data["ws_id"], json!(id));
    // The global stream stays silent about it; its next event is the next real one.
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "after"}),
    )
    .await;
    let next = global.next().await;
    assert_ne!(next.kind(), "ws_closed", "{:?}", next.data);
}
