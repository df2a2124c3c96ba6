//! OpenAI chat-completions wire types: the request body we send and the lenient shapes we
//! accept back (every field optional, because compatible servers differ).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::types::{
    ChatMessage, ChatRequest, ImagePart, Messages, Role, ToolCall, ToolSpec, Usage,
};

/// `POST /chat/completions` body.
#[derive(Debug, Serialize)]
pub(crate) struct WireRequest<'a> {
    pub model: &'a str,
    pub messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<ChatTemplateKwargs<'a>>,
    /// Sampling seed (`OpenAiConfig::seed`): servers that honour it (OpenAI, vLLM,
    /// llama.cpp) sample reproducibly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

#[derive(Debug, Serialize)]
pub(crate) struct StreamOptions {
    pub include_usage: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct ChatTemplateKwargs<'a> {
    pub reasoning_effort: &'a str,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireMessage<'a> {
    pub role: &'static str,
    /// Serialised as `null` for an assistant message that only calls tools.
    pub content: Option<WireContent<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<&'a str>,
}

/// A message's content: plain text, or content parts when it carries images.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum WireContent<'a> {
    Text(&'a str),
    Parts(Vec<WirePart>),
}

/// One content part: `{"type": "text", "text": …}` or
/// `{"type": "image_url", "image_url": {"url": "data:image/png;base64,…"}}`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum WirePart {
    Text { text: String },
    ImageUrl { image_url: WireImageUrl },
}

#[derive(Debug, Serialize)]
pub(crate) struct WireImageUrl {
    pub url: String,
}

impl WirePart {
    fn image(image: &ImagePart) -> Self {
        Self::ImageUrl {
            image_url: WireImageUrl {
                url: image.data_url(),
            },
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct WireToolCall<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: WireFunctionCall<'a>,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireFunctionCall<'a> {
    pub name: &'a str,
    pub arguments: &'a str,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireTool<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: WireFunction<'a>,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireFunction<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: &'a Value,
}

impl<'a> WireRequest<'a> {
    /// Builds the body for `request`; `stream` selects SSE (with usage) or a single JSON reply.
    pub fn new(request: &'a ChatRequest, stream: bool) -> Self {
        Self {
            model: &request.model,
            messages: wire_messages(&request.messages),
            max_completion_tokens: request.max_tokens,
            temperature: request.temperature,
            stream,
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
            tools: request.tools.iter().map(WireTool::from_spec).collect(),
            chat_template_kwargs: request.reasoning_effort.as_deref().map(|effort| {
                ChatTemplateKwargs {
                    reasoning_effort: effort,
                }
            }),
            seed: None,
        }
    }

    /// The same body with a sampling seed (`None`: the field is left out).
    pub fn with_seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }
}

/// The request's messages. Images of `tool` messages cannot go into them (the API accepts
/// only text there): a run of tool results is followed by one `user` message holding the
/// run's images, each after a text part naming the call it came from.
fn wire_messages(messages: &Messages) -> Vec<WireMessage<'_>> {
    let mut out = Vec::with_capacity(messages.len());
    let mut pending: Vec<WirePart> = Vec::new();
    for message in messages {
        if message.role() != Role::Tool && !pending.is_empty() {
            out.push(WireMessage::user_parts(std::mem::take(&mut pending)));
        }
        out.push(WireMessage::from_message(message));
        if message.role() == Role::Tool && !message.images.is_empty() {
            let call = message.tool_call_id.as_deref().unwrap_or("");
            pending.push(WirePart::Text {
                text: format!("Image output of tool call {call}:"),
            });
            pending.extend(message.images.iter().map(WirePart::image));
        }
    }
    if !pending.is_empty() {
        out.push(WireMessage::user_parts(pending));
    }
    out
}

impl<'a> WireMessage<'a> {
    fn user_parts(parts: Vec<WirePart>) -> Self {
        Self {
            role: "user",
            content: Some(WireContent::Parts(parts)),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    fn from_message(message: &'a ChatMessage) -> Self {
        let role = match message.role() {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        // `null` content is only valid next to tool calls; elsewhere send an empty string.
        let text = match (&message.content, message.tool_calls.is_empty()) {
            (Some(text), _) => Some(text.as_str()),
            (None, true) => Some(""),
            (None, false) => None,
        };
        // A tool message's images follow it in a user message (`wire_messages`).
        let content = if message.images.is_empty() || role == "tool" {
            text.map(WireContent::Text)
        } else {
            let mut parts: Vec<WirePart> = text
                .filter(|t| !t.is_empty())
                .map(|t| WirePart::Text { text: t.to_owned() })
                .into_iter()
                .collect();
            parts.extend(message.images.iter().map(WirePart::image));
            Some(WireContent::Parts(parts))
        };
        Self {
            role,
            content,
            tool_calls: message
                .tool_calls
                .iter()
                .map(WireToolCall::from_call)
                .collect(),
            tool_call_id: message.tool_call_id.as_deref(),
        }
    }
}

impl<'a> WireToolCall<'a> {
    fn from_call(call: &'a ToolCall) -> Self {
        Self {
            id: &call.id,
            kind: "function",
            function: WireFunctionCall {
                name: &call.name,
                arguments: &call.arguments,
            },
        }
    }
}

impl<'a> WireTool<'a> {
    fn from_spec(spec: &'a ToolSpec) -> Self {
        Self {
            kind: "function",
            function: WireFunction {
                name: &spec.name,
                description: &spec.description,
                parameters: &spec.parameters,
            },
        }
    }
}

/// One streamed `chat.completion.chunk` (or, with `stream: false`, the whole completion).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireChunk {
    #[serde(default)]
    pub choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Some servers report failures inside a 200 stream as `{"error": …}`.
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireChoice {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(default)]
    pub delta: Option<WireDelta>,
    /// Non-streamed replies (and a few non-conforming streams) use `message`.
    #[serde(default)]
    pub message: Option<WireDelta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireDelta {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<WireToolCallDelta>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireToolCallDelta {
    #[serde(default)]
    pub index: Option<usize>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<WireFunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireFunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    /// Normally a string fragment; tolerated as a JSON value from odd servers.
    #[serde(default)]
    pub arguments: Option<Value>,
}

impl WireFunctionDelta {
    /// The arguments fragment as text.
    pub fn arguments_text(&self) -> String {
        match &self.arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WirePromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

impl From<&WireUsage> for Usage {
    fn from(u: &WireUsage) -> Self {
        let prompt = u.prompt_tokens.unwrap_or(0);
        let completion = u.completion_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: u.total_tokens.unwrap_or(prompt + completion),
            cache_creation_tokens: 0,
            cache_read_tokens: u
                .prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            estimated: false,
        }
    }
}

/// A short human-readable text for an `{"error": …}` object or string.
pub(crate) fn error_text(error: &Value) -> String {
    match error {
        Value::String(s) => s.clone(),
        Value::Object(map) => match map.get("message") {
            Some(Value::String(m)) => m.clone(),
            _ => error.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_seed_is_sent_only_when_configured() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::user("hi")].into(),
            tools: Default::default(),
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
        };
        let body = serde_json::to_value(WireRequest::new(&request, false)).unwrap();
        assert!(body.get("seed").is_none(), "{body}");
        let body =
            serde_json::to_value(WireRequest::new(&request, false).with_seed(Some(7))).unwrap();
        assert_eq!(body["seed"], 7);
    }

    #[test]
    fn request_body_has_the_openai_shape() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::system("sys"),
                ChatMessage::user("hi"),
                ChatMessage::assistant(
                    None,
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        arguments: "{}".into(),
                    }],
                ),
                ChatMessage::tool("c1", "out"),
            ]
            .into(),
            tools: vec![ToolSpec {
                name: "bash".into(),
                description: "run".into(),
                parameters: json!({"type": "object"}),
            }]
            .into(),
            temperature: Some(0.5),
            max_tokens: Some(100),
            reasoning_effort: Some("high".into()),
        };
        let body = serde_json::to_value(WireRequest::new(&request, true)).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                    ]},
                    {"role": "tool", "content": "out", "tool_call_id": "c1"}
                ],
                "max_completion_tokens": 100,
                "temperature": 0.5,
                "stream": true,
                "stream_options": {"include_usage": true},
                "tools": [{"type": "function", "function": {
                    "name": "bash", "description": "run", "parameters": {"type": "object"}
                }}],
                "chat_template_kwargs": {"reasoning_effort": "high"}
            })
        );
    }

    fn png(data: &str) -> ImagePart {
        ImagePart {
            media_type: "image/png".into(),
            data: data.into(),
        }
    }

    /// OpenAI accepts images only in `user` content parts (`image_url` with a `data:` URL),
    /// not in `tool` messages: the tool results of a batch stay text, and one user message
    /// after the batch carries every image, each after a text part naming its call.
    #[test]
    fn tool_images_follow_the_batch_in_one_user_message_of_image_url_parts() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        };
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::user("look"),
                ChatMessage::assistant(None, vec![call("c1"), call("c2"), call("c3")]),
                ChatMessage::tool("c1", "[image: a.png]").with_images(vec![png("QUFB")]),
                ChatMessage::tool("c2", "text result"),
                ChatMessage::tool("c3", "[image: b.png]").with_images(vec![png("QkJC")]),
                ChatMessage::assistant(Some("two images".into()), vec![]),
            ]
            .into(),
            ..ChatRequest::default()
        };
        let body = serde_json::to_value(WireRequest::new(&request, false)).unwrap();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": "look"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                    {"id": "c3", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
                ]},
                {"role": "tool", "content": "[image: a.png]", "tool_call_id": "c1"},
                {"role": "tool", "content": "text result", "tool_call_id": "c2"},
                {"role": "tool", "content": "[image: b.png]", "tool_call_id": "c3"},
                {"role": "user", "content": [
                    {"type": "text", "text": "Image output of tool call c1:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUFB"}},
                    {"type": "text", "text": "Image output of tool call c3:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,QkJC"}}
                ]},
                {"role": "assistant", "content": "two images"}
            ])
        );
    }

    #[test]
    fn a_user_message_with_images_is_sent_as_content_parts() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::user("what is this?").with_images(vec![png("QUFB")])]
                .into(),
            ..ChatRequest::default()
        };
        let body = serde_json::to_value(WireRequest::new(&request, false)).unwrap();
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUFB"}}
            ]}])
        );
        // A last tool result's images still get their user message.
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::tool("c9", "[image]").with_images(vec![png("QUFB")])]
                .into(),
            ..ChatRequest::default()
        };
        let body = serde_json::to_value(WireRequest::new(&request, false)).unwrap();
        assert_eq!(body["messages"].as_array().unwrap().len(), 2);
        assert_eq!(body["messages"][1]["role"], "user");
    }

    #[test]
    fn minimal_non_streaming_body_omits_optional_keys() {
        let request = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::assistant(None, vec![])].into(),
            ..ChatRequest::default()
        };
        let body = serde_json::to_value(WireRequest::new(&request, false)).unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "assistant", "content": ""}], "stream": false})
        );
    }

    #[test]
    fn usage_reads_cached_tokens_and_fills_total() {
        let u: WireUsage = serde_json::from_value(json!({
            "prompt_tokens": 10, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 7}
        }))
        .unwrap();
        let usage = Usage::from(&u);
        assert_eq!(usage.total_tokens, 15);
        assert_eq!(usage.cache_read_tokens, 7);
    }
}
