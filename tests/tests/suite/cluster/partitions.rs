//! Network partitions (issue 17): node A's bridge runs in a network namespace of its own,
//! reaching Redis and its node over two veth paths ([`Netns`]); node B and its bridge are on
//! loopback. Cutting one path while sends flow must lose nothing and run nothing twice: A's
//! soft-pinned workstream re-homes to B, its hard-pinned one dead-letters with a reason, and
//! once the path heals, A's bridge takes back no workstream that moved (two owners of one
//! conversation) and A lets its stale copy go, while the hard-pinned one works again on A.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::json;

use super::harness::*;
use super::netns::Netns;

/// Path 0 of the namespace leads to Redis, path 1 to node A.
const REDIS_PATH: usize = 0;
const NODE_PATH: usize = 1;

fn send(ws: &str, cid: &str) -> serde_json::Value {
    json!({"type": "send", "ws_id": ws, "message": format!("m {cid}"), "correlation_id": cid})
}

/// Completed turns per correlation id, over both nodes.
async fn turns(nodes: &[&NodeProc]) -> HashMap<String, usize> {
    let mut all = HashMap::new();
    for n in nodes {
        for (cid, k) in n.turns_by_correlation().await {
            *all.entry(cid).or_insert(0) += k;
        }
    }
    all
}

async fn wait_turns(nodes: &[&NodeProc], cids: &[String], what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let t = turns(nodes).await;
        let twice: Vec<_> = t.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "{what}: ran twice: {twice:?}");
        let missing: Vec<_> = cids.iter().filter(|c| !t.contains_key(*c)).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: no turn for {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Whether `node` lists `ws_id` (live or hibernated).
async fn lists(node: &NodeProc, ws_id: &str) -> bool {
    node.get("/v1/api/workstreams").await["workstreams"]
        .as_array()
        .is_some_and(|l| l.iter().any(|w| w["id"] == ws_id))
}

async fn alive(mq: &Mq, node: &str) -> bool {
    let mut c = mq.conn.clone();
    c.exists::<_, bool>(mq.key(&format!("node:{node}")))
        .await
        .unwrap()
}

async fn partition(path: usize, tag: &str) {
    let ns = Netns::create(2);
    let redis = PrivateRedis::start_binding(&[ns.host_addr(REDIS_PATH)]).await;
    let prefix = unique_prefix(tag);
    let mut mq = Mq::at(&redis.url(), &prefix).await;
    let (a_id, b_id) = (format!("{tag}-a"), format!("{tag}-b"));
    let a = NodeProc::start_on(ns.host_addr(NODE_PATH), &a_id, Vec::new(), Vec::new()).await;
    let b = NodeProc::start(&b_id).await;
    let redis_from_ns = format!("redis://{}:{}/0", ns.host_addr(REDIS_PATH), redis.port());
    let _bridge_a = BridgeProc::start_in(&ns.name, &a, &redis_from_ns, &prefix);
    let _bridge_b = BridgeProc::start(&b, &redis.url(), &prefix).await;
    eventually("both heartbeats", Duration::from_secs(30), || {
        let mq = mq.clone();
        let (a_id, b_id) = (a_id.clone(), b_id.clone());
        async move { alive(&mq, &a_id).await && alive(&mq, &b_id).await }
    })
    .await;
    let soft = mq.create_ws(&a_id, json!({"name": "soft"})).await;
    let hard = mq
        .create_ws(&a_id, json!({"name": "hard", "pin": "hard"}))
        .await;
    let cid = |phase: u8, i: u8| format!("{phase:02x}{i:02x}00000000");
    let nodes = [&a, &b];

    // Before: everything runs on A.
    let mut soft_cids = Vec::new();
    for i in 0..4 {
        soft_cids.push(cid(1, i));
        mq.push("inbound", &send(&soft, &cid(1, i))).await;
    }
    mq.push("inbound", &send(&hard, &cid(1, 9))).await;
    let mut expected: Vec<String> = soft_cids.clone();
    expected.push(cid(1, 9));
    wait_turns(&nodes, &expected, "before the cut").await;
    assert!(
        a.turns_by_correlation().await.contains_key(&cid(1, 9)),
        "the hard-pinned workstream runs on A"
    );

    // The cut: A's bridge loses Redis (its heartbeat runs out) or its node (it withdraws
    // the heartbeat); either way A is dead to the cluster while the path is down.
    ns.cut(path);
    eventually("A declared dead", Duration::from_secs(60), || {
        let mq = mq.clone();
        let a_id = a_id.clone();
        async move { !alive(&mq, &a_id).await }
    })
    .await;
    for i in 0..4 {
        soft_cids.push(cid(2, i));
        mq.push("inbound", &send(&soft, &cid(2, i))).await;
    }
    mq.push("inbound", &send(&hard, &cid(2, 9))).await;
    wait_turns(&nodes, &soft_cids, "during the cut").await;
    assert_eq!(mq.owner(&soft).await.as_deref(), Some(b_id.as_str()));
    eventually(
        "the hard-pinned send dead-lettered",
        Duration::from_secs(60),
        || {
            let mut mq = mq.clone();
            let hard_cid = cid(2, 9);
            async move {
                mq.dead_letters().await.iter().any(|d| {
                    let text = d.to_string();
                    text.contains(&hard_cid) && text.contains("hard-pinned")
                })
            }
        },
    )
    .await;

    // Healed: A comes back; the soft workstream stays with B, the hard one is A's again.
    ns.heal(path);
    eventually("A alive again", Duration::from_secs(90), || {
        let mq = mq.clone();
        let a_id = a_id.clone();
        async move { alive(&mq, &a_id).await }
    })
    .await;
    // Three lease refreshes of each bridge (every 2 s): the lease never names A again.
    for _ in 0..30 {
        assert_eq!(
            mq.owner(&soft).await.as_deref(),
            Some(b_id.as_str()),
            "A's bridge took back a workstream that moved to B"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for i in 0..4 {
        soft_cids.push(cid(3, i));
        mq.push("inbound", &send(&soft, &cid(3, i))).await;
    }
    mq.push("inbound", &send(&hard, &cid(3, 9))).await;
    let mut expected = soft_cids.clone();
    expected.extend([cid(1, 9), cid(3, 9)]);
    wait_turns(&nodes, &expected, "after the heal").await;
    let on_a = a.turns_by_correlation().await;
    for c in soft_cids.iter().filter(|c| !c.starts_with("01")) {
        assert!(
            !on_a.contains_key(c),
            "{c} ran on A after its workstream moved"
        );
    }
    assert!(on_a.contains_key(&cid(3, 9)));
    // A let its stale copy go: the soft workstream is listed once, on B.
    eventually(
        "A no longer lists the moved workstream",
        Duration::from_secs(30),
        || async { !lists(&a, &soft).await },
    )
    .await;
    assert!(lists(&b, &soft).await, "B lists the workstream it owns");
    assert!(lists(&a, &hard).await, "A still lists its hard-pinned one");
    // Exactly one dead letter: the hard-pinned send of the cut; nothing else is lost.
    let dead = mq.dead_letters().await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert!(!turns(&nodes).await.contains_key(&cid(2, 9)));
}

#[tokio::test]
async fn a_bridge_cut_off_from_redis_loses_nothing_and_takes_back_nothing_that_moved() {
    partition(REDIS_PATH, "pr").await;
}

#[tokio::test]
async fn a_bridge_cut_off_from_its_node_loses_nothing_and_takes_back_nothing_that_moved() {
    partition(NODE_PATH, "pn").await;
}
