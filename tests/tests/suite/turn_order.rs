//! Per-workstream event order against the captures of node spec §2.4 (tool turn with one
//! approved `bash` call) and §2.6 (cancels). Events the spec does not list — our
//! `turn_complete` and the engine-internal `activity` — are ignored; everything else counts.

use std::sync::Arc;

use turnstone_engine::{Envelope, Event};
use turnstone_testkit::ScriptReply;

use super::harness::*;

/// A turn as comparable lines: `type` plus the payload that matters for ordering, with
/// consecutive text deltas of the same type merged (chunking is not part of the contract).
fn transcript(envelopes: &[Arc<Envelope>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut last_text: Option<&'static str> = None;
    for env in envelopes {
        let (kind, text): (&'static str, Option<&str>) = match &env.event {
            Event::Activity { .. } | Event::TurnComplete { .. } => continue,
            Event::StateChange { state } => {
                out.push(format!("state_change {}", state.as_str()));
                last_text = None;
                continue;
            }
            Event::Content { text } => ("content", Some(text)),
            Event::Reasoning { text } => ("reasoning", Some(text)),
            Event::ToolOutputChunk { chunk, .. } => ("tool_output_chunk", Some(chunk)),
            Event::Info { message } => ("info", Some(message)),
            Event::Error { message } => ("error", Some(message)),
            other => {
                out.push(other.type_name().to_string());
                last_text = None;
                continue;
            }
        };
        let text = text.unwrap_or_default();
        match (last_text, out.last_mut()) {
            (Some(k), Some(line)) if k == kind && !matches!(kind, "info" | "error") => {
                line.push_str(text);
            }
            _ => out.push(format!("{kind} {text}")),
        }
        last_text = Some(kind);
    }
    out
}

#[tokio::test]
async fn a_tool_turn_follows_the_captured_order_of_spec_2_4() {
    let h = Harness::start().await;
    // The replies of the capture: text plus one bash call, then reasoning and text.
    h.llm.push_reply(
        ScriptReply::tool_calls([("bash", r#"{"command": "echo hi"}"#)])
            .with_text("Let me run it."),
    );
    h.llm
        .push_reply(ScriptReply::text("All done.").with_reasoning("thinking..."));
    let ws = h.workstream();
    let mut sub = send(&ws, "run it");
    let mut envelopes = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    ws.approve(true, None, false);
    envelopes.extend(read_turn(&mut sub).await);

    let expected = [
        "state_change thinking",
        "thinking_start",
        "thinking_stop",
        "content Let me run it.",
        "stream_end",
        "thinking_stop",
        "state_change running",
        "state_change attention",
        "approve_request",
        "approval_resolved",
        "state_change running",
        "tool_output_chunk hi\n",
        "tool_result",
        "state_change thinking",
        "thinking_start",
        "thinking_stop",
        "reasoning thinking...",
        "content All done.",
        "stream_end",
        "thinking_stop",
        "status",
        "state_change idle",
    ];
    assert_eq!(transcript(&envelopes), expected);

    let output = envelopes.iter().find_map(|e| match &e.event {
        Event::ToolResult { output, .. } => Some(output.as_str()),
        _ => None,
    });
    // The capture shows `"hi"`; our bash tool keeps the trailing newline (`"hi\n"`).
    assert_eq!(output.map(str::trim_end), Some("hi"));
    // Each chunk is one line with its newline (spec: "one line at a time").
    for env in &envelopes {
        if let Event::ToolOutputChunk { chunk, .. } = &env.event {
            assert!(
                chunk.ends_with('\n') && chunk.matches('\n').count() == 1,
                "{chunk:?}"
            );
        }
    }
    // Our `turn_complete` follows the final state change and carries the turn's whole
    // visible text (what the global `ws_state` idle reports as `content`).
    match &envelopes.last().unwrap().event {
        Event::TurnComplete { content, .. } => assert_eq!(content, "Let me run it.All done."),
        other => panic!("turn does not end with turn_complete: {other:?}"),
    }
    // `seq` is gap-free and increasing across the whole turn.
    for pair in envelopes.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1);
    }
}

#[tokio::test]
async fn an_auto_approved_batch_passes_through_attention_with_tool_info() {
    let h = Harness::start().await;
    std::fs::write(h.path("notes.txt"), "one\n").unwrap();
    let ws = h.workstream();
    let mut sub = send(&ws, r#"CALL:read_file {"path": "notes.txt"}"#);
    let lines = transcript(&read_turn(&mut sub).await);
    let at = lines
        .iter()
        .position(|l| l == "state_change attention")
        .unwrap();
    assert_eq!(
        lines[at - 1..at + 3],
        [
            "state_change running",
            "state_change attention",
            "tool_info",
            "state_change running"
        ],
        "{lines:#?}"
    );
}

#[tokio::test]
async fn a_cancel_during_approval_follows_spec_2_6() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo never");
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    ws.cancel();
    let lines = transcript(&read_turn(&mut sub).await);
    // The capture also shows a memory nudge `info`, a feature we do not have.
    assert_eq!(
        lines,
        [
            "approval_resolved",
            "cancelled",
            "state_change running",
            "info [Generation cancelled]",
            "state_change idle",
        ]
    );
}

#[tokio::test]
async fn a_cancel_mid_stream_follows_spec_2_6() {
    let h = Harness::with(|c| {
        c.tokens_per_sec = Some(50.0);
        c.chunk_chars = 4;
    })
    .await;
    let ws = h.workstream();
    let mut sub = send(&ws, &"slow words ".repeat(100));
    read_until(&mut sub, |e| matches!(e, Event::Content { .. })).await;
    assert!(ws.cancel());
    let lines = transcript(&read_turn(&mut sub).await);
    // Deltas may still arrive before the worker notices the cancel; what follows is fixed.
    let at = lines.iter().position(|l| l == "cancelled").unwrap();
    let tail: Vec<&str> = lines[at..]
        .iter()
        .map(String::as_str)
        .filter(|l| !l.starts_with("content "))
        .collect();
    assert_eq!(
        tail,
        [
            "cancelled",
            "stream_end",
            "thinking_stop",
            "info [Generation cancelled]",
            "state_change idle",
        ],
        "{lines:#?}"
    );
}

#[tokio::test]
async fn a_failing_backend_ends_the_turn_in_error_after_error_and_stream_end() {
    let h = Harness::start().await;
    for _ in 0..2 {
        h.llm.push_fault(turnstone_testkit::Fault::Status {
            code: 500,
            retry_after: None,
            body: "boom".into(),
        });
    }
    let ws = h.workstream();
    let mut sub = send(&ws, "doomed");
    let lines = transcript(&read_turn(&mut sub).await);
    // Spec §2.4 "Worker exception" shows `state_change error` both before `error` and after
    // `stream_end` (session and server wrapper each emit one); the engine emits it once, last.
    let n = lines.len();
    assert!(n >= 3, "{lines:#?}");
    assert!(lines[n - 3].starts_with("error Error: "), "{lines:#?}");
    assert_eq!(lines[n - 2..], ["stream_end", "state_change error"]);
}
