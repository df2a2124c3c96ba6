//! The cluster SSE stream: snapshot first, then node_joined/node_lost from discovery, the
//! bridges' cluster events relayed unchanged (and applied), synthetic events from polls.

use serde_json::json;
use turnstone_console::model::CONSOLE_VERSION;

use super::*;

#[tokio::test]
async fn the_stream_starts_with_a_snapshot_and_relays_bridge_events() {
    let p = prefix();
    let a = NodeServer::start("node-a", CONSOLE_VERSION, 10).await;
    heartbeat(&p, "node-a", &a.url, 10).await;
    // Polls only at start: the model changes here come from the events alone.
    let console = TestConsole::start_with(&p, |c| {
        c.poll_interval = std::time::Duration::from_secs(3600);
    })
    .await;
    console.wait_for_nodes(&["node-a"]).await;

    let mut sse = console.sse("/v1/api/cluster/events").await;
    let first = sse.next().await;
    assert_eq!(first["type"], "snapshot");
    assert_eq!(first["nodes"][0]["node_id"], "node-a");
    assert_eq!(
        first["nodes"][0]["workstreams"][0]["id"],
        a.default_ws.as_str()
    );
    assert_eq!(first["overview"]["nodes"], 1);
    assert!(first["timestamp"].as_f64().unwrap() > 1.0e9);
    assert!(sse.raw.starts_with("data: {"), "{}", sse.raw);
    assert!(sse.raw.contains("}\r\n\r\n"), "CRLF framing");

    // Bridge events are relayed with their keys as published, and applied.
    let created = json!({"type": "ws_created", "ws_id": "wsx", "correlation_id": "", "timestamp": 1.5,
        "name": "via-bridge", "node_id": "node-a", "resumed": false, "message_count": 0});
    publish(&p, &created).await;
    assert_eq!(
        sse.until("ws_created", |e| e["ws_id"] == "wsx").await,
        created
    );
    let state = json!({"type": "cluster_state", "ws_id": "wsx", "correlation_id": "", "timestamp": 2.0,
        "state": "thinking", "node_id": "node-a", "tokens": 12, "context_ratio": 0.25,
        "activity": "", "activity_state": "thinking"});
    publish(&p, &state).await;
    assert_eq!(sse.until("cluster_state", |_| true).await, state);
    let (_, ws) = console
        .get("/v1/api/cluster/workstreams?state=thinking")
        .await;
    assert_eq!(ws["total"], 1, "{ws}");
    assert_eq!(ws["workstreams"][0]["tokens"], 12);
    assert_eq!(ws["workstreams"][0]["name"], "via-bridge");
    publish(
        &p,
        &json!({"type": "ws_rename", "ws_id": "wsx", "name": "renamed"}),
    )
    .await;
    sse.until("ws_rename", |e| e["name"] == "renamed").await;
    let (_, ws) = console
        .get("/v1/api/cluster/workstreams?search=renamed")
        .await;
    assert_eq!(ws["total"], 1);
    // Invalid JSON is dropped; unknown types still reach the browser.
    let mut c = redis().await;
    let _: i64 = redis::cmd("PUBLISH")
        .arg(format!("{p}:events:cluster"))
        .arg("{not json")
        .query_async(&mut c)
        .await
        .unwrap();
    publish(&p, &json!({"type": "something_new", "x": 1})).await;
    let next = sse.until("something_new", |_| true).await;
    assert_eq!(next, json!({"type": "something_new", "x": 1}));
    assert!(!sse.raw.contains("not json"));
    publish(&p, &json!({"type": "ws_closed", "ws_id": "wsx"})).await;
    sse.until("ws_closed", |e| e["ws_id"] == "wsx").await;
    assert_eq!(
        console.get("/v1/api/cluster/overview").await.1["workstreams"],
        1
    );
}

#[tokio::test]
async fn discovery_and_polls_produce_joined_lost_and_synthetic_events() {
    let p = prefix();
    let a = NodeServer::start("node-a", CONSOLE_VERSION, 10).await;
    heartbeat(&p, "node-a", &a.url, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["node-a"]).await;
    let mut sse = console.sse("/v1/api/cluster/events").await;
    assert_eq!(sse.next().await["type"], "snapshot");

    // A node joins.
    let b = NodeServer::start("node-b", CONSOLE_VERSION, 10).await;
    heartbeat(&p, "node-b", &b.url, 10).await;
    let joined = sse.until("node_joined", |_| true).await;
    assert_eq!(joined, json!({"type": "node_joined", "node_id": "node-b"}));
    // Its first poll reports its workstream.
    let first = sse
        .until("ws_created", |e| e["ws_id"] == b.default_ws.as_str())
        .await;
    assert_eq!(first["node_id"], "node-b");

    // A workstream made on the node itself shows up through the poll diff.
    let made = a.create_workstream("direct").await;
    let synthetic = sse
        .until("ws_created", |e| e["ws_id"] == made.as_str())
        .await;
    assert_eq!(
        synthetic,
        json!({"type": "ws_created", "ws_id": made, "name": "direct", "node_id": "node-a"})
    );

    // The heartbeat goes away: node_lost.
    drop_heartbeat(&p, "node-b").await;
    let lost = sse.until("node_lost", |_| true).await;
    assert_eq!(lost, json!({"type": "node_lost", "node_id": "node-b"}));
    let (_, o) = console.get("/v1/api/cluster/overview").await;
    assert_eq!(o["nodes"], 1);
}

#[tokio::test]
async fn idle_streams_get_pings() {
    let console = TestConsole::start_with(&prefix(), |c| {
        c.sse_ping = std::time::Duration::from_millis(100);
    })
    .await;
    let mut sse = console.sse("/v1/api/cluster/events").await;
    assert_eq!(sse.next().await["type"], "snapshot");
    let ping = sse.next_frame().await;
    assert!(ping.starts_with(": ping - "), "{ping:?}");
    assert!(ping.ends_with("+00:00\r\n\r\n"), "{ping:?}");
}

#[tokio::test]
async fn shutdown_ends_open_streams_promptly() {
    let console = TestConsole::start(&prefix()).await;
    let mut sse = console.sse("/v1/api/cluster/events").await;
    assert_eq!(sse.next().await["type"], "snapshot");
    let TestConsole {
        _running: running, ..
    } = console;
    tokio::time::timeout(std::time::Duration::from_secs(20), running.shutdown())
        .await
        .expect("a console with an open stream stops (bounded wait)");
    assert!(sse.ends().await, "the stream was closed");
}
