//! The records the store reads and writes. Plain data; no SQL here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use turnstone_llm::{ChatMessage, Role, ToolCall};

use crate::error::{Result, StoreError};
use crate::timestamp;

/// The `role` column of `conversations` (the seed-era row model: one row per tool call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    User,
    Assistant,
    /// One tool call of an assistant response: `tool_name`, `tool_args`, `tool_call_id`.
    ToolCall,
    /// The output of one tool call, answering `tool_call_id`.
    ToolResult,
}

impl MessageRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::ToolCall => "tool_call",
            Self::ToolResult => "tool_result",
        }
    }

    /// Parses a stored role; `tool` (the v0.9.6 name) reads as `tool_result`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "user" => Some(Self::User),
            "assistant" => Some(Self::Assistant),
            "tool_call" => Some(Self::ToolCall),
            "tool_result" | "tool" => Some(Self::ToolResult),
            _ => None,
        }
    }
}

/// One conversation row to write. The timestamp is taken when the value is built, so batching
/// does not shift it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    pub ws_id: String,
    pub role: MessageRole,
    pub content: Option<String>,
    pub tool_name: Option<String>,
    /// Raw JSON arguments text of a `tool_call` row.
    pub tool_args: Option<String>,
    pub tool_call_id: Option<String>,
    /// Raw provider blocks (JSON text), kept opaque.
    pub provider_data: Option<String>,
    pub timestamp: String,
}

impl NewMessage {
    fn base(ws_id: &str, role: MessageRole, content: Option<String>) -> Self {
        Self {
            ws_id: ws_id.to_string(),
            role,
            content,
            tool_name: None,
            tool_args: None,
            tool_call_id: None,
            provider_data: None,
            timestamp: timestamp::now(),
        }
    }

    pub fn user(ws_id: &str, text: impl Into<String>) -> Self {
        Self::base(ws_id, MessageRole::User, Some(text.into()))
    }

    pub fn assistant(ws_id: &str, text: Option<String>) -> Self {
        Self::base(ws_id, MessageRole::Assistant, text)
    }

    pub fn tool_call(ws_id: &str, call: &ToolCall) -> Self {
        Self {
            tool_name: Some(call.name.clone()),
            tool_args: Some(call.arguments.clone()),
            tool_call_id: Some(call.id.clone()),
            ..Self::base(ws_id, MessageRole::ToolCall, None)
        }
    }

    pub fn tool_result(
        ws_id: &str,
        call_id: &str,
        tool_name: Option<&str>,
        output: impl Into<String>,
    ) -> Self {
        Self {
            tool_name: tool_name.map(str::to_string),
            tool_call_id: Some(call_id.to_string()),
            ..Self::base(ws_id, MessageRole::ToolResult, Some(output.into()))
        }
    }

    /// The rows that persist one provider message. An assistant message becomes an `assistant`
    /// row (only when it has text or no calls) followed by one `tool_call` row per call; its
    /// [`ChatMessage::provider_data`] (thinking blocks, …) goes to the first row's
    /// `provider_data` column. A system message is not persisted (the system prompt is
    /// rebuilt, not resumed).
    pub fn from_chat(ws_id: &str, msg: &ChatMessage) -> Vec<Self> {
        match msg.role() {
            Role::System => Vec::new(),
            Role::User => vec![Self {
                provider_data: images_data(&msg.images),
                ..Self::base(ws_id, MessageRole::User, msg.content.clone())
            }],
            Role::Assistant => {
                let mut rows = Vec::with_capacity(1 + msg.tool_calls.len());
                if msg.content.is_some() || msg.tool_calls.is_empty() {
                    rows.push(Self::assistant(ws_id, msg.content.clone()));
                }
                rows.extend(msg.tool_calls.iter().map(|c| Self::tool_call(ws_id, c)));
                if let (Some(data), Some(first)) = (&msg.provider_data, rows.first_mut()) {
                    first.provider_data = serde_json::to_string(data).ok();
                }
                rows
            }
            Role::Tool => vec![Self {
                tool_call_id: msg.tool_call_id.clone(),
                provider_data: images_data(&msg.images),
                ..Self::base(ws_id, MessageRole::ToolResult, msg.content.clone())
            }],
        }
    }
}

/// The key of a row's `provider_data` JSON object that holds the message's images
/// ([`ChatMessage::images`]: media type and base64 bytes, inline). Inline, not a file
/// reference: a resumed conversation must send the image the model saw, even after the
/// file changed or on another node. The store stays bounded because `read_file` caps each
/// image (`tools.max_image_bytes`), the engine keeps images only for models that see them,
/// and a compaction's replacement rows carry none.
pub const IMAGES_KEY: &str = "images";

/// The `provider_data` text of a user or tool message: its images, when it has any.
fn images_data(images: &[turnstone_llm::ImagePart]) -> Option<String> {
    (!images.is_empty()).then(|| serde_json::json!({ IMAGES_KEY: images }).to_string())
}

/// The key of a row's `provider_data` JSON object that marks the start of a replaced
/// context (a compaction, a `/resume` into a live workstream): a resume rebuilds the
/// conversation from the last such row on. Earlier rows stay stored and searchable.
pub const CONTEXT_RESET_KEY: &str = "context_reset";

impl NewMessage {
    /// The rows that persist a conversation replacing the workstream's context: the rows of
    /// `messages`, the first one marked with [`CONTEXT_RESET_KEY`]. Empty for no messages.
    pub fn replacement(ws_id: &str, messages: &[ChatMessage]) -> Vec<Self> {
        let mut rows: Vec<Self> = messages
            .iter()
            .flat_map(|m| Self::from_chat(ws_id, m))
            .collect();
        if let Some(first) = rows.first_mut() {
            let mut data = first
                .provider_data
                .as_deref()
                .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::json!({}));
            data[CONTEXT_RESET_KEY] = serde_json::Value::Bool(true);
            first.provider_data = Some(data.to_string());
        }
        rows
    }
}

/// One conversation row as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredMessage {
    pub id: i64,
    pub ws_id: String,
    pub timestamp: String,
    /// Raw role text; see [`MessageRole::parse`].
    pub role: String,
    pub content: Option<String>,
    pub tool_name: Option<String>,
    pub tool_args: Option<String>,
    pub tool_call_id: Option<String>,
    pub provider_data: Option<String>,
}

/// A write the batching [`crate::Writer`] can queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    /// Append a conversation row (creates the workstream row if missing, bumps `updated`).
    Message(NewMessage),
    /// Set (`Some`) or delete (`None`) one session config key.
    Config {
        ws_id: String,
        key: String,
        value: Option<String>,
    },
    /// Insert a queued send (ignored when its `correlation_id` is stored already).
    QueueSend(crate::queued::QueuedSend),
    /// Move a `queued` send to another state (no-op when it is not `queued`, or unknown).
    QueueState {
        correlation_id: String,
        state: crate::queued::QueuedState,
    },
    /// Mark a `started` send `completed` with the `turn_complete` (JSON) its turn ended
    /// with (no-op when it is not `started`, or unknown).
    QueueOutcome {
        correlation_id: String,
        outcome: String,
    },
    /// Record one model call's usage (`usage_events`).
    Usage(crate::usage::NewUsageEvent),
}

/// A workstream (= persistent session since the original's migration 006).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workstream {
    pub ws_id: String,
    pub node_id: Option<String>,
    pub user_id: Option<String>,
    /// User-given unique name; named sessions never age out.
    pub alias: Option<String>,
    pub title: Option<String>,
    pub name: String,
    pub state: String,
    pub created: String,
    /// Last activity (bumped by every message written).
    pub updated: String,
}

/// What [`crate::Store::create_workstream`] needs; everything is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewWorkstream {
    /// `None` generates a 32-hex id.
    pub ws_id: Option<String>,
    pub node_id: Option<String>,
    pub user_id: Option<String>,
    pub name: String,
    pub alias: Option<String>,
    pub title: Option<String>,
}

/// One row of [`crate::Store::list_sessions`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    pub workstream: Workstream,
    pub message_count: i64,
}

/// The typed part of the per-session config, restored on resume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionConfig {
    pub temperature: Option<f32>,
    pub reasoning_effort: Option<String>,
    pub max_tokens: Option<u32>,
    pub instructions: Option<String>,
}

impl SessionConfig {
    pub const TEMPERATURE: &'static str = "temperature";
    pub const REASONING_EFFORT: &'static str = "reasoning_effort";
    pub const MAX_TOKENS: &'static str = "max_tokens";
    pub const INSTRUCTIONS: &'static str = "instructions";

    /// The writes that persist this config (`None` fields delete their key).
    pub fn to_ops(&self, ws_id: &str) -> Vec<WriteOp> {
        let pairs = [
            (Self::TEMPERATURE, self.temperature.map(|t| t.to_string())),
            (Self::REASONING_EFFORT, self.reasoning_effort.clone()),
            (Self::MAX_TOKENS, self.max_tokens.map(|t| t.to_string())),
            (Self::INSTRUCTIONS, self.instructions.clone()),
        ];
        pairs
            .into_iter()
            .map(|(key, value)| WriteOp::Config {
                ws_id: ws_id.to_string(),
                key: key.to_string(),
                value,
            })
            .collect()
    }

    /// Reads the typed keys from the raw map; an unparsable value is skipped with a warning.
    pub fn from_map(map: &BTreeMap<String, String>) -> Self {
        fn parsed<T: std::str::FromStr>(map: &BTreeMap<String, String>, key: &str) -> Option<T> {
            let raw = map.get(key)?;
            match raw.trim().parse() {
                Ok(v) => Some(v),
                Err(_) => {
                    tracing::warn!(key, value = %raw, "ignoring unparsable session config value");
                    None
                }
            }
        }
        Self {
            temperature: parsed(map, Self::TEMPERATURE),
            reasoning_effort: map.get(Self::REASONING_EFFORT).cloned(),
            max_tokens: parsed(map, Self::MAX_TOKENS),
            instructions: map.get(Self::INSTRUCTIONS).cloned(),
        }
    }
}

/// A session rebuilt for the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumedSession {
    pub workstream: Workstream,
    /// Provider messages; an interrupted tool batch closed with effect receipts (see
    /// [`crate::rebuild_messages`]).
    pub messages: Vec<ChatMessage>,
    pub config: SessionConfig,
    /// Every stored config key, including ones [`SessionConfig`] does not type.
    pub raw_config: BTreeMap<String, String>,
}

/// One full-text search or recent-messages result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    pub message_id: i64,
    pub ws_id: String,
    pub role: String,
    pub tool_name: Option<String>,
    /// The matching excerpt with hits in `[` `]` (the whole content for recent messages).
    pub snippet: String,
    pub content: Option<String>,
    pub timestamp: String,
}

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = StoreError;
            fn from_str(s: &str) -> Result<Self> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(StoreError::InvalidInput(format!(
                        "unknown {} {other:?} (expected one of: {})",
                        stringify!($name),
                        [$($text),+].join(", ")
                    ))),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum!(
    /// Memory type, as the `memory` tool and the HTTP API expose it. `project` is the
    /// general-purpose type (the original's seed era called it `general`; migration 0003
    /// renamed stored rows).
    MemoryType { User => "user", Project => "project", Feedback => "feedback", Reference => "reference" }
);

string_enum!(
    /// Where a memory lives; `scope_id` names the workstream/user/project (empty for global).
    MemoryScope {
        Global => "global",
        Workstream => "workstream",
        User => "user",
        Coordinator => "coordinator",
        Project => "project",
    }
);

string_enum!(
    /// Lifecycle of an approval request; only `pending` can change, and only once.
    ApprovalState { Pending => "pending", Approved => "approved", Denied => "denied", TimedOut => "timed_out" }
);

/// One (scope, scope_id) pair: the unit a memory name is unique in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScopeRef {
    pub scope: MemoryScope,
    pub scope_id: String,
}

impl ScopeRef {
    pub fn global() -> Self {
        Self {
            scope: MemoryScope::Global,
            scope_id: String::new(),
        }
    }
    pub fn new(scope: MemoryScope, scope_id: impl Into<String>) -> Self {
        Self {
            scope,
            scope_id: scope_id.into(),
        }
    }
}

/// A memory to save (insert, or update in place when `(name, scope, scope_id)` exists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryInput {
    pub name: String,
    pub content: String,
    pub description: String,
    pub mem_type: MemoryType,
    pub scope: ScopeRef,
}

/// A stored memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Memory {
    pub memory_id: String,
    pub name: String,
    pub description: String,
    pub mem_type: MemoryType,
    pub scope: MemoryScope,
    pub scope_id: String,
    pub content: String,
    pub created: String,
    pub updated: String,
    pub last_accessed: String,
    pub access_count: i64,
}

/// Filters of memory `list`/`search`: an empty `scopes` means every scope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryFilter {
    pub mem_type: Option<MemoryType>,
    pub scopes: Vec<ScopeRef>,
}

impl MemoryFilter {
    pub(crate) fn admits(&self, m: &Memory) -> bool {
        self.mem_type.is_none_or(|t| t == m.mem_type)
            && (self.scopes.is_empty()
                || self
                    .scopes
                    .iter()
                    .any(|s| s.scope == m.scope && s.scope_id == m.scope_id))
    }
}

/// One record of the durable per-workstream event log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventRecord {
    pub ws_id: String,
    /// 1-based, gap-free per workstream.
    pub seq: i64,
    pub event_type: String,
    pub payload: serde_json::Value,
    pub created: String,
}

/// A durable approval request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRecord {
    pub request_id: String,
    pub ws_id: String,
    /// The `approve_request` payload, re-sent verbatim on reconnect.
    pub payload: serde_json::Value,
    pub state: ApprovalState,
    /// Free-form detail of the decision, e.g. `once` / `always`; empty while pending.
    pub verdict: String,
    pub feedback: String,
    pub decided_by: String,
    pub created: String,
    pub decided: Option<String>,
}

/// A decision on a pending approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDecision {
    /// Must not be [`ApprovalState::Pending`].
    pub state: ApprovalState,
    pub verdict: String,
    pub feedback: String,
    pub decided_by: String,
}

/// Result of [`crate::Store::decide_approval`].
#[derive(Debug, Clone, PartialEq)]
pub struct DecideOutcome {
    /// The record after the call: the new decision, or the one recorded earlier.
    pub record: ApprovalRecord,
    /// `true` when this call made the decision; `false` when one was already recorded.
    pub applied: bool,
}

/// Table name → column names, as the database reports them (for the schema parity check).
pub type SchemaDescription = BTreeMap<String, std::collections::BTreeSet<String>>;
