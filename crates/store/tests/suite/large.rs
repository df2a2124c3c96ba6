//! Search over a large history: a word written 10,000 messages ago is found, and hostile
//! queries give results or a clear `InvalidInput`, never a database error or a panic.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use turnstone_store::{NewMessage, Store, StoreError, WriteOp, Writer, WriterConfig};

use crate::support::TestDb;

both_backends!(
    word_written_10000_messages_ago_is_found,
    hostile_queries_over_large_history,
);

/// A word no filler message contains.
const NEEDLE: &str = "zanzibarquux";
const NEEDLE_WS: &str = "needle-session";
const NEEDLE_TEXT: &str =
    "please remember the zanzibarquux deployment key and keep it near, or else";
const FILLER: usize = 10_000;
/// A word planted in a few filler messages, old and recent, to check merged ordering.
const MARK: &str = "tidemark";
const MARKED: [usize; 3] = [100, 2_000, 9_990];

/// Filler vocabulary: plain words, plus operator-like words and punctuation so the stored
/// text is as messy as real chat.
const VOCAB: &[&str] = &[
    "deploy", "server", "config", "rust", "cargo", "build", "error", "warning", "test", "function",
    "module", "crate", "async", "tokio", "database", "query", "index", "search", "message",
    "session", "cluster", "node", "bridge", "router", "token", "stream", "model", "prompt",
    "review", "patch", "commit", "branch", "merge", "release", "latency", "memory", "AND", "OR",
    "NOT", "NEAR", "(x", "y)", "\"quoted", "star*", "-minus", "it's", "a+b",
];

/// Writes the needle message, then `FILLER` messages of 50–500 chars over 16 sessions, all
/// through the batching writer; returns the writer's counters after shutdown.
async fn fill(store: &Arc<dyn Store>) -> turnstone_store::WriterCounters {
    let writer = Writer::spawn(store.clone(), WriterConfig::default());
    writer
        .write(WriteOp::Message(NewMessage::user(NEEDLE_WS, NEEDLE_TEXT)))
        .await
        .unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    for i in 0..FILLER {
        let target = rng.random_range(50..=500);
        let mut text = String::with_capacity(target + 16);
        while text.len() < target {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(VOCAB[rng.random_range(0..VOCAB.len())]);
        }
        if MARKED.contains(&i) {
            text.push(' ');
            text.push_str(MARK);
        }
        let ws = format!("filler-{}", i % 16);
        let msg = if i % 2 == 0 {
            NewMessage::user(&ws, text)
        } else {
            NewMessage::assistant(&ws, Some(text))
        };
        writer.write(WriteOp::Message(msg)).await.unwrap();
    }
    writer.shutdown().await
}

async fn word_written_10000_messages_ago_is_found(db: TestDb) {
    let store = db.open().await;
    let counters = fill(&store).await;
    assert_eq!(counters.written, FILLER as u64 + 1, "{counters:?}");
    assert_eq!(counters.failed + counters.dropped, 0, "{counters:?}");
    // Batched: far fewer transactions than messages.
    assert!(
        counters.batches > 1 && counters.batches < FILLER as u64 / 10,
        "{counters:?}"
    );

    let needle_id = store.load_messages(NEEDLE_WS).await.unwrap()[0].id;
    let newest = store.recent_messages(1).await.unwrap();
    assert!(
        newest[0].message_id >= needle_id + FILLER as i64,
        "the needle must be 10,000 messages back"
    );

    // Found, and only it, even with a generous limit.
    let hits = store.search(NEEDLE, 100).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].message_id, needle_id);
    assert_eq!(hits[0].ws_id, NEEDLE_WS);
    assert_eq!(hits[0].role, "user");
    assert_eq!(hits[0].content.as_deref(), Some(NEEDLE_TEXT));
    assert!(
        hits[0].snippet.contains(&format!("[{NEEDLE}]")),
        "snippet: {}",
        hits[0].snippet
    );
    // With another word of the same message: still exactly it; with a filler word: nothing.
    assert_eq!(
        store.search("zanzibarquux deployment", 10).await.unwrap()[0].message_id,
        needle_id
    );
    assert!(
        store
            .search("zanzibarquux tokio", 10)
            .await
            .unwrap()
            .is_empty()
    );

    // A word in old and recent messages: all of them, newest first; the limit keeps the newest.
    let marks = store.search(MARK, 10).await.unwrap();
    assert_eq!(marks.len(), MARKED.len(), "{marks:?}");
    let expected: Vec<i64> = MARKED
        .iter()
        .rev()
        .map(|&i| needle_id + 1 + i as i64)
        .collect();
    assert_eq!(
        marks.iter().map(|h| h.message_id).collect::<Vec<_>>(),
        expected
    );
    let newest_two = store.search(MARK, 2).await.unwrap();
    assert_eq!(
        newest_two.iter().map(|h| h.message_id).collect::<Vec<_>>(),
        expected[..2]
    );

    // A common filler word: the limit holds and hits come newest first.
    let common = store.search("cargo", 25).await.unwrap();
    assert_eq!(common.len(), 25);
    assert!(
        common.windows(2).all(|w| w[0].message_id > w[1].message_id),
        "newest first"
    );
    assert!(common.iter().all(|h| h.ws_id.starts_with("filler-")));
    store.close().await;
}

/// What a hostile query must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// `Ok`, exactly the needle message.
    Needle,
    /// `Ok`, any number of hits (the words are searched as plain words).
    AnyHits,
    /// `Ok`, no hits.
    NoHits,
    /// `Err(StoreError::InvalidInput)`: the query has no word.
    Invalid,
}

async fn hostile_queries_over_large_history(db: TestDb) {
    let store = db.open().await;
    let counters = fill(&store).await;
    assert_eq!(counters.written, FILLER as u64 + 1);
    let total = store.recent_messages(FILLER * 2).await.unwrap().len();
    assert_eq!(total, FILLER + 1);

    let long_word = "x".repeat(10 * 1024);
    let long_junk = "\"a AND (b OR NEAR(c* -d ' ".repeat(10 * 1024 / 25);
    let long_punct = "\"*()-'^:{}".repeat(1024);
    let long_needle = format!("{}{NEEDLE}", "( \" * ".repeat(10 * 1024 / 6));
    let cases: Vec<(&str, Expect)> = vec![
        ("\"unbalanced", Expect::NoHits),
        ("\"zanzibarquux", Expect::Needle),
        ("zanzibarquux\"", Expect::Needle),
        ("a AND (b", Expect::AnyHits),
        ("zanzibarquux AND (deployment", Expect::Needle),
        ("NEAR(x y)", Expect::AnyHits),
        ("NEAR(zanzibarquux key)", Expect::Needle),
        ("zanzibarquux*", Expect::Needle),
        ("content:zanzibarquux", Expect::NoHits),
        ("-zanzibarquux", Expect::Needle),
        ("zanzibarquux OR", Expect::Needle),
        ("\0zanzibarquux\0", Expect::Needle),
        ("zanzibarquux 🦀", Expect::Needle),
        (
            "zanzibarquux'; DROP TABLE conversations; --",
            Expect::NoHits,
        ),
        (&long_word, Expect::NoHits),
        (&long_junk, Expect::NoHits),
        (&long_needle, Expect::Needle),
        ("*", Expect::Invalid),
        ("-", Expect::Invalid),
        ("'", Expect::Invalid),
        ("\0", Expect::Invalid),
        ("\"\"", Expect::Invalid),
        ("", Expect::Invalid),
        ("   ", Expect::Invalid),
        ("\t\n\r ", Expect::Invalid),
        ("( ) * \" ^ :", Expect::Invalid),
        (&long_punct, Expect::Invalid),
    ];
    for (query, expect) in cases {
        let shown: String = query.chars().take(40).collect();
        let result = store.search(query, 20).await;
        match (expect, result) {
            (Expect::Needle, Ok(hits)) => {
                assert_eq!(hits.len(), 1, "query {shown:?}: {hits:?}");
                assert_eq!(hits[0].ws_id, NEEDLE_WS, "query {shown:?}");
            }
            (Expect::AnyHits, Ok(hits)) => assert!(hits.len() <= 20, "query {shown:?}"),
            (Expect::NoHits, Ok(hits)) => assert!(hits.is_empty(), "query {shown:?}: {hits:?}"),
            (Expect::Invalid, Err(StoreError::InvalidInput(msg))) => {
                assert!(msg.contains("no words"), "query {shown:?}: {msg}");
            }
            (expect, other) => panic!("query {shown:?}: expected {expect:?}, got {other:?}"),
        }
    }
    // Nothing was dropped or damaged by the injection attempt.
    assert_eq!(
        store.recent_messages(FILLER * 2).await.unwrap().len(),
        FILLER + 1
    );
    assert_eq!(store.search(NEEDLE, 5).await.unwrap().len(), 1);
    store.close().await;
}
