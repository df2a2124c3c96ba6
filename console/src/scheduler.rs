//! The scheduler (cluster spec §6.8): every tick, the one console holding
//! `{prefix}:scheduler:lock` fires the due tasks of the store.
//!
//! A tick: take the lock (`SET NX PX`, a random owner token; another console holding it
//! means this one skips the tick), fire every due task, release the lock with a Lua
//! compare-and-delete (a lock that expired and was taken by another console is not touched).
//! Firing a task queues `create_workstream` (with a fresh correlation id) as the console's
//! own creation does — `auto` on the best node, `pool` on the shared queue, `all` on every
//! placeable node (at most [`MAX_FAN_OUT`]), else on the named node — and records a run row
//! per message: `dispatched`, or `failed` with the reason. After a dispatch `last_run` is set
//! and `next_run` moves to the next occurrence after now; an `at` task is disabled. A failure
//! changes neither, so the task is tried again at the next tick.
//!
//! **Missed runs** (no console was up, or every firing failed): a task whose `next_run` has
//! passed fires once, and its next run is the first occurrence after that firing — missed
//! occurrences are not fired one by one ("catch up once", docs/console.md).
//!
//! Every [`PRUNE_EVERY`] ticks (the first tick included) each task's run history is cut to
//! its newest [`KEEP_RUNS`], and model usage rows older than the console's
//! `usage_retention_days` are deleted (none with 0).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;
use turnstone_proto::mq::CreateWorkstreamMessage;
use turnstone_store::{NewTaskRun, ScheduledTask, Store};

use crate::state::Console;

/// Most nodes one `all` task fans out to.
pub const MAX_FAN_OUT: usize = 20;
/// Ticks between two prunes of the run history.
pub const PRUNE_EVERY: u64 = 240;
/// Runs kept per task.
pub const KEEP_RUNS: usize = 100;
/// How long the lock lives if its holder dies mid-tick.
const LOCK_TTL: Duration = Duration::from_secs(60);

/// Compare-and-delete: the lock is deleted only by its owner.
const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
                       return redis.call('del', KEYS[1]) else return 0 end";

/// What one tick did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickReport {
    /// Whether this console held the lock.
    pub led: bool,
    pub dispatched: usize,
    pub failed: usize,
}

/// The scheduler of one console.
pub struct Scheduler {
    console: Arc<Console>,
    store: Arc<dyn Store>,
    lock_key: String,
    ticks: std::sync::atomic::AtomicU64,
}

impl Scheduler {
    pub fn new(console: Arc<Console>, store: Arc<dyn Store>) -> Self {
        let lock_key = format!("{}:scheduler:lock", console.collector.config.prefix);
        Self {
            console,
            store,
            lock_key,
            ticks: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Runs a tick every `every` until `stop`.
    pub fn spawn(self, every: Duration, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(every);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = interval.tick() => {}
                }
                let report = self.tick().await;
                if report.dispatched + report.failed > 0 {
                    tracing::info!(
                        dispatched = report.dispatched,
                        failed = report.failed,
                        "scheduler tick"
                    );
                }
            }
        })
    }

    /// One tick: lock, fire what is due, prune now and then, unlock.
    pub async fn tick(&self) -> TickReport {
        let token = turnstone_proto::ids::new_correlation_id();
        match self.acquire(&token).await {
            Ok(true) => {}
            Ok(false) => return TickReport::default(),
            Err(e) => {
                tracing::warn!(error = %e, "scheduler lock unavailable; tick skipped");
                return TickReport::default();
            }
        }
        let mut report = TickReport {
            led: true,
            ..TickReport::default()
        };
        let now = SystemTime::now();
        match self
            .store
            .due_tasks(&turnstone_store::timestamp::format_system_time(now))
            .await
        {
            Ok(due) => {
                for task in due {
                    let (ok, failed) = self.fire(&task).await;
                    report.dispatched += ok;
                    report.failed += failed;
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot read due tasks"),
        }
        let n = self
            .ticks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n.is_multiple_of(PRUNE_EVERY) {
            self.prune().await;
        }
        if let Err(e) = self.release(&token).await {
            tracing::warn!(error = %e, "cannot release the scheduler lock (it expires)");
        }
        report
    }

    /// Cuts the run history and drops usage rows past their retention.
    async fn prune(&self) {
        match self.store.prune_runs(KEEP_RUNS).await {
            Ok(0) => {}
            Ok(pruned) => tracing::info!(pruned, "task run history pruned"),
            Err(e) => tracing::warn!(error = %e, "cannot prune task runs"),
        }
        let days = self.console.collector.config.usage_retention_days;
        if days > 0 {
            match self.store.prune_usage(days).await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, days, "usage rows pruned"),
                Err(e) => tracing::warn!(error = %e, "cannot prune usage rows"),
            }
        }
    }

    async fn acquire(&self, token: &str) -> redis::RedisResult<bool> {
        let reply: Option<String> = self
            .console
            .redis_query(
                redis::cmd("SET")
                    .arg(&self.lock_key)
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(u64::try_from(LOCK_TTL.as_millis()).unwrap_or(60_000)),
            )
            .await?;
        Ok(reply.is_some())
    }

    async fn release(&self, token: &str) -> redis::RedisResult<()> {
        let _: i64 = self
            .console
            .redis_query(
                redis::cmd("EVAL")
                    .arg(RELEASE)
                    .arg(1)
                    .arg(&self.lock_key)
                    .arg(token),
            )
            .await?;
        Ok(())
    }

    /// Fires one task: (messages dispatched, failures recorded).
    async fn fire(&self, task: &ScheduledTask) -> (usize, usize) {
        let targets: Vec<String> = if task.target_mode == "all" {
            self.console.collector.read(|c| {
                c.placeable_nodes()
                    .into_iter()
                    .take(MAX_FAN_OUT)
                    .map(|(n, _)| n.node_id.clone())
                    .collect()
            })
        } else {
            vec![task.target_mode.clone()]
        };
        if targets.is_empty() {
            self.record(task, "", "", "failed", "No reachable nodes for fan-out")
                .await;
            return (0, 1);
        }
        let (mut ok, mut failed) = (0, 0);
        for target in &targets {
            match crate::api::queue_create(&self.console, target, message(task)).await {
                Ok((node, correlation_id)) => {
                    ok += 1;
                    self.record(task, &node, &correlation_id, "dispatched", "")
                        .await;
                }
                Err(e) => {
                    failed += 1;
                    self.record(task, target, "", "failed", &e.to_string())
                        .await;
                }
            }
        }
        if ok > 0 {
            let now = SystemTime::now();
            let next = match task.schedule_type.as_str() {
                "at" => None,
                _ => crate::schedules::next_run(task, now),
            };
            let enabled = task.schedule_type != "at";
            if let Err(e) = self
                .store
                .task_fired(
                    &task.task_id,
                    &turnstone_store::timestamp::format_system_time(now),
                    next.as_deref(),
                    enabled,
                )
                .await
            {
                tracing::error!(task_id = %task.task_id, error = %e, "cannot advance the task");
            }
        } else {
            tracing::warn!(task_id = %task.task_id, "task firing failed; retried next tick");
        }
        (ok, failed)
    }

    async fn record(
        &self,
        task: &ScheduledTask,
        node_id: &str,
        correlation_id: &str,
        status: &str,
        error: &str,
    ) {
        let run = NewTaskRun {
            task_id: task.task_id.clone(),
            node_id: node_id.to_string(),
            ws_id: String::new(),
            correlation_id: correlation_id.to_string(),
            status: status.to_string(),
            error: error.to_string(),
        };
        if let Err(e) = self.store.record_run(run).await {
            tracing::error!(task_id = %task.task_id, error = %e, "cannot record the task run");
        }
    }
}

/// The `create_workstream` of one firing (a fresh correlation id each time).
fn message(task: &ScheduledTask) -> CreateWorkstreamMessage {
    CreateWorkstreamMessage {
        name: task.name.clone(),
        model: task.model.clone(),
        initial_message: task.initial_message.clone(),
        auto_approve: task.auto_approve,
        auto_approve_tools: task
            .auto_approve_tools
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
        user_id: task.created_by.clone(),
        skill: task.skill.clone(),
        ..CreateWorkstreamMessage::default()
    }
}
