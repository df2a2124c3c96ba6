//! The bridge's protocol surface: create, send, turn completion, approvals, close, dead
//! letters — against a real node and real Redis.

use std::time::Duration;

use futures::StreamExt;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use redis::AsyncCommands;
use serde_json::{Value, json};

use super::harness::*;

async fn next_json(s: &mut (impl futures::Stream<Item = redis::Msg> + Unpin)) -> Value {
    let m = tokio::time::timeout(Duration::from_secs(20), s.next())
        .await
        .expect("no event")
        .unwrap();
    serde_json::from_str(&m.get_payload::<String>().unwrap()).unwrap()
}

#[tokio::test]
async fn a_queued_send_is_acked_streams_and_completes_with_its_correlation_id() {
    let node = NodeProc::start("basic-a").await;
    let mut mq = Mq::shared("basic").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({"name": "first"})).await;
    assert_eq!(mq.owner(&ws).await.as_deref(), Some("basic-a"));
    let ttl: i64 = mq.conn.ttl(mq.key(&format!("ws:{ws}"))).await.unwrap();
    assert!(
        ttl > 0 && ttl <= 6,
        "the ownership key is a lease: ttl {ttl}"
    );
    let hb: String = mq.conn.get(mq.key("node:basic-a")).await.unwrap();
    let hb: Value = serde_json::from_str(&hb).unwrap();
    assert_eq!(hb["server_url"], json!(node.url));
    assert!(hb["max_ws"].as_u64().unwrap() >= 1 && hb["started"].as_f64().unwrap() > 0.0);

    let ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let mut s = ps.into_on_message();
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": "hello bridge", "correlation_id": "c0ffee000001"}),
    )
    .await;
    let mut kinds = Vec::new();
    let done = loop {
        let v = next_json(&mut s).await;
        kinds.push(v["type"].as_str().unwrap().to_string());
        if v["type"] == "turn_complete" {
            break v;
        }
    };
    assert_eq!(done["correlation_id"], "c0ffee000001");
    assert_eq!(done["content"], "hello bridge");
    // The ack (inbound side) and the turn's events (event side) are published by two tasks:
    // the ack may follow the first state change, but it always precedes the completion.
    let pos = |k: &str| kinds.iter().position(|x| x == k).unwrap();
    assert!(pos("ack") < pos("turn_complete"), "{kinds:?}");
    assert!(
        pos("content") < pos("stream_end") && pos("stream_end") < pos("turn_complete"),
        "{kinds:?}"
    );

    // The stream holds the same turn, in order, for late consumers.
    let stream = mq.stream(&ws).await;
    let types: Vec<&str> = stream.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"turn_complete"), "{types:?}");
    let completes = stream
        .iter()
        .filter(|e| e["type"] == "turn_complete" && e["correlation_id"] == "c0ffee000001")
        .count();
    assert_eq!(completes, 1);
    mq.cleanup().await;
}

#[tokio::test]
async fn an_approval_is_relayed_from_the_response_list_and_decided_once() {
    let node = NodeProc::start("appr-a").await;
    let mut mq = Mq::shared("appr").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({"auto_approve": false})).await;
    let ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let mut s = ps.into_on_message();
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": "TOOL: echo relayed", "correlation_id": "a11111111111"}),
    )
    .await;
    let request = loop {
        let v = next_json(&mut s).await;
        if v["type"] == "approval_request" {
            break v;
        }
    };
    let rid = request["correlation_id"].as_str().unwrap().to_string();
    assert!(!rid.is_empty());
    assert_eq!(request["items"][0]["func_name"], "bash");
    let reply = json!({"type": "approve", "request_id": rid, "approved": true, "ws_id": ws});
    // Two consumers answer: the first decision wins, the second changes nothing.
    mq.push(&format!("resp:{rid}"), &reply).await;
    mq.push(
        &format!("resp:{rid}"),
        &json!({"type": "approve", "request_id": rid, "approved": false}),
    )
    .await;
    let mut output = None;
    loop {
        let v = next_json(&mut s).await;
        if v["type"] == "tool_result" {
            output = Some(v["output"].as_str().unwrap().to_string());
        }
        if v["type"] == "turn_complete" {
            assert_eq!(v["correlation_id"], "a11111111111");
            break;
        }
    }
    assert!(output.unwrap().contains("relayed"), "the approved tool ran");
    let prompts = mq
        .stream(&ws)
        .await
        .iter()
        .filter(|e| e["type"] == "approval_request")
        .count();
    assert_eq!(prompts, 1);
    mq.cleanup().await;
}

#[tokio::test]
async fn an_explicit_close_publishes_ws_closed_and_drops_the_lease() {
    let node = NodeProc::start("close-a").await;
    let mut mq = Mq::shared("close").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({})).await;
    let ps = mq.subscribe(&["events:cluster"]).await;
    let mut s = ps.into_on_message();
    mq.push("inbound", &json!({"type": "close_workstream", "ws_id": ws}))
        .await;
    loop {
        let v = next_json(&mut s).await;
        if v["type"] == "ws_closed" {
            assert_eq!(v["ws_id"], json!(ws));
            break;
        }
    }
    eventually("ownership key deleted", Duration::from_secs(10), || {
        let mut c = mq.conn.clone();
        let key = mq.key(&format!("ws:{ws}"));
        async move { !c.exists::<_, bool>(key).await.unwrap() }
    })
    .await;
    mq.cleanup().await;
}

#[tokio::test]
async fn malformed_messages_are_dead_lettered_with_reasons_and_the_bridge_keeps_serving() {
    let node = NodeProc::start("dead-a").await;
    let mut mq = Mq::shared("dead").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({})).await;
    // Fixed cases, then generated garbage.
    let mut feed: Vec<String> = vec![
        "not json".into(),
        "".into(),
        "[1,2,3]".into(),
        "42".into(),
        r#"{"type":"bogus","correlation_id":"b0b0b0b0b0b0"}"#.into(),
        r#"{"no_type":true}"#.into(),
        r#"{"type":"send","ws_id":"does-not-exist","message":"hi","correlation_id":"d0d0d0d0d0d0"}"#.into(),
        r#"{"type":"approve","approved":true}"#.into(),
        format!(r#"{{"type":"send","ws_id":"{ws}","message":"","correlation_id":"e0e0e0e0e0e0"}}"#),
        r#"{"type":"create_workstream","target_node":"ghost-node","correlation_id":"f0f0f0f0f0f0"}"#.into(),
    ];
    let mut runner = TestRunner::deterministic();
    let garbage = proptest::string::string_regex("[ -~]{0,40}").unwrap();
    for _ in 0..40 {
        let s = garbage.new_tree(&mut runner).unwrap().current();
        if serde_json::from_str::<Value>(&s).is_ok_and(|v| v.get("type").is_some()) {
            continue;
        }
        feed.push(s);
    }
    for raw in &feed {
        mq.push_raw("inbound", raw).await;
    }
    let expected = feed.len();
    eventually(
        "every bad message dead-lettered",
        Duration::from_secs(30),
        || {
            let mut c = mq.conn.clone();
            let key = mq.key("dead");
            async move { c.llen::<_, usize>(key).await.unwrap() >= expected }
        },
    )
    .await;
    let dead = mq.dead_letters().await;
    assert_eq!(dead.len(), expected, "{dead:#?}");
    let reason_of = |payload: &str| {
        dead.iter()
            .find(|d| {
                d["payload"]
                    .as_str()
                    .is_some_and(|p| p.starts_with(payload))
            })
            .map(|d| d["reason"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert!(reason_of("not json").starts_with("invalid JSON"));
    assert!(reason_of("[1,2,3]").contains("not a JSON object"));
    assert!(reason_of(r#"{"type":"bogus""#).contains("Unknown inbound message type: 'bogus'"));
    assert!(reason_of(r#"{"type":"send","ws_id":"does-not-exist""#).contains("Unknown workstream"));
    assert!(
        reason_of(r#"{"type":"create_workstream","target_node":"ghost-node""#)
            .contains("not alive")
    );
    for d in &dead {
        assert!(!d["reason"].as_str().unwrap().is_empty(), "{d}");
        assert_eq!(d["node_id"], "dead-a");
    }
    // Nothing is left half-handled: a message leaves the processing list right after its
    // dead letter is written (the last ones may still be on their way when the count is
    // reached), and the bridge still serves.
    eventually(
        "the processing list drained",
        Duration::from_secs(10),
        || {
            let mut c = mq.conn.clone();
            let key = format!("{{{}:inbound}}:processing:dead-a", mq.prefix);
            async move { c.llen::<_, usize>(key).await.unwrap() == 0 }
        },
    )
    .await;
    assert_eq!(
        mq.dead_letters().await.len(),
        expected,
        "no message dead-lettered twice"
    );
    let ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let mut s = ps.into_on_message();
    mq.push("inbound", &json!({"type": "send", "ws_id": ws, "message": "still here", "correlation_id": "a0a0a0a0a0a0"})).await;
    loop {
        let v = next_json(&mut s).await;
        if v["type"] == "turn_complete" {
            assert_eq!(v["content"], "still here");
            break;
        }
    }
    mq.cleanup().await;
}

#[tokio::test]
async fn the_dead_letter_list_keeps_the_newest_entries_and_counts_what_it_trims() {
    let node = NodeProc::start("dead-cap").await;
    let mut mq = Mq::shared("deadcap").await;
    let metrics = format!("127.0.0.1:{}", free_port());
    let _bridge = BridgeProc::start_with(
        &node,
        &mq.url,
        &mq.prefix,
        &["--dead-letter-max", "5", "--metrics-addr", &metrics],
    )
    .await;
    for i in 0..12 {
        mq.push_raw("inbound", &format!("not json {i:02}")).await;
    }
    let url = format!("http://{metrics}/metrics");
    let counter = |text: &str, name: &str| {
        // `name{node_id="…"} value`
        text.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{'))
            })
            .find_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let scrape = || async {
        match reqwest::get(&url).await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    };
    eventually(
        "12 dead letters written",
        Duration::from_secs(30),
        || async { counter(&scrape().await, "turnstone_bridge_dead_letters_total") == 12 },
    )
    .await;
    let text = scrape().await;
    let dead = mq.dead_letters().await;
    assert_eq!(dead.len(), 5, "the list is capped: {dead:#?}");
    assert!(
        dead.iter().all(|d| d["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("invalid JSON")),
        "{dead:#?}"
    );
    assert_eq!(
        counter(&text, "turnstone_bridge_dead_letters_trimmed_total"),
        7,
        "what was trimmed is counted: {text}"
    );
    mq.cleanup().await;
}
