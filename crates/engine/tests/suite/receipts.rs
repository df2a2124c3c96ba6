//! Effect receipts: every call of a cancelled, denied or timed-out batch says what it did, in
//! the tool result the model reads and on `turn_complete.receipts`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use turnstone_engine::{
    CreateOptions, EffectStatus, Event, Journal, Manager, ManagerConfig, Receipt,
};
use turnstone_llm::ChatMessage;

use super::harness::*;

/// The receipts `turn_complete` carried.
fn receipts(events: &[Event]) -> Vec<Receipt> {
    events
        .iter()
        .find_map(|e| match e {
            Event::TurnComplete { receipts, .. } => Some(receipts.clone()),
            _ => None,
        })
        .expect("turn_complete")
}

/// `(call id, status)` of each receipt, in call order.
fn statuses(receipts: &[Receipt]) -> Vec<(String, EffectStatus)> {
    receipts
        .iter()
        .map(|r| (r.call_id.clone(), r.status))
        .collect()
}

/// The call ids of the history's (last) assistant message with tool calls.
fn call_ids(history: &[ChatMessage]) -> Vec<String> {
    history
        .iter()
        .rev()
        .find(|m| !m.tool_calls.is_empty())
        .map(|m| m.tool_calls.iter().map(|c| c.id.clone()).collect())
        .unwrap_or_default()
}

/// The tool message answering `call_id`.
fn result_of(history: &[ChatMessage], call_id: &str) -> String {
    history
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some(call_id))
        .and_then(|m| m.content.clone())
        .unwrap_or_else(|| panic!("no result for {call_id}: {history:#?}"))
}

#[tokio::test]
async fn a_call_cancelled_while_awaiting_approval_never_started() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let marker = h.path("ran");
    let mut sub = send(&ws, &format!("TOOL: touch {}", marker.display()));
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    let history = ws.history();
    let ids = call_ids(&history);
    assert_eq!(
        statuses(&receipts(&events)),
        [(ids[0].clone(), EffectStatus::None)]
    );
    assert_eq!(receipts(&events)[0].func_name, "bash");
    assert_eq!(
        tool_messages(&history),
        ["Denied by user: Cancelled by user. Effect: none \u{2014} it never started."]
    );
    assert!(!marker.exists());
    assert_provider_acceptable(&history);
}

#[tokio::test]
async fn a_cancelled_command_that_printed_output_is_partial() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let marker = h.path("finished");
    let cmd = format!(
        r#"CALL:bash {{"command": "echo working; sleep 30; touch {}", "timeout": 60}}"#,
        marker.display()
    );
    let mut sub = send(&ws, &cmd);
    read_until(&mut sub, |e| matches!(e, Event::ToolOutputChunk { .. })).await;
    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    let history = ws.history();
    let ids = call_ids(&history);
    assert_eq!(
        statuses(&receipts(&events)),
        [(ids[0].clone(), EffectStatus::Partial)]
    );
    let text = result_of(&history, &ids[0]);
    assert!(
        text.starts_with("Cancelled by user. Effect: partial \u{2014}"),
        "{text}"
    );
    assert!(!marker.exists());
    assert_provider_acceptable(&history);
}

#[tokio::test]
async fn a_batch_keeps_the_finished_result_and_receipts_the_cancelled_call() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let pidfile = h.path("pid");
    let slow = format!(
        r#"CALL:bash {{"command": "echo $$ > {}; sleep 30", "timeout": 60}}"#,
        pidfile.display()
    );
    let fast = r#"CALL:bash {"command": "echo quick"}"#;
    let mut sub = send(&ws, &format!("{slow}\n{fast}"));
    read_until(&mut sub, |e| matches!(e, Event::ToolResult { .. })).await;
    turnstone_testkit::assert_eventually!(pidfile.exists(), "the slow command never started");
    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    let history = ws.history();
    let ids = call_ids(&history);
    // The slow call printed nothing (its one line went to a file): started, outcome unknown.
    assert_eq!(
        statuses(&receipts(&events)),
        [
            (ids[0].clone(), EffectStatus::Unknown),
            (ids[1].clone(), EffectStatus::Completed)
        ]
    );
    assert!(
        result_of(&history, &ids[0]).starts_with("Cancelled by user. Effect: unknown \u{2014}")
    );
    assert!(result_of(&history, &ids[1]).contains("quick"));
    assert!(!result_of(&history, &ids[1]).contains("Effect:"));
    assert_provider_acceptable(&history);
}

#[tokio::test]
async fn a_call_queued_behind_a_running_one_never_started() {
    let h = Harness::with(|o| {
        o.config.skip_permissions = true;
        o.config.max_parallel_tools = 1;
    })
    .await;
    let ws = h.workstream();
    let second = h.path("second");
    let first = r#"CALL:bash {"command": "echo first; sleep 30", "timeout": 60}"#;
    let queued = format!(r#"CALL:bash {{"command": "touch {}"}}"#, second.display());
    let mut sub = send(&ws, &format!("{first}\n{queued}"));
    read_until(&mut sub, |e| matches!(e, Event::ToolOutputChunk { .. })).await;
    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    let history = ws.history();
    let ids = call_ids(&history);
    assert_eq!(
        statuses(&receipts(&events)),
        [
            (ids[0].clone(), EffectStatus::Partial),
            (ids[1].clone(), EffectStatus::None)
        ]
    );
    assert_eq!(
        result_of(&history, &ids[1]),
        "Cancelled by user. Effect: none \u{2014} it never started."
    );
    assert!(!second.exists());
}

#[tokio::test]
async fn an_approval_timeout_receipts_none_and_the_turn_goes_on() {
    let h = Harness::with(|o| o.config.approval_timeout = Duration::from_millis(200)).await;
    let ws = h.workstream();
    let marker = h.path("ran");
    let mut sub = send(&ws, &format!("TOOL: touch {}", marker.display()));
    let events = read_turn(&mut sub).await;
    let history = ws.history();
    let ids = call_ids(&history);
    assert_eq!(
        statuses(&receipts(&events)),
        [(ids[0].clone(), EffectStatus::None)]
    );
    let text = result_of(&history, &ids[0]);
    assert!(
        text.starts_with("Denied by user: Approval timed out after")
            && text.ends_with("Effect: none \u{2014} it never started."),
        "{text}"
    );
    // The model read the receipt.
    assert!(
        content(&events).contains("Effect: none"),
        "{}",
        content(&events)
    );
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_batch_that_finished_has_no_receipts() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo fine");
    let events = read_turn(&mut sub).await;
    assert!(receipts(&events).is_empty());
    let json = serde_json::to_string(events.last().unwrap()).unwrap();
    assert!(!json.contains("receipts"), "{json}");
}

/// A journal that records the session settings it is handed.
#[derive(Default)]
struct Settings(Mutex<Vec<(String, Option<String>)>>);

impl Journal for Settings {
    fn appended(&self, _: &str, _: &[ChatMessage]) {}
    fn replaced(&self, _: &str, _: &[ChatMessage]) {}
    fn config_changed(&self, _: &str, key: &str, value: Option<&str>) {
        self.0
            .lock()
            .unwrap()
            .push((key.to_string(), value.map(str::to_string)));
    }
}

#[tokio::test]
async fn the_journal_gets_a_started_marker_per_batch_removed_at_the_fold() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let journal = Arc::new(Settings::default());
    let manager = Manager::new(h.manager.engine().clone(), ManagerConfig::default())
        .with_journal(journal.clone());
    let (ws, _) = manager.create(CreateOptions::default()).unwrap();
    let mut sub = send(&ws, "TOOL: echo marked");
    read_turn(&mut sub).await;
    let id = call_ids(&ws.history())[0].clone();
    let key = format!("tools_started:{id}");
    let markers: Vec<_> = journal
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("tools_started:"))
        .cloned()
        .collect();
    assert_eq!(
        markers,
        [
            (key.clone(), Some("[]".to_string())),
            (key.clone(), Some(format!(r#"["{id}"]"#))),
            (key, None)
        ]
    );
}
