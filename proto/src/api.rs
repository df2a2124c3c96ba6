//! Simple JSON bodies of the node's HTTP API (node spec §1.3; cluster spec
//! §4), shared by the node (server side) and the bridge/console (client side).
//! Routes, status codes and auth are the HTTP layer's business.
//!
//! All structs are `#[serde(default)]`: a missing key takes its default, an
//! unknown key is ignored. [`decode`] adds the MQ-style tolerance (top-level
//! `null` = missing) and typed errors.

use serde::de::DeserializeOwned;

use crate::ProtoError;
use crate::sse::WorkstreamState;
use crate::tolerant::{decode_fields, parse_object, wire_struct};

/// Tolerant decoding of a request or response body into `T`; `what` names
/// the body in errors.
pub fn decode<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, ProtoError> {
    decode_fields(what, parse_object(bytes)?)
}

/// [`decode`] for a body already parsed as JSON (a handler that also reads extra keys).
pub fn decode_value<T: DeserializeOwned>(
    what: &str,
    value: &serde_json::Value,
) -> Result<T, ProtoError> {
    match value {
        serde_json::Value::Object(map) => decode_fields(what, map.clone()),
        _ => Err(ProtoError::NotAnObject("request body")),
    }
}

/// `{"status": "ok"}`, the reply to a successful mutation (node spec §1.1).
pub const STATUS_OK: &str = "ok";
/// `{"status": "busy"}`, the reply to `send` while a turn runs (node spec §1.3.6).
pub const STATUS_BUSY: &str = "busy";

wire_struct! {
    /// `{"status": ...}`: the reply of simple mutations (node spec §1.1, §1.3.6).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct StatusReply {
        /// `"ok"` or `"busy"`.
        pub status: String = STATUS_OK.to_owned(),
    }
}

impl StatusReply {
    /// `{"status":"busy"}`: a turn runs, the mutation was not made.
    pub fn busy() -> Self {
        Self {
            status: STATUS_BUSY.to_owned(),
        }
    }
}

/// `{"status": "queued", ...}`, the reply to a `"queue": true` send that waits (ours).
pub const STATUS_QUEUED: &str = "queued";
/// `{"status": "closed"}`, the reply to a send whose workstream closed meanwhile.
pub const STATUS_CLOSED: &str = "closed";

wire_struct! {
    /// The reply of `POST /v1/api/send` (node spec §1.3.6): `status` is `ok`, `busy`
    /// (with our `reason` when the node says why), `queued` (ours, with the 1-based
    /// `position` in the workstream's queue) or `closed`.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct SendReply {
        pub status: String = STATUS_OK.to_owned(),
        #[serde(skip_serializing_if = "Option::is_none")]
        pub position: Option<u64> = None,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub reason: Option<String> = None,
    }
}

impl SendReply {
    /// `{"status":"ok"}`: the turn started.
    pub fn ok() -> Self {
        Self::default()
    }

    /// `{"status":"queued","position":N}`: the send waits, `1` being next.
    pub fn queued(position: u64) -> Self {
        Self {
            status: STATUS_QUEUED.to_owned(),
            position: Some(position),
            ..Self::default()
        }
    }

    /// `{"status":"busy","reason":…}`: refused, nothing stored.
    pub fn busy(reason: impl Into<String>) -> Self {
        Self {
            status: STATUS_BUSY.to_owned(),
            reason: Some(reason.into()),
            ..Self::default()
        }
    }

    /// `{"status":"closed"}`: the workstream closed before the send was admitted.
    pub fn closed() -> Self {
        Self {
            status: STATUS_CLOSED.to_owned(),
            ..Self::default()
        }
    }
}

wire_struct! {
    /// `{"error": "..."}`: every application error body (node spec §1.1).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct ErrorReply {
        pub error: String = String::new(),
    }
}

wire_struct! {
    /// `POST /v1/api/send` (node spec §1.3.6).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct SendBody {
        pub ws_id: String = String::new(),
        pub message: String = String::new(),
        /// Ours: makes the send idempotent (as the `Idempotency-Key` header does); a repeat
        /// within the window returns the first reply and starts nothing. `""` = none.
        #[serde(skip_serializing_if = "is_empty")]
        pub correlation_id: String = String::new(),
        /// Ours (the MQ `send` field the bridge passes through): `true` turns blanket
        /// auto-approval on (sticky, as the original); absent or `false` changes nothing.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub auto_approve: Option<bool> = None,
        /// Ours: when non-empty, replaces the workstream's per-tool auto-approve set.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub auto_approve_tools: Vec<String> = Vec::new(),
        /// Ours: wait in the workstream's queue when it is busy (`{"status":"queued"}`)
        /// instead of being refused `busy`.
        #[serde(skip_serializing_if = "is_false")]
        pub queue: bool = false,
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

wire_struct! {
    /// `POST /v1/api/approve` (node spec §1.3.7). `feedback` is omitted when
    /// `None` (the bridge sends it only when set).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct ApproveBody {
        pub ws_id: String = String::new(),
        pub approved: bool = false,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub feedback: Option<String> = None,
        pub always: bool = false,
        /// Ours: the `request_id` of the `approve_request` this decides; a decision naming a
        /// request that is no longer pending is answered from the durable record.
        #[serde(skip_serializing_if = "is_empty")]
        pub request_id: String = String::new(),
        /// Ours: the `cycle_id` of the round this decides (several may be pending).
        #[serde(skip_serializing_if = "is_empty")]
        pub cycle_id: String = String::new(),
        /// Ours: a `call_id` of an item of the round this decides.
        #[serde(skip_serializing_if = "is_empty")]
        pub call_id: String = String::new(),
        // No id at all (the original's clients): the oldest pending round.
    }
}

wire_struct! {
    /// `POST /v1/api/plan` (node spec §1.3.10): `""` approves, text revises,
    /// `"reject"` rejects.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct PlanBody {
        pub ws_id: String = String::new(),
        pub feedback: String = String::new(),
        /// Ours: the `request_id` of the `plan_review` this answers (as in [`ApproveBody`]).
        #[serde(skip_serializing_if = "is_empty")]
        pub request_id: String = String::new(),
    }
}

wire_struct! {
    /// `POST /v1/api/command` (node spec §1.3.8).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct CommandBody {
        pub ws_id: String = String::new(),
        pub command: String = String::new(),
    }
}

wire_struct! {
    /// The reply of `POST /v1/api/cancel`: `{"status": "ok"}`, plus `removed` (how many
    /// queued messages were dropped) when the request said `"all": true`.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct CancelReply {
        pub status: String = STATUS_OK.to_owned(),
        #[serde(skip_serializing_if = "Option::is_none")]
        pub removed: Option<u64> = None,
    }
}

wire_struct! {
    /// `POST /v1/api/_internal/release` (ours): the bridge tells its node that `owner` serves
    /// the workstream now (it moved while this node was down or cut off), so this node's copy
    /// leaves memory and listings without being closed. `200 {"status":"ok"}`; `409` while
    /// it is busy (a turn, a pending approval, queued sends, an open stream: asked again at
    /// the next lease refresh); `404` when this node does not have it.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct ReleaseBody {
        pub ws_id: String = String::new(),
        /// The node that owns it now (logged).
        pub owner: String = String::new(),
    }
}

wire_struct! {
    /// `POST /v1/api/cancel` (node spec §1.3.9).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct CancelBody {
        pub ws_id: String = String::new(),
        pub force: bool = false,
        /// Ours: also remove every queued message of the workstream (the reply then
        /// carries `removed`).
        #[serde(skip_serializing_if = "is_false")]
        pub all: bool = false,
    }
}

fn is_empty(s: &str) -> bool {
    s.is_empty()
}

wire_struct! {
    /// `POST /v1/api/workstreams/new` (node spec §1.3.11; cluster spec §3.5).
    /// `model`, `resume_ws`, `skill` and `user_id` are omitted when empty, as
    /// the bridge sends them.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct CreateWorkstreamBody {
        pub name: String = String::new(),
        pub auto_approve: bool = false,
        #[serde(skip_serializing_if = "is_empty")]
        pub model: String = String::new(),
        #[serde(skip_serializing_if = "is_empty")]
        pub resume_ws: String = String::new(),
        #[serde(skip_serializing_if = "is_empty")]
        pub skill: String = String::new(),
        #[serde(skip_serializing_if = "is_empty")]
        pub user_id: String = String::new(),
        /// Ours: makes the create idempotent (as the `Idempotency-Key` header does); a
        /// repeat within the window returns the first reply and creates nothing.
        #[serde(skip_serializing_if = "is_empty")]
        pub correlation_id: String = String::new(),
        /// Ours: the id the new workstream gets (the bridge re-homes a workstream under its
        /// old id). Refused when a live workstream has it.
        #[serde(skip_serializing_if = "is_empty")]
        pub ws_id: String = String::new(),
        /// Ours: tool labels approved without asking (the MQ `auto_approve_tools`).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub auto_approve_tools: Vec<String> = Vec::new(),
        /// Ours: the approval posture, `ask` (the default), `auto-review` or `full`
        /// (`full` needs what `auto_approve: true` needs).
        #[serde(skip_serializing_if = "is_empty")]
        pub posture: String = String::new(),
        /// Ours, additive: a configured persona (`[tools.personas]`), a named tool-visibility
        /// set; empty = none. An unknown name is a 400.
        #[serde(skip_serializing_if = "is_empty")]
        pub persona: String = String::new(),
    }
}

wire_struct! {
    /// The 200 reply of `POST /v1/api/workstreams/new` (node spec §1.3.11).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct CreateWorkstreamReply {
        pub ws_id: String = String::new(),
        pub name: String = String::new(),
        pub resumed: bool = false,
        pub message_count: u64 = 0,
    }
}

wire_struct! {
    /// `POST /v1/api/workstreams/close` (node spec §1.3.12).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct CloseWorkstreamBody {
        pub ws_id: String = String::new(),
    }
}

wire_struct! {
    /// One row of `GET /v1/api/workstreams` (node spec §1.3.3) and of the MQ
    /// `ws_list` event.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct WorkstreamSummary {
        pub id: String = String::new(),
        pub name: String = String::new(),
        pub state: WorkstreamState = WorkstreamState::Idle,
        /// Ours: how many sends wait in the workstream's queue (the node always says).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub queued: Option<u64> = None,
        /// Ours: `true` when the workstream is hibernated (out of memory, state `idle`; the
        /// next request to it rehydrates it). Absent for a live one.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub hibernated: Option<bool> = None,
    }
}

wire_struct! {
    /// One message waiting in a workstream's queue (ours: `GET
    /// /v1/api/workstreams/{ws_id}/queue`, the dashboard's `queue`).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct QueuedSend {
        pub correlation_id: String = String::new(),
        pub message: String = String::new(),
        /// ISO timestamp of its arrival.
        pub queued_at: String = String::new(),
    }
}

wire_struct! {
    /// `POST /v1/api/sends/outcomes` (ours): the correlation ids to look up (at most
    /// [`MAX_OUTCOME_QUERY`]).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct SendOutcomesBody {
        pub correlation_ids: Vec<String> = Vec::new(),
    }
}

/// Most correlation ids one `POST /v1/api/sends/outcomes` may ask about.
pub const MAX_OUTCOME_QUERY: usize = 1000;

/// `SendOutcome::state` values.
pub const OUTCOME_QUEUED: &str = "queued";
pub const OUTCOME_STARTED: &str = "started";
pub const OUTCOME_COMPLETED: &str = "completed";
pub const OUTCOME_REMOVED: &str = "removed";
pub const OUTCOME_UNKNOWN: &str = "unknown";

wire_struct! {
    /// What became of one send on this node.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct SendOutcome {
        pub correlation_id: String = String::new(),
        pub ws_id: String = String::new(),
        /// `queued` (waits: its `turn_complete` is still to come), `started` (running),
        /// `completed`, `removed` (cancelled or deleted before it ran) or `unknown` (not
        /// stored here, or forgotten after a day).
        pub state: String = String::new(),
        /// `completed` before this run of the node began: its `turn_complete` is not on
        /// this run's event streams, so it is given here (`turn_complete`).
        pub previous_run: bool = false,
        /// The `turn_complete` event the turn ended with (`completed` only).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub turn_complete: Option<serde_json::Value> = None,
    }
}

wire_struct! {
    /// The reply of `POST /v1/api/sends/outcomes`, in the order asked.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct SendOutcomes {
        pub outcomes: Vec<SendOutcome> = Vec::new(),
    }
}

wire_struct! {
    /// `GET /v1/api/workstreams/{ws_id}/queue` (ours), next first.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct QueueList {
        pub ws_id: String = String::new(),
        /// A turn is running.
        pub busy: bool = false,
        /// The bound (`--max-queued-sends`).
        pub max: u64 = 0,
        pub queued: Vec<QueuedSend> = Vec::new(),
    }
}

wire_struct! {
    /// `GET /v1/api/workstreams` (node spec §1.3.3), in creation order.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct WorkstreamList {
        pub workstreams: Vec<WorkstreamSummary> = Vec::new(),
    }
}

wire_struct! {
    /// Per-state counts in `/health` (node spec §1.3.1).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct HealthWorkstreams {
        pub total: u64 = 0,
        pub idle: u64 = 0,
        pub thinking: u64 = 0,
        pub running: u64 = 0,
        pub attention: u64 = 0,
        pub error: u64 = 0,
        /// Ours: hibernated workstreams (in `total`, in none of the states above).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub hibernated: Option<u64> = None,
    }
}

wire_struct! {
    /// LLM backend status in `/health` (node spec §1.3.1).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct HealthBackend {
        /// `"up"` or `"down"`.
        pub status: String = "up".to_owned(),
        /// `closed`, `open` or `half_open`.
        pub circuit_state: String = "closed".to_owned(),
    }
}

wire_struct! {
    /// MCP counts in `/health`, present only with an MCP client (node spec §1.3.1).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct HealthMcp {
        pub servers: u64 = 0,
        pub resources: u64 = 0,
        pub prompts: u64 = 0,
        /// Ours: MCP tools over all servers.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub tools: Option<u64> = None,
        /// Ours: servers currently connected.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub connected: Option<u64> = None,
    }
}

wire_struct! {
    /// The node-wide event stream's position in `/health` (ours).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct HealthEvents {
        /// The last `node_seq` of `/v1/api/events/node`.
        pub node_seq: u64 = 0,
        /// How often the ring dropped entries a reader had not read.
        pub truncations: u64 = 0,
    }
}

wire_struct! {
    /// `GET /health` (node spec §1.3.1; cluster spec §4.1), keys in wire order.
    /// `mcp` is omitted when `None`; a missing `max_ws` reads as 10.
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Health {
        /// `"ok"` or `"degraded"`.
        pub status: String = STATUS_OK.to_owned(),
        pub version: String = String::new(),
        pub node_id: String = String::new(),
        pub uptime_seconds: f64 = 0.0,
        pub model: String = String::new(),
        pub max_ws: u64 = crate::mq::DEFAULT_MAX_WS,
        pub workstreams: HealthWorkstreams = HealthWorkstreams::default(),
        pub backend: HealthBackend = HealthBackend::default(),
        /// Ours (the node always sends it; the original does not).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub events: Option<HealthEvents> = None,
        /// Ours: how late a 100 ms timer fires, in milliseconds (proof of progress).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub event_loop_lag_ms: Option<f64> = None,
        /// Ours: seconds since a turn last ended. The node always sends the key, `null`
        /// before the first turn (`Some(None)`); a reply without it decodes as `None`.
        #[serde(skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "schema", schemars(with = "Option<f64>"))]
        pub last_turn_completed_age_seconds: Option<Option<f64>> = None,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub mcp: Option<HealthMcp> = None,
    }
}

wire_struct! {
    /// One workstream of `GET /v1/api/dashboard` (node spec §1.3.4).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct DashboardWorkstream {
        pub id: String = String::new(),
        pub name: String = String::new(),
        pub state: WorkstreamState = WorkstreamState::Idle,
        pub title: String = String::new(),
        pub tokens: u64 = 0,
        pub context_ratio: f64 = 0.0,
        pub activity: String = String::new(),
        pub activity_state: String = String::new(),
        pub tool_calls: u64 = 0,
        /// Always `"local"` on a node.
        pub node: String = "local".to_owned(),
        pub model: String = String::new(),
        pub model_alias: String = String::new(),
        /// Ours: the messages waiting in the workstream's queue, next first (the node
        /// always sends it).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub queue: Option<Vec<QueuedSend>> = None,
        /// Ours: `true` when the workstream is hibernated (see [`WorkstreamSummary`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub hibernated: Option<bool> = None,
    }
}

wire_struct! {
    /// The `aggregate` of `GET /v1/api/dashboard` (node spec §1.3.4).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct DashboardAggregate {
        pub total_tokens: u64 = 0,
        pub total_tool_calls: u64 = 0,
        /// Workstreams whose state is not idle.
        pub active_count: u64 = 0,
        pub total_count: u64 = 0,
        /// Whole seconds here (a float in `/health`).
        pub uptime_seconds: u64 = 0,
        pub node: String = "local".to_owned(),
    }
}

wire_struct! {
    /// `GET /v1/api/dashboard` (node spec §1.3.4).
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    pub struct Dashboard {
        pub workstreams: Vec<DashboardWorkstream> = Vec::new(),
        pub aggregate: DashboardAggregate = DashboardAggregate::default(),
    }
}
