//! Anthropic Messages API wire types: the request body we send and the streamed events we
//! accept back (lenient: unknown event and block types are kept as raw JSON or ignored).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/messages` body.
#[derive(Debug, Serialize)]
pub(crate) struct WireRequest<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    /// System prompt as text blocks (omitted when there is none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<Value>,
    pub messages: Vec<WireMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<WireThinking>,
    pub stream: bool,
}

/// `{"type": "enabled", "budget_tokens": n}`.
#[derive(Debug, Serialize)]
pub(crate) struct WireThinking {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub budget_tokens: u32,
}

/// One request message: a role and content blocks (raw JSON, so replayed blocks such as
/// `thinking` or `web_search_tool_result` go back byte for byte).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WireMessage {
    pub role: &'static str,
    pub content: Vec<Value>,
}

/// One streamed event (`data:` payload); the `type` field selects the variant.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum WireEvent {
    MessageStart {
        message: WireMessageStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(default)]
        delta: WireMessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    /// Event types added after this adapter was written: ignored.
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireMessageStart {
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireMessageDelta {
    #[serde(default)]
    pub stop_reason: Option<String>,
}

/// A content-block delta.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum WireDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    CitationsDelta {
        citation: Value,
    },
    #[serde(other)]
    Unknown,
}

/// Token counts; `message_start` carries the input side, `message_delta` the running output.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
}

/// `{"type": "overloaded_error", "message": "Overloaded"}`.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct WireError {
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub message: String,
}

impl WireError {
    /// `kind: message`, or whichever of the two is present.
    pub fn text(&self) -> String {
        match (self.kind.is_empty(), self.message.is_empty()) {
            (false, false) => format!("{}: {}", self.kind, self.message),
            (false, true) => self.kind.clone(),
            (true, _) => self.message.clone(),
        }
    }
}

/// The error body of a non-2xx response: `{"type": "error", "error": {...}}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireErrorBody {
    #[serde(default)]
    pub error: Option<WireError>,
}
