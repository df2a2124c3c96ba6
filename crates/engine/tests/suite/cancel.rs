use turnstone_engine::{Event, WsState};
use turnstone_llm::Role;

use super::harness::*;

#[tokio::test]
async fn cancel_during_streaming_keeps_partial_text_and_ends_idle() {
    let h = Harness::with(|o| o.llm.tokens_per_sec = Some(40.0)).await;
    let ws = h.workstream();
    let long = "word ".repeat(200);
    let mut sub = send(&ws, &long);
    read_until(&mut sub, |e| matches!(e, Event::Content { .. })).await;
    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    let t = types(&events);
    assert!(
        t.contains(&"cancelled") && t.contains(&"stream_end"),
        "{t:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Info { message } if message == "[Generation cancelled]"))
    );
    assert_eq!(ws.state(), WsState::Idle);
    let history = ws.history();
    assert_eq!(history.len(), 2);
    let partial = history[1].content.clone().unwrap();
    assert!(
        !partial.is_empty() && partial.len() < long.len(),
        "partial text kept: {partial:?}"
    );
    assert_provider_acceptable(&history);

    // The workstream is usable afterwards.
    let mut sub = send(&ws, "again");
    assert_eq!(content(&read_turn(&mut sub).await), "again");
}

#[tokio::test]
async fn cancel_during_approval_denies_and_leaves_a_consistent_history() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let marker = h.path("ran");
    let mut sub = send(&ws, &format!("TOOL: touch {}", marker.display()));
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    assert!(matches!(
        &events[0],
        Event::ApprovalResolved { approved: false, feedback, .. } if feedback == "Cancelled by user"
    ));
    assert!(matches!(events[1], Event::Cancelled));
    assert!(!marker.exists());
    assert!(ws.pending_approval().is_none());
    assert_eq!(ws.last_verdict().unwrap().decided_by, "cancel");
    let history = ws.history();
    assert_provider_acceptable(&history);
    assert_eq!(
        tool_messages(&history),
        ["Denied by user: Cancelled by user. Effect: none \u{2014} it never started."]
    );
    assert_eq!(
        h.llm.request_count(),
        1,
        "no new LLM request after a cancel"
    );
}

#[tokio::test]
async fn cancel_during_tool_execution_kills_the_tool_and_synthesises_results() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let marker = h.path("finished");
    let pidfile = h.path("pid");
    let cmd = format!(
        r#"CALL:bash {{"command": "echo $$ > {}; sleep 30; touch {}", "timeout": 60}}"#,
        pidfile.display(),
        marker.display()
    );
    let fast = r#"CALL:bash {"command": "echo quick"}"#;
    let mut sub = send(&ws, &format!("{cmd}\n{fast}"));
    read_until(&mut sub, |e| matches!(e, Event::ToolResult { .. })).await;
    turnstone_testkit::assert_eventually!(pidfile.exists(), "the slow command never started");
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    assert!(types(&events).contains(&"cancelled"));
    assert_eq!(ws.state(), WsState::Idle);
    let history = ws.history();
    assert_provider_acceptable(&history);
    let results = tool_messages(&history);
    assert_eq!(results.len(), 2);
    assert!(results.iter().any(|r| r.contains("quick")), "{results:?}");
    assert!(
        results
            .iter()
            .any(|r| r.starts_with("Cancelled by user. Effect: unknown")),
        "{results:?}"
    );
    assert_eq!(history.last().unwrap().role(), Role::Tool);
    let pid: u32 = pid.parse().unwrap();
    // Killed (a zombie until tokio reaps it) or gone: either way it no longer runs.
    turnstone_testkit::assert_eventually!(
        !turnstone_testkit::process_running(pid),
        "the cancelled command still runs"
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn cancel_when_idle_is_a_no_op() {
    let h = Harness::start().await;
    let ws = h.workstream();
    assert!(!ws.cancel());
    let mut sub = send(&ws, "still fine");
    assert_eq!(content(&read_turn(&mut sub).await), "still fine");
}
