//! Event frames of the node's streams (the very frames SSE sends, `server::events`) as
//! `turnstone.v1.Event`: the wire `type`, the exact JSON, the resume `seq`, and the common
//! events typed in `payload`.

use serde_json::Value;
use turnstone_grpc::v1::{self as pb, event::Payload};

use crate::server::sse::Frame;

/// The event of one frame; `None` for a keep-alive ping (gRPC has its own).
pub fn event_of(frame: Frame) -> Option<pb::Event> {
    let (seq, value, json) = match frame {
        Frame::Ping => return None,
        Frame::Event { id, data } => {
            let json = data.to_string();
            (id, data, json)
        }
        Frame::Json { id, json } => {
            let value = serde_json::from_str(&json).unwrap_or(Value::Null);
            (id, value, json)
        }
    };
    Some(event_of_value(seq, &value, json))
}

/// The event of one SSE payload `value` (its text `json`) sent with `seq`.
pub fn event_of_value(seq: Option<u64>, value: &Value, json: String) -> pb::Event {
    let kind = text(value, "type");
    pb::Event {
        seq,
        payload: payload(&kind, value),
        r#type: kind,
        json,
        ws_id: text(value, "ws_id"),
        ws_seq: value.get("ws_seq").and_then(Value::as_u64),
    }
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn number(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// `idle`, `thinking`, ... as the enum (an unknown name is `UNSPECIFIED`).
pub fn state_of(name: &str) -> pb::WorkstreamState {
    match name {
        "idle" => pb::WorkstreamState::Idle,
        "thinking" => pb::WorkstreamState::Thinking,
        "running" => pb::WorkstreamState::Running,
        "attention" => pb::WorkstreamState::Attention,
        "error" => pb::WorkstreamState::Error,
        "closed" => pb::WorkstreamState::Closed,
        _ => pb::WorkstreamState::Unspecified,
    }
}

fn items(v: &Value) -> Vec<pb::ToolItem> {
    v.get("items")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|i| pb::ToolItem {
                    call_id: text(i, "call_id"),
                    header: text(i, "header"),
                    preview: text(i, "preview"),
                    func_name: text(i, "func_name"),
                    approval_label: text(i, "approval_label"),
                    needs_approval: flag(i, "needs_approval"),
                    error: i.get("error").and_then(Value::as_str).map(str::to_string),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn message(v: &Value) -> pb::MessageEvent {
    pb::MessageEvent {
        message: text(v, "message"),
    }
}

fn payload(kind: &str, v: &Value) -> Option<Payload> {
    Some(match kind {
        "content" => Payload::Content(pb::TextEvent {
            text: text(v, "text"),
        }),
        "reasoning" => Payload::Reasoning(pb::TextEvent {
            text: text(v, "text"),
        }),
        "state_change" => Payload::StateChange(pb::StateChangeEvent {
            state: state_of(&text(v, "state")).into(),
        }),
        "tool_info" => Payload::ToolInfo(pb::ToolBatchEvent { items: items(v) }),
        "approve_request" => Payload::ApproveRequest(pb::ApproveRequestEvent {
            request_id: text(v, "request_id"),
            items: items(v),
            judge_pending: flag(v, "judge_pending"),
        }),
        "approval_resolved" => Payload::ApprovalResolved(pb::ApprovalResolvedEvent {
            approved: flag(v, "approved"),
            feedback: text(v, "feedback"),
        }),
        "tool_output_chunk" => Payload::ToolOutputChunk(pb::ToolOutputChunkEvent {
            call_id: text(v, "call_id"),
            chunk: text(v, "chunk"),
        }),
        "tool_result" => Payload::ToolResult(pb::ToolResultEvent {
            call_id: text(v, "call_id"),
            name: text(v, "name"),
            output: text(v, "output"),
            is_error: flag(v, "is_error"),
        }),
        "info" => Payload::Info(message(v)),
        "error" => Payload::Error(message(v)),
        "busy_error" => Payload::BusyError(message(v)),
        "turn_complete" => Payload::TurnComplete(turn_complete(v)),
        "events_truncated" => Payload::EventsTruncated(pb::EventsTruncatedEvent {
            missed_from: number(v, "missed_from"),
            missed_to: number(v, "missed_to"),
        }),
        "ws_state" => Payload::WsState(pb::WsStateEvent {
            ws_id: text(v, "ws_id"),
            state: state_of(&text(v, "state")).into(),
            content: text(v, "content"),
        }),
        _ => return None,
    })
}

/// The typed `turn_complete` of its JSON.
pub fn turn_complete(v: &Value) -> pb::TurnCompleteEvent {
    pb::TurnCompleteEvent {
        correlation_id: text(v, "correlation_id"),
        content: text(v, "content"),
        state: state_of(&text(v, "state")).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_keep_json_and_seq_and_type_the_common_events() {
        let e = event_of(Frame::event(
            Some(4),
            json!({"type": "content", "text": "hi"}),
        ))
        .unwrap();
        assert_eq!(e.seq, Some(4));
        assert_eq!(e.r#type, "content");
        assert_eq!(e.json, r#"{"type":"content","text":"hi"}"#);
        assert_eq!(
            e.payload,
            Some(Payload::Content(pb::TextEvent { text: "hi".into() }))
        );
        let done = event_of(Frame::Json {
            id: Some(9),
            json: r#"{"type":"turn_complete","correlation_id":"c","content":"x","state":"idle"}"#
                .into(),
        })
        .unwrap();
        assert_eq!(
            done.payload,
            Some(Payload::TurnComplete(pb::TurnCompleteEvent {
                correlation_id: "c".into(),
                content: "x".into(),
                state: pb::WorkstreamState::Idle.into(),
            }))
        );
        // An event type the contract does not type is still there, untyped and whole.
        let other = event_of(Frame::event(None, json!({"type": "preview", "url": "/p"}))).unwrap();
        assert_eq!(other.payload, None);
        assert_eq!(other.r#type, "preview");
        assert!(other.json.contains("\"/p\""));
        assert_eq!(event_of(Frame::Ping), None);
    }

    #[test]
    fn node_stream_events_carry_ws_id_and_ws_seq() {
        let e = event_of(Frame::Json {
            id: Some(12),
            json: r#"{"type":"info","message":"m","ws_id":"w","ws_seq":3,"node_seq":12}"#.into(),
        })
        .unwrap();
        assert_eq!(
            (e.seq, e.ws_id.as_str(), e.ws_seq),
            (Some(12), "w", Some(3))
        );
        assert_eq!(
            e.payload,
            Some(Payload::Info(pb::MessageEvent {
                message: "m".into()
            }))
        );
    }
}
