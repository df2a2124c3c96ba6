//! Outbound MQ events: bridge → clients, published on Redis pub/sub
//! (cluster spec §1.3).

use serde_json::{Map, Value};

use crate::ids::now_timestamp;
use crate::sse::ToolItem;
use crate::tolerant::{tagged_enum, wire_struct};

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

/// Declares one outbound payload: prepends the common fields (`ws_id` `""`,
/// `correlation_id` `""`, `timestamp` = now) and implements [`OutboundEnvelope`].
macro_rules! outbound_struct {
    (
        $(#[$smeta:meta])*
        pub struct $name:ident { $($rest:tt)* }
    ) => {
        wire_struct! {
            $(#[$smeta])*
            pub struct $name {
                pub ws_id: String = String::new(),
                pub correlation_id: String = String::new(),
                pub timestamp: f64 = now_timestamp(),
                $($rest)*
            }
        }

        impl OutboundEnvelope for $name {
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

/// `ack.status` for success (cluster spec §1.3).
pub const ACK_OK: &str = "ok";
/// `ack.status` for failure (cluster spec §1.3).
pub const ACK_ERROR: &str = "error";

outbound_struct! {
    /// `ack`: the node's answer to send/command/close/cancel (ws channel) or a
    /// failed create (global) (cluster spec §1.3, §3.5).
    pub struct AckEvent {
        /// `"ok"` or `"error"`.
        pub status: String = ACK_OK.to_owned(),
        pub detail: String = String::new(),
    }
}

outbound_struct! {
    /// `content`: a visible assistant text delta (cluster spec §1.3).
    pub struct ContentEvent {
        pub text: String = String::new(),
    }
}

outbound_struct! {
    /// `reasoning`: a reasoning text delta (cluster spec §1.3).
    pub struct ReasoningEvent {
        pub text: String = String::new(),
    }
}

outbound_struct! {
    /// `tool_info`: a tool batch needing no decision; items passed through
    /// from the node (cluster spec §1.3, node spec §2.2).
    pub struct ToolInfoEvent {
        pub items: Vec<ToolItem> = Vec::new(),
    }
}

outbound_struct! {
    /// `approval_request`: a batch awaiting a decision; `correlation_id` is the
    /// `request_id` to answer on `{p}:resp:{request_id}` (cluster spec §1.3, §3.7).
    pub struct ApprovalRequestEvent {
        pub items: Vec<ToolItem> = Vec::new(),
    }
}

outbound_struct! {
    /// `tool_output_chunk`: one line of tool output (cluster spec §1.3).
    pub struct ToolOutputChunkEvent {
        pub call_id: String = String::new(),
        pub chunk: String = String::new(),
    }
}

outbound_struct! {
    /// `tool_result`: a finished tool call; the node's `is_error` is not
    /// carried (cluster spec §1.3, §3.6).
    pub struct ToolResultEvent {
        pub call_id: String = String::new(),
        pub name: String = String::new(),
        pub output: String = String::new(),
    }
}

outbound_struct! {
    /// `plan_review`: a plan awaiting feedback; `correlation_id` is the
    /// `request_id` (cluster spec §1.3, §3.7).
    pub struct PlanReviewEvent {
        pub content: String = String::new(),
    }
}

outbound_struct! {
    /// `status`: token usage at the end of a turn (cluster spec §1.3).
    /// `pct` is a percentage from a real node, a 0..1 fraction from the simulator.
    pub struct StatusEvent {
        pub prompt_tokens: u64 = 0,
        pub completion_tokens: u64 = 0,
        pub total_tokens: u64 = 0,
        pub context_window: u64 = 0,
        pub pct: f64 = 0.0,
        pub effort: String = String::new(),
        pub cache_creation_tokens: u64 = 0,
        pub cache_read_tokens: u64 = 0,
        pub tool_calls_this_turn: u64 = 0,
        pub turn_count: u64 = 0,
    }
}

outbound_struct! {
    /// `state_change`: a workstream state transition, as a string
    /// (see [`crate::sse::WorkstreamState`]) (cluster spec §1.3).
    pub struct StateChangeEvent {
        pub state: String = String::new(),
    }
}

outbound_struct! {
    /// `turn_complete`: the workstream went idle; `correlation_id` is the send
    /// (or create) that started the turn, `content` the full turn text
    /// (cluster spec §1.3, §3.8).
    pub struct TurnCompleteEvent {
        pub content: String = String::new(),
    }
}

outbound_struct! {
    /// `stream_end`: one LLM response finished streaming (cluster spec §1.3).
    pub struct StreamEndEvent {}
}

outbound_struct! {
    /// `ws_created`: on global with `node_id` `""`, on cluster with it set
    /// (cluster spec §1.3, §3.5).
    pub struct WsCreatedEvent {
        pub name: String = String::new(),
        pub node_id: String = String::new(),
        pub resumed: bool = false,
        pub message_count: u64 = 0,
    }
}

outbound_struct! {
    /// `ws_closed` (global and cluster) (cluster spec §1.3, §3.8).
    pub struct WsClosedEvent {}
}

outbound_struct! {
    /// `ws_list`: answer to `list_workstreams`; items `{"id","name","state"}`
    /// passed through from the node (cluster spec §1.3).
    pub struct WsListEvent {
        pub workstreams: Vec<Value> = Vec::new(),
    }
}

outbound_struct! {
    /// `ws_rename` (global and cluster) (cluster spec §1.3).
    pub struct WsRenameEvent {
        pub name: String = String::new(),
    }
}

outbound_struct! {
    /// `health_response`: answer to `health`; `data` is the node's `/health`
    /// JSON, passed through (cluster spec §1.3).
    pub struct HealthResponseEvent {
        pub data: Value = Value::Object(Map::new()),
    }
}

outbound_struct! {
    /// `error`: a node error (ws channel) or a processing failure (global)
    /// (cluster spec §1.3, §3.4).
    pub struct ErrorEvent {
        pub message: String = String::new(),
    }
}

outbound_struct! {
    /// `info`: informational text from the node (cluster spec §1.3).
    pub struct InfoEvent {
        pub message: String = String::new(),
    }
}

outbound_struct! {
    /// `node_list`: answer to `list_nodes`; each item is a heartbeat JSON plus
    /// `node_id` (see [`super::NodeHeartbeat`]) (cluster spec §1.3).
    pub struct NodeListEvent {
        pub nodes: Vec<Value> = Vec::new(),
    }
}

outbound_struct! {
    /// `ws_resumed`: a create resumed an existing conversation (cluster spec §1.3).
    pub struct WsResumedEvent {
        pub message_count: u64 = 0,
        pub name: String = String::new(),
    }
}

outbound_struct! {
    /// `cluster_state`: a state transition with node and load, for the console
    /// (cluster spec §1.3, §3.8). `context_ratio` is a 0..1 fraction.
    pub struct ClusterStateEvent {
        pub state: String = String::new(),
        pub node_id: String = String::new(),
        pub tokens: u64 = 0,
        pub context_ratio: f64 = 0.0,
        pub activity: String = String::new(),
        pub activity_state: String = String::new(),
    }
}

outbound_struct! {
    /// `intent_verdict`: an LLM-judge verdict (cluster spec §1.3). Unlike the
    /// node's SSE form, `evidence` is a JSON array *encoded as a string* and
    /// there is no `func_args`.
    pub struct IntentVerdictEvent {
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

outbound_struct! {
    /// `output_warning`: the output guard flagged a tool result (cluster spec
    /// §1.3). `flags`/`annotations` are JSON-encoded string lists; `redacted`
    /// is 0 or 1.
    pub struct OutputWarningEvent {
        pub call_id: String = String::new(),
        pub func_name: String = String::new(),
        pub risk_level: String = "none".to_owned(),
        pub flags: String = "[]".to_owned(),
        pub annotations: String = "[]".to_owned(),
        #[serde(deserialize_with = "crate::tolerant::lenient_u64")]
        pub redacted: u64 = 0,
    }
}

outbound_struct! {
    /// `config_change`: defined by the original but never emitted at v0.9.6
    /// (cluster spec §1.3). Kept so it decodes as itself.
    pub struct ConfigChangeEvent {
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

impl OutboundEnvelope for UnknownOutboundEvent {
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

macro_rules! outbound_from {
    ($($variant:ident($payload:ty)),* $(,)?) => {
        $(
            impl From<$payload> for OutboundEvent {
                fn from(e: $payload) -> Self {
                    Self::$variant(e)
                }
            }
        )*
    };
}

outbound_from! {
    Ack(AckEvent),
    Content(ContentEvent),
    Reasoning(ReasoningEvent),
    ToolInfo(ToolInfoEvent),
    ApprovalRequest(ApprovalRequestEvent),
    ToolOutputChunk(ToolOutputChunkEvent),
    ToolResult(ToolResultEvent),
    PlanReview(PlanReviewEvent),
    Status(StatusEvent),
    StateChange(StateChangeEvent),
    TurnComplete(TurnCompleteEvent),
    StreamEnd(StreamEndEvent),
    WsCreated(WsCreatedEvent),
    WsClosed(WsClosedEvent),
    WsList(WsListEvent),
    WsRename(WsRenameEvent),
    HealthResponse(HealthResponseEvent),
    Error(ErrorEvent),
    Info(InfoEvent),
    NodeList(NodeListEvent),
    WsResumed(WsResumedEvent),
    ClusterState(ClusterStateEvent),
    IntentVerdict(IntentVerdictEvent),
    OutputWarning(OutputWarningEvent),
    ConfigChange(ConfigChangeEvent),
    Unknown(UnknownOutboundEvent),
}
