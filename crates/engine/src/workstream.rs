//! A workstream: one tokio task with an inbox that runs turns, and the [`WorkstreamHandle`]
//! every frontend uses to drive it (send, approve, cancel, subscribe).
//!
//! Decisions (approve, cancel) do not go through the inbox: they act on shared state at
//! once, so they work while a turn is streaming, waiting or executing.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use turnstone_llm::{ChatMessage, Usage};
use turnstone_tools::ToolContext;
use turnstone_tools::toolset::{IntentError, LoadedTools, ToolIntent, ToolPayload, ToolSurface};

use crate::Engine;
use crate::event::{Envelope, Event, ToolItem, WsState};
use crate::log::{EventLog, Subscription};

/// Where conversations are made durable. Called on the turn's task: implementations must
/// not block (queue the write) and must never fail the turn.
pub trait Journal: Send + Sync + 'static {
    /// Messages were appended to `ws_id`'s conversation, in this order.
    fn appended(&self, ws_id: &str, messages: &[ChatMessage]);
    /// The conversation was replaced (`/clear`, a resume, a compaction).
    fn replaced(&self, ws_id: &str, messages: &[ChatMessage]);
    /// A session setting of `ws_id` changed (`model`, `tool_loaded`); `None` removes it.
    /// Default: ignored.
    fn config_changed(&self, _ws_id: &str, _key: &str, _value: Option<&str>) {}
    /// A turn began with `messages` (its user message); `correlation_id` is the send's.
    /// Default: [`appended`](Self::appended). The node writes the message and the `started`
    /// mark of the send's queued entry in one transaction.
    fn turn_started(&self, ws_id: &str, _correlation_id: &str, messages: &[ChatMessage]) {
        self.appended(ws_id, messages);
    }
    /// Resolves once everything handed to the journal so far is durable. The turn awaits it
    /// before `turn_complete`, so a client that saw a turn complete finds it stored.
    /// Default: at once.
    fn committed(&self) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// The session setting holding the deferred tools `tool_search` loaded (a JSON list).
pub const TOOL_LOADED_CONFIG_KEY: &str = "tool_loaded";

/// Called with every event of every workstream right after it is logged (a node-wide
/// stream, metrics, persistence). Must not block.
pub type EventHook = Arc<dyn Fn(&Arc<Envelope>) + Send + Sync>;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A user's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub approved: bool,
    pub feedback: String,
    /// With `approved`: add the batch's approval labels to this workstream's auto-approve set.
    pub always: bool,
}

/// The recorded verdict of an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub request_id: String,
    pub approved: bool,
    pub feedback: String,
    /// `user`, `timeout` or `cancel`.
    pub decided_by: &'static str,
}

pub(crate) struct PendingApproval {
    pub request_id: String,
    pub labels: Vec<String>,
    pub event: Arc<Envelope>,
    pub reply: oneshot::Sender<Decision>,
}

/// The tool array of a workstream's latest prepared model request, for inspection (kept
/// beside the conversation, never in it; replaced on each request).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PreparedTools {
    /// The turn (1-based count of turns this workstream started).
    pub turn: u64,
    /// The request within the turn (1-based): the array is the same for every step of a
    /// turn.
    pub step: u32,
    #[serde(flatten)]
    pub payload: Arc<ToolPayload>,
}

/// A skill active on a workstream: its name and its content, which joins the system prompt
/// of every model request (after the engine's system prompt, before the deferred-tool
/// catalog) while it is active.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveSkill {
    pub name: String,
    /// The content; [`WorkstreamHandle::set_skill`] renders its `{{model}}`, `{{ws_id}}`
    /// and `{{node_id}}` variables.
    pub content: String,
}

impl ActiveSkill {
    pub fn new(name: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            content: content.into(),
        }
    }

    /// `template` with `{{model}}`, `{{ws_id}}` and `{{node_id}}` (spaces inside the braces
    /// allowed) replaced; other text, including unknown `{{…}}`, is left as it is.
    pub fn render(template: &str, model: &str, ws_id: &str, node_id: &str) -> String {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let value = after.find("}}").and_then(|close| {
                let value = match after[..close].trim() {
                    "model" => model,
                    "ws_id" => ws_id,
                    "node_id" => node_id,
                    _ => return None,
                };
                Some((value, close))
            });
            match value {
                Some((value, close)) => {
                    out.push_str(value);
                    rest = &after[close + 2..];
                }
                None => {
                    out.push_str("{{");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// Request settings one workstream sends instead of the engine's (today: those of its
/// active skill — see [`WorkstreamHandle::set_skill_with`]). Each `None` keeps the engine's
/// value; they apply from the next model request on, like the skill's content.
#[derive(Debug, Clone, Default)]
pub struct RequestOverrides {
    /// Another registry model (from [`Engine::resolve_model`]); wins over a `/model` choice
    /// made before it, and a later `/model` choice replaces it.
    pub model: Option<crate::models::ModelChoice>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// `low`/`medium`/`high`…, also reported in `status`.
    pub reasoning_effort: Option<String>,
}

impl RequestOverrides {
    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.model.is_none()
            && self.temperature.is_none()
            && self.max_tokens.is_none()
            && self.reasoning_effort.is_none()
    }
}

/// Result of [`WorkstreamHandle::send`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// The turn was queued; its events carry this correlation id in `turn_complete`.
    Started { correlation_id: String },
    /// A turn is already running; a `busy_error` event was emitted.
    Busy,
    /// The workstream is closed.
    Closed,
}

/// Result of [`WorkstreamHandle::approve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApproveOutcome {
    /// This decision resolved the pending request.
    Resolved(Verdict),
    /// Nothing was pending; the last recorded verdict, if any, is returned.
    NotPending(Option<Verdict>),
}

pub(crate) enum Command {
    Send {
        text: String,
        correlation_id: String,
        token: CancellationToken,
        /// The sender's span: the turn's parent, so the turn joins the sender's trace.
        caller: tracing::Span,
    },
    /// `/compact` (see `compact.rs`).
    Compact { token: CancellationToken },
}

/// Everything about a workstream that frontends and its task share.
pub(crate) struct Shared {
    pub id: Arc<str>,
    pub name: Mutex<String>,
    state: AtomicU8,
    pub busy: AtomicBool,
    pub log: Arc<EventLog>,
    hook: Option<EventHook>,
    journal: Option<Arc<dyn Journal>>,
    pub messages: Mutex<Vec<ChatMessage>>,
    pub pending: Mutex<Option<PendingApproval>>,
    pub last_verdict: Mutex<Option<Verdict>>,
    pub turn_token: Mutex<Option<CancellationToken>>,
    pub always: Mutex<BTreeSet<String>>,
    pub skip_permissions: AtomicBool,
    pub last_active: Mutex<Instant>,
    pub usage: Mutex<Usage>,
    pub tokens_total: AtomicU64,
    pub turn_count: AtomicU64,
    pub tool_calls_this_turn: AtomicU64,
    pub tool_ctx: ToolContext,
    /// Cancelled when the workstream is closed: ends its task.
    pub closed: CancellationToken,
    /// The last activity line and its kind (`thinking`, `tool`, `approval`, or empty).
    pub activity: Mutex<(String, String)>,
    /// Tool results emitted over the workstream's life.
    pub tool_calls_total: AtomicU64,
    /// Tool toggles (intent, never a list of all tools); read at each turn boundary.
    pub tool_intent: Mutex<ToolIntent>,
    /// Deferred tools loaded by `tool_search`; in the array from the next turn on.
    pub loaded_tools: LoadedTools,
    /// The tool array of the latest prepared request.
    pub prepared_tools: Mutex<Option<PreparedTools>>,
    /// The active skill (content rendered); read at every model request.
    pub skill: Mutex<Option<ActiveSkill>>,
    /// The model override (`/model`); `None`: the engine's model.
    pub model: Mutex<Option<crate::models::ModelChoice>>,
    /// The active skill's request settings (cleared with the skill).
    pub overrides: Mutex<RequestOverrides>,
    /// Auto-title state.
    pub title: crate::title::TitleState,
    /// The loaded-tool set as last handed to the journal.
    pub loaded_persisted: Mutex<Vec<String>>,
    /// The pending plan review and the last verdict (`plan.rs`).
    pub plan: crate::plan::PlanState,
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
        tool_ctx.truncation_limit = config.truncation_limit(engine.context_window());
        Self {
            log: Arc::new(EventLog::new(config.event_log_capacity, config.live_buffer)),
            id,
            name: Mutex::new(name),
            state: AtomicU8::new(WsState::Idle.to_u8()),
            busy: AtomicBool::new(false),
            hook,
            journal,
            messages: Mutex::new(history),
            pending: Mutex::new(None),
            last_verdict: Mutex::new(None),
            turn_token: Mutex::new(None),
            always: Mutex::new(config.auto_approve_labels.clone()),
            skip_permissions: AtomicBool::new(config.skip_permissions),
            last_active: Mutex::new(Instant::now()),
            usage: Mutex::new(Usage::default()),
            tokens_total: AtomicU64::new(0),
            turn_count: AtomicU64::new(0),
            tool_calls_this_turn: AtomicU64::new(0),
            tool_ctx,
            closed: CancellationToken::new(),
            activity: Mutex::new((String::new(), String::new())),
            tool_calls_total: AtomicU64::new(0),
            tool_intent: Mutex::new(config.default_tool_intent.clone()),
            loaded_tools: LoadedTools::new(),
            prepared_tools: Mutex::new(None),
            skill: Mutex::new(None),
            model: Mutex::new(None),
            overrides: Mutex::new(RequestOverrides::default()),
            title: crate::title::TitleState::default(),
            loaded_persisted: Mutex::new(Vec::new()),
            plan: crate::plan::PlanState::default(),
        }
    }

    pub fn emit(&self, event: Event) -> Arc<Envelope> {
        match &event {
            Event::Activity {
                activity,
                activity_state,
            } => *lock(&self.activity) = (activity.clone(), activity_state.clone()),
            Event::ToolResult { .. } => {
                self.tool_calls_total.fetch_add(1, Ordering::Relaxed);
            }
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

    pub fn state(&self) -> WsState {
        WsState::from_u8(self.state.load(Ordering::Acquire))
    }

    pub fn set_state(&self, state: WsState) {
        self.state.store(state.to_u8(), Ordering::Release);
        *lock(&self.last_active) = Instant::now();
        self.emit(Event::StateChange { state });
    }

    /// Token accounting as the `status` event reports it (high-water usage, the engine's
    /// context window, this turn's tool calls).
    pub fn status(&self, engine: &Engine) -> crate::event::StatusInfo {
        let usage = *lock(&self.usage);
        let window = u64::from(crate::models::context_window(engine, self));
        let used = usage.prompt_tokens + usage.completion_tokens;
        let pct = if window == 0 {
            0.0
        } else {
            (used as f64 / window as f64 * 1000.0).round() / 10.0
        };
        crate::event::StatusInfo {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: used,
            context_window: window,
            pct,
            effort: self.reasoning_effort(engine),
            cache_creation_tokens: usage.cache_creation_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            tool_calls_this_turn: self.tool_calls_this_turn.load(Ordering::Relaxed),
            turn_count: self.turn_count.load(Ordering::Relaxed),
        }
    }

    /// The system prompt before the tool catalog: the engine's, then the active skill's
    /// content (each only when not empty).
    pub fn system_base(&self, engine_prompt: Option<&str>) -> Option<String> {
        let skill = lock(&self.skill)
            .as_ref()
            .map(|s| s.content.clone())
            .filter(|c| !c.trim().is_empty());
        match (engine_prompt.filter(|p| !p.is_empty()), skill) {
            (None, None) => None,
            (Some(p), None) => Some(p.to_owned()),
            (None, Some(s)) => Some(s),
            (Some(p), Some(s)) => Some(format!("{p}\n\n{s}")),
        }
    }

    /// The temperature requests carry: the skill's, else the engine's.
    pub fn temperature(&self, engine: &Engine) -> Option<f32> {
        lock(&self.overrides)
            .temperature
            .or(engine.config().temperature)
    }

    /// The `max_tokens` requests carry: the skill's, else the engine's.
    pub fn max_tokens(&self, engine: &Engine) -> Option<u32> {
        lock(&self.overrides)
            .max_tokens
            .or(engine.config().max_tokens)
    }

    /// The reasoning effort requests carry: the skill's, else the engine's.
    pub fn reasoning_effort(&self, engine: &Engine) -> String {
        lock(&self.overrides)
            .reasoning_effort
            .clone()
            .unwrap_or_else(|| engine.config().reasoning_effort.clone())
    }

    /// Replaces the conversation and hands it to the journal (no events, usage kept).
    pub fn replace_messages(&self, messages: Vec<ChatMessage>) {
        if let Some(journal) = &self.journal {
            journal.replaced(&self.id, &messages);
        }
        *lock(&self.messages) = messages;
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
        let mut persisted = lock(&self.loaded_persisted);
        if *persisted == names {
            return;
        }
        let value = serde_json::to_string(&names).unwrap_or_else(|_| "[]".to_string());
        self.config_changed(TOOL_LOADED_CONFIG_KEY, Some(&value));
        *persisted = names;
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
        lock(&self.messages).extend(messages);
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
        lock(&self.messages).extend(messages);
    }
}

/// A cheap, clonable handle to a running workstream.
#[derive(Clone)]
pub struct WorkstreamHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) engine: Arc<Engine>,
    inbox: mpsc::Sender<Command>,
}

impl std::fmt::Debug for WorkstreamHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkstreamHandle")
            .field("id", &self.shared.id)
            .field("state", &self.state())
            .finish()
    }
}

impl WorkstreamHandle {
    /// Starts a workstream task on the current runtime.
    pub(crate) fn spawn(
        engine: Arc<Engine>,
        id: String,
        name: String,
        hook: Option<EventHook>,
        journal: Option<Arc<dyn Journal>>,
        history: Vec<ChatMessage>,
    ) -> Self {
        let shared = Arc::new(Shared::new(
            &engine,
            id.into(),
            name,
            hook,
            journal,
            history,
        ));
        let (inbox, rx) = mpsc::channel(4);
        let span = tracing::info_span!("workstream", ws_id = %shared.id);
        tokio::spawn(actor(engine.clone(), shared.clone(), rx).instrument(span));
        Self {
            shared,
            engine,
            inbox,
        }
    }

    pub fn id(&self) -> &str {
        &self.shared.id
    }

    pub fn name(&self) -> String {
        lock(&self.shared.name).clone()
    }

    pub fn set_name(&self, name: impl Into<String>) {
        *lock(&self.shared.name) = name.into();
    }

    pub fn state(&self) -> WsState {
        self.shared.state()
    }

    /// Whether a turn is queued or running.
    pub fn is_busy(&self) -> bool {
        self.shared.busy.load(Ordering::Acquire)
    }

    /// When the workstream last changed state.
    pub fn last_active(&self) -> Instant {
        *lock(&self.shared.last_active)
    }

    pub fn skip_permissions(&self) -> bool {
        self.shared.skip_permissions.load(Ordering::Relaxed)
    }

    pub fn set_skip_permissions(&self, on: bool) {
        self.shared.skip_permissions.store(on, Ordering::Relaxed);
    }

    /// The per-tool auto-approve labels ("always" decisions).
    pub fn always_approved(&self) -> BTreeSet<String> {
        lock(&self.shared.always).clone()
    }

    /// Replaces the per-tool auto-approve labels (the MQ `auto_approve_tools` of a send).
    pub fn set_always_approved(&self, labels: BTreeSet<String>) {
        *lock(&self.shared.always) = labels;
    }

    /// The event log (for `seq` bookkeeping and metrics).
    pub fn log(&self) -> &Arc<EventLog> {
        &self.shared.log
    }

    /// Follows this workstream's events after `after` (`None`: only new ones).
    pub fn subscribe(&self, after: Option<u64>) -> Subscription {
        self.shared.log.subscribe(after)
    }

    /// A copy of the conversation (what the next request would send, minus the system prompt).
    pub fn history(&self) -> Vec<ChatMessage> {
        lock(&self.shared.messages).clone()
    }

    /// The `status` payload a client attaching now should see.
    pub fn status(&self) -> crate::event::StatusInfo {
        self.shared.status(&self.engine)
    }

    /// High-water token usage since the workstream started.
    pub fn usage(&self) -> Usage {
        *lock(&self.shared.usage)
    }

    /// Cumulative tokens over all turns (dashboard `tokens`).
    pub fn tokens_total(&self) -> u64 {
        self.shared.tokens_total.load(Ordering::Relaxed)
    }

    /// Turns started so far.
    pub fn turn_count(&self) -> u64 {
        self.shared.turn_count.load(Ordering::Relaxed)
    }

    /// The `approve_request` event of the pending approval, to re-send to a client that
    /// attaches while a turn waits.
    pub fn pending_approval(&self) -> Option<Arc<Envelope>> {
        lock(&self.shared.pending).as_ref().map(|p| p.event.clone())
    }

    /// The last recorded approval verdict.
    pub fn last_verdict(&self) -> Option<Verdict> {
        lock(&self.shared.last_verdict).clone()
    }

    /// Starts a turn with `text`. A fresh correlation id is made when none is given.
    pub fn send(&self, text: impl Into<String>, correlation_id: Option<String>) -> SendOutcome {
        if self.inbox.is_closed() || self.shared.closed.is_cancelled() {
            return SendOutcome::Closed;
        }
        if self.shared.busy.swap(true, Ordering::AcqRel) {
            self.shared.emit(Event::BusyError {
                message: "Already processing a request. Cancel it first or wait.".to_string(),
            });
            return SendOutcome::Busy;
        }
        let correlation_id = correlation_id
            .filter(|c| !c.is_empty())
            .unwrap_or_else(crate::new_correlation_id);
        let token = CancellationToken::new();
        *lock(&self.shared.turn_token) = Some(token.clone());
        self.shared.turn_count.fetch_add(1, Ordering::Relaxed);
        self.shared.tool_calls_this_turn.store(0, Ordering::Relaxed);
        let cmd = Command::Send {
            text: text.into(),
            correlation_id: correlation_id.clone(),
            token,
            caller: tracing::Span::current(),
        };
        match self.inbox.try_send(cmd) {
            Ok(()) => SendOutcome::Started { correlation_id },
            Err(_) => {
                self.shared.busy.store(false, Ordering::Release);
                SendOutcome::Closed
            }
        }
    }

    /// Decides the pending approval. The first decision wins; later ones get
    /// [`ApproveOutcome::NotPending`] with the recorded verdict.
    pub fn approve(
        &self,
        approved: bool,
        feedback: Option<String>,
        always: bool,
    ) -> ApproveOutcome {
        let Some(pending) = lock(&self.shared.pending).take() else {
            return ApproveOutcome::NotPending(self.last_verdict());
        };
        let feedback = feedback.unwrap_or_default();
        if always && approved {
            lock(&self.shared.always).extend(pending.labels.iter().cloned());
        }
        let verdict = Verdict {
            request_id: pending.request_id.clone(),
            approved,
            feedback: feedback.clone(),
            decided_by: "user",
        };
        *lock(&self.shared.last_verdict) = Some(verdict.clone());
        self.shared.emit(Event::ApprovalResolved {
            approved,
            feedback: feedback.clone(),
        });
        // The turn may have been cancelled meanwhile; then nobody listens, which is fine.
        let _ = pending.reply.send(Decision {
            approved,
            feedback,
            always,
        });
        ApproveOutcome::Resolved(verdict)
    }

    /// Cancels the running turn, in whatever phase it is. A pending approval is resolved as
    /// denied (`Cancelled by user`), a pending plan review as rejected. Returns whether a turn was running.
    pub fn cancel(&self) -> bool {
        if !self.is_busy() {
            return false;
        }
        if let Some(pending) = lock(&self.shared.pending).take() {
            let verdict = Verdict {
                request_id: pending.request_id,
                approved: false,
                feedback: "Cancelled by user".to_string(),
                decided_by: "cancel",
            };
            *lock(&self.shared.last_verdict) = Some(verdict);
            self.shared.emit(Event::ApprovalResolved {
                approved: false,
                feedback: "Cancelled by user".to_string(),
            });
            // Dropping `pending.reply` wakes the waiting turn, which sees the token.
        }
        crate::plan::cancel_pending(&self.shared);
        self.shared.emit(Event::Cancelled);
        if let Some(token) = lock(&self.shared.turn_token).as_ref() {
            token.cancel();
        }
        true
    }

    /// Replaces the conversation (after `/clear`, a resume). An empty conversation (`/new`,
    /// `/clear`) is titled again after its first exchange; a restored one is not.
    pub fn replace_history(&self, messages: Vec<ChatMessage>) -> bool {
        if self.is_busy() {
            return false;
        }
        if messages.is_empty() {
            self.shared.title.rearm();
        } else {
            self.shared.title.disarm();
        }
        self.shared.replace_messages(messages);
        *lock(&self.shared.usage) = Usage::default();
        self.shared.emit(Event::ClearUi);
        true
    }

    /// Stops the workstream: cancels a running turn and ends its task.
    pub(crate) fn shutdown(&self) {
        self.shared.closed.cancel();
        self.cancel();
    }

    /// Whether the workstream was closed.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.is_cancelled()
    }

    /// Resolves once the workstream is closed (ends its event streams).
    pub async fn closed(&self) {
        self.shared.closed.cancelled().await;
    }

    /// The current activity line and its kind, for dashboards.
    pub fn activity(&self) -> (String, String) {
        lock(&self.shared.activity).clone()
    }

    /// Tool results over the workstream's life.
    pub fn tool_calls_total(&self) -> u64 {
        self.shared.tool_calls_total.load(Ordering::Relaxed)
    }

    /// The stored tool intent.
    pub fn tool_intent(&self) -> ToolIntent {
        lock(&self.shared.tool_intent).clone()
    }

    /// Replaces the tool intent after checking it (a preset it names must exist). It takes
    /// effect at the next turn boundary; a running turn keeps its tool array.
    pub fn set_tool_intent(&self, intent: ToolIntent) -> Result<(), IntentError> {
        self.engine.config().toolset.validate(&intent)?;
        *lock(&self.shared.tool_intent) = intent;
        Ok(())
    }

    /// Applies a client's change to the tool intent (a JSON object of intent keys; `null`
    /// clears one; see [`ToolIntent::merged`]) and returns the new intent to persist.
    pub fn update_tool_intent(
        &self,
        change: &serde_json::Value,
    ) -> Result<ToolIntent, IntentError> {
        let mut current = lock(&self.shared.tool_intent);
        let next = current.merged(change)?;
        self.engine.config().toolset.validate(&next)?;
        *current = next.clone();
        Ok(next)
    }

    /// Deferred tools `tool_search` has loaded (sorted), to persist with the session.
    pub fn loaded_tools(&self) -> Vec<String> {
        self.shared.loaded_tools.names()
    }

    /// Restores a resumed session's tool state as stored: its intent (not checked: a preset
    /// that no longer exists falls back to the default set with a warning at expansion) and
    /// the deferred tools it had loaded. Call right after creating the workstream.
    pub fn restore_tools<S: Into<String>>(
        &self,
        intent: ToolIntent,
        loaded: impl IntoIterator<Item = S>,
    ) {
        *lock(&self.shared.tool_intent) = intent;
        self.shared.loaded_tools.replace(loaded);
        *lock(&self.shared.loaded_persisted) = self.shared.loaded_tools.names();
    }

    /// The tool array of the latest prepared request (`None` before the first request).
    pub fn prepared_tools(&self) -> Option<PreparedTools> {
        lock(&self.shared.prepared_tools).clone()
    }

    /// The tools the next turn would get, as of now (array, catalog, dispatch).
    pub fn next_tool_surface(&self) -> ToolSurface {
        self.engine
            .tool_surface(&self.tool_intent(), &self.shared.loaded_tools)
    }

    /// The active skill, if any (content rendered).
    pub fn skill(&self) -> Option<ActiveSkill> {
        lock(&self.shared.skill).clone()
    }

    /// Activates a skill (replacing any other, and its request settings) or, with `None`,
    /// clears it. The content is rendered here (`{{model}}`, `{{ws_id}}`, `{{node_id}}`) and
    /// joins the system prompt from the next model request on — also the next request of a
    /// running turn. Persisting the choice is the caller's business.
    pub fn set_skill(&self, skill: Option<ActiveSkill>) {
        self.set_skill_with(skill, RequestOverrides::default());
    }

    /// [`WorkstreamHandle::set_skill`] with the skill's request settings (model,
    /// temperature, `max_tokens`, reasoning effort), used while it is active. Clearing the
    /// skill (`None`) clears them whatever `overrides` says.
    pub fn set_skill_with(&self, skill: Option<ActiveSkill>, overrides: RequestOverrides) {
        let overrides = if skill.is_some() {
            overrides
        } else {
            RequestOverrides::default()
        };
        tracing::info!(
            ws_id = %self.shared.id,
            skill = skill.as_ref().map(|s| s.name.as_str()).unwrap_or(""),
            model = overrides.model.as_ref().map(|m| m.alias.as_str()).unwrap_or(""),
            temperature = ?overrides.temperature,
            max_tokens = ?overrides.max_tokens,
            reasoning_effort = overrides.reasoning_effort.as_deref().unwrap_or(""),
            "active skill set"
        );
        *lock(&self.shared.overrides) = overrides;
        // `{{model}}` is the model the skill runs on (its own, when it names one).
        let model = crate::models::model_name(&self.engine, &self.shared);
        let node_id = &self.engine.config().node_id;
        let rendered = skill.map(|s| ActiveSkill {
            content: ActiveSkill::render(&s.content, &model, &self.shared.id, node_id),
            name: s.name,
        });
        *lock(&self.shared.skill) = rendered;
    }

    /// The request settings of the active skill (empty without one).
    pub fn request_overrides(&self) -> RequestOverrides {
        lock(&self.shared.overrides).clone()
    }

    /// Compacts the conversation (`/compact`): queued like a turn, so it never overlaps
    /// one; [`WorkstreamHandle::cancel`] stops it. Its events say how it went (see
    /// `compact.rs`). `Busy` (with a `busy_error` event) while a turn runs.
    pub fn compact(&self) -> SendOutcome {
        if self.inbox.is_closed() || self.shared.closed.is_cancelled() {
            return SendOutcome::Closed;
        }
        if self.shared.busy.swap(true, Ordering::AcqRel) {
            self.shared.emit(Event::BusyError {
                message: "Already processing a request. Cancel it first or wait.".to_string(),
            });
            return SendOutcome::Busy;
        }
        let token = CancellationToken::new();
        *lock(&self.shared.turn_token) = Some(token.clone());
        match self.inbox.try_send(Command::Compact { token }) {
            Ok(()) => SendOutcome::Started {
                correlation_id: String::new(),
            },
            Err(_) => {
                *lock(&self.shared.turn_token) = None;
                self.shared.busy.store(false, Ordering::Release);
                SendOutcome::Closed
            }
        }
    }

    /// The title auto-titling gave this workstream, if any.
    pub fn title(&self) -> Option<String> {
        self.shared.title.title()
    }

    /// Tells this workstream's frontends something (command output, notices).
    pub fn emit_info(&self, message: impl Into<String>) {
        self.shared.emit(Event::Info {
            message: message.into(),
        });
    }

    /// Reports an error to this workstream's frontends without changing its state.
    pub fn emit_error(&self, message: impl Into<String>) {
        self.shared.emit(Event::Error {
            message: message.into(),
        });
    }

    /// Emits `busy_error` (a send refused by someone other than [`send`](Self::send): the
    /// node's queue).
    pub fn emit_busy_error(&self, message: impl Into<String>) {
        self.shared.emit(Event::BusyError {
            message: message.into(),
        });
    }

    /// Tells this workstream's frontends to open a stored preview (`open_preview`).
    pub fn emit_preview(&self, preview_id: &str, kind: &str, title: &str, url: &str) {
        self.shared.emit(Event::Preview {
            preview_id: preview_id.to_string(),
            kind: kind.to_string(),
            title: title.to_string(),
            url: url.to_string(),
        });
    }
}

async fn actor(engine: Arc<Engine>, shared: Arc<Shared>, mut inbox: mpsc::Receiver<Command>) {
    loop {
        let cmd = tokio::select! {
            biased;
            _ = shared.closed.cancelled() => break,
            cmd = inbox.recv() => cmd,
        };
        let Some(cmd) = cmd else { break };
        match cmd {
            Command::Send {
                text,
                correlation_id,
                token,
                caller,
            } => {
                // A child of the sender's span when there is one (its trace continues),
                // else of this workstream's.
                let parent = if caller.is_none() {
                    tracing::Span::current()
                } else {
                    caller
                };
                let span = tracing::info_span!(parent: &parent, "turn", ws_id = %shared.id, %correlation_id);
                drop(parent);
                Box::pin(crate::turn::run(
                    &engine,
                    &shared,
                    text,
                    correlation_id,
                    token,
                ))
                .instrument(span)
                .await;
                // The turn cleared `busy` and its token itself before `turn_complete`; a
                // send may already have started the next turn, whose flag and token these
                // are now — never clear them here.
                shared.persist_loaded_tools();
                crate::title::after_turn(&engine, &shared);
            }
            Command::Compact { token } => {
                let span = tracing::info_span!("compact");
                crate::compact::run(&engine, &shared, crate::compact::Mode::Manual, &token)
                    .instrument(span)
                    .await;
                *lock(&shared.turn_token) = None;
                shared.busy.store(false, Ordering::Release);
            }
        }
    }
}

/// Builds the display item of a call that failed before running.
pub(crate) fn error_item(call_id: &str, name: &str, error: String) -> ToolItem {
    ToolItem {
        call_id: call_id.to_string(),
        header: format!("\u{2717} {name}"),
        preview: String::new(),
        func_name: name.to_string(),
        approval_label: name.to_string(),
        needs_approval: false,
        error: Some(error),
        ..ToolItem::default()
    }
}
