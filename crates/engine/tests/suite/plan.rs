//! `plan_agent` and plan review: a read-only planning sub-agent run by the engine's own
//! turn loop against the fake model over HTTP, its plan reviewed through the workstream
//! handle (accept, reject, refine, cancel, timeout), the accepted plan written to a real
//! file in a temp dir.

use std::time::Duration;

use serde_json::{Value, json};
use turnstone_engine::{
    Event, MAX_REFINEMENTS, PlanDecision, PlanOutcome, Subscription, WorkstreamHandle, WsState,
    register_plan_agent,
};

use super::harness::*;

/// Marks the planner's requests: the start of its system prompt.
const PLANNER_PROMPT: &str = "You are a planning sub-agent of Turnstone";

fn is_planner(request: &Value) -> bool {
    request["messages"][0]["role"] == "system"
        && request["messages"][0]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with(PLANNER_PROMPT))
}

fn planner_requests(h: &Harness) -> Vec<Value> {
    h.llm.requests().into_iter().filter(is_planner).collect()
}

/// The parent's model message that calls `plan_agent` with `goal`.
fn plan_call(goal: &str) -> String {
    format!("CALL:plan_agent {}", json!({ "goal": goal }))
}

/// A harness with `plan_agent` registered; its tool approval is answered with "always"
/// up front so the tests start at the review.
async fn harness(tweak: impl FnOnce(&mut Options)) -> Harness {
    let h = Harness::with(|o| {
        o.config.auto_approve_labels.insert("plan_agent".into());
        tweak(o);
    })
    .await;
    register_plan_agent(h.manager.engine(), None).unwrap();
    h
}

fn plan_file(h: &Harness, ws: &WorkstreamHandle) -> std::path::PathBuf {
    h.path(&format!(".plan-{}.md", ws.id()))
}

/// Reads to the next `plan_review`; returns its content and the events before it.
async fn next_review(sub: &mut Subscription) -> (String, Vec<Event>) {
    let events = read_until(sub, |e| matches!(e, Event::PlanReview { .. })).await;
    let Some(Event::PlanReview { content, .. }) = events.last() else {
        unreachable!()
    };
    (content.clone(), events)
}

fn reviews(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::PlanReview { .. }))
        .count()
}

fn resolutions(events: &[Event]) -> Vec<(PlanDecision, String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PlanResolved {
                decision,
                feedback,
                decided_by,
                ..
            } => Some((*decision, feedback.clone(), decided_by.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_accepted_plan_is_saved_and_the_result_names_the_file() {
    let h = Harness::start().await;
    register_plan_agent(h.manager.engine(), None).unwrap();
    let ws = h.workstream();
    let goal = "Split the parser module into lexer and grammar";
    let mut sub = send(&ws, &plan_call(goal));
    // The call itself needs approval, like task_agent.
    let events = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    let Some(Event::ApproveRequest { items, .. }) = events.last() else {
        unreachable!()
    };
    assert_eq!(items[0].func_name, "plan_agent");
    assert!(items[0].needs_approval);
    assert_eq!(items[0].approval_label, "plan_agent");
    assert_eq!(items[0].preview, goal);
    ws.approve(true, None, false);

    let (plan, before) = next_review(&mut sub).await;
    // The fake planner answers with its first message: the goal.
    assert_eq!(plan, goal);
    assert_eq!(
        states(&before).last(),
        Some(&WsState::Attention),
        "attention before the review: {:?}",
        types(&before)
    );
    assert_eq!(ws.state(), WsState::Attention);
    let pending = ws.pending_plan_review().expect("the review is pending");
    assert!(matches!(&pending.event, Event::PlanReview { content, .. } if content == goal));
    assert!(ws.is_busy(), "the turn waits for the review");

    let PlanOutcome::Resolved(verdict) = ws.plan_feedback("") else {
        panic!("the first reply decides")
    };
    assert_eq!(verdict.decision, PlanDecision::Accept);
    let after = read_turn(&mut sub).await;
    assert_eq!(
        resolutions(&after),
        [(PlanDecision::Accept, String::new(), "user".to_string())]
    );
    assert_eq!(
        states(&after).first(),
        Some(&WsState::Running),
        "running again after the reply: {:?}",
        types(&after)
    );
    assert!(ws.pending_plan_review().is_none());

    // The plan file holds the plan; the result is the plan plus the file's path.
    let path = plan_file(&h, &ws);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{goal}\n"));
    let results = tool_messages(&ws.history());
    assert_eq!(results.len(), 1);
    assert!(results[0].starts_with(goal), "{results:?}");
    assert!(
        results[0].ends_with(&format!("[Plan saved to {}]", path.display())),
        "{results:?}"
    );
    assert_eq!(
        tool_results(&after)[0].1,
        results[0],
        "tool_result is the final result"
    );
    assert_provider_acceptable(&ws.history());

    // Decided once: a late reply gets the recorded verdict.
    match ws.plan_feedback("no") {
        PlanOutcome::NotPending(Some(v)) => {
            assert_eq!(v, verdict);
        }
        other => panic!("{other:?}"),
    }

    // The planner: its own prompt, the goal as its message, read-only agent tools only.
    let planner = planner_requests(&h);
    assert_eq!(planner.len(), 1);
    assert_eq!(planner[0]["messages"][1]["content"], goal);
    let tools = tool_names(&planner[0]);
    assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
    let agent = h.manager.engine().registry().agent_names();
    for name in &tools {
        assert!(agent.contains(name), "{name} is not an agent tool");
    }
    for never in [
        "bash",
        "write_file",
        "edit_file",
        "plan_agent",
        "task_agent",
    ] {
        assert!(
            !tools.contains(&never.to_string()),
            "{never} offered: {tools:?}"
        );
    }
}

#[tokio::test]
async fn a_rejected_plan_is_not_saved_and_the_result_says_so() {
    let h = harness(|_| {}).await;
    let ws = h.workstream();
    let mut sub = send(&ws, &plan_call("Rewrite everything in COBOL"));
    next_review(&mut sub).await;
    let PlanOutcome::Resolved(v) = ws.plan_feedback("  No ") else {
        panic!()
    };
    assert_eq!(
        (v.decision, v.feedback.as_str()),
        (PlanDecision::Reject, "No")
    );
    let events = read_turn(&mut sub).await;
    assert_eq!(resolutions(&events)[0].0, PlanDecision::Reject);
    let results = tool_messages(&ws.history());
    assert!(
        results[0].starts_with("Rewrite everything in COBOL"),
        "{results:?}"
    );
    assert!(
        results[0].contains("[The user rejected this plan. Do not carry it out"),
        "{results:?}"
    );
    assert!(!plan_file(&h, &ws).exists(), "a rejected plan is not saved");
    assert_eq!(planner_requests(&h).len(), 1, "no refinement");
    assert_eq!(ws.state(), WsState::Idle);
}

#[tokio::test]
async fn feedback_refines_the_plan_and_each_revision_is_reviewed() {
    let h = harness(|_| {}).await;
    let ws = h.workstream();
    let goal = "Add caching to the HTTP client";
    let mut sub = send(&ws, &plan_call(goal));
    let (first, _) = next_review(&mut sub).await;
    assert_eq!(first, goal);

    let PlanOutcome::Resolved(v) = ws.plan_feedback("add a rollback step") else {
        panic!()
    };
    assert_eq!(v.decision, PlanDecision::Refine);
    let (second, between) = next_review(&mut sub).await;
    assert_eq!(
        resolutions(&between),
        [(
            PlanDecision::Refine,
            "add a rollback step".to_string(),
            "user".to_string()
        )]
    );
    // Running while the planner revises, attention again for the next review.
    let s = states(&between);
    assert_eq!(s.first(), Some(&WsState::Running), "{s:?}");
    assert_eq!(s.last(), Some(&WsState::Attention), "{s:?}");
    assert!(second.contains("add a rollback step"), "{second}");
    assert!(second.contains(goal), "{second}");

    ws.plan_feedback("also measure the hit rate");
    let (third, _) = next_review(&mut sub).await;
    assert!(third.contains("also measure the hit rate"), "{third}");
    ws.plan_feedback("");
    let rest = read_turn(&mut sub).await;
    assert_eq!(resolutions(&rest)[0].0, PlanDecision::Accept);

    // Three planner runs; the second saw the first plan and the feedback.
    let planner = planner_requests(&h);
    assert_eq!(planner.len(), 3);
    let second_request = planner[1]["messages"][1]["content"].as_str().unwrap();
    assert!(second_request.starts_with(goal), "{second_request}");
    assert!(
        second_request.contains("add a rollback step"),
        "{second_request}"
    );
    let third_request = planner[2]["messages"][1]["content"].as_str().unwrap();
    assert!(third_request.contains(&second), "{third_request}");

    // The final (third) plan is saved and returned.
    assert_eq!(
        std::fs::read_to_string(plan_file(&h, &ws)).unwrap(),
        format!("{third}\n")
    );
    let results = tool_messages(&ws.history());
    assert!(results[0].starts_with(&third), "{results:?}");
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn refinement_stops_after_five_rounds() {
    let h = harness(|_| {}).await;
    let ws = h.workstream();
    let mut sub = send(&ws, &plan_call("Migrate the build to a new tool"));
    let mut all = Vec::new();
    let mut last_plan = String::new();
    for round in 1..=MAX_REFINEMENTS {
        let (plan, events) = next_review(&mut sub).await;
        all.extend(events);
        last_plan = plan;
        assert!(matches!(
            ws.plan_feedback(&format!("change number {round}")),
            PlanOutcome::Resolved(_)
        ));
    }
    let (sixth, events) = next_review(&mut sub).await;
    all.extend(events);
    assert!(sixth.contains("change number 5") && sixth.contains(&last_plan));
    // A sixth refinement is not run: the plan stands with the feedback noted.
    let PlanOutcome::Resolved(v) = ws.plan_feedback("change number 6") else {
        panic!()
    };
    assert_eq!(v.decision, PlanDecision::Refine);
    all.extend(read_turn(&mut sub).await);
    assert_eq!(reviews(&all), MAX_REFINEMENTS + 1);
    assert_eq!(
        planner_requests(&h).len(),
        MAX_REFINEMENTS + 1,
        "1 plan + 5 revisions"
    );
    let results = tool_messages(&ws.history());
    assert!(results[0].starts_with(&sixth), "{results:?}");
    assert!(
        results[0].contains("after 5 refinement rounds (the limit)")
            && results[0].contains("change number 6"),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(plan_file(&h, &ws)).unwrap(),
        format!("{sixth}\n")
    );
}

#[tokio::test]
async fn cancelling_during_the_review_rejects_it_and_ends_the_turn() {
    let h = harness(|_| {}).await;
    let ws = h.workstream();
    let mut sub = send(&ws, &plan_call("Plan a database migration"));
    next_review(&mut sub).await;
    let requests = h.llm.request_count();
    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    assert_eq!(
        resolutions(&events),
        [(
            PlanDecision::Reject,
            "Cancelled by user".to_string(),
            "cancel".to_string()
        )]
    );
    assert!(types(&events).contains(&"cancelled"));
    assert_eq!(ws.state(), WsState::Idle);
    assert!(ws.pending_plan_review().is_none());
    assert_eq!(ws.last_plan_verdict().unwrap().decided_by, "cancel");
    let results = tool_messages(&ws.history());
    assert_eq!(results.len(), 1);
    assert!(
        results[0].starts_with("Cancelled by user. Effect: "),
        "{results:?}"
    );
    assert_provider_acceptable(&ws.history());
    assert!(!plan_file(&h, &ws).exists());
    assert_eq!(
        h.llm.request_count(),
        requests,
        "no request after the cancel"
    );
    // A reply after the cancel is told the recorded verdict.
    assert!(matches!(
        ws.plan_feedback(""),
        PlanOutcome::NotPending(Some(v)) if v.decided_by == "cancel"
    ));
}

#[tokio::test]
async fn an_unanswered_review_times_out_as_a_rejection() {
    let h = harness(|o| o.config.approval_timeout = Duration::from_millis(300)).await;
    let ws = h.workstream();
    let mut sub = send(&ws, &plan_call("Plan the release"));
    let events = read_turn(&mut sub).await;
    assert_eq!(reviews(&events), 1);
    let resolved = resolutions(&events);
    assert_eq!(resolved.len(), 1);
    let (decision, feedback, by) = &resolved[0];
    assert_eq!((*decision, by.as_str()), (PlanDecision::Reject, "timeout"));
    assert!(
        feedback.starts_with("Plan review timed out after"),
        "{feedback}"
    );
    let results = tool_messages(&ws.history());
    assert!(
        results[0].contains("Plan review timed out after") && results[0].contains("not approved"),
        "{results:?}"
    );
    assert!(!plan_file(&h, &ws).exists());
    assert_eq!(ws.last_plan_verdict().unwrap().decided_by, "timeout");
    assert_eq!(ws.state(), WsState::Idle);
}

#[tokio::test]
async fn blanket_auto_approve_skips_the_review_and_saves_the_plan() {
    let h = harness(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let mut sub = send(&ws, &plan_call("Plan the docs update"));
    let events = read_turn(&mut sub).await;
    assert_eq!(reviews(&events), 0, "{:?}", types(&events));
    assert!(!states(&events).contains(&WsState::Error));
    assert_eq!(
        std::fs::read_to_string(plan_file(&h, &ws)).unwrap(),
        "Plan the docs update\n"
    );
    let results = tool_messages(&ws.history());
    assert!(results[0].contains("[Plan saved to "), "{results:?}");
}

#[tokio::test]
async fn a_bad_goal_is_a_tool_error_and_the_legacy_name_still_plans() {
    let h = harness(|_| {}).await;
    let registry = h.manager.engine().registry();
    let def = registry.get("plan_agent").unwrap().definition().clone();
    assert!(!def.meta.agent && !def.meta.task_agent && !def.meta.auto_approve);
    assert_eq!(
        registry.provenance("plan_agent"),
        Some(turnstone_tools::Provenance::Builtin)
    );
    let ws = h.workstream();
    let mut sub = send(&ws, r#"CALL:plan_agent {"goal": "   "}"#);
    read_turn(&mut sub).await;
    let results = tool_messages(&ws.history());
    // (The engine prefixes prepare errors with `Error: ` once more, as for every tool.)
    assert_eq!(results.len(), 1);
    assert!(
        results[0].ends_with("Error: argument 'goal' must not be empty"),
        "{results:?}"
    );
    assert!(planner_requests(&h).is_empty());

    // A saved transcript's `plan {prompt}` runs the same tool (and its review).
    let mut sub = send(&ws, r#"CALL:plan {"prompt": "Tidy the imports"}"#);
    let (plan, _) = next_review(&mut sub).await;
    assert_eq!(plan, "Tidy the imports");
    ws.plan_feedback("");
    read_turn(&mut sub).await;
    assert!(plan_file(&h, &ws).exists());
}
