//! SSE → MQ shapes, cluster spec §3.6 / §3.8.

use turnstone_proto::mq::{ClusterStateEvent, OutboundEvent, StateChangeEvent};
use turnstone_proto::sse::{GlobalEvent, WsEvent};

use super::fixtures::{GLOBAL_EVENTS, W, WS_EVENTS};

fn ws_event(name: &str) -> WsEvent {
    let json = WS_EVENTS.iter().find(|(n, _)| *n == name).unwrap().1;
    WsEvent::decode(json.as_bytes()).unwrap()
}

#[test]
fn relayed_events_follow_the_bridge_table() {
    let relayed: Vec<(&str, Option<String>)> = WS_EVENTS
        .iter()
        .map(|(name, json)| {
            let ev = WsEvent::decode(json.as_bytes()).unwrap();
            (
                *name,
                OutboundEvent::from_ws_event(W, &ev).map(|o| o.type_name().to_owned()),
            )
        })
        .collect();
    for (name, out) in &relayed {
        let expected = match *name {
            "reasoning" | "content" | "tool_info" | "tool_output_chunk" | "status"
            | "intent_verdict" | "output_warning" | "stream_end" | "turn_complete" => {
                Some(name.to_string())
            }
            "tool_result" | "tool_result_error" => Some("tool_result".into()),
            "info_nudge" | "info_cancelled" => Some("info".into()),
            "error" => Some("error".into()),
            _ => None,
        };
        assert_eq!(out, &expected, "{name}");
    }
}

#[test]
fn verdict_and_warning_lists_become_json_strings() {
    let Some(OutboundEvent::IntentVerdict(v)) =
        OutboundEvent::from_ws_event(W, &ws_event("intent_verdict"))
    else {
        panic!()
    };
    assert_eq!(
        (v.ws_id.as_str(), v.evidence.as_str(), v.latency_ms),
        (W, r#"["echo hi"]"#, 412)
    );
    let Some(OutboundEvent::OutputWarning(w)) =
        OutboundEvent::from_ws_event(W, &ws_event("output_warning"))
    else {
        panic!()
    };
    assert_eq!(
        (w.flags.as_str(), w.annotations.as_str(), w.redacted),
        (r#"["secret"]"#, r#"["AWS key redacted"]"#, 1)
    );
    let Some(ev @ OutboundEvent::ToolResult(_)) =
        OutboundEvent::from_ws_event(W, &ws_event("tool_result_error"))
    else {
        panic!()
    };
    assert!(
        !ev.encode().contains("is_error"),
        "the MQ tool_result drops is_error"
    );
}

#[test]
fn ws_state_becomes_state_change_and_cluster_state() {
    let json = GLOBAL_EVENTS
        .iter()
        .find(|(n, _)| *n == "ws_state_running_after_approval")
        .unwrap()
        .1;
    let GlobalEvent::WsState(s) = GlobalEvent::decode(json.as_bytes()).unwrap() else {
        panic!()
    };
    let sc = StateChangeEvent::from_ws_state(&s);
    assert_eq!((sc.ws_id.as_str(), sc.state.as_str()), (W, "running"));
    let cs = ClusterStateEvent::from_ws_state("node-a", &s);
    assert_eq!(cs.node_id, "node-a");
    assert_eq!(cs.activity, "\u{23f3} Awaiting approval: bash \u{2014} ");
    assert_eq!(cs.activity_state, "approval");
}
