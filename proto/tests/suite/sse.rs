//! Round trips of every SSE shape in the node spec.

use turnstone_proto::sse::{GlobalEvent, Role, WorkstreamState, WsEvent};

use super::fixtures::{GLOBAL_EVENTS, WS_EVENTS, keys, value};

#[test]
fn every_ws_event_type_has_a_fixture() {
    // 22 catalogue types + our ws_state, turn_complete, plan_resolved and preview.
    assert_eq!(WsEvent::TYPE_NAMES.len(), 26);
    for ty in WsEvent::TYPE_NAMES {
        assert!(
            WS_EVENTS.iter().any(|(_, j)| value(j)["type"] == *ty),
            "no fixture for {ty}"
        );
    }
    for ty in GlobalEvent::TYPE_NAMES {
        assert!(
            GLOBAL_EVENTS.iter().any(|(_, j)| value(j)["type"] == *ty),
            "no fixture for {ty}"
        );
    }
}

#[test]
fn ws_events_reencode_to_the_same_json() {
    for (name, json) in WS_EVENTS {
        let ev = WsEvent::decode(json.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let original = value(json);
        assert_eq!(ev.type_name(), original["type"], "{name}");
        let encoded = ev.encode();
        assert_eq!(encoded, serde_json::to_string(&original).unwrap(), "{name}");
        assert_eq!(keys(&ev.to_value()), keys(&original), "{name}");
        assert_eq!(WsEvent::decode(encoded.as_bytes()).unwrap(), ev, "{name}");
        let via_serde: WsEvent = serde_json::from_str(json).unwrap();
        assert_eq!(via_serde, ev, "{name}");
    }
}

#[test]
fn global_events_reencode_to_the_same_json() {
    for (name, json) in GLOBAL_EVENTS {
        let ev = GlobalEvent::decode(json.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let original = value(json);
        assert_eq!(ev.type_name(), original["type"], "{name}");
        assert_eq!(ev.ws_id(), original["ws_id"], "{name}");
        let encoded = ev.encode();
        assert_eq!(encoded, serde_json::to_string(&original).unwrap(), "{name}");
        assert_eq!(
            GlobalEvent::decode(encoded.as_bytes()).unwrap(),
            ev,
            "{name}"
        );
    }
}

#[test]
fn decoded_structure_is_typed() {
    let ev = WsEvent::decode(WS_EVENTS[2].1.as_bytes()).unwrap();
    let WsEvent::History(h) = ev else {
        panic!("history")
    };
    assert_eq!(h.messages.len(), 5);
    assert_eq!(h.messages[0].role, Role::User);
    assert!(h.messages[0].content.is_array());
    assert!(h.messages[1].content.is_null());
    assert!(h.messages[1].denied);
    assert_eq!(h.messages[1].tool_calls.as_ref().unwrap()[0].name, "bash");
    assert!(h.messages[3].is_error);
    assert_eq!(h.messages[4].tool_calls, None);

    let ev = WsEvent::decode(br#"{"type": "state_change", "state": "attention"}"#).unwrap();
    assert_eq!(
        ev,
        WsEvent::StateChange(turnstone_proto::sse::StateChange {
            state: WorkstreamState::Attention
        })
    );

    let ev = WsEvent::decode(WS_EVENTS[10].1.as_bytes()).unwrap();
    let WsEvent::ApproveRequest(req) = ev else {
        panic!("approve_request")
    };
    assert!(req.judge_pending);
    assert!(req.items[0].awaits_decision());
    assert!(
        !req.items[1].awaits_decision(),
        "errored items never await a decision"
    );
}

#[test]
fn workstream_state_spelling() {
    for st in WorkstreamState::ALL {
        assert_eq!(WorkstreamState::parse(st.as_str()), Some(st));
        assert_eq!(st.as_str().parse::<WorkstreamState>(), Ok(st));
        assert_eq!(serde_json::to_string(&st).unwrap(), format!("\"{st}\""));
    }
    assert_eq!(WorkstreamState::parse(""), None);
    assert_eq!(WorkstreamState::parse("Idle"), None);
    assert!(WsEvent::decode(br#"{"type": "state_change", "state": "sleeping"}"#).is_err());
}

#[test]
fn snapshot_of_encoded_sse() {
    let mut out = String::new();
    for (name, json) in WS_EVENTS {
        out.push_str(&format!(
            "ws/{name}: {}\n",
            WsEvent::decode(json.as_bytes()).unwrap().encode()
        ));
    }
    for (name, json) in GLOBAL_EVENTS {
        out.push_str(&format!(
            "global/{name}: {}\n",
            GlobalEvent::decode(json.as_bytes()).unwrap().encode()
        ));
    }
    insta::assert_snapshot!("sse_encoded", out);
}
