//! Decoding is tolerant exactly as cluster spec §1.1 says, and typed where it
//! cannot be.

use turnstone_proto::ProtoError;
use turnstone_proto::ids::is_short_id;
use turnstone_proto::mq::{InboundMessage, OutboundEvent};
use turnstone_proto::sse::{GlobalEvent, WsEvent};

#[test]
fn unknown_keys_are_ignored_and_not_re_emitted() {
    let msg = InboundMessage::decode(
        br#"{"type": "command", "correlation_id": "aaaaaaaaaaaa", "timestamp": 1.5, "ws_id": "w", "command": "/clear", "extra": {"x": 1}, "seq": 9}"#,
    )
    .unwrap();
    let InboundMessage::Command(c) = &msg else {
        panic!("command")
    };
    assert_eq!(c.command, "/clear");
    assert_eq!(
        msg.encode(),
        r#"{"type":"command","correlation_id":"aaaaaaaaaaaa","timestamp":1.5,"ws_id":"w","command":"/clear"}"#
    );
}

#[test]
fn missing_fields_take_spec_defaults() {
    let msg = InboundMessage::decode(br#"{"type": "send"}"#).unwrap();
    let InboundMessage::Send(s) = &msg else {
        panic!("send")
    };
    assert!(is_short_id(&s.correlation_id), "{}", s.correlation_id);
    assert!(s.timestamp > 1_577_836_800.0, "timestamp defaults to now");
    assert_eq!(
        (
            s.ws_id.as_str(),
            s.message.as_str(),
            s.auto_approve,
            s.auto_approve_tools.len()
        ),
        ("", "", false, 0)
    );

    // `approved` defaults to true, `feedback` to null.
    let InboundMessage::Approve(a) =
        InboundMessage::decode(br#"{"type": "approve", "request_id": "r"}"#).unwrap()
    else {
        panic!("approve")
    };
    assert!(a.approved);
    assert_eq!(a.feedback, None);
    assert!(
        InboundMessage::Approve(a)
            .encode()
            .contains(r#""feedback":null"#)
    );

    let OutboundEvent::Ack(ack) = OutboundEvent::decode(br#"{"type": "ack"}"#).unwrap() else {
        panic!("ack")
    };
    assert_eq!(ack.status, "ok");
    assert_eq!(ack.correlation_id, "", "outbound ids are not generated");

    let OutboundEvent::OutputWarning(w) =
        OutboundEvent::decode(br#"{"type": "output_warning"}"#).unwrap()
    else {
        panic!("output_warning")
    };
    assert_eq!(
        (
            w.risk_level.as_str(),
            w.flags.as_str(),
            w.annotations.as_str()
        ),
        ("none", "[]", "[]")
    );

    let OutboundEvent::IntentVerdict(v) =
        OutboundEvent::decode(br#"{"type": "intent_verdict"}"#).unwrap()
    else {
        panic!("intent_verdict")
    };
    assert_eq!(v.evidence, "[]");
}

#[test]
fn absent_empty_or_null_correlation_id_is_generated() {
    for json in [
        &br#"{"type": "health"}"#[..],
        br#"{"type": "health", "correlation_id": ""}"#,
        br#"{"type": "health", "correlation_id": null}"#,
    ] {
        let a = InboundMessage::decode(json).unwrap();
        let b = InboundMessage::decode(json).unwrap();
        assert!(is_short_id(a.correlation_id()), "{}", a.correlation_id());
        assert_ne!(a.correlation_id(), b.correlation_id(), "fresh per decode");
    }
    let kept =
        InboundMessage::decode(br#"{"type": "health", "correlation_id": "not-hex-but-kept"}"#)
            .unwrap();
    assert_eq!(kept.correlation_id(), "not-hex-but-kept");
}

#[test]
fn top_level_null_means_default() {
    let InboundMessage::Approve(a) = InboundMessage::decode(
        br#"{"type": "approve", "ws_id": null, "approved": null, "feedback": null, "always": null}"#,
    )
    .unwrap() else {
        panic!("approve")
    };
    assert_eq!((a.ws_id.as_str(), a.approved, a.always), ("", true, false));
}

#[test]
fn unknown_or_missing_inbound_type_is_unknown_type() {
    let err = InboundMessage::decode(br#"{"type": "bogus", "ws_id": "w"}"#).unwrap_err();
    assert_eq!(err, ProtoError::UnknownType("bogus".into()));
    assert_eq!(err.to_string(), "Unknown inbound message type: 'bogus'");
    assert!(!err.is_retryable());
    // Outbound names are not inbound types.
    assert_eq!(
        InboundMessage::decode(br#"{"type": "ack"}"#).unwrap_err(),
        ProtoError::UnknownType("ack".into())
    );
    assert_eq!(
        InboundMessage::decode(br#"{"ws_id": "w"}"#).unwrap_err(),
        ProtoError::UnknownType(String::new())
    );
}

#[test]
fn non_string_type_is_a_field_error() {
    let err = InboundMessage::decode(br#"{"type": 5}"#).unwrap_err();
    assert!(
        matches!(&err, ProtoError::InvalidField { field, .. } if field == "type"),
        "{err:?}"
    );
    assert!(OutboundEvent::decode(br#"{"type": ["ack"]}"#).is_err());
}

#[test]
fn malformed_json_and_non_objects_are_errors() {
    for bad in [
        &b""[..],
        b"not json",
        b"{\"type\": \"send\"",
        b"\xff\xfe",
        b"{} {}",
    ] {
        assert!(
            matches!(InboundMessage::decode(bad), Err(ProtoError::Malformed(_))),
            "{bad:?}"
        );
        assert!(matches!(
            OutboundEvent::decode(bad),
            Err(ProtoError::Malformed(_))
        ));
        assert!(matches!(
            WsEvent::decode(bad),
            Err(ProtoError::Malformed(_))
        ));
        assert!(matches!(
            GlobalEvent::decode(bad),
            Err(ProtoError::Malformed(_))
        ));
    }
    assert_eq!(
        InboundMessage::decode(b"[1, 2]").unwrap_err(),
        ProtoError::NotAnObject("an array")
    );
    assert_eq!(
        OutboundEvent::decode(b"null").unwrap_err(),
        ProtoError::NotAnObject("null")
    );
    assert!(serde_json::from_str::<InboundMessage>("5").is_err());
}

#[test]
fn wrong_value_types_name_the_field() {
    let cases: [(&[u8], &str, &str); 5] = [
        (br#"{"type": "send", "message": 5}"#, "send", "message"),
        (
            br#"{"type": "send", "auto_approve": "yes"}"#,
            "send",
            "auto_approve",
        ),
        (
            br#"{"type": "send", "auto_approve_tools": "bash"}"#,
            "send",
            "auto_approve_tools",
        ),
        (
            br#"{"type": "create_workstream", "name": "n", "skill": ["a"]}"#,
            "create_workstream",
            "skill",
        ),
        (
            br#"{"type": "approve", "feedback": 1}"#,
            "approve",
            "feedback",
        ),
    ];
    for (json, ty, field) in cases {
        match InboundMessage::decode(json) {
            Err(ProtoError::InvalidField {
                message_type,
                field: f,
                reason,
            }) => {
                assert_eq!((message_type.as_str(), f.as_str()), (ty, field));
                assert!(reason.contains("invalid type"), "{reason}");
            }
            other => panic!("{}: {other:?}", String::from_utf8_lossy(json)),
        }
    }
    let err =
        OutboundEvent::decode(br#"{"type": "tool_info", "items": [{"needs_approval": "x"}]}"#)
            .unwrap_err();
    assert!(
        matches!(&err, ProtoError::InvalidField { field, .. } if field == "items"),
        "{err:?}"
    );
    let err = OutboundEvent::decode(br#"{"type": "status", "turn_count": -1}"#).unwrap_err();
    assert!(matches!(&err, ProtoError::InvalidField { field, .. } if field == "turn_count"));
    let err = WsEvent::decode(br#"{"type": "content", "text": {"a": 1}}"#).unwrap_err();
    assert!(
        matches!(&err, ProtoError::InvalidField { message_type, .. } if message_type == "content")
    );
}

#[test]
fn numbers_the_original_converts_are_accepted_leniently() {
    let OutboundEvent::IntentVerdict(v) = OutboundEvent::decode(
        br#"{"type": "intent_verdict", "latency_ms": 412.9, "confidence": 1}"#,
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!((v.latency_ms, v.confidence), (412, 1.0));
    let OutboundEvent::OutputWarning(w) =
        OutboundEvent::decode(br#"{"type": "output_warning", "redacted": true}"#).unwrap()
    else {
        panic!()
    };
    assert_eq!(w.redacted, 1);
    let WsEvent::IntentVerdict(v) =
        WsEvent::decode(br#"{"type": "intent_verdict", "latency_ms": 3.5}"#).unwrap()
    else {
        panic!()
    };
    assert_eq!(v.latency_ms, 3);
}

#[test]
fn unknown_outbound_and_sse_types_are_kept_not_rejected() {
    let ev = OutboundEvent::decode(br#"{"type": "future", "ws_id": "w", "n": 1, "skip": null}"#)
        .unwrap();
    assert_eq!(ev.type_name(), "future");
    assert_eq!(ev.ws_id(), "w");
    assert_eq!(ev.correlation_id(), "");
    let OutboundEvent::Unknown(u) = &ev else {
        panic!()
    };
    assert_eq!(u.extra.get("n"), Some(&serde_json::json!(1)));
    assert!(!u.extra.contains_key("skip"));
    assert!(
        ev.encode()
            .starts_with(r#"{"type":"future","ws_id":"w","correlation_id":"","timestamp":"#)
    );

    let ev = OutboundEvent::decode(br#"{"ws_id": "w"}"#).unwrap();
    assert_eq!(ev.type_name(), "");

    let ev = WsEvent::decode(br#"{"type": "seq_gap", "from": 3}"#).unwrap();
    assert_eq!(ev.type_name(), "seq_gap");
    assert_eq!(ev.encode(), r#"{"type":"seq_gap","from":3}"#);
    let ev = GlobalEvent::decode(br#"{"type": "ws_created", "ws_id": "w"}"#).unwrap();
    assert_eq!((ev.type_name(), ev.ws_id()), ("ws_created", "w"));
}

#[test]
fn unit_sse_events_ignore_extra_keys() {
    assert_eq!(
        WsEvent::decode(br#"{"type": "stream_end", "ws_id": "w", "seq": 4}"#).unwrap(),
        WsEvent::StreamEnd
    );
    assert_eq!(WsEvent::Cancelled.encode(), r#"{"type":"cancelled"}"#);
}

#[test]
fn optional_keys_are_absent_when_empty() {
    use turnstone_proto::sse::{ToolResult, WorkstreamState, WsClosed, WsState};
    let r = WsEvent::ToolResult(ToolResult {
        call_id: "c".into(),
        name: "bash".into(),
        output: "hi".into(),
        is_error: false,
    });
    assert!(!r.encode().contains("is_error"));
    let r = WsEvent::ToolResult(ToolResult {
        is_error: true,
        ..ToolResult::default()
    });
    assert!(r.encode().ends_with(r#""is_error":true}"#));

    let busy = GlobalEvent::WsState(WsState {
        state: WorkstreamState::Running,
        ..WsState::default()
    });
    assert!(!busy.encode().contains("content"));
    let idle = GlobalEvent::WsState(WsState {
        content: Some(String::new()),
        ..WsState::default()
    });
    assert!(idle.encode().ends_with(r#""content":""}"#));

    let closed = GlobalEvent::WsClosed(WsClosed {
        ws_id: "w".into(),
        ..WsClosed::default()
    });
    assert_eq!(closed.encode(), r#"{"type":"ws_closed","ws_id":"w"}"#);
    let decoded =
        GlobalEvent::decode(br#"{"type": "ws_closed", "ws_id": "w", "reason": null}"#).unwrap();
    assert_eq!(decoded, closed);
}

#[test]
fn tool_items_pass_unknown_keys_through() {
    let json = br#"{"type": "tool_info", "items": [{"call_id": "c", "func_name": "f", "error": null, "mcp_server": "git", "verdict": {"tier": "heuristic", "rule": "r1"}}]}"#;
    let ev = WsEvent::decode(json).unwrap();
    let WsEvent::ToolInfo(info) = &ev else {
        panic!()
    };
    assert_eq!(info.items[0].label(), "f", "label falls back to func_name");
    assert_eq!(info.items[0].extra["mcp_server"], "git");
    assert_eq!(info.items[0].verdict.as_ref().unwrap().extra["rule"], "r1");
    let encoded = ev.encode();
    assert!(encoded.contains(r#""mcp_server":"git""#), "{encoded}");
    assert!(encoded.contains(r#""rule":"r1""#), "{encoded}");
    assert_eq!(WsEvent::decode(encoded.as_bytes()).unwrap(), ev);
}
