use turnstone_engine::{Event, WsState};
use turnstone_testkit::Fault;

use super::harness::*;

#[tokio::test]
async fn malformed_tool_call_json_becomes_a_tool_error_not_a_crash() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let mut sub = send(&ws, r#"CALL:read_file {"path": "x.txt""#);
    let events = read_turn(&mut sub).await;
    let errs = errors(&events);
    assert!(
        errs.iter()
            .any(|e| e.starts_with("Malformed tool call from model:")),
        "{errs:?}"
    );
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].2, "flagged as an error");
    assert!(results[0].1.contains("JSON parse error"), "{results:?}");
    assert_eq!(
        ws.state(),
        WsState::Idle,
        "the loop continued: the model saw the error"
    );
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn an_unknown_tool_is_named_without_fuzzy_matching() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "CALL:bassh {}");
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    let (name, output, is_error) = &results[0];
    assert_eq!(name, "bassh");
    assert!(is_error);
    assert!(
        output.contains("tool 'bassh' is not registered"),
        "{output}"
    );
    assert!(!output.contains("Did you mean"), "{output}");
    assert!(
        !types(&events).contains(&"approve_request"),
        "nothing to approve"
    );
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn invalid_arguments_are_a_tool_error() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(
        &ws,
        r#"CALL:bash {"command": "echo hi", "timeout": 100000}"#,
    );
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].2, "{results:?}");
    assert!(!types(&events).contains(&"approve_request"));
}

#[tokio::test]
async fn an_unreadable_file_is_an_error_result() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, r#"CALL:read_file {"path": "does/not/exist.txt"}"#);
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].2, "{results:?}");
    assert_eq!(ws.state(), WsState::Idle);
}

#[tokio::test]
async fn a_garbage_stream_chunk_fails_the_turn_cleanly() {
    let h = Harness::start().await;
    h.llm.push_fault(Fault::MalformedChunk);
    let ws = h.workstream();
    let mut sub = send(&ws, "anything");
    let events = read_turn(&mut sub).await;
    assert_eq!(ws.state(), WsState::Error);
    let errs = errors(&events);
    assert!(errs.iter().any(|e| e.contains("malformed")), "{errs:?}");
    assert_provider_acceptable(&ws.history());
    let mut sub = send(&ws, "next");
    assert_eq!(content(&read_turn(&mut sub).await), "next");
}

#[tokio::test]
async fn an_empty_200_body_is_an_error() {
    let h = Harness::start().await;
    h.llm.push_fault(Fault::EmptyBody);
    let ws = h.workstream();
    let mut sub = send(&ws, "anything");
    let events = read_turn(&mut sub).await;
    assert_eq!(ws.state(), WsState::Error);
    assert!(
        errors(&events).iter().any(|e| e.contains("empty")),
        "{:?}",
        errors(&events)
    );
    let _ = Event::ClearUi;
}
