//! Ownership across a node restart: a workstream an earlier run of its node left open stays
//! that node's (listed again at start, its lease kept by the bridge), however long it idles —
//! a message for it that another node's bridge picks up from the shared queue is forwarded
//! to its owner, not dead-lettered as unknown. And a workstream whose node has been gone
//! longer than the lease still has its pin record: a soft one moves, a hard one fails clearly.

use std::time::Duration;

use serde_json::json;

use super::harness::*;

/// Waits for both nodes' heartbeats: a create directed at a node not yet alive is refused.
async fn both_alive(mq: &Mq, a: &str, b: &str) {
    eventually("both heartbeats", Duration::from_secs(30), || {
        let mut c = mq.conn.clone();
        let (ka, kb) = (mq.key(&format!("node:{a}")), mq.key(&format!("node:{b}")));
        async move {
            redis::AsyncCommands::exists::<_, bool>(&mut c, ka)
                .await
                .unwrap()
                && redis::AsyncCommands::exists::<_, bool>(&mut c, kb)
                    .await
                    .unwrap()
        }
    })
    .await;
}

#[tokio::test]
async fn an_idle_workstream_keeps_its_owner_across_a_node_restart() {
    let mut a = NodeProc::start("own-a").await;
    let b = NodeProc::start("own-b").await;
    let mut mq = Mq::shared("own").await;
    let _bridge_a = BridgeProc::start(&a, &mq.url, &mq.prefix).await;
    let _bridge_b = BridgeProc::start(&b, &mq.url, &mq.prefix).await;
    both_alive(&mq, "own-a", "own-b").await;
    let ws = mq.create_ws("own-a", json!({})).await;
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": "before", "correlation_id": "0e0000000000"}),
    )
    .await;
    let completed = |mut mq: Mq, ws: String, n: usize| async move {
        mq.stream(&ws)
            .await
            .iter()
            .filter(|e| e["type"] == "turn_complete")
            .count()
            >= n
    };
    eventually("the first turn", Duration::from_secs(30), || {
        completed(mq.clone(), ws.clone(), 1)
    })
    .await;

    // The node dies and comes back; the workstream then idles for more than twice the
    // bridges' lease TTL (6 s), so only a refreshed lease can still name its owner.
    a.restart().await;
    tokio::time::sleep(Duration::from_secs(14)).await;
    assert_eq!(mq.owner(&ws).await.as_deref(), Some("own-a"));
    let listed = a.get("/v1/api/workstreams").await;
    assert!(
        listed["workstreams"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["id"] == ws.as_str()),
        "the restarted node lists its earlier run's workstream: {listed}"
    );

    // Sends through the shared queue: whichever bridge takes one, it runs on the owner.
    for i in 1..=8 {
        mq.push(
            "inbound",
            &json!({"type": "send", "ws_id": ws, "message": format!("after {i}"),
                    "correlation_id": format!("0e00000000{i:02}")}),
        )
        .await;
    }
    eventually("eight more turns", Duration::from_secs(60), || {
        completed(mq.clone(), ws.clone(), 9)
    })
    .await;
    assert!(mq.dead_letters().await.is_empty());
    mq.cleanup().await;
}

#[tokio::test]
async fn a_workstream_whose_node_is_gone_longer_than_the_lease_still_moves_or_fails_by_its_pin() {
    let mut a = NodeProc::start("home-a").await;
    let b = NodeProc::start("home-b").await;
    let mut mq = Mq::shared("home").await;
    let _bridge_a = BridgeProc::start(&a, &mq.url, &mq.prefix).await;
    let _bridge_b = BridgeProc::start(&b, &mq.url, &mq.prefix).await;
    both_alive(&mq, "home-a", "home-b").await;
    let soft = mq.create_ws("home-a", json!({})).await;
    let hard = mq.create_ws("home-a", json!({"pin": "hard"})).await;
    let pin = |mut mq: Mq, ws: String| async move {
        let key = mq.key(&format!("ws:{ws}:pin"));
        redis::AsyncCommands::get::<_, Option<String>>(&mut mq.conn, key)
            .await
            .unwrap()
    };
    assert_eq!(
        pin(mq.clone(), soft.clone()).await.as_deref(),
        Some("soft:home-a")
    );
    assert_eq!(
        pin(mq.clone(), hard.clone()).await.as_deref(),
        Some("hard:home-a")
    );

    // Node A dies and stays down until both leases (6 s) have run out.
    a.kill9();
    eventually("the leases ran out", Duration::from_secs(30), || {
        let (mut mq, soft, hard) = (mq.clone(), soft.clone(), hard.clone());
        async move { mq.owner(&soft).await.is_none() && mq.owner(&hard).await.is_none() }
    })
    .await;
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": soft, "message": "moved", "correlation_id": "40e000000001"}),
    )
    .await;
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": hard, "message": "stuck", "correlation_id": "40e000000002"}),
    )
    .await;
    eventually(
        "the soft workstream's send ran on B",
        Duration::from_secs(30),
        || {
            let mut mq = mq.clone();
            let soft = soft.clone();
            async move {
                mq.stream(&soft)
                    .await
                    .iter()
                    .any(|e| e["type"] == "turn_complete" && e["correlation_id"] == "40e000000001")
            }
        },
    )
    .await;
    assert!(b.turns_by_correlation().await.contains_key("40e000000001"));
    assert_eq!(mq.owner(&soft).await.as_deref(), Some("home-b"));
    assert_eq!(
        pin(mq.clone(), soft.clone()).await.as_deref(),
        Some("soft:home-b")
    );
    eventually(
        "the hard-pinned send dead-lettered",
        Duration::from_secs(30),
        || {
            let mut mq = mq.clone();
            async move {
                mq.dead_letters()
                    .await
                    .iter()
                    .any(|d| d.to_string().contains("40e000000002"))
            }
        },
    )
    .await;
    let dead = mq.dead_letters().await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert!(
        dead[0].to_string().contains("hard-pinned to node 'home-a'"),
        "{dead:?}"
    );
    mq.cleanup().await;
}
