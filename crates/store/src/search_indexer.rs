//! PostgreSQL's deferred full-text index: the background task that moves committed messages
//! from `conversation_search_pending` into `conversation_search` (id, tsvector, GIN).
//!
//! Why deferred: stemming and the GIN insertion cost several times a plain insert, and in the
//! write transaction they capped message writes at about 12k/s. A message insert now only
//! queues its id (a statement trigger, migration 0014); this task indexes the queue in
//! batches, woken by the store's own writes and polling for other nodes' writes.
//!
//! Consistency: a pending row becomes visible exactly when its message commits, whatever
//! order identity ids commit in, and one statement claims pending rows (`FOR UPDATE SKIP
//! LOCKED`), deletes them and inserts their vectors, so a row is in exactly one of the two
//! tables in any snapshot. Several stores on one database (several nodes, or two in one
//! process) each claim disjoint rows and never block each other; a failed pass rolls back
//! and leaves its rows pending. Search (`PostgresStore::fts_search`) reads both tables, so it
//! never misses a committed message; the pending part is matched with an on-the-fly
//! `to_tsvector`, which costs in proportion to the backlog.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::error::Result;

/// Tuning of the PostgreSQL search indexer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchIndexerConfig {
    /// Run the background task. Off, nothing indexes until [`crate::PostgresStore::index_search_batch`]
    /// is called (tests use that to search the unindexed tail on purpose); search stays
    /// correct either way.
    pub background: bool,
    /// Pending rows claimed per indexing transaction.
    pub batch_rows: i64,
    /// How often the task looks for rows it was not woken for (other nodes' writes) and
    /// retries after a failed pass.
    pub poll_interval: Duration,
    /// After a catch-up that claimed at least this many rows since the last vacuum, the
    /// task vacuums the queue table (see `vacuum_queue`).
    pub vacuum_after_rows: u64,
}

impl Default for SearchIndexerConfig {
    fn default() -> Self {
        Self {
            background: true,
            batch_rows: 5_000,
            poll_interval: Duration::from_secs(1),
            vacuum_after_rows: 50_000,
        }
    }
}

/// What the indexer of one store has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchIndexerCounters {
    /// Pending rows this store claimed and indexed (rows of messages deleted meanwhile
    /// included: they are claimed and dropped).
    pub indexed: u64,
    /// Indexing transactions committed.
    pub batches: u64,
    /// Indexing transactions that failed (their rows stay pending for the next pass).
    pub failures: u64,
    /// `VACUUM`s of the queue table this store ran after a large catch-up.
    pub vacuums: u64,
}

#[derive(Default)]
struct Stats {
    indexed: AtomicU64,
    batches: AtomicU64,
    failures: AtomicU64,
    vacuums: AtomicU64,
}

/// Claims up to `$1` pending ids (oldest first, skipping rows another indexer holds),
/// deletes them, and inserts the vectors of those whose message still exists, all in one
/// statement; returns how many were claimed.
const INDEX_BATCH_SQL: &str = "\
    WITH claimed AS ( \
        DELETE FROM conversation_search_pending \
        WHERE id IN (SELECT id FROM conversation_search_pending ORDER BY id LIMIT $1 \
                     FOR UPDATE SKIP LOCKED) \
        RETURNING id), \
    indexed AS ( \
        INSERT INTO conversation_search (id, tsv) \
        SELECT c.id, to_tsvector('english', c.content) \
        FROM claimed JOIN conversations c ON c.id = claimed.id \
        WHERE c.content IS NOT NULL \
        ON CONFLICT (id) DO NOTHING) \
    SELECT count(*) FROM claimed";

/// Handle of one store's indexer: the counters, the wake-up and (when running) the task.
pub(crate) struct SearchIndexer {
    pool: PgPool,
    config: SearchIndexerConfig,
    stats: Arc<Stats>,
    wake: Arc<Notify>,
    stop: watch::Sender<bool>,
    task: parking_lot::Mutex<Option<JoinHandle<()>>>,
}

impl SearchIndexer {
    /// Starts the background task (if configured) on the current tokio runtime.
    pub(crate) fn start(pool: PgPool, config: SearchIndexerConfig) -> Self {
        let config = SearchIndexerConfig {
            batch_rows: config.batch_rows.max(1),
            ..config
        };
        let (stop, stopped) = watch::channel(false);
        let indexer = Self {
            pool,
            config,
            stats: Arc::new(Stats::default()),
            wake: Arc::new(Notify::new()),
            stop,
            task: parking_lot::Mutex::new(None),
        };
        if config.background {
            let task = tokio::spawn(run(
                indexer.pool.clone(),
                config,
                Arc::clone(&indexer.stats),
                Arc::clone(&indexer.wake),
                stopped,
            ));
            *indexer.task.lock() = Some(task);
        }
        indexer
    }

    /// New messages were committed: index them soon.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// One indexing transaction; how many pending rows it claimed.
    pub(crate) async fn index_batch(&self) -> Result<u64> {
        index_batch(&self.pool, self.config.batch_rows, &self.stats).await
    }

    /// Messages committed and not yet indexed (by any store on this database).
    pub(crate) async fn backlog(&self) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM conversation_search_pending")
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    pub(crate) fn counters(&self) -> SearchIndexerCounters {
        SearchIndexerCounters {
            indexed: self.stats.indexed.load(Ordering::Relaxed),
            batches: self.stats.batches.load(Ordering::Relaxed),
            failures: self.stats.failures.load(Ordering::Relaxed),
            vacuums: self.stats.vacuums.load(Ordering::Relaxed),
        }
    }

    /// Stops the task and waits for it (a pass in progress finishes first). Rows still
    /// pending stay pending: the next store to open the database indexes them.
    pub(crate) async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let task = self.task.lock().take();
        if let Some(task) = task
            && let Err(e) = task.await
        {
            tracing::error!(error = %e, "search indexer task ended abnormally");
        }
    }
}

impl Drop for SearchIndexer {
    fn drop(&mut self) {
        // Dropped without `shutdown`: cancel the task rather than leave it polling.
        if let Some(task) = self.task.get_mut().take() {
            task.abort();
        }
    }
}

async fn index_batch(pool: &PgPool, batch_rows: i64, stats: &Stats) -> Result<u64> {
    let claimed: i64 = sqlx::query_scalar(INDEX_BATCH_SQL)
        .bind(batch_rows)
        .fetch_one(pool)
        .await?;
    let claimed = u64::try_from(claimed).unwrap_or(0);
    stats.indexed.fetch_add(claimed, Ordering::Relaxed);
    stats.batches.fetch_add(1, Ordering::Relaxed);
    Ok(claimed)
}

/// Vacuums the queue table: every claimed row leaves a dead tuple behind, and until a vacuum
/// removes them each search's probe of the (empty) queue walks them — after a 200,000-row
/// catch-up an absent word's search took 111 ms instead of 3.7 ms. Autovacuum does this
/// within a minute when it is on; servers run with it off too, so the indexer does not
/// count on it. A failure is logged and harmless (the next catch-up tries again); `true`
/// when it ran.
async fn vacuum_queue(pool: &PgPool, stats: &Stats) -> bool {
    match sqlx::query("VACUUM conversation_search_pending")
        .execute(pool)
        .await
    {
        Ok(_) => {
            stats.vacuums.fetch_add(1, Ordering::Relaxed);
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "VACUUM of the search queue failed");
            false
        }
    }
}

/// Waits for a wake-up, the poll interval or the stop signal; then indexes until a batch
/// comes back short (the backlog is drained), and vacuums the queue table once
/// `vacuum_after_rows` were claimed since the last vacuum. After a failed batch it waits a
/// full poll interval, even if woken, so a database outage is not retried in a tight loop.
#[tracing::instrument(name = "search_indexer", skip_all)]
async fn run(
    pool: PgPool,
    config: SearchIndexerConfig,
    stats: Arc<Stats>,
    wake: Arc<Notify>,
    mut stopped: watch::Receiver<bool>,
) {
    let full_batch = u64::try_from(config.batch_rows).unwrap_or(u64::MAX);
    let mut since_vacuum = 0u64;
    loop {
        let mut failed = false;
        while !*stopped.borrow() {
            match index_batch(&pool, config.batch_rows, &stats).await {
                Ok(claimed) if claimed >= full_batch => since_vacuum += claimed,
                Ok(claimed) => {
                    since_vacuum += claimed;
                    if since_vacuum >= config.vacuum_after_rows && vacuum_queue(&pool, &stats).await
                    {
                        since_vacuum = 0;
                    }
                    break;
                }
                Err(e) => {
                    stats.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        error = %e,
                        "search indexing batch failed; its rows stay pending until the next pass"
                    );
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            tokio::select! {
                _ = tokio::time::sleep(config.poll_interval) => {}
                changed = stopped.changed() => if changed.is_err() { return },
            }
        } else {
            tokio::select! {
                _ = wake.notified() => {}
                _ = tokio::time::sleep(config.poll_interval) => {}
                changed = stopped.changed() => if changed.is_err() { return },
            }
        }
        if *stopped.borrow() {
            return;
        }
    }
}
