//! The batching writer.

use std::time::Duration;

use turnstone_store::{NewMessage, StoreError, WriteOp, Writer, WriterConfig};

use crate::support::TestDb;

both_backends!(
    writer_batches_and_flushes_on_shutdown,
    writer_flush_makes_writes_visible
);

async fn writer_batches_and_flushes_on_shutdown(db: TestDb) {
    let store = db.open().await;
    let writer = Writer::spawn(
        store.clone(),
        WriterConfig {
            capacity: 4096,
            max_batch: 64,
            // Long enough that only size, flush or shutdown can trigger a commit.
            max_delay: Duration::from_secs(3600),
        },
    );
    const N: usize = 1000;
    for i in 0..N {
        writer
            .try_write(WriteOp::Message(NewMessage::user("ws", format!("m{i}"))))
            .unwrap();
    }
    let counters = writer.shutdown().await;
    assert_eq!(counters.queued, N as u64);
    assert_eq!(counters.written, N as u64);
    assert_eq!(counters.dropped, 0);
    assert_eq!(counters.failed, 0);
    // Batched: far fewer transactions than writes.
    assert!(counters.batches >= (N / 64) as u64, "{counters:?}");
    assert!(counters.batches < N as u64 / 10, "{counters:?}");

    let rows = store.load_messages("ws").await.unwrap();
    assert_eq!(rows.len(), N);
    assert!(
        rows.iter()
            .enumerate()
            .all(|(i, r)| r.content.as_deref() == Some(format!("m{i}").as_str()))
    );

    // After shutdown writes are refused and counted, never silently lost.
    assert!(matches!(
        writer.try_write(WriteOp::Message(NewMessage::user("ws", "late"))),
        Err(StoreError::WriterClosed)
    ));
    assert_eq!(writer.counters().dropped, 1);
    assert_eq!(writer.shutdown().await.written, N as u64);
    store.close().await;
}

async fn writer_flush_makes_writes_visible(db: TestDb) {
    let store = db.open().await;
    let writer = Writer::spawn(
        store.clone(),
        WriterConfig {
            max_delay: Duration::from_secs(3600),
            ..WriterConfig::default()
        },
    );
    for i in 0..10 {
        writer
            .write(WriteOp::Message(NewMessage::user("ws", format!("m{i}"))))
            .await
            .unwrap();
    }
    writer
        .write(WriteOp::Config {
            ws_id: "ws".into(),
            key: "model".into(),
            value: Some("m1".into()),
        })
        .await
        .unwrap();
    let counters = writer.flush().await.unwrap();
    assert_eq!(counters.written, 11);
    assert_eq!(counters.batches, 1);
    assert_eq!(store.load_messages("ws").await.unwrap().len(), 10);
    assert_eq!(store.load_config("ws").await.unwrap()["model"], "m1");
    // A message creates its workstream row.
    assert!(store.get_workstream("ws").await.unwrap().is_some());
    writer.shutdown().await;
    store.close().await;
}
