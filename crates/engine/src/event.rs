//! What a workstream tells its frontends. Every event gets a per-workstream `seq`; the
//! serialised form of [`Event`] is the per-workstream SSE payload of the node API
//! (`type` tag plus fields, spec `node-api.md` §2.2), plus `turn_complete`, our addition.

use std::sync::Arc;

use serde::Serialize;

/// A workstream's state (seed architecture "State Transitions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WsState {
    Idle,
    Thinking,
    Running,
    Attention,
    Error,
}

impl WsState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Thinking => "thinking",
            Self::Running => "running",
            Self::Attention => "attention",
            Self::Error => "error",
        }
    }
}

/// One tool call of a batch as frontends see it (`ToolItem` of the node API).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolItem {
    pub call_id: String,
    pub header: String,
    pub preview: String,
    pub func_name: String,
    pub approval_label: String,
    pub needs_approval: bool,
    /// Why the call will not run (malformed, unknown tool, invalid arguments).
    pub error: Option<String>,
}

/// Token accounting reported at the end of a turn (`status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusInfo {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub context_window: u64,
    /// Percent of the context window used, one decimal.
    pub pct: f64,
    pub effort: String,
    pub cache_creation_tokens: u64,
    pub cache_read_tokens: u64,
    pub tool_calls_this_turn: u64,
    pub turn_count: u64,
}

/// A workstream event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    StateChange {
        state: WsState,
    },
    ThinkingStart,
    ThinkingStop,
    Reasoning {
        text: String,
    },
    Content {
        text: String,
    },
    StreamEnd,
    ToolInfo {
        items: Vec<ToolItem>,
    },
    ApproveRequest {
        request_id: String,
        items: Vec<ToolItem>,
        judge_pending: bool,
    },
    ApprovalResolved {
        approved: bool,
        feedback: String,
    },
    ToolOutputChunk {
        call_id: String,
        chunk: String,
    },
    ToolResult {
        call_id: String,
        name: String,
        output: String,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    Status(StatusInfo),
    Info {
        message: String,
    },
    Error {
        message: String,
    },
    BusyError {
        message: String,
    },
    ClearUi,
    Cancelled,
    /// Emitted with the transition to idle (or error) that ends a turn: the correlation id
    /// of the send that started it and the turn's full visible text.
    TurnComplete {
        correlation_id: String,
        content: String,
        state: WsState,
    },
    /// Activity line for dashboards (`ws_activity` on the node's global stream).
    Activity {
        activity: String,
        activity_state: String,
    },
    /// A `plan_agent` plan awaiting the user's review (`/v1/api/plan`); the turn waits.
    /// `request_id` (ours, additive) names the review, as in `approve_request`.
    PlanReview {
        request_id: String,
        content: String,
    },
    /// How a plan review was decided (ours, additive): `decision` is `accept`, `reject` or
    /// `refine`; `feedback` the reply (or the cancel/timeout reason); `decided_by` `user`,
    /// `cancel` or `timeout`.
    PlanResolved {
        request_id: String,
        decision: crate::decision::PlanDecision,
        feedback: String,
        decided_by: String,
    },
    /// Content `open_preview` stored for the frontends' preview pane (ours, additive): its
    /// id, kind (`web`, `pdf`, `image`, `table`, `text`, `markdown`), title and the URL
    /// that serves it.
    Preview {
        preview_id: String,
        kind: String,
        title: String,
        url: String,
    },
}

impl Event {
    /// The wire `type` name.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::StateChange { .. } => "state_change",
            Self::ThinkingStart => "thinking_start",
            Self::ThinkingStop => "thinking_stop",
            Self::Reasoning { .. } => "reasoning",
            Self::Content { .. } => "content",
            Self::StreamEnd => "stream_end",
            Self::ToolInfo { .. } => "tool_info",
            Self::ApproveRequest { .. } => "approve_request",
            Self::ApprovalResolved { .. } => "approval_resolved",
            Self::ToolOutputChunk { .. } => "tool_output_chunk",
            Self::ToolResult { .. } => "tool_result",
            Self::Status(_) => "status",
            Self::Info { .. } => "info",
            Self::Error { .. } => "error",
            Self::BusyError { .. } => "busy_error",
            Self::ClearUi => "clear_ui",
            Self::Cancelled => "cancelled",
            Self::TurnComplete { .. } => "turn_complete",
            Self::Activity { .. } => "activity",
            Self::Preview { .. } => "preview",
            Self::PlanReview { .. } => "plan_review",
            Self::PlanResolved { .. } => "plan_resolved",
        }
    }

    pub(crate) fn info(message: impl Into<String>) -> Self {
        Self::Info {
            message: message.into(),
        }
    }

    pub(crate) fn error(message: impl Into<String>) -> Self {
        Self::Error {
            message: message.into(),
        }
    }
}

/// An event with its position: `seq` is monotonic per workstream, starting at 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Envelope {
    pub seq: u64,
    pub ws_id: Arc<str>,
    #[serde(flatten)]
    pub event: Event,
}
