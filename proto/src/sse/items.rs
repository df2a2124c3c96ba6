//! Structured values nested inside SSE events: tool items, verdicts, history
//! entries and the workstream state (node spec §2.2, §2.3).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The state of a workstream (node spec §2.2 `state_change`, §2.3 `ws_state`;
/// cluster spec §1.3). Lowercase on the wire. `closed` is the stored state of
/// a closed workstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum WorkstreamState {
    /// Waiting for input.
    #[default]
    Idle,
    /// The LLM is streaming.
    Thinking,
    /// Tools are running.
    Running,
    /// Blocked on an approval or a plan review.
    Attention,
    /// The last turn failed.
    Error,
    /// Closed (never live).
    Closed,
}

impl WorkstreamState {
    /// Every state, in the order above.
    pub const ALL: [WorkstreamState; 6] = [
        Self::Idle,
        Self::Thinking,
        Self::Running,
        Self::Attention,
        Self::Error,
        Self::Closed,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Thinking => "thinking",
            Self::Running => "running",
            Self::Attention => "attention",
            Self::Error => "error",
            Self::Closed => "closed",
        }
    }

    /// Parses the wire spelling; `None` for anything else (including `""`).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl fmt::Display for WorkstreamState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of [`WorkstreamState::from_str`]: not one of the states of node
/// spec §2.2 / cluster spec §1.3.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown workstream state: {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for WorkstreamState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// A judge verdict on one tool call (node spec §2.2 "Verdict object"):
/// nested as `ToolItem.verdict` (heuristic tier) and spread at the top level
/// of `intent_verdict` (LLM tier). Keys this crate does not know are kept in
/// `extra` so a relay passes them through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Verdict {
    /// 32 hex digits.
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub verdict_id: String,
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub call_id: String,
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub func_name: String,
    /// The call's arguments as a JSON *string*.
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub func_args: String,
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub intent_summary: String,
    /// e.g. `low`, `medium`, `high`, `critical`.
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub risk_level: String,
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub confidence: f64,
    /// e.g. `approve`, `review`, `deny`.
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub recommendation: String,
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub reasoning: String,
    /// A real list here (a JSON string in the MQ `intent_verdict`).
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub evidence: Vec<String>,
    /// `heuristic` or `llm`.
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub tier: String,
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub judge_model: String,
    /// Integer milliseconds; a float on input is truncated.
    #[serde(deserialize_with = "crate::tolerant::lenient_u64")]
    pub latency_ms: u64,
    /// Keys not listed above, in arrival order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for Verdict {
    fn default() -> Self {
        Self {
            verdict_id: String::new(),
            call_id: String::new(),
            func_name: String::new(),
            func_args: String::new(),
            intent_summary: String::new(),
            risk_level: String::new(),
            confidence: 0.0,
            recommendation: String::new(),
            reasoning: String::new(),
            evidence: Vec::new(),
            tier: String::new(),
            judge_model: String::new(),
            latency_ms: 0,
            extra: Map::new(),
        }
    }
}

/// One tool call of a batch, as shown to the user (node spec §2.2 `ToolItem`;
/// cluster spec §1.3 `items`). `error` is always emitted (`null` when none);
/// `verdict` only when the judge produced one. Unknown keys are kept in
/// `extra` so a relay passes items through untouched.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolItem {
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub call_id: String,
    /// Display line, e.g. `"\u{2699} bash: echo hi"`.
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub header: String,
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub preview: String,
    /// `__budget_override__` is a pseudo-tool.
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub func_name: String,
    /// The name approvals are remembered under; see [`ToolItem::label`].
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub approval_label: String,
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub needs_approval: bool,
    /// Why the call will not run (malformed, unknown, blocked by policy).
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Keys not listed above, in arrival order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The pseudo-tool name of a token-budget override (cluster spec §1.3).
pub const BUDGET_OVERRIDE_TOOL: &str = "__budget_override__";

impl ToolItem {
    /// `approval_label`, or `func_name` when the label is empty.
    pub fn label(&self) -> &str {
        if self.approval_label.is_empty() {
            &self.func_name
        } else {
            &self.approval_label
        }
    }

    /// Whether this item asks for a decision (cluster spec §3.7 step 1):
    /// needs approval, names a function, and carries no error.
    pub fn awaits_decision(&self) -> bool {
        self.needs_approval
            && !self.func_name.is_empty()
            && self.error.as_deref().is_none_or(str::is_empty)
    }
}

/// Who wrote a history entry (node spec §2.2 `HistoryEntry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    User,
    Assistant,
    Tool,
}

/// A tool call recorded on an assistant history entry (node spec §2.2).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryToolCall {
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub id: String,
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub name: String,
    /// The raw JSON arguments string.
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub arguments: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One conversation message replayed in `history` (node spec §2.2).
/// `tool_calls`, `denied`, `is_error`, `pending` and `receipt` are omitted when
/// empty/false; `content` is always present (a string, `null` or a list).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryEntry {
    #[serde(deserialize_with = "crate::tolerant::null_as_default")]
    pub role: Role,
    /// `str | null | list` as the original stores it.
    pub content: Value,
    /// Present on assistant entries that called tools.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::tolerant::null_as_default"
    )]
    pub tool_calls: Option<Vec<HistoryToolCall>>,
    /// Tool entries denied or blocked, and the assistant entry that issued them.
    #[serde(
        skip_serializing_if = "is_false",
        deserialize_with = "crate::tolerant::null_as_default"
    )]
    pub denied: bool,
    /// Tool entries flagged as errors.
    #[serde(
        skip_serializing_if = "is_false",
        deserialize_with = "crate::tolerant::null_as_default"
    )]
    pub is_error: bool,
    /// The last assistant entry with tool calls while an approval is outstanding.
    #[serde(
        skip_serializing_if = "is_false",
        deserialize_with = "crate::tolerant::null_as_default"
    )]
    pub pending: bool,
    /// Tool entries of an interrupted batch: the call's effect receipt (our extension,
    /// [`crate::receipt`]); absent otherwise.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::tolerant::null_as_default"
    )]
    pub receipt: Option<crate::receipt::EffectStatus>,
}
