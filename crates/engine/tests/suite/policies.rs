//! The approval order of node spec §4.10 in the turn loop: tool policies (deny / allow /
//! ask, priority, first match wins), the `Blocked by tool policy` results, heuristic
//! verdicts on `approve_request` items, and the `auto-review` and `full` postures.

use std::sync::Arc;

use turnstone_engine::{Event, ToolItem};
use turnstone_governance::{PolicyAction, PolicySet, Posture, ToolPolicy};
use turnstone_proto::receipt::{EffectStatus, Interruption, receipt_text};

use super::harness::*;

fn policy(id: &str, pattern: &str, action: PolicyAction, priority: i64) -> ToolPolicy {
    ToolPolicy {
        policy_id: id.into(),
        name: id.into(),
        tool_pattern: pattern.into(),
        action,
        priority,
        enabled: true,
    }
}

fn set_policies(h: &Harness, policies: Vec<ToolPolicy>) {
    h.manager
        .engine()
        .set_policies(Arc::new(PolicySet::new(policies)));
}

fn approve_items(events: &[Event]) -> Option<(Vec<ToolItem>, bool)> {
    events.iter().find_map(|e| match e {
        Event::ApproveRequest {
            items,
            judge_pending,
            ..
        } => Some((items.clone(), *judge_pending)),
        _ => None,
    })
}

fn tool_info(events: &[Event]) -> Option<Vec<ToolItem>> {
    events.iter().find_map(|e| match e {
        Event::ToolInfo { items } => Some(items.clone()),
        _ => None,
    })
}

const BASH_BLOCKED: &str = "Blocked by tool policy (pattern match for 'bash')";

#[tokio::test]
async fn a_deny_policy_blocks_the_call_without_asking() {
    let h = Harness::start().await;
    set_policies(&h, vec![policy("no-bash", "bash", PolicyAction::Deny, 0)]);
    let ws = h.workstream();
    let marker = h.path("ran");
    let mut sub = send(&ws, &format!("TOOL: touch {}", marker.display()));
    let events = read_turn(&mut sub).await;
    assert!(approve_items(&events).is_none(), "{:?}", types(&events));
    let info = tool_info(&events).expect("tool_info");
    assert_eq!(info[0].error.as_deref(), Some(BASH_BLOCKED));
    assert!(!marker.exists(), "a denied command must not run");
    assert_eq!(
        tool_results(&events),
        vec![("bash".to_string(), BASH_BLOCKED.to_string(), true)]
    );
    assert_eq!(tool_messages(&ws.history()), [BASH_BLOCKED]);
    assert!(content(&events).starts_with("done: Blocked by tool policy"));
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn an_allow_policy_runs_the_call_unasked_and_priority_decides() {
    let h = Harness::start().await;
    // The higher priority wins over the catch-all deny.
    set_policies(
        &h,
        vec![
            policy("deny-all", "*", PolicyAction::Deny, 0),
            policy("allow-bash", "bash", PolicyAction::Allow, 10),
        ],
    );
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo allowed");
    let events = read_turn(&mut sub).await;
    assert!(approve_items(&events).is_none(), "{:?}", types(&events));
    assert!(tool_info(&events).is_some());
    assert!(tool_results(&events)[0].1.contains("allowed"));

    // Equal priorities: the first given wins.
    set_policies(
        &h,
        vec![
            policy("deny-first", "ba*", PolicyAction::Deny, 5),
            policy("allow-second", "bash", PolicyAction::Allow, 5),
        ],
    );
    let mut sub = send(&ws, "TOOL: echo again");
    let events = read_turn(&mut sub).await;
    assert_eq!(tool_results(&events)[0].1, BASH_BLOCKED);
}

#[tokio::test]
async fn an_ask_policy_still_asks_even_under_a_lower_allow() {
    let h = Harness::start().await;
    set_policies(
        &h,
        vec![
            policy("allow", "*", PolicyAction::Allow, 0),
            policy("ask-bash", "bash", PolicyAction::Ask, 1),
        ],
    );
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo asked");
    let before = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    let (items, _) = approve_items(&before).unwrap();
    assert_eq!(items[0].func_name, "bash");
    ws.approve(true, None, false);
    let events = read_turn(&mut sub).await;
    assert!(tool_results(&events)[0].1.contains("asked"));
}

#[tokio::test]
async fn a_denial_beside_an_undecided_call_asks_about_the_rest_only() {
    let h = Harness::start().await;
    set_policies(
        &h,
        vec![policy("no-writes", "write_file", PolicyAction::Deny, 0)],
    );
    let ws = h.workstream();
    let target = h.path("w.txt");
    let mut sub = send(
        &ws,
        &format!(
            "CALL:write_file {{\"path\": \"{}\", \"content\": \"x\"}}\nTOOL: echo beside",
            target.display()
        ),
    );
    let before = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    let (items, judge_pending) = approve_items(&before).unwrap();
    assert!(!judge_pending, "no LLM judge runs");
    assert_eq!(
        items[0].error.as_deref(),
        Some("Blocked by tool policy (pattern match for 'write_file')")
    );
    assert!(items[0].verdict.is_none(), "a blocked call is not judged");
    assert!(items[1].verdict.is_some());
    ws.approve(true, None, false);
    let events = read_turn(&mut sub).await;
    assert!(!target.exists(), "the denied write never ran");
    let history = ws.history();
    let messages = tool_messages(&history);
    assert_eq!(
        messages[0],
        "Blocked by tool policy (pattern match for 'write_file')"
    );
    assert!(messages[1].contains("beside"), "{messages:?}");
    assert!(tool_results(&events).len() == 2);
    assert_provider_acceptable(&history);
}

#[tokio::test]
async fn a_batch_policies_resolve_with_a_denial_runs_nothing_gated() {
    let h = Harness::start().await;
    set_policies(
        &h,
        vec![
            policy("no-bash", "bash", PolicyAction::Deny, 0),
            policy("writes-ok", "write_file", PolicyAction::Allow, 0),
        ],
    );
    let ws = h.workstream();
    let target = h.path("w.txt");
    let mut sub = send(
        &ws,
        &format!(
            "TOOL: echo no\nCALL:write_file {{\"path\": \"{}\", \"content\": \"x\"}}",
            target.display()
        ),
    );
    let events = read_turn(&mut sub).await;
    assert!(approve_items(&events).is_none(), "{:?}", types(&events));
    assert!(!target.exists(), "a denial applies to the whole batch");
    // The allowed call's result is the batch's denial with its receipt: it never started.
    let not_run = receipt_text(
        "Blocked by tool policy",
        EffectStatus::None,
        Interruption::Stopped,
    );
    assert_eq!(
        tool_messages(&ws.history()),
        [BASH_BLOCKED, not_run.as_str()]
    );
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn asked_items_carry_heuristic_verdicts() {
    let h = Harness::start().await;
    let ws = h.workstream();
    // Never approved: the batch is denied below. (`rm -rf /` itself never gets this far:
    // the bash tool refuses it at prepare time.)
    let mut sub = send(&ws, "TOOL: sudo rm -rf /etc\nTOOL: ls");
    let before = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    let (items, judge_pending) = approve_items(&before).unwrap();
    assert!(!judge_pending);
    let verdicts: Vec<_> = items
        .iter()
        .map(|i| i.verdict.clone().expect("every gated item has a verdict"))
        .collect();
    assert_eq!(verdicts[0].risk_level, "critical");
    assert_eq!(verdicts[0].recommendation, "deny");
    assert_eq!(verdicts[0].call_id, items[0].call_id);
    assert_eq!(verdicts[1].risk_level, "low");
    assert_eq!(verdicts[1].recommendation, "approve");
    for v in &verdicts {
        assert_eq!(v.tier, "heuristic");
        assert_eq!(v.verdict_id.len(), 32);
        assert_eq!(v.func_name, "bash");
    }
    ws.approve(false, None, false);
    read_turn(&mut sub).await;
}

#[tokio::test]
async fn auto_review_runs_a_low_risk_batch_and_asks_about_a_critical_one() {
    let h = Harness::start().await;
    let ws = h.workstream();
    ws.set_posture(Posture::AutoReview);
    assert_eq!(ws.posture(), Posture::AutoReview);
    let mut sub = send(&ws, "TOOL: ls");
    let events = read_turn(&mut sub).await;
    assert!(approve_items(&events).is_none(), "{:?}", types(&events));
    let info = tool_info(&events).expect("tool_info");
    assert_eq!(
        info[0].verdict.as_ref().map(|v| v.risk_level.as_str()),
        Some("low"),
        "the verdict that let it run is shown"
    );
    assert_eq!(tool_results(&events).len(), 1);

    // One unqualified item sends the whole batch to the human.
    let mut sub = send(&ws, "TOOL: ls\nTOOL: sudo rm -rf /etc");
    let before = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    let (items, _) = approve_items(&before).unwrap();
    assert_eq!(items.len(), 2);
    ws.approve(false, None, false);
    let events = read_turn(&mut sub).await;
    assert!(tool_results(&events).is_empty(), "nothing ran");
}

#[tokio::test]
async fn full_posture_approves_everything_but_a_deny_policy() {
    let h = Harness::start().await;
    let ws = h.workstream();
    ws.set_posture(Posture::Full);
    let mut sub = send(&ws, "TOOL: echo full");
    let events = read_turn(&mut sub).await;
    assert!(approve_items(&events).is_none(), "{:?}", types(&events));
    assert!(tool_results(&events)[0].1.contains("full"));

    set_policies(&h, vec![policy("no-bash", "bash", PolicyAction::Deny, 0)]);
    let marker = h.path("ran");
    let mut sub = send(&ws, &format!("TOOL: touch {}", marker.display()));
    let events = read_turn(&mut sub).await;
    assert!(!marker.exists());
    assert_eq!(tool_results(&events)[0].1, BASH_BLOCKED);
}
