//! The workstream's state types, at the bottom of the engine's modules: what a decision,
//! a verdict, a setting or the read model of a workstream *is*. No logic that needs the turn
//! loop or the actor lives here; every other module may import this one, and it imports
//! none of them (only `event` for the wire types it carries).
//!
//! Who may change what (see also `docs/architecture.md`):
//! - [`View`] (the read model, the conversation included): published by the workstream's
//!   actor task only (its turn, its compaction; `replace_history` while it holds the busy
//!   claim); every reader gets a snapshot.
//! - [`Settings`]: a client's configuration, a `watch` value changed only through
//!   `Shared::configure` (the handle's setters; the turn adding an "always" approval's
//!   labels), read by the turn as one snapshot per request boundary.
//! - [`Register`] (a pending plan review and the last verdict) and the approval rounds
//!   (`rounds.rs`: the pending approvals, several at once): the one place a decision is
//!   taken, so the first decision wins whoever makes it (a client, the actor's cancel, the
//!   turn's timeout, the judge).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;
use turnstone_llm::{ChatMessage, Resilient, Usage};
use turnstone_tools::toolset::{ToolIntent, ToolPayload};

use crate::event::{Envelope, Event, WsState};

pub use crate::decision::{
    ApproveOutcome, Decision, PlanDecision, PlanOutcome, PlanVerdict, Verdict,
};

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
    /// A turn ended with `turn_complete` (the event about to be emitted, once the journal
    /// has made it durable along with the turn). Default: ignored. The node stores it as
    /// the outcome of the send, so after a crash a started send without one is a turn that
    /// never ended, and a missed `turn_complete` can be given again.
    fn turn_ended(&self, _ws_id: &str, _turn_complete: &Event) {}
    /// Resolves once everything handed to the journal so far is durable. The turn awaits it
    /// before `turn_complete`, so a client that saw a turn complete finds it stored.
    /// Default: at once.
    fn committed(&self) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
    /// A model call of `ws_id` reported its usage (the server's counts, or the estimate of
    /// a server that gave none). Default: ignored. The node queues it as a `usage_events`
    /// row; it must not block the turn.
    fn model_called(&self, _ws_id: &str, _call: &ModelCall) {}
}

/// One model call's accounting, as [`Journal::model_called`] receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCall {
    /// The model alias the call used (the model name where it has no alias).
    pub model: String,
    /// This call's counts (not the workstream's high-water usage).
    pub usage: Usage,
    /// Tool calls the response asked for (a truncated response's discarded ones excluded).
    pub tool_calls: u64,
}

/// The session setting holding the deferred tools `tool_search` loaded (a JSON list).
pub const TOOL_LOADED_CONFIG_KEY: &str = "tool_loaded";

/// The session setting holding a workstream's approval posture (`ask`, `auto-review`,
/// `full`).
pub const POSTURE_CONFIG_KEY: &str = "posture";

/// Called with every event of every workstream right after it is logged (a node-wide
/// stream, metrics, persistence). Must not block.
pub type EventHook = Arc<dyn Fn(&Arc<Envelope>) + Send + Sync>;

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
    /// The content; [`crate::WorkstreamHandle::set_skill`] renders its `{{model}}`, `{{ws_id}}`
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
/// active skill — see [`crate::WorkstreamHandle::set_skill_with`]). Each `None` keeps the engine's
/// value; they apply from the next model request on, like the skill's content.
#[derive(Debug, Clone, Default)]
pub struct RequestOverrides {
    /// Another registry model (from [`crate::Engine::resolve_model`]); wins over a `/model` choice
    /// made before it, and a later `/model` choice replaces it.
    pub model: Option<ModelChoice>,
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

/// Result of [`crate::WorkstreamHandle::send`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// The turn was queued; its events carry this correlation id in `turn_complete`.
    Started { correlation_id: String },
    /// A turn is already running; a `busy_error` event was emitted.
    Busy,
    /// The workstream is closed.
    Closed,
}

/// A workstream's model override: a registry alias and what it resolved to.
#[derive(Clone)]
pub struct ModelChoice {
    /// The registry alias.
    pub alias: String,
    /// The model name sent to the backend.
    pub model: String,
    /// The model's context window in tokens.
    pub context_window: u32,
    /// The model accepts images (its registry entry's `vision`).
    pub vision: bool,
    pub(crate) provider: Resilient,
}

impl std::fmt::Debug for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelChoice")
            .field("alias", &self.alias)
            .field("model", &self.model)
            .field("context_window", &self.context_window)
            .field("vision", &self.vision)
            .finish()
    }
}

/// How a turn ended (the workstream's actor ignores it; a sub-agent reports it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnEnd {
    Done,
    Cancelled,
    Failed(String),
    /// Stopped after this many model requests (`max_turn_requests`).
    Limit(u32),
}

/// Called with `(ws_id, title)` when a workstream got its title. Must not block.
pub type TitleHook = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// A workstream's titling state.
#[derive(Default)]
pub(crate) struct TitleState {
    /// Titling is wanted (a new workstream, or after `/new`/`/clear`) and not done yet.
    pub(crate) pending: AtomicBool,
    /// A title request is in flight.
    pub(crate) running: AtomicBool,
    /// Bumped when the conversation starts over: a late title of the old one is dropped.
    pub(crate) generation: AtomicU64,
    pub(crate) title: Mutex<Option<String>>,
    pub(crate) hook: Mutex<Option<TitleHook>>,
}

impl TitleState {
    /// Sets up a workstream made by the manager: titling wanted when it starts empty.
    pub fn init(&self, hook: Option<TitleHook>, fresh: bool) {
        *self.hook.lock() = hook;
        self.pending.store(fresh, Ordering::Release);
    }

    /// The conversation starts over (`/new`, `/clear`): title it again.
    pub fn rearm(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.pending.store(true, Ordering::Release);
    }

    /// The conversation was replaced by a saved one (`/resume`): it has its title.
    pub fn disarm(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.pending.store(false, Ordering::Release);
    }

    pub fn title(&self) -> Option<String> {
        self.title.lock().clone()
    }
}

/// A workstream's configuration as its clients set it (the handle's setters); the turn
/// reads it at its boundaries: the tool intent at the start of a turn, the skill, model and
/// request settings at every model request, the approval settings at every tool batch —
/// each time one snapshot, so one request never mixes two configurations.
///
/// Why a published value and not actor messages: the setters answer at once (the merged
/// intent, the model now in use, a getter right after a setter sees the change), sub-agents
/// run turns with no actor, and the actor would apply a message only between two steps of
/// a turn anyway — which is exactly when the turn takes its next snapshot.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub name: String,
    /// Blanket auto-approve.
    pub skip_permissions: bool,
    /// Per-tool auto-approve labels ("always" decisions).
    pub always: BTreeSet<String>,
    /// How gated tool calls are decided (`ask`, `auto-review`, `full`; see `gate.rs`).
    pub posture: turnstone_governance::Posture,
    /// Tool toggles (intent, never a list of all tools); read at each turn boundary.
    pub tool_intent: ToolIntent,
    /// The active skill (content rendered); read at every model request.
    pub skill: Option<ActiveSkill>,
    /// The model override (`/model`); `None`: the engine's model.
    pub model: Option<ModelChoice>,
    /// The active skill's request settings (cleared with the skill).
    pub overrides: RequestOverrides,
}

impl Settings {
    /// The model choice in force: the active skill's, else the workstream's `/model` choice.
    pub fn current_model(&self) -> Option<&ModelChoice> {
        self.overrides.model.as_ref().or(self.model.as_ref())
    }
}

/// The read model of a workstream: what dashboards, lists and attaching clients read.
/// Published (a `tokio::sync::watch` value) by the workstream's actor task — the one writer
/// of turn state — before the event that announces a change, so a client that saw an event
/// reads a view at least as new.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub state: WsState,
    /// When the workstream last changed state.
    pub last_active: Instant,
    /// High-water token usage.
    pub usage: Usage,
    /// Cumulative tokens over all turns (dashboard `tokens`).
    pub tokens_total: u64,
    /// Turns started so far.
    pub turn_count: u64,
    pub tool_calls_this_turn: u64,
    /// Tool results emitted over the workstream's life.
    pub tool_calls_total: u64,
    /// The last activity line and its kind (`thinking`, `tool`, `approval`, or empty).
    pub activity: (String, String),
    /// The tool array of the latest prepared request.
    pub prepared_tools: Option<PreparedTools>,
    /// The conversation (without the system prompt). Written only by the holder of the busy
    /// claim (the turn, the compaction, `replace_history`); a reader's snapshot is an `Arc`
    /// the writer never changes under it (`Arc::make_mut` copies while one is held).
    pub messages: Arc<Vec<ChatMessage>>,
}

impl Default for View {
    fn default() -> Self {
        Self {
            state: WsState::Idle,
            last_active: Instant::now(),
            usage: Usage::default(),
            tokens_total: 0,
            turn_count: 0,
            tool_calls_this_turn: 0,
            tool_calls_total: 0,
            activity: (String::new(), String::new()),
            prepared_tools: None,
            messages: Arc::default(),
        }
    }
}

/// A request waiting for one decision (a plan review) and the last verdict:
/// taking the pending request and recording its verdict happen under one lock, so the first
/// decision wins and a later one is told the recorded verdict.
pub(crate) struct Register<P, V> {
    inner: Mutex<(Option<P>, Option<V>)>,
}

impl<P, V> Default for Register<P, V> {
    fn default() -> Self {
        Self {
            inner: Mutex::new((None, None)),
        }
    }
}

/// A request waiting in a [`Register`]: its id, its event (re-sent to clients that attach)
/// and where the verdict goes.
pub(crate) struct Pending<R> {
    pub request_id: String,
    pub event: Arc<Envelope>,
    pub reply: oneshot::Sender<R>,
}

impl<R, V: Clone> Register<Pending<R>, V> {
    /// Makes `make`'s request the pending one; `make` runs under the register's lock (it
    /// emits the request's event, so no decision can see the event before the request).
    pub fn open(&self, make: impl FnOnce() -> Pending<R>) {
        let mut inner = self.inner.lock();
        inner.0 = Some(make());
    }

    /// Decides the pending request (only `request_id`'s when given): `verdict` builds the
    /// verdict, which is recorded; returns the request and its verdict, or `None` when
    /// nothing (or another request) was pending.
    pub fn decide(
        &self,
        request_id: Option<&str>,
        verdict: impl FnOnce(&Pending<R>) -> V,
    ) -> Option<(Pending<R>, V)> {
        let mut inner = self.inner.lock();
        match &inner.0 {
            Some(p) if request_id.is_none_or(|id| id == p.request_id) => {}
            _ => return None,
        }
        let pending = inner.0.take()?;
        let verdict = verdict(&pending);
        inner.1 = Some(verdict.clone());
        Some((pending, verdict))
    }

    /// The pending request's event.
    pub fn pending_event(&self) -> Option<Arc<Envelope>> {
        self.inner.lock().0.as_ref().map(|p| p.event.clone())
    }

    /// The last recorded verdict.
    pub fn last(&self) -> Option<V> {
        self.inner.lock().1.clone()
    }
}

pub(crate) fn human_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    match secs {
        3600 => "1 hour".to_string(),
        s if s % 3600 == 0 && s > 0 => format!("{} hours", s / 3600),
        s if s % 60 == 0 && s > 0 => format!("{} minutes", s / 60),
        _ => format!("{:.1} s", d.as_secs_f64()),
    }
}

/// A workstream's plan-review state: the pending review and the last verdict, and the gate
/// that lets one review run at a time when a batch holds several `plan_agent` calls.
#[derive(Default)]
pub(crate) struct PlanState {
    pub reviews: Register<Pending<PlanVerdict>, PlanVerdict>,
    pub gate: tokio::sync::Mutex<()>,
}
