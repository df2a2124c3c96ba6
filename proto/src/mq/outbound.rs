//! Outbound MQ events: bridge → clients, published on Redis pub/sub
//! (cluster spec §1.3).

use std::ops::{Deref, DerefMut};

use serde_json::{Map, Value};

use crate::ids::now_timestamp;
use crate::sse::{Notice, Status, Text, ToolInfo, ToolOutputChunk};
use crate::tolerant::{tagged_enum, variant_from, wire_struct};

/// Fields shared by every outbound event (cluster spec §1.3): wire order
/// `type, ws_id, correlation_id, timestamp, <own fields>`.
pub trait OutboundEnvelope {
    /// The workstream concerned; `""` for node-level events.
    fn ws_id(&self) -> &str;
    /// Replaces the workstream id.
    fn set_ws_id(&mut self, ws_id: String);
    /// The inbound request this answers, or the approval `request_id`; `""` if none.
    fn correlation_id(&self) -> &str;
    /// Replaces the correlation id.
    fn set_correlation_id(&mut self, id: String);
    /// Unix epoch seconds when the event was built.
    fn timestamp(&self) -> f64;
    /// Replaces the timestamp.
    fn set_timestamp(&mut self, ts: f64);
}

/// One outbound event: the common fields, then its own fields (`body`), in that wire
/// order. A body that is the same on the node's SSE stream (`content`, `reasoning`,
/// `tool_info`, `tool_output_chunk`, `status`, `error`, `info`) is the [`crate::sse`]
/// payload itself, so the two wires share one declaration; the others are declared
/// below. Reads and writes of the body's fields go through [`Deref`]
/// (`event.text` for `event.body.text`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, bound(deserialize = "B: serde::Deserialize<'de> + Default"))]
pub struct Outbound<B> {
    /// The workstream concerned; `""` for node-level events.
    pub ws_id: String,
    /// The inbound request this answers, or the approval `request_id`; `""` if none.
    pub correlation_id: String,
    /// Unix epoch seconds when the event was built.
    pub timestamp: f64,
    /// The event's own fields, flattened after the common ones.
    #[serde(flatten)]
    pub body: B,
}

impl<B: Default> Default for Outbound<B> {
    fn default() -> Self {
        Self::new(String::new(), B::default())
    }
}

impl<B> Outbound<B> {
    /// An event about `ws_id` carrying `body`, with no correlation id, stamped now.
    pub fn new(ws_id: impl Into<String>, body: B) -> Self {
        Self {
            ws_id: ws_id.into(),
            correlation_id: String::new(),
            timestamp: now_timestamp(),
            body,
        }
    }
}

impl<B> Deref for Outbound<B> {
    type Target = B;
    fn deref(&self) -> &B {
        &self.body
    }
}

impl<B> DerefMut for Outbound<B> {
    fn deref_mut(&mut self) -> &mut B {
        &mut self.body
    }
}

/// Implements [`OutboundEnvelope`] over a type's `ws_id`, `correlation_id` and
/// `timestamp` fields.
macro_rules! envelope_fields {
    ([$($g:ident)?] $ty:ty) => {
        impl$(<$g>)? OutboundEnvelope for $ty {
            fn ws_id(&self) -> &str {
                &self.ws_id
            }
            fn set_ws_id(&mut self, ws_id: String) {
                self.ws_id = ws_id;
            }
            fn correlation_id(&self) -> &str {
                &self.correlation_id
            }
            fn set_correlation_id(&mut self, id: String) {
                self.correlation_id = id;
            }
            fn timestamp(&self) -> f64 {
                self.timestamp
            }
            fn set_timestamp(&mut self, ts: f64) {
                self.timestamp = ts;
            }
        }
    };
}

envelope_fields!([B] Outbound<B>);

/// Declares an event whose body is the MQ wire's own: the body struct (a
/// `wire_struct!` named `$body`) and the event type `Outbound<$body>`.
macro_rules! outbound_event {
    (
        $(#[$meta:meta])*
        pub type $event:ident = $body:ident { $($fields:tt)* }
    ) => {
        wire_struct! {
            #[doc = concat!("The body of [`", stringify!($event), "`].")]
            pub struct $body { $($fields)* }
        }

        $(#[$meta])*
        pub type $event = Outbound<$body>;
    };
}

/// `ack.status` for success (cluster spec §1.3).
pub const ACK_OK: &str = "ok";
/// `ack.status` for failure (cluster spec §1.3).
pub const ACK_ERROR: &str = "error";

outbound_event! {
    /// `ack`: the node's answer to send/command/close/cancel (ws channel) or a
    /// failed create (global) (cluster spec §1.3, §3.5).
    pub type AckEvent = AckBody {
        /// `"ok"` or `"error"`.
        pub status: String = ACK_OK.to_owned(),
        pub detail: String = String::new(),
    }
}

/// `content`: a visible assistant text delta (cluster spec §1.3); the body is
/// the SSE `content`'s.
pub type ContentEvent = Outbound<Text>;

/// `reasoning`: a reasoning text delta (cluster spec §1.3); the body is the SSE
/// `reasoning`'s.
pub type ReasoningEvent = Outbound<Text>;

/// `tool_info`: a tool batch needing no decision; items passed through from
/// the node (cluster spec §1.3, node spec §2.2).
pub type ToolInfoEvent = Outbound<ToolInfo>;

outbound_event! {
    /// `approval_request`: a batch awaiting a decision; `correlation_id` is the
    /// `request_id` to answer on `{p}:resp:{request_id}` (cluster spec §1.3, §3.7).
    /// Its body is the `items` (as `tool_info`'s) and, ours and additive, the round's
    /// `cycle_id` (omitted when empty; several rounds may be pending on one workstream).
    pub type ApprovalRequestEvent = ApprovalRequestBody {
        pub items: Vec<crate::sse::ToolItem> = Vec::new(),
        #[serde(skip_serializing_if = "String::is_empty")]
        pub cycle_id: String = String::new(),
    }
}

/// `tool_output_chunk`: one line of tool output (cluster spec §1.3).
pub type ToolOutputChunkEvent = Outbound<ToolOutputChunk>;

outbound_event! {
    /// `tool_result`: a finished tool call (cluster spec §1.3, §3.6).
    ///
    /// Not the SSE [`crate::sse::ToolResult`]: the node's `is_error` is not carried on the MQ
    /// wire (cluster spec §1.3, §3.6).
    pub type ToolResultEvent = ToolResultBody {
        pub call_id: String = String::new(),
        pub name: String = String::new(),
        pub output: String = String::new(),
    }
}

outbound_event! {
    /// `plan_review`: a plan awaiting feedback; `correlation_id` is the
    /// `request_id` (cluster spec §1.3, §3.7).
    ///
    /// The body is one `content` text (`turn_complete`'s has receipts too). It is not the SSE
    /// `plan_review` body: the MQ form carries the `request_id` as the `correlation_id`.
    pub type PlanReviewEvent = ContentBody {
        pub content: String = String::new(),
    }
}

/// `status`: token usage at the end of a turn (cluster spec §1.3); the body is
/// the SSE `status`'s. `pct` is a percentage from a real node, a 0..1 fraction
/// from the simulator.
pub type StatusEvent = Outbound<Status>;

outbound_event! {
    /// `state_change`: a workstream state transition (cluster spec §1.3).
    ///
    /// The state is a string, not the SSE [`crate::sse::WorkstreamState`]: a relay passes
    /// states of other producers through instead of failing on them.
    pub type StateChangeEvent = StateChangeBody {
        pub state: String = String::new(),
    }
}

outbound_event! {
    /// `turn_complete`: the workstream went idle; `correlation_id` is the send
    /// (or create) that started the turn, `content` the full turn text
    /// (cluster spec §1.3, §3.8). `receipts` (our extension, absent when empty):
    /// the effect of every call of the turn's interrupted tool batches
    /// ([`crate::receipt`]), so a producer knows whether a side effect happened.
    pub type TurnCompleteEvent = TurnCompleteBody {
        pub content: String = String::new(),
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub receipts: Vec<crate::receipt::Receipt> = Vec::new(),
    }
}

wire_struct! {
    /// The body of an event with only the common fields.
    pub struct EmptyBody {}
}

/// `stream_end`: one LLM response finished streaming (cluster spec §1.3).
pub type StreamEndEvent = Outbound<EmptyBody>;

outbound_event! {
    /// `ws_created`: on global with `node_id` `""`, on cluster with it set
    /// (cluster spec §1.3, §3.5).
    ///
    /// Not the node's create reply ([`crate::api::CreateWorkstreamReply`]): `ws_id` is a common
    /// field here and `node_id` is added.
    pub type WsCreatedEvent = WsCreatedBody {
        pub name: String = String::new(),
        pub node_id: String = String::new(),
        pub resumed: bool = false,
        pub message_count: u64 = 0,
    }
}

/// `ws_closed` (global and cluster) (cluster spec §1.3, §3.8).
pub type WsClosedEvent = Outbound<EmptyBody>;

outbound_event! {
    /// `ws_list`: answer to `list_workstreams` (cluster spec §1.3).
    ///
    /// Items `{"id","name","state"}` passed through from the node.
    pub type WsListEvent = WsListBody {
        pub workstreams: Vec<Value> = Vec::new(),
    }
}

outbound_event! {
    /// `ws_rename` (global and cluster) (cluster spec §1.3).
    ///
    /// Not the SSE [`crate::sse::WsRename`], whose `ws_id` is a common field here.
    pub type WsRenameEvent = WsRenameBody {
        pub name: String = String::new(),
    }
}

outbound_event! {
    /// `health_response`: answer to `health` (cluster spec §1.3).
    ///
    /// `data` is the node's `/health` JSON, passed through.
    pub type HealthResponseEvent = HealthResponseBody {
        pub data: Value = Value::Object(Map::new()),
    }
}

/// `error`: a node error (ws channel) or a processing failure (global)
/// (cluster spec §1.3, §3.4); the body is the SSE `error`'s.
pub type ErrorEvent = Outbound<Notice>;

/// `info`: informational text from the node (cluster spec §1.3); the body is
/// the SSE `info`'s.
pub type InfoEvent = Outbound<Notice>;

outbound_event! {
    /// `node_list`: answer to `list_nodes` (cluster spec §1.3).
    ///
    /// Each item is a heartbeat JSON plus `node_id` (see [`super::NodeHeartbeat`]).
    pub type NodeListEvent = NodeListBody {
        pub nodes: Vec<Value> = Vec::new(),
    }
}

outbound_event! {
    /// `ws_resumed`: a create resumed an existing conversation (cluster spec §1.3).
    pub type WsResumedEvent = WsResumedBody {
        pub message_count: u64 = 0,
        pub name: String = String::new(),
    }
}

outbound_event! {
    /// `cluster_state`: a state transition with node and load, for the console
    /// (cluster spec §1.3, §3.8).
    ///
    /// Not the SSE [`crate::sse::WsState`]: the state is a string, `node_id` is added and there
    /// is no `content`. `context_ratio` is a 0..1 fraction.
    pub type ClusterStateEvent = ClusterStateBody {
        pub state: String = String::new(),
        pub node_id: String = String::new(),
        pub tokens: u64 = 0,
        pub context_ratio: f64 = 0.0,
        pub activity: String = String::new(),
        pub activity_state: String = String::new(),
    }
}

outbound_event! {
    /// `intent_verdict`: an LLM-judge verdict (cluster spec §1.3).
    ///
    /// Unlike the node's SSE form ([`crate::sse::Verdict`]), `evidence` is a JSON array
    /// *encoded as a string* and there is no `func_args`.
    pub type IntentVerdictEvent = IntentVerdictBody {
        pub call_id: String = String::new(),
        pub func_name: String = String::new(),
        pub intent_summary: String = String::new(),
        pub risk_level: String = String::new(),
        pub recommendation: String = String::new(),
        pub reasoning: String = String::new(),
        pub tier: String = String::new(),
        pub judge_model: String = String::new(),
        pub verdict_id: String = String::new(),
        pub confidence: f64 = 0.0,
        /// JSON-encoded list of strings, e.g. `"[\"rm -rf\"]"`.
        pub evidence: String = "[]".to_owned(),
        #[serde(deserialize_with = "crate::tolerant::lenient_u64")]
        pub latency_ms: u64 = 0,
    }
}

outbound_event! {
    /// `output_warning`: the output guard flagged a tool result (cluster spec §1.3).
    ///
    /// Unlike the SSE [`crate::sse::OutputWarning`], `flags`/`annotations` are JSON-encoded
    /// string lists, `redacted` is 0 or 1 and there is no `output_length`.
    pub type OutputWarningEvent = OutputWarningBody {
        pub call_id: String = String::new(),
        pub func_name: String = String::new(),
        pub risk_level: String = "none".to_owned(),
        pub flags: String = "[]".to_owned(),
        pub annotations: String = "[]".to_owned(),
        #[serde(deserialize_with = "crate::tolerant::lenient_u64")]
        pub redacted: u64 = 0,
    }
}

outbound_event! {
    /// `config_change`: defined by the original but never emitted at v0.9.6
    /// (cluster spec §1.3). Kept so it decodes as itself.
    pub type ConfigChangeEvent = ConfigChangeBody {
        pub key: String = String::new(),
        pub node_id: String = String::new(),
        /// `"set"` or `"delete"`.
        pub action: String = String::new(),
    }
}

/// An outbound event of a `type` this crate does not know (cluster spec §1.1:
/// it decodes as the base event). The common fields are kept and, as an
/// addition, so are the other keys, so a relay loses nothing.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct UnknownOutboundEvent {
    /// The unrecognised `type`.
    #[serde(rename = "type")]
    pub type_name: String,
    pub ws_id: String,
    pub correlation_id: String,
    pub timestamp: f64,
    /// Every other key, in arrival order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for UnknownOutboundEvent {
    fn default() -> Self {
        Self {
            type_name: String::new(),
            ws_id: String::new(),
            correlation_id: String::new(),
            timestamp: now_timestamp(),
            extra: Map::new(),
        }
    }
}

envelope_fields!([] UnknownOutboundEvent);

tagged_enum! {
    /// Every outbound MQ event (cluster spec §1.3), discriminated by `type`.
    ///
    /// Decoding follows §1.1; an unknown `type` decodes as
    /// [`OutboundEvent::Unknown`] rather than failing.
    pub enum OutboundEvent {
        Ack(AckEvent) = "ack",
        Content(ContentEvent) = "content",
        Reasoning(ReasoningEvent) = "reasoning",
        ToolInfo(ToolInfoEvent) = "tool_info",
        ApprovalRequest(ApprovalRequestEvent) = "approval_request",
        ToolOutputChunk(ToolOutputChunkEvent) = "tool_output_chunk",
        ToolResult(ToolResultEvent) = "tool_result",
        PlanReview(PlanReviewEvent) = "plan_review",
        Status(StatusEvent) = "status",
        StateChange(StateChangeEvent) = "state_change",
        TurnComplete(TurnCompleteEvent) = "turn_complete",
        StreamEnd(StreamEndEvent) = "stream_end",
        WsCreated(WsCreatedEvent) = "ws_created",
        WsClosed(WsClosedEvent) = "ws_closed",
        WsList(WsListEvent) = "ws_list",
        WsRename(WsRenameEvent) = "ws_rename",
        HealthResponse(HealthResponseEvent) = "health_response",
        Error(ErrorEvent) = "error",
        Info(InfoEvent) = "info",
        NodeList(NodeListEvent) = "node_list",
        WsResumed(WsResumedEvent) = "ws_resumed",
        ClusterState(ClusterStateEvent) = "cluster_state",
        IntentVerdict(IntentVerdictEvent) = "intent_verdict",
        OutputWarning(OutputWarningEvent) = "output_warning",
        ConfigChange(ConfigChangeEvent) = "config_change",
    }
    unknown {
        /// A `type` not listed above (kept, not rejected).
        Unknown(UnknownOutboundEvent)
    }
    envelope OutboundEnvelope
}

impl OutboundEvent {
    fn after_decode(&mut self) {}

    /// The workstream concerned; `""` for node-level events.
    pub fn ws_id(&self) -> &str {
        self.envelope().ws_id()
    }

    /// The correlation id (`""` when the event answers nothing).
    pub fn correlation_id(&self) -> &str {
        self.envelope().correlation_id()
    }

    /// Unix epoch seconds when the event was built.
    pub fn timestamp(&self) -> f64 {
        self.envelope().timestamp()
    }

    /// Sets `ws_id`, returning the event (handy when relaying node events).
    pub fn with_ws_id(mut self, ws_id: impl Into<String>) -> Self {
        self.envelope_mut().set_ws_id(ws_id.into());
        self
    }

    /// Sets `correlation_id`, returning the event.
    pub fn with_correlation_id(mut self, id: impl Into<String>) -> Self {
        self.envelope_mut().set_correlation_id(id.into());
        self
    }
}

// `From` for the events whose body belongs to one `type` only; an event whose
// body serves two (`content`/`reasoning`, `tool_info`/`approval_request`,
// `error`/`info`, `plan_review`/`turn_complete`, `stream_end`/`ws_closed`) is
// wrapped in its variant by name.
variant_from! {
    OutboundEvent:
    Ack(AckEvent),
    ToolOutputChunk(ToolOutputChunkEvent),
    ToolResult(ToolResultEvent),
    Status(StatusEvent),
    StateChange(StateChangeEvent),
    WsCreated(WsCreatedEvent),
    WsList(WsListEvent),
    WsRename(WsRenameEvent),
    HealthResponse(HealthResponseEvent),
    NodeList(NodeListEvent),
    WsResumed(WsResumedEvent),
    ClusterState(ClusterStateEvent),
    IntentVerdict(IntentVerdictEvent),
    OutputWarning(OutputWarningEvent),
    ConfigChange(ConfigChangeEvent),
    Unknown(UnknownOutboundEvent),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sse::{ToolItem, WsEvent};

    fn stamped(mut ev: OutboundEvent) -> OutboundEvent {
        ev.envelope_mut().set_correlation_id("c1".into());
        ev.envelope_mut().set_timestamp(1.5);
        ev
    }

    /// A body shared with the SSE wire is, on the MQ wire, the common fields followed by
    /// exactly the SSE event's own keys, in its order; and it decodes back to itself.
    #[test]
    fn shared_bodies_are_the_envelope_then_the_sse_keys_and_round_trip() {
        let item = ToolItem {
            call_id: "call_1".into(),
            func_name: "bash".into(),
            needs_approval: true,
            ..ToolItem::default()
        };
        let status = Status {
            prompt_tokens: 10,
            total_tokens: 12,
            pct: 1.5,
            effort: "low".into(),
            turn_count: 2,
            ..Status::default()
        };
        let text = Text { text: "hi".into() };
        let notice = Notice {
            message: "m".into(),
        };
        let chunk = ToolOutputChunk {
            call_id: "call_1".into(),
            chunk: "x\n".into(),
        };
        let tools = ToolInfo { items: vec![item] };
        let cases = [
            (
                WsEvent::Content(text.clone()),
                OutboundEvent::Content(Outbound::new("w", text.clone())),
            ),
            (
                WsEvent::Reasoning(text.clone()),
                OutboundEvent::Reasoning(Outbound::new("w", text)),
            ),
            (
                WsEvent::ToolInfo(tools.clone()),
                OutboundEvent::ToolInfo(Outbound::new("w", tools.clone())),
            ),
            (
                WsEvent::ToolOutputChunk(chunk.clone()),
                OutboundEvent::ToolOutputChunk(Outbound::new("w", chunk)),
            ),
            (
                WsEvent::Status(status.clone()),
                OutboundEvent::Status(Outbound::new("w", status)),
            ),
            (
                WsEvent::Error(notice.clone()),
                OutboundEvent::Error(Outbound::new("w", notice.clone())),
            ),
            (
                WsEvent::Info(notice.clone()),
                OutboundEvent::Info(Outbound::new("w", notice)),
            ),
        ];
        for (sse, mq) in cases {
            let mq = stamped(mq);
            let mut expected = json!({
                "type": mq.type_name(),
                "ws_id": "w",
                "correlation_id": "c1",
                "timestamp": 1.5,
            });
            let Value::Object(sse_keys) = sse.to_value() else {
                panic!("an object")
            };
            for (k, v) in sse_keys.into_iter().filter(|(k, _)| k != "type") {
                expected[k] = v;
            }
            assert_eq!(mq.encode(), expected.to_string(), "{}", mq.type_name());
            assert_eq!(
                OutboundEvent::decode(mq.encode().as_bytes()).ok(),
                Some(mq.clone())
            );
            assert_eq!(
                OutboundEvent::from_ws_event("w", &sse).map(stamped),
                Some(mq)
            );
        }
        // `approval_request` has the `tool_info` body plus the round's `cycle_id`.
        let body = ApprovalRequestBody {
            items: tools.items.clone(),
            cycle_id: "c1".into(),
        };
        let req = stamped(OutboundEvent::ApprovalRequest(Outbound::new("w", body)));
        let back = OutboundEvent::decode(req.encode().as_bytes()).unwrap();
        assert_eq!(back.type_name(), "approval_request");
        assert_eq!(back, req);
        let OutboundEvent::ApprovalRequest(back) = back else {
            unreachable!()
        };
        assert_eq!(back.body.cycle_id, "c1");
        // A producer that knows no rounds (the original) sends only the items.
        let old = OutboundEvent::decode(
            br#"{"type":"approval_request","ws_id":"w","correlation_id":"r","items":[]}"#,
        );
        assert!(matches!(old, Ok(OutboundEvent::ApprovalRequest(r)) if r.body.cycle_id.is_empty()));
    }

    #[test]
    fn the_body_reads_through_the_event_and_missing_keys_take_the_defaults() {
        let OutboundEvent::Status(s) = OutboundEvent::decode(br#"{"type":"status","pct":0.25}"#)
            .unwrap_or_else(|e| panic!("{e}"))
        else {
            panic!("status")
        };
        assert_eq!((s.pct, s.total_tokens, s.ws_id.as_str()), (0.25, 0, ""));
        let Ok(OutboundEvent::StreamEnd(mut e)) =
            OutboundEvent::decode(br#"{"type":"stream_end","ws_id":"w","extra":1}"#)
        else {
            panic!("stream_end")
        };
        e.timestamp = 0.0;
        assert_eq!(
            OutboundEvent::StreamEnd(e).encode(),
            r#"{"type":"stream_end","ws_id":"w","correlation_id":"","timestamp":0.0}"#
        );
    }
}
