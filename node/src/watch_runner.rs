//! The watch runner: polls this node's due watches and delivers the ones that fire to their
//! workstreams; and [`StoreWatchBackend`], the `watch` tool's storage on the node's store.
//!
//! # One tick
//! Every [`WatchRunnerConfig::tick`] the runner
//! 1. retries what is held: a fired watch whose workstream was busy (or could not be brought
//!    back), and a delivered watch whose final row update failed;
//! 2. asks the store for the active watches of this node whose `next_poll` has passed —
//!    after a restart that includes every overdue watch, which is polled once on recovery;
//! 3. polls each (not already polling or held) on its own task, at most
//!    [`WatchRunnerConfig::max_concurrent_polls`] at once, so one slow command never delays
//!    the others. A poll runs the command ([`run_poll`]: `bash -c` in the engine's working
//!    directory, timeout, output capped at 64 KB, the process group killed on drop) and
//!    evaluates the watch's [`Condition`].
//!
//! A poll that does not fire is recorded (output, exit code, count) with the next poll one
//! interval later. A poll that fires — or spends the last of `max_polls` — builds the
//! [`notice`] and delivers it as a user message, which starts a turn: the workstream is
//! resumed from the store first when it is not loaded; when it is busy the notice is held
//! and retried at the next tick, and nothing is written yet, so a restart meanwhile re-polls
//! the watch against its old baseline and regenerates the notice instead of losing it. Once
//! delivered, the poll is recorded and the watch deactivated. A watch whose workstream no
//! longer exists is deactivated.
//!
//! # The depth guard
//! A watch turn can create another watch that fires at once, whose turn creates another, and
//! so on, with no human involved. So at most
//! [`WatchRunnerConfig::max_consecutive_dispatches`] (the original's 5) watch-triggered turns
//! run in a row on a workstream: before a delivery the runner counts the watch notices at
//! the end of the workstream's user messages ([`consecutive_watch_turns`]); at the limit the
//! notice is **held**, not lost — it stays pending (the watch active, nothing written), the
//! workstream gets one `info` event saying so, and it is delivered at the first tick after a
//! human message (any user message that is not a watch notice, e.g. from `/v1/api/send`)
//! ends the run. A held watch can still be cancelled, which drops its notice. The count
//! comes from the history, so it survives an eviction and a restart (a compaction that
//! rewrites the history starts it again).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tracing::Instrument;
use turnstone_engine::{CreateOptions, Engine, Manager, SendOutcome, WorkstreamHandle};
use turnstone_store::{NewWatch, Store, StoreError, Watch, WatchPoll};
use turnstone_tools::watch::{
    Condition, Trigger, WatchBackend, WatchEntry, WatchRequest, check_command, notice, run_poll,
};
use turnstone_tools::{Provenance, RegistryError, WatchTool};

use crate::server::Node;

// ---------------------------------------------------------------------------------------------
// The tool's storage
// ---------------------------------------------------------------------------------------------

/// The `watch` tool's [`WatchBackend`] on the node's store.
pub struct StoreWatchBackend {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for StoreWatchBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWatchBackend")
            .field("backend", &self.store.backend_name())
            .finish()
    }
}

impl StoreWatchBackend {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }
}

fn entry(w: Watch) -> WatchEntry {
    WatchEntry {
        watch_id: w.watch_id,
        name: w.name,
        command: w.command,
        interval_secs: w.interval_secs,
        stop_on: w.stop_on,
        max_polls: w.max_polls,
        poll_count: w.poll_count,
        last_poll: w.last_poll,
        next_poll: w.next_poll,
    }
}

fn storage_message(e: &StoreError) -> String {
    match e {
        StoreError::InvalidInput(m) => m.clone(),
        other => format!("storage error: {other}"),
    }
}

#[async_trait]
impl WatchBackend for StoreWatchBackend {
    async fn create(&self, request: WatchRequest) -> Result<WatchEntry, String> {
        let new = NewWatch {
            watch_id: None,
            ws_id: request.ws_id,
            node_id: request.node_id,
            name: request.name,
            command: request.command,
            interval_secs: request.interval_secs,
            stop_on: request.stop_on,
            max_polls: request.max_polls,
            created_by: request.created_by,
            // The first poll runs at the next tick: it sets the baseline of change detection
            // and reports a condition that already holds without waiting a whole interval.
            first_poll: SystemTime::now(),
        };
        self.store
            .create_watch(new)
            .await
            .map(entry)
            .map_err(|e| storage_message(&e))
    }

    async fn active(&self, ws_id: &str) -> Result<Vec<WatchEntry>, String> {
        self.store
            .list_active_watches(Some(ws_id), None)
            .await
            .map(|rows| rows.into_iter().map(entry).collect())
            .map_err(|e| storage_message(&e))
    }

    async fn cancel(&self, watch_id: &str) -> Result<bool, String> {
        self.store
            .deactivate_watch(watch_id)
            .await
            .map_err(|e| storage_message(&e))
    }
}

// ---------------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------------

/// Settings of the runner.
#[derive(Debug, Clone)]
pub struct WatchRunnerConfig {
    /// How often due watches are looked for (the original: 15 s).
    pub tick: Duration,
    /// How long one poll's command may run.
    pub command_timeout: Duration,
    /// Polls running at once.
    pub max_concurrent_polls: usize,
    /// Most due watches fetched per tick (the rest stay due for the next one).
    pub batch: usize,
    /// Watch-triggered turns allowed in a row on a workstream without a human message (the
    /// depth guard); the next notice is held until one arrives.
    pub max_consecutive_dispatches: usize,
    /// Which of the node's variables poll commands get (`[tools] env_passthrough`).
    pub child_env: turnstone_tools::ChildEnv,
}

/// The original's depth guard: 5 consecutive watch dispatches.
pub const MAX_CONSECUTIVE_WATCH_DISPATCHES: usize = 5;

/// Whether a user message is a watch notice (as [`notice`] writes them: a first line
/// `[watch '<name>' triggered: <why>]`).
pub fn is_watch_notice(text: &str) -> bool {
    let first = text.lines().next().unwrap_or_default();
    first.starts_with("[watch '") && first.contains("' triggered: ") && first.ends_with(']')
}

/// How many watch notices end the workstream's user messages: the watch-triggered turns
/// run in a row since the last human message.
pub fn consecutive_watch_turns(history: &[turnstone_llm::ChatMessage]) -> usize {
    history
        .iter()
        .rev()
        .filter(|m| m.role() == turnstone_llm::Role::User)
        .take_while(|m| is_watch_notice(m.content.as_deref().unwrap_or_default()))
        .count()
}

impl Default for WatchRunnerConfig {
    fn default() -> Self {
        Self {
            tick: Duration::from_secs(15),
            command_timeout: Duration::from_secs(120),
            max_concurrent_polls: 4,
            batch: 64,
            max_consecutive_dispatches: MAX_CONSECUTIVE_WATCH_DISPATCHES,
            child_env: turnstone_tools::ChildEnv::default(),
        }
    }
}

/// Where a watch runner finds the workstreams it delivers to: the node's
/// ([`WatchRunner::install`]), or the terminal client's manager ([`ManagerWatchHost`]).
#[async_trait]
pub trait WatchHost: Send + Sync {
    /// The live workstream `ws_id`.
    fn workstream(&self, ws_id: &str) -> Option<WorkstreamHandle>;
    /// Brings back a hibernated workstream: `Ok(None)` when `ws_id` is not hibernated.
    async fn rehydrate(&self, ws_id: &str) -> Result<Option<WorkstreamHandle>, String>;
    /// Opens a saved workstream as a live one (its stored id, name and history).
    fn open(&self, options: CreateOptions) -> Result<WorkstreamHandle, String>;
}

struct NodeWatchHost(Arc<Node>);

#[async_trait]
impl WatchHost for NodeWatchHost {
    fn workstream(&self, ws_id: &str) -> Option<WorkstreamHandle> {
        self.0.workstream(ws_id)
    }
    async fn rehydrate(&self, ws_id: &str) -> Result<Option<WorkstreamHandle>, String> {
        if self.0.manager.hibernated(ws_id).is_none() {
            return Ok(None);
        }
        self.0
            .resolve(ws_id)
            .await
            .map(Some)
            .map_err(|e| format!("rehydration failed: {e:?}"))
    }
    fn open(&self, options: CreateOptions) -> Result<WorkstreamHandle, String> {
        self.0.create_workstream(options).map_err(|e| e.to_string())
    }
}

/// The terminal client's workstreams: a notice goes to a workstream open in this run
/// (a saved one is not opened behind the user's back: its notice waits until `/resume`
/// opens it). A [`Weak`](std::sync::Weak) reference: the manager owns the engine that owns
/// the tool.
#[derive(Debug, Clone)]
pub struct ManagerWatchHost(pub std::sync::Weak<Manager>);

impl ManagerWatchHost {
    fn manager(&self) -> Result<Arc<Manager>, String> {
        self.0.upgrade().ok_or_else(|| "shutting down".to_string())
    }
}

#[async_trait]
impl WatchHost for ManagerWatchHost {
    fn workstream(&self, ws_id: &str) -> Option<WorkstreamHandle> {
        self.0.upgrade()?.get(ws_id)
    }
    async fn rehydrate(&self, _ws_id: &str) -> Result<Option<WorkstreamHandle>, String> {
        Ok(None)
    }
    fn open(&self, _options: CreateOptions) -> Result<WorkstreamHandle, String> {
        self.manager()?;
        Err("the workstream is not open in this terminal (it gets the notice once /resume opens it)".into())
    }
}

/// A running watch runner; [`WatchRunner::stop`] ends it.
pub struct WatchRunner {
    shutdown: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for WatchRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchRunner").finish_non_exhaustive()
    }
}

impl WatchRunner {
    /// Registers the `watch` tool in the engine's live registry and starts the runner —
    /// when the node has persistence; without it there are no watches and `None` is
    /// returned.
    pub fn install(
        node: &Arc<Node>,
        config: WatchRunnerConfig,
    ) -> Result<Option<Self>, RegistryError> {
        let Some(p) = &node.persistence else {
            tracing::info!("no persistence: the watch tool is not offered");
            return Ok(None);
        };
        Ok(Some(Self::install_with(
            Arc::new(NodeWatchHost(node.clone())),
            node.manager.engine().clone(),
            p.store.clone(),
            node.options.node_id.clone(),
            config,
        )?))
    }

    /// Registers the `watch` tool in `engine` (whose workstreams `host` finds) and starts
    /// the runner on `store` for the watches of `node_id` (the terminal client's wiring; the
    /// node's is [`WatchRunner::install`]).
    pub fn install_with(
        host: Arc<dyn WatchHost>,
        engine: Arc<Engine>,
        store: Arc<dyn Store>,
        node_id: String,
        config: WatchRunnerConfig,
    ) -> Result<Self, RegistryError> {
        let backend = Arc::new(StoreWatchBackend::new(store.clone()));
        let tool = Arc::new(WatchTool::new(backend)?);
        engine.registry().add(tool, Provenance::Builtin)?;
        Ok(Self::start_with(host, engine, store, node_id, config))
    }

    /// Starts the runner alone (the tool registered elsewhere, or a restart of the runner on
    /// the same store). `None` without persistence.
    pub fn start(node: Arc<Node>, config: WatchRunnerConfig) -> Option<Self> {
        let store = node.store()?;
        let node_id = node.options.node_id.clone();
        let engine = node.manager.engine().clone();
        Some(Self::start_with(
            Arc::new(NodeWatchHost(node)),
            engine,
            store,
            node_id,
            config,
        ))
    }

    fn start_with(
        host: Arc<dyn WatchHost>,
        engine: Arc<Engine>,
        store: Arc<dyn Store>,
        node_id: String,
        config: WatchRunnerConfig,
    ) -> Self {
        let cwd = engine.config().cwd.clone();
        let shutdown = Arc::new(Notify::new());
        let runner = Arc::new(Runner {
            slots: Arc::new(Semaphore::new(config.max_concurrent_polls.max(1))),
            config,
            engine,
            host,
            store,
            node_id: node_id.clone(),
            cwd,
            in_flight: Mutex::default(),
            pending: Mutex::default(),
            resume_lock: tokio::sync::Mutex::new(()),
        });
        let span = tracing::info_span!("watch_runner", %node_id);
        let task = tokio::spawn(runner.run(shutdown.clone()).instrument(span));
        tracing::info!(%node_id, "watch runner started");
        Self { shutdown, task }
    }

    /// Stops the runner: polls in flight are abandoned (their commands killed); their
    /// watches stay due and are polled again at the next start.
    pub async fn stop(self) {
        self.shutdown.notify_one();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "watch runner task failed");
        }
        tracing::info!("watch runner stopped");
    }
}

/// A fired watch not yet finished.
enum Pending {
    /// The notice waits for its workstream (busy, or not loadable right now).
    Deliver {
        ws_id: String,
        name: String,
        trigger: String,
        notice: String,
        poll: WatchPoll,
        /// Held by the depth guard, and the workstream was told.
        guard_noted: bool,
    },
    /// Delivered; the final row update failed and is retried (never the delivery).
    Finish { poll: WatchPoll },
}

/// Where a notice went.
enum Delivery {
    Delivered,
    /// Try again at the next tick.
    Later(String),
    /// The depth guard holds it until a human message; try again at the next tick.
    Guarded,
    /// The workstream is gone for good: end the watch.
    Gone(String),
}

struct Runner {
    config: WatchRunnerConfig,
    /// Kept for its settings (a weak host may be gone at shutdown).
    engine: Arc<Engine>,
    host: Arc<dyn WatchHost>,
    store: Arc<dyn Store>,
    node_id: String,
    cwd: PathBuf,
    slots: Arc<Semaphore>,
    /// Watches being polled (a slow poll's row stays due; it is not polled twice).
    in_flight: Mutex<HashSet<String>>,
    /// Fired watches waiting for delivery or for their final update, by watch id.
    pending: Mutex<HashMap<String, Pending>>,
    /// One resume at a time, so two watches of one unloaded workstream load it once.
    resume_lock: tokio::sync::Mutex<()>,
}

impl Runner {
    async fn run(self: Arc<Self>, shutdown: Arc<Notify>) {
        let mut polls = JoinSet::new();
        loop {
            while let Some(done) = polls.try_join_next() {
                if let Err(e) = done {
                    tracing::error!(error = %e, "watch poll task failed");
                }
            }
            self.tick(&mut polls).await;
            tokio::select! {
                () = shutdown.notified() => break,
                () = tokio::time::sleep(self.config.tick) => {}
            }
        }
        polls.abort_all();
        while polls.join_next().await.is_some() {}
    }

    async fn tick(self: &Arc<Self>, polls: &mut JoinSet<()>) {
        self.retry_pending().await;
        let due = match self
            .store
            .due_watches(&self.node_id, SystemTime::now(), self.config.batch)
            .await
        {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e, "due watches not read; retrying at the next tick");
                return;
            }
        };
        for watch in due {
            if self.pending.lock().contains_key(&watch.watch_id) {
                continue;
            }
            if !self.in_flight.lock().insert(watch.watch_id.clone()) {
                continue;
            }
            let Ok(permit) = self.slots.clone().try_acquire_owned() else {
                // All slots busy: the rest stay due for the next tick.
                self.in_flight.lock().remove(&watch.watch_id);
                break;
            };
            let this = self.clone();
            let span =
                tracing::info_span!("watch_poll", watch_id = %watch.watch_id, ws_id = %watch.ws_id);
            polls.spawn(
                async move {
                    let id = watch.watch_id.clone();
                    this.poll(watch).await;
                    this.in_flight.lock().remove(&id);
                    drop(permit);
                }
                .instrument(span),
            );
        }
    }

    async fn poll(&self, watch: Watch) {
        if let Err(reason) = check_command(&watch.command) {
            tracing::warn!(%reason, "watch command refused; watch deactivated");
            self.deactivate(&watch.watch_id).await;
            return;
        }
        let mut result = run_poll(
            &watch.command,
            &self.cwd,
            self.config.command_timeout,
            &self.config.child_env,
        )
        .await;
        // The output guard (docs/security.md): a secret the command prints is neither stored
        // with the watch nor delivered in its notice. The condition sees the same text.
        let guard = self.engine.config().output_guard;
        if let Some(redacted) = guard.redact(&result.output) {
            tracing::warn!("output guard redacted a watch's poll output");
            result.output = redacted;
        }
        let poll_count = watch.poll_count.saturating_add(1);
        let trigger = match Condition::parse(watch.stop_on.as_deref()) {
            Ok(condition) => condition.evaluate(
                &result.output,
                result.exit_code,
                watch.last_output.as_deref(),
            ),
            // Only a hand-edited row gets here (the tool parses stop_on at create).
            Err(e) => Some(Trigger::ConditionError(format!(
                "invalid stop_on expression {e}"
            ))),
        };
        let trigger = trigger.or((poll_count >= watch.max_polls).then_some(Trigger::MaxPolls));
        tracing::debug!(
            poll_count,
            exit_code = result.exit_code,
            fired = trigger.is_some(),
            "watch polled"
        );
        let Some(trigger) = trigger else {
            // A hand-edited row could hold anything: keep the delay finite and in bounds.
            let interval = if watch.interval_secs.is_finite() {
                watch.interval_secs.clamp(1.0, 86_400.0)
            } else {
                300.0
            };
            let next = SystemTime::now() + Duration::from_secs_f64(interval);
            let poll = WatchPoll {
                output: result.output,
                exit_code: result.exit_code,
                poll_count,
                next_poll: Some(next),
            };
            match self.store.record_watch_poll(&watch.watch_id, &poll).await {
                Ok(true) => {}
                Ok(false) => tracing::debug!("watch cancelled during its poll"),
                Err(e) => tracing::warn!(error = %e, "watch poll not recorded; it stays due"),
            }
            return;
        };
        let text = notice(
            &watch.name,
            &watch.command,
            watch.stop_on.as_deref(),
            &trigger,
            &result,
            poll_count,
            watch.max_polls,
        );
        tracing::info!(trigger = %trigger.describe(), "watch fired");
        let pending = Pending::Deliver {
            ws_id: watch.ws_id,
            name: watch.name,
            trigger: trigger.describe(),
            notice: text,
            poll: WatchPoll {
                output: result.output,
                exit_code: result.exit_code,
                poll_count,
                next_poll: None,
            },
            guard_noted: false,
        };
        if let Some(left) = self.advance(&watch.watch_id, pending).await {
            self.pending.lock().insert(watch.watch_id, left);
        }
    }

    /// Held work first: deliveries that waited, final updates that failed.
    async fn retry_pending(&self) {
        let ids: Vec<String> = self.pending.lock().keys().cloned().collect();
        for id in ids {
            let Some(pending) = self.pending.lock().remove(&id) else {
                continue;
            };
            if matches!(pending, Pending::Deliver { .. }) {
                // Cancelled (by the model or the API) while it waited: drop the notice.
                match self.store.get_watch(&id).await {
                    Ok(Some(w)) if w.active => {}
                    Ok(_) => {
                        tracing::info!(watch_id = %id, "held watch notice dropped: the watch was cancelled");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(watch_id = %id, error = %e, "watch not read; retrying");
                        self.pending.lock().insert(id, pending);
                        continue;
                    }
                }
            }
            if let Some(left) = self.advance(&id, pending).await {
                self.pending.lock().insert(id, left);
            }
        }
    }

    /// Moves a fired watch forward; returns what is left to do later.
    async fn advance(&self, watch_id: &str, mut pending: Pending) -> Option<Pending> {
        if let Pending::Deliver {
            ws_id,
            name,
            trigger,
            notice,
            guard_noted,
            ..
        } = &mut pending
        {
            match self
                .deliver(ws_id, name, trigger, notice, *guard_noted)
                .await
            {
                Delivery::Delivered => {
                    tracing::info!(watch_id, %ws_id, "watch notice delivered");
                }
                Delivery::Later(reason) => {
                    tracing::debug!(watch_id, %ws_id, %reason, "watch notice held");
                    return Some(pending);
                }
                Delivery::Guarded => {
                    *guard_noted = true;
                    return Some(pending);
                }
                Delivery::Gone(reason) => {
                    tracing::warn!(watch_id, %ws_id, %reason, "watch deactivated: its workstream is gone");
                    self.deactivate(watch_id).await;
                    return None;
                }
            }
        }
        let (Pending::Finish { poll } | Pending::Deliver { poll, .. }) = pending;
        let recorded = self.store.record_watch_poll(watch_id, &poll).await;
        let ended = self.store.deactivate_watch(watch_id).await;
        match (recorded, ended) {
            (Ok(_), Ok(_)) => None,
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(watch_id, error = %e, "fired watch not ended; retrying the update");
                Some(Pending::Finish { poll })
            }
        }
    }

    async fn deactivate(&self, watch_id: &str) {
        if let Err(e) = self.store.deactivate_watch(watch_id).await {
            tracing::warn!(watch_id, error = %e, "watch not deactivated");
        }
    }

    /// Sends the notice to the workstream as a user message (starting a turn), unless the
    /// depth guard holds it (`guard_noted`: the workstream was already told).
    async fn deliver(
        &self,
        ws_id: &str,
        name: &str,
        trigger: &str,
        notice: &str,
        guard_noted: bool,
    ) -> Delivery {
        let handle = match self.host.workstream(ws_id) {
            Some(handle) => handle,
            None => match self.resume(ws_id).await {
                Ok(handle) => handle,
                Err(delivery) => return delivery,
            },
        };
        if handle.is_closed() {
            return Delivery::Later("the workstream is closing".into());
        }
        if handle.is_busy() {
            return Delivery::Later("the workstream is busy".into());
        }
        let limit = self.config.max_consecutive_dispatches;
        let consecutive = consecutive_watch_turns(&handle.history());
        if consecutive >= limit {
            if !guard_noted {
                tracing::warn!(%ws_id, watch = name, consecutive, limit, "watch notice held by the depth guard");
                handle.emit_info(format!(
                    "[watch '{name}' held: {consecutive} watch-triggered turns in a row without \
                     a user message (limit {limit}); it is delivered after your next message]"
                ));
            }
            return Delivery::Guarded;
        }
        handle.emit_info(format!("[watch '{name}' triggered: {trigger}]"));
        match handle.send(notice.to_string(), None) {
            SendOutcome::Started { .. } => Delivery::Delivered,
            SendOutcome::Busy => Delivery::Later("the workstream became busy".into()),
            SendOutcome::Closed => Delivery::Later("the workstream closed".into()),
        }
    }

    /// Brings a saved workstream back (as `workstreams/new` with `resume_ws` does).
    async fn resume(&self, ws_id: &str) -> Result<WorkstreamHandle, Delivery> {
        let _one_at_a_time = self.resume_lock.lock().await;
        if let Some(handle) = self.host.workstream(ws_id) {
            return Ok(handle);
        }
        match self.host.rehydrate(ws_id).await {
            Ok(Some(handle)) => return Ok(handle),
            Ok(None) => {}
            Err(e) => return Err(Delivery::Later(e)),
        }
        let session = match self.store.resume_session(ws_id).await {
            Ok(session) if session.workstream.ws_id == ws_id => session,
            Ok(_) | Err(StoreError::NotFound(_) | StoreError::Ambiguous { .. }) => {
                return Err(Delivery::Gone(format!("no saved workstream {ws_id}")));
            }
            Err(e) => return Err(Delivery::Later(format!("resume failed: {e}"))),
        };
        let name = crate::server::workstreams::stored_name(&session.workstream);
        let stored = self.store.load_config(ws_id).await.unwrap_or_default();
        let handle = self
            .host
            .open(CreateOptions {
                id: Some(ws_id.to_string()),
                name: Some(name).filter(|n| !n.is_empty()),
                history: session.messages,
                ..CreateOptions::default()
            })
            .map_err(|e| Delivery::Later(format!("resume failed: {e}")))?;
        if let Some(intent) = stored
            .get("tool_intent")
            .and_then(|t| turnstone_tools::toolset::ToolIntent::from_json(t).ok())
        {
            handle.restore_tools(intent, Vec::<String>::new());
        }
        tracing::info!(%ws_id, "workstream resumed for a watch notice");
        Ok(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_llm::ChatMessage;

    #[test]
    fn watch_notices_are_recognised_by_their_first_line() {
        assert!(is_watch_notice(
            "[watch 'build' triggered: condition met]\ncommand: make\n"
        ));
        assert!(is_watch_notice(
            "[watch 'a]b' triggered: max polls reached]"
        ));
        assert!(!is_watch_notice("hello"));
        assert!(!is_watch_notice("[watch 'build' held: 5 ...]"));
        assert!(!is_watch_notice(
            "please look at\n[watch 'build' triggered: condition met]"
        ));
    }

    #[test]
    fn the_run_of_watch_turns_ends_at_a_human_message() {
        let notice = |n: u32| ChatMessage::user(format!("[watch 'w{n}' triggered: condition met]"));
        let mut history = vec![ChatMessage::user("start"), notice(1)];
        history.push(ChatMessage::assistant(Some("ok".into()), Vec::new()));
        history.push(ChatMessage::tool(
            "call_0",
            "[watch 'x' triggered: condition met]",
        ));
        history.push(notice(2));
        assert_eq!(consecutive_watch_turns(&history), 2);
        history.push(ChatMessage::user("a human"));
        assert_eq!(consecutive_watch_turns(&history), 0);
        history.push(notice(3));
        assert_eq!(consecutive_watch_turns(&history), 1);
        assert_eq!(consecutive_watch_turns(&[]), 0);
    }
}
