//! Neutral (OpenAI-shaped) history → Messages API content blocks, and the replay memory that
//! gives assistant turns back their `thinking` / server-tool blocks.
//!
//! Rules:
//! * every `system` message goes to the top-level `system` field (in order), never into
//!   `messages`;
//! * an assistant message becomes `[replayed blocks…]` or `[text] + [tool_use…]`; its
//!   `arguments` text is parsed into the `input` object (invalid JSON → `{}`);
//! * a `tool` message becomes a `tool_result` block in a **user** message; consecutive tool
//!   results share one user message, and user text right after them is appended to the same
//!   message (after the results, as the API requires); a result with images carries them as
//!   `image` blocks (`source.type = "base64"`) in its `content` array, after its text;
//! * a user message's images follow its text as `image` blocks;
//! * empty text is never sent (the API rejects empty text blocks), and a message left without
//!   blocks is dropped.

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Value, json};

use super::wire::WireMessage;
use crate::types::{ChatMessage, ImagePart, Role, ToolCall, ToolSpec};

/// How many assistant turns the replay memory keeps.
pub(crate) const REPLAY_CAPACITY: usize = 512;

/// Identifies an assistant turn by what the neutral history keeps of it: its text and calls.
pub(crate) fn fingerprint(text: &str, calls: &[ToolCall]) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    for call in calls {
        (&call.id, &call.name, &call.arguments).hash(&mut h);
    }
    h.finish()
}

/// The fingerprint of a neutral assistant message.
pub(crate) fn fingerprint_of(message: &ChatMessage) -> u64 {
    fingerprint(
        message.content.as_deref().unwrap_or(""),
        &message.tool_calls,
    )
}

/// The full content blocks of recent assistant turns, keyed by [`fingerprint`], bounded FIFO.
#[derive(Debug, Default)]
pub(crate) struct ReplayMemory {
    blocks: HashMap<u64, Vec<Value>>,
    order: VecDeque<u64>,
}

impl ReplayMemory {
    pub fn insert(&mut self, key: u64, blocks: Vec<Value>) {
        if self.blocks.insert(key, blocks).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > REPLAY_CAPACITY {
            if let Some(old) = self.order.pop_front() {
                self.blocks.remove(&old);
            }
        }
    }

    pub fn get(&self, key: u64) -> Option<&Vec<Value>> {
        self.blocks.get(&key)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.blocks.len()
    }
}

/// The converted conversation.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Converted {
    pub system: Vec<String>,
    pub messages: Vec<WireMessage>,
    /// The conversation continues a tool loop whose assistant turn has no thinking block
    /// (e.g. after a restart): extended thinking must be off for this request, or the API
    /// rejects it.
    pub open_tool_loop_without_thinking: bool,
}

/// Converts `messages`; `replay` returns the stored blocks of an assistant turn, if any.
pub(crate) fn convert<'a>(
    messages: impl IntoIterator<Item = &'a ChatMessage>,
    replay: &dyn Fn(&ChatMessage) -> Option<Vec<Value>>,
) -> Converted {
    let mut out = Converted::default();
    for message in messages {
        match message.role() {
            Role::System => {
                if let Some(text) = message.content.as_deref().filter(|t| !t.is_empty()) {
                    out.system.push(text.to_string());
                }
            }
            Role::User => {
                push_blocks(&mut out.messages, "user", text_and_images(message));
            }
            Role::Tool => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id.as_deref().unwrap_or(""),
                });
                let text = message.content.as_deref().filter(|t| !t.is_empty());
                if !message.images.is_empty() {
                    block["content"] = Value::Array(text_and_images(message));
                } else if let Some(text) = text {
                    block["content"] = Value::String(text.to_string());
                }
                push_blocks(&mut out.messages, "user", vec![block]);
            }
            Role::Assistant => {
                let blocks = replay(message).unwrap_or_else(|| assistant_blocks(message));
                push_blocks(&mut out.messages, "assistant", blocks);
            }
        }
    }
    out.open_tool_loop_without_thinking = open_loop_without_thinking(&out.messages);
    out
}

/// Appends blocks to the last message when it has the same role, else starts a new message.
/// Tool results always stay in front of text within a user message.
fn push_blocks(messages: &mut Vec<WireMessage>, role: &'static str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    match messages.last_mut() {
        Some(last) if last.role == role => {
            let is_result = |b: &Value| b["type"] == "tool_result";
            if role == "user" && blocks.iter().any(is_result) {
                let at = last
                    .content
                    .iter()
                    .rposition(is_result)
                    .map_or(0, |i| i + 1);
                last.content.splice(at..at, blocks);
            } else {
                last.content.extend(blocks);
            }
        }
        _ => messages.push(WireMessage {
            role,
            content: blocks,
        }),
    }
}

/// A message's text block (when not empty) followed by one `image` block per image.
fn text_and_images(message: &ChatMessage) -> Vec<Value> {
    let text = message.content.as_deref().filter(|t| !t.is_empty());
    text.map(|text| json!({"type": "text", "text": text}))
        .into_iter()
        .chain(message.images.iter().map(image_block))
        .collect()
}

/// `{"type": "image", "source": {"type": "base64", "media_type": …, "data": …}}`.
fn image_block(image: &ImagePart) -> Value {
    json!({
        "type": "image",
        "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
    })
}

/// The plain blocks of an assistant turn without replay data.
fn assistant_blocks(message: &ChatMessage) -> Vec<Value> {
    let mut blocks = Vec::with_capacity(1 + message.tool_calls.len());
    if let Some(text) = message.content.as_deref().filter(|t| !t.is_empty()) {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in &message.tool_calls {
        blocks.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": input_object(&call.arguments),
        }));
    }
    blocks
}

/// Tool arguments as the `input` object the API requires.
pub(crate) fn input_object(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => {
            tracing::warn!(
                arguments = %crate::http::clip(arguments),
                "tool arguments are not a JSON object; sending {{}}"
            );
            json!({})
        }
    }
}

fn open_loop_without_thinking(messages: &[WireMessage]) -> bool {
    let Some(last) = messages.last() else {
        return false;
    };
    if last.role != "user" || !last.content.iter().any(|b| b["type"] == "tool_result") {
        return false;
    }
    let Some(assistant) = messages.iter().rev().find(|m| m.role == "assistant") else {
        return false;
    };
    !assistant
        .content
        .first()
        .is_some_and(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking")
}

/// A client tool in the Messages API shape.
pub(crate) fn tool_json(spec: &ToolSpec) -> Value {
    let schema = match &spec.parameters {
        Value::Object(_) => spec.parameters.clone(),
        _ => json!({"type": "object", "properties": {}}),
    };
    json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": schema,
    })
}
