//! Payloads of the node's Server-Sent Events (node spec §2): the
//! per-workstream stream ([`WsEvent`], §2.2) and the global stream
//! ([`GlobalEvent`], §2.3). Each SSE `data:` line is one of these as JSON.
//! Framing (`data: ...\r\n\r\n`, pings) belongs to the HTTP layer, not here.
//!
//! Decoding is tolerant like the MQ side (unknown keys ignored, defaults
//! filled) and an unknown `type` decodes as the `Unknown` variant, because
//! clients must ignore event types they do not know.
//!
//! Two additions to the original, allowed by the compatibility rules:
//! `ws_state` may also be sent on the per-workstream stream (so the original
//! SDK's `send_and_wait` returns promptly, node spec §2.7), and a
//! `turn_complete` event closes each turn.
//!
//! ```
//! use turnstone_proto::sse::{WsEvent, Text};
//!
//! let ev = WsEvent::decode(br#"{"type": "content", "text": "Hi", "seq": 7}"#).unwrap();
//! assert_eq!(ev, WsEvent::Content(Text { text: "Hi".into() }));
//! assert_eq!(WsEvent::ThinkingStart.encode(), r#"{"type":"thinking_start"}"#);
//! ```

mod items;

pub use items::*;

use serde_json::{Map, Value};

use crate::tolerant::{tagged_enum, wire_struct};

wire_struct! {
    /// `connected`: the first frame of a per-workstream stream (node spec §2.2).
    pub struct Connected {
        pub model: String = String::new(),
        /// `""` when the model has no alias.
        pub model_alias: String = String::new(),
        /// The workstream's blanket auto-approve flag.
        pub skip_permissions: bool = false,
        /// Ours: the approval posture (`ask`, `auto-review`, `full`); omitted when empty.
        #[serde(skip_serializing_if = "String::is_empty")]
        pub posture: String = String::new(),
    }
}

wire_struct! {
    /// `history`: the conversation replayed on connect and after
    /// `/resume`, `/rewind`, `/retry` (node spec §2.2, §2.5).
    pub struct History {
        pub messages: Vec<HistoryEntry> = Vec::new(),
    }
}

wire_struct! {
    /// `state_change`: a per-workstream state transition (node spec §2.2).
    pub struct StateChange {
        pub state: WorkstreamState = WorkstreamState::Idle,
    }
}

wire_struct! {
    /// A text delta: the payload of `content` and `reasoning` (node spec §2.2).
    pub struct Text {
        pub text: String = String::new(),
    }
}

wire_struct! {
    /// `tool_info`: a batch that needs no decision (node spec §2.2). The list
    /// holds all items of the batch.
    pub struct ToolInfo {
        pub items: Vec<ToolItem> = Vec::new(),
    }
}

wire_struct! {
    /// `approve_request`: a batch with at least one item needing approval;
    /// the worker blocks (node spec §2.2).
    pub struct ApproveRequest {
        /// Ours, additive: names the approval (the bridge answers it on
        /// `{p}:resp:{request_id}`); omitted when empty.
        #[serde(skip_serializing_if = "String::is_empty")]
        pub request_id: String = String::new(),
        pub items: Vec<ToolItem> = Vec::new(),
        /// An LLM-judge verdict may still follow as `intent_verdict`.
        pub judge_pending: bool = false,
        /// Ours, additive: the approval round (several may be pending on one workstream,
        /// one per sub-agent asking); `POST /v1/api/approve` resolves it by this id or a
        /// member `call_id`. Omitted when empty.
        #[serde(skip_serializing_if = "String::is_empty")]
        pub cycle_id: String = String::new(),
    }
}

wire_struct! {
    /// `approval_resolved`: any resolution of a pending approval (node spec §2.2).
    pub struct ApprovalResolved {
        pub approved: bool = false,
        pub feedback: String = String::new(),
        /// Ours, additive: the round resolved (the `cycle_id` of its `approve_request`).
        /// Omitted when empty.
        #[serde(skip_serializing_if = "String::is_empty")]
        pub cycle_id: String = String::new(),
    }
}

wire_struct! {
    /// `output_warning`: the output guard flagged a tool result (node spec §2.2).
    /// The MQ form encodes the lists as strings (see [`crate::mq::OutputWarningEvent`]).
    pub struct OutputWarning {
        pub call_id: String = String::new(),
        pub flags: Vec<String> = Vec::new(),
        pub risk_level: String = "none".to_owned(),
        pub annotations: Vec<String> = Vec::new(),
        pub func_name: String = String::new(),
        pub output_length: u64 = 0,
        pub redacted: bool = false,
    }
}

wire_struct! {
    /// `tool_output_chunk`: one line of tool output, `\n` included (node spec §2.2).
    pub struct ToolOutputChunk {
        pub call_id: String = String::new(),
        pub chunk: String = String::new(),
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

wire_struct! {
    /// `tool_result`: a tool finished, or was rejected at prepare time
    /// (node spec §2.2). `is_error` is omitted when false.
    pub struct ToolResult {
        pub call_id: String = String::new(),
        pub name: String = String::new(),
        pub output: String = String::new(),
        #[serde(skip_serializing_if = "is_false")]
        pub is_error: bool = false,
    }
}

wire_struct! {
    /// `status`: token usage (node spec §2.2). `pct` is a percentage with one
    /// decimal.
    pub struct Status {
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
        /// Ours, additive: the token counts are a tokenizer-free estimate because the model
        /// server reported no usage (llama-cpp-python streams none). Absent when false.
        #[serde(skip_serializing_if = "is_false")]
        pub usage_estimated: bool = false,
        /// Ours, additive: the workstream is in plan mode (only read-only tools are offered
        /// and callable; seed 004). Absent when false.
        #[serde(skip_serializing_if = "is_false")]
        pub plan_mode: bool = false,
    }
}

wire_struct! {
    /// `plan_review`: a plan awaiting `/v1/api/plan` (node spec §2.2); `request_id` (ours,
    /// additive) names the review as in `approve_request`.
    pub struct PlanReview {
        #[serde(skip_serializing_if = "String::is_empty")]
        pub request_id: String = String::new(),
        pub content: String = String::new(),
    }
}

wire_struct! {
    /// `plan_resolved` (ours, additive): how a plan review was decided. `decision` is
    /// `accept`, `reject` or `refine`; `decided_by` is `user`, `cancel` or `timeout`.
    pub struct PlanResolved {
        pub request_id: String = String::new(),
        pub decision: String = String::new(),
        pub feedback: String = String::new(),
        pub decided_by: String = String::new(),
    }
}

wire_struct! {
    /// `preview` (ours, additive): content `open_preview` stored for the preview pane.
    pub struct Preview {
        pub preview_id: String = String::new(),
        pub kind: String = String::new(),
        pub title: String = String::new(),
        pub url: String = String::new(),
    }
}

wire_struct! {
    /// A message: the payload of `info`, `error` and `busy_error` (node spec §2.2).
    pub struct Notice {
        pub message: String = String::new(),
    }
}

wire_struct! {
    /// `ws_state`: a state transition with load figures (node spec §2.3).
    /// `content` (the turn's full text) is present only when `state` is idle;
    /// producers set it to `None` otherwise. Also allowed on the per-ws
    /// stream (our addition, node spec §2.7).
    pub struct WsState {
        pub ws_id: String = String::new(),
        pub state: WorkstreamState = WorkstreamState::Idle,
        /// Cumulative tokens.
        pub tokens: u64 = 0,
        /// 0..1, unrounded.
        pub context_ratio: f64 = 0.0,
        pub activity: String = String::new(),
        /// `tool`, `approval`, `thinking` or `""`.
        pub activity_state: String = String::new(),
        #[serde(skip_serializing_if = "Option::is_none")]
        pub content: Option<String> = None,
    }
}

wire_struct! {
    /// `turn_complete` (our addition on the per-ws stream): the turn started by
    /// `correlation_id` finished; `content` is its full assistant text; `receipts`
    /// (our extension, absent when empty) the effect of every call of the turn's
    /// interrupted tool batches (cancelled, denied, timed out; `crate::receipt`).
    pub struct TurnComplete {
        pub ws_id: String = String::new(),
        pub correlation_id: String = String::new(),
        pub content: String = String::new(),
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub receipts: Vec<crate::receipt::Receipt> = Vec::new(),
    }
}

wire_struct! {
    /// `ws_activity`: the activity text changed (node spec §2.3).
    pub struct WsActivity {
        pub ws_id: String = String::new(),
        pub activity: String = String::new(),
        pub activity_state: String = String::new(),
    }
}

wire_struct! {
    /// `ws_rename`: a workstream got a (new) name (node spec §2.3).
    pub struct WsRename {
        pub ws_id: String = String::new(),
        pub name: String = String::new(),
    }
}

wire_struct! {
    /// `ws_closed`: eviction or idle cleanup, not an explicit close (node spec
    /// §2.3). `reason` is `"evicted"` (with `name`) or `"idle"` (without).
    pub struct WsClosed {
        pub ws_id: String = String::new(),
        #[serde(skip_serializing_if = "Option::is_none")]
        pub reason: Option<String> = None,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub name: Option<String> = None,
    }
}

wire_struct! {
    /// `ws_created` (ours, node-wide stream only): a workstream came to life (created or
    /// resumed).
    pub struct WsCreated {
        pub ws_id: String = String::new(),
        pub name: String = String::new(),
    }
}

/// An SSE event of a `type` this crate does not know; every other key is kept.
/// Clients ignore such events (node spec §2.7; ARCHITECTURE "Compatibility").
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct UnknownEvent {
    /// The unrecognised `type`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The other keys, in arrival order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

tagged_enum! {
    /// One event of the per-workstream stream `GET /v1/api/events?ws_id=`
    /// (node spec §2.2), plus our `ws_state` and `turn_complete` additions.
    pub enum WsEvent {
        Connected(Connected) = "connected",
        History(History) = "history",
        StateChange(StateChange) = "state_change",
        Reasoning(Text) = "reasoning",
        Content(Text) = "content",
        ToolInfo(ToolInfo) = "tool_info",
        ApproveRequest(ApproveRequest) = "approve_request",
        ApprovalResolved(ApprovalResolved) = "approval_resolved",
        /// The LLM-tier verdict, its fields at the top level.
        IntentVerdict(Box<Verdict>) = "intent_verdict",
        OutputWarning(OutputWarning) = "output_warning",
        ToolOutputChunk(ToolOutputChunk) = "tool_output_chunk",
        ToolResult(ToolResult) = "tool_result",
        Status(Status) = "status",
        PlanReview(PlanReview) = "plan_review",
        /// Our addition.
        PlanResolved(PlanResolved) = "plan_resolved",
        /// Our addition.
        Preview(Preview) = "preview",
        Info(Notice) = "info",
        Error(Notice) = "error",
        BusyError(Notice) = "busy_error",
        /// Our addition (node spec §2.7).
        WsState(WsState) = "ws_state",
        /// Our addition.
        TurnComplete(TurnComplete) = "turn_complete",
    }
    units {
        /// Before each LLM request.
        ThinkingStart = "thinking_start",
        /// On the first delta and after each request.
        ThinkingStop = "thinking_stop",
        /// End of one LLM response.
        StreamEnd = "stream_end",
        /// The UI must clear its transcript.
        ClearUi = "clear_ui",
        /// A non-force cancel was accepted.
        Cancelled = "cancelled",
    }
    unknown {
        /// A `type` not listed above; clients ignore it.
        Unknown(UnknownEvent)
    }
}

impl WsEvent {
    fn after_decode(&mut self) {}
}

tagged_enum! {
    /// One event of the global stream `GET /v1/api/events/global` (node spec §2.3).
    pub enum GlobalEvent {
        WsState(WsState) = "ws_state",
        WsActivity(WsActivity) = "ws_activity",
        WsRename(WsRename) = "ws_rename",
        WsClosed(WsClosed) = "ws_closed",
    }
    unknown {
        /// A `type` not listed above; clients ignore it.
        Unknown(UnknownEvent)
    }
}

impl GlobalEvent {
    fn after_decode(&mut self) {}

    /// The workstream concerned (`""` for an unknown event without `ws_id`).
    pub fn ws_id(&self) -> &str {
        match self {
            Self::WsState(e) => &e.ws_id,
            Self::WsActivity(e) => &e.ws_id,
            Self::WsRename(e) => &e.ws_id,
            Self::WsClosed(e) => &e.ws_id,
            Self::Unknown(e) => e.extra.get("ws_id").and_then(Value::as_str).unwrap_or(""),
        }
    }
}
