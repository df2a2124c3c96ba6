//! Round trips of every MQ shape in the cluster spec.

use turnstone_proto::mq::{InboundMessage, OutboundEvent};

use super::fixtures::{
    INBOUND_FULL, INBOUND_PARTIAL, OUTBOUND_FULL, OUTBOUND_PARTIAL, keys, value,
};

#[test]
fn every_inbound_type_has_a_full_fixture() {
    assert_eq!(InboundMessage::TYPE_NAMES.len(), 10);
    for ty in InboundMessage::TYPE_NAMES {
        assert!(
            INBOUND_FULL.iter().any(|(_, j)| value(j)["type"] == *ty),
            "no fixture for {ty}"
        );
    }
}

#[test]
fn every_outbound_type_has_a_full_fixture() {
    assert_eq!(OutboundEvent::TYPE_NAMES.len(), 25);
    for ty in OutboundEvent::TYPE_NAMES {
        assert!(
            OUTBOUND_FULL.iter().any(|(_, j)| value(j)["type"] == *ty),
            "no fixture for {ty}"
        );
    }
}

#[test]
fn full_inbound_fixtures_reencode_to_the_same_keys_order_and_values() {
    for (name, json) in INBOUND_FULL {
        let msg = InboundMessage::decode(json.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let original = value(json);
        assert_eq!(msg.type_name(), original["type"], "{name}");
        assert_eq!(msg.correlation_id(), original["correlation_id"], "{name}");
        let encoded = msg.encode();
        // Byte-equal to the original re-printed compactly: same keys, order, values.
        assert_eq!(encoded, serde_json::to_string(&original).unwrap(), "{name}");
        assert_eq!(keys(&msg.to_value()), keys(&original), "{name}");
        let again = InboundMessage::decode(encoded.as_bytes()).unwrap();
        assert_eq!(again, msg, "{name}");
        // The serde entry point agrees with `decode`.
        let via_serde: InboundMessage = serde_json::from_str(json).unwrap();
        assert_eq!(via_serde, msg, "{name}");
    }
}

#[test]
fn full_outbound_fixtures_reencode_to_the_same_keys_order_and_values() {
    for (name, json) in OUTBOUND_FULL {
        let ev = OutboundEvent::decode(json.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let original = value(json);
        assert_eq!(ev.type_name(), original["type"], "{name}");
        assert_eq!(ev.ws_id(), original["ws_id"], "{name}");
        assert_eq!(ev.correlation_id(), original["correlation_id"], "{name}");
        let encoded = ev.encode();
        assert_eq!(encoded, serde_json::to_string(&original).unwrap(), "{name}");
        let again = OutboundEvent::decode(encoded.as_bytes()).unwrap();
        assert_eq!(again, ev, "{name}");
        let via_serde: OutboundEvent = serde_json::from_str(json).unwrap();
        assert_eq!(via_serde, ev, "{name}");
    }
}

#[test]
fn partial_fixtures_round_trip() {
    for (name, json) in INBOUND_PARTIAL {
        let msg = InboundMessage::decode(json.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            InboundMessage::decode(msg.encode().as_bytes()).unwrap(),
            msg,
            "{name}"
        );
    }
    for (name, json) in OUTBOUND_PARTIAL {
        let ev = OutboundEvent::decode(json.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            OutboundEvent::decode(ev.encode().as_bytes()).unwrap(),
            ev,
            "{name}"
        );
    }
}

#[test]
fn specific_decoded_values() {
    let Ok(InboundMessage::Approve(a)) = InboundMessage::decode(INBOUND_FULL[2].1.as_bytes())
    else {
        panic!("approve fixture");
    };
    assert_eq!(a.request_id, "9581019dbea9");
    assert!(a.approved && a.always);
    assert_eq!(a.feedback, None);

    let Ok(OutboundEvent::ApprovalRequest(req)) =
        OutboundEvent::decode(OUTBOUND_FULL[5].1.as_bytes())
    else {
        panic!("approval_request fixture");
    };
    let item = &req.items[0];
    assert_eq!(item.header, "\u{2699} bash: echo hi");
    assert!(item.awaits_decision());
    let verdict = item.verdict.as_ref().unwrap();
    assert_eq!(verdict.tier, "heuristic");
    assert_eq!(verdict.evidence, vec!["echo".to_owned()]);

    let Ok(OutboundEvent::Unknown(u)) =
        OutboundEvent::decode(OUTBOUND_FULL.last().unwrap().1.as_bytes())
    else {
        panic!("unknown fixture");
    };
    assert_eq!(u.type_name, "node_joined");
    assert_eq!(u.extra["node_id"], "node-c");
}

#[test]
fn snapshot_of_encoded_inbound() {
    let mut out = String::new();
    for (name, json) in INBOUND_FULL.iter().chain(INBOUND_PARTIAL) {
        let mut msg = InboundMessage::decode(json.as_bytes()).unwrap();
        if value(json).get("timestamp").is_none() {
            msg.envelope_mut().set_timestamp(0.0); // generated: keep the snapshot stable
        }
        out.push_str(&format!("{name}: {}\n", msg.encode()));
    }
    insta::assert_snapshot!("inbound_encoded", out);
}

#[test]
fn snapshot_of_encoded_outbound() {
    let mut out = String::new();
    for (name, json) in OUTBOUND_FULL.iter().chain(OUTBOUND_PARTIAL) {
        let mut ev = OutboundEvent::decode(json.as_bytes()).unwrap();
        if value(json).get("timestamp").is_none() {
            ev.envelope_mut().set_timestamp(0.0);
        }
        out.push_str(&format!("{name}: {}\n", ev.encode()));
    }
    insta::assert_snapshot!("outbound_encoded", out);
}

#[test]
fn an_inbound_traceparent_is_read_kept_and_omitted_when_absent() {
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let with = format!(r#"{{"type":"send","ws_id":"w","message":"hi","traceparent":"{tp}"}}"#);
    let msg = InboundMessage::decode(with.as_bytes()).unwrap();
    assert_eq!(msg.traceparent(), Some(tp));
    assert_eq!(value(&msg.encode())["traceparent"], tp);
    let without = InboundMessage::decode(br#"{"type":"cancel","ws_id":"w"}"#).unwrap();
    assert_eq!(without.traceparent(), None);
    assert!(value(&without.encode()).get("traceparent").is_none());
    let empty = InboundMessage::decode(br#"{"type":"health","traceparent":""}"#).unwrap();
    assert_eq!(empty.traceparent(), None);
    let wrong = InboundMessage::decode(br#"{"type":"send","traceparent":7}"#).unwrap_err();
    assert!(wrong.to_string().contains("traceparent"), "{wrong}");
}
