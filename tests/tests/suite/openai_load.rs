//! The OpenAI-compatible adapter against the fake server under concurrency: many streams
//! through one client must each assemble exactly their own reply. Correctness only, no timing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use turnstone_llm::{
    ChatMessage, ChatRequest, CircuitBreaker, FinishReason, OpenAiConfig, OpenAiProvider, Provider,
    Resilient, RetryPolicy, StreamEvent, ToolCall,
};
use turnstone_testkit::{FakeLlm, FakeLlmConfig, Fault};

const REQUESTS: usize = 50;

/// Request `i`: even ones are text (echoed back), odd ones call two tools.
fn prompt(i: usize) -> String {
    if i.is_multiple_of(2) {
        format!(
            "request {i}: ünïcödé \u{2699} {}",
            "abcdefghij".repeat(i % 7 + 1)
        )
    } else {
        format!("TOOL: echo {i}\nCALL:read_file {{\"path\": \"f{i}.txt\"}}")
    }
}

fn request(i: usize) -> ChatRequest {
    ChatRequest {
        model: "fake-model".into(),
        messages: vec![
            ChatMessage::system("you are a test"),
            ChatMessage::user(prompt(i)),
        ]
        .into(),
        ..ChatRequest::default()
    }
}

/// What one stream assembled.
#[derive(Debug, Default)]
struct Assembled {
    content: String,
    calls: Vec<ToolCall>,
    finish: Option<FinishReason>,
    usage_seen: bool,
    order_ok: bool,
}

async fn collect(mut stream: turnstone_llm::ChatStream) -> Assembled {
    let mut out = Assembled {
        order_ok: true,
        ..Assembled::default()
    };
    let mut saw_calls = false;
    while let Some(item) = stream.next().await {
        if out.finish.is_some() {
            out.order_ok = false; // `Finish` must be last
        }
        match item.unwrap() {
            StreamEvent::Content(t) => {
                out.order_ok &= !saw_calls; // deltas before `ToolCalls`
                out.content.push_str(&t);
            }
            StreamEvent::Reasoning(_) => out.order_ok &= !saw_calls,
            StreamEvent::ToolCalls(c) => {
                out.order_ok &= !saw_calls; // at most once
                saw_calls = true;
                out.calls = c;
            }
            StreamEvent::Usage(u) => {
                out.order_ok &= !out.usage_seen;
                out.usage_seen = true;
                assert!(u.total_tokens > 0);
            }
            StreamEvent::Finish(f) => out.finish = Some(f),
            StreamEvent::ProviderData(_) | StreamEvent::Notice(_) => {}
        }
    }
    out
}

fn check(i: usize, got: &Assembled) {
    assert!(got.order_ok, "request {i}: stream order violated: {got:?}");
    assert!(got.usage_seen, "request {i}: no usage");
    if i.is_multiple_of(2) {
        assert_eq!(got.content, prompt(i), "request {i}");
        assert!(got.calls.is_empty(), "request {i}: {got:?}");
        assert_eq!(got.finish, Some(FinishReason::Stop), "request {i}");
    } else {
        assert_eq!(got.content, "", "request {i}");
        let calls: Vec<(&str, &str, &str)> = got
            .calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        let bash_args = format!(r#"{{"command":"echo {i}"}}"#);
        let read_args = format!(r#"{{"path": "f{i}.txt"}}"#);
        assert_eq!(
            calls,
            [
                ("call_0", "bash", bash_args.as_str()),
                ("call_1", "read_file", read_args.as_str())
            ],
            "request {i}"
        );
        assert_eq!(got.finish, Some(FinishReason::ToolCalls), "request {i}");
    }
}

/// The user prompts the fake received, as a set.
fn received_prompts(llm: &FakeLlm) -> BTreeSet<String> {
    llm.requests()
        .iter()
        .map(|r| {
            let messages = r["messages"].as_array().unwrap();
            messages.last().unwrap()["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_streams_through_one_provider_assemble_correctly() {
    // Small chunks: many frames per response, so the streams interleave on the wire.
    let llm = FakeLlm::start_with(FakeLlmConfig {
        chunk_chars: 3,
        ..FakeLlmConfig::default()
    })
    .await;
    let provider = Arc::new(OpenAiProvider::new(OpenAiConfig::new(llm.base_url())).unwrap());
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let provider = Arc::clone(&provider);
            tokio::spawn(async move {
                let stream = provider.stream(&request(i)).await.unwrap();
                (i, collect(stream).await)
            })
        })
        .collect();
    for task in tasks {
        let (i, got) = task.await.unwrap();
        check(i, &got);
    }
    assert_eq!(llm.request_count(), REQUESTS);
    let expected: BTreeSet<String> = (0..REQUESTS).map(prompt).collect();
    assert_eq!(received_prompts(&llm), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_streams_survive_injected_server_errors_through_retry() {
    const FAULTS: usize = 10;
    let llm = FakeLlm::start_with(FakeLlmConfig {
        chunk_chars: 5,
        ..FakeLlmConfig::default()
    })
    .await;
    for _ in 0..FAULTS {
        llm.push_fault(Fault::Status {
            code: 503,
            retry_after: None,
            body: "overloaded".into(),
        });
    }
    let provider = OpenAiProvider::new(OpenAiConfig::new(llm.base_url())).unwrap();
    // More retries than faults: no request can exhaust them, whatever the interleaving.
    let policy = RetryPolicy {
        max_retries: FAULTS as u32,
        delays: vec![Duration::from_millis(5)],
        max_retry_after: Duration::from_millis(5),
    };
    let breaker = Arc::new(CircuitBreaker::default());
    let resilient = Arc::new(Resilient::new(
        Arc::new(provider),
        policy,
        Arc::clone(&breaker),
    ));
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let resilient = Arc::clone(&resilient);
            tokio::spawn(async move {
                let mut retries = 0;
                let stream = resilient
                    .stream(&request(i), &mut |_| retries += 1)
                    .await
                    .unwrap();
                (i, retries, collect(stream).await)
            })
        })
        .collect();
    let mut total_retries = 0;
    for task in tasks {
        let (i, retries, got) = task.await.unwrap();
        check(i, &got);
        total_retries += retries;
    }
    assert_eq!(total_retries, FAULTS, "each fault cost exactly one retry");
    assert_eq!(llm.request_count(), REQUESTS + FAULTS);
    assert_eq!(breaker.consecutive_failures(), 0);
}
