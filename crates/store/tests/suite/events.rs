//! The durable event log and approvals.

use std::sync::Arc;

use serde_json::json;
use turnstone_store::{ApprovalDecision, ApprovalState, Store, StoreError};

use crate::support::TestDb;

both_backends!(event_log_append_and_read_after, approval_decided_once);

async fn event_log_append_and_read_after(db: TestDb) {
    let store = db.open().await;
    for i in 1..=3 {
        let seq = store
            .append_event("ws1", "content", &json!({"text": format!("chunk {i}")}))
            .await
            .unwrap();
        assert_eq!(seq, i);
    }
    assert_eq!(
        store
            .append_event("ws2", "info", &json!(null))
            .await
            .unwrap(),
        1
    );

    let after = store.events_after("ws1", 1, 100).await.unwrap();
    let seqs: Vec<_> = after.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [2, 3]);
    assert_eq!(after[0].event_type, "content");
    assert_eq!(after[0].payload, json!({"text": "chunk 2"}));
    assert!(store.events_after("ws1", 3, 100).await.unwrap().is_empty());
    assert_eq!(store.events_after("ws1", 0, 2).await.unwrap().len(), 2);

    // Concurrent appenders still get distinct, gap-free seqs.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let store: Arc<dyn Store> = Arc::clone(&store);
        tasks.spawn(async move { store.append_event("ws3", "n", &json!(i)).await });
    }
    let mut seqs = Vec::new();
    while let Some(done) = tasks.join_next().await {
        seqs.push(done.unwrap().unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=16).collect::<Vec<i64>>());
    store.close().await;
}

fn decision(state: ApprovalState, by: &str) -> ApprovalDecision {
    ApprovalDecision {
        state,
        verdict: "once".into(),
        feedback: format!("from {by}"),
        decided_by: by.into(),
    }
}

async fn approval_decided_once(db: TestDb) {
    let store = db.open().await;
    let payload = json!({"items": [{"call_id": "call_abc", "header": "bash: echo hi"}], "judge_pending": false});
    let created = store
        .create_approval("req-1", "ws1", &payload)
        .await
        .unwrap();
    assert_eq!(created.state, ApprovalState::Pending);
    assert_eq!(created.payload, payload);
    assert!(created.decided.is_none());
    assert!(matches!(
        store.create_approval("req-1", "ws1", &payload).await,
        Err(StoreError::InvalidInput(_))
    ));
    let pending = store.pending_approvals("ws1").await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].request_id, "req-1");

    let first = store
        .decide_approval("req-1", decision(ApprovalState::Approved, "alice"))
        .await
        .unwrap();
    assert!(first.applied);
    assert_eq!(first.record.state, ApprovalState::Approved);
    assert_eq!(first.record.decided_by, "alice");
    assert!(first.record.decided.is_some());

    // A second decision returns the recorded one.
    let second = store
        .decide_approval("req-1", decision(ApprovalState::Denied, "bob"))
        .await
        .unwrap();
    assert!(!second.applied);
    assert_eq!(second.record.state, ApprovalState::Approved);
    assert_eq!(second.record.feedback, "from alice");
    assert!(store.pending_approvals("ws1").await.unwrap().is_empty());

    assert!(matches!(
        store
            .decide_approval("nope", decision(ApprovalState::Denied, "x"))
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store
            .decide_approval("req-1", decision(ApprovalState::Pending, "x"))
            .await,
        Err(StoreError::InvalidInput(_))
    ));

    // Racing deciders: exactly one wins, all see its verdict.
    store
        .create_approval("req-2", "ws1", &json!({}))
        .await
        .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let store: Arc<dyn Store> = Arc::clone(&store);
        let state = if i % 2 == 0 {
            ApprovalState::Approved
        } else {
            ApprovalState::TimedOut
        };
        tasks.spawn(async move {
            store
                .decide_approval("req-2", decision(state, &format!("d{i}")))
                .await
        });
    }
    let mut outcomes = Vec::new();
    while let Some(done) = tasks.join_next().await {
        outcomes.push(done.unwrap().unwrap());
    }
    assert_eq!(outcomes.iter().filter(|o| o.applied).count(), 1);
    let winner = outcomes.iter().find(|o| o.applied).unwrap().record.clone();
    assert!(outcomes.iter().all(|o| o.record == winner));
    store.close().await;
}
