//! PostgreSQL's deferred search index (migration 0014, `search_indexer.rs`): search is
//! correct before, during and after indexing, whatever order rows commit in, and several
//! stores on one database index each row once. PostgreSQL only: SQLite indexes in the write
//! transaction.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnection, PgPool};
use turnstone_llm::ToolCall;
use turnstone_store::{
    NewMessage, PostgresStore, SearchIndexerConfig, Store, WriteOp, Writer, WriterConfig,
};

use crate::support::{Backend, TestDb};

/// No background task: the tests decide when rows get indexed.
const MANUAL: SearchIndexerConfig = SearchIndexerConfig {
    background: false,
    batch_rows: 5_000,
    poll_interval: Duration::from_secs(3600),
    vacuum_after_rows: u64::MAX,
};

async fn open(db: &TestDb, config: SearchIndexerConfig) -> PostgresStore {
    PostgresStore::open_with(db.pg_url(), 4, config)
        .await
        .unwrap_or_else(|e| panic!("open postgres store: {e}"))
}

async fn hit_ids(store: &PostgresStore, query: &str, limit: usize) -> Vec<i64> {
    store
        .search(query, limit)
        .await
        .unwrap()
        .iter()
        .map(|h| h.message_id)
        .collect()
}

async fn indexed_ids(db: &TestDb) -> Vec<i64> {
    let mut conn = PgConnection::connect(db.pg_url()).await.unwrap();
    let ids = sqlx::query_scalar("SELECT id FROM conversation_search ORDER BY id")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    ids
}

/// Indexes until nothing is pending.
async fn index_all(store: &PostgresStore) {
    while store.index_search_batch().await.unwrap() > 0 {}
    assert_eq!(store.search_backlog().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_is_found_before_and_after_indexing() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = open(&db, MANUAL).await;
    store
        .write_batch(&[
            WriteOp::Message(NewMessage::user("ws", "an ocelot crossed the yard")),
            // No content: never searchable, so never queued.
            WriteOp::Message(NewMessage::tool_call(
                "ws",
                &ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{}".into(),
                },
            )),
        ])
        .await
        .unwrap();
    assert_eq!(store.search_backlog().await.unwrap(), 1);

    // Not indexed yet: found through the pending tail, with the same hit fields.
    let hits = store.search("ocelots", 10).await.unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].ws_id, "ws");
    assert!(hits[0].snippet.contains("[ocelot]"), "{}", hits[0].snippet);
    assert!(indexed_ids(&db).await.is_empty());
    let id = hits[0].message_id;

    assert_eq!(store.index_search_batch().await.unwrap(), 1);
    assert_eq!(store.search_backlog().await.unwrap(), 0);
    assert_eq!(indexed_ids(&db).await, [id]);
    // Indexed now (nothing is pending): found through the index.
    assert_eq!(hit_ids(&store, "ocelot yard", 10).await, [id]);
    assert!(hit_ids(&store, "ocelot giraffe", 10).await.is_empty());
    assert_eq!(store.search_indexer_counters().indexed, 1);

    // Deleting the session deletes its index rows.
    assert!(store.delete_workstream("ws").await.unwrap());
    assert!(indexed_ids(&db).await.is_empty());
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_and_limit_span_indexed_and_pending_rows() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = open(&db, MANUAL).await;
    let say = |text: &str| WriteOp::Message(NewMessage::user("ws", text));
    store.write_batch(&[say("marmot one")]).await.unwrap();
    index_all(&store).await;
    // Pending from here on, the second one more than the search's recent window (5,000
    // rows) before the newest, so each search step meets indexed and pending rows.
    store.write_batch(&[say("marmot two")]).await.unwrap();
    let filler: Vec<WriteOp> = (0..6_000).map(|i| say(&format!("filler {i}"))).collect();
    store.write_batch(&filler).await.unwrap();
    store.write_batch(&[say("marmot three")]).await.unwrap();

    let before = hit_ids(&store, "marmot", 10).await;
    assert_eq!(before.len(), 3, "{before:?}");
    assert!(
        before.windows(2).all(|w| w[0] > w[1]),
        "newest first: {before:?}"
    );
    assert_eq!(hit_ids(&store, "marmot", 2).await, before[..2]);
    assert_eq!(hit_ids(&store, "filler", 3).await.len(), 3);

    index_all(&store).await;
    assert_eq!(hit_ids(&store, "marmot", 10).await, before);
    assert_eq!(hit_ids(&store, "marmot", 2).await, before[..2]);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_committed_out_of_id_order_are_all_indexed() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = open(&db, MANUAL).await;
    let insert = "INSERT INTO conversations (ws_id, timestamp, role, content) \
                  VALUES ('ws', '2026-01-01T00:00:00.000000Z', 'user', $1) RETURNING id";
    // The first transaction takes the lower id and commits last.
    let mut slow = PgConnection::connect(db.pg_url()).await.unwrap();
    let mut slow_tx = slow.begin().await.unwrap();
    let early: i64 = sqlx::query_scalar(insert)
        .bind("the early capybara")
        .fetch_one(&mut *slow_tx)
        .await
        .unwrap();
    let mut other = PgConnection::connect(db.pg_url()).await.unwrap();
    let late: i64 = sqlx::query_scalar(insert)
        .bind("the late capybara")
        .fetch_one(&mut other)
        .await
        .unwrap();
    other.close().await.unwrap();
    assert!(early < late);

    // Only the committed row is there to index; the higher id goes first.
    assert_eq!(store.index_search_batch().await.unwrap(), 1);
    assert_eq!(indexed_ids(&db).await, [late]);
    assert_eq!(hit_ids(&store, "capybara", 10).await, [late]);

    slow_tx.commit().await.unwrap();
    slow.close().await.unwrap();
    // Committed below the indexed id: found at once, and indexed by the next pass.
    assert_eq!(hit_ids(&store, "capybara", 10).await, [late, early]);
    assert_eq!(store.index_search_batch().await.unwrap(), 1);
    assert_eq!(indexed_ids(&db).await, [early, late]);
    assert_eq!(store.search_backlog().await.unwrap(), 0);
    assert_eq!(hit_ids(&store, "capybara", 10).await, [late, early]);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_database_index_each_row_once() {
    let db = TestDb::new(Backend::Postgres).await;
    let small = SearchIndexerConfig {
        batch_rows: 50,
        ..MANUAL
    };
    let first = open(&db, small).await;
    let second = open(&db, small).await;
    const N: usize = 2_000;
    let ops: Vec<WriteOp> = (0..N)
        .map(|i| WriteOp::Message(NewMessage::user("ws", format!("wombat number {i}"))))
        .collect();
    let (half_a, half_b) = ops.split_at(N / 2);
    first.write_batch(half_a).await.unwrap();
    second.write_batch(half_b).await.unwrap();

    // Both index at the same time until nothing is left.
    loop {
        let (a, b) = tokio::join!(first.index_search_batch(), second.index_search_batch());
        if a.unwrap() + b.unwrap() == 0 {
            break;
        }
    }
    let (a, b) = (
        first.search_indexer_counters(),
        second.search_indexer_counters(),
    );
    assert!(a.indexed > 0 && b.indexed > 0, "{a:?} {b:?}");
    assert_eq!(a.indexed + b.indexed, N as u64, "{a:?} {b:?}");
    assert_eq!(indexed_ids(&db).await.len(), N);
    assert_eq!(first.search_backlog().await.unwrap(), 0);
    assert_eq!(second.search("wombat", 5).await.unwrap().len(), 5);
    first.close().await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_indexer_catches_up_with_the_writer() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = Arc::new(
        open(
            &db,
            SearchIndexerConfig {
                batch_rows: 100,
                vacuum_after_rows: 500,
                ..SearchIndexerConfig::default()
            },
        )
        .await,
    );
    let writer = Writer::spawn(store.clone() as Arc<dyn Store>, WriterConfig::default());
    const N: u64 = 1_000;
    for i in 0..N {
        writer
            .write(WriteOp::Message(NewMessage::user(
                "ws",
                format!("pangolin {i}"),
            )))
            .await
            .unwrap();
    }
    assert_eq!(writer.shutdown().await.written, N);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while store.search_backlog().await.unwrap() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "backlog not indexed after 30 s: {:?}",
            store.search_indexer_counters()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The indexer counts a batch after its transaction commits, so the count may trail the
    // empty backlog by one batch.
    turnstone_testkit::assert_eventually!(
        store.search_indexer_counters().indexed >= N,
        "{:?}",
        store.search_indexer_counters()
    );
    let counters = store.search_indexer_counters();
    assert_eq!(counters.indexed, N, "{counters:?}");
    assert_eq!(counters.failures, 0);
    assert_eq!(indexed_ids(&db).await.len(), N as usize);
    // A catch-up of ≥ `vacuum_after_rows` vacuums the queue: its dead rows are gone, whether
    // or not the server runs autovacuum.
    turnstone_testkit::assert_eventually!(
        store.search_indexer_counters().vacuums >= 1,
        "no VACUUM after indexing {N} rows"
    );
    let pool = PgPool::connect(db.pg_url()).await.unwrap();
    let vacuumed: bool = sqlx::query_scalar(
        "SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables \
         WHERE relname = 'conversation_search_pending'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(vacuumed, "pg_stat_user_tables shows no vacuum of the queue");
    pool.close().await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_backfills_existing_messages() {
    let db = TestDb::new(Backend::Postgres).await;
    // The schema before migration 0014, with messages in it.
    let pool = PgPool::connect(db.pg_url()).await.unwrap();
    let migrations = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres");
    sqlx::migrate::Migrator::new(std::path::Path::new(migrations))
        .await
        .unwrap()
        .run_to(13, &pool)
        .await
        .unwrap();
    let ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO conversations (ws_id, timestamp, role, content) VALUES \
         ('ws', '2026-01-01T00:00:00.000000Z', 'user', 'an old aardvark'), \
         ('ws', '2026-01-01T00:00:01.000000Z', 'tool_call', NULL), \
         ('ws', '2026-01-01T00:00:02.000000Z', 'user', 'another old aardvark') RETURNING id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;

    let store = open(&db, MANUAL).await;
    assert_eq!(store.search_backlog().await.unwrap(), 0);
    assert_eq!(indexed_ids(&db).await, [ids[0], ids[2]]);
    assert_eq!(hit_ids(&store, "aardvark", 10).await, [ids[2], ids[0]]);
    store.close().await;
}
