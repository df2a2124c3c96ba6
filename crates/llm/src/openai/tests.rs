//! SSE assembly over fixed byte chunks (no network), completion and model-list parsing.

use std::convert::Infallible;

use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::types::{StreamEvent, Usage};

/// Runs the assembly over `chunks` (each one a network read) and collects every item.
async fn collect<E: std::fmt::Display + Send + 'static>(
    chunks: Vec<Result<Bytes, E>>,
) -> Vec<Result<StreamEvent, LlmError>> {
    event_stream(futures::stream::iter(chunks)).collect().await
}

fn sse(lines: &[&str]) -> Vec<Result<Bytes, Infallible>> {
    lines
        .iter()
        .map(|l| Ok(Bytes::from(format!("data: {l}\n\n"))))
        .collect()
}

fn ok(items: Vec<Result<StreamEvent, LlmError>>) -> Vec<StreamEvent> {
    items.into_iter().map(|i| i.unwrap()).collect()
}

fn content(items: &[StreamEvent]) -> String {
    items
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Content(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn reasoning(items: &[StreamEvent]) -> String {
    items
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Reasoning(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn tool_calls(items: &[StreamEvent]) -> Vec<ToolCall> {
    let all: Vec<&Vec<ToolCall>> = items
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCalls(c) => Some(c),
            _ => None,
        })
        .collect();
    assert!(
        all.len() <= 1,
        "ToolCalls emitted more than once: {items:?}"
    );
    all.first().map(|c| (*c).clone()).unwrap_or_default()
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn is_generated_id(id: &str) -> bool {
    id.len() == 37
        && id.starts_with("call_")
        && id[5..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

#[tokio::test]
async fn plain_text_with_role_chunk_empty_final_delta_and_usage() {
    let items = ok(collect(sse(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":", world"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":4}}}"#,
        "[DONE]",
    ]))
    .await);
    assert_eq!(content(&items), "Hello, world");
    let n = items.len();
    assert_eq!(
        items[n - 2..],
        [
            StreamEvent::Usage(Usage {
                prompt_tokens: 9,
                completion_tokens: 3,
                total_tokens: 12,
                cache_creation_tokens: 0,
                cache_read_tokens: 4,
                estimated: false,
            }),
            StreamEvent::Finish(FinishReason::Stop),
        ]
    );
    assert!(tool_calls(&items).is_empty());
}

#[tokio::test]
async fn no_usage_chunk_and_no_done_after_finish_reason() {
    let items = ok(collect(sse(&[
        r#"{"choices":[{"delta":{"content":"hi"}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
    ]))
    .await);
    assert_eq!(
        items,
        vec![
            StreamEvent::Content("hi".into()),
            StreamEvent::Finish(FinishReason::Length)
        ]
    );
}

#[tokio::test]
async fn llama_cpp_repeated_id_type_and_name_do_not_concatenate() {
    let items = ok(collect(sse(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"abc","type":"function","function":{"name":"bash","arguments":"{\"com"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"abc","type":"function","function":{"name":"bash","arguments":"mand\": \"ls"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"abc","type":"function","function":{"name":"bash","arguments":"\"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]))
    .await);
    assert_eq!(
        tool_calls(&items),
        vec![call("abc", "bash", r#"{"command": "ls"}"#)]
    );
    assert_eq!(
        items.last(),
        Some(&StreamEvent::Finish(FinishReason::ToolCalls))
    );
}

#[tokio::test]
async fn two_parallel_calls_interleaved_by_index_come_out_in_index_order() {
    let items = ok(collect(sse(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"bash","arguments":"{\"c"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"path\""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\":1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":":\"x\"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]))
    .await);
    assert_eq!(
        tool_calls(&items),
        vec![
            call("a", "bash", r#"{"c":1}"#),
            call("b", "read_file", r#"{"path":"x"}"#)
        ]
    );
}

#[tokio::test]
async fn missing_ids_are_filled_with_call_and_32_hex() {
    let items = ok(collect(sse(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"a","arguments":"{}"}},{"index":1,"id":"","function":{"name":"b","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]))
    .await);
    let calls = tool_calls(&items);
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| is_generated_id(&c.id)), "{calls:?}");
    assert_ne!(calls[0].id, calls[1].id);
    assert_eq!((calls[0].name.as_str(), calls[1].name.as_str()), ("a", "b"));
}

#[tokio::test]
async fn complete_calls_sent_at_index_zero_with_different_ids_stay_separate() {
    let items = ok(collect(sse(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"a","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"y","function":{"name":"b","arguments":"{\"k\":2}"}}]}}]}"#,
        "[DONE]",
    ]))
    .await);
    assert_eq!(
        tool_calls(&items),
        vec![call("x", "a", "{}"), call("y", "b", r#"{"k":2}"#)]
    );
    assert_eq!(
        items.last(),
        Some(&StreamEvent::Finish(FinishReason::ToolCalls))
    );
}

#[tokio::test]
async fn reasoning_fields_and_think_tags_split_across_chunks() {
    let items = ok(collect(sse(&[
        r#"{"choices":[{"delta":{"reasoning_content":"step 1. "}}]}"#,
        r#"{"choices":[{"delta":{"reasoning":"step 2. "}}]}"#,
        r#"{"choices":[{"delta":{"content":"<thi"}}]}"#,
        r#"{"choices":[{"delta":{"content":"nk>inline</th"}}]}"#,
        r#"{"choices":[{"delta":{"content":"ink>The answer"}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]))
    .await);
    assert_eq!(reasoning(&items), "step 1. step 2. inline");
    assert_eq!(content(&items), "The answer");
}

#[tokio::test]
async fn tool_call_delta_flushes_held_back_content_first() {
    let items = ok(collect(sse(&[
        r#"{"choices":[{"delta":{"content":"Let me run it."}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"bash","arguments":"{}"}}]}}]}"#,
        "[DONE]",
    ]))
    .await);
    assert_eq!(
        items[..2],
        [
            StreamEvent::Content("Le".into()),
            StreamEvent::Content("t me run it.".into())
        ]
    );
    assert!(matches!(items[2], StreamEvent::ToolCalls(_)));
}

#[tokio::test]
async fn keep_alive_comments_crlf_and_bytes_split_mid_line() {
    let body = ": keep-alive\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"ok é\"}}]}\r\n\r\n: ping\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let bytes = body.as_bytes();
    let chunks: Vec<Result<Bytes, Infallible>> = bytes
        .chunks(7)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let items = ok(collect(chunks).await);
    assert_eq!(
        items,
        vec![
            StreamEvent::Content("ok é".into()),
            StreamEvent::Finish(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn data_after_done_is_ignored() {
    let items = ok(collect(sse(&[
        r#"{"choices":[{"delta":{"content":"a"}}]}"#,
        "[DONE]",
        "garbage",
    ]))
    .await);
    assert_eq!(
        items,
        vec![
            StreamEvent::Content("a".into()),
            StreamEvent::Finish(FinishReason::Stop)
        ]
    );
}

#[tokio::test]
async fn empty_body_is_empty_response() {
    let items = collect::<Infallible>(vec![]).await;
    assert!(
        matches!(items.as_slice(), [Err(LlmError::EmptyResponse)]),
        "{items:?}"
    );
    let items = collect(sse(&["[DONE]"])).await;
    assert!(
        matches!(items.as_slice(), [Err(LlmError::EmptyResponse)]),
        "{items:?}"
    );
}

#[tokio::test]
async fn non_json_chunk_yields_malformed_and_ends() {
    let items = collect(sse(&[
        r#"{"choices":[{"delta":{"content":"partial"}}]}"#,
        "{not json",
        r#"{"choices":[{"delta":{"content":"never"}}]}"#,
    ]))
    .await;
    let n = items.len();
    assert!(
        matches!(items[n - 1], Err(LlmError::Malformed(_))),
        "{items:?}"
    );
    let before = ok(items.into_iter().take(n - 1).collect());
    assert_eq!(content(&before), "partial");
}

#[tokio::test]
async fn clean_end_without_finish_or_done_is_interrupted() {
    let items = collect(sse(&[r#"{"choices":[{"delta":{"content":"cut off"}}]}"#])).await;
    assert_eq!(
        items[0].as_ref().unwrap(),
        &StreamEvent::Content("cut off".into())
    );
    assert!(
        matches!(items[1], Err(LlmError::StreamInterrupted(_))),
        "{items:?}"
    );
    assert_eq!(items.len(), 2);
}

#[tokio::test]
async fn transport_error_mid_stream_is_interrupted_without_tool_calls() {
    let chunks: Vec<Result<Bytes, String>> = vec![
        Ok(Bytes::from_static(
            b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"bash\",\"arguments\":\"{\"}}]}}]}\n\n",
        )),
        Err("connection reset".to_string()),
    ];
    let items = collect(chunks).await;
    assert_eq!(items.len(), 1, "{items:?}");
    match &items[0] {
        Err(LlmError::StreamInterrupted(why)) => assert!(why.contains("connection reset")),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn error_object_in_stream_ends_it() {
    let items = collect(sse(&[r#"{"error":{"message":"model crashed"}}"#])).await;
    match items.as_slice() {
        [Err(LlmError::StreamInterrupted(why))] => assert!(why.contains("model crashed")),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn completion_is_think_split_and_ids_filled() {
    let body = json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant",
            "content": "<think>why</think>Because.",
            "tool_calls": [{"type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]
        }}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    });
    let c = parse_completion(body.to_string().as_bytes()).unwrap();
    assert_eq!(c.content, "Because.");
    assert_eq!(c.reasoning, "why");
    assert_eq!(c.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(c.usage.map(|u| u.total_tokens), Some(5));
    assert_eq!(c.tool_calls.len(), 1);
    assert!(is_generated_id(&c.tool_calls[0].id));
    assert_eq!(c.tool_calls[0].arguments, r#"{"command":"ls"}"#);
}

#[test]
fn completion_errors_are_classified() {
    assert!(matches!(
        parse_completion(b" \n"),
        Err(LlmError::EmptyResponse)
    ));
    assert!(matches!(
        parse_completion(b"<html>"),
        Err(LlmError::Malformed(_))
    ));
    assert!(matches!(
        parse_completion(br#"{"choices":[]}"#),
        Err(LlmError::EmptyResponse)
    ));
}

#[test]
fn model_list_variants() {
    let vllm = json!({"object": "list", "data": [
        {"id": "other", "object": "model", "max_model_len": 1000},
        {"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 131072}
    ]});
    assert_eq!(
        capabilities_from_model_list(&vllm, "m").context_window,
        131_072
    );
    let llama = json!({"data": [{"id": "gguf", "meta": {"n_ctx_train": 8192}}]});
    // The only model is used even if the name differs.
    assert_eq!(
        capabilities_from_model_list(&llama, "alias").context_window,
        8192
    );
    let two_unknown = json!({"data": [{"id": "a", "context_length": 5}, {"id": "b"}]});
    assert_eq!(
        capabilities_from_model_list(&two_unknown, "c"),
        ModelCapabilities::default()
    );
    let bare = json!([{"id": "m", "context_window": 4000, "max_output_tokens": 1000}]);
    assert_eq!(
        capabilities_from_model_list(&bare, "m"),
        ModelCapabilities {
            context_window: 4000,
            max_output_tokens: 1000
        }
    );
    assert_eq!(
        capabilities_from_model_list(&json!("nope"), "m"),
        ModelCapabilities::default()
    );
}

#[test]
fn json_reply_to_a_stream_request_is_replayed_as_events() {
    let body = json!({"choices": [{"message": {"content": "<think>r</think>hi"}}]});
    let events = completion_events(parse_completion(body.to_string().as_bytes()));
    let events: Vec<StreamEvent> = events.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        events,
        vec![
            StreamEvent::Reasoning("r".into()),
            StreamEvent::Content("hi".into()),
            StreamEvent::Finish(FinishReason::Stop),
        ]
    );
    let failed = completion_events(parse_completion(b""));
    assert!(matches!(failed.as_slice(), [Err(LlmError::EmptyResponse)]));
}

#[test]
fn config_debug_hides_secrets() {
    let mut config = OpenAiConfig::new("http://127.0.0.1:1/v1");
    config.api_key = Some("sk-secret".into());
    config
        .extra_headers
        .insert("X-Api-Token".into(), "tok-secret".into());
    let text = format!("{config:?}");
    assert!(
        !text.contains("sk-secret") && !text.contains("tok-secret"),
        "{text}"
    );
    assert!(text.contains("X-Api-Token"));
}

#[test]
fn model_ids_in_list_order_skipping_blank_ones() {
    let list = json!({"object": "list", "data": [
        {"id": "smollm2-135m", "object": "model"},
        {"id": "  "},
        {"model": "second"},
        {"object": "model"}
    ]});
    let ids: Vec<String> = model_entries(&list).iter().filter_map(model_id).collect();
    assert_eq!(ids, ["smollm2-135m", "second"]);
    assert!(model_entries(&json!({"data": []})).is_empty());
}

#[test]
fn llama_cpp_props_context_prefers_the_slot_window() {
    let props = json!({"default_generation_settings": {"n_ctx": 4096}, "n_ctx": 8192});
    assert_eq!(context_from_props(&props), Some(4096));
    assert_eq!(context_from_props(&json!({"n_ctx": 8192})), Some(8192));
    assert_eq!(
        context_from_props(&json!({"default_generation_settings": {"n_ctx": 0}, "n_ctx": 2048})),
        Some(2048)
    );
    assert_eq!(context_from_props(&json!({"model_path": "x"})), None);
}
