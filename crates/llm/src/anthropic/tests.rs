//! Conversion and stream assembly over fixed byte chunks (no network).

use std::convert::Infallible;

use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;

use super::stream::replay_len;
use super::*;
use crate::types::{ChatMessage, FinishReason, ToolCall, ToolSpec, Usage};

fn sse(events: &[Value]) -> Vec<Result<Bytes, Infallible>> {
    events
        .iter()
        .map(|e| {
            Ok(Bytes::from(format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap()
            )))
        })
        .collect()
}

fn start(input_tokens: u64) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "content": [], "usage": {"input_tokens": input_tokens, "output_tokens": 1,
        "cache_creation_input_tokens": 5, "cache_read_input_tokens": 7}}})
}

fn stop(reason: &str, output: u64) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
               "usage": {"output_tokens": output}}),
        json!({"type": "message_stop"}),
    ]
}

async fn run(
    memory: &Arc<Mutex<ReplayMemory>>,
    events: &[Value],
) -> Result<Vec<Result<StreamEvent, LlmError>>, LlmError> {
    let mut driver = Driver::new(futures::stream::iter(sse(events)), Arc::clone(memory));
    driver.prime().await?;
    Ok(driver.into_stream().collect().await)
}

fn ok(items: Vec<Result<StreamEvent, LlmError>>) -> Vec<StreamEvent> {
    items.into_iter().map(Result::unwrap).collect()
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

#[tokio::test]
async fn thinking_text_and_partial_json_tool_use() {
    let memory = Arc::default();
    let mut events = vec![
        start(10),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ok"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"comm"}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "and\": \"ls\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
    ];
    events.extend(stop("tool_use", 30));
    let items = ok(run(&memory, &events).await.unwrap());
    assert_eq!(
        items,
        vec![
            StreamEvent::Reasoning("hm".into()),
            StreamEvent::Content("ok".into()),
            StreamEvent::ProviderData(crate::ProviderData {
                provider: "anthropic".into(),
                blocks: vec![
                    json!({"type": "thinking", "thinking": "hm", "signature": "SIG"}),
                    json!({"type": "text", "text": "ok"}),
                    json!({"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}),
                ],
            }),
            StreamEvent::ToolCalls(vec![call("toolu_1", "bash", "{\"command\": \"ls\"}")]),
            StreamEvent::Usage(Usage {
                prompt_tokens: 22,
                completion_tokens: 30,
                total_tokens: 52,
                cache_creation_tokens: 5,
                cache_read_tokens: 7,
                estimated: false,
            }),
            StreamEvent::Finish(FinishReason::ToolCalls),
        ]
    );
    // The turn is remembered and replayed for the same neutral message.
    assert_eq!(replay_len(&memory), 1);
    let assistant = ChatMessage::assistant(
        Some("ok".into()),
        vec![call("toolu_1", "bash", "{\"command\": \"ls\"}")],
    );
    let stored = memory
        .lock()
        .get(fingerprint_of(&assistant))
        .cloned()
        .unwrap();
    assert_eq!(
        stored[0],
        json!({"type": "thinking", "thinking": "hm", "signature": "SIG"})
    );
    assert_eq!(stored[2]["input"], json!({"command": "ls"}));
}

#[tokio::test]
async fn error_before_message_start_is_classified_and_returned_early() {
    let memory = Arc::default();
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let err = run(&memory, &[overloaded]).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Server { status: 529, body, .. } if body.contains("Overloaded")),
        "{err:?}"
    );
    assert!(err.is_retryable());
    let limited =
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}});
    assert!(matches!(
        run(&memory, &[limited]).await.unwrap_err(),
        LlmError::RateLimited { .. }
    ));
    let empty: Vec<Value> = Vec::new();
    assert!(matches!(
        run(&memory, &empty).await.unwrap_err(),
        LlmError::EmptyResponse
    ));
}

#[tokio::test]
async fn error_after_start_interrupts_the_stream() {
    let memory = Arc::default();
    let events = vec![
        start(3),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "par"}}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "never"}}),
    ];
    let items = run(&memory, &events).await.unwrap();
    assert!(matches!(&items[0], Ok(StreamEvent::Content(t)) if t == "par"));
    assert!(
        matches!(&items[1], Err(LlmError::StreamInterrupted(m)) if m.contains("overloaded_error")),
        "{items:?}"
    );
    assert_eq!(items.len(), 2);
}

#[tokio::test]
async fn truncated_body_and_mismatched_delta() {
    let memory = Arc::default();
    let items = run(&memory, &[start(3)]).await.unwrap();
    assert!(matches!(
        items.as_slice(),
        [Err(LlmError::StreamInterrupted(_))]
    ));
    let events = vec![
        start(3),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}}),
    ];
    let items = run(&memory, &events).await.unwrap();
    assert!(
        matches!(items.last(), Some(Err(LlmError::Malformed(_)))),
        "{items:?}"
    );
}

#[tokio::test]
async fn server_web_search_becomes_info_and_is_replayed() {
    let memory = Arc::default();
    let mut events = vec![
        start(3),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"rust\"}"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://rust-lang.org", "title": "Rust", "encrypted_content": "x"}]}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "citations_delta", "citation": {"type": "web_search_result_location", "url": "https://rust-lang.org"}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Rust is a language."}}),
        json!({"type": "content_block_stop", "index": 2}),
    ];
    events.extend(stop("end_turn", 9));
    let items = ok(run(&memory, &events).await.unwrap());
    assert_eq!(
        items[0],
        StreamEvent::Notice("[web search: \"rust\"]\n".into())
    );
    assert_eq!(
        items[1],
        StreamEvent::Notice("[web search: 1 result(s)\n  - Rust <https://rust-lang.org>]\n".into())
    );
    assert_eq!(items[2], StreamEvent::Content("Rust is a language.".into()));
    assert!(!items.iter().any(|e| matches!(e, StreamEvent::ToolCalls(_))));

    let p = AnthropicProvider::new(AnthropicConfig::default()).unwrap();
    *p.replay.lock() = std::mem::take(&mut *memory.lock());
    let body = p.request_body(&ChatRequest {
        model: "m".into(),
        messages: vec![
            ChatMessage::user("what is rust"),
            ChatMessage::assistant(Some("Rust is a language.".into()), Vec::new()),
            ChatMessage::user("thanks"),
        ]
        .into(),
        ..ChatRequest::default()
    });
    let replayed = &body["messages"][1]["content"];
    assert_eq!(replayed[0]["type"], "server_tool_use");
    assert_eq!(replayed[0]["input"], json!({"query": "rust"}));
    assert_eq!(replayed[1]["type"], "web_search_tool_result");
    assert_eq!(replayed[2]["citations"][0]["url"], "https://rust-lang.org");
}

#[test]
fn conversion_groups_tool_results_and_maps_the_system_prompt() {
    let p = AnthropicProvider::new(AnthropicConfig {
        prompt_caching: false,
        ..AnthropicConfig::default()
    })
    .unwrap();
    let req = ChatRequest {
        model: "claude-x".into(),
        messages: vec![
            ChatMessage::system("sys one"),
            ChatMessage::user("run two things"),
            ChatMessage::assistant(
                Some("sure".into()),
                vec![
                    call("t1", "bash", "{\"command\":\"ls\"}"),
                    call("t2", "read_file", "not json"),
                ],
            ),
            ChatMessage::tool("t1", "a.txt"),
            ChatMessage::tool("t2", ""),
            ChatMessage::user("and now?"),
            ChatMessage::assistant(None, Vec::new()),
            ChatMessage::user(""),
        ]
        .into(),
        tools: vec![ToolSpec {
            name: "bash".into(),
            description: "Run".into(),
            parameters: Value::Null,
        }]
        .into(),
        temperature: Some(0.5),
        ..ChatRequest::default()
    };
    let body = p.request_body(&req);
    assert_eq!(body["system"], json!([{"type": "text", "text": "sys one"}]));
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["stream"], true);
    assert!(body.get("thinking").is_none());
    assert_eq!(
        body["tools"],
        json!([{"name": "bash", "description": "Run", "input_schema": {"type": "object", "properties": {}}}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "run two things"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "sure"},
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "t2", "name": "read_file", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"},
                {"type": "tool_result", "tool_use_id": "t2"},
                {"type": "text", "text": "and now?"},
            ]},
        ])
    );
}

/// Anthropic takes images inside a `tool_result`'s `content` array, as `image` blocks with a
/// base64 `source`, after the result's text; a user message's images follow its text.
#[test]
fn images_go_into_tool_results_as_base64_image_blocks() {
    let p = AnthropicProvider::new(AnthropicConfig {
        prompt_caching: false,
        ..AnthropicConfig::default()
    })
    .unwrap();
    let png = crate::types::ImagePart {
        media_type: "image/png".into(),
        data: "QUFB".into(),
    };
    let req = ChatRequest {
        model: "claude-x".into(),
        messages: vec![
            ChatMessage::user("compare").with_images(vec![png.clone()]),
            ChatMessage::assistant(
                None,
                vec![call("t1", "read_file", "{}"), call("t2", "bash", "{}")],
            ),
            ChatMessage::tool("t1", "[image: a.png, PNG, 2x1 pixels, 70 bytes]")
                .with_images(vec![png.clone()]),
            ChatMessage::tool("t2", "ok"),
        ]
        .into(),
        ..ChatRequest::default()
    };
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUFB"}});
    assert_eq!(
        p.request_body(&req)["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "compare"}, image]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "bash", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "text", "text": "[image: a.png, PNG, 2x1 pixels, 70 bytes]"},
                    image,
                ]},
                {"type": "tool_result", "tool_use_id": "t2", "content": "ok"},
            ]},
        ])
    );
}

#[test]
fn thinking_config_caching_and_open_loop_fallback() {
    let p = AnthropicProvider::new(AnthropicConfig {
        thinking_budget: Some(2048),
        web_search_max_uses: Some(3),
        ..AnthropicConfig::default()
    })
    .unwrap();
    let mut req = ChatRequest {
        model: "m".into(),
        messages: vec![ChatMessage::system("s"), ChatMessage::user("hi")].into(),
        tools: vec![
            ToolSpec {
                name: "web_search".into(),
                description: "client search".into(),
                parameters: json!({"type": "object"}),
            },
            ToolSpec {
                name: "bash".into(),
                description: "Run".into(),
                parameters: json!({"type": "object"}),
            },
        ]
        .into(),
        temperature: Some(0.2),
        max_tokens: Some(4000),
        ..ChatRequest::default()
    };
    let body = p.request_body(&req);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert!(body.get("temperature").is_none(), "{body}");
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bash", "web_search"]);
    assert_eq!(body["tools"][1]["type"], "web_search_20250305");
    assert_eq!(body["tools"][1]["cache_control"]["type"], "ephemeral");
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"]["type"],
        "ephemeral"
    );

    // A tool loop whose thinking block is unknown: thinking is off for this request.
    req.messages
        .push(ChatMessage::assistant(None, vec![call("t1", "bash", "{}")]));
    req.messages.push(ChatMessage::tool("t1", "out"));
    let body = p.request_body(&req);
    assert!(body.get("thinking").is_none(), "{body}");

    // A budget that does not fit below max_tokens is clamped; below the minimum it is dropped.
    req.messages = req
        .messages
        .iter()
        .take(2)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    req.max_tokens = Some(1500);
    assert_eq!(p.request_body(&req)["thinking"]["budget_tokens"], 1499);
    req.max_tokens = Some(1000);
    assert!(p.request_body(&req).get("thinking").is_none());
}

#[test]
fn replay_memory_is_bounded() {
    let mut m = ReplayMemory::default();
    for i in 0..(convert::REPLAY_CAPACITY as u64 + 10) {
        m.insert(i, vec![json!(i)]);
    }
    assert_eq!(m.len(), convert::REPLAY_CAPACITY);
    assert!(m.get(0).is_none());
    assert!(m.get(convert::REPLAY_CAPACITY as u64 + 9).is_some());
}

#[test]
fn debug_hides_the_key() {
    let config = AnthropicConfig {
        api_key: Some("sk-ant-secret".into()),
        ..AnthropicConfig::default()
    };
    assert!(!format!("{config:?}").contains("secret"));
}
