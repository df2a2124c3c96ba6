//! Ownership across a node restart: a workstream an earlier run of its node left open stays
//! that node's (listed again at start, its lease kept by the bridge), however long it idles —
//! a message for it that another node's bridge picks up from the shared queue is forwarded
//! to its owner, not dead-lettered as unknown.

use std::time::Duration;

use serde_json::json;

use super::harness::*;

#[tokio::test]
async fn an_idle_workstream_keeps_its_owner_across_a_node_restart() {
    let mut a = NodeProc::start("own-a").await;
    let b = NodeProc::start("own-b").await;
    let mut mq = Mq::shared("own").await;
    let _bridge_a = BridgeProc::start(&a, &mq.url, &mq.prefix).await;
    let _bridge_b = BridgeProc::start(&b, &mq.url, &mq.prefix).await;
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
