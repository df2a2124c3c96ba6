//! Fault injection: SIGKILL bridges and nodes, restart Redis — count turns on the node.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::{Value, json};

use super::harness::*;

fn cid(i: usize) -> String {
    format!("{:012x}", 0xc1d0_0000_0000u64 + i as u64)
}

/// Waits until the node has completed a turn for every id, then asserts each exactly once.
pub(super) async fn assert_exactly_once(node: &NodeProc, ids: &HashSet<String>, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let turns = node.turns_by_correlation().await;
        let done = ids.iter().filter(|c| turns.contains_key(*c)).count();
        let dup: Vec<_> = turns
            .iter()
            .filter(|(c, n)| ids.contains(*c) && **n > 1)
            .collect();
        assert!(dup.is_empty(), "duplicated turns: {dup:?}");
        if done == ids.len() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "lost: {} of {} sends have no turn",
            ids.len() - done,
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn sigkill_the_bridge_while_a_thousand_sends_flow_loses_and_duplicates_nothing() {
    let node = NodeProc::start("kill-b").await;
    let mut mq = Mq::shared("killb").await;
    let mut bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    // Each send creates its own workstream (no ws_id), so every send is one turn — creates
    // and sends both have to survive the kills exactly once.
    let n = 1000;
    let ids: HashSet<String> = (0..n).map(cid).collect();
    let producer = {
        let mut p = Mq::at(&mq.url, &mq.prefix).await;
        tokio::spawn(async move {
            for i in 0..n {
                p.push(
                    "inbound",
                    &json!({"type": "send", "message": format!("m{i}"), "correlation_id": cid(i)}),
                )
                .await;
                if i % 50 == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
    };
    for round in 0..5u64 {
        let wait = 150 + (rand::random::<u64>() % 400);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        bridge.kill9();
        tokio::time::sleep(Duration::from_millis(50 * (round % 3))).await;
        bridge.restart();
    }
    producer.await.unwrap();
    assert_exactly_once(&node, &ids, Duration::from_secs(120)).await;
    // What consumers see is complete and deduplicated too: one turn_complete per id across
    // all streams (the bridge may still be catching up on the node's events).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let events = loop {
        let events = mq.all_stream_events().await;
        let published = events
            .iter()
            .filter(|(_, e)| e["type"] == "turn_complete")
            .count();
        if published >= n || tokio::time::Instant::now() > deadline {
            break events;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let mut seen = HashSet::new();
    for (ws, e) in events.iter().filter(|(_, e)| e["type"] == "turn_complete") {
        let c = e["correlation_id"].as_str().unwrap().to_string();
        if !seen.insert(c.clone()) {
            let all: Vec<_> = events
                .iter()
                .filter(|(_, e)| e["correlation_id"] == json!(c))
                .collect();
            let entries = mq.stream_entries(ws).await;
            panic!("turn_complete published twice for {c}: {all:#?}\nstream {ws}: {entries:#?}");
        }
    }
    assert_eq!(seen.intersection(&ids).count(), n);
    // And each reply's text once: the content deltas on a workstream's stream (joined in
    // batches that the replays after each kill cut differently) spell its turn_complete.
    let mut text: HashMap<&str, String> = HashMap::new();
    for (ws, e) in &events {
        if e["type"] == "content" {
            text.entry(ws)
                .or_default()
                .push_str(e["text"].as_str().unwrap());
        }
    }
    let mut replies = 0;
    for (ws, e) in events.iter().filter(|(_, e)| e["type"] == "turn_complete") {
        let reply = e["content"].as_str().unwrap();
        assert_eq!(
            text.get(ws.as_str()).map(String::as_str),
            Some(reply),
            "stream {ws}"
        );
        replies += usize::from(!reply.is_empty());
    }
    assert_eq!(replies, n, "every turn streamed a reply");
    assert!(mq.dead_letters().await.is_empty());
    mq.cleanup().await;
}

/// A connection for `XREAD … BLOCK 1000`: its response timeout must outlast the block (the
/// default 500 ms turns an idle second into an error on a loaded machine).
async fn blocking_reader(client: &redis::Client) -> redis::aio::MultiplexedConnection {
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

#[tokio::test]
async fn restarting_redis_mid_traffic_loses_nothing() {
    let mut redis_server = PrivateRedis::start().await;
    let node = NodeProc::start("rr-a").await;
    let prefix = unique_prefix("rr");
    let mut mq = Mq::at(&redis_server.url(), &prefix).await;
    let _bridge = BridgeProc::start(&node, &redis_server.url(), &prefix).await;
    let n = 400;
    let ids: HashSet<String> = (0..n).map(cid).collect();
    // Three restarts, each while the bridge still works through a backlog (pops, node calls,
    // lease writes and acks in flight), then the rest of the traffic after the last one.
    let rounds = 4;
    for round in 0..rounds {
        for i in round * n / rounds..(round + 1) * n / rounds {
            mq.push(
                "inbound",
                &json!({"type": "send", "message": format!("r{i}"), "correlation_id": cid(i)}),
            )
            .await;
        }
        if round + 1 == rounds {
            break;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        redis_server.stop().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        redis_server.spawn().await;
        mq = Mq::at(&redis_server.url(), &prefix).await;
    }
    assert_exactly_once(&node, &ids, Duration::from_secs(90)).await;
    assert!(mq.dead_letters().await.is_empty());
    redis_server.stop().await;
}

/// A pop whose reply dies with the connection leaves the message in the processing list,
/// unseen by the bridge. Planted here directly (the race itself is rare); after Redis
/// restarts, the bridge must re-drive its processing list and deliver it exactly once.
#[tokio::test]
async fn a_message_stranded_in_the_processing_list_is_redriven_after_a_redis_restart() {
    let mut redis_server = PrivateRedis::start().await;
    let node = NodeProc::start("rs-a").await;
    let prefix = unique_prefix("rs");
    let keys = Mq::at(&redis_server.url(), &prefix).await;
    let _bridge = BridgeProc::start(&node, &redis_server.url(), &prefix).await;
    // The bridge is up and fetching once a first message has its turn.
    let first = cid(1);
    let mut producer = Mq::at(&redis_server.url(), &prefix).await;
    producer
        .push(
            "inbound",
            &json!({"type": "send", "message": "warm-up", "correlation_id": first}),
        )
        .await;
    assert_exactly_once(&node, &[first.clone()].into(), Duration::from_secs(30)).await;
    let stranded = cid(2);
    let processing = format!("{{{}}}:processing:rs-a", keys.key("inbound"));
    let _: () = producer
        .conn
        .rpush(
            &processing,
            json!({"type": "send", "message": "stranded", "correlation_id": stranded}).to_string(),
        )
        .await
        .unwrap();
    redis_server.stop().await;
    redis_server.spawn().await;
    let mut mq = Mq::at(&redis_server.url(), &prefix).await;
    assert_exactly_once(&node, &[first, stranded].into(), Duration::from_secs(30)).await;
    assert!(mq.dead_letters().await.is_empty());
    redis_server.stop().await;
}

#[tokio::test]
async fn a_killed_node_s_soft_workstreams_move_and_hard_pinned_ones_fail_clearly() {
    let mut a = NodeProc::start("fo-a").await;
    let b = NodeProc::start("fo-b").await;
    let mut mq = Mq::shared("fo").await;
    let _ba = BridgeProc::start(&a, &mq.url, &mq.prefix).await;
    let _bb = BridgeProc::start(&b, &mq.url, &mq.prefix).await;
    eventually("both heartbeats", Duration::from_secs(10), || {
        let mut c = Mq::key_conn(&mq);
        async move {
            c.0.exists::<_, bool>(&c.1).await.unwrap() && c.0.exists::<_, bool>(&c.2).await.unwrap()
        }
    })
    .await;
    let soft = mq.create_ws("fo-a", json!({"name": "soft"})).await;
    let hard = mq
        .create_ws("fo-a", json!({"name": "hard", "pin": "hard"}))
        .await;
    assert_eq!(mq.owner(&soft).await.as_deref(), Some("fo-a"));

    a.kill9();
    eventually("node a declared dead", Duration::from_secs(15), || {
        let mut c = mq.conn.clone();
        let k = mq.key("node:fo-a");
        async move { !c.exists::<_, bool>(k).await.unwrap() }
    })
    .await;
    // The original client routes by the ownership key: straight into the dead node's queue.
    mq.push("inbound:fo-a", &json!({"type": "send", "ws_id": soft, "message": "moved", "correlation_id": "50f750f750f7"})).await;
    mq.push("inbound", &json!({"type": "send", "ws_id": hard, "message": "stuck", "correlation_id": "4a4d4a4d4a4d"})).await;
    let want: HashSet<String> = ["50f750f750f7".to_string()].into();
    assert_exactly_once(&b, &want, Duration::from_secs(30)).await;
    assert_eq!(
        mq.owner(&soft).await.as_deref(),
        Some("fo-b"),
        "the lease moved"
    );
    eventually(
        "hard-pinned send dead-lettered",
        Duration::from_secs(20),
        || {
            let mut c = mq.conn.clone();
            let k = mq.key("dead");
            async move {
                let items: Vec<String> = c.lrange(k, 0, -1).await.unwrap();
                items
                    .iter()
                    .any(|i| i.contains("4a4d4a4d4a4d") && i.contains("hard-pinned"))
            }
        },
    )
    .await;
    // Nothing waits in the dead node's queue.
    let left: usize = mq.conn.llen(mq.key("inbound:fo-a")).await.unwrap();
    assert_eq!(left, 0);
    mq.cleanup().await;
}

impl Mq {
    fn key_conn(&self) -> (redis::aio::MultiplexedConnection, String, String) {
        (
            self.conn.clone(),
            self.key("node:fo-a"),
            self.key("node:fo-b"),
        )
    }
}

#[tokio::test]
async fn a_thousand_approval_round_trips_while_the_consumer_reconnects_prompt_once_and_lose_no_decision()
 {
    let node = NodeProc::start("ap-a").await;
    let mut mq = Mq::shared("ap").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let workstreams = 50;
    let per_ws = 20;
    let mut ws_ids = Vec::new();
    for i in 0..workstreams {
        ws_ids.push(
            mq.create_ws("", json!({"name": format!("ap{i}"), "auto_approve": false}))
                .await,
        );
    }
    let send = |ws: &str, i: usize, k: usize| json!({"type": "send", "ws_id": ws, "message": format!("TOOL: echo r{i}-{k}"), "correlation_id": cid(i * 1000 + k)});
    let mut next = vec![0usize; workstreams];
    for (i, ws) in ws_ids.iter().enumerate() {
        mq.push("inbound", &send(ws, i, 0)).await;
        next[i] = 1;
    }
    // The consumer follows every workstream's stream (the lossless path), answers each
    // approval_request, and drops its connection every 200 events, resuming from its ids.
    let keys: Vec<String> = ws_ids
        .iter()
        .map(|w| mq.key(&format!("stream:{w}")))
        .collect();
    let mut last: Vec<String> = vec!["0".to_string(); workstreams];
    let mut prompts: std::collections::HashMap<String, usize> = Default::default();
    let mut completes = 0usize;
    let mut tool_results = 0usize;
    let mut since_reconnect = 0usize;
    let mut reconnects = 0usize;
    let mut conn = blocking_reader(&mq.client).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    while completes < workstreams * per_ws {
        assert!(
            tokio::time::Instant::now() < deadline,
            "stalled at {completes} turns"
        );
        let opts = redis::streams::StreamReadOptions::default()
            .count(500)
            .block(1000);
        let reply: Option<redis::streams::StreamReadReply> =
            conn.xread_options(&keys, &last, &opts).await.unwrap();
        let Some(reply) = reply else { continue };
        for key in reply.keys {
            let i = keys.iter().position(|k| *k == key.key).unwrap();
            for entry in key.ids {
                last[i] = entry.id.clone();
                since_reconnect += 1;
                let e: Value =
                    serde_json::from_str(&entry.get::<String>("event").unwrap()).unwrap();
                match e["type"].as_str().unwrap() {
                    "approval_request" => {
                        let rid = e["correlation_id"].as_str().unwrap().to_string();
                        *prompts.entry(rid.clone()).or_insert(0) += 1;
                        mq.push(
                            &format!("resp:{rid}"),
                            &json!({"type": "approve", "request_id": rid, "approved": true}),
                        )
                        .await;
                    }
                    "tool_result" => tool_results += 1,
                    "turn_complete" => {
                        completes += 1;
                        if next[i] < per_ws {
                            mq.push("inbound", &send(&ws_ids[i], i, next[i])).await;
                            next[i] += 1;
                        }
                    }
                    _ => {}
                }
            }
        }
        if since_reconnect >= 200 {
            conn = blocking_reader(&mq.client).await;
            since_reconnect = 0;
            reconnects += 1;
        }
    }
    assert!(
        reconnects >= 5,
        "the consumer reconnected {reconnects} times"
    );
    assert_eq!(
        prompts.len(),
        workstreams * per_ws,
        "one prompt per tool call"
    );
    assert!(prompts.values().all(|n| *n == 1), "duplicate prompts");
    assert_eq!(
        tool_results,
        workstreams * per_ws,
        "every approval was decided and ran"
    );
    let ids: HashSet<String> = (0..workstreams)
        .flat_map(|i| (0..per_ws).map(move |k| cid(i * 1000 + k)))
        .collect();
    assert_exactly_once(&node, &ids, Duration::from_secs(30)).await;
    mq.cleanup().await;
}

/// A bridge that handed a message to its node and died before acknowledging it leaves the
/// outcome unknown: the node may have applied it. Another bridge's janitor moves what was
/// never handed (it runs elsewhere) and leaves the handed one for its node, which applies it
/// once when its bridge re-drives it — never a second run on another node.
#[tokio::test]
async fn a_message_handed_to_a_node_that_died_waits_for_that_node_and_runs_once() {
    let mut a = NodeProc::start("hd-a").await;
    let b = NodeProc::start("hd-b").await;
    let mut mq = Mq::shared("hd").await;
    let (handed, unhanded) = ("4a4d0ed00001".to_string(), "4a4d0ed00002".to_string());
    // Node a applied `handed` (its bridge handed it on: create with the message's
    // correlation id, then the send) …
    let (status, created) = a
        .post("/v1/api/workstreams/new", json!({"correlation_id": handed}))
        .await;
    assert_eq!(status, 200, "{created}");
    let ws = created["ws_id"].as_str().unwrap().to_string();
    let (status, sent) = a
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": "handed", "correlation_id": handed}),
        )
        .await;
    assert_eq!(status, 200, "{sent}");
    eventually("node a ran it", Duration::from_secs(20), || async {
        a.turns_by_correlation().await.get(&handed) == Some(&1)
    })
    .await;
    // … and its bridge died before the acknowledgement, also holding one it never handed on.
    let processing = format!("{{{}:inbound}}:processing:hd-a", mq.prefix);
    let handed_msg =
        json!({"type": "send", "message": "handed", "correlation_id": handed}).to_string();
    let unhanded_msg =
        json!({"type": "send", "message": "unhanded", "correlation_id": unhanded}).to_string();
    let _: () = redis::pipe()
        .rpush(&processing, &handed_msg)
        .rpush(&processing, &unhanded_msg)
        .hset(format!("{processing}:handed"), &handed_msg, 1)
        .query_async(&mut mq.conn)
        .await
        .unwrap();
    a.kill9();
    let _bb = BridgeProc::start(&b, &mq.url, &mq.prefix).await;
    let want: HashSet<String> = [unhanded.clone()].into();
    assert_exactly_once(&b, &want, Duration::from_secs(30)).await;
    // Several janitor rounds later the handed one still waits for node a.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held: Vec<String> = mq.conn.lrange(&processing, 0, -1).await.unwrap();
    assert_eq!(held, vec![handed_msg.clone()]);
    assert!(!b.turns_by_correlation().await.contains_key(&handed));
    // Node a and its bridge come back: the re-drive reaches node a, which recognises the
    // correlation id (stored with the send) and runs nothing twice.
    a.spawn().await;
    let _ba = BridgeProc::start(&a, &mq.url, &mq.prefix).await;
    eventually(
        "the handed message acknowledged",
        Duration::from_secs(30),
        || {
            let mut c = mq.conn.clone();
            let k = processing.clone();
            async move { c.llen::<_, usize>(k).await.unwrap() == 0 }
        },
    )
    .await;
    let handed_left: usize = mq.conn.hlen(format!("{processing}:handed")).await.unwrap();
    assert_eq!(
        handed_left, 0,
        "the handed mark went with the acknowledgement"
    );
    assert!(
        !a.turns_by_correlation().await.contains_key(&handed),
        "node a ran it again after its restart"
    );
    assert!(!b.turns_by_correlation().await.contains_key(&handed));
    assert!(mq.dead_letters().await.is_empty());
    mq.cleanup().await;
}

/// Messages a bridge had handed to its node, redelivered after it died (before the
/// acknowledgement) while their workstream moved to another live node: the one its node ran
/// is acknowledged, not forwarded; the one its node never saw goes on to the owner. Each runs
/// once (found by the long chaos run: a send interrupted on one node then ran again on the
/// workstream's new owner). The restarted bridge, without a cursor, also replays the
/// workstream's creation from its node's log, which must not take the lease back.
#[tokio::test]
async fn a_handed_message_redelivered_after_its_workstream_moved_runs_once() {
    let a = NodeProc::start("hm-a").await;
    let b = NodeProc::start("hm-b").await;
    let mut mq = Mq::shared("hm").await;
    let (status, created) = a.post("/v1/api/workstreams/new", json!({})).await;
    assert_eq!(status, 200, "{created}");
    let ws = created["ws_id"].as_str().unwrap().to_string();
    let (seen, unseen) = ("5eed0ed00001".to_string(), "5eed0ed00002".to_string());
    let (status, sent) = a
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": "seen", "correlation_id": seen}),
        )
        .await;
    assert_eq!(status, 200, "{sent}");
    eventually("node a ran it", Duration::from_secs(20), || async {
        a.turns_by_correlation().await.get(&seen) == Some(&1)
    })
    .await;
    // The workstream moved to node b meanwhile; bridge a died holding both, marked handed.
    let _: () = mq
        .conn
        .set(mq.key(&format!("ws:{ws}")), "hm-b")
        .await
        .unwrap();
    let processing = format!("{{{}:inbound}}:processing:hm-a", mq.prefix);
    let message = |text: &str, cid: &str| {
        json!({"type": "send", "ws_id": ws, "message": text, "correlation_id": cid}).to_string()
    };
    let (seen_msg, unseen_msg) = (message("seen", &seen), message("unseen", &unseen));
    let _: () = redis::pipe()
        .rpush(&processing, &seen_msg)
        .rpush(&processing, &unseen_msg)
        .hset(format!("{processing}:handed"), &seen_msg, 1)
        .hset(format!("{processing}:handed"), &unseen_msg, 1)
        .query_async(&mut mq.conn)
        .await
        .unwrap();
    let _bb = BridgeProc::start(&b, &mq.url, &mq.prefix).await;
    // Node b must be alive before bridge a routes: a dead owner's workstream would rightly
    // come back to node a (a soft pin), and the forward would not be what is tested.
    eventually("node b alive", Duration::from_secs(20), || {
        let mut c = mq.conn.clone();
        let heartbeat = mq.key("node:hm-b");
        async move { c.exists::<_, bool>(heartbeat).await.unwrap() }
    })
    .await;
    let _ba = BridgeProc::start(&a, &mq.url, &mq.prefix).await;
    let want: HashSet<String> = [unseen.clone()].into();
    assert_exactly_once(&b, &want, Duration::from_secs(30)).await;
    eventually("both acknowledged", Duration::from_secs(30), || {
        let mut c = mq.conn.clone();
        let k = processing.clone();
        async move { c.llen::<_, usize>(k).await.unwrap() == 0 }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !b.turns_by_correlation().await.contains_key(&seen),
        "the owner ran a send its previous node had run"
    );
    let on_a = a.turns_by_correlation().await;
    assert_eq!(on_a.get(&seen), Some(&1), "node a ran it again: {on_a:?}");
    assert!(!on_a.contains_key(&unseen), "{on_a:?}");
    assert!(mq.dead_letters().await.is_empty());
    mq.cleanup().await;
}

/// A bridge takes an approval reply off its response list and records it in its held hash in
/// one step; killed before the node got it, its restart relays it — the turn goes on. A reply
/// held again after it was applied (the bridge died after relaying, before clearing it) is
/// answered `409` by the node: cleared, not dead-lettered, not applied twice.
#[tokio::test]
async fn an_approval_reply_held_by_a_bridge_that_died_is_relayed_once_after_its_restart() {
    let node = NodeProc::start("held-a").await;
    let mut mq = Mq::shared("held").await;
    let mut bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({"auto_approve": false})).await;
    let held_key = mq.key("bridge:held-a:decisions");
    let request = |mq: &Mq, ws: String| {
        let mut c = mq.conn.clone();
        let k = mq.key(&format!("stream:{ws}"));
        async move {
            let entries: redis::streams::StreamRangeReply = c.xrange_all(k).await.unwrap();
            entries.ids.iter().find_map(|e| {
                let v: Value = serde_json::from_str(&e.get::<String>("event")?).ok()?;
                (v["type"] == "approval_request")
                    .then(|| v["correlation_id"].as_str().unwrap().to_string())
            })
        }
    };
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": "TOOL: echo held-once", "correlation_id": cid(1)}),
    )
    .await;
    eventually("the approval request", Duration::from_secs(30), || {
        let r = request(&mq, ws.clone());
        async move { r.await.is_some() }
    })
    .await;
    let rid = request(&mq, ws.clone()).await.unwrap();

    // The bridge dies right after taking the reply: it is in the held hash, not on its list.
    bridge.kill9();
    let reply = json!({"type": "approve", "request_id": rid, "approved": true}).to_string();
    let _: () = mq
        .conn
        .hset(&held_key, &rid, format!("{ws}\n{reply}"))
        .await
        .unwrap();
    bridge.spawn();
    let turn_done = |mq: &Mq| {
        let mut mq = mq.clone();
        let ws = ws.clone();
        async move {
            let events = mq.stream(&ws).await;
            let results = events
                .iter()
                .filter(|e| {
                    e["type"] == "tool_result"
                        && e["output"]
                            .as_str()
                            .is_some_and(|o| o.contains("held-once"))
                })
                .count();
            let done = events
                .iter()
                .any(|e| e["type"] == "turn_complete" && e["correlation_id"] == cid(1).as_str());
            (results, done)
        }
    };
    eventually(
        "the held reply decided the round",
        Duration::from_secs(30),
        || {
            let t = turn_done(&mq);
            async move { t.await == (1, true) }
        },
    )
    .await;
    let left: usize = mq.conn.hlen(&held_key).await.unwrap();
    assert_eq!(left, 0, "the relayed reply is cleared");

    // Held again, as if the bridge died after the node took it: 409, cleared, nothing else.
    bridge.kill9();
    let _: () = mq
        .conn
        .hset(&held_key, &rid, format!("{ws}\n{reply}"))
        .await
        .unwrap();
    bridge.spawn();
    eventually("the repeat is cleared", Duration::from_secs(30), || {
        let mut c = mq.conn.clone();
        let k = held_key.clone();
        async move { c.hlen::<_, usize>(k).await.unwrap() == 0 }
    })
    .await;
    assert_eq!(turn_done(&mq).await, (1, true), "applied once");
    assert!(mq.dead_letters().await.is_empty());
    mq.cleanup().await;
}
