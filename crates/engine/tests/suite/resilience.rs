use turnstone_engine::WsState;
use turnstone_llm::{BreakerState, RetryPolicy};
use turnstone_testkit::Fault;

use super::harness::*;

#[tokio::test]
async fn a_503_is_retried_and_the_turn_succeeds() {
    let h = Harness::start().await;
    h.llm.push_fault(Fault::Status {
        code: 503,
        retry_after: None,
        body: "overloaded".into(),
    });
    let ws = h.workstream();
    let mut sub = send(&ws, "after a hiccup");
    let events = read_turn(&mut sub).await;
    assert_eq!(content(&events), "after a hiccup");
    let notices = infos(&events);
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].starts_with("[Retrying in ") && notices[0].contains("ServerError"),
        "{notices:?}"
    );
    assert_eq!(h.llm.request_count(), 2);
    assert_eq!(ws.state(), WsState::Idle);
}

#[tokio::test]
async fn exhausted_retries_end_the_turn_in_error_and_the_next_turn_recovers() {
    let h = Harness::start().await;
    for _ in 0..4 {
        h.llm.push_fault(Fault::Status {
            code: 500,
            retry_after: None,
            body: "boom".into(),
        });
    }
    let ws = h.workstream();
    let mut sub = send(&ws, "doomed");
    let events = read_turn(&mut sub).await;
    assert_eq!(ws.state(), WsState::Error);
    assert_eq!(h.llm.request_count(), 4, "1 attempt + 3 retries");
    let errs = errors(&events);
    assert!(
        errs.iter()
            .any(|e| e.starts_with("Error: ") && e.contains("500")),
        "{errs:?}"
    );
    assert!(types(&events).contains(&"stream_end"));

    let mut sub = send(&ws, "recovered");
    assert_eq!(content(&read_turn(&mut sub).await), "recovered");
    assert_eq!(ws.state(), WsState::Idle);
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn the_breaker_opens_after_repeated_failures_and_refuses_without_calling_the_backend() {
    let h = Harness::with(|o| o.policy = RetryPolicy::none()).await;
    let ws = h.workstream();
    for n in 0..5 {
        h.llm.push_fault(Fault::Status {
            code: 503,
            retry_after: None,
            body: "down".into(),
        });
        let mut sub = send(&ws, &format!("attempt {n}"));
        read_turn(&mut sub).await;
        assert_eq!(ws.state(), WsState::Error);
    }
    assert_eq!(h.llm.request_count(), 5);
    assert_eq!(ws_breaker_state(&h), BreakerState::Open);

    let mut sub = send(&ws, "refused");
    let events = read_turn(&mut sub).await;
    let errs = errors(&events);
    assert!(
        errs.iter().any(|e| e.contains("circuit breaker open")),
        "{errs:?}"
    );
    assert_eq!(
        h.llm.request_count(),
        5,
        "an open breaker does not call the backend"
    );
}

fn ws_breaker_state(h: &Harness) -> BreakerState {
    h.manager.engine().provider().breaker().state()
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_an_error_not_a_silent_short_reply() {
    let h = Harness::start().await;
    h.llm.push_fault(Fault::DropMidStream { after_chunks: 3 });
    let ws = h.workstream();
    let mut sub = send(&ws, "a reply that will be cut in the middle of the stream");
    let events = read_turn(&mut sub).await;
    assert_eq!(ws.state(), WsState::Error);
    assert!(!errors(&events).is_empty());
    assert_provider_acceptable(&ws.history());
}
