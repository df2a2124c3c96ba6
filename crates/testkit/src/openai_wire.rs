//! OpenAI chat-completions wire shapes the fake server reads and writes.
//!
//! Reading: the request's messages reduced to [`ScriptMessage`]s. Writing: a whole
//! `chat.completion` object and the `chat.completion.chunk` frames of a stream.

use serde_json::{Value, json};

use crate::script::{ScriptMessage, ScriptReply, split_chunks};

/// What the server needs from a chat-completions request body.
#[derive(Debug, Clone)]
pub(crate) struct ParsedRequest {
    pub model: Option<String>,
    pub messages: Vec<ScriptMessage>,
    pub stream: bool,
    pub include_usage: bool,
}

/// The fields of a request body the server reads. The rest (the tool schemas above all,
/// often most of the body) is skipped without being built.
#[derive(serde::Deserialize)]
struct Body {
    #[serde(default)]
    model: Option<Value>,
    #[serde(default)]
    messages: Option<Value>,
    #[serde(default)]
    stream: Option<Value>,
    #[serde(default)]
    stream_options: Option<Value>,
}

/// Reads the fields of a request body; `Err` names what is wrong. A field of another type
/// than expected reads as absent, except `messages` and each message's `role`.
pub(crate) fn parse_request(body: &[u8]) -> Result<ParsedRequest, String> {
    let body: Body = serde_json::from_slice(body).map_err(|e| {
        if e.is_data() {
            format!("request body must be a JSON object: {e}")
        } else {
            format!("invalid JSON body: {e}")
        }
    })?;
    let raw_messages = body
        .messages
        .as_ref()
        .and_then(Value::as_array)
        .ok_or("`messages` must be an array")?;
    let mut messages = Vec::with_capacity(raw_messages.len());
    for (i, m) in raw_messages.iter().enumerate() {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("messages[{i}].role must be a string"))?;
        messages.push(ScriptMessage::new(role, content_text(m.get("content"))));
    }
    Ok(ParsedRequest {
        model: body
            .model
            .as_ref()
            .and_then(Value::as_str)
            .map(str::to_string),
        messages,
        stream: body
            .stream
            .as_ref()
            .and_then(Value::as_bool)
            .unwrap_or(false),
        include_usage: body
            .stream_options
            .as_ref()
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// Text of a `content` field: a string, or the `text` of an array of content parts.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Token counts reported in `usage`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TokenCounts {
    pub prompt: u64,
    pub completion: u64,
}

impl TokenCounts {
    pub fn to_json(self) -> Value {
        json!({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
        })
    }
}

/// Identity of one response: shared by every chunk of a stream.
#[derive(Debug, Clone)]
pub(crate) struct ResponseMeta {
    pub id: String,
    pub model: String,
    pub created: u64,
}

fn call_id(index: usize) -> String {
    format!("call_{index}")
}

/// A non-streamed `chat.completion` object.
pub(crate) fn completion_json(
    meta: &ResponseMeta,
    reply: &ScriptReply,
    tokens: TokenCounts,
) -> Value {
    let mut message = json!({ "role": "assistant" });
    message["content"] = if reply.text.is_empty() && !reply.tool_calls.is_empty() {
        Value::Null
    } else {
        Value::String(reply.text.clone())
    };
    if let Some(reasoning) = &reply.reasoning {
        message["reasoning_content"] = Value::String(reasoning.clone());
    }
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, (name, arguments))| {
                json!({
                    "id": call_id(i),
                    "type": "function",
                    "function": { "name": name, "arguments": arguments },
                })
            })
            .collect();
    }
    json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{ "index": 0, "message": message, "finish_reason": reply.finish_reason }],
        "usage": tokens.to_json(),
    })
}

fn chunk(meta: &ResponseMeta, delta: Value, finish_reason: Option<&str>) -> String {
    json!({
        "id": meta.id,
        "object": "chat.completion.chunk",
        "created": meta.created,
        "model": meta.model,
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }],
    })
    .to_string()
}

/// The `data:` payloads of a whole stream, in order, ending with `[DONE]`.
pub(crate) fn stream_frames(
    meta: &ResponseMeta,
    reply: &ScriptReply,
    tokens: TokenCounts,
    include_usage: bool,
    chunk_chars: usize,
) -> Vec<String> {
    let mut frames = vec![chunk(meta, json!({ "role": "assistant" }), None)];
    if let Some(reasoning) = &reply.reasoning {
        for piece in split_chunks(reasoning, chunk_chars) {
            frames.push(chunk(meta, json!({ "reasoning_content": piece }), None));
        }
    }
    for piece in split_chunks(&reply.text, chunk_chars) {
        frames.push(chunk(meta, json!({ "content": piece }), None));
    }
    for (index, (name, arguments)) in reply.tool_calls.iter().enumerate() {
        let head = json!({ "tool_calls": [{
            "index": index,
            "id": call_id(index),
            "type": "function",
            "function": { "name": name, "arguments": "" },
        }]});
        frames.push(chunk(meta, head, None));
        for piece in split_chunks(arguments, chunk_chars) {
            let delta =
                json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece } }] });
            frames.push(chunk(meta, delta, None));
        }
    }
    frames.push(chunk(meta, json!({}), Some(&reply.finish_reason)));
    if include_usage {
        frames.push(
            json!({
                "id": meta.id,
                "object": "chat.completion.chunk",
                "created": meta.created,
                "model": meta.model,
                "choices": [],
                "usage": tokens.to_json(),
            })
            .to_string(),
        );
    }
    frames.push(DONE.to_string());
    frames
}

/// The stream terminator payload.
pub(crate) const DONE: &str = "[DONE]";

/// One SSE event carrying `payload` verbatim.
pub(crate) fn sse_event(payload: &str) -> bytes::Bytes {
    bytes::Bytes::from(format!("data: {payload}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> ResponseMeta {
        ResponseMeta {
            id: "x".into(),
            model: "m".into(),
            created: 1,
        }
    }

    #[test]
    fn parses_parts_and_flags() {
        let body = json!({
            "model": "m",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        let p = parse_request(body.to_string().as_bytes()).unwrap();
        assert_eq!(p.messages, vec![ScriptMessage::user("ab")]);
        assert!(p.stream && p.include_usage);
        let refused = |body: &str| parse_request(body.as_bytes()).unwrap_err();
        assert!(refused(r#"{"messages": [{"content": "x"}]}"#).contains("messages[0].role"));
        assert!(refused(r#"{"messages": "x"}"#).contains("`messages` must be an array"));
        assert!(refused(r#""text""#).contains("must be a JSON object"));
        assert!(parse_request(b"[]").is_err());
        assert!(refused("{oops").contains("invalid JSON"));
        // What the server does not read may be anything; a flag of another type is absent.
        let p = parse_request(
            br#"{"messages": [], "tools": [{"any": {"thing": [1]}}], "stream": "yes", "model": 3}"#,
        )
        .unwrap();
        assert!(!p.stream && p.model.is_none());
    }

    #[test]
    fn tool_call_frames_split_arguments() {
        let reply = ScriptReply::tool_calls([("bash", r#"{"command":"ls"}"#)]);
        let frames = stream_frames(
            &meta(),
            &reply,
            TokenCounts {
                prompt: 1,
                completion: 1,
            },
            false,
            4,
        );
        let parsed: Vec<Value> = frames[..frames.len() - 1]
            .iter()
            .map(|f| serde_json::from_str(f).unwrap())
            .collect();
        assert_eq!(
            parsed[1]["choices"][0]["delta"]["tool_calls"][0]["id"],
            "call_0"
        );
        let args: String = parsed[2..parsed.len() - 1]
            .iter()
            .map(|c| {
                c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(args, r#"{"command":"ls"}"#);
        assert_eq!(frames.last().unwrap(), DONE);
    }
}
