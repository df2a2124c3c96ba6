//! Token usage estimated without a tokenizer, for servers that stream no usage chunk
//! (llama-cpp-python's server ignores `stream_options.include_usage`).
//!
//! The estimate is one token per four bytes of text (rounded up), plus a few tokens of
//! framing per message: close enough for the context gauge (`status` `pct`) and the
//! auto-compaction threshold, and always marked [`Usage::estimated`] so nobody mistakes it
//! for a count. A stream that reports usage itself is passed through untouched.

use futures::StreamExt;

use crate::types::{ChatRequest, ChatStream, StreamEvent, Usage};

/// Bytes of text counted as one token.
const BYTES_PER_TOKEN: u64 = 4;
/// Tokens of role and separator framing a chat template adds around every message.
const TOKENS_PER_MESSAGE: u64 = 4;
/// Tokens counted for one image: what the largest image costs that providers accept
/// without downscaling (about 1.15 megapixels at 750 pixels per token), not its base64 text.
const TOKENS_PER_IMAGE: u64 = 1_600;

/// Estimated tokens of `text`: a quarter of its bytes, rounded up.
pub fn text_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Estimated prompt tokens of `request`: every message (content, tool calls with their
/// arguments, images at a flat `TOKENS_PER_IMAGE`) with its framing, and the tool schemas as the server renders them (JSON).
pub fn prompt_tokens(request: &ChatRequest) -> u64 {
    PromptEstimate::of(request).tokens()
}

/// A request's prompt estimate, taken when the request is sent and counted only if the
/// server reports no usage: the messages are counted at once (a pass over their lengths),
/// the tool schemas, which take rendering as JSON, only when asked.
#[derive(Debug, Clone)]
pub struct PromptEstimate {
    messages: u64,
    tools: std::sync::Arc<[crate::types::ToolSpec]>,
}

impl PromptEstimate {
    pub fn of(request: &ChatRequest) -> Self {
        let messages = request
            .messages
            .iter()
            .map(|m| {
                let calls: u64 = m
                    .tool_calls
                    .iter()
                    .map(|c| text_tokens(&c.name) + text_tokens(&c.arguments) + TOKENS_PER_MESSAGE)
                    .sum();
                TOKENS_PER_MESSAGE
                    + text_tokens(m.content.as_deref().unwrap_or(""))
                    + calls
                    + TOKENS_PER_IMAGE * m.images.len() as u64
            })
            .sum();
        Self {
            messages,
            tools: std::sync::Arc::clone(&request.tools),
        }
    }

    /// The estimate: [`prompt_tokens`] of the request.
    pub fn tokens(&self) -> u64 {
        let tools: u64 = self
            .tools
            .iter()
            .map(|t| {
                text_tokens(&t.name)
                    + text_tokens(&t.description)
                    + json_len(&t.parameters).div_ceil(BYTES_PER_TOKEN)
                    + TOKENS_PER_MESSAGE
            })
            .sum();
        self.messages + tools
    }
}

/// Bytes of `value` rendered as compact JSON, counted without rendering it into memory.
fn json_len(value: &serde_json::Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// `stream` with an estimated [`StreamEvent::Usage`] (marked `estimated`) put right before
/// its `Finish` when the server sent none: the prompt as `prompt` counts it,
/// the completion as [`text_tokens`] of everything streamed (text, reasoning, tool calls).
/// An interrupted stream (no `Finish`) gets no estimate.
pub fn with_usage_estimate(stream: ChatStream, prompt: PromptEstimate) -> ChatStream {
    struct State {
        inner: ChatStream,
        prompt: PromptEstimate,
        completion_bytes: u64,
        saw_usage: bool,
        held: Option<Result<StreamEvent, crate::LlmError>>,
    }
    let state = State {
        inner: stream,
        prompt,
        completion_bytes: 0,
        saw_usage: false,
        held: None,
    };
    Box::pin(futures::stream::unfold(state, |mut s| async move {
        if let Some(held) = s.held.take() {
            return Some((held, s));
        }
        let item = s.inner.next().await?;
        match &item {
            Ok(StreamEvent::Content(t) | StreamEvent::Reasoning(t)) => {
                s.completion_bytes += t.len() as u64;
            }
            Ok(StreamEvent::ToolCalls(calls)) => {
                s.completion_bytes += calls
                    .iter()
                    .map(|c| (c.name.len() + c.arguments.len()) as u64)
                    .sum::<u64>();
            }
            Ok(StreamEvent::Usage(_)) => s.saw_usage = true,
            Ok(StreamEvent::Finish(_)) if !s.saw_usage => {
                let completion = s.completion_bytes.div_ceil(BYTES_PER_TOKEN);
                let prompt = s.prompt.tokens();
                let usage = Usage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: prompt + completion,
                    estimated: true,
                    ..Usage::default()
                };
                s.saw_usage = true;
                s.held = Some(item);
                return Some((Ok(StreamEvent::Usage(usage)), s));
            }
            _ => {}
        }
        Some((item, s))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ChatMessage, FinishReason, ToolCall, ToolSpec};

    fn collect(events: Vec<StreamEvent>, prompt: u64) -> Vec<StreamEvent> {
        let stream: ChatStream = Box::pin(futures::stream::iter(events.into_iter().map(Ok)));
        futures::executor::block_on(
            with_usage_estimate(
                stream,
                PromptEstimate {
                    messages: prompt,
                    tools: std::sync::Arc::from([]),
                },
            )
            .map(|r| r.unwrap())
            .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn a_stream_without_usage_gets_an_estimate_before_its_finish() {
        let out = collect(
            vec![
                StreamEvent::Content("Hello, ".into()),
                StreamEvent::Content("world!".into()),
                StreamEvent::Finish(FinishReason::Stop),
            ],
            100,
        );
        assert_eq!(out.len(), 4);
        assert_eq!(
            out[2],
            StreamEvent::Usage(Usage {
                prompt_tokens: 100,
                completion_tokens: 4, // 13 bytes / 4, rounded up
                total_tokens: 104,
                estimated: true,
                ..Usage::default()
            })
        );
        assert_eq!(out[3], StreamEvent::Finish(FinishReason::Stop));
    }

    #[test]
    fn a_stream_with_usage_is_passed_through() {
        let real = Usage {
            prompt_tokens: 7,
            completion_tokens: 2,
            total_tokens: 9,
            ..Usage::default()
        };
        let events = vec![
            StreamEvent::Content("hi".into()),
            StreamEvent::Usage(real),
            StreamEvent::Finish(FinishReason::Stop),
        ];
        assert_eq!(collect(events.clone(), 100), events);
    }

    #[test]
    fn an_interrupted_stream_gets_no_estimate() {
        let events = vec![StreamEvent::Content("partial".into())];
        assert_eq!(collect(events.clone(), 100), events);
    }

    #[test]
    fn tool_calls_count_towards_the_completion() {
        let out = collect(
            vec![
                StreamEvent::ToolCalls(vec![ToolCall {
                    id: "c".into(),
                    name: "bash".into(),                     // 4 bytes
                    arguments: r#"{"command":"ls"}"#.into(), // 16 bytes
                }]),
                StreamEvent::Finish(FinishReason::ToolCalls),
            ],
            0,
        );
        let StreamEvent::Usage(u) = &out[1] else {
            panic!("no usage: {out:?}")
        };
        assert_eq!(u.completion_tokens, 5);
    }

    #[test]
    fn the_prompt_estimate_counts_messages_calls_and_tool_schemas() {
        let mut request = ChatRequest {
            messages: vec![
                ChatMessage::system("x".repeat(400)),
                ChatMessage::user("abcd"),
            ]
            .into(),
            ..ChatRequest::default()
        };
        // 2 × framing + 100 + 1
        assert_eq!(prompt_tokens(&request), 109);
        request.tools = vec![ToolSpec {
            name: "bash".into(),
            description: "d".repeat(40),
            parameters: serde_json::json!({"type": "object"}),
        }]
        .into();
        // + name 1 + description 10 + `{"type":"object"}` (17 bytes) 5 + framing 4
        assert_eq!(prompt_tokens(&request), 129);
        request.messages.push(ChatMessage::assistant(
            None,
            vec![ToolCall {
                id: "c".into(),
                name: "bash".into(),
                arguments: "12345678".into(),
            }],
        ));
        // + framing 4 + empty content 0 + call (1 + 2 + 4)
        assert_eq!(prompt_tokens(&request), 140);
        // An image counts flat, whatever the length of its base64 text.
        request
            .messages
            .push(
                ChatMessage::tool("c", "").with_images(vec![crate::types::ImagePart {
                    media_type: "image/png".into(),
                    data: "A".repeat(400_000),
                }]),
            );
        assert_eq!(prompt_tokens(&request), 140 + 4 + TOKENS_PER_IMAGE);
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("é"), 1);
    }
}
