//! Queued sends (`queued_sends`) and the writer's group commit (`Writer::committed`).

use std::sync::Arc;
use std::time::Duration;

use turnstone_store::{
    NewMessage, QueuedSend, QueuedState, WriteOp, Writer, WriterConfig, timestamp,
};

use crate::support::TestDb;

both_backends!(
    queued_sends_are_stored_once_and_marked_with_the_turn,
    queued_sends_that_no_longer_wait_are_pruned,
    a_started_send_is_completed_with_its_outcome_and_found_by_correlation_id,
    committed_waits_for_the_batch_and_shares_it,
);

fn queued(ws_id: &str, correlation_id: &str, message: &str) -> WriteOp {
    let now = timestamp::now();
    WriteOp::QueueSend(QueuedSend {
        ws_id: ws_id.into(),
        correlation_id: correlation_id.into(),
        message: message.into(),
        options: "{\"auto_approve\":true}".into(),
        state: QueuedState::Queued,
        created: now.clone(),
        updated: now,
        outcome: String::new(),
    })
}

fn mark(correlation_id: &str, state: QueuedState) -> WriteOp {
    WriteOp::QueueState {
        correlation_id: correlation_id.into(),
        state,
    }
}

async fn queued_sends_are_stored_once_and_marked_with_the_turn(db: TestDb) {
    let store = db.open().await;
    store
        .write_batch(&[
            queued("ws1", "c1", "first"),
            queued("ws1", "c2", "second"),
            queued("ws2", "c3", "third"),
        ])
        .await
        .unwrap();
    // A redelivered correlation id keeps the first row.
    store
        .write_batch(&[queued("ws1", "c1", "changed")])
        .await
        .unwrap();
    let rows = store.queued_sends("9999").await.unwrap();
    let ids: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r.ws_id.as_str(),
                r.correlation_id.as_str(),
                r.message.as_str(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("ws1", "c1", "first"),
            ("ws1", "c2", "second"),
            ("ws2", "c3", "third")
        ]
    );
    assert!(rows.iter().all(|r| r.state == QueuedState::Queued));
    assert_eq!(rows[0].options, "{\"auto_approve\":true}");

    // The turn's user message and the `started` mark land together.
    store
        .write_batch(&[
            WriteOp::Message(NewMessage::user("ws1", "first")),
            mark("c1", QueuedState::Started),
        ])
        .await
        .unwrap();
    // Only a waiting row changes state: a late removal of a started one is a no-op.
    store
        .write_batch(&[
            mark("c1", QueuedState::Removed),
            mark("c3", QueuedState::Removed),
        ])
        .await
        .unwrap();
    let waiting: Vec<String> = store
        .queued_sends("9999")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.correlation_id)
        .collect();
    assert_eq!(
        waiting,
        ["c1", "c2"],
        "only `queued` and `started` rows (a turn not ended) are older than `since`"
    );
    let all = store.queued_sends("").await.unwrap();
    let states: Vec<(&str, QueuedState)> = all
        .iter()
        .map(|r| (r.correlation_id.as_str(), r.state))
        .collect();
    assert_eq!(
        states,
        [
            ("c1", QueuedState::Started),
            ("c2", QueuedState::Queued),
            ("c3", QueuedState::Removed)
        ]
    );
    assert_eq!(store.load_messages("ws1").await.unwrap().len(), 1);
}

async fn queued_sends_that_no_longer_wait_are_pruned(db: TestDb) {
    let store = db.open().await;
    store
        .write_batch(&[
            queued("ws", "a", "a"),
            queued("ws", "b", "b"),
            queued("ws", "c", "c"),
            mark("a", QueuedState::Started),
            WriteOp::QueueOutcome {
                correlation_id: "a".into(),
                outcome: "{}".into(),
            },
            mark("c", QueuedState::Started),
        ])
        .await
        .unwrap();
    // Nothing is older than the epoch.
    assert_eq!(store.prune_queued_sends("1970").await.unwrap(), 0);
    // Everything is older than the far future, but a waiting row and a turn that has not
    // ended are never pruned.
    assert_eq!(store.prune_queued_sends("9999").await.unwrap(), 1);
    let left: Vec<String> = store
        .queued_sends("")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.correlation_id)
        .collect();
    assert_eq!(left, ["b", "c"]);
}

async fn committed_waits_for_the_batch_and_shares_it(db: TestDb) {
    let store = db.open().await;
    let writer = Arc::new(Writer::spawn(
        store.clone(),
        WriterConfig {
            capacity: 4096,
            max_batch: 1024,
            max_delay: Duration::from_millis(20),
        },
    ));
    // Nothing queued: resolves at once.
    writer.committed().await.unwrap();
    // 200 callers each write a row and wait for it to be durable.
    const N: usize = 200;
    let before = writer.counters().batches;
    let waits: Vec<_> = (0..N)
        .map(|i| {
            let writer = writer.clone();
            tokio::spawn(async move {
                writer
                    .write(WriteOp::Message(NewMessage::user("gc", format!("m{i}"))))
                    .await
                    .unwrap();
                writer.committed().await.unwrap();
            })
        })
        .collect();
    for w in waits {
        w.await.unwrap();
    }
    // Each caller's row was committed when its wait returned …
    assert_eq!(store.load_messages("gc").await.unwrap().len(), N);
    // … and they shared transactions (group commit), none forced per caller.
    let batches = writer.counters().batches - before;
    assert!(
        batches >= 1 && batches < (N / 10) as u64,
        "{batches} transactions"
    );
    // Ops written together are never split over two transactions.
    writer
        .try_write_all(vec![
            WriteOp::Message(NewMessage::user("gc2", "one")),
            WriteOp::Message(NewMessage::user("gc2", "two")),
        ])
        .unwrap();
    writer.committed().await.unwrap();
    assert_eq!(store.load_messages("gc2").await.unwrap().len(), 2);
    writer.shutdown().await;
}

async fn a_started_send_is_completed_with_its_outcome_and_found_by_correlation_id(db: TestDb) {
    let store = db.open().await;
    let outcome = r#"{"type":"turn_complete","correlation_id":"c1","content":"done"}"#;
    let complete = |cid: &str| WriteOp::QueueOutcome {
        correlation_id: cid.into(),
        outcome: outcome.into(),
    };
    store
        .write_batch(&[queued("ws1", "c1", "first"), queued("ws1", "c2", "second")])
        .await
        .unwrap();
    // Only a started send completes: a waiting one stays waiting.
    store
        .write_batch(&[
            mark("c1", QueuedState::Started),
            complete("c1"),
            complete("c2"),
        ])
        .await
        .unwrap();
    let c1 = store.queued_send("c1").await.unwrap().unwrap();
    assert_eq!(c1.state, QueuedState::Completed);
    assert_eq!(c1.outcome, outcome);
    let c2 = store.queued_send("c2").await.unwrap().unwrap();
    assert_eq!(c2.state, QueuedState::Queued);
    assert_eq!(c2.outcome, "");
    assert!(store.queued_send("unknown").await.unwrap().is_none());
    // A completed row is no longer waiting, and completes only once.
    store
        .write_batch(&[WriteOp::QueueOutcome {
            correlation_id: "c1".into(),
            outcome: "{}".into(),
        }])
        .await
        .unwrap();
    assert_eq!(
        store.queued_send("c1").await.unwrap().unwrap().outcome,
        outcome
    );
    let rows = store.queued_sends("9999").await.unwrap();
    assert_eq!(rows.len(), 1, "only c2 waits: {rows:?}");
    assert_eq!(rows[0].correlation_id, "c2");
    assert_eq!(QueuedState::parse("completed"), QueuedState::Completed);
}
