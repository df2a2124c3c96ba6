//! Provider-neutral chat types: what the engine sends and what every adapter streams back.

use std::pin::Pin;

use futures::Stream;
use serde::{Deserialize, Serialize};

use crate::error::LlmError;

pub use turnstone_proto::image::ImagePart;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One assembled tool call: `arguments` is the raw JSON text exactly as the model sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One message of a conversation as a provider sees it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Option<Role>,
    /// Text content; `None` for an assistant message that only calls tools.
    pub content: Option<String>,
    /// Tool calls of an assistant message (empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: the id of the call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For `Role::Assistant`: what the provider produced beyond text and calls (thinking
    /// blocks with their signatures, …), kept so it survives persistence and resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_data: Option<ProviderData>,
    /// Images that belong to the message (a `read_file` of an image, on its `Role::Tool`
    /// result). Only a model that can see images receives them: the engine leaves them off
    /// for other models, and each adapter places them where its API accepts them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImagePart>,
}

/// Provider-specific blocks of one assistant turn that its text and tool calls do not
/// capture: for Anthropic, `thinking` blocks with their `signature`, `redacted_thinking`,
/// server-side tool blocks and text with citations, in response order. The provider that
/// produced them sends them back verbatim when the message is replayed (so signatures verify
/// and the prompt cache prefix stays stable); other providers ignore them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderData {
    /// The adapter that produced the blocks (`anthropic`).
    pub provider: String,
    /// The turn's full content blocks, in the provider's wire format.
    pub blocks: Vec<serde_json::Value>,
}

impl ProviderData {
    /// The `(thinking, signature)` pairs of the turn's `thinking` blocks, in order.
    pub fn thinking(&self) -> Vec<(&str, &str)> {
        self.blocks
            .iter()
            .filter(|b| b["type"] == "thinking")
            .map(|b| {
                (
                    b["thinking"].as_str().unwrap_or_default(),
                    b["signature"].as_str().unwrap_or_default(),
                )
            })
            .collect()
    }
}

impl ChatMessage {
    pub fn system(text: impl Into<String>) -> Self {
        Self {
            role: Some(Role::System),
            content: Some(text.into()),
            ..Self::default()
        }
    }
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Some(Role::User),
            content: Some(text.into()),
            ..Self::default()
        }
    }
    pub fn assistant(text: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Some(Role::Assistant),
            content: text,
            tool_calls,
            ..Self::default()
        }
    }
    pub fn tool(call_id: impl Into<String>, output: impl Into<String>) -> Self {
        Self {
            role: Some(Role::Tool),
            content: Some(output.into()),
            tool_call_id: Some(call_id.into()),
            ..Self::default()
        }
    }
    /// The same message carrying `images`.
    pub fn with_images(mut self, images: Vec<ImagePart>) -> Self {
        self.images = images;
        self
    }
    pub fn role(&self) -> Role {
        self.role.unwrap_or(Role::User)
    }
}

/// A function the model may call (OpenAI function format without Turnstone metadata).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// One chat request, provider-neutral.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Messages,
    /// Shared, not copied: a turn sends the same tool array with each of its requests.
    pub tools: std::sync::Arc<[ToolSpec]>,
    pub temperature: Option<f32>,
    /// Sent as `max_completion_tokens` by the OpenAI-compatible adapter.
    pub max_tokens: Option<u32>,
    /// Sent as `chat_template_kwargs.reasoning_effort` by the OpenAI-compatible adapter.
    pub reasoning_effort: Option<String>,
}

/// A request's messages: those made for this request (a system prompt), then a conversation
/// shared with its owner instead of copied. A workstream's history is one `Arc`, and each
/// request of a turn used to deep-copy all of it.
#[derive(Debug, Clone, Default)]
pub struct Messages {
    head: Vec<ChatMessage>,
    shared: std::sync::Arc<Vec<ChatMessage>>,
}

impl Messages {
    /// `head`, then the messages of `shared`.
    pub fn new(head: Vec<ChatMessage>, shared: std::sync::Arc<Vec<ChatMessage>>) -> Self {
        Self { head, shared }
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &ChatMessage> + Clone {
        self.into_iter()
    }

    pub fn len(&self) -> usize {
        self.head.len() + self.shared.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn last(&self) -> Option<&ChatMessage> {
        self.shared.last().or_else(|| self.head.last())
    }

    /// Appends `message` (copying the shared conversation first if another holder has it).
    pub fn push(&mut self, message: ChatMessage) {
        std::sync::Arc::make_mut(&mut self.shared).push(message);
    }

    /// The messages as one owned list.
    pub fn to_vec(&self) -> Vec<ChatMessage> {
        self.iter().cloned().collect()
    }
}

impl From<Vec<ChatMessage>> for Messages {
    fn from(messages: Vec<ChatMessage>) -> Self {
        Self::new(Vec::new(), std::sync::Arc::new(messages))
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a ChatMessage;
    type IntoIter =
        std::iter::Chain<std::slice::Iter<'a, ChatMessage>, std::slice::Iter<'a, ChatMessage>>;

    fn into_iter(self) -> Self::IntoIter {
        self.head.iter().chain(self.shared.iter())
    }
}

impl std::ops::Index<usize> for Messages {
    type Output = ChatMessage;

    fn index(&self, i: usize) -> &ChatMessage {
        match i.checked_sub(self.head.len()) {
            None => &self.head[i],
            Some(i) => &self.shared[i],
        }
    }
}

/// Equal when they hold the same messages in the same order, however split.
impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Serialize for Messages {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<ChatMessage>::deserialize(deserializer).map(Self::from)
    }
}

/// Token accounting of one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cache_creation_tokens: u64,
    pub cache_read_tokens: u64,
    /// The server reported no usage: these counts are a tokenizer-free estimate
    /// ([`crate::estimate`]), not the server's count.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

/// Why a response ended, normalised across providers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    /// Maps a wire `finish_reason` (OpenAI names, plus Anthropic `stop_reason` names).
    pub fn from_wire(s: &str) -> Self {
        match s {
            "stop" | "end_turn" | "pause_turn" | "stop_sequence" => Self::Stop,
            "tool_calls" | "tool_use" | "function_call" => Self::ToolCalls,
            "length" | "max_tokens" => Self::Length,
            "content_filter" => Self::ContentFilter,
            other => Self::Other(other.to_string()),
        }
    }

    /// The reason a stream gave, or without one the reason its end implies: tool calls when
    /// it made any, else a normal stop.
    pub fn given_or_implied(wire: Option<&str>, made_tool_calls: bool) -> Self {
        match wire {
            Some(r) => Self::from_wire(r),
            None if made_tool_calls => Self::ToolCalls,
            None => Self::Stop,
        }
    }
}

/// One item of the neutral stream every provider produces.
///
/// Order guarantees: deltas first; `ProviderData` at most once, after the last delta;
/// `ToolCalls` (all calls of the response, assembled) at most once, after the last delta;
/// `Usage` at most once; `Finish` exactly once, last, when the response completed normally.
/// A stream that ends without `Finish` was interrupted.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// Visible assistant text.
    Content(String),
    /// Reasoning text (`reasoning`/`reasoning_content` fields or `<think>`/`<reasoning>` spans).
    Reasoning(String),
    /// All tool calls of the response, assembled by index, in index order.
    ToolCalls(Vec<ToolCall>),
    /// What the response carried beyond text and calls; the caller keeps it on the assistant
    /// message ([`ChatMessage::provider_data`]) so a later request can replay it.
    ProviderData(ProviderData),
    /// Something the provider did on its own that frontends should be told about (server-side
    /// web searches and their results); the engine emits it as an `info` event, never as
    /// conversation text.
    Notice(String),
    Usage(Usage),
    Finish(FinishReason),
}

/// The neutral event stream.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// A whole non-streamed reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<FinishReason>,
}

/// What a model can take and give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCapabilities {
    pub context_window: u32,
    pub max_output_tokens: u32,
}

impl Default for ModelCapabilities {
    fn default() -> Self {
        Self {
            context_window: 32_768,
            max_output_tokens: 4_096,
        }
    }
}

/// Announced before each retry sleep, so frontends can show `[Retrying in 2s: RateLimited]`.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    /// 1-based retry number.
    pub attempt: u32,
    pub delay: std::time::Duration,
    /// Short class name of the error, e.g. `RateLimited`, `ServerError`, `Connect`.
    pub error_class: &'static str,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn texts(messages: &Messages) -> Vec<&str> {
        messages
            .iter()
            .map(|m| m.content.as_deref().unwrap_or(""))
            .collect()
    }

    #[test]
    fn a_request_shares_the_history_it_was_given_and_reads_as_one_list() {
        let history = Arc::new(vec![ChatMessage::user("a"), ChatMessage::user("b")]);
        let messages = Messages::new(vec![ChatMessage::system("s")], Arc::clone(&history));
        assert_eq!(Arc::strong_count(&history), 2, "shared, not copied");
        assert_eq!(texts(&messages), ["s", "a", "b"]);
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0].content.as_deref(), Some("s"));
        assert_eq!(messages[2].content.as_deref(), Some("b"));
        assert_eq!(
            messages.last().and_then(|m| m.content.as_deref()),
            Some("b")
        );
        assert_eq!(
            messages,
            Messages::from(vec![
                ChatMessage::system("s"),
                ChatMessage::user("a"),
                ChatMessage::user("b"),
            ]),
            "equal however split"
        );
        assert_eq!(
            serde_json::to_value(&messages).unwrap(),
            serde_json::to_value(messages.to_vec()).unwrap()
        );
    }

    #[test]
    fn pushing_onto_a_shared_history_leaves_the_other_holder_its_own() {
        let history = Arc::new(vec![ChatMessage::user("a")]);
        let mut messages = Messages::new(Vec::new(), Arc::clone(&history));
        messages.push(ChatMessage::user("b"));
        assert_eq!(texts(&messages), ["a", "b"]);
        assert_eq!(history.len(), 1);
        let only_head = Messages::new(vec![ChatMessage::system("s")], Arc::default());
        assert_eq!(
            only_head.last().and_then(|m| m.content.as_deref()),
            Some("s")
        );
        assert!(Messages::default().is_empty());
    }
}
