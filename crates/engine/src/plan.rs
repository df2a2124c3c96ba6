//! `plan_agent`: a read-only planning sub-agent, and the review of its plan by the user
//! (node spec §4.7).
//!
//! The tool runs a sub-agent on the shared turn loop exactly as `task_agent` does
//! (`subagent.rs`: same engine view, request limit and unattended approval policy), with
//! its own system prompt asking for a concrete step-by-step plan and only the tools whose
//! metadata says `agent` (read-only: `read_file`, `search`, `diff_file`, `web_search`, …;
//! never `plan_agent` or `task_agent`). Its final text is the plan.
//!
//! Review: when the call has produced a plan and blanket auto-approve (`skip_permissions`)
//! is off, the turn loop hands the result to [`review`] before it becomes the tool result.
//! The workstream goes to `attention`, emits `plan_review {request_id, content}` and waits,
//! like a pending tool approval: the event is kept for clients that attach
//! ([`WorkstreamHandle::pending_plan_review`]), the first decision wins
//! ([`WorkstreamHandle::plan_feedback`]; later ones get the recorded [`PlanVerdict`]), a
//! cancel resolves it as rejected, and the approval timeout denies it. Every resolution
//! emits `plan_resolved` (ours, additive) so durable records and frontends can close it.
//! The reply: `""` accepts; `n`/`no`/`reject` (any case) rejects, a note saying so is
//! appended to the result; anything else is feedback: the plan agent runs again with it
//! and the new plan is reviewed, at most [`MAX_REFINEMENTS`] times. An accepted plan (or
//! one left after the last refinement round, or any plan under blanket auto-approve) is
//! written to `.plan-<ws_id>.md` in the working directory and its path appended to the
//! result.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use turnstone_tools::{
    OutputSink, Prepared, Provenance, RegistryError, Tool, ToolContext, ToolDefinition, ToolOutput,
    parse_definition, truncate_output,
};

use crate::Engine;
use crate::event::{Envelope, Event, WsState};
use crate::subagent::{AgentModel, TASK_AGENT, last_text, run_sub_turn, sub_engine};
use crate::turn::TurnEnd;
use crate::workstream::{Shared, WorkstreamHandle, lock};

/// The tool's name (and its approval label).
pub const PLAN_AGENT: &str = "plan_agent";

/// Most refinement rounds of one review: the plan agent re-runs with feedback at most this
/// many times; feedback after that is noted in the result, not applied.
pub const MAX_REFINEMENTS: usize = 5;

/// The schema (OpenAI function plus Turnstone metadata): top-level only, needs approval.
const SCHEMA: &str = r#"{
  "name": "plan_agent",
  "description": "Plan before acting: delegate the investigation of a goal to a read-only planning sub-agent. It starts with a fresh conversation (it does not see this one), may read and search files and the web in the same directory but changes nothing, and returns a concrete step-by-step plan. The user reviews the plan (accept, reject or ask for changes) before it is returned to you as this tool's result; an accepted plan is also saved to a file whose path the result names. Use it for multi-step changes where the user should agree on the approach first; give the goal and every fact the planner needs.",
  "parameters": {
    "type": "object",
    "properties": {
      "goal": {
        "type": "string",
        "description": "What the plan must achieve: the goal, constraints, relevant paths and facts."
      }
    },
    "required": ["goal"]
  },
  "agent": false,
  "task_agent": false,
  "auto_approve": false,
  "primary_key": "goal"
}"#;

/// The planner's system prompt (`{cwd}` is replaced by the working directory).
const SYSTEM_PROMPT: &str = "You are a planning sub-agent of Turnstone, started by another \
assistant (your parent) to plan one goal on its behalf. You are read-only: investigate with \
your tools (read and search files, look things up) as much as the plan needs, but change \
nothing. Nobody answers questions while you run, so do not ask any. Your working directory \
is {cwd}. When you know enough, reply with a final message and no tool calls: a concrete, \
step-by-step plan in Markdown — numbered steps naming the files, functions and commands \
involved, what each step changes, how to verify the result, and the risks or open \
questions. That message, and only that message, is the plan: the user reviews it and your \
parent carries it out, so make it complete and self-contained.";

/// How a plan review was decided (a wire type: `plan_resolved.decision`).
pub use turnstone_proto::event::PlanDecision;

/// The recorded verdict of one plan review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanVerdict {
    pub request_id: String,
    pub decision: PlanDecision,
    /// The reply as given (trimmed); for a cancel or a timeout, the reason.
    pub feedback: String,
    /// `user`, `timeout` or `cancel`.
    pub decided_by: &'static str,
}

/// Result of [`WorkstreamHandle::plan_feedback`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanOutcome {
    /// This reply decided the pending review.
    Resolved(PlanVerdict),
    /// No review was pending; the last recorded verdict, if any, is returned.
    NotPending(Option<PlanVerdict>),
}

/// A review waiting for its reply.
pub(crate) struct PendingPlan {
    request_id: String,
    event: Arc<Envelope>,
    reply: oneshot::Sender<PlanVerdict>,
}

/// A workstream's plan-review state (part of its shared state).
#[derive(Default)]
pub(crate) struct PlanState {
    pending: std::sync::Mutex<Option<PendingPlan>>,
    last_verdict: std::sync::Mutex<Option<PlanVerdict>>,
    /// One review at a time when a batch holds several `plan_agent` calls.
    gate: tokio::sync::Mutex<()>,
}

impl PlanState {
    /// Records `verdict` and emits `plan_resolved`.
    fn record(&self, shared: &Shared, verdict: &PlanVerdict) {
        *lock(&self.last_verdict) = Some(verdict.clone());
        shared.emit(Event::PlanResolved {
            request_id: verdict.request_id.clone(),
            decision: verdict.decision,
            feedback: verdict.feedback.clone(),
            decided_by: verdict.decided_by.to_string(),
        });
    }

    /// Takes the pending review if it is still `request_id`'s.
    fn take_if(&self, request_id: &str) -> Option<PendingPlan> {
        let mut pending = lock(&self.pending);
        match pending.as_ref() {
            Some(p) if p.request_id == request_id => pending.take(),
            _ => None,
        }
    }
}

/// Resolves a pending review as rejected (`Cancelled by user`); the waiting turn is being
/// cancelled. Called by [`WorkstreamHandle::cancel`].
pub(crate) fn cancel_pending(shared: &Shared) {
    let Some(pending) = lock(&shared.plan.pending).take() else {
        return;
    };
    let verdict = PlanVerdict {
        request_id: pending.request_id,
        decision: PlanDecision::Reject,
        feedback: "Cancelled by user".to_string(),
        decided_by: "cancel",
    };
    shared.plan.record(shared, &verdict);
    // Dropping `pending.reply` wakes the waiting review, which sees the token.
}

impl WorkstreamHandle {
    /// The `plan_review` event of the pending plan review, to re-send to a client that
    /// attaches while the turn waits.
    pub fn pending_plan_review(&self) -> Option<Arc<Envelope>> {
        lock(&self.shared.plan.pending)
            .as_ref()
            .map(|p| p.event.clone())
    }

    /// The last recorded plan-review verdict.
    pub fn last_plan_verdict(&self) -> Option<PlanVerdict> {
        lock(&self.shared.plan.last_verdict).clone()
    }

    /// Answers the pending plan review (`""` accepts, `n`/`no`/`reject` rejects, anything
    /// else asks for a revised plan). The first reply wins; later ones get
    /// [`PlanOutcome::NotPending`] with the recorded verdict.
    pub fn plan_feedback(&self, feedback: &str) -> PlanOutcome {
        let Some(pending) = lock(&self.shared.plan.pending).take() else {
            return PlanOutcome::NotPending(self.last_plan_verdict());
        };
        let feedback = feedback.trim().to_string();
        let verdict = PlanVerdict {
            request_id: pending.request_id.clone(),
            decision: PlanDecision::classify(&feedback),
            feedback,
            decided_by: "user",
        };
        tracing::info!(
            ws_id = %self.shared.id,
            request_id = %verdict.request_id,
            decision = verdict.decision.as_str(),
            "plan review decided"
        );
        self.shared.plan.record(&self.shared, &verdict);
        // The turn may have been cancelled meanwhile; then nobody listens, which is fine.
        let _ = pending.reply.send(verdict.clone());
        PlanOutcome::Resolved(verdict)
    }
}

/// The `plan_agent` tool. Holds its engine weakly: the engine's registry holds the tool.
pub struct PlanAgentTool {
    definition: ToolDefinition,
    engine: Weak<Engine>,
    model: Option<AgentModel>,
    runs: AtomicU64,
}

impl std::fmt::Debug for PlanAgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanAgentTool")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// Registers `plan_agent` in `engine`'s live registry (provenance built-in); the planner
/// runs on the sub-agents' model (`agent_model`) when one is given, else the parent's.
/// Only for frontends that answer plan reviews (the node's API): a review blocks the turn
/// until it is answered, cancelled or timed out.
pub fn register_plan_agent(
    engine: &Arc<Engine>,
    model: Option<AgentModel>,
) -> Result<(), RegistryError> {
    let tool = PlanAgentTool::new(engine, model)?;
    engine.registry().add(Arc::new(tool), Provenance::Builtin)
}

impl PlanAgentTool {
    /// The tool for `engine` (not registered; see [`register_plan_agent`]).
    pub fn new(engine: &Arc<Engine>, model: Option<AgentModel>) -> Result<Self, RegistryError> {
        Ok(Self {
            definition: parse_definition(SCHEMA)?,
            engine: Arc::downgrade(engine),
            model,
            runs: AtomicU64::new(0),
        })
    }

    /// The planner's engine view: the `agent` tool subset (never a sub-agent tool) and the
    /// planning prompt.
    fn sub_engine(&self, parent: &Engine, cwd: &std::path::Path) -> Engine {
        let names: Vec<String> = parent
            .registry()
            .agent_names()
            .into_iter()
            .filter(|n| n != PLAN_AGENT && n != TASK_AGENT)
            .collect();
        let prompt = SYSTEM_PROMPT.replace("{cwd}", &cwd.display().to_string());
        sub_engine(parent, self.model.as_ref(), names, prompt)
    }
}

/// The planner's first message: the goal, or for a refinement the goal, the plan under
/// review and the user's feedback.
fn planner_prompt(goal: &str, previous: Option<&str>, feedback: Option<&str>) -> String {
    match (previous, feedback) {
        (Some(previous), Some(feedback)) => format!(
            "{goal}\n\n---\nA previous plan for this goal was reviewed by the user:\n\n\
             {previous}\n\n---\nThe user asks for these changes:\n\n{feedback}\n\n\
             Write the complete revised plan (not only the changes)."
        ),
        _ => goal.to_string(),
    }
}

#[async_trait]
impl Tool for PlanAgentTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        // Only the goal: what a refinement adds is set by `review`, never by the model.
        crate::subagent::prepare_agent_call(&args, PLAN_AGENT, "goal")
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        out: &dyn OutputSink,
    ) -> ToolOutput {
        let Some(parent) = self.engine.upgrade() else {
            return ToolOutput::error("Error: the engine is shutting down");
        };
        let arg = |key: &str| prepared.args.get(key).and_then(Value::as_str);
        let goal = arg("goal").unwrap_or_default();
        let prompt = planner_prompt(goal, arg("previous_plan"), arg("feedback"));
        let run = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        let engine = self.sub_engine(&parent, &ctx.cwd);
        let id = format!("{}/plan-{run}", ctx.ws_id);
        let span = tracing::info_span!(
            "plan_agent",
            parent_ws = %ctx.ws_id,
            agent = %id,
            model = %engine.config().model,
            max_requests = engine.config().max_turn_requests.unwrap_or(0),
            refinement = arg("feedback").is_some(),
        );
        let (end, history) = run_sub_turn(&engine, id, PLAN_AGENT, prompt, ctx, out, span).await;
        planned(end, last_text(&history))
    }
}

/// The tool output for how the planner's turn ended: the plan (uncut: it is written to the
/// plan file; [`review`] truncates the final result), or an error.
fn planned(end: TurnEnd, last: Option<String>) -> ToolOutput {
    match (end, last) {
        (TurnEnd::Done, Some(plan)) => ToolOutput::ok(plan),
        (TurnEnd::Done, None) => {
            ToolOutput::error("Error: the plan agent finished without writing a plan")
        }
        (TurnEnd::Limit(requests), Some(plan)) => ToolOutput::ok(format!(
            "{plan}\n\n[plan_agent: the planner was stopped after {requests} model requests \
             (agent_max_turns) before it finished; the plan may be incomplete]"
        )),
        (TurnEnd::Limit(requests), None) => ToolOutput::error(format!(
            "Error: the plan agent was stopped after {requests} model requests \
             (agent_max_turns) before it wrote a plan"
        )),
        (TurnEnd::Failed(message), _) => {
            ToolOutput::error(format!("Error: the plan agent failed: {message}"))
        }
        (TurnEnd::Cancelled, _) => ToolOutput::error("Error: the plan agent was cancelled"),
    }
}

/// How one review round ended.
enum Answer {
    Verdict(PlanVerdict),
    Cancelled,
}

/// Clears the pending review if its wait is dropped (the turn was cancelled or closed)
/// before anybody decided it.
struct PendingGuard<'a> {
    shared: &'a Shared,
    request_id: String,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.shared.plan.take_if(&self.request_id).is_some() {
            cancel_verdict(self.shared, &self.request_id);
        }
    }
}

fn cancel_verdict(shared: &Shared, request_id: &str) {
    let verdict = PlanVerdict {
        request_id: request_id.to_string(),
        decision: PlanDecision::Reject,
        feedback: "Cancelled by user".to_string(),
        decided_by: "cancel",
    };
    shared.plan.record(shared, &verdict);
}

/// Shows `plan` for review and waits for the verdict (or the timeout, which denies it).
async fn ask(engine: &Engine, shared: &Shared, token: &CancellationToken, plan: &str) -> Answer {
    let request_id = crate::new_request_id();
    let (reply, mut rx) = oneshot::channel();
    shared.set_state(WsState::Attention);
    shared.emit(Event::Activity {
        activity: "\u{23f3} Awaiting plan review".to_string(),
        activity_state: "approval".to_string(),
    });
    {
        let mut pending = lock(&shared.plan.pending);
        let event = shared.emit(Event::PlanReview {
            request_id: request_id.clone(),
            content: plan.to_string(),
        });
        *pending = Some(PendingPlan {
            request_id: request_id.clone(),
            event,
            reply,
        });
    }
    let _guard = PendingGuard {
        shared,
        request_id: request_id.clone(),
    };
    tracing::info!(%request_id, chars = plan.len(), "plan review pending");
    let timeout = engine.config().approval_timeout;
    let sleep = tokio::time::sleep(timeout);
    tokio::pin!(sleep);
    let answer = tokio::select! {
        biased;
        _ = token.cancelled() => Answer::Cancelled,
        v = &mut rx => match v {
            Ok(v) => Answer::Verdict(v),
            Err(_) => Answer::Cancelled,
        },
        _ = &mut sleep => {
            if shared.plan.take_if(&request_id).is_none() {
                // A decision raced the timeout and won: it is in the channel.
                tokio::select! {
                    biased;
                    _ = token.cancelled() => Answer::Cancelled,
                    v = rx => v.map_or(Answer::Cancelled, Answer::Verdict),
                }
            } else {
                let verdict = PlanVerdict {
                    request_id: request_id.clone(),
                    decision: PlanDecision::Reject,
                    feedback: format!(
                        "Plan review timed out after {}",
                        crate::turn::human_duration(timeout)
                    ),
                    decided_by: "timeout",
                };
                tracing::warn!(%request_id, "plan review timed out");
                shared.plan.record(shared, &verdict);
                Answer::Verdict(verdict)
            }
        }
    };
    shared.emit(Event::Activity {
        activity: String::new(),
        activity_state: String::new(),
    });
    answer
}

/// The `plan_agent` call's result after the review (see the module documentation). `first`
/// is what the planner returned; `tool` and `prepared` run it again for refinements.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn review(
    engine: &Engine,
    shared: &Shared,
    token: &CancellationToken,
    tool: &dyn Tool,
    prepared: &Prepared,
    ctx: &ToolContext,
    out: &dyn OutputSink,
    first: ToolOutput,
) -> ToolOutput {
    if first.is_error {
        return first;
    }
    let mut plan = first.content;
    let unreviewed = shared.skip_permissions.load(Ordering::Relaxed) || engine.config().unattended;
    let mut note = String::new();
    if !unreviewed {
        let _one_at_a_time = shared.plan.gate.lock().await;
        let mut refinements = 0;
        loop {
            let verdict = match ask(engine, shared, token, &plan).await {
                Answer::Cancelled => return ToolOutput::error("Cancelled by user."),
                Answer::Verdict(v) => v,
            };
            if verdict.decided_by == "cancel" || token.is_cancelled() {
                return ToolOutput::error("Cancelled by user.");
            }
            shared.set_state(WsState::Running);
            match verdict.decision {
                PlanDecision::Accept => break,
                PlanDecision::Reject => {
                    let why = if verdict.decided_by == "timeout" {
                        format!("{}: the plan was not approved", verdict.feedback)
                    } else {
                        "The user rejected this plan".to_string()
                    };
                    let output = format!(
                        "{plan}\n\n[{why}. Do not carry it out; ask the user how to proceed \
                         or propose a different approach.]"
                    );
                    return ToolOutput::ok(truncate_output(&output, ctx.truncation_limit));
                }
                PlanDecision::Refine if refinements >= MAX_REFINEMENTS => {
                    note = format!(
                        "\n\n[The user asked for more changes after {MAX_REFINEMENTS} \
                         refinement rounds (the limit); they are not in this plan, take them \
                         into account: {}]",
                        verdict.feedback
                    );
                    break;
                }
                PlanDecision::Refine => {
                    refinements += 1;
                    tracing::info!(round = refinements, "plan refinement");
                    out.chunk(&format!(
                        "\u{21bb} revising the plan ({refinements}/{MAX_REFINEMENTS}): {}\n",
                        verdict.feedback.lines().next().unwrap_or_default()
                    ));
                    let mut again = prepared.clone();
                    if let Some(args) = again.args.as_object_mut() {
                        args.insert("previous_plan".into(), json!(plan));
                        args.insert("feedback".into(), json!(verdict.feedback));
                    }
                    let revised = tool.execute(&again, ctx, out).await;
                    if revised.is_error {
                        return revised;
                    }
                    plan = revised.content;
                }
            }
        }
    }
    let saved = save(ctx, &plan).await;
    let output = format!("{plan}{note}\n\n{saved}");
    ToolOutput::ok(truncate_output(&output, ctx.truncation_limit))
}

/// Writes the final plan to `.plan-<ws_id>.md` in the working directory; returns the note
/// for the tool result.
async fn save(ctx: &ToolContext, plan: &str) -> String {
    let id: String = ctx
        .ws_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let id = if id.is_empty() {
        "local".to_string()
    } else {
        id
    };
    let path = ctx.cwd.join(format!(".plan-{id}.md"));
    let mut body = plan.to_string();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    match tokio::fs::write(&path, body).await {
        Ok(()) => {
            tracing::info!(path = %path.display(), "plan saved");
            format!("[Plan saved to {}]", path.display())
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "plan not saved");
            format!("[The plan could not be saved to {}: {e}]", path.display())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_top_level_only_and_needs_approval() {
        let def = parse_definition(SCHEMA).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(def.name, PLAN_AGENT);
        assert!(!def.meta.task_agent && !def.meta.agent && !def.meta.auto_approve);
        assert_eq!(def.meta.primary_key.as_deref(), Some("goal"));
    }

    #[test]
    fn replies_are_classified() {
        for accept in ["", "  ", "\n"] {
            assert_eq!(PlanDecision::classify(accept), PlanDecision::Accept);
        }
        for reject in ["n", "N", "no", " No ", "REJECT", "reject"] {
            assert_eq!(
                PlanDecision::classify(reject),
                PlanDecision::Reject,
                "{reject}"
            );
        }
        for refine in ["nope", "no tests", "rejected", "add a test step"] {
            assert_eq!(
                PlanDecision::classify(refine),
                PlanDecision::Refine,
                "{refine}"
            );
        }
    }

    #[test]
    fn a_refinement_prompt_carries_the_goal_the_plan_and_the_feedback() {
        assert_eq!(planner_prompt("fix it", None, None), "fix it");
        let p = planner_prompt("fix it", Some("1. look"), Some("add tests"));
        assert!(p.starts_with("fix it\n"));
        assert!(p.contains("1. look") && p.contains("add tests"));
    }

    #[test]
    fn a_planner_without_a_plan_is_an_error() {
        assert!(planned(TurnEnd::Done, None).is_error);
        assert!(planned(TurnEnd::Cancelled, Some("x".into())).is_error);
        let limited = planned(TurnEnd::Limit(2), Some("1. a".into()));
        assert!(!limited.is_error && limited.content.starts_with("1. a\n\n[plan_agent:"));
    }
}
