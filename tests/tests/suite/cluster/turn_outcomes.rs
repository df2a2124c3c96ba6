//! Every send ends in exactly one `turn_complete` on its workstream's Redis stream, also when
//! its node dies: a turn the node was running ends as interrupted after the restart (not run
//! again), and a `turn_complete` the node emitted that its bridge never relayed is recovered
//! from the node's store and published once.

use std::process::Stdio;
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::harness::*;

/// The scripted model as its own process, answering after `delay_ms` (so a turn is still
/// running when its node is killed).
async fn slow_model(delay_ms: u64) -> (Child, String) {
    let mut child = Command::new(binary("turnstone-fake-llm"))
        .args([
            "--port",
            "0",
            "--first-byte-delay-ms",
            &delay_ms.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("no listening line")
        .unwrap()
        .unwrap();
    let base = line
        .strip_prefix("turnstone-fake-llm listening on ")
        .unwrap()
        .to_string();
    (child, base)
}

fn turn_completes(stream: &[Value], cid: &str) -> Vec<Value> {
    stream
        .iter()
        .filter(|e| e["type"] == "turn_complete" && e["correlation_id"] == cid)
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_turn_running_when_its_node_was_killed_ends_once_as_interrupted() {
    let (_model, base) = slow_model(3000).await;
    let mut node =
        NodeProc::start_full("int-a", Vec::new(), vec!["--base-url".into(), base.clone()]).await;
    let mut mq = Mq::shared("int").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("int-a", json!({})).await;
    let cid = "1a7e00000001";
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": "slow", "correlation_id": cid}),
    )
    .await;
    // The turn is running (the model answers only after 3 s) …
    eventually("the turn started", Duration::from_secs(20), || {
        let mut mq2 = mq.clone();
        let ws = ws.clone();
        async move {
            mq2.stream(&ws)
                .await
                .iter()
                .any(|e| e["type"] == "state_change" && e["state"] == "thinking")
        }
    })
    .await;
    // … when the node dies. After its restart the turn ends once, as interrupted.
    node.kill9();
    node.spawn().await;
    eventually(
        "the interrupted turn ended",
        Duration::from_secs(30),
        || {
            let mut mq2 = mq.clone();
            let ws = ws.clone();
            async move { !turn_completes(&mq2.stream(&ws).await, cid).is_empty() }
        },
    )
    .await;
    let ends = turn_completes(&mq.stream(&ws).await, cid);
    assert_eq!(ends.len(), 1, "{ends:#?}");
    assert_eq!(ends[0]["content"], "");
    // Not run again, and a second restart reports nothing twice.
    node.kill9();
    node.spawn().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stream = mq.stream(&ws).await;
    assert_eq!(turn_completes(&stream, cid).len(), 1, "{stream:#?}");
    let awaiting: usize = mq.conn.hlen(mq.key("bridge:int-a:awaiting")).await.unwrap();
    assert_eq!(awaiting, 0, "the interrupted turn settled the awaited send");
    assert!(mq.dead_letters().await.is_empty());
    mq.cleanup().await;
}

#[tokio::test]
async fn a_turn_complete_the_bridge_never_relayed_is_recovered_after_the_node_restarts() {
    let mut node = NodeProc::start("rec-a").await;
    let mut mq = Mq::shared("rec").await;
    let mut bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("rec-a", json!({})).await;
    // A send relayed normally: its turn_complete settles it.
    let relayed = "4e1a7ed00001";
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": "relayed", "correlation_id": relayed}),
    )
    .await;
    eventually(
        "the relayed turn published",
        Duration::from_secs(20),
        || {
            let mut mq2 = mq.clone();
            let ws = ws.clone();
            async move { !turn_completes(&mq2.stream(&ws).await, relayed).is_empty() }
        },
    )
    .await;
    // The bridge dies; the node runs a send the bridge had handed on (its awaited entry is
    // there) and dies before any bridge relays its turn_complete.
    bridge.kill9();
    let missed = "4e1a7ed00002";
    let (status, reply) = node
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": "missed", "correlation_id": missed}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    let _: () = mq
        .conn
        .hset(mq.key("bridge:rec-a:awaiting"), missed, &ws)
        .await
        .unwrap();
    eventually("the node completed it", Duration::from_secs(20), || async {
        node.turns_by_correlation().await.contains_key(missed)
    })
    .await;
    node.kill9();
    node.spawn().await;
    bridge.spawn();
    eventually(
        "the missed turn_complete published",
        Duration::from_secs(30),
        || {
            let mut mq2 = mq.clone();
            let ws = ws.clone();
            async move { !turn_completes(&mq2.stream(&ws).await, missed).is_empty() }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let stream = mq.stream(&ws).await;
    let ends = turn_completes(&stream, missed);
    assert_eq!(ends.len(), 1, "{stream:#?}");
    assert!(
        ends[0]["content"].as_str().unwrap().contains("missed"),
        "the turn's own text: {}",
        ends[0]
    );
    assert_eq!(turn_completes(&stream, relayed).len(), 1, "{stream:#?}");
    let awaiting: usize = mq.conn.hlen(mq.key("bridge:rec-a:awaiting")).await.unwrap();
    assert_eq!(awaiting, 0);
    // The recovered event sits between the two runs in the stream's order.
    let ids: Vec<String> = mq
        .stream_entries(&ws)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_by_key(|id| {
        let (ms, seq) = id.split_once('-').unwrap();
        (ms.parse::<u64>().unwrap(), seq.parse::<u64>().unwrap())
    });
    assert_eq!(ids, sorted);
    mq.cleanup().await;
}
