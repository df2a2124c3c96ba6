use std::time::Duration;

use turnstone_engine::{ApproveOutcome, Event, WsState};

use super::harness::*;

fn approve_request(events: &[Event]) -> Option<(String, Vec<turnstone_engine::ToolItem>)> {
    events.iter().find_map(|e| match e {
        Event::ApproveRequest {
            request_id, items, ..
        } => Some((request_id.clone(), items.clone())),
        _ => None,
    })
}

#[tokio::test]
async fn an_approved_tool_call_runs_and_the_loop_continues() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo hi");
    let before = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    let (_, items) = approve_request(&before).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].func_name, "bash");
    assert!(items[0].needs_approval);
    assert!(items[0].header.contains("echo hi"), "{:?}", items[0].header);
    assert_eq!(ws.state(), WsState::Attention);
    assert!(
        ws.pending_approval().is_some(),
        "a late subscriber can be re-sent the request"
    );

    assert!(matches!(
        ws.approve(true, None, false),
        ApproveOutcome::Resolved(_)
    ));
    let after = read_turn(&mut sub).await;
    assert!(matches!(
        after[0],
        Event::ApprovalResolved { approved: true, .. }
    ));
    let results = tool_results(&after);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("hi"), "{results:?}");
    assert!(
        content(&after).starts_with("done: "),
        "the model saw the tool result"
    );
    assert_provider_acceptable(&ws.history());
    assert!(ws.pending_approval().is_none());

    // The first decision won; a second one is told the recorded verdict.
    match ws.approve(false, Some("too late".into()), false) {
        ApproveOutcome::NotPending(Some(v)) => assert!(v.approved && v.decided_by == "user"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_denied_call_never_runs_and_the_model_gets_the_feedback() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let marker = h.path("ran");
    let mut sub = send(&ws, &format!("TOOL: touch {}", marker.display()));
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    ws.approve(false, Some("not now".into()), false);
    let events = read_turn(&mut sub).await;
    assert!(
        tool_results(&events).is_empty(),
        "denied tools emit no tool_result"
    );
    assert!(!marker.exists(), "a denied command must not run");
    let history = ws.history();
    assert_eq!(
        tool_messages(&history),
        ["Denied by user: not now. Effect: none \u{2014} it never started."]
    );
    assert!(content(&events).starts_with("done: Denied by user: not now"));
    assert_provider_acceptable(&history);
}

#[tokio::test]
async fn an_unanswered_approval_times_out_as_a_denial() {
    let h = Harness::with(|o| o.config.approval_timeout = Duration::from_millis(200)).await;
    let ws = h.workstream();
    let marker = h.path("ran");
    let mut sub = send(&ws, &format!("TOOL: touch {}", marker.display()));
    let events = read_turn(&mut sub).await;
    let resolved = events.iter().find_map(|e| match e {
        Event::ApprovalResolved {
            approved, feedback, ..
        } => Some((*approved, feedback.clone())),
        _ => None,
    });
    let (approved, feedback) = resolved.unwrap();
    assert!(!approved);
    assert!(
        feedback.starts_with("Approval timed out after"),
        "{feedback}"
    );
    assert!(!marker.exists());
    assert_eq!(ws.last_verdict().unwrap().decided_by, "timeout");
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn always_approves_later_batches_of_the_same_label() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo first");
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    ws.approve(true, None, true);
    read_turn(&mut sub).await;
    assert!(ws.always_approved().contains("bash"));

    let mut sub = send(&ws, "TOOL: echo second");
    let events = read_turn(&mut sub).await;
    assert!(
        !types(&events).contains(&"approve_request"),
        "{:?}",
        types(&events)
    );
    assert!(types(&events).contains(&"tool_info"));
    assert!(tool_results(&events)[0].1.contains("second"));
}

#[tokio::test]
async fn read_only_tools_need_no_approval() {
    let h = Harness::start().await;
    std::fs::write(h.path("notes.txt"), "line one\nline two\n").unwrap();
    let ws = h.workstream();
    let mut sub = send(&ws, r#"CALL:read_file {"path": "notes.txt"}"#);
    let events = read_turn(&mut sub).await;
    assert!(!types(&events).contains(&"approve_request"));
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].1.contains("line two") && !results[0].2,
        "{results:?}"
    );
}

#[tokio::test]
async fn approval_feedback_on_an_approved_batch_becomes_a_user_message() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo ok");
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    ws.approve(true, Some("and then summarise".into()), false);
    read_turn(&mut sub).await;
    let history = ws.history();
    let users: Vec<_> = history
        .iter()
        .filter(|m| m.role() == turnstone_llm::Role::User)
        .filter_map(|m| m.content.clone())
        .collect();
    assert_eq!(users, ["TOOL: echo ok", "and then summarise"]);
    assert_provider_acceptable(&history);
}
