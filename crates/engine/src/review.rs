//! The user's review of a plan (node spec §4.7): when a `plan_agent` call (`plan.rs`) has
//! produced a plan and blanket auto-approve (`skip_permissions`) is off, the turn loop hands
//! the result to [`review`] before it becomes the tool result.
//!
//! The workstream goes to `attention`, emits `plan_review {request_id, content}` and waits,
//! like a pending tool approval: the event is kept for clients that attach
//! (`WorkstreamHandle::pending_plan_review`), the first decision wins ([`answer`]; later
//! ones get the recorded [`PlanVerdict`]), a cancel resolves it as rejected
//! ([`cancel_pending`]), and the approval timeout denies it. Every resolution emits
//! `plan_resolved` (ours, additive) so durable records and frontends can close it. The reply:
//! `""` accepts; `n`/`no`/`reject` (any case) rejects, a note saying so is appended to the
//! result; anything else is feedback: the plan agent runs again with it and the new plan is
//! reviewed, at most [`MAX_REFINEMENTS`] times. An accepted plan (or one left after the last
//! refinement round, or any plan under blanket auto-approve) is written to
//! `.plan-<ws_id>.md` in the working directory and its path appended to the result.
//!
//! Below the turn loop: it knows the tool only as a [`Tool`] to run again.

use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use turnstone_tools::{OutputSink, Prepared, Tool, ToolContext, ToolOutput, truncate_output};

use crate::engine::Engine;
use crate::event::{Event, WsState};
use crate::shared::Shared;
use crate::state::{Pending, PlanDecision, PlanOutcome, PlanVerdict, human_duration};

/// The planning tool's name (and its approval label): its results are reviewed.
pub const PLAN_AGENT: &str = "plan_agent";

/// Most refinement rounds of one review: the plan agent re-runs with feedback at most this
/// many times; feedback after that is noted in the result, not applied.
pub const MAX_REFINEMENTS: usize = 5;

/// Emits `plan_resolved` for a recorded verdict.
fn announce(shared: &Shared, verdict: &PlanVerdict) {
    shared.emit(Event::PlanResolved {
        request_id: verdict.request_id.clone(),
        decision: verdict.decision,
        feedback: verdict.feedback.clone(),
        decided_by: verdict.decided_by.to_string(),
    });
}

/// Resolves a pending review as rejected (`Cancelled by user`); the waiting turn is being
/// cancelled. Called by the actor when it cancels a turn.
pub(crate) fn cancel_pending(shared: &Shared) {
    if let Some((_, verdict)) = shared
        .plan
        .reviews
        .decide(None, |p| cancel_verdict(&p.request_id))
    {
        announce(shared, &verdict);
    }
    // Dropping the pending reply wakes the waiting review, which sees the token.
}

/// A client's reply to the pending review (`""` accepts, `n`/`no`/`reject` rejects,
/// anything else asks for a revised plan). The first reply wins; later ones get
/// [`PlanOutcome::NotPending`] with the recorded verdict.
pub(crate) fn answer(shared: &Shared, feedback: &str) -> PlanOutcome {
    let feedback = feedback.trim().to_string();
    let decided = shared.plan.reviews.decide(None, |p| PlanVerdict {
        request_id: p.request_id.clone(),
        decision: PlanDecision::classify(&feedback),
        feedback: feedback.clone(),
        decided_by: "user",
    });
    let Some((pending, verdict)) = decided else {
        return PlanOutcome::NotPending(shared.plan.reviews.last());
    };
    tracing::info!(
        ws_id = %shared.id,
        request_id = %verdict.request_id,
        decision = verdict.decision.as_str(),
        "plan review decided"
    );
    announce(shared, &verdict);
    // The turn may have been cancelled meanwhile; then nobody listens, which is fine.
    let _ = pending.reply.send(verdict.clone());
    PlanOutcome::Resolved(verdict)
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
        let decided = self
            .shared
            .plan
            .reviews
            .decide(Some(&self.request_id), |p| cancel_verdict(&p.request_id));
        if let Some((_, verdict)) = decided {
            announce(self.shared, &verdict);
        }
    }
}

fn cancel_verdict(request_id: &str) -> PlanVerdict {
    PlanVerdict {
        request_id: request_id.to_string(),
        decision: PlanDecision::Reject,
        feedback: "Cancelled by user".to_string(),
        decided_by: "cancel",
    }
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
    shared.plan.reviews.open(|| Pending {
        event: shared.emit(Event::PlanReview {
            request_id: request_id.clone(),
            content: plan.to_string(),
        }),
        request_id: request_id.clone(),
        reply,
    });
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
            let timed_out = shared.plan.reviews.decide(Some(&request_id), |p| PlanVerdict {
                request_id: p.request_id.clone(),
                decision: PlanDecision::Reject,
                feedback: format!("Plan review timed out after {}", human_duration(timeout)),
                decided_by: "timeout",
            });
            match timed_out {
                // A decision raced the timeout and won: it is in the channel.
                None => tokio::select! {
                    biased;
                    _ = token.cancelled() => Answer::Cancelled,
                    v = rx => v.map_or(Answer::Cancelled, Answer::Verdict),
                },
                Some((_, verdict)) => {
                    tracing::warn!(%request_id, "plan review timed out");
                    announce(shared, &verdict);
                    Answer::Verdict(verdict)
                }
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
/// is what the planner returned (screened by the output guard); `tool` and `prepared` run
/// it again for refinements, whose output passes `screen` before it is shown.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn review<'s>(
    engine: &Engine,
    shared: &Shared,
    token: &CancellationToken,
    tool: &dyn Tool,
    prepared: &Prepared,
    ctx: &ToolContext,
    out: &dyn OutputSink,
    first: ToolOutput,
    screen: &(dyn Fn(ToolOutput) -> futures::future::BoxFuture<'s, ToolOutput> + Sync),
) -> ToolOutput {
    if first.is_error {
        return first;
    }
    let mut plan = first.content;
    let unreviewed = shared.settings().skip_permissions || engine.config().unattended;
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
                    // The output guard sees a refined plan before the user does.
                    let revised = screen(tool.execute(&again, ctx, out).await).await;
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
