//! [`WorkstreamHandle`]: what every frontend holds to drive a workstream. Commands that
//! start or stop work (`send`, `compact`, `cancel`) are messages to the workstream's actor
//! (`actor.rs`); readers get snapshots of the read model; decisions (`approve`,
//! `plan_feedback`) go through the decision registers, so the first one wins at once, and
//! reach the waiting turn as a message.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;
use turnstone_llm::{ChatMessage, Usage};
use turnstone_tools::toolset::{IntentError, ToolIntent, ToolSurface};

use super::actor::{self, Command};
use crate::engine::Engine;
use crate::event::{Envelope, Event, StatusInfo, WsState};
use crate::log::{EventLog, Subscription};
use crate::models::{MODEL_CONFIG_KEY, ModelError};
use crate::rounds::{RoundRef, Undecided};
use crate::shared::Shared;
use crate::state::POSTURE_CONFIG_KEY;
use crate::state::{
    ActiveSkill, ApproveOutcome, Decision, EventHook, Journal, ModelChoice, PlanOutcome,
    PlanVerdict, PreparedTools, RequestOverrides, SendOutcome, Verdict,
};

/// Commands a workstream's inbox holds: at most one turn or compaction is queued at a time
/// (the `busy` claim), the rest is room for cancels.
const INBOX_CAPACITY: usize = 16;

/// A cheap, clonable handle to a running workstream.
#[derive(Clone)]
pub struct WorkstreamHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) engine: Arc<Engine>,
    inbox: mpsc::Sender<Command>,
    /// Shared by every clone of this handle (and by nothing else): more than one holder
    /// means a frontend holds the workstream (a request in flight, an open event stream),
    /// so the manager does not hibernate it.
    lease: Arc<()>,
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
        after_seq: u64,
    ) -> Self {
        let shared = Arc::new(Shared::new(
            &engine,
            id.into(),
            name,
            hook,
            journal,
            history,
        ));
        shared.log.continue_after(after_seq);
        let (inbox, rx) = mpsc::channel(INBOX_CAPACITY);
        let span = tracing::info_span!("workstream", ws_id = %shared.id);
        tokio::spawn(actor::run(engine.clone(), shared.clone(), rx).instrument(span));
        Self {
            shared,
            engine,
            inbox,
            lease: Arc::new(()),
        }
    }

    /// Whether a clone of this handle exists besides `self` (someone works with it).
    pub(crate) fn is_held_elsewhere(&self) -> bool {
        Arc::strong_count(&self.lease) > 1
    }

    pub fn id(&self) -> &str {
        &self.shared.id
    }

    pub fn name(&self) -> String {
        self.shared.settings().name.clone()
    }

    pub fn set_name(&self, name: impl Into<String>) {
        let name = name.into();
        self.shared.configure(|s| s.name = name);
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
        self.shared.read(|v| v.last_active)
    }

    pub fn skip_permissions(&self) -> bool {
        self.shared.settings().skip_permissions
    }

    pub fn set_skip_permissions(&self, on: bool) {
        self.shared.configure(|s| s.skip_permissions = on);
    }

    /// The approval posture (`ask`, `auto-review`, `full`).
    pub fn posture(&self) -> turnstone_governance::Posture {
        self.shared.settings().posture
    }

    /// Sets the approval posture; it applies from the next tool batch and is handed to the
    /// journal (session setting [`POSTURE_CONFIG_KEY`]). Who may set `full` is the
    /// embedder's decision.
    pub fn set_posture(&self, posture: turnstone_governance::Posture) {
        self.shared.configure(|s| s.posture = posture);
        self.shared
            .config_changed(POSTURE_CONFIG_KEY, Some(posture.as_str()));
    }

    /// Restores a resumed session's stored posture (not journaled again). Whether a stored
    /// `full` may come back is the embedder's decision.
    pub fn restore_posture(&self, posture: turnstone_governance::Posture) {
        self.shared.configure(|s| s.posture = posture);
    }

    /// The per-tool auto-approve labels ("always" decisions).
    pub fn always_approved(&self) -> BTreeSet<String> {
        self.shared.settings().always.clone()
    }

    /// Replaces the per-tool auto-approve labels (the MQ `auto_approve_tools` of a send).
    pub fn set_always_approved(&self, labels: BTreeSet<String>) {
        self.shared.configure(|s| s.always = labels);
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
        self.shared.messages().to_vec()
    }

    /// The `status` payload a client attaching now should see.
    pub fn status(&self) -> StatusInfo {
        self.shared.status(&self.engine)
    }

    /// High-water token usage since the workstream started.
    pub fn usage(&self) -> Usage {
        self.shared.read(|v| v.usage)
    }

    /// Cumulative tokens over all turns (dashboard `tokens`).
    pub fn tokens_total(&self) -> u64 {
        self.shared.read(|v| v.tokens_total)
    }

    /// Turns started so far.
    pub fn turn_count(&self) -> u64 {
        self.shared.read(|v| v.turn_count)
    }

    /// The `approve_request` event of the oldest pending approval round (see
    /// [`WorkstreamHandle::pending_approvals`]).
    pub fn pending_approval(&self) -> Option<Arc<Envelope>> {
        self.shared.approvals.pending_events().into_iter().next()
    }

    /// The `approve_request` events of every pending approval round, oldest first, to
    /// re-send to a client that attaches while they wait (several sub-agents may each wait
    /// for a decision).
    pub fn pending_approvals(&self) -> Vec<Arc<Envelope>> {
        self.shared.approvals.pending_events()
    }

    /// The last recorded approval verdict.
    pub fn last_verdict(&self) -> Option<Verdict> {
        self.shared.approvals.last()
    }

    /// Claims the workstream for a turn or a compaction and queues `cmd` to its actor. The
    /// first claim wins at once; the others get `Busy` (and a `busy_error` event).
    fn claim(&self, cmd: Command) -> Result<(), SendOutcome> {
        if self.inbox.is_closed() || self.shared.closed.is_cancelled() {
            return Err(SendOutcome::Closed);
        }
        if self.shared.busy.swap(true, Ordering::AcqRel) {
            self.shared.emit(Event::BusyError {
                message: "Already processing a request. Cancel it first or wait.".to_string(),
            });
            return Err(SendOutcome::Busy);
        }
        self.inbox.try_send(cmd).map_err(|_| {
            self.shared.busy.store(false, Ordering::Release);
            SendOutcome::Closed
        })
    }

    /// Starts a turn with `text`. A fresh correlation id is made when none is given.
    pub fn send(&self, text: impl Into<String>, correlation_id: Option<String>) -> SendOutcome {
        let correlation_id = correlation_id
            .filter(|c| !c.is_empty())
            .unwrap_or_else(crate::new_correlation_id);
        let cmd = Command::Send {
            text: text.into(),
            correlation_id: correlation_id.clone(),
            caller: tracing::Span::current(),
        };
        match self.claim(cmd) {
            Ok(()) => SendOutcome::Started { correlation_id },
            Err(outcome) => outcome,
        }
    }

    /// Decides the oldest pending approval round (what a client that names no round, as
    /// the original's, means). See [`WorkstreamHandle::approve_round`].
    pub fn approve(
        &self,
        approved: bool,
        feedback: Option<String>,
        always: bool,
    ) -> ApproveOutcome {
        self.approve_round(RoundRef::Oldest, approved, feedback, always)
    }

    /// Decides the approval round `which` names. The first decision of a round wins; a
    /// later one gets [`ApproveOutcome::NotPending`] with the round's recorded verdict, an
    /// id naming no round [`ApproveOutcome::Unknown`]. The waiting turn gets the decision
    /// (and, for an "always" approval, adds the round's labels to the auto-approve set).
    pub fn approve_round(
        &self,
        which: RoundRef<'_>,
        approved: bool,
        feedback: Option<String>,
        always: bool,
    ) -> ApproveOutcome {
        let feedback = feedback.unwrap_or_default();
        let decided = self.shared.approvals.decide(which, |p| Verdict {
            request_id: p.request_id.clone(),
            cycle_id: p.cycle_id.clone(),
            approved,
            feedback: feedback.clone(),
            decided_by: "user",
        });
        let (pending, verdict) = match decided {
            Ok(d) => d,
            Err(Undecided::Decided(v)) => return ApproveOutcome::NotPending(v),
            Err(Undecided::Unknown) => return ApproveOutcome::Unknown,
        };
        self.shared.approval_resolved(&verdict);
        // The turn may have been cancelled meanwhile; then nobody listens, which is fine.
        let _ = pending.reply.send(Decision {
            approved,
            feedback,
            always,
        });
        ApproveOutcome::Resolved(verdict)
    }

    /// Cancels the running turn, in whatever phase it is: the actor resolves a pending
    /// approval as denied (`Cancelled by user`) and a pending plan review as rejected, emits
    /// `cancelled` and stops the turn. Returns whether a turn was running.
    pub fn cancel(&self) -> bool {
        if !self.is_busy() {
            return false;
        }
        if self.inbox.try_send(Command::Cancel).is_err() {
            tracing::warn!(ws_id = %self.shared.id, "cancel not queued: the workstream's inbox is full or closed");
        }
        true
    }

    /// Replaces the conversation (after `/clear`, a resume). An empty conversation (`/new`,
    /// `/clear`) is titled again after its first exchange; a restored one is not. Refused
    /// (`false`) while a turn is queued or running: it holds the conversation.
    pub fn replace_history(&self, messages: Vec<ChatMessage>) -> bool {
        if self.shared.busy.swap(true, Ordering::AcqRel) {
            return false;
        }
        if messages.is_empty() {
            self.shared.title.rearm();
        } else {
            self.shared.title.disarm();
        }
        self.shared.replace_messages(messages);
        self.shared.publish(|v| v.usage = Usage::default());
        self.shared.emit(Event::ClearUi);
        self.shared.busy.store(false, Ordering::Release);
        true
    }

    /// Stops the workstream: its actor cancels a running turn and ends.
    pub(crate) fn shutdown(&self) {
        self.shared.closed.cancel();
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
        self.shared.read(|v| v.activity.clone())
    }

    /// Tool results over the workstream's life.
    pub fn tool_calls_total(&self) -> u64 {
        self.shared.read(|v| v.tool_calls_total)
    }

    /// The stored tool intent.
    pub fn tool_intent(&self) -> ToolIntent {
        self.shared.settings().tool_intent.clone()
    }

    /// Replaces the tool intent after checking it (a preset it names must exist). It takes
    /// effect at the next turn boundary; a running turn keeps its tool array.
    pub fn set_tool_intent(&self, intent: ToolIntent) -> Result<(), IntentError> {
        self.engine.config().toolset.validate(&intent)?;
        self.shared.configure(|s| s.tool_intent = intent);
        Ok(())
    }

    /// Applies a client's change to the tool intent (a JSON object of intent keys; `null`
    /// clears one; see [`ToolIntent::merged`]) and returns the new intent to persist.
    pub fn update_tool_intent(
        &self,
        change: &serde_json::Value,
    ) -> Result<ToolIntent, IntentError> {
        // Merged and stored in one change, so two concurrent updates never lose one.
        self.shared.configure(|settings| {
            let next = settings.tool_intent.merged(change)?;
            self.engine.config().toolset.validate(&next)?;
            settings.tool_intent = next.clone();
            Ok(next)
        })
    }

    /// Whether the workstream is in plan mode (only read-only tools; seed 004).
    pub fn plan_mode(&self) -> bool {
        self.shared.settings().tool_intent.is_plan()
    }

    /// Enters or leaves plan mode (from the next turn boundary; a running turn keeps its
    /// tools), tells the frontends (`info`, and a `status` carrying `plan_mode`) and returns
    /// the new intent to persist. Setting the mode it is already in changes nothing and
    /// emits nothing (`None`).
    pub fn set_plan_mode(&self, on: bool) -> Option<ToolIntent> {
        let changed = self.shared.configure(|settings| {
            if settings.tool_intent.is_plan() == on {
                return None;
            }
            let next = settings.tool_intent.clone().with_plan(on);
            settings.tool_intent = next.clone();
            Some(next)
        })?;
        self.announce_plan_mode();
        Some(changed)
    }

    /// Tells the frontends the current plan mode: an `info` line and a `status` event
    /// carrying `plan_mode` (after any change of it, e.g. through the tool intent).
    pub fn announce_plan_mode(&self) {
        self.emit_info(if self.plan_mode() {
            "Plan mode on: only read-only tools (and tool_search) from the next turn. \
             Leave it with /plan off."
        } else {
            "Plan mode off: every enabled tool is available from the next turn."
        });
        self.shared.emit(Event::Status(self.status()));
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
        self.shared.configure(|s| s.tool_intent = intent);
        self.shared.loaded_tools.replace(loaded);
        self.shared.loaded_tools_persisted();
    }

    /// The tool array of the latest prepared request (`None` before the first request).
    pub fn prepared_tools(&self) -> Option<PreparedTools> {
        self.shared.read(|v| v.prepared_tools.clone())
    }

    /// The tools the next turn would get, as of now (array, catalog, dispatch).
    pub fn next_tool_surface(&self) -> ToolSurface {
        self.engine
            .tool_surface(&self.tool_intent(), &self.shared.loaded_tools)
    }

    /// The active skill, if any (content rendered).
    pub fn skill(&self) -> Option<ActiveSkill> {
        self.shared.settings().skill.clone()
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
        self.shared.configure(|settings| {
            settings.overrides = overrides;
            // `{{model}}` is the model the skill runs on (its own, when it names one).
            let model = settings.model_name(&self.engine);
            let config = self.engine.config();
            let node_id = &config.node_id;
            settings.skill = skill.map(|s| ActiveSkill {
                content: ActiveSkill::render(&s.content, &model, &self.shared.id, node_id),
                name: s.name,
            });
        });
    }

    /// The request settings of the active skill (empty without one).
    pub fn request_overrides(&self) -> RequestOverrides {
        self.shared.settings().overrides.clone()
    }

    /// Compacts the conversation (`/compact`): queued like a turn, so it never overlaps
    /// one; [`WorkstreamHandle::cancel`] stops it. Its events say how it went (see
    /// `compact.rs`). `Busy` (with a `busy_error` event) while a turn runs.
    pub fn compact(&self) -> SendOutcome {
        match self.claim(Command::Compact) {
            Ok(()) => SendOutcome::Started {
                correlation_id: String::new(),
            },
            Err(outcome) => outcome,
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

    /// Ends a turn that a previous run of the node started and never finished (it stopped
    /// mid-turn): an `error` saying so, then its `turn_complete` (state `error`, no content),
    /// recorded by the journal as the send's outcome before it is emitted — so the send ends
    /// exactly once and a later restart does not report it again.
    pub async fn end_interrupted_turn(&self, correlation_id: &str, message: &str) {
        self.shared.emit(Event::Error {
            message: message.to_string(),
        });
        let complete = Event::TurnComplete {
            correlation_id: correlation_id.to_string(),
            content: String::new(),
            state: crate::event::WsState::Error,
            receipts: Vec::new(),
        };
        self.shared.turn_ended(&complete);
        self.shared.journal_committed().await;
        self.shared.emit(complete);
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

    // Model selection (see `models.rs`).

    /// The model this workstream's next request uses and its alias (`""` when the engine's
    /// model has none).
    pub fn model(&self) -> (String, String) {
        match self.shared.settings().current_model() {
            Some(choice) => (choice.model.clone(), choice.alias.clone()),
            None => (
                self.engine.config().model.clone(),
                self.engine.config().model_alias.clone(),
            ),
        }
    }

    /// Switches this workstream to the registry alias `alias` from its next request and
    /// hands the choice to the journal (session setting `model`). Returns the model name
    /// and alias now in use.
    pub async fn select_model(&self, alias: &str) -> Result<(String, String), ModelError> {
        let choice = self.engine.resolve_model(alias).await?;
        Ok(self.use_model(choice))
    }

    /// Uses `choice` (from [`Engine::resolve_model`]; `None`: the engine's model) from the
    /// next request and hands it to the journal. Returns the model name and alias. An
    /// active skill's model gives way to this explicit choice.
    pub fn use_model(&self, choice: Option<ModelChoice>) -> (String, String) {
        let stored = choice.as_ref().map(|c| c.alias.clone());
        tracing::info!(ws_id = %self.shared.id, alias = stored.as_deref().unwrap_or("(default)"), "model selected");
        self.shared.configure(|settings| {
            settings.overrides.model = None;
            settings.model = choice;
        });
        self.shared
            .config_changed(MODEL_CONFIG_KEY, stored.as_deref());
        self.model()
    }

    /// Restores a resumed session's stored model alias (not journaled again). An alias
    /// that no longer resolves leaves the engine's model, with a warning.
    pub async fn restore_model(&self, alias: &str) {
        let choice = match self.engine.resolve_model(alias).await {
            Ok(choice) => choice,
            Err(e) => {
                tracing::warn!(ws_id = %self.shared.id, alias, error = %e, "stored model not restored; using the engine's model");
                None
            }
        };
        self.shared.configure(|s| s.model = choice);
    }

    // Plan reviews (see `review.rs`).
    /// The `plan_review` event of the pending plan review, to re-send to a client that
    /// attaches while the turn waits.
    pub fn pending_plan_review(&self) -> Option<Arc<Envelope>> {
        self.shared.plan.reviews.pending_event()
    }

    /// The last recorded plan-review verdict.
    pub fn last_plan_verdict(&self) -> Option<PlanVerdict> {
        self.shared.plan.reviews.last()
    }

    /// Answers the pending plan review (`""` accepts, `n`/`no`/`reject` rejects, anything
    /// else asks for a revised plan). The first reply wins; later ones get
    /// [`PlanOutcome::NotPending`] with the recorded verdict.
    pub fn plan_feedback(&self, feedback: &str) -> PlanOutcome {
        crate::review::answer(&self.shared, feedback)
    }
}
