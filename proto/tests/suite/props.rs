//! Decoders never panic, and whatever decodes re-encodes to itself.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use turnstone_proto::mq::{InboundMessage, OutboundEvent};
use turnstone_proto::sse::{GlobalEvent, WsEvent};

/// Keys the decoders know, so generated objects hit real fields.
const KEYS: &[&str] = &[
    "type",
    "ws_id",
    "correlation_id",
    "timestamp",
    "message",
    "auto_approve",
    "auto_approve_tools",
    "name",
    "target_node",
    "request_id",
    "approved",
    "feedback",
    "always",
    "command",
    "model",
    "initial_message",
    "resume_ws",
    "user_id",
    "skill",
    "status",
    "detail",
    "text",
    "items",
    "call_id",
    "chunk",
    "output",
    "content",
    "prompt_tokens",
    "pct",
    "effort",
    "state",
    "node_id",
    "resumed",
    "message_count",
    "workstreams",
    "data",
    "nodes",
    "tokens",
    "context_ratio",
    "activity",
    "evidence",
    "latency_ms",
    "confidence",
    "flags",
    "redacted",
    "is_error",
    "messages",
    "role",
    "tool_calls",
    "verdict",
    "header",
    "needs_approval",
    "error",
    "reason",
    "judge_pending",
    "func_name",
    "approval_label",
    "x",
];

fn type_names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    v.extend(InboundMessage::TYPE_NAMES);
    v.extend(OutboundEvent::TYPE_NAMES);
    v.extend(WsEvent::TYPE_NAMES);
    v.extend(GlobalEvent::TYPE_NAMES);
    v.push("bogus");
    v
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        (0u64..100).prop_map(|n| Value::Number(n.into())),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-z_ \u{2699}]{0,8}".prop_map(Value::String),
        proptest::sample::select(type_names()).prop_map(|s| Value::String(s.to_owned())),
        proptest::sample::select(vec![
            "idle",
            "thinking",
            "running",
            "attention",
            "error",
            "user",
            "tool"
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(
                |pairs| Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            ),
        ]
    })
}

/// A top-level object with a known (or bogus) `type` and known keys.
fn message_object() -> impl Strategy<Value = Value> {
    (
        proptest::sample::select(type_names()),
        proptest::collection::vec((proptest::sample::select(KEYS), json_value()), 0..8),
    )
        .prop_map(|(ty, pairs)| {
            let mut map = Map::new();
            map.insert("type".to_owned(), Value::String(ty.to_owned()));
            for (k, v) in pairs {
                if k != "type" {
                    map.insert(k.to_owned(), v);
                }
            }
            Value::Object(map)
        })
}

fn check_all(bytes: &[u8]) {
    if let Ok(m) = InboundMessage::decode(bytes) {
        assert_eq!(InboundMessage::decode(m.encode().as_bytes()).ok(), Some(m));
    }
    if let Ok(e) = OutboundEvent::decode(bytes) {
        assert_eq!(OutboundEvent::decode(e.encode().as_bytes()).ok(), Some(e));
    }
    if let Ok(e) = WsEvent::decode(bytes) {
        assert_eq!(WsEvent::decode(e.encode().as_bytes()).ok(), Some(e));
    }
    if let Ok(e) = GlobalEvent::decode(bytes) {
        assert_eq!(GlobalEvent::decode(e.encode().as_bytes()).ok(), Some(e));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        check_all(&bytes);
    }

    #[test]
    fn json_ish_strings_never_panic(s in r#"[{}\[\]":, a-z0-9._\-\\]{0,80}"#) {
        check_all(s.as_bytes());
    }

    #[test]
    fn arbitrary_json_never_panics(v in json_value()) {
        check_all(serde_json::to_string(&v).unwrap().as_bytes());
    }

    #[test]
    fn typed_objects_decode_or_fail_cleanly_and_round_trip(v in message_object()) {
        check_all(serde_json::to_string(&v).unwrap().as_bytes());
    }
}

#[test]
fn generated_objects_decode_often_enough_to_mean_something() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = message_object();
    let (mut ok, mut total) = (0, 0);
    for _ in 0..500 {
        let v = strategy.new_tree(&mut runner).unwrap().current();
        total += 1;
        if OutboundEvent::from_value(v).is_ok() {
            ok += 1;
        }
    }
    assert!(ok * 10 > total, "only {ok}/{total} decoded");
}
