//! Full-text search and recent messages.

use turnstone_llm::ToolCall;
use turnstone_store::{NewMessage, StoreError, WriteOp, Writer, WriterConfig};

use crate::support::TestDb;

both_backends!(
    search_finds_words_not_non_words,
    hostile_queries_are_escaped,
    search_finds_word_10000_messages_back,
    recent_messages_newest_first,
);

async fn search_finds_words_not_non_words(db: TestDb) {
    let store = db.open().await;
    store
        .write_batch(&[
            WriteOp::Message(NewMessage::user("ws1", "the zebra crossed the road")),
            WriteOp::Message(NewMessage::assistant(
                "ws1",
                Some("a giraffe watched".into()),
            )),
            WriteOp::Message(NewMessage::tool_call(
                "ws2",
                &ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{}".into(),
                },
            )),
            WriteOp::Message(NewMessage::tool_result(
                "ws2",
                "c1",
                Some("bash"),
                "zebra stripes everywhere",
            )),
        ])
        .await
        .unwrap();

    let hits = store.search("zebra", 10).await.unwrap();
    assert_eq!(hits.len(), 2);
    // Newest first.
    assert_eq!(hits[0].ws_id, "ws2");
    assert_eq!(hits[0].role, "tool_result");
    assert_eq!(hits[0].tool_name.as_deref(), Some("bash"));
    assert!(
        hits[0].snippet.contains("[zebra]"),
        "snippet: {}",
        hits[0].snippet
    );
    assert_eq!(hits[1].ws_id, "ws1");
    assert_eq!(
        hits[1].content.as_deref(),
        Some("the zebra crossed the road")
    );
    assert!(!hits[1].timestamp.is_empty());

    // All words must match.
    let both = store.search("zebra road", 10).await.unwrap();
    assert_eq!(both.len(), 1);
    assert_eq!(both[0].ws_id, "ws1");
    assert!(store.search("giraffe", 10).await.unwrap().len() == 1);
    assert!(store.search("xylophonequux", 10).await.unwrap().is_empty());
    assert!(
        store
            .search("zebra xylophonequux", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.search("zebra", 1).await.unwrap().len(), 1);
    store.close().await;
}

async fn hostile_queries_are_escaped(db: TestDb) {
    let store = db.open().await;
    store
        .append_message(NewMessage::user(
            "ws",
            "quoted \"zebra\" AND (things) NEAR stars*",
        ))
        .await
        .unwrap();
    for q in [
        "\"zebra",
        "zebra\"",
        "zebra AND (",
        "NEAR(zebra",
        "zebra*",
        "content:zebra",
        "zebra OR",
        "-zebra",
        "zebra'; DROP TABLE conversations; --",
    ] {
        let result = store.search(q, 10).await;
        match result {
            Ok(_) => {}
            Err(StoreError::InvalidInput(_)) => {}
            Err(e) => panic!("query {q:?} gave {e}"),
        }
    }
    assert_eq!(store.search("\"zebra", 10).await.unwrap().len(), 1);
    assert_eq!(store.search("zebra*", 10).await.unwrap().len(), 1);
    for q in ["", "   ", "\"", "* ( ) \"\"", "'"] {
        assert!(
            matches!(store.search(q, 10).await, Err(StoreError::InvalidInput(_))),
            "query {q:?} must be a clear error"
        );
    }
    // The table survived the injection attempt.
    assert_eq!(store.recent_messages(10).await.unwrap().len(), 1);
    store.close().await;
}

async fn search_finds_word_10000_messages_back(db: TestDb) {
    let store = db.open().await;
    let writer = Writer::spawn(store.clone(), WriterConfig::default());
    writer
        .write(WriteOp::Message(NewMessage::user(
            "old",
            "remember the quokka",
        )))
        .await
        .unwrap();
    for i in 0..10_000 {
        writer
            .write(WriteOp::Message(NewMessage::assistant(
                "busy",
                Some(format!(
                    "filler message number {i} about nothing in particular"
                )),
            )))
            .await
            .unwrap();
    }
    let counters = writer.shutdown().await;
    assert_eq!(counters.written, 10_001);
    assert_eq!(counters.failed + counters.dropped, 0);

    let hits = store.search("quokka", 10).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].ws_id, "old");
    assert_eq!(store.search("filler", 5).await.unwrap().len(), 5);
    store.close().await;
}

async fn recent_messages_newest_first(db: TestDb) {
    let store = db.open().await;
    for (ws, text) in [("a", "one"), ("b", "two"), ("a", "three")] {
        store
            .append_message(NewMessage::user(ws, text))
            .await
            .unwrap();
    }
    let recent = store.recent_messages(2).await.unwrap();
    let texts: Vec<_> = recent.iter().map(|h| h.snippet.as_str()).collect();
    assert_eq!(texts, ["three", "two"]);
    assert_eq!(recent[0].ws_id, "a");
    assert_eq!(recent[0].role, "user");
    store.close().await;
}
