//! The turn loop: build messages → stream → on tool calls **prepare** → **approve** →
//! **execute** → **fold** all results at once → loop, until a reply without tool calls.
//!
//! Cancellation can arrive in any phase. Whatever phase it interrupts, the conversation is
//! left as a provider accepts it: partial text is kept as an assistant message, an assistant
//! message with tool calls is always followed by one result per call (real results of calls
//! that finished; for the others, the reason and the call's effect receipt — `none`,
//! `unknown` or `partial`, see `receipt.rs` — which `turn_complete.receipts` carries too).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use turnstone_llm::{
    ChatMessage, ChatRequest, FinishReason, LlmError, Messages, Resilient, StreamEvent, ToolCall,
    ToolSpec, Usage,
};
use turnstone_tools::toolset::{ToolPayload, ToolSurface};
use turnstone_tools::{OutputSink, Prepared, Tool, ToolOutput, parse_tool_arguments};

use crate::engine::Engine;
use crate::event::{Event, ToolItem, WsState};
use crate::gate::{self, GateCall, GateOutcome, GateSettings};
use crate::judge::{JudgeItem, JudgeJob};
use crate::receipt::{CANCELLED, Outcome};
use crate::rounds::{PendingRound, RoundRef};
use crate::shared::Shared;
use crate::state::{Decision, ModelCall, PreparedTools, TurnEnd, Verdict, human_duration};

/// Cap on the accumulated visible text of one turn (`turn_complete.content`).
const TURN_CONTENT_CAP: usize = 256 * 1024;

struct Turn<'a> {
    engine: &'a Engine,
    shared: &'a Arc<Shared>,
    token: CancellationToken,
    correlation_id: String,
    content: String,
    /// This turn's tools, frozen at its start (seed 002 §7.4): `tool_search` inside the turn
    /// marks tools loaded, the array changes at the next turn.
    tools: TurnTools,
    /// The effect receipts of this turn's interrupted batches (`turn_complete.receipts`).
    receipts: Vec<turnstone_proto::receipt::Receipt>,
}

/// The frozen tool view of one turn and what every request of the turn sends.
struct TurnTools {
    surface: ToolSurface,
    specs: Arc<[ToolSpec]>,
    payload: Arc<ToolPayload>,
    /// The embedder's system-prompt sections, read at the turn's start.
    sections: Option<String>,
    turn: u64,
    step: u32,
}

/// What a turn's surface sends and reports (its specs and payload), with the surface they
/// were built from. Building them serialises, hashes and copies every tool's schema — most
/// of a zero-latency turn's CPU before they were cached (`docs/benchmarks.md`).
struct FrozenTools {
    surface: ToolSurface,
    specs: Arc<[ToolSpec]>,
    payload: Arc<ToolPayload>,
}

/// How many distinct surfaces [`FrozenToolsCache`] keeps.
const FROZEN_TOOLS_KEPT: usize = 8;

/// The engine's last few distinct [`FrozenTools`], most recently used first: a turn whose
/// surface offers the same tools as one of them (the usual case: workstreams share tool
/// intents, and the registry rarely changes) reuses it, so its specs and payload exist
/// once per engine, not once per workstream or per turn.
#[derive(Default)]
pub(crate) struct FrozenToolsCache(parking_lot::Mutex<Vec<Arc<FrozenTools>>>);

impl FrozenToolsCache {
    fn get(&self, surface: &ToolSurface) -> Arc<FrozenTools> {
        {
            let mut kept = self.0.lock();
            if let Some(i) = kept
                .iter()
                .position(|f| f.surface.offers_same_tools(surface))
            {
                let hit = kept.remove(i);
                kept.insert(0, Arc::clone(&hit));
                return hit;
            }
        }
        // Built outside the lock: other workstreams' turns do not wait for it.
        let built = Arc::new(FrozenTools::of(surface));
        let mut kept = self.0.lock();
        kept.insert(0, Arc::clone(&built));
        kept.truncate(FROZEN_TOOLS_KEPT);
        built
    }
}

impl FrozenTools {
    fn of(surface: &ToolSurface) -> Self {
        Self {
            surface: surface.clone(),
            specs: surface
                .specs()
                .into_iter()
                .map(crate::engine::to_tool_spec)
                .collect(),
            payload: Arc::new(surface.payload()),
        }
    }
}

impl TurnTools {
    fn freeze(engine: &Engine, shared: &Shared) -> Self {
        let surface = engine.tool_surface(&shared.settings().tool_intent, &shared.loaded_tools);
        for warning in surface.warnings() {
            tracing::warn!(%warning, "tool intent");
        }
        let frozen = engine.frozen_tools.get(&surface);
        let (specs, payload) = (Arc::clone(&frozen.specs), Arc::clone(&frozen.payload));
        Self {
            surface,
            specs,
            payload,
            sections: engine.system_sections(),
            turn: shared.read(|v| v.turn_count),
            step: 0,
        }
    }
}

/// How a phase ended when it did not simply succeed.
enum Stop {
    Cancelled,
    Failed(String),
    /// `max_turn_requests` model requests were made and the model still wanted tools.
    Limit(u32),
}

pub(crate) async fn run(
    engine: &Engine,
    shared: &Arc<Shared>,
    text: String,
    correlation_id: String,
    token: CancellationToken,
) -> TurnEnd {
    let mut turn = Turn {
        engine,
        shared,
        token,
        correlation_id,
        content: String::new(),
        tools: TurnTools::freeze(engine, shared),
        receipts: Vec::new(),
    };
    shared.tool_ctx.begin_turn();
    shared.push_turn_message(ChatMessage::user(text), &turn.correlation_id);
    match turn.run_loop().await {
        Ok(()) => {
            turn.emit_status();
            crate::compact::after_turn(engine, shared, &turn.token).await;
            turn.finish(WsState::Idle).await;
            TurnEnd::Done
        }
        Err(Stop::Cancelled) => {
            shared.emit(Event::info("[Generation cancelled]"));
            turn.finish(WsState::Idle).await;
            TurnEnd::Cancelled
        }
        Err(Stop::Failed(message)) => {
            shared.emit(Event::error(format!("Error: {message}")));
            shared.emit(Event::StreamEnd);
            turn.finish(WsState::Error).await;
            TurnEnd::Failed(message)
        }
        Err(Stop::Limit(requests)) => {
            shared.emit(Event::info(format!(
                "[Stopped: this turn reached its limit of {requests} model requests]"
            )));
            turn.emit_status();
            turn.finish(WsState::Idle).await;
            TurnEnd::Limit(requests)
        }
    }
}

impl Turn<'_> {
    fn emit(&self, event: Event) {
        self.shared.emit(event);
    }

    fn activity(&self, activity: impl Into<String>, state: &str) {
        self.emit(Event::Activity {
            activity: activity.into(),
            activity_state: state.to_string(),
        });
    }

    /// Ends the turn: once the journal has made the turn's records durable, the workstream
    /// accepts a new send, then the final state and `turn_complete` are emitted (in that
    /// order), so a frontend that reacts to either can send right away — and finds the turn
    /// stored.
    async fn finish(&self, state: WsState) {
        let complete = Event::TurnComplete {
            correlation_id: self.correlation_id.clone(),
            content: self.content.clone(),
            state,
            receipts: self.receipts.clone(),
        };
        self.shared.turn_ended(&complete);
        self.shared.journal_committed().await;
        self.shared.busy.store(false, Ordering::Release);
        self.shared.set_state(state);
        self.emit(complete);
    }

    fn add_content(&mut self, text: &str) {
        push_capped(&mut self.content, text, TURN_CONTENT_CAP);
    }

    async fn run_loop(&mut self) -> Result<(), Stop> {
        let limit = self.engine.config().max_turn_requests;
        loop {
            let calls = self.request().await?;
            if calls.is_empty() {
                return Ok(());
            }
            self.tool_round(calls).await?;
            // The results are folded: the conversation is complete if the turn stops here.
            if let Some(limit) = limit.filter(|l| self.tools.step >= *l) {
                return Err(Stop::Limit(limit));
            }
        }
    }

    /// One LLM request; its assistant message is appended before this returns the tool
    /// calls to run.
    async fn request(&mut self) -> Result<Vec<ToolCall>, Stop> {
        self.shared.set_state(WsState::Thinking);
        self.emit(Event::ThinkingStart);
        self.activity("Thinking\u{2026}", "thinking");
        let (request, provider, model) = self.build_request();
        let shared = self.shared;
        let mut on_retry = |notice: &turnstone_llm::RetryNotice| {
            shared.emit(Event::info(format!(
                "[Retrying in {}s: {}]",
                notice.delay.as_secs_f64().round() as u64,
                notice.error_class
            )));
        };
        let token = self.token.clone();
        let started = tokio::select! {
            biased;
            _ = token.cancelled() => None,
            r = provider.stream(&request, &mut on_retry) => Some(r),
        };
        // Sent (retries happen before the stream starts): let go of the history it shares, so
        // this turn appends to the history in place rather than copying it.
        let max_tokens = request.max_tokens;
        drop(request);
        let mut stream = match started {
            None => {
                self.end_stream();
                return Err(Stop::Cancelled);
            }
            Some(Err(e)) => return Err(Stop::Failed(e.to_string())),
            // Deltas the model sent together go out as one event (never waited for).
            Some(Ok(s)) => turnstone_llm::join_ready_deltas(s),
        };

        let mut text = String::new();
        let mut calls = Vec::new();
        let mut finish = None;
        let mut provider_data = None;
        let mut first_delta = true;
        let mut failure: Option<LlmError> = None;
        let mut usage = None;
        loop {
            let item = tokio::select! {
                biased;
                _ = token.cancelled() => {
                    self.keep_partial(&text);
                    self.end_stream();
                    return Err(Stop::Cancelled);
                }
                item = stream.next() => item,
            };
            let Some(item) = item else { break };
            match item {
                Ok(StreamEvent::Content(t)) => {
                    if std::mem::take(&mut first_delta) {
                        self.emit(Event::ThinkingStop);
                    }
                    text.push_str(&t);
                    self.add_content(&t);
                    self.emit(Event::Content { text: t });
                }
                Ok(StreamEvent::Reasoning(t)) => {
                    if std::mem::take(&mut first_delta) {
                        self.emit(Event::ThinkingStop);
                    }
                    self.emit(Event::Reasoning { text: t });
                }
                Ok(StreamEvent::ToolCalls(c)) => calls = c,
                Ok(StreamEvent::ProviderData(d)) => provider_data = Some(d),
                Ok(StreamEvent::Notice(n)) => self.emit(Event::Info {
                    message: n.trim_end().to_string(),
                }),
                Ok(StreamEvent::Usage(u)) => {
                    self.record_usage(u);
                    usage = Some(u);
                }
                Ok(StreamEvent::Finish(f)) => finish = Some(f),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        self.end_stream();
        if let Some(e) = failure {
            self.keep_partial(&text);
            return Err(Stop::Failed(e.to_string()));
        }
        if finish.is_none() {
            self.keep_partial(&text);
            return Err(Stop::Failed(
                "stream ended before the response finished".to_string(),
            ));
        }
        match finish {
            Some(FinishReason::Length) => {
                let limit = max_tokens
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| "max_tokens".to_string());
                self.emit(Event::error(format!(
                    "Warning: response truncated (hit {limit} token limit). Use --max-tokens to increase, or /compact to free context."
                )));
                if !calls.is_empty() {
                    self.emit(Event::error(
                        "Discarding partial tool calls from truncated response.",
                    ));
                    calls.clear();
                }
            }
            Some(FinishReason::ContentFilter) => {
                self.emit(Event::error("Warning: response blocked by content filter."));
            }
            _ => {}
        }
        if let Some(usage) = usage {
            self.shared.model_called(&ModelCall {
                model,
                usage,
                tool_calls: calls.len() as u64,
            });
        }
        let content = (!text.is_empty()).then_some(text);
        let mut message = ChatMessage::assistant(content, calls.clone());
        message.provider_data = provider_data;
        self.shared.push_message(message);
        Ok(calls)
    }

    fn end_stream(&self) {
        self.emit(Event::StreamEnd);
        self.activity("", "");
        self.emit(Event::ThinkingStop);
    }

    fn keep_partial(&self, text: &str) {
        if !text.is_empty() {
            self.shared
                .push_message(ChatMessage::assistant(Some(text.to_string()), Vec::new()));
        }
    }

    /// The next request, the client it goes to and the model name its usage is accounted
    /// under, from one snapshot of the settings (taken now: a skill or model chosen mid-turn
    /// applies from this request on).
    fn build_request(&mut self) -> (ChatRequest, Resilient, String) {
        let config = self.engine.config();
        let settings = self.shared.settings();
        let mut head = Vec::new();
        // The engine's prompt, the active skill, then the turn's frozen tool catalog.
        let base = settings.system_base(config.system_prompt.as_deref());
        let base = match (base, self.tools.sections.as_deref()) {
            (b, None) => b,
            (None, Some(s)) => Some(s.to_string()),
            (Some(b), Some(s)) => Some(format!("{b}\n\n{s}")),
        };
        if let Some(system) = self.tools.surface.system_prompt(base.as_deref()) {
            head.push(ChatMessage::system(system));
        }
        // The history is shared with the request, not copied, unless images must be
        // described in text for a model without vision.
        let history = self.shared.messages();
        let messages = if !settings.vision(self.engine) && crate::vision::any_images(&history) {
            let mut messages = head;
            messages.extend(history.iter().cloned());
            crate::vision::strip_images(&mut messages);
            messages.into()
        } else {
            Messages::new(head, history)
        };
        self.tools.step += 1;
        let prepared = PreparedTools {
            turn: self.tools.turn,
            step: self.tools.step,
            payload: self.tools.payload.clone(),
        };
        self.shared.publish(|v| v.prepared_tools = Some(prepared));
        let request = ChatRequest {
            model: settings.model_name(self.engine),
            messages,
            tools: Arc::clone(&self.tools.specs),
            // The active skill's settings win over the engine's.
            temperature: settings.temperature(self.engine),
            max_tokens: settings.max_tokens(self.engine),
            reasoning_effort: Some(settings.reasoning_effort(self.engine)),
        };
        (
            request,
            settings.provider(self.engine),
            settings.model_label(self.engine),
        )
    }

    fn record_usage(&self, u: Usage) {
        self.shared.publish(|v| {
            let usage = &mut v.usage;
            usage.prompt_tokens = usage.prompt_tokens.max(u.prompt_tokens);
            usage.completion_tokens = usage.completion_tokens.max(u.completion_tokens);
            usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
            usage.cache_creation_tokens = usage.cache_creation_tokens.max(u.cache_creation_tokens);
            usage.cache_read_tokens = usage.cache_read_tokens.max(u.cache_read_tokens);
            // The latest response says whether the counts are the server's or an estimate.
            usage.estimated = u.estimated;
        });
    }

    fn emit_status(&self) {
        let status = self.shared.status(self.engine);
        self.shared
            .publish(|v| v.tokens_total += status.total_tokens);
        self.emit(Event::Status(status));
    }

    /// Prepare, approve, execute and fold one batch of tool calls.
    async fn tool_round(&mut self, calls: Vec<ToolCall>) -> Result<(), Stop> {
        self.shared.set_state(WsState::Running);
        self.shared
            .publish(|v| v.tool_calls_this_turn += calls.len() as u64);
        let mut prepared: Vec<Prep> = calls.iter().map(|c| self.prepare(c)).collect();
        let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        self.shared.batch_opened(&ids);
        self.shared.set_state(WsState::Attention);

        // One snapshot of the approval settings and policies for the batch: a change
        // applies from the next batch.
        let mut items: Vec<ToolItem> = prepared.iter().map(|p| p.item.clone()).collect();
        let gate = {
            // A sub-agent asking through its parent workstream is under the parent's
            // approval settings ("always" labels, blanket auto-approve, posture).
            let host = self.shared.approval_host().settings();
            let own = self.shared.settings();
            let policies = self.engine.policies();
            let gate_calls: Vec<GateCall<'_>> = prepared
                .iter()
                .map(|p| GateCall {
                    arguments: &p.call.arguments,
                    auto_approve_meta: p.auto_approve_meta(),
                })
                .collect();
            let config = self.engine.config();
            gate::decide(
                &mut items,
                &gate_calls,
                &GateSettings {
                    policies: &policies,
                    always: &host.always,
                    skip_permissions: host.skip_permissions || own.skip_permissions,
                    posture: host.posture,
                    unattended: config.unattended,
                    cwd: &self.shared.tool_ctx.cwd,
                    judge: &config.judge,
                },
            )
        };
        // A policy's denial is the item's error from here on (shown, folded as its result).
        for (p, item) in prepared.iter_mut().zip(&items) {
            p.item.error.clone_from(&item.error);
        }

        let decision = match &gate.outcome {
            GateOutcome::Run => {
                if let Some(first) = prepared.iter().find(|p| p.item.error.is_none()) {
                    self.activity(
                        format!(
                            "\u{2699} {}: {}",
                            first.item.func_name,
                            clip(&first.item.preview, 80)
                        ),
                        "tool",
                    );
                }
                self.emit(Event::ToolInfo { items });
                Decision {
                    approved: true,
                    feedback: String::new(),
                    always: false,
                }
            }
            GateOutcome::Deny(feedback) => {
                // Nobody is asked (policies, or an unattended sub-agent): the gated calls
                // do not run, the rest does.
                self.emit(Event::ToolInfo { items });
                Decision {
                    approved: false,
                    feedback: feedback.clone(),
                    always: false,
                }
            }
            GateOutcome::Ask => {
                let labels = gate
                    .pending
                    .iter()
                    .map(|&i| prepared[i].item.approval_label.clone())
                    .collect();
                let first = &prepared[gate.pending[0]].item;
                let waiting = Event::Activity {
                    activity: format!(
                        "\u{23f3} Awaiting approval: {} \u{2014} {}",
                        first.func_name,
                        clip(&first.preview, 60)
                    ),
                    activity_state: "approval".to_string(),
                };
                // A sub-agent's wait shows on its parent workstream, where it is decided.
                self.shared.approval_host().emit(waiting);
                let judge = self.judge_job(&prepared, &items, &gate.pending);
                match self.wait_for_decision(items, labels, judge).await {
                    Ok(d) => d,
                    Err(Stop::Cancelled) => {
                        self.shared.set_state(WsState::Running);
                        self.fold(
                            &prepared,
                            HashMap::new(),
                            "Denied by user: Cancelled by user",
                        );
                        return Err(Stop::Cancelled);
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        self.shared.set_state(WsState::Running);
        for p in prepared.iter() {
            if let Some(error) = &p.item.error {
                self.emit(Event::ToolResult {
                    call_id: p.call.id.clone(),
                    name: p.call.name.clone(),
                    output: error.clone(),
                    is_error: true,
                });
            }
        }

        if !decision.approved {
            let denial = match &gate.outcome {
                GateOutcome::Deny(feedback) => feedback.clone(),
                _ if decision.feedback.is_empty() => "Denied by user".to_string(),
                _ => format!("Denied by user: {}", decision.feedback),
            };
            // Calls the decision was not about still run; the denial covers the rest.
            let runnable: Vec<&Prep> = prepared
                .iter()
                .enumerate()
                .filter(|(i, p)| p.item.error.is_none() && !gate.pending.contains(i))
                .map(|(_, p)| p)
                .collect();
            let results = self.execute(&runnable).await;
            let cancelled = self.token.is_cancelled();
            self.fold(&prepared, results, &denial);
            return if cancelled {
                Err(Stop::Cancelled)
            } else {
                Ok(())
            };
        }

        let runnable: Vec<&Prep> = prepared.iter().filter(|p| p.item.error.is_none()).collect();
        let results = self.execute(&runnable).await;
        let cancelled = self.token.is_cancelled();
        self.fold(&prepared, results, CANCELLED);
        if cancelled {
            return Err(Stop::Cancelled);
        }
        if !decision.feedback.is_empty() {
            self.shared
                .push_message(ChatMessage::user(decision.feedback));
        }
        Ok(())
    }

    fn prepare(&self, call: &ToolCall) -> Prep {
        let fail = |error: String, emit_as: String| {
            self.emit(Event::error(emit_as));
            Prep {
                call: call.clone(),
                item: error_item(&call.id, &call.name, error),
                prepared: None,
                tool: None,
            }
        };
        // Dispatch resolves against everything available this turn (deferred tools too, and
        // replay-only aliases), not only the array; an unknown name is never guessed at.
        let tool = match self.tools.surface.resolve(&call.name) {
            Ok(tool) => tool,
            Err(e) => {
                let message = e.to_string();
                return fail(message.clone(), message);
            }
        };
        let args: Value = match parse_tool_arguments(tool.definition(), &call.arguments) {
            Ok(v) => v,
            Err(e) => {
                let message = e.to_string();
                return fail(
                    message.clone(),
                    format!("Malformed tool call from model: {message}"),
                );
            }
        };
        match tool.prepare(args, &self.shared.tool_ctx) {
            Ok(prepared) => Prep {
                call: call.clone(),
                item: ToolItem {
                    call_id: call.id.clone(),
                    header: prepared.header.clone(),
                    preview: prepared.preview.clone(),
                    func_name: call.name.clone(),
                    approval_label: prepared.approval_label.clone(),
                    needs_approval: prepared.needs_approval,
                    error: None,
                    ..ToolItem::default()
                },
                prepared: Some(prepared),
                tool: Some(tool),
            },
            Err(message) => {
                // Tools word their own errors; add the prefix only where they did not.
                let message = if message.starts_with("Error:") {
                    message
                } else {
                    format!("Error: {message}")
                };
                fail(
                    message.clone(),
                    format!("Invalid arguments for {}: {message}", call.name),
                )
            }
        }
    }

    /// The LLM judge's job for the items at `pending` (their heuristic verdicts are on
    /// `items`), from one snapshot of the judge settings, the workstream's client, model and
    /// posture, and its conversation; `None` when the LLM tier is off (or nobody is asked).
    fn judge_job(
        &self,
        prepared: &[Prep],
        items: &[ToolItem],
        pending: &[usize],
    ) -> Option<JudgeJob> {
        let config = self.engine.config();
        let judge = &config.judge;
        let llm = judge
            .llm
            .as_ref()
            .filter(|_| judge.enabled && !config.unattended)?;
        let settings = self.shared.settings();
        let model = if llm.model.trim().is_empty() {
            settings.model_name(self.engine)
        } else {
            llm.model.clone()
        };
        let budget =
            crate::judge::budget_chars(settings.context_window(self.engine), llm.max_context_ratio);
        Some(JudgeJob {
            request_id: String::new(),
            items: pending
                .iter()
                .map(|&i| JudgeItem {
                    call_id: prepared[i].call.id.clone(),
                    func_name: prepared[i].call.name.clone(),
                    arguments: prepared[i].call.arguments.clone(),
                    heuristic: items[i].verdict.clone(),
                })
                .collect(),
            client: llm
                .client
                .clone()
                .unwrap_or_else(|| settings.provider(self.engine)),
            model,
            timeout: llm.timeout,
            threshold: judge.confidence_threshold,
            auto_review: self.shared.approval_host().settings().posture
                == turnstone_governance::Posture::AutoReview,
            context: crate::judge::context_excerpt(&self.shared.messages(), budget),
            cwd: self.shared.tool_ctx.cwd.display().to_string(),
            stop: CancellationToken::new(),
        })
    }

    /// Asks for a decision on the batch and waits for it (a client's, the judge's under
    /// `auto-review`, the actor's cancel, or the approval timeout, whichever comes first).
    /// The batch is one approval round (`rounds.rs`) of the approval host — this
    /// workstream, or for a sub-agent asking through it its parent workstream, where the
    /// `approve_request` is shown (its items' `call_id`s qualified with the sub-agent's id,
    /// so rounds of parallel sub-agents never share one) and the workstream waits in
    /// `attention` while any round is pending. With a `judge` job the request says
    /// `judge_pending: true` and the judge runs until the wait ends. An "always" approval
    /// adds `labels` to the host's auto-approve set.
    async fn wait_for_decision(
        &self,
        mut items: Vec<ToolItem>,
        labels: Vec<String>,
        mut judge: Option<JudgeJob>,
    ) -> Result<Decision, Stop> {
        let host = self.shared.approval_host();
        let sub_agent = self.shared.host.is_some();
        if sub_agent {
            let qualifier = sub_agent_qualifier(&self.shared.id, &host.id);
            let qualify = |id: &mut String| *id = format!("{qualifier}/{id}");
            for item in &mut items {
                qualify(&mut item.call_id);
                if let Some(v) = item.verdict.as_mut() {
                    qualify(&mut v.call_id);
                }
            }
            for item in judge.iter_mut().flat_map(|j| j.items.iter_mut()) {
                qualify(&mut item.call_id);
            }
            host.set_state(WsState::Attention);
        }
        let request_id = crate::new_request_id();
        let cycle_id = crate::new_cycle_id();
        let call_ids = items.iter().map(|i| i.call_id.clone()).collect();
        let (reply, mut rx) = oneshot::channel();
        host.approvals.open(|| PendingRound {
            event: host.emit(Event::ApproveRequest {
                request_id: request_id.clone(),
                items,
                judge_pending: judge.is_some(),
                cycle_id: cycle_id.clone(),
            }),
            request_id: request_id.clone(),
            cycle_id: cycle_id.clone(),
            call_ids,
            reply,
        });
        // However the wait ends, the round is closed (a dropped wait withdraws it) and the
        // judge stops (a human decision always wins).
        let _withdraw = Withdraw {
            host,
            cycle_id: &cycle_id,
            sub_agent,
        };
        let _stop_judge = judge.map(|mut job| {
            job.request_id.clone_from(&request_id);
            let guard = job.stop.clone().drop_guard();
            crate::judge::spawn(host.clone(), job);
            guard
        });
        let timeout = self.engine.config().approval_timeout;
        let sleep = tokio::time::sleep(timeout);
        tokio::pin!(sleep);
        let decision = tokio::select! {
            biased;
            _ = self.token.cancelled() => Err(Stop::Cancelled),
            d = &mut rx => d.map_err(|_| Stop::Cancelled),
            _ = &mut sleep => {
                let feedback = format!("Approval timed out after {}", human_duration(timeout));
                let timed_out = host.approvals.decide(RoundRef::Cycle(&cycle_id), |p| Verdict {
                    request_id: p.request_id.clone(),
                    cycle_id: p.cycle_id.clone(),
                    approved: false,
                    feedback: feedback.clone(),
                    decided_by: "timeout",
                });
                match timed_out {
                    // A decision raced the timeout and won: it is in the channel.
                    Err(_) => tokio::select! {
                        biased;
                        _ = self.token.cancelled() => Err(Stop::Cancelled),
                        d = rx => d.map_err(|_| Stop::Cancelled),
                    },
                    Ok((_, verdict)) => {
                        host.approval_resolved(&verdict);
                        Ok(Decision { approved: false, feedback, always: false })
                    }
                }
            }
        }?;
        if decision.always && decision.approved {
            host.configure(|s| s.always.extend(labels));
        }
        Ok(decision)
    }

    /// Runs `runnable` (at most `max_parallel_tools` at once) until all finish or the turn
    /// is cancelled; returns the results of the calls that finished.
    async fn execute(&self, runnable: &[&Prep]) -> HashMap<String, ToolOutput> {
        let mut results = HashMap::new();
        if runnable.is_empty() {
            return results;
        }
        let ctx = &self.shared.tool_ctx;
        let parallel = self.engine.config().max_parallel_tools.max(1);
        let mut calls: Vec<futures::future::BoxFuture<'_, (&ToolCall, ToolOutput)>> = Vec::new();
        for p in runnable {
            if let (Some(tool), Some(prepared)) = (p.tool.clone(), p.prepared.as_ref()) {
                // A sub-agent this call starts asks through this turn's approval host.
                let host = self.shared.approval_host().clone();
                calls.push(Box::pin(crate::shared::CALLER.scope(
                    host,
                    run_one(
                        self.engine,
                        self.shared,
                        &self.token,
                        tool,
                        prepared,
                        &p.call,
                        ctx,
                    ),
                )));
            }
        }
        let mut running = futures::stream::iter(calls).buffer_unordered(parallel);
        loop {
            let next = tokio::select! {
                biased;
                _ = self.token.cancelled() => break,
                n = running.next() => n,
            };
            let Some((call, output)) = next else { break };
            self.emit(Event::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                // Clients see each image as its marker, never its bytes.
                output: turnstone_proto::image::with_markers(&output.content, &output.images),
                is_error: output.is_error,
            });
            self.activity("", "");
            results.insert(call.id.clone(), output);
        }
        results
    }

    /// Appends one tool message per call, in call order: the real result, the prepare-time
    /// error, or for calls without a result (denied, cancelled) `missing` and the call's
    /// effect receipt. An interrupted batch's receipts join the turn's.
    fn fold(&mut self, prepared: &[Prep], mut results: HashMap<String, ToolOutput>, missing: &str) {
        let seen = self.shared.batch_closed();
        let mut images: HashMap<String, Vec<turnstone_llm::ImagePart>> = results
            .iter_mut()
            .filter(|(_, out)| !out.images.is_empty())
            .map(|(id, out)| (id.clone(), std::mem::take(&mut out.images)))
            .collect();
        let vision = self.shared.settings().vision(self.engine);
        let calls = prepared
            .iter()
            .map(|p| {
                let outcome = if let Some(error) = &p.item.error {
                    Outcome::NotRun(error.clone())
                } else if let Some(out) = results.remove(&p.call.id) {
                    Outcome::Finished(out.content)
                } else {
                    Outcome::Missing(missing.to_string())
                };
                (p.call.id.clone(), p.call.name.clone(), outcome)
            })
            .collect();
        let (folded, receipts) = crate::receipt::settle(calls, &seen);
        self.receipts.extend(receipts);
        let folded = folded
            .into_iter()
            .map(|(call_id, content)| {
                let images = images.remove(&call_id).unwrap_or_default();
                crate::vision::tool_message(call_id, content, images, vision)
            })
            .collect();
        self.shared.append_messages(folded);
    }
}

/// The verdict of a round ended by a cancel (the actor's, or a dropped wait).
pub(crate) fn cancel_verdict(round: &PendingRound) -> Verdict {
    Verdict {
        request_id: round.request_id.clone(),
        cycle_id: round.cycle_id.clone(),
        approved: false,
        feedback: "Cancelled by user".to_string(),
        decided_by: "cancel",
    }
}

/// What qualifies a sub-agent's `call_id`s on its parent's stream: its id without the
/// parent's (`agent-3` of `<ws_id>/agent-3`).
fn sub_agent_qualifier<'a>(sub_id: &'a str, host_id: &str) -> &'a str {
    sub_id
        .strip_prefix(host_id)
        .map(|rest| rest.trim_start_matches('/'))
        .filter(|rest| !rest.is_empty())
        .unwrap_or(sub_id)
}

/// Closes a round when its wait ends: a round still pending then (the wait was dropped: the
/// sub-agent's parent call was cancelled) is withdrawn as cancelled; a sub-agent's host goes
/// back to `running` when no other round waits.
struct Withdraw<'a> {
    host: &'a Arc<Shared>,
    cycle_id: &'a str,
    sub_agent: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if let Ok((_, verdict)) = self
            .host
            .approvals
            .decide(RoundRef::Cycle(self.cycle_id), cancel_verdict)
        {
            self.host.approval_resolved(&verdict);
        }
        if self.sub_agent
            && self.host.approvals.is_empty()
            && self.host.busy.load(Ordering::Acquire)
        {
            self.host.set_state(WsState::Running);
        }
    }
}

struct Prep {
    call: ToolCall,
    item: ToolItem,
    prepared: Option<Prepared>,
    tool: Option<Arc<dyn Tool>>,
}

impl Prep {
    /// Whether the tool's metadata marks it safe to run unasked (`auto_approve`). Covers
    /// only the tool's plain label: an elevated label the tool chose for this call (e.g.
    /// `read_file_outside`, a read outside the workspace) still needs a decision.
    fn auto_approve_meta(&self) -> bool {
        self.tool.as_ref().is_some_and(|t| {
            let definition = t.definition();
            definition.meta.auto_approve && self.item.approval_label == definition.name
        })
    }
}

/// Most `tool_output_chunk` events one call may emit: a command printing thousands of
/// lines must not flush every subscriber's resume window. The full (truncated) output still
/// arrives in `tool_result`.
const MAX_STREAMED_CHUNKS: usize = 100;

struct ChunkSink<'a> {
    shared: &'a Shared,
    call_id: &'a str,
    sent: std::sync::atomic::AtomicUsize,
    /// Redacts the chunks before they are sent (`guard.rs`).
    guard: crate::guard::ChunkGuard,
}

impl ChunkSink<'_> {
    fn send(&self, text: &str) {
        let n = self.sent.fetch_add(1, Ordering::Relaxed);
        let chunk = match n.cmp(&MAX_STREAMED_CHUNKS) {
            std::cmp::Ordering::Less => text.to_string(),
            std::cmp::Ordering::Equal => {
                "[\u{2026} further output is not streamed; the tool result contains it]\n"
                    .to_string()
            }
            std::cmp::Ordering::Greater => return,
        };
        self.shared.emit(Event::ToolOutputChunk {
            call_id: self.call_id.to_string(),
            chunk,
        });
    }

    /// Streams what the guard still holds (the call has finished).
    fn flush(&self) {
        if let Some(text) = self.guard.flush() {
            self.send(&text);
        }
    }
}

impl OutputSink for ChunkSink<'_> {
    fn chunk(&self, text: &str) {
        // The call printed something (a cancel now leaves a `partial` effect).
        self.shared.batch.printed(self.call_id);
        if let Some(text) = self.guard.feed(text) {
            self.send(&text);
        }
    }
}

/// Runs one call and screens its result (`guard.rs`), then applies the tool-output limit:
/// nothing — the `tool_result` event, the fold, the journal — sees the output before the
/// guard has, and the guard sees it before the limit cuts it.
async fn run_one<'a>(
    engine: &'a Engine,
    shared: &'a Shared,
    token: &'a CancellationToken,
    tool: Arc<dyn Tool>,
    prepared: &'a Prepared,
    call: &'a ToolCall,
    ctx: &'a turnstone_tools::ToolContext,
) -> (&'a ToolCall, ToolOutput) {
    let settings = engine.config().output_guard;
    let sink = ChunkSink {
        shared,
        call_id: &call.id,
        sent: Default::default(),
        guard: crate::guard::ChunkGuard::new(settings),
    };
    let llm = crate::guard::GuardLlm::for_call(engine, shared);
    let screen = |output| -> futures::future::BoxFuture<'a, ToolOutput> {
        let llm = llm.clone();
        Box::pin(async move {
            crate::guard::screen(
                shared,
                settings,
                llm.as_ref(),
                &engine.guard_stats,
                &call.id,
                &call.name,
                output,
            )
            .await
        })
    };
    shared.call_started(&call.id).await;
    let output = tool.execute(prepared, ctx, &sink).await;
    sink.flush();
    let output = screen(output).await;
    // A plan is reviewed by the user before it becomes the result (`plan.rs`): the review
    // shows (and saves) the screened, uncut plan; a refined plan is screened too.
    let output = if prepared.approval_label == crate::review::PLAN_AGENT {
        let reviewed = crate::review::review(
            engine, shared, token, &*tool, prepared, ctx, &sink, output, &screen,
        )
        .await;
        sink.flush();
        reviewed
    } else {
        output
    };
    let limit = engine.config().truncation_limit(engine.context_window());
    let output = crate::guard::cap(settings, limit, output);
    (call, output)
}

fn clip(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    line.chars().take(max).collect()
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

/// Appends what of `text` fits in `cap` bytes, cut at a character boundary: a joined delta
/// (up to 16 KiB) that crosses the cap still fills the turn's text up to it.
fn push_capped(out: &mut String, text: &str, cap: usize) {
    let room = cap.saturating_sub(out.len());
    out.push_str(&text[..text.floor_char_boundary(room.min(text.len()))]);
}

#[cfg(test)]
mod capped_tests {
    use super::push_capped;

    #[test]
    fn text_past_the_cap_is_cut_at_a_character_boundary() {
        let mut out = String::new();
        push_capped(&mut out, "abc", 5);
        push_capped(&mut out, "dé", 5);
        assert_eq!(out, "abcd", "é is two bytes and would end past the cap");
        push_capped(&mut out, "x", 5);
        assert_eq!(out, "abcdx");
        push_capped(&mut out, "more", 5);
        assert_eq!(out, "abcdx");
    }
}
