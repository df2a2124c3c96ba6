//! The contract between the engine and the node's SSE payloads (node spec §2.2): every event a
//! real turn emits (except the engine-internal `activity`) must decode as a
//! `turnstone_proto::sse::WsEvent` of the same type, never `Unknown`, with its fields intact.
//!
//! Since issue 19 much of this is the compiler's job, and the checks below say which:
//! - the engine's `Event`, `ToolItem`, `StatusInfo` and `WsState` *are* the wire contract's
//!   types (`turnstone_proto::event`, re-exported by the engine), so an item, a status or a
//!   state cannot differ between the engine and the SSE view: `assert_items` and
//!   `assert_status` compare a type with itself after a JSON round trip;
//! - `Event::to_ws_event` maps every variant to its SSE view with an exhaustive `match`, so a
//!   new event does not compile until it has one; the test asserts that what a client decodes
//!   equals that view (`decode_checked`), which is what still needs running code: serde
//!   attributes (renames, skipped fields) are not checked by the compiler.
//!
//! What stays a runtime check: the JSON shape of real turns (key names, values, `is_error`
//! present only when true, the envelope's extra keys).

use std::sync::Arc;

use serde_json::{Value, json};
use turnstone_engine::{ApproveOutcome, Envelope, Event, SendOutcome, StatusInfo, ToolItem};
use turnstone_proto::sse::{self, WsEvent};
use turnstone_testkit::Fault;

use super::harness::*;

/// Keys the proto re-encoding has that the bare engine event may lack, with the reason.
const ALLOWED_MISSING: &[(&str, &str)] = &[
    // `turn_complete` is our addition; its `ws_id` travels in the envelope (checked below).
    ("turn_complete", "ws_id"),
];

/// Checks one envelope against the wire contract and returns the decoded payload
/// (`None` for the engine-internal `activity` event, which never reaches the per-ws stream).
fn decode_checked(env: &Envelope) -> Option<WsEvent> {
    if matches!(env.event, Event::Activity { .. }) {
        return None;
    }
    let bytes = serde_json::to_vec(&env.event).unwrap();
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    let decoded = WsEvent::decode(&bytes).unwrap_or_else(|e| {
        panic!(
            "engine event does not decode as a WsEvent: {e}\n{}",
            String::from_utf8_lossy(&bytes)
        )
    });
    assert_eq!(decoded.type_name(), env.event.type_name(), "{json}");
    assert!(
        !matches!(decoded, WsEvent::Unknown(_)),
        "decoded as Unknown: {json}"
    );
    assert_same_fields(&env.event, &decoded, &json);
    // The compiler-maintained view equals what a client decodes (`turn_complete` carries its
    // `ws_id` beside the event, so the bare JSON decodes it empty).
    let mut view = env
        .event
        .to_ws_event(&env.ws_id)
        .expect("every per-ws event has an SSE view");
    if let WsEvent::TurnComplete(t) = &mut view {
        t.ws_id.clear();
    }
    assert_eq!(decoded, view, "{json}");

    // Everything the wire type carries must come from the engine, with the same value.
    let mut problems = Vec::new();
    compare(&decoded.to_value(), &json, "", &mut problems);
    problems.retain(|p| {
        !ALLOWED_MISSING
            .iter()
            .any(|(t, key)| *t == env.event.type_name() && p == &format!("missing .{key}"))
    });
    assert!(
        problems.is_empty(),
        "{}: {problems:?}\nengine: {json}\nproto:  {}",
        env.event.type_name(),
        decoded.encode()
    );

    // The node may also send the whole envelope (`seq`, `ws_id` next to `type`): still the same.
    let from_envelope = WsEvent::decode(&serde_json::to_vec(env).unwrap()).unwrap();
    match (&from_envelope, &decoded) {
        (WsEvent::TurnComplete(with_id), WsEvent::TurnComplete(bare)) => {
            assert_eq!(with_id.ws_id, &*env.ws_id);
            assert_eq!(with_id.correlation_id, bare.correlation_id);
            assert_eq!(with_id.content, bare.content);
        }
        _ => assert_eq!(from_envelope, decoded),
    }
    Some(decoded)
}

/// Every key of `proto` must exist in `engine` with an equal value (recursively for objects).
fn compare(proto: &Value, engine: &Value, path: &str, problems: &mut Vec<String>) {
    match (proto, engine) {
        (Value::Object(p), Value::Object(e)) => {
            for (key, pv) in p {
                let here = format!("{path}.{key}");
                match e.get(key) {
                    None => problems.push(format!("missing {here}")),
                    Some(ev) => compare(pv, ev, &here, problems),
                }
            }
        }
        (Value::Array(p), Value::Array(e)) if p.len() == e.len() => {
            for (i, (pv, ev)) in p.iter().zip(e).enumerate() {
                compare(pv, ev, &format!("{path}[{i}]"), problems);
            }
        }
        (Value::Number(p), Value::Number(e)) => {
            if p.as_f64() != e.as_f64() {
                problems.push(format!("{path}: proto {p} != engine {e}"));
            }
        }
        (p, e) if p == e => {}
        (p, e) => problems.push(format!("{path}: proto {p} != engine {e}")),
    }
}

/// `ToolItem` is one type since issue 19 (`turnstone_proto::sse::ToolItem`), so the names
/// cannot drift; this checks what survives the JSON round trip.
fn assert_items(engine: &[ToolItem], wire: &[sse::ToolItem]) {
    assert_eq!(engine.len(), wire.len());
    for (e, w) in engine.iter().zip(wire) {
        assert_eq!(w.call_id, e.call_id);
        assert_eq!(w.header, e.header);
        assert_eq!(w.preview, e.preview);
        assert_eq!(w.func_name, e.func_name);
        assert_eq!(w.approval_label, e.approval_label);
        assert_eq!(w.needs_approval, e.needs_approval);
        assert_eq!(w.error, e.error);
        // The heuristic verdict of an item awaiting a decision survives the round trip.
        assert_eq!(w.verdict, e.verdict);
        assert!(w.extra.is_empty(), "unexpected item keys: {:?}", w.extra);
    }
}

/// `StatusInfo` is `turnstone_proto::sse::Status` since issue 19 (one declaration); this checks
/// the JSON round trip (e.g. `pct` as a float).
fn assert_status(engine: &StatusInfo, wire: &sse::Status) {
    assert_eq!(wire.prompt_tokens, engine.prompt_tokens);
    assert_eq!(wire.completion_tokens, engine.completion_tokens);
    assert_eq!(wire.total_tokens, engine.total_tokens);
    assert_eq!(wire.context_window, engine.context_window);
    assert_eq!(wire.pct, engine.pct);
    assert_eq!(wire.effort, engine.effort);
    assert_eq!(wire.cache_creation_tokens, engine.cache_creation_tokens);
    assert_eq!(wire.cache_read_tokens, engine.cache_read_tokens);
    assert_eq!(wire.tool_calls_this_turn, engine.tool_calls_this_turn);
    assert_eq!(wire.turn_count, engine.turn_count);
}

fn assert_same_fields(event: &Event, decoded: &WsEvent, json: &Value) {
    match (event, decoded) {
        (Event::StateChange { state }, WsEvent::StateChange(w)) => {
            assert_eq!(w.state.as_str(), state.as_str());
        }
        (Event::ThinkingStart, WsEvent::ThinkingStart)
        | (Event::ThinkingStop, WsEvent::ThinkingStop)
        | (Event::StreamEnd, WsEvent::StreamEnd)
        | (Event::ClearUi, WsEvent::ClearUi)
        | (Event::Cancelled, WsEvent::Cancelled) => {}
        (Event::Reasoning { text }, WsEvent::Reasoning(w))
        | (Event::Content { text }, WsEvent::Content(w)) => assert_eq!(&w.text, text),
        (Event::ToolInfo { items }, WsEvent::ToolInfo(w)) => assert_items(items, &w.items),
        (
            Event::ApproveRequest {
                items,
                judge_pending,
                cycle_id,
                ..
            },
            WsEvent::ApproveRequest(w),
        ) => {
            assert_items(items, &w.items);
            assert_eq!(w.judge_pending, *judge_pending);
            assert_eq!(&w.cycle_id, cycle_id);
        }
        (
            Event::ApprovalResolved {
                approved,
                feedback,
                cycle_id,
            },
            WsEvent::ApprovalResolved(w),
        ) => {
            assert_eq!(w.approved, *approved);
            assert_eq!(&w.feedback, feedback);
            assert_eq!(&w.cycle_id, cycle_id);
        }
        (Event::ToolOutputChunk { call_id, chunk }, WsEvent::ToolOutputChunk(w)) => {
            assert_eq!(&w.call_id, call_id);
            assert_eq!(&w.chunk, chunk);
        }
        (
            Event::ToolResult {
                call_id,
                name,
                output,
                is_error,
            },
            WsEvent::ToolResult(w),
        ) => {
            assert_eq!(&w.call_id, call_id);
            assert_eq!(&w.name, name);
            assert_eq!(&w.output, output);
            assert_eq!(w.is_error, *is_error);
            // Spec: `is_error` is present (and true) only for errors, absent when false.
            match json.get("is_error") {
                None => assert!(!is_error),
                Some(v) => assert!(*is_error && v == &Value::Bool(true), "{json}"),
            }
        }
        (Event::Status(s), WsEvent::Status(w)) => assert_status(s, w),
        (Event::Info { message }, WsEvent::Info(w))
        | (Event::Error { message }, WsEvent::Error(w))
        | (Event::BusyError { message }, WsEvent::BusyError(w)) => assert_eq!(&w.message, message),
        (
            Event::TurnComplete {
                correlation_id,
                content,
                receipts,
                ..
            },
            WsEvent::TurnComplete(w),
        ) => {
            assert_eq!(&w.correlation_id, correlation_id);
            assert_eq!(&w.content, content);
            assert_eq!(&w.receipts, receipts);
        }
        (
            Event::PlanReview {
                request_id,
                content,
            },
            WsEvent::PlanReview(w),
        ) => {
            assert_eq!((&w.request_id, &w.content), (request_id, content));
        }
        (
            Event::PlanResolved {
                request_id,
                decision,
                feedback,
                decided_by,
            },
            WsEvent::PlanResolved(w),
        ) => {
            assert_eq!(&w.request_id, request_id);
            assert_eq!(json!(w.decision), json!(decision));
            assert_eq!((&w.feedback, &w.decided_by), (feedback, decided_by));
        }
        (
            Event::Preview {
                preview_id,
                kind,
                title,
                url,
            },
            WsEvent::Preview(w),
        ) => {
            assert_eq!(
                (&w.preview_id, &w.kind, &w.title, &w.url),
                (preview_id, kind, title, url)
            );
        }
        (e, d) => panic!("engine event {e:?} decoded as {d:?}"),
    }
}

/// Decodes (and checks) every envelope of a turn.
fn decode_all(envelopes: &[Arc<Envelope>]) -> Vec<WsEvent> {
    envelopes.iter().filter_map(|e| decode_checked(e)).collect()
}

fn wire_content(events: &[WsEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            WsEvent::Content(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

fn wire_states(events: &[WsEvent]) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|e| match e {
            WsEvent::StateChange(s) => Some(s.state.as_str()),
            _ => None,
        })
        .collect()
}

fn wire_status(events: &[WsEvent]) -> Vec<&sse::Status> {
    events
        .iter()
        .filter_map(|e| match e {
            WsEvent::Status(s) => Some(s),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_text_turn_with_reasoning_decodes_field_for_field() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let text = "héllo \u{2699} \"wire\" \\ tab\there\nsecond line";
    let mut sub = send(&ws, &format!("THINK: weighing words\n{text}"));
    let envelopes = read_turn(&mut sub).await;
    assert!(
        types(&envelopes).contains(&"activity"),
        "the internal activity event exists and is skipped"
    );
    let events = decode_all(&envelopes);

    assert_eq!(wire_content(&events), text);
    let reasoning: String = events
        .iter()
        .filter_map(|e| match e {
            WsEvent::Reasoning(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "weighing words");
    assert_eq!(wire_states(&events), ["thinking", "idle"]);

    let status = wire_status(&events);
    assert_eq!(status.len(), 1, "one status per turn");
    let s = status[0];
    assert_eq!(
        s.context_window,
        u64::from(WINDOW),
        "from the fake's max_model_len"
    );
    assert!(s.prompt_tokens > 0 && s.completion_tokens > 0, "{s:?}");
    assert_eq!(s.total_tokens, s.prompt_tokens + s.completion_tokens);
    let pct = ((s.total_tokens as f64) / f64::from(WINDOW) * 1000.0).round() / 10.0;
    assert_eq!(s.pct, pct);
    assert_eq!(s.effort, "medium");
    assert_eq!((s.turn_count, s.tool_calls_this_turn), (1, 0));

    let complete = events.iter().find_map(|e| match e {
        WsEvent::TurnComplete(t) => Some(t),
        _ => None,
    });
    assert_eq!(complete.unwrap().content, text);
}

#[tokio::test]
async fn an_approved_bash_call_decodes_with_consistent_call_ids() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo hi");
    let mut envelopes = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    assert!(matches!(
        ws.approve(true, None, false),
        ApproveOutcome::Resolved(_)
    ));
    envelopes.extend(read_turn(&mut sub).await);
    let events = decode_all(&envelopes);

    let call_id = ws
        .history()
        .iter()
        .find_map(|m| m.tool_calls.first().map(|c| c.id.clone()))
        .expect("the assistant called a tool");
    let request = events
        .iter()
        .find_map(|e| match e {
            WsEvent::ApproveRequest(a) => Some(a),
            _ => None,
        })
        .unwrap();
    assert_eq!(request.items.len(), 1);
    let item = &request.items[0];
    assert_eq!(item.call_id, call_id);
    assert_eq!((item.func_name.as_str(), item.label()), ("bash", "bash"));
    assert!(item.needs_approval && item.awaits_decision());
    assert!(item.header.contains("echo hi"), "{}", item.header);
    assert!(!request.judge_pending);

    let chunks: Vec<&sse::ToolOutputChunk> = events
        .iter()
        .filter_map(|e| match e {
            WsEvent::ToolOutputChunk(c) => Some(c),
            _ => None,
        })
        .collect();
    assert!(!chunks.is_empty());
    assert!(chunks.iter().all(|c| c.call_id == call_id));
    let results: Vec<&sse::ToolResult> = events
        .iter()
        .filter_map(|e| match e {
            WsEvent::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(
        (results[0].call_id.as_str(), results[0].name.as_str()),
        (call_id.as_str(), "bash")
    );
    assert!(results[0].output.contains("hi") && !results[0].is_error);
    assert!(events.iter().any(|e| matches!(
        e,
        WsEvent::ApprovalResolved(r) if r.approved && r.feedback.is_empty()
    )));
    assert!(wire_content(&events).starts_with("done: "));
    assert_eq!(wire_status(&events)[0].tool_calls_this_turn, 1);
}

#[tokio::test]
async fn a_denied_call_decodes_and_the_denial_reaches_the_model() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let marker = h.path("ran");
    let mut sub = send(&ws, &format!("TOOL: touch {}", marker.display()));
    let mut envelopes = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    ws.approve(false, Some("nope".into()), false);
    envelopes.extend(read_turn(&mut sub).await);
    let events = decode_all(&envelopes);

    assert!(events.iter().any(|e| matches!(
        e,
        WsEvent::ApprovalResolved(r) if !r.approved && r.feedback == "nope"
    )));
    assert!(
        !events.iter().any(|e| matches!(e, WsEvent::ToolResult(_))),
        "denied tools emit no tool_result"
    );
    assert!(!marker.exists(), "a denied command must not run");
    assert!(
        wire_content(&events).starts_with("done: Denied by user: nope"),
        "{}",
        wire_content(&events)
    );
    assert_eq!(
        wire_states(&events),
        [
            "thinking",
            "running",
            "attention",
            "running",
            "thinking",
            "idle"
        ]
    );
}

#[tokio::test]
async fn a_cancel_during_approval_and_a_busy_send_decode() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo never");
    let mut envelopes = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    assert!(matches!(ws.send("second", None), SendOutcome::Busy));
    assert!(ws.cancel());
    envelopes.extend(read_turn(&mut sub).await);
    let events = decode_all(&envelopes);

    assert!(events.iter().any(|e| matches!(
        e,
        WsEvent::BusyError(n) if n.message.contains("Already processing")
    )));
    assert!(events.iter().any(|e| matches!(
        e,
        WsEvent::ApprovalResolved(r) if !r.approved && r.feedback == "Cancelled by user"
    )));
    assert!(events.iter().any(|e| matches!(e, WsEvent::Cancelled)));
    assert!(events.iter().any(|e| matches!(
        e,
        WsEvent::Info(n) if n.message == "[Generation cancelled]"
    )));
    assert_eq!(wire_states(&events).last(), Some(&"idle"));
    assert!(
        wire_status(&events).is_empty(),
        "no status for a cancelled turn"
    );
    assert_eq!(h.llm.request_count(), 1);
}

#[tokio::test]
async fn an_error_turn_after_retries_decodes() {
    let h = Harness::start().await;
    for _ in 0..2 {
        h.llm.push_fault(Fault::Status {
            code: 500,
            retry_after: None,
            body: "boom".into(),
        });
    }
    let ws = h.workstream();
    let mut sub = send(&ws, "doomed");
    let events = decode_all(&read_turn(&mut sub).await);

    assert_eq!(h.llm.request_count(), 2, "1 attempt + 1 retry");
    let infos: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            WsEvent::Info(n) => Some(n.message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(infos.len(), 1, "{infos:?}");
    assert!(infos[0].starts_with("[Retrying in "), "{infos:?}");
    let errors: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            WsEvent::Error(n) => Some(n.message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("Error: ") && errors[0].contains("500"),
        "{errors:?}"
    );
    assert!(events.iter().any(|e| matches!(e, WsEvent::StreamEnd)));
    assert_eq!(wire_states(&events).last(), Some(&"error"));
    assert!(wire_status(&events).is_empty());
}

#[tokio::test]
async fn a_mixed_batch_with_bad_calls_decodes_tool_info_errors_and_is_error() {
    let h = Harness::start().await;
    std::fs::write(h.path("notes.txt"), "line one\nline two\n").unwrap();
    let ws = h.workstream();
    let prompt =
        "CALL:read_file {\"path\": \"notes.txt\"}\nCALL:bash {not json\nCALL:no_such_tool {}";
    let mut sub = send(&ws, prompt);
    let envelopes = read_turn(&mut sub).await;
    let events = decode_all(&envelopes);

    let info = events
        .iter()
        .find_map(|e| match e {
            WsEvent::ToolInfo(t) => Some(t),
            _ => None,
        })
        .expect("a batch needing no decision is announced with tool_info");
    assert_eq!(
        info.items.len(),
        3,
        "tool_info lists every item of the batch"
    );
    assert!(info.items[0].error.is_none() && !info.items[0].needs_approval);
    assert!(info.items[1].error.is_some() && info.items[2].error.is_some());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, WsEvent::ApproveRequest(_)))
    );

    let results: Vec<(&str, bool)> = events
        .iter()
        .filter_map(|e| match e {
            WsEvent::ToolResult(r) => Some((r.name.as_str(), r.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    for (name, is_error) in [("read_file", false), ("bash", true), ("no_such_tool", true)] {
        assert!(results.contains(&(name, is_error)), "{results:?}");
    }
    let errors: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            WsEvent::Error(n) => Some(n.message.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        errors
            .iter()
            .any(|m| m.starts_with("Malformed tool call from model")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|m| m.contains("no_such_tool")),
        "{errors:?}"
    );
    assert_eq!(wire_states(&events).last(), Some(&"idle"));
}

#[test]
fn the_comparison_reports_missing_and_different_keys() {
    let proto = serde_json::json!({"a": 1, "b": {"c": "x", "d": [true]}, "e": 0.5});
    let engine = serde_json::json!({"a": 1.0, "b": {"c": "y", "d": [false]}, "extra": 1});
    let mut problems = Vec::new();
    compare(&proto, &engine, "", &mut problems);
    assert_eq!(
        problems,
        [
            ".b.c: proto \"x\" != engine \"y\"",
            ".b.d[0]: proto true != engine false",
            "missing .e",
        ]
    );
}

#[test]
fn variants_no_scripted_turn_emits_decode_too() {
    use turnstone_engine::WsState;
    let events = [
        Event::ClearUi,
        Event::StateChange {
            state: WsState::Attention,
        },
        Event::StateChange {
            state: WsState::Error,
        },
        Event::ToolResult {
            call_id: "call_x".into(),
            name: "bash".into(),
            output: "Cancelled by user.".into(),
            is_error: true,
        },
        Event::Content {
            text: "\u{1F600} \u{0}\r\n".into(),
        },
    ];
    for (seq, event) in (1..).zip(events) {
        let env = Envelope {
            seq,
            ws_id: Arc::from("0123456789abcdef0123456789abcdef"),
            event,
        };
        assert!(decode_checked(&env).is_some());
    }
}

#[tokio::test]
async fn a_plan_review_and_its_resolution_decode() {
    let h = Harness::start().await;
    turnstone_engine::register_plan_agent(h.manager.engine(), None).unwrap();
    let ws = h.workstream();
    ws.set_skip_permissions(false);
    let mut sub = send(&ws, r#"CALL:plan_agent {"goal": "Tidy the imports"}"#);
    let mut envelopes = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    assert!(matches!(
        ws.approve(true, None, false),
        ApproveOutcome::Resolved(_)
    ));
    envelopes.extend(read_until(&mut sub, |e| matches!(e, Event::PlanReview { .. })).await);
    ws.plan_feedback("");
    envelopes.extend(read_turn(&mut sub).await);
    let events = decode_all(&envelopes);
    let review = events
        .iter()
        .find_map(|e| match e {
            WsEvent::PlanReview(r) => Some(r),
            _ => None,
        })
        .expect("a plan_review");
    assert!(!review.request_id.is_empty() && !review.content.is_empty());
    let resolved = events
        .iter()
        .find_map(|e| match e {
            WsEvent::PlanResolved(r) => Some(r),
            _ => None,
        })
        .expect("a plan_resolved");
    assert_eq!(resolved.request_id, review.request_id);
    assert_eq!(
        (resolved.decision.as_str(), resolved.decided_by.as_str()),
        ("accept", "user")
    );
}
