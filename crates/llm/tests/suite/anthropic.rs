//! `AnthropicProvider` over real HTTP against `FakeAnthropic`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use turnstone_llm::{
    AnthropicConfig, AnthropicProvider, ChatMessage, ChatRequest, CircuitBreaker, FinishReason,
    LlmError, Provider, Resilient, RetryNotice, RetryPolicy, StreamEvent, ToolCall,
};
use turnstone_testkit::fake_anthropic::fake_signature;
use turnstone_testkit::{AnthropicFault, FakeAnthropic, FakeAnthropicConfig, ScriptReply};

fn config(fake: &FakeAnthropic) -> AnthropicConfig {
    AnthropicConfig {
        api_key: Some("sk-ant-test".into()),
        request_timeout: Duration::from_secs(30),
        ..AnthropicConfig::new(fake.base_url())
    }
}

fn provider(fake: &FakeAnthropic) -> AnthropicProvider {
    AnthropicProvider::new(config(fake)).unwrap()
}

fn thinking_provider(fake: &FakeAnthropic) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig {
        thinking_budget: Some(2048),
        ..config(fake)
    })
    .unwrap()
}

fn ask(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "claude-test".into(),
        messages: messages.into(),
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

fn fast_resilient(p: AnthropicProvider) -> Resilient {
    Resilient::new(
        Arc::new(p),
        RetryPolicy {
            max_retries: 3,
            delays: vec![Duration::from_millis(10)],
            max_retry_after: Duration::from_secs(1),
        },
        Arc::new(CircuitBreaker::default()),
    )
}

#[tokio::test]
async fn streams_text_with_headers_system_and_usage() {
    let fake = FakeAnthropic::start_with(FakeAnthropicConfig {
        api_key: Some("sk-ant-test".into()),
        cache_read_tokens: 40,
        ..FakeAnthropicConfig::default()
    })
    .await;
    let p = provider(&fake);
    let req = ask(vec![
        ChatMessage::system("be brief"),
        ChatMessage::user("hello over real http"),
    ]);
    let items = ok(drain(&p, &req).await);
    assert_eq!(text_of(&items, false), "hello over real http");
    assert!(
        items
            .iter()
            .filter(|e| matches!(e, StreamEvent::Content(_)))
            .count()
            > 1,
        "expected several text deltas: {items:?}"
    );
    let n = items.len();
    let StreamEvent::Usage(usage) = items[n - 2] else {
        panic!("no usage before finish: {items:?}");
    };
    assert_eq!(usage.cache_read_tokens, 40);
    assert!(usage.prompt_tokens > 40 && usage.completion_tokens > 0);
    assert_eq!(
        usage.total_tokens,
        usage.prompt_tokens + usage.completion_tokens
    );
    assert_eq!(items[n - 1], StreamEvent::Finish(FinishReason::Stop));

    let headers = fake.last_headers().unwrap();
    assert_eq!(headers.api_key.as_deref(), Some("sk-ant-test"));
    assert_eq!(headers.anthropic_version.as_deref(), Some("2023-06-01"));
    let body = fake.last_request().unwrap();
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["system"][0]["text"], "be brief");
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
    assert_eq!(body["messages"][0]["role"], "user");
}

#[tokio::test]
async fn wrong_key_is_a_client_error_and_not_retried() {
    let fake = FakeAnthropic::start_with(FakeAnthropicConfig {
        api_key: Some("right".into()),
        ..FakeAnthropicConfig::default()
    })
    .await;
    let r = fast_resilient(provider(&fake));
    let mut retries = 0;
    let err = r
        .stream(&ask(vec![ChatMessage::user("x")]), &mut |_| retries += 1)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&err, LlmError::Client { status: 401, body } if body.contains("authentication_error")),
        "{err:?}"
    );
    assert_eq!((retries, fake.request_count()), (0, 1));
}

#[tokio::test]
async fn thinking_and_signature_round_trip_in_a_tool_loop() {
    let fake = FakeAnthropic::start().await;
    let p = thinking_provider(&fake);
    let mut history = vec![
        ChatMessage::system("sys"),
        ChatMessage::user("THINK: I should list the files first\nTOOL: ls -la"),
    ];
    let items = ok(drain(&p, &ask(history.clone())).await);
    assert_eq!(text_of(&items, true), "I should list the files first");
    let calls = calls_of(&items);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "bash");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].arguments).unwrap(),
        json!({"command": "ls -la"})
    );
    assert_eq!(
        items.last(),
        Some(&StreamEvent::Finish(FinishReason::ToolCalls))
    );
    let first = fake.last_request().unwrap();
    assert_eq!(
        first["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );

    // The engine keeps only text + calls; the provider replays the signed thinking block.
    history.push(ChatMessage::assistant(None, calls.clone()));
    history.push(ChatMessage::tool(calls[0].id.clone(), "a.txt\nb.txt"));
    let items = ok(drain(&p, &ask(history)).await);
    assert_eq!(text_of(&items, false), "done: a.txt\nb.txt");
    let second = fake.last_request().unwrap();
    assert_eq!(second["thinking"]["type"], "enabled");
    assert_eq!(
        second["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should list the files first",
             "signature": fake_signature("I should list the files first")},
            {"type": "tool_use", "id": calls[0].id, "name": "bash", "input": {"command": "ls -la"}},
        ]})
    );
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn a_fresh_provider_continues_a_tool_loop_without_thinking() {
    let fake = FakeAnthropic::start().await;
    let first = thinking_provider(&fake);
    let mut history = vec![ChatMessage::user("THINK: plan\nTOOL: pwd")];
    let calls = calls_of(&ok(drain(&first, &ask(history.clone())).await));
    history.push(ChatMessage::assistant(None, calls.clone()));
    history.push(ChatMessage::tool(calls[0].id.clone(), "/tmp"));
    // A new instance (a restart) has no replay memory: thinking is switched off for this
    // request, which the API (and the fake) accept.
    let restarted = thinking_provider(&fake);
    let items = ok(drain(&restarted, &ask(history)).await);
    assert_eq!(text_of(&items, false), "done: /tmp");
    assert!(fake.last_request().unwrap().get("thinking").is_none());
}

#[tokio::test]
async fn tool_use_arguments_are_assembled_from_partial_json() {
    let fake = FakeAnthropic::start_with(FakeAnthropicConfig {
        chunk_chars: 3,
        ..FakeAnthropicConfig::default()
    })
    .await;
    let p = provider(&fake);
    let items = ok(drain(
        &p,
        &ask(vec![ChatMessage::user(
            "CALL:read_file {\"path\": \"src/main.rs\", \"limit\": 20}\nCALL:noargs",
        )]),
    )
    .await);
    let calls = calls_of(&items);
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].name.as_str(), calls[0].arguments.as_str()),
        ("read_file", r#"{"path": "src/main.rs", "limit": 20}"#)
    );
    assert_eq!(
        (calls[1].name.as_str(), calls[1].arguments.as_str()),
        ("noargs", "{}")
    );
    assert_ne!(calls[0].id, calls[1].id);
    assert!(calls[0].id.starts_with("toolu_"));
}

#[tokio::test]
async fn consecutive_tool_results_go_back_in_one_user_message() {
    let fake = FakeAnthropic::start().await;
    let p = provider(&fake);
    let mut history = vec![ChatMessage::user("TOOL: ls\nTOOL: pwd")];
    let calls = calls_of(&ok(drain(&p, &ask(history.clone())).await));
    assert_eq!(calls.len(), 2);
    history.push(ChatMessage::assistant(None, calls.clone()));
    history.push(ChatMessage::tool(calls[0].id.clone(), "files"));
    history.push(ChatMessage::tool(calls[1].id.clone(), "/home"));
    let items = ok(drain(&p, &ask(history)).await);
    assert_eq!(text_of(&items, false), "done: /home");
    let body = fake.last_request().unwrap();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{body}");
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": calls[0].id, "content": "files"},
            {"type": "tool_result", "tool_use_id": calls[1].id, "content": "/home",
             "cache_control": {"type": "ephemeral"}},
        ]})
    );
    assert_eq!(
        messages[1]["content"][1]["input"],
        json!({"command": "pwd"})
    );
}

#[tokio::test]
async fn error_event_mid_stream_ends_the_stream() {
    let fake = FakeAnthropic::start().await;
    fake.push_fault(AnthropicFault::ErrorEvent {
        after_events: 5,
        error_type: "overloaded_error".into(),
        message: "Overloaded".into(),
    });
    let items = drain(
        &provider(&fake),
        &ask(vec![ChatMessage::user("a long enough reply to be cut")]),
    )
    .await;
    let last = items.last().unwrap();
    assert!(
        matches!(last, Err(LlmError::StreamInterrupted(m)) if m.contains("overloaded_error: Overloaded")),
        "{items:?}"
    );
    assert!(
        matches!(&items[0], Ok(StreamEvent::Content(_))),
        "{items:?}"
    );
    assert!(
        !items
            .iter()
            .any(|i| matches!(i, Ok(StreamEvent::Finish(_))))
    );
}

#[tokio::test]
async fn overloaded_error_event_before_message_start_is_retried() {
    let fake = FakeAnthropic::start().await;
    fake.push_fault(AnthropicFault::ErrorEvent {
        after_events: 0,
        error_type: "overloaded_error".into(),
        message: "Overloaded".into(),
    });
    let r = fast_resilient(provider(&fake));
    let mut notices: Vec<RetryNotice> = Vec::new();
    let stream = r
        .stream(&ask(vec![ChatMessage::user("second try")]), &mut |n| {
            notices.push(n.clone());
        })
        .await
        .unwrap();
    let items = ok(stream.collect().await);
    assert_eq!(text_of(&items, false), "second try");
    assert_eq!(fake.request_count(), 2);
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].error_class, "ServerError");
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried() {
    let fake = FakeAnthropic::start().await;
    // The bare provider classifies a 429 and reads Retry-After.
    fake.push_fault(AnthropicFault::Status {
        code: 429,
        retry_after: Some(3),
        body: "x".into(),
    });
    match provider(&fake)
        .stream(&ask(vec![ChatMessage::user("x")]))
        .await
        .err()
    {
        Some(LlmError::RateLimited { retry_after, .. }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(3)));
        }
        other => panic!("unexpected {other:?}"),
    }

    // Resilient retries: Retry-After 0 s, then 7 s capped to the policy's 1 s, then success.
    fake.push_fault(AnthropicFault::Status {
        code: 429,
        retry_after: Some(0),
        body:
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
                .to_string(),
    });
    fake.push_fault(AnthropicFault::Status {
        code: 429,
        retry_after: Some(7),
        body: "later".into(),
    });
    let r = fast_resilient(provider(&fake));
    let mut notices: Vec<RetryNotice> = Vec::new();
    let c = r
        .complete_with_notices(&ask(vec![ChatMessage::user("ok now")]), &mut |n| {
            notices.push(n.clone());
        })
        .await;
    assert_eq!(c.unwrap().content, "ok now");
    assert_eq!(fake.request_count(), 4);
    assert_eq!(
        notices
            .iter()
            .map(|n| (n.delay, n.error_class))
            .collect::<Vec<_>>(),
        vec![
            (Duration::ZERO, "RateLimitError"),
            (Duration::from_secs(1), "RateLimitError")
        ]
    );
    assert!(
        notices[0].message.contains("rate_limit_error: slow down"),
        "{}",
        notices[0].message
    );
}

#[tokio::test]
async fn server_web_search_is_reported_as_info_and_replayed() {
    let fake = FakeAnthropic::start().await;
    let p = AnthropicProvider::new(AnthropicConfig {
        web_search_max_uses: Some(2),
        ..config(&fake)
    })
    .unwrap();
    let mut history = vec![ChatMessage::user("SEARCH: tokio runtime\nsummarise")];
    let items = ok(drain(&p, &ask(history.clone())).await);
    let info: String = items
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Notice(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(info.contains("[web search: \"tokio runtime\"]"), "{info}");
    assert!(
        text_of(&items, true).is_empty(),
        "server searches are notices, not reasoning"
    );
    assert!(
        info.contains("Result 1 for tokio runtime <https://example.invalid/1>"),
        "{info}"
    );
    assert_eq!(text_of(&items, false), "summarise");
    assert!(calls_of(&items).is_empty());
    let tools = &fake.last_request().unwrap()["tools"];
    assert_eq!(tools[0]["type"], "web_search_20250305");
    assert_eq!(tools[0]["max_uses"], 2);

    history.push(ChatMessage::assistant(Some("summarise".into()), Vec::new()));
    history.push(ChatMessage::user("thanks"));
    ok(drain(&p, &ask(history)).await);
    let replayed = &fake.last_request().unwrap()["messages"][1]["content"];
    let kinds: Vec<&str> = replayed
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["server_tool_use", "web_search_tool_result", "text"]);
}

#[tokio::test]
async fn dropped_connection_is_stream_interrupted() {
    let fake = FakeAnthropic::start().await;
    fake.push_fault(AnthropicFault::DropMidStream { after_events: 4 });
    let items = drain(
        &provider(&fake),
        &ask(vec![ChatMessage::user("a reply long enough to be cut")]),
    )
    .await;
    assert!(
        matches!(items.last(), Some(Err(LlmError::StreamInterrupted(_)))),
        "{items:?}"
    );
}

#[tokio::test]
async fn complete_collects_the_whole_reply() {
    let fake = FakeAnthropic::start().await;
    fake.push_reply(ScriptReply::text("A Title").with_reasoning("naming"));
    let c = provider(&fake)
        .complete(&ask(vec![ChatMessage::user("name this")]))
        .await
        .unwrap();
    assert_eq!(c.content, "A Title");
    assert_eq!(c.reasoning, "naming");
    assert_eq!(c.finish_reason, Some(FinishReason::Stop));
    assert!(c.usage.is_some());
}

#[tokio::test]
async fn bad_requests_surface_the_api_message() {
    let fake = FakeAnthropic::start().await;
    // An orphan tool result (no matching tool_use) is rejected like the real API does.
    let err = provider(&fake)
        .stream(&ask(vec![
            ChatMessage::user("hi"),
            ChatMessage::tool("nope", "out"),
        ]))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&err, LlmError::Client { status: 400, body } if body.contains("tool_use_id")),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}
