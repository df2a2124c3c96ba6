//! A workstream's shared context: what its actor task, its turns and its handle all reach
//! (the id, the event log, the journal, the tool context), and the three kinds of state
//! `state.rs` describes — the read model ([`View`], with the conversation, written by the
//! actor task only), the clients' [`Settings`] and the decision registers. Both the read
//! model and the settings are `watch` values: one writer path each ([`Shared::publish`],
//! [`Shared::configure`]), readers take snapshots and never hold a lock across their work.
//! Sub-agents run turns on a detached one (no actor, no handle).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use turnstone_llm::{ChatMessage, Resilient};
use turnstone_tools::ToolContext;
use turnstone_tools::toolset::LoadedTools;

use crate::engine::Engine;
use crate::event::{Envelope, Event, StatusInfo, WsState};
use crate::log::EventLog;
use crate::rounds::Rounds;
use crate::state::{
    EventHook, Journal, PlanState, Settings, TOOL_LOADED_CONFIG_KEY, TitleState, View,
};

tokio::task_local! {
    /// The approval host of the turn whose tool call is running (the turn sets it around
    /// each call): a sub-agent the call starts asks through it (`subagent.rs`).
    pub(crate) static CALLER: Arc<Shared>;
}

pub(crate) struct Shared {
    pub id: Arc<str>,
    pub log: Arc<EventLog>,
    hook: Option<EventHook>,
    journal: Option<Arc<dyn Journal>>,
    pub tool_ctx: ToolContext,
    /// Deferred tools loaded by `tool_search`; in the array from the next turn on.
    pub loaded_tools: LoadedTools,
    /// Cancelled when the workstream is closed: ends its task.
    pub closed: CancellationToken,
    /// A turn (or compaction) is queued or running. Set by the handle when it queues one
    /// (so the first of two sends wins at once), cleared by the turn. Whoever set it is the
    /// one writer of the conversation until it is cleared.
    pub busy: AtomicBool,
    /// The clients' configuration (see [`Settings`]): changed only through
    /// [`Shared::configure`], read as [`Shared::settings`] snapshots.
    settings: watch::Sender<Arc<Settings>>,
    /// The pending approval rounds and the last verdicts (`rounds.rs`).
    pub approvals: Rounds,
    /// A sub-agent's conversation that asks through its parent workstream: the parent's
    /// shared context, whose approval rounds, event stream and settings its gated calls go
    /// to (`subagent.rs`). `None` for a workstream and an unattended sub-agent.
    pub host: Option<Arc<Shared>>,
    /// The pending plan review and the last verdict (`review.rs`).
    pub plan: PlanState,
    /// Auto-title state.
    pub title: TitleState,
    /// The loaded-tool set as last handed to the journal.
    loaded_persisted: Mutex<Vec<String>>,
    /// The open tool batch: which calls started and printed (`receipt.rs`).
    pub(crate) batch: crate::receipt::Batch,
    /// The read model and the conversation, published by the actor task (see [`View`]).
    view: watch::Sender<View>,
}

impl Shared {
    /// The state of a new workstream (or of a sub-agent's conversation, which runs turns on
    /// it without an actor or a handle).
    pub(crate) fn new(
        engine: &Engine,
        id: Arc<str>,
        name: String,
        hook: Option<EventHook>,
        journal: Option<Arc<dyn Journal>>,
        history: Vec<ChatMessage>,
    ) -> Self {
        let config = engine.config();
        let mut tool_ctx =
            ToolContext::new(config.cwd.clone()).for_workstream(&id, &config.node_id);
        tool_ctx.reranker = config.reranker.clone();
        // Tools cut at the guard's raw limit; `turn.rs` cuts to the real one after the guard.
        tool_ctx.truncation_limit = config
            .output_guard
            .tool_limit(config.truncation_limit(engine.context_window()));
        Self {
            log: Arc::new(EventLog::new(config.event_log_capacity, config.live_buffer)),
            id,
            hook,
            journal,
            tool_ctx,
            loaded_tools: LoadedTools::new(),
            closed: CancellationToken::new(),
            busy: AtomicBool::new(false),
            settings: watch::Sender::new(Arc::new(Settings {
                name,
                skip_permissions: config.skip_permissions,
                always: config.auto_approve_labels.clone(),
                posture: Default::default(),
                tool_intent: config.default_tool_intent.clone(),
                skill: None,
                model: None,
                overrides: Default::default(),
            })),
            approvals: Rounds::default(),
            host: None,
            plan: PlanState::default(),
            title: TitleState::default(),
            loaded_persisted: Mutex::new(Vec::new()),
            batch: crate::receipt::Batch::default(),
            view: watch::Sender::new(View {
                messages: Arc::new(history),
                ..View::default()
            }),
        }
    }

    /// Reads one value of the read model without copying the rest.
    pub fn read<R>(&self, f: impl FnOnce(&View) -> R) -> R {
        f(&self.view.borrow())
    }

    /// Changes the read model (the actor task only: its turn, its compaction, or the
    /// holder of `busy`).
    pub fn publish(&self, f: impl FnOnce(&mut View)) {
        self.view.send_modify(f);
    }

    pub fn emit(&self, event: Event) -> Arc<Envelope> {
        match &event {
            Event::Activity {
                activity,
                activity_state,
            } => self.publish(|v| v.activity = (activity.clone(), activity_state.clone())),
            Event::ToolResult { .. } => self.publish(|v| v.tool_calls_total += 1),
            _ => {}
        }
        let make = |seq| Envelope {
            seq,
            ws_id: self.id.clone(),
            event,
        };
        // The hook runs under the log's lock, so a node-wide log sees this workstream's
        // events in `seq` order even when two tasks emit at once.
        match &self.hook {
            Some(hook) => self.log.push_then(make, |env| hook(env)),
            None => self.log.push_with(make),
        }
    }

    /// Emits `approval_resolved` for a round's recorded verdict.
    pub(crate) fn approval_resolved(&self, verdict: &crate::state::Verdict) {
        self.emit(Event::ApprovalResolved {
            approved: verdict.approved,
            feedback: verdict.feedback.clone(),
            cycle_id: verdict.cycle_id.clone(),
        });
    }

    /// The context whose approval rounds this conversation's gated calls go to: the parent
    /// workstream's for a sub-agent that asks through it, else its own.
    pub(crate) fn approval_host(self: &Arc<Self>) -> &Arc<Shared> {
        self.host.as_ref().unwrap_or(self)
    }

    pub fn state(&self) -> WsState {
        self.read(|v| v.state)
    }

    pub fn set_state(&self, state: WsState) {
        self.publish(|v| {
            v.state = state;
            v.last_active = Instant::now();
        });
        self.emit(Event::StateChange { state });
    }

    /// A snapshot of the clients' configuration. A turn takes one per model request (and
    /// one per tool batch), so a change made meanwhile applies from the next one, never
    /// halfway through one.
    pub fn settings(&self) -> Arc<Settings> {
        self.settings.borrow().clone()
    }

    /// Changes the clients' configuration: the one writer path (the handle's setters, and
    /// the turn recording an "always" approval). `change` runs under the watch's write lock,
    /// so concurrent changes never lose one another; snapshots taken before keep their
    /// values (the value is copied only when a snapshot is still held).
    pub fn configure<R>(&self, change: impl FnOnce(&mut Settings) -> R) -> R {
        let mut result = None;
        self.settings
            .send_modify(|settings| result = Some(change(Arc::make_mut(settings))));
        match result {
            Some(result) => result,
            None => unreachable!("watch::Sender::send_modify runs its closure once"),
        }
    }

    /// Token accounting as the `status` event reports it (high-water usage, the engine's
    /// context window, this turn's tool calls).
    pub fn status(&self, engine: &Engine) -> StatusInfo {
        let (usage, tool_calls_this_turn, turn_count) =
            self.read(|v| (v.usage, v.tool_calls_this_turn, v.turn_count));
        let settings = self.settings();
        let window = u64::from(settings.context_window(engine));
        let used = usage.prompt_tokens + usage.completion_tokens;
        let pct = if window == 0 {
            0.0
        } else {
            (used as f64 / window as f64 * 1000.0).round() / 10.0
        };
        StatusInfo {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: used,
            context_window: window,
            pct,
            effort: settings.reasoning_effort(engine),
            cache_creation_tokens: usage.cache_creation_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            tool_calls_this_turn,
            turn_count,
            usage_estimated: usage.estimated,
            plan_mode: settings.tool_intent.is_plan(),
        }
    }

    /// A snapshot of the conversation (what the next request sends, minus the system prompt).
    pub fn messages(&self) -> Arc<Vec<ChatMessage>> {
        self.read(|v| v.messages.clone())
    }

    /// Replaces the conversation and hands it to the journal (no events, usage kept).
    pub fn replace_messages(&self, messages: Vec<ChatMessage>) {
        if let Some(journal) = &self.journal {
            journal.replaced(&self.id, &messages);
        }
        self.publish(|v| v.messages = Arc::new(messages));
    }

    /// Hands a changed session setting to the journal.
    pub fn config_changed(&self, key: &str, value: Option<&str>) {
        if let Some(journal) = &self.journal {
            journal.config_changed(&self.id, key, value);
        }
    }

    /// Hands the loaded-tool set to the journal when `tool_search` changed it.
    pub fn persist_loaded_tools(&self) {
        let names = self.loaded_tools.names();
        let mut persisted = self.loaded_persisted.lock();
        if *persisted == names {
            return;
        }
        let value = serde_json::to_string(&names).unwrap_or_else(|_| "[]".to_string());
        self.config_changed(TOOL_LOADED_CONFIG_KEY, Some(&value));
        *persisted = names;
    }

    /// Records the loaded-tool set as persisted (a resumed session's, restored as stored).
    pub fn loaded_tools_persisted(&self) {
        *self.loaded_persisted.lock() = self.loaded_tools.names();
    }

    /// Opens the tool batch of `call_ids` and hands its `started` marker to the journal.
    pub(crate) fn batch_opened(&self, call_ids: &[&str]) {
        if let Some((key, value)) = self.batch.open(call_ids) {
            self.config_changed(&key, Some(&value));
        }
    }

    /// Records that a call of the open batch starts; returns once the journal has made
    /// the `started` marker durable, so a crash while it runs reads as `unknown`.
    pub(crate) async fn call_started(&self, call_id: &str) {
        if let Some((key, value)) = self.batch.start(call_id)
            && self.journal.is_some()
        {
            self.config_changed(&key, Some(&value));
            self.journal_committed().await;
        }
    }

    /// Closes the open batch (its results are being appended): what its calls did, and
    /// the marker removed.
    pub(crate) fn batch_closed(&self) -> crate::receipt::Seen {
        let (seen, key) = self.batch.close();
        if let Some(key) = key {
            self.config_changed(&key, None);
        }
        seen
    }

    pub fn push_message(&self, message: ChatMessage) {
        self.append_messages(vec![message]);
    }

    /// Appends the user message that starts the turn of `correlation_id`.
    pub(crate) fn push_turn_message(&self, message: ChatMessage, correlation_id: &str) {
        let messages = vec![message];
        if let Some(journal) = &self.journal {
            journal.turn_started(&self.id, correlation_id, &messages);
        }
        self.extend_messages(messages);
    }

    /// Hands the `turn_complete` that ends a turn to the journal (before the commit the
    /// turn waits for).
    pub(crate) fn turn_ended(&self, turn_complete: &Event) {
        if let Some(journal) = &self.journal {
            journal.turn_ended(&self.id, turn_complete);
        }
    }

    /// Hands one model call's usage to the journal.
    pub(crate) fn model_called(&self, call: &crate::state::ModelCall) {
        if let Some(journal) = &self.journal {
            journal.model_called(&self.id, call);
        }
    }

    /// Waits until the journal has made everything so far durable (at once without one).
    pub(crate) async fn journal_committed(&self) {
        if let Some(journal) = &self.journal {
            journal.committed().await;
        }
    }

    /// Appends messages at once (a fold) and hands them to the journal.
    pub fn append_messages(&self, messages: Vec<ChatMessage>) {
        if let Some(journal) = &self.journal {
            journal.appended(&self.id, &messages);
        }
        self.extend_messages(messages);
    }

    /// Appends to the published conversation. In place unless a reader still holds a
    /// snapshot (then that reader keeps the old conversation and this one is copied).
    fn extend_messages(&self, messages: Vec<ChatMessage>) {
        self.publish(|v| Arc::make_mut(&mut v.messages).extend(messages));
    }
}

/// What a model request carries, from one settings snapshot (here rather than in `state.rs`:
/// the defaults are the engine's).
impl Settings {
    /// The client a workstream's requests go to.
    pub fn provider(&self, engine: &Engine) -> Resilient {
        match self.current_model() {
            Some(choice) => choice.provider.clone(),
            None => engine.provider().clone(),
        }
    }

    /// The name usage is accounted under: the alias of the workstream's model choice, else
    /// the engine's alias, else its model name.
    pub fn model_label(&self, engine: &Engine) -> String {
        match self.current_model() {
            Some(choice) => choice.alias.clone(),
            None if !engine.config().model_alias.is_empty() => engine.config().model_alias.clone(),
            None => engine.config().model.clone(),
        }
    }

    /// The model name a workstream's requests carry.
    pub fn model_name(&self, engine: &Engine) -> String {
        match self.current_model() {
            Some(choice) => choice.model.clone(),
            None => engine.config().model.clone(),
        }
    }

    /// The context window of a workstream's model.
    pub fn context_window(&self, engine: &Engine) -> u32 {
        match self.current_model() {
            Some(choice) => choice.context_window,
            None => engine.context_window(),
        }
    }

    /// Whether a workstream's model sees images (`vision` on its model definition).
    pub fn vision(&self, engine: &Engine) -> bool {
        match self.current_model() {
            Some(choice) => choice.vision,
            None => engine.config().vision,
        }
    }

    /// The system prompt before the tool catalog: the engine's, then the active skill's
    /// content (each only when not empty).
    pub fn system_base(&self, engine_prompt: Option<&str>) -> Option<String> {
        let skill = self
            .skill
            .as_ref()
            .map(|s| s.content.as_str())
            .filter(|c| !c.trim().is_empty());
        match (engine_prompt.filter(|p| !p.is_empty()), skill) {
            (None, None) => None,
            (Some(p), None) => Some(p.to_owned()),
            (None, Some(s)) => Some(s.to_owned()),
            (Some(p), Some(s)) => Some(format!("{p}\n\n{s}")),
        }
    }

    /// The temperature requests carry: the skill's, else the engine's.
    pub fn temperature(&self, engine: &Engine) -> Option<f32> {
        self.overrides.temperature.or(engine.config().temperature)
    }

    /// The `max_tokens` requests carry: the skill's, else the engine's.
    pub fn max_tokens(&self, engine: &Engine) -> Option<u32> {
        self.overrides.max_tokens.or(engine.config().max_tokens)
    }

    /// The reasoning effort requests carry: the skill's, else the engine's.
    pub fn reasoning_effort(&self, engine: &Engine) -> String {
        self.overrides
            .reasoning_effort
            .clone()
            .unwrap_or_else(|| engine.config().reasoning_effort.clone())
    }
}
