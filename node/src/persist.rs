//! The node's persistence: conversations and each model call's usage (`usage_events`) go to
//! the store through its batching writer (the engine's [`Journal`] seam, so a slow disk
//! never stalls a turn); approvals are recorded
//! durably by a task that follows the node-wide event log, so a decision survives a restart
//! and a late second decision can be told the recorded verdict.

use std::collections::HashMap;
use std::sync::Arc;

use turnstone_engine::{Envelope, Event, EventLog, Item, Journal, PlanDecision};
use turnstone_llm::ChatMessage;
use turnstone_store::{
    ApprovalDecision, ApprovalRecord, ApprovalState, NewIntentVerdict, NewMessage, NewUsageEvent,
    NewWorkstream, Store, StoreConfig, WriteOp, Writer, WriterConfig,
};

use crate::error::NodeError;
use crate::server::state::{NodeEvent, NodeEventKind};

/// A store plus its writer.
pub struct Persistence {
    pub store: Arc<dyn Store>,
    pub writer: Writer,
    pub node_id: String,
    /// Workstream state changes to store, in order (`record_state`).
    states: tokio::sync::mpsc::UnboundedSender<(String, &'static str)>,
    /// The user each open workstream's model usage is accounted to (`record_owner`).
    owners: parking_lot::Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistence")
            .field("node_id", &self.node_id)
            .finish()
    }
}

impl Persistence {
    /// Connects (running migrations) and starts the writer.
    pub async fn open(config: &StoreConfig, node_id: &str) -> Result<Arc<Self>, NodeError> {
        let store = turnstone_store::connect(config)
            .await
            .map_err(|e| NodeError::Persistence(e.to_string()))?;
        let writer = Writer::spawn(store.clone(), WriterConfig::default());
        let (states, mut pending) = tokio::sync::mpsc::unbounded_channel::<(String, &str)>();
        let state_store = store.clone();
        tokio::spawn(async move {
            while let Some((ws_id, state)) = pending.recv().await {
                if let Err(e) = state_store.set_state(&ws_id, state).await {
                    tracing::debug!(error = %e, %ws_id, state, "workstream state not stored (no row yet)");
                }
            }
        });
        Ok(Arc::new(Self {
            store,
            writer,
            node_id: node_id.to_string(),
            states,
            owners: parking_lot::Mutex::default(),
        }))
    }

    /// Stores a workstream's lifecycle state (`hibernated`, `idle` when rehydrated,
    /// `closed`) in the background; changes are applied in the order they are recorded.
    pub fn record_state(&self, ws_id: &str, state: &'static str) {
        if state == "closed" {
            self.owners.lock().remove(ws_id);
        }
        let _ = self.states.send((ws_id.to_string(), state));
    }

    /// Accounts `ws_id`'s model usage to `user_id` from now on (empty: to no user).
    pub fn record_owner(&self, ws_id: &str, user_id: &str) {
        let mut owners = self.owners.lock();
        if user_id.is_empty() {
            owners.remove(ws_id);
        } else {
            owners.insert(ws_id.to_string(), user_id.to_string());
        }
    }

    /// The user `ws_id`'s usage is accounted to (empty when unknown).
    fn owner(&self, ws_id: &str) -> String {
        self.owners.lock().get(ws_id).cloned().unwrap_or_default()
    }

    /// Records a new live workstream (ignored when the row exists: a resumed one).
    pub fn record_workstream(self: &Arc<Self>, ws_id: &str, name: &str) {
        let this = self.clone();
        let new = NewWorkstream {
            ws_id: Some(ws_id.to_string()),
            node_id: Some(self.node_id.clone()),
            name: name.to_string(),
            ..NewWorkstream::default()
        };
        tokio::spawn(async move {
            if let Ok(None) = this
                .store
                .get_workstream(new.ws_id.as_deref().unwrap_or(""))
                .await
                && let Err(e) = this.store.create_workstream(new).await
            {
                tracing::debug!(error = %e, "workstream row not created (it may exist)");
            }
        });
    }

    /// Sets the alias of a workstream (`/name`): queued history is flushed first so the
    /// row exists, and a row is created for a workstream that has no messages yet.
    pub async fn save_alias(&self, ws_id: &str, alias: &str) -> Result<(), NodeError> {
        self.ensure_row(ws_id, alias).await?;
        self.store
            .set_alias(ws_id, Some(alias))
            .await
            .map_err(persistence)
    }

    /// [`save_alias`](Self::save_alias) in the background (the HTTP handler does not wait).
    pub fn record_alias(self: &Arc<Self>, ws_id: &str, alias: &str) {
        let (this, ws_id, alias) = (self.clone(), ws_id.to_string(), alias.to_string());
        tokio::spawn(async move {
            if let Err(e) = this.save_alias(&ws_id, &alias).await {
                tracing::warn!(error = %e, %ws_id, "alias not saved");
            }
        });
    }

    /// Stores an auto-generated title (queued history is flushed first so the row exists;
    /// a row is created for a workstream that has none yet).
    pub async fn save_title(&self, ws_id: &str, title: &str) -> Result<(), NodeError> {
        self.ensure_row(ws_id, "").await?;
        self.store
            .set_title(ws_id, title)
            .await
            .map_err(persistence)
    }

    /// Flushes queued history, then creates the workstream's row (named `name`) if it has
    /// none yet: what a later update of the row needs.
    async fn ensure_row(&self, ws_id: &str, name: &str) -> Result<(), NodeError> {
        self.writer.flush().await.map_err(persistence)?;
        if self
            .store
            .get_workstream(ws_id)
            .await
            .map_err(persistence)?
            .is_none()
        {
            let new = NewWorkstream {
                ws_id: Some(ws_id.to_string()),
                node_id: Some(self.node_id.clone()),
                name: name.to_string(),
                ..NewWorkstream::default()
            };
            self.store
                .create_workstream(new)
                .await
                .map_err(persistence)?;
        }
        Ok(())
    }

    /// [`save_title`](Self::save_title) in the background (the engine's title hook must
    /// not block).
    pub fn record_title(self: &Arc<Self>, ws_id: &str, title: &str) {
        let (this, ws_id, title) = (self.clone(), ws_id.to_string(), title.to_string());
        tokio::spawn(async move {
            if let Err(e) = this.save_title(&ws_id, &title).await {
                tracing::warn!(error = %e, %ws_id, "title not saved");
            }
        });
    }

    /// Follows the node-wide log and records approval requests (each round by its
    /// `cycle_id`: several may be pending on one workstream) and their verdicts (both
    /// tiers), output guard warnings (`output_assessments`), and plan reviews the same way: the row's payload is the `plan_review` event (its `type` says
    /// it is a plan review), the verdict `accept`, `reject` or `refine`; accepted is
    /// `approved`, a timeout `timed_out`, anything else `denied`.
    pub fn spawn_approval_recorder(
        self: &Arc<Self>,
        log: &Arc<EventLog<NodeEvent>>,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        let mut sub = log.subscribe(None);
        tokio::spawn(async move {
            // The pending approval rounds by (ws_id, cycle_id): their request and the ids
            // of their verdicts, stamped when the round is decided.
            let mut open: HashMap<(String, String), OpenRound> = HashMap::new();
            while let Some(item) = sub.next().await {
                let Item::Event(entry) = item else {
                    tracing::error!(
                        "approval recorder fell behind the node log; some approvals were not recorded"
                    );
                    continue;
                };
                let NodeEventKind::Ws(env) = &entry.kind else {
                    continue;
                };
                match &env.event {
                    Event::ApproveRequest {
                        request_id,
                        items,
                        cycle_id,
                        ..
                    } => {
                        this.record_request(request_id, env, "approval request")
                            .await;
                        let verdicts = items.iter().filter_map(|i| i.verdict.as_ref());
                        let verdict_ids = this.record_verdicts(&env.ws_id, verdicts).await;
                        open.insert(
                            (env.ws_id.to_string(), cycle_id.clone()),
                            OpenRound {
                                request_id: request_id.clone(),
                                call_ids: items.iter().map(|i| i.call_id.clone()).collect(),
                                verdict_ids,
                            },
                        );
                    }
                    Event::IntentVerdict(verdict) => {
                        // An LLM verdict: stamped with the human's decision when it came
                        // while its round was pending (a late one stays undecided).
                        let ids = this
                            .record_verdicts(&env.ws_id, std::iter::once(&**verdict))
                            .await;
                        if let Some(round) = open.iter_mut().find_map(|((ws, _), r)| {
                            (**ws == *env.ws_id && r.call_ids.contains(&verdict.call_id))
                                .then_some(r)
                        }) {
                            round.verdict_ids.extend(ids);
                        }
                    }
                    Event::ApprovalResolved {
                        approved,
                        feedback,
                        cycle_id,
                    } => {
                        let Some(OpenRound {
                            request_id,
                            verdict_ids: verdicts,
                            ..
                        }) = open.remove(&(env.ws_id.to_string(), cycle_id.clone()))
                        else {
                            continue;
                        };
                        let state = if *approved {
                            ApprovalState::Approved
                        } else if feedback.starts_with("Approval timed out") {
                            ApprovalState::TimedOut
                        } else {
                            ApprovalState::Denied
                        };
                        let decided_by = match feedback.as_str() {
                            "Cancelled by user" => "cancel",
                            turnstone_engine::JUDGE_APPROVAL => "judge",
                            f if f.starts_with("Approval timed out") => "timeout",
                            _ => "user",
                        };
                        let decision = ApprovalDecision {
                            state,
                            verdict: String::new(),
                            feedback: feedback.clone(),
                            decided_by: decided_by.to_string(),
                        };
                        if decided_by == "user" {
                            this.stamp_verdicts(&verdicts, *approved).await;
                        }
                        if let Err(e) = this.store.decide_approval(&request_id, decision).await {
                            tracing::error!(error = %e, %request_id, "approval verdict not recorded");
                        }
                    }
                    Event::OutputWarning(w) => this.record_assessment(&env.ws_id, w).await,
                    Event::PlanReview { request_id, .. } => {
                        this.record_request(request_id, env, "plan review").await;
                    }
                    Event::PlanResolved {
                        request_id,
                        decision,
                        feedback,
                        decided_by,
                    } => {
                        let state = match (decision, decided_by.as_str()) {
                            (PlanDecision::Accept, _) => ApprovalState::Approved,
                            (_, "timeout") => ApprovalState::TimedOut,
                            _ => ApprovalState::Denied,
                        };
                        let decision = ApprovalDecision {
                            state,
                            verdict: decision.as_str().to_string(),
                            feedback: feedback.clone(),
                            decided_by: decided_by.clone(),
                        };
                        if let Err(e) = this.store.decide_approval(request_id, decision).await {
                            tracing::error!(error = %e, %request_id, "plan review verdict not recorded");
                        }
                    }
                    _ => {}
                }
            }
        })
    }

    /// Records judge verdicts (`intent_verdicts`: an approval request's heuristic ones, or
    /// an `intent_verdict`); returns their ids.
    async fn record_verdicts(
        &self,
        ws_id: &str,
        verdicts: impl Iterator<Item = &turnstone_proto::sse::Verdict>,
    ) -> Vec<String> {
        let mut ids = Vec::new();
        for v in verdicts {
            let new = NewIntentVerdict {
                verdict_id: v.verdict_id.clone(),
                ws_id: ws_id.to_string(),
                call_id: v.call_id.clone(),
                func_name: v.func_name.clone(),
                func_args: v.func_args.clone(),
                intent_summary: v.intent_summary.clone(),
                risk_level: v.risk_level.clone(),
                confidence: v.confidence,
                recommendation: v.recommendation.clone(),
                reasoning: v.reasoning.clone(),
                evidence: v.evidence.clone(),
                tier: v.tier.clone(),
                judge_model: v.judge_model.clone(),
                latency_ms: v.latency_ms as i64,
            };
            match self.store.record_intent_verdict(new).await {
                Ok(_) => ids.push(v.verdict_id.clone()),
                Err(e) => {
                    tracing::error!(error = %e, verdict_id = %v.verdict_id, "verdict not recorded")
                }
            }
        }
        ids
    }

    /// Records an output guard warning as an `output_assessments` row (what was found,
    /// never the output).
    async fn record_assessment(&self, ws_id: &str, w: &turnstone_proto::sse::OutputWarning) {
        let new = turnstone_store::NewOutputAssessment {
            assessment_id: turnstone_proto::ids::random_hex(32),
            ws_id: ws_id.to_string(),
            call_id: w.call_id.clone(),
            func_name: w.func_name.clone(),
            flags: w.flags.clone(),
            risk_level: w.risk_level.clone(),
            annotations: w.annotations.clone(),
            output_length: i64::try_from(w.output_length).unwrap_or(i64::MAX),
            redacted: w.redacted,
        };
        if let Err(e) = self.store.record_output_assessment(new).await {
            tracing::error!(error = %e, call_id = %w.call_id, "output assessment not recorded");
        }
    }

    /// Stamps a human's decision on the verdicts of the batch they decided.
    async fn stamp_verdicts(&self, verdict_ids: &[String], approved: bool) {
        let decision = if approved { "approved" } else { "denied" };
        for id in verdict_ids {
            if let Err(e) = self.store.set_verdict_decision(id, decision).await {
                tracing::error!(error = %e, verdict_id = %id, "verdict decision not recorded");
            }
        }
    }

    /// Records the approval row of a request event (`what` names it in the log).
    async fn record_request(&self, request_id: &str, env: &Envelope, what: &str) {
        let payload = serde_json::to_value(&env.event).unwrap_or_default();
        if let Err(e) = self
            .store
            .create_approval(request_id, &env.ws_id, &payload)
            .await
        {
            tracing::error!(error = %e, %request_id, "{what} not recorded");
        }
    }

    /// The recorded approval, if any.
    pub async fn approval(&self, request_id: &str) -> Option<ApprovalRecord> {
        self.store.get_approval(request_id).await.ok().flatten()
    }
}

/// The engine's journal on top of the writer.
#[derive(Debug)]
pub struct StoreJournal(pub Arc<Persistence>);

impl Journal for StoreJournal {
    fn appended(&self, ws_id: &str, messages: &[ChatMessage]) {
        for message in messages {
            for row in NewMessage::from_chat(ws_id, message) {
                if let Err(e) = self.0.writer.try_write(WriteOp::Message(row)) {
                    // Counted by the writer; ERROR because history is lost.
                    tracing::error!(error = %e, %ws_id, "conversation write dropped");
                }
            }
        }
    }

    /// A replaced context (a compaction, a `/resume` into a live workstream) is written as
    /// new rows, the first marked as a context reset: a resume rebuilds from there. The
    /// earlier rows stay stored and searchable; a replacement is not a deletion. An empty
    /// replacement (`/clear`) writes nothing.
    fn replaced(&self, ws_id: &str, messages: &[ChatMessage]) {
        tracing::debug!(%ws_id, kept = messages.len(), "conversation context replaced");
        for row in NewMessage::replacement(ws_id, messages) {
            if let Err(e) = self.0.writer.try_write(WriteOp::Message(row)) {
                tracing::error!(error = %e, %ws_id, "conversation write dropped");
            }
        }
    }

    /// The user message and the `started` mark of the send's queued entry go in one
    /// transaction: after a crash the entry either still waits (its turn never reached the
    /// database) or is marked started (it never runs twice).
    fn turn_started(&self, ws_id: &str, correlation_id: &str, messages: &[ChatMessage]) {
        let mut ops: Vec<WriteOp> = messages
            .iter()
            .flat_map(|m| NewMessage::from_chat(ws_id, m))
            .map(WriteOp::Message)
            .collect();
        ops.push(WriteOp::QueueState {
            correlation_id: correlation_id.to_string(),
            state: turnstone_store::QueuedState::Started,
        });
        if let Err(e) = self.0.writer.try_write_all(ops) {
            tracing::error!(error = %e, %ws_id, "conversation write dropped");
        }
    }

    /// The send's row becomes `completed` with the `turn_complete` as its outcome, in the
    /// batch the turn waits for before it emits that event.
    fn turn_ended(&self, ws_id: &str, turn_complete: &turnstone_engine::Event) {
        let turnstone_engine::Event::TurnComplete { correlation_id, .. } = turn_complete else {
            return;
        };
        if correlation_id.is_empty() {
            return;
        }
        let op = WriteOp::QueueOutcome {
            correlation_id: correlation_id.clone(),
            outcome: crate::server::views::event_json(turn_complete).to_string(),
        };
        if let Err(e) = self.0.writer.try_write(op) {
            tracing::error!(error = %e, %ws_id, "turn outcome write dropped");
        }
    }

    /// Group commit: resolves when the writer's current batch is committed.
    fn committed(&self) -> futures::future::BoxFuture<'static, ()> {
        let p = self.0.clone();
        Box::pin(async move {
            if let Err(e) = p.writer.committed().await {
                tracing::error!(error = %e, "turn records not confirmed durable");
            }
        })
    }

    /// A `usage_events` row, queued on the writer like the history (never awaited).
    fn model_called(&self, ws_id: &str, call: &turnstone_engine::ModelCall) {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let op = WriteOp::Usage(NewUsageEvent {
            timestamp: String::new(),
            user_id: self.0.owner(ws_id),
            ws_id: ws_id.to_string(),
            node_id: self.0.node_id.clone(),
            model: call.model.clone(),
            prompt_tokens: count(call.usage.prompt_tokens),
            completion_tokens: count(call.usage.completion_tokens),
            tool_calls_count: count(call.tool_calls),
            cache_creation_tokens: count(call.usage.cache_creation_tokens),
            cache_read_tokens: count(call.usage.cache_read_tokens),
        });
        if let Err(e) = self.0.writer.try_write(op) {
            tracing::error!(error = %e, %ws_id, "usage write dropped");
        }
    }

    fn config_changed(&self, ws_id: &str, key: &str, value: Option<&str>) {
        let op = WriteOp::Config {
            ws_id: ws_id.to_string(),
            key: key.to_string(),
            value: value.map(str::to_string),
        };
        if let Err(e) = self.0.writer.try_write(op) {
            tracing::error!(error = %e, %ws_id, key, "session setting write dropped");
        }
    }
}

/// A store failure as the node reports it.
fn persistence(e: turnstone_store::StoreError) -> NodeError {
    NodeError::Persistence(e.to_string())
}

/// An approval round the recorder saw asked and not yet resolved.
struct OpenRound {
    request_id: String,
    /// Its items' call ids: an LLM verdict on one of them belongs to it.
    call_ids: Vec<String>,
    /// The ids of its recorded verdicts.
    verdict_ids: Vec<String>,
}
