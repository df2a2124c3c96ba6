//! The batching writer: turns never wait for the database.
//!
//! Callers queue [`WriteOp`]s on a bounded channel; one task drains it and writes a batch in
//! ONE transaction when `max_batch` ops are queued or `max_delay` has passed since the first
//! op of the batch. [`Writer::flush`] waits until everything queued before it is committed;
//! [`Writer::shutdown`] flushes and stops the task.
//!
//! Group commit: [`Writer::committed`] waits until everything queued before it is committed.
//! A waiter closes the batch being assembled with whatever has already arrived (no
//! `max_delay` wait); what arrives while that transaction runs forms the next batch. So
//! callers that need durability (a send answered only once its row is stored, a
//! `turn_complete` only once the turn is) wait about one transaction, and under load share
//! transactions instead of forcing one each.
//! [`Writer::try_write_all`] queues ops that must land in the same transaction.
//!
//! Crash window: ops still in the queue or in the batch being assembled (at most
//! `capacity + max_batch` ops, and at most about `max_delay` old in steady state) are lost if
//! the process dies. Nothing is lost silently otherwise: a full queue or a failed transaction
//! is counted in [`WriterCounters`] and logged at ERROR.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{Result, StoreError};
use crate::model::WriteOp;
use crate::store::Store;

/// Tuning of the [`Writer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterConfig {
    /// Queue capacity; beyond it [`Writer::try_write`] drops (and counts) the op.
    pub capacity: usize,
    /// Flush as soon as this many ops are batched.
    pub max_batch: usize,
    /// Flush at most this long after the first op of a batch arrived.
    pub max_delay: Duration,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            capacity: 16_384,
            max_batch: 1_024,
            max_delay: Duration::from_millis(5),
        }
    }
}

/// What the writer has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterCounters {
    /// Ops accepted into the queue.
    pub queued: u64,
    /// Ops committed.
    pub written: u64,
    /// Ops refused because the queue was full or the writer was shut down.
    pub dropped: u64,
    /// Ops lost because their transaction failed (after one retry).
    pub failed: u64,
    /// Transactions committed.
    pub batches: u64,
}

#[derive(Default)]
struct Stats {
    queued: AtomicU64,
    written: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    batches: AtomicU64,
}

impl Stats {
    fn snapshot(&self) -> WriterCounters {
        WriterCounters {
            queued: self.queued.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
        }
    }
}

enum Command {
    Op(WriteOp),
    /// Ops that are never split over two transactions.
    Ops(Vec<WriteOp>),
    /// Answered when the batch holding everything queued before it is committed (`false`:
    /// that transaction failed).
    Committed(oneshot::Sender<bool>),
    Flush(oneshot::Sender<()>),
    Shutdown(oneshot::Sender<()>),
}

/// Handle of the batching writer task. Cheap to share behind an `Arc`.
pub struct Writer {
    tx: mpsc::Sender<Command>,
    stats: Arc<Stats>,
    task: parking_lot::Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Spawns the writer task on the current tokio runtime.
    pub fn spawn(store: Arc<dyn Store>, config: WriterConfig) -> Self {
        let config = WriterConfig {
            capacity: config.capacity.max(1),
            max_batch: config.max_batch.max(1),
            ..config
        };
        let (tx, rx) = mpsc::channel(config.capacity);
        let stats = Arc::new(Stats::default());
        let task = tokio::spawn(run(store, config, rx, Arc::clone(&stats)));
        Self {
            tx,
            stats,
            task: parking_lot::Mutex::new(Some(task)),
        }
    }

    /// Queues an op without ever waiting. A full queue drops the op, counts it and returns
    /// [`StoreError::QueueFull`].
    pub fn try_write(&self, op: WriteOp) -> Result<()> {
        match self.tx.try_send(Command::Op(op)) {
            Ok(()) => {
                self.stats.queued.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::error!("store write queue full: write dropped");
                Err(StoreError::QueueFull)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => self.closed(),
        }
    }

    /// Queues an op, waiting for room when the queue is full (back-pressure instead of loss).
    pub async fn write(&self, op: WriteOp) -> Result<()> {
        match self.tx.send(Command::Op(op)).await {
            Ok(()) => {
                self.stats.queued.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(_) => self.closed(),
        }
    }

    /// Queues ops that must be committed in one transaction (a turn's user message and its
    /// queued entry's `started` mark), without waiting. A full queue drops them all.
    pub fn try_write_all(&self, ops: Vec<WriteOp>) -> Result<()> {
        let n = ops.len() as u64;
        match self.tx.try_send(Command::Ops(ops)) {
            Ok(()) => {
                self.stats.queued.fetch_add(n, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.stats.dropped.fetch_add(n, Ordering::Relaxed);
                tracing::error!(ops = n, "store write queue full: writes dropped");
                Err(StoreError::QueueFull)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => self.closed(),
        }
    }

    /// Waits until every op queued before this call is committed (group commit: it closes
    /// the batch being assembled with what has arrived, sharing its transaction). An error
    /// when that transaction failed or the writer is shut down.
    pub async fn committed(&self) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Command::Committed(done))
            .await
            .map_err(|_| StoreError::WriterClosed)?;
        match wait.await {
            Ok(true) => Ok(()),
            Ok(false) => Err(StoreError::InvalidInput(
                "the transaction holding this write failed (see the writer's error log)".into(),
            )),
            Err(_) => Err(StoreError::WriterClosed),
        }
    }

    /// Waits until every op queued before this call is committed (or counted as failed).
    pub async fn flush(&self) -> Result<WriterCounters> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Command::Flush(done))
            .await
            .map_err(|_| StoreError::WriterClosed)?;
        wait.await.map_err(|_| StoreError::WriterClosed)?;
        Ok(self.counters())
    }

    /// Flushes everything queued, stops the task and waits for it. Idempotent; later writes
    /// fail with [`StoreError::WriterClosed`] and are counted as dropped.
    pub async fn shutdown(&self) -> WriterCounters {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Command::Shutdown(done)).await.is_ok() {
            let _ = wait.await;
        }
        let task = self.task.lock().take();
        if let Some(task) = task
            && let Err(e) = task.await
        {
            tracing::error!(error = %e, "store writer task ended abnormally");
        }
        self.counters()
    }

    pub fn counters(&self) -> WriterCounters {
        self.stats.snapshot()
    }

    fn closed(&self) -> Result<()> {
        self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::error!("store writer is shut down: write dropped");
        Err(StoreError::WriterClosed)
    }
}

async fn run(
    store: Arc<dyn Store>,
    config: WriterConfig,
    mut rx: mpsc::Receiver<Command>,
    stats: Arc<Stats>,
) {
    let mut batch = Batch {
        ops: Vec::with_capacity(config.max_batch),
        waiters: Vec::new(),
    };
    loop {
        let Some(first) = rx.recv().await else {
            // Every handle is gone: nothing more can arrive.
            batch.commit(store.as_ref(), &stats).await;
            return;
        };
        let mut pending = Some(first);
        let deadline = Instant::now() + config.max_delay;
        // Someone waits for this batch: close it with what has already arrived instead of
        // waiting for the deadline (what arrives meanwhile forms the next batch).
        let mut awaited = false;
        loop {
            let cmd = match pending.take() {
                Some(cmd) => cmd,
                None if batch.ops.len() >= config.max_batch => break,
                None if awaited => match rx.try_recv() {
                    Ok(cmd) => cmd,
                    Err(_) => break,
                },
                None => match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(cmd)) => cmd,
                    Ok(None) | Err(_) => break,
                },
            };
            match cmd {
                Command::Op(op) => batch.ops.push(op),
                Command::Ops(ops) => batch.ops.extend(ops),
                Command::Committed(done) if batch.ops.is_empty() => {
                    // Everything before it is committed already.
                    let _ = done.send(true);
                }
                Command::Committed(done) => {
                    batch.waiters.push(done);
                    awaited = true;
                }
                Command::Flush(done) => {
                    batch.commit(store.as_ref(), &stats).await;
                    let _ = done.send(());
                }
                Command::Shutdown(done) => {
                    rx.close();
                    // Ops that raced in before the close are still written.
                    let mut waiters = vec![done];
                    while let Ok(cmd) = rx.try_recv() {
                        match cmd {
                            Command::Op(op) => batch.ops.push(op),
                            Command::Ops(ops) => batch.ops.extend(ops),
                            Command::Committed(d) => batch.waiters.push(d),
                            Command::Flush(d) | Command::Shutdown(d) => waiters.push(d),
                        }
                    }
                    batch.commit(store.as_ref(), &stats).await;
                    for waiter in waiters {
                        let _ = waiter.send(());
                    }
                    return;
                }
            }
        }
        batch.commit(store.as_ref(), &stats).await;
    }
}

/// The ops of the transaction being assembled, and who waits for its commit.
struct Batch {
    ops: Vec<WriteOp>,
    waiters: Vec<oneshot::Sender<bool>>,
}

impl Batch {
    async fn commit(&mut self, store: &dyn Store, stats: &Stats) {
        let ok = commit(store, &mut self.ops, stats).await;
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(ok);
        }
    }
}

/// Writes the batch in one transaction, retrying once; counts the outcome.
async fn commit(store: &dyn Store, batch: &mut Vec<WriteOp>, stats: &Stats) -> bool {
    if batch.is_empty() {
        return true;
    }
    let n = batch.len() as u64;
    let mut result = store.write_batch(batch).await;
    if let Err(e) = &result {
        tracing::warn!(error = %e, ops = n, "store batch failed, retrying once");
        tokio::time::sleep(Duration::from_millis(50)).await;
        result = store.write_batch(batch).await;
    }
    batch.clear();
    match result {
        Ok(()) => {
            stats.written.fetch_add(n, Ordering::Relaxed);
            stats.batches.fetch_add(1, Ordering::Relaxed);
            true
        }
        Err(e) => {
            stats.failed.fetch_add(n, Ordering::Relaxed);
            tracing::error!(error = %e, ops = n, "store batch failed: writes lost");
            false
        }
    }
}
