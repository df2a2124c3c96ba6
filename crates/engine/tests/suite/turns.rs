use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use turnstone_engine::{CreateOptions, Event, Item, SendOutcome, WorkstreamHandle, WsState};
use turnstone_llm::Role;

use super::harness::*;

#[tokio::test]
async fn a_text_turn_streams_content_and_ends_idle_with_status() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "hello there, engine");
    let events = read_turn(&mut sub).await;

    assert_eq!(content(&events), "hello there, engine");
    assert_eq!(states(&events), [WsState::Thinking, WsState::Idle]);
    let t = types(&events);
    let pos = |name: &str| t.iter().position(|x| *x == name).unwrap();
    assert!(pos("thinking_start") < pos("content"));
    assert!(pos("content") < pos("stream_end"));
    assert!(pos("stream_end") < pos("status"));
    assert!(pos("status") < pos("turn_complete"));
    let status = events.iter().find_map(|e| match e {
        Event::Status(s) => Some(s.clone()),
        _ => None,
    });
    let status = status.unwrap();
    assert!(
        status.prompt_tokens > 0 && status.completion_tokens > 0,
        "{status:?}"
    );
    assert_eq!(
        status.context_window, 32_768,
        "window read from /v1/models max_model_len"
    );
    assert_eq!(status.turn_count, 1);

    let history = ws.history();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].role(), Role::Assistant);
    assert_eq!(history[1].content.as_deref(), Some("hello there, engine"));
    assert_eq!(ws.state(), WsState::Idle);
    assert!(!ws.is_busy());

    // The request carried the system prompt slot, the tools and the streaming options.
    let request = h.llm.last_request().unwrap();
    assert_eq!(request["stream"], true);
    assert_eq!(request["stream_options"]["include_usage"], true);
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"bash") && tools.contains(&"read_file"),
        "{tools:?}"
    );
}

#[tokio::test]
async fn turn_complete_carries_the_correlation_id_and_full_text() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = ws.subscribe(None);
    assert_eq!(
        ws.send("abc", Some("c0ffee123456".into())),
        SendOutcome::Started {
            correlation_id: "c0ffee123456".into()
        }
    );
    let events = read_turn(&mut sub).await;
    let done = events.iter().find_map(|e| match e {
        Event::TurnComplete {
            correlation_id,
            content,
            state,
            ..
        } => Some((correlation_id.clone(), content.clone(), *state)),
        _ => None,
    });
    assert_eq!(
        done,
        Some(("c0ffee123456".into(), "abc".into(), WsState::Idle))
    );
}

#[tokio::test]
async fn reasoning_is_separated_from_content() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "THINK: pondering deeply\nthe answer");
    let events = read_turn(&mut sub).await;
    let reasoning = reasoning(&events);
    assert_eq!(reasoning, "pondering deeply");
    assert!(!content(&events).contains("pondering"));
}

#[tokio::test]
async fn a_send_while_busy_is_refused_with_busy_error() {
    let h = Harness::with(|o| o.llm.tokens_per_sec = Some(50.0)).await;
    let ws = h.workstream();
    let mut sub = send(
        &ws,
        "a fairly long reply so that the turn is still running later",
    );
    assert_eq!(ws.send("second", None), SendOutcome::Busy);
    let events = read_turn(&mut sub).await;
    assert!(types(&events).contains(&"busy_error"));
    assert_eq!(
        ws.history().len(),
        2,
        "the refused send left no trace in history"
    );
    // And once idle, a new send works.
    let mut sub = send(&ws, "third");
    assert_eq!(content(&read_turn(&mut sub).await), "third");
}

#[tokio::test]
async fn a_turn_started_from_turn_complete_stays_busy_until_it_ends() {
    // The turn clears `busy` before `turn_complete`, so a frontend reacting to it can send
    // at once. The workstream's task must not clear the flag again afterwards, or the turn
    // started in between loses it and a second send is taken while it runs (found by the
    // queued-sends burst test: the inbox overflowed and queued messages were lost).
    let h = Harness::with(|o| o.llm.tokens_per_sec = Some(50.0)).await;
    let slot: Arc<OnceLock<WorkstreamHandle>> = Arc::default();
    let next: Arc<Mutex<Option<SendOutcome>>> = Arc::default();
    let (hook_slot, hook_next) = (slot.clone(), next.clone());
    let fired = Arc::new(AtomicBool::new(false));
    let manager = h.manager.with_event_hook(Arc::new(move |env| {
        if matches!(env.event, Event::TurnComplete { .. })
            && !fired.swap(true, Ordering::SeqCst)
            && let Some(ws) = hook_slot.get()
        {
            // Synchronously, inside the first turn's `turn_complete`.
            let outcome = ws.send(
                "a fairly long reply so that the turn is still running later",
                None,
            );
            *hook_next.lock().unwrap() = Some(outcome);
        }
    }));
    let ws = manager.create(CreateOptions::default()).unwrap().0;
    slot.set(ws.clone()).ok();
    let mut sub = send(&ws, "first");
    read_turn(&mut sub).await;
    assert!(matches!(
        next.lock().unwrap().clone(),
        Some(SendOutcome::Started { .. })
    ));
    // Whatever the task does after the first turn has happened by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(ws.is_busy(), "the running second turn lost its busy flag");
    assert_eq!(ws.send("third", None), SendOutcome::Busy);
    read_turn(&mut sub).await;
    assert!(!ws.is_busy());
}

#[tokio::test]
async fn parallel_tool_calls_run_concurrently() {
    // Each call waits for a file the other creates: run one after the other they would both
    // time out; run concurrently both succeed.
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let a = r#"CALL:bash {"command": "touch a; for i in $(seq 200); do [ -f b ] && exit 0; sleep 0.05; done; exit 3", "timeout": 20}"#;
    let b = r#"CALL:bash {"command": "touch b; for i in $(seq 200); do [ -f a ] && exit 0; sleep 0.05; done; exit 3", "timeout": 20}"#;
    let mut sub = send(&ws, &format!("{a}\n{b}"));
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 2, "{events:#?}");
    assert!(
        results
            .iter()
            .all(|(name, _, is_error)| name == "bash" && !is_error),
        "{results:?}"
    );
    assert!(
        types(&events).contains(&"tool_info"),
        "auto-approved batch announces itself"
    );
    assert_eq!(
        states(&events),
        [
            WsState::Thinking,
            WsState::Running,
            WsState::Attention,
            WsState::Running,
            WsState::Thinking,
            WsState::Idle
        ]
    );
    assert!(content(&events).starts_with("done: "));
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn the_event_log_resumes_from_any_seq_without_gaps() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "one");
    read_turn(&mut sub).await;
    let last = ws.log().last_seq();
    assert!(last > 5);
    let mut resumed = ws.subscribe(Some(3));
    let backlog = resumed.backlog();
    let seqs: Vec<u64> = backlog
        .iter()
        .map(|i| match i {
            Item::Event(e) => e.seq,
            Item::Truncated { .. } => panic!("nothing was truncated"),
        })
        .collect();
    assert_eq!(seqs, (4..=last).collect::<Vec<_>>());
}

#[tokio::test]
async fn bash_output_streams_as_chunks_before_the_result() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo one; echo two");
    let events = read_turn(&mut sub).await;
    let chunks: String = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolOutputChunk { chunk, .. } => Some(chunk.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(chunks, "one\ntwo\n");
    let t = types(&events);
    let last_chunk = t.iter().rposition(|x| *x == "tool_output_chunk").unwrap();
    let result = t.iter().position(|x| *x == "tool_result").unwrap();
    assert!(last_chunk < result);
}

#[tokio::test]
async fn a_length_cut_discards_partial_tool_calls_with_a_warning() {
    let h = Harness::start().await;
    h.llm.push_reply(
        turnstone_testkit::ScriptReply::tool_calls([("bash", r#"{"command": "echo never"}"#)])
            .with_text("partial")
            .with_finish_reason("length"),
    );
    let ws = h.workstream();
    let mut sub = send(&ws, "anything");
    let events = read_turn(&mut sub).await;
    let errs = errors(&events);
    assert!(
        errs.iter()
            .any(|e| e.starts_with("Warning: response truncated")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e == "Discarding partial tool calls from truncated response.")
    );
    assert!(tool_results(&events).is_empty());
    assert!(!types(&events).contains(&"approve_request"));
    assert_eq!(ws.state(), WsState::Idle);
    let history = ws.history();
    assert!(history[1].tool_calls.is_empty());
    assert_provider_acceptable(&history);
}

#[tokio::test]
async fn a_content_filter_stop_warns() {
    let h = Harness::start().await;
    h.llm.push_reply(
        turnstone_testkit::ScriptReply::text("redacted").with_finish_reason("content_filter"),
    );
    let ws = h.workstream();
    let mut sub = send(&ws, "anything");
    let events = read_turn(&mut sub).await;
    assert!(errors(&events).contains(&"Warning: response blocked by content filter.".to_string()));
    assert_eq!(ws.state(), WsState::Idle);
}

#[tokio::test]
async fn long_tool_output_is_truncated_head_and_tail_with_a_marker() {
    let h = Harness::with(|o| {
        o.config.skip_permissions = true;
        o.config.truncation = 2_000;
    })
    .await;
    let ws = h.workstream();
    let mut sub = send(
        &ws,
        "TOOL: echo START; for i in $(seq 3000); do echo line$i; done; echo END",
    );
    let events = read_turn(&mut sub).await;
    let (_, output, _) = tool_results(&events).remove(0);
    assert!(
        output.contains("START") && output.contains("END"),
        "head and tail kept"
    );
    assert!(output.contains("chars truncated"), "visible marker");
    assert!(output.chars().count() < 2_500, "{}", output.chars().count());
}

#[tokio::test]
async fn a_flood_of_output_lines_streams_a_bounded_number_of_chunks() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: for i in $(seq 5000); do echo line$i; done");
    let events = read_turn(&mut sub).await;
    let chunks = events
        .iter()
        .filter(|e| matches!(e, Event::ToolOutputChunk { .. }))
        .count();
    assert_eq!(chunks, 101, "100 lines and one note");
    let (_, output, _) = tool_results(&events).remove(0);
    assert!(output.contains("line5000"), "the result has the tail");
}

#[tokio::test]
async fn counters_and_activity_follow_the_turn() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo one\nTOOL: echo two");
    let events = read_turn(&mut sub).await;
    assert_eq!(tool_results(&events).len(), 2);
    assert_eq!(ws.tool_calls_total(), 2);
    assert_eq!(
        ws.activity(),
        (String::new(), String::new()),
        "cleared at the end"
    );
    let saw_tool_activity = events
        .iter()
        .any(|e| matches!(e, Event::Activity { activity_state, .. } if activity_state == "tool"));
    assert!(saw_tool_activity);
}

#[tokio::test]
async fn a_reply_the_model_sent_at_once_is_one_content_event_and_a_paced_one_streams() {
    let text = "a reply the model streams in many four-character chunks";
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, text);
    let events = read_turn(&mut sub).await;
    assert_eq!(deltas(&events), [text], "{:?}", types(&events));

    let h = Harness::with(|o| o.llm.tokens_per_sec = Some(200.0)).await;
    let ws = h.workstream();
    let mut sub = send(&ws, text);
    let events = read_turn(&mut sub).await;
    let deltas = deltas(&events);
    assert_eq!(deltas.concat(), text);
    assert!(deltas.len() > 5, "token by token: {deltas:?}");
}
