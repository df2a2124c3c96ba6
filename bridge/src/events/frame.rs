//! The frames of the node-wide event stream (`/v1/api/events/node`), decoded once from the
//! SSE `data` into typed values: the per-workstream events as [`WsEvent`], plus what only
//! the node-wide stream carries (`node_hello`, `events_truncated`, the workstream
//! lifecycle, the activity line, the `request_id` of an approval request).

use serde::Deserialize;
use serde_json::{Map, Value};
use turnstone_proto::event::{Event, NodeNotice, NodeStreamBody, NodeStreamEntry, NodeWsEvent};
use turnstone_proto::sse::{ToolItem, WsActivity, WsEvent, WsRename};

/// One frame of the node-wide stream.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeFrame {
    /// `node_hello`: the first frame; a new `boot` restarts the node's sequence.
    Hello { boot: u64 },
    /// `events_truncated`: the node no longer holds some events the bridge had not
    /// published.
    Truncated { missed_from: u64, missed_to: u64 },
    /// An event of one workstream.
    Event(NodeEvent),
    /// Anything else (a frame without a workstream, a type the bridge does not relay).
    Other,
}

/// An event of workstream `ws_id` on the node-wide stream.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeEvent {
    pub ws_id: String,
    pub kind: NodeEventKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeEventKind {
    /// An event of the per-workstream stream.
    Ws(WsEvent),
    /// `approve_request`, with the `request_id` the replies are relayed under and its
    /// round's `cycle_id`.
    ApproveRequest {
        request_id: String,
        items: Vec<ToolItem>,
        cycle_id: String,
    },
    /// `activity`: the activity line (the global stream's `ws_activity`).
    Activity(WsActivity),
    /// `ws_created`: the workstream opened on this node.
    Created,
    /// `ws_closed`: the workstream closed.
    Closed,
    /// `ws_rename`: the workstream got a (new) name.
    Renamed(WsRename),
}

impl NodeEventKind {
    /// The node's `type` of the event (kept beside it in the workstream's Redis Stream).
    pub fn type_name(&self) -> &str {
        match self {
            Self::Ws(e) => e.type_name(),
            Self::ApproveRequest { .. } => "approve_request",
            Self::Activity(_) => "activity",
            Self::Created => "ws_created",
            Self::Closed => "ws_closed",
            Self::Renamed(_) => "ws_rename",
        }
    }
}

/// The two control frames of the node-wide stream, which carry no workstream event.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Control {
    NodeHello {
        #[serde(default)]
        boot: u64,
    },
    EventsTruncated {
        #[serde(default)]
        missed_from: u64,
        #[serde(default)]
        missed_to: u64,
    },
}

/// Any frame, decoded from the SSE `data` in one `serde_json` call: an entry the node
/// serialised ([`NodeStreamEntry`], the typed engine event), a control frame, or any
/// other JSON object.
#[derive(Deserialize)]
#[serde(untagged)]
enum Wire {
    Entry(NodeStreamEntry<'static>),
    Control(Control),
    Other(Map<String, Value>),
}

impl NodeFrame {
    /// Decodes one SSE `data`; `None` when it is not a JSON object.
    pub fn decode(data: &str) -> Option<Self> {
        // serde also reads an enum from an array (`[1]`); a frame is an object.
        if !data.trim_start().starts_with('{') {
            return None;
        }
        let frame = match serde_json::from_str::<Wire>(data).ok()? {
            Wire::Control(Control::NodeHello { boot }) => Self::Hello { boot },
            Wire::Control(Control::EventsTruncated {
                missed_from,
                missed_to,
            }) => Self::Truncated {
                missed_from,
                missed_to,
            },
            Wire::Entry(entry) if !entry.ws_id().is_empty() => Self::of_entry(entry),
            Wire::Entry(_) => Self::Other,
            Wire::Other(map) => Self::of_other(map),
        };
        Some(frame)
    }

    /// A frame that is no [`NodeStreamEntry`] (a type the node's `Event` does not have, or
    /// a partial frame): with a workstream, the tolerant [`WsEvent`] view (an unknown type
    /// decodes as `WsEvent::Unknown`), as every proto decoder treats other producers.
    fn of_other(map: Map<String, Value>) -> Self {
        let ws_id = match map.get("ws_id") {
            Some(Value::String(w)) if !w.is_empty() => w.clone(),
            _ => return Self::Other,
        };
        match WsEvent::from_value(Value::Object(map)) {
            Ok(e) => NodeEventKind::Ws(e).of(ws_id),
            Err(_) => Self::Other,
        }
    }

    /// The bridge's view of one entry; the event is mapped typed, without another parse.
    fn of_entry(entry: NodeStreamEntry<'static>) -> Self {
        let (ws_id, kind) = match entry.body {
            NodeStreamBody::Ws(NodeWsEvent { event, ws_id, .. }) => {
                let kind = match event.into_owned() {
                    Event::ApproveRequest {
                        request_id,
                        items,
                        cycle_id,
                        ..
                    } => NodeEventKind::ApproveRequest {
                        request_id,
                        items,
                        cycle_id,
                    },
                    Event::Activity {
                        activity,
                        activity_state,
                    } => NodeEventKind::Activity(WsActivity {
                        ws_id: ws_id.to_string(),
                        activity,
                        activity_state,
                    }),
                    event => match event.to_ws_event(&ws_id) {
                        Some(e) => NodeEventKind::Ws(e),
                        None => return Self::Other,
                    },
                };
                (ws_id.into_owned(), kind)
            }
            NodeStreamBody::Notice(notice) => match notice.into_owned() {
                NodeNotice::WsCreated(c) => (c.ws_id, NodeEventKind::Created),
                NodeNotice::WsClosed(c) => (c.ws_id, NodeEventKind::Closed),
                NodeNotice::WsRename(r) => (r.ws_id.clone(), NodeEventKind::Renamed(r)),
            },
        };
        kind.of(ws_id)
    }
}

impl NodeEventKind {
    fn of(self, ws_id: String) -> NodeFrame {
        NodeFrame::Event(NodeEvent { ws_id, kind: self })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_proto::sse::{Text, WorkstreamState};

    fn event(data: &str) -> NodeEvent {
        match NodeFrame::decode(data) {
            Some(NodeFrame::Event(e)) => e,
            other => panic!("not an event: {other:?}"),
        }
    }

    #[test]
    fn frames_of_the_node_stream_decode_once_into_typed_values() {
        assert_eq!(
            NodeFrame::decode(r#"{"type":"node_hello","node_id":"n","boot":7,"node_seq":3}"#),
            Some(NodeFrame::Hello { boot: 7 })
        );
        assert_eq!(
            NodeFrame::decode(r#"{"type":"events_truncated","missed_from":1,"missed_to":4}"#),
            Some(NodeFrame::Truncated {
                missed_from: 1,
                missed_to: 4
            })
        );
        let e = event(r#"{"type":"content","text":"Hi","ws_id":"w1","ws_seq":2,"node_seq":5}"#);
        assert_eq!(e.ws_id, "w1");
        assert_eq!(
            e.kind,
            NodeEventKind::Ws(WsEvent::Content(Text { text: "Hi".into() }))
        );
        let e = event(r#"{"type":"state_change","state":"running","ws_id":"w1"}"#);
        assert!(matches!(
            e.kind,
            NodeEventKind::Ws(WsEvent::StateChange(ref s)) if s.state == WorkstreamState::Running
        ));
        let e = event(
            r#"{"type":"approve_request","request_id":"r1","items":[{"call_id":"c","func_name":"bash","error":null}],"judge_pending":false,"ws_id":"w1"}"#,
        );
        match e.kind {
            NodeEventKind::ApproveRequest {
                request_id, items, ..
            } => {
                assert_eq!(request_id, "r1");
                assert_eq!(items[0].func_name, "bash");
            }
            other => panic!("{other:?}"),
        }
        let e =
            event(r#"{"type":"activity","activity":"bash","activity_state":"tool","ws_id":"w1"}"#);
        assert_eq!(e.kind.type_name(), "activity");
        assert_eq!(
            event(r#"{"type":"ws_created","ws_id":"w1","name":"x"}"#).kind,
            NodeEventKind::Created
        );
        assert_eq!(
            event(r#"{"type":"ws_closed","ws_id":"w1","reason":"idle"}"#).kind,
            NodeEventKind::Closed
        );
        assert_eq!(
            event(r#"{"type":"ws_rename","ws_id":"w1","name":"n"}"#)
                .kind
                .type_name(),
            "ws_rename"
        );
    }

    #[test]
    fn an_intent_verdict_of_the_node_stream_is_relayed_in_the_mq_shape() {
        let e = event(
            r#"{"type":"intent_verdict","verdict_id":"0123456789abcdef0123456789abcdef","call_id":"c1","func_name":"bash","func_args":"{\"command\":\"ls\"}","intent_summary":"lists","risk_level":"low","confidence":0.9,"recommendation":"approve","reasoning":"r","evidence":["ls"],"tier":"llm","judge_model":"jm","latency_ms":12,"ws_id":"w1","ws_seq":4,"node_seq":9}"#,
        );
        assert_eq!(e.ws_id, "w1");
        let NodeEventKind::Ws(ws_event) = &e.kind else {
            panic!("{:?}", e.kind);
        };
        let out = turnstone_proto::mq::OutboundEvent::from_ws_event("w1", ws_event)
            .unwrap_or_else(|| panic!("not relayed: {ws_event:?}"));
        assert!(matches!(
            out,
            turnstone_proto::mq::OutboundEvent::IntentVerdict(_)
        ));
        let json = serde_json::to_value(&out).unwrap();
        assert_eq!(json["type"], "intent_verdict");
        assert_eq!(json["ws_id"], "w1");
        assert_eq!(json["tier"], "llm");
        assert_eq!(json["call_id"], "c1");
        assert_eq!(json["evidence"], r#"["ls"]"#, "a JSON string on the MQ");
        assert!(json.get("func_args").is_none() && json.get("node_seq").is_none());
    }

    #[test]
    fn frames_without_a_workstream_or_json_are_not_events() {
        assert_eq!(NodeFrame::decode("not json"), None);
        assert_eq!(NodeFrame::decode("[1]"), None);
        assert_eq!(
            NodeFrame::decode(r#"{"type":"content","text":"x"}"#),
            Some(NodeFrame::Other)
        );
        assert_eq!(
            NodeFrame::decode(r#"{"type":"stream_closing"}"#),
            Some(NodeFrame::Other)
        );
    }
}
