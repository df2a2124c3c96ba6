//! Integration tests of the OpenAI-compatible adapter and `Resilient` against the real
//! HTTP fake LLM from `turnstone-testkit` (127.0.0.1 only, real time, no sleeps).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use turnstone_llm::{
    ChatMessage, ChatRequest, CircuitBreaker, FinishReason, LlmError, ModelCapabilities,
    OpenAiConfig, OpenAiProvider, Provider, Resilient, RetryNotice, RetryPolicy, StreamEvent,
    ToolCall, ToolSpec,
};
use turnstone_testkit::{FakeLlm, FakeLlmConfig, Fault, ScriptReply};

mod suite;

fn provider(base_url: &str) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig {
        request_timeout: Duration::from_secs(30),
        ..OpenAiConfig::new(base_url)
    })
    .unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: "fake-model".into(),
        messages: vec![ChatMessage::system("be brief"), ChatMessage::user(text)].into(),
        ..ChatRequest::default()
    }
}

async fn drain(p: &dyn Provider, req: &ChatRequest) -> Vec<Result<StreamEvent, LlmError>> {
    p.stream(req).await.unwrap().collect().await
}

fn ok(items: Vec<Result<StreamEvent, LlmError>>) -> Vec<StreamEvent> {
    items.into_iter().map(|i| i.unwrap()).collect()
}

fn text_of(items: &[StreamEvent], reasoning: bool) -> String {
    items
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Content(t) if !reasoning => Some(t.as_str()),
            StreamEvent::Reasoning(t) if reasoning => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn calls_of(items: &[StreamEvent]) -> Vec<ToolCall> {
    items
        .iter()
        .find_map(|e| match e {
            StreamEvent::ToolCalls(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn fast_policy() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        delays: vec![Duration::from_millis(10)],
        max_retry_after: Duration::from_secs(1),
    }
}

fn resilient(llm: &FakeLlm) -> Resilient {
    Resilient::new(
        Arc::new(provider(&llm.base_url())),
        fast_policy(),
        Arc::new(CircuitBreaker::default()),
    )
}

#[tokio::test]
async fn streams_a_text_reply_with_usage_and_finish() {
    let llm = FakeLlm::start().await;
    let p = provider(&llm.base_url());
    let items = ok(drain(&p, &ask("hello over http, this is longer than twelve")).await);
    assert_eq!(
        text_of(&items, false),
        "hello over http, this is longer than twelve"
    );
    let n = items.len();
    assert!(
        matches!(items[n - 2], StreamEvent::Usage(u) if u.prompt_tokens > 0 && u.completion_tokens > 0)
    );
    assert_eq!(items[n - 1], StreamEvent::Finish(FinishReason::Stop));
}

#[tokio::test]
async fn streams_reasoning_and_parallel_tool_calls() {
    let llm = FakeLlm::start().await;
    let p = provider(&llm.base_url());
    let items = ok(drain(
        &p,
        &ask("THINK: weighing options\nCALL:read_file {\"path\": \"src/main.rs\"}\nTOOL: ls -la"),
    )
    .await);
    assert_eq!(text_of(&items, true), "weighing options");
    assert_eq!(
        calls_of(&items),
        vec![
            ToolCall {
                id: "call_0".into(),
                name: "read_file".into(),
                arguments: r#"{"path": "src/main.rs"}"#.into()
            },
            ToolCall {
                id: "call_1".into(),
                name: "bash".into(),
                arguments: json!({"command": "ls -la"}).to_string()
            },
        ]
    );
    assert_eq!(
        items.last(),
        Some(&StreamEvent::Finish(FinishReason::ToolCalls))
    );
}

#[tokio::test]
async fn request_body_carries_the_openai_fields() {
    let llm = FakeLlm::start().await;
    let p = provider(&llm.base_url());
    let mut req = ask("hi");
    req.max_tokens = Some(321);
    req.temperature = Some(0.25);
    req.reasoning_effort = Some("low".into());
    req.tools = vec![ToolSpec {
        name: "bash".into(),
        description: "Run a command".into(),
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    }]
    .into();
    req.messages.push(ChatMessage::assistant(
        None,
        vec![ToolCall {
            id: "c9".into(),
            name: "bash".into(),
            arguments: "{}".into(),
        }],
    ));
    req.messages.push(ChatMessage::tool("c9", "output"));
    ok(drain(&p, &req).await);
    let body = llm.last_request().unwrap();
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["max_completion_tokens"], 321);
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["chat_template_kwargs"],
        json!({"reasoning_effort": "low"})
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "bash");
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(body["messages"][2]["content"], json!(null));
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["name"],
        "bash"
    );
    assert_eq!(body["messages"][3]["tool_call_id"], "c9");

    // Without tools the key is omitted entirely.
    ok(drain(&p, &ask("again")).await);
    let body = llm.last_request().unwrap();
    assert!(body.get("tools").is_none(), "{body}");
    assert!(body.get("chat_template_kwargs").is_none(), "{body}");
}

#[tokio::test]
async fn complete_returns_the_whole_reply() {
    let llm = FakeLlm::start().await;
    let p = provider(&llm.base_url());
    llm.push_reply(ScriptReply::text("<think>hmm</think>Title").with_reasoning("field "));
    let c = p.complete(&ask("name this")).await.unwrap();
    assert_eq!(c.content, "Title");
    assert_eq!(c.reasoning, "field hmm");
    assert_eq!(c.finish_reason, Some(FinishReason::Stop));
    assert!(c.usage.is_some());
    assert_eq!(llm.last_request().unwrap()["stream"], false);
    assert!(llm.last_request().unwrap().get("stream_options").is_none());
}

#[tokio::test]
async fn resilient_retries_503_then_succeeds() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::Status {
        code: 503,
        retry_after: None,
        body: "busy".into(),
    });
    let r = resilient(&llm);
    let mut notices: Vec<RetryNotice> = Vec::new();
    let stream = r
        .stream(&ask("after retry"), &mut |n| notices.push(n.clone()))
        .await
        .unwrap();
    let items = ok(stream.collect().await);
    assert_eq!(text_of(&items, false), "after retry");
    assert_eq!(llm.request_count(), 2);
    assert_eq!(notices.len(), 1);
    assert_eq!(
        (notices[0].attempt, notices[0].delay, notices[0].error_class),
        (1, Duration::from_millis(10), "ServerError")
    );
    assert!(
        notices[0].message.contains("busy"),
        "{}",
        notices[0].message
    );
}

#[tokio::test]
async fn rate_limit_with_retry_after_zero_is_honoured() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::Status {
        code: 429,
        retry_after: Some(0),
        body: "{\"error\":{\"message\":\"slow down\"}}".into(),
    });
    let r = resilient(&llm);
    let mut notices: Vec<RetryNotice> = Vec::new();
    let c = r
        .complete_with_notices(&ask("ok now"), &mut |n| notices.push(n.clone()))
        .await
        .unwrap();
    assert_eq!(c.content, "ok now");
    assert_eq!(notices.len(), 1);
    assert_eq!(
        (notices[0].delay, notices[0].error_class),
        (Duration::ZERO, "RateLimitError")
    );
    assert!(
        notices[0].message.contains("slow down"),
        "{}",
        notices[0].message
    );
}

#[tokio::test]
async fn rate_limit_classification_reads_retry_after() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::Status {
        code: 429,
        retry_after: Some(7),
        body: "later".into(),
    });
    let err = provider(&llm.base_url())
        .stream(&ask("x"))
        .await
        .err()
        .unwrap();
    match err {
        LlmError::RateLimited { retry_after, body } => {
            assert_eq!(retry_after, Some(Duration::from_secs(7)));
            assert_eq!(body, "later");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn client_error_is_not_retried() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::Status {
        code: 400,
        retry_after: None,
        body: "bad request".into(),
    });
    let r = resilient(&llm);
    let mut retries = 0;
    let err = r
        .stream(&ask("x"), &mut |_| retries += 1)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, LlmError::Client { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(retries, 0);
    assert_eq!(llm.request_count(), 1);
    assert_eq!(r.breaker().consecutive_failures(), 0);
}

#[tokio::test]
async fn exhausted_server_errors_count_one_breaker_failure() {
    let llm = FakeLlm::start().await;
    for _ in 0..4 {
        llm.push_fault(Fault::Status {
            code: 500,
            retry_after: None,
            body: "down".into(),
        });
    }
    let r = resilient(&llm);
    let err = r.complete(&ask("x")).await.unwrap_err();
    assert!(
        matches!(err, LlmError::Server { status: 500, .. }),
        "{err:?}"
    );
    assert_eq!(llm.request_count(), 4);
    assert_eq!(r.breaker().consecutive_failures(), 1);
}

#[tokio::test]
async fn empty_body_is_empty_response() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::EmptyBody);
    let items = drain(&provider(&llm.base_url()), &ask("x")).await;
    assert!(
        matches!(items.as_slice(), [Err(LlmError::EmptyResponse)]),
        "{items:?}"
    );
    llm.push_fault(Fault::EmptyBody);
    let err = provider(&llm.base_url())
        .complete(&ask("x"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::EmptyResponse), "{err:?}");
}

#[tokio::test]
async fn dropped_connection_is_stream_interrupted() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::DropMidStream { after_chunks: 3 });
    let items = drain(
        &provider(&llm.base_url()),
        &ask("a reply long enough to be cut in pieces"),
    )
    .await;
    let last = items.last().unwrap();
    assert!(
        matches!(last, Err(LlmError::StreamInterrupted(_))),
        "{items:?}"
    );
    assert!(
        !items
            .iter()
            .any(|i| matches!(i, Ok(StreamEvent::Finish(_))))
    );
}

#[tokio::test]
async fn malformed_chunk_ends_the_stream_with_malformed() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::MalformedChunk);
    let items = drain(&provider(&llm.base_url()), &ask("x")).await;
    assert!(
        matches!(items.last(), Some(Err(LlmError::Malformed(_)))),
        "{items:?}"
    );
    assert_eq!(items.iter().filter(|i| i.is_err()).count(), 1);
}

#[tokio::test]
async fn llama_cpp_raw_chunks_are_assembled() {
    let llm = FakeLlm::start().await;
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        json!({"choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
               "created": 1, "id": "chatcmpl-x", "model": "gguf", "object": "chat.completion.chunk"})
        .to_string()
    };
    let call = |args: &str| {
        json!({"tool_calls": [{"index": 0, "id": "Xy12", "type": "function",
                               "function": {"name": "bash", "arguments": args}}]})
    };
    llm.push_fault(Fault::RawSse(vec![
        chunk(json!({"role": "assistant", "content": null}), json!(null)),
        chunk(json!({"content": "<think>"}), json!(null)),
        chunk(json!({"content": "need ls"}), json!(null)),
        chunk(json!({"content": "</think>"}), json!(null)),
        chunk(call("{\"command\""), json!(null)),
        chunk(call(":\"ls\"}"), json!(null)),
        chunk(json!({}), json!("tool_calls")),
        json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20,
               "prompt_tokens_details": {"cached_tokens": 10}}}).to_string(),
        "[DONE]".into(),
    ]));
    let items = ok(drain(&provider(&llm.base_url()), &ask("x")).await);
    assert_eq!(text_of(&items, true), "need ls");
    assert_eq!(text_of(&items, false), "");
    assert_eq!(
        calls_of(&items),
        vec![ToolCall {
            id: "Xy12".into(),
            name: "bash".into(),
            arguments: r#"{"command":"ls"}"#.into()
        }]
    );
    let n = items.len();
    assert!(
        matches!(items[n - 2], StreamEvent::Usage(u) if u.cache_read_tokens == 10 && u.total_tokens == 20)
    );
    assert_eq!(items[n - 1], StreamEvent::Finish(FinishReason::ToolCalls));
}

#[tokio::test]
async fn capabilities_from_the_model_list_are_cached() {
    let llm = FakeLlm::start_with(FakeLlmConfig {
        context_window: 131_072,
        ..FakeLlmConfig::default()
    })
    .await;
    let p = provider(&llm.base_url());
    let caps = p.capabilities("fake-model").await.unwrap();
    assert_eq!(caps.context_window, 131_072);
    let addr = llm.addr();
    drop(llm);
    turnstone_testkit::assert_eventually!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "fake LLM still accepting after drop"
    );
    // Served from the cache: the backend is gone.
    assert_eq!(p.capabilities("fake-model").await.unwrap(), caps);
    // Another model on a dead backend is an error, not a guess.
    assert!(p.capabilities("other").await.is_err());
}

#[tokio::test]
async fn configured_capabilities_win() {
    let configured = ModelCapabilities {
        context_window: 1000,
        max_output_tokens: 100,
    };
    let p = OpenAiProvider::new(OpenAiConfig {
        capabilities: Some(configured),
        ..OpenAiConfig::new("http://127.0.0.1:9/v1")
    })
    .unwrap();
    assert_eq!(p.capabilities("anything").await.unwrap(), configured);
}

#[tokio::test]
async fn closed_port_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let p = provider(&format!("http://127.0.0.1:{port}/v1"));
    let err = p.stream(&ask("x")).await.err().unwrap();
    assert!(matches!(err, LlmError::Connect(_)), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn hanging_backend_times_out_before_the_head() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::Hang);
    let p = OpenAiProvider::new(OpenAiConfig {
        request_timeout: Duration::from_millis(200),
        ..OpenAiConfig::new(llm.base_url())
    })
    .unwrap();
    let err = p.stream(&ask("x")).await.err().unwrap();
    assert!(matches!(err, LlmError::Timeout(_)), "{err:?}");
}

#[tokio::test]
async fn auth_and_extra_headers_do_not_break_requests() {
    let llm = FakeLlm::start().await;
    let p = OpenAiProvider::new(OpenAiConfig {
        api_key: Some("sk-test".into()),
        extra_headers: [("X-Team".to_string(), "core".to_string())].into(),
        ..OpenAiConfig::new(format!("{}/", llm.base_url()))
    })
    .unwrap();
    let items = ok(drain(&p, &ask("with headers")).await);
    assert_eq!(text_of(&items, false), "with headers");
    let bad = OpenAiProvider::new(OpenAiConfig {
        extra_headers: [("bad header".to_string(), "v".to_string())].into(),
        ..OpenAiConfig::default()
    });
    assert!(bad.is_err());
}
