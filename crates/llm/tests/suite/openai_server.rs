//! The OpenAI-compatible adapter against local servers: model auto-detection from
//! `/models`, llama.cpp's `/props` context window, and usage estimated when a stream has none.

use futures::StreamExt;
use turnstone_llm::{
    ChatMessage, ChatRequest, OpenAiConfig, OpenAiProvider, Provider, StreamEvent, Usage,
};
use turnstone_testkit::{FakeLlm, Fault, ScriptReply};

fn provider(base_url: String) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig::new(base_url)).unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: "fake-model".into(),
        messages: vec![ChatMessage::system("be brief"), ChatMessage::user(text)].into(),
        ..ChatRequest::default()
    }
}

async fn usage_of(provider: &OpenAiProvider, request: &ChatRequest) -> Vec<Usage> {
    let mut stream = provider.stream(request).await.unwrap();
    let mut usages = Vec::new();
    let mut finished = false;
    while let Some(item) = stream.next().await {
        match item.unwrap() {
            StreamEvent::Usage(u) => {
                assert!(!finished, "usage after the finish");
                usages.push(u)
            }
            StreamEvent::Finish(_) => finished = true,
            _ => {}
        }
    }
    assert!(finished, "the stream did not finish");
    usages
}

#[tokio::test]
async fn the_model_list_gives_the_ids_in_order() {
    let llm = FakeLlm::start().await;
    let ids = provider(llm.base_url()).list_models().await.unwrap();
    assert_eq!(ids, ["fake-model"]);
}

#[tokio::test]
async fn an_unreachable_server_lists_no_models_but_an_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = provider(format!("http://127.0.0.1:{port}/v1"))
        .list_models()
        .await
        .unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("connect"),
        "unexpected error: {err}"
    );
}

#[tokio::test]
async fn a_stream_without_a_usage_chunk_gets_an_estimate_marked_so() {
    let llm = FakeLlm::start().await;
    // What llama-cpp-python sends: content chunks and a finish reason, no usage.
    llm.push_fault(Fault::RawSse(vec![
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello there"}}]}"#.into(),
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.into(),
        "[DONE]".into(),
    ]));
    let p = provider(llm.base_url());
    let request = ask(&"word ".repeat(200));
    let usages = usage_of(&p, &request).await;
    assert_eq!(usages.len(), 1, "{usages:?}");
    let u = usages[0];
    assert!(u.estimated);
    assert_eq!(
        u.prompt_tokens,
        turnstone_llm::estimate::prompt_tokens(&request)
    );
    assert!(u.prompt_tokens > 250, "1000 characters of prompt: {u:?}");
    assert_eq!(u.completion_tokens, 3); // "Hello there": 11 bytes
    assert_eq!(u.total_tokens, u.prompt_tokens + 3);
}

#[tokio::test]
async fn a_stream_with_usage_keeps_the_servers_counts() {
    let llm = FakeLlm::start().await;
    llm.push_reply(ScriptReply::text("fine"));
    let usages = usage_of(&provider(llm.base_url()), &ask("hi")).await;
    assert_eq!(usages.len(), 1, "{usages:?}");
    assert!(!usages[0].estimated);
}

#[tokio::test]
async fn llama_cpp_props_give_the_context_window_and_their_absence_none() {
    use axum::{Json, Router, routing::get};
    let app = Router::new()
        .route(
            "/props",
            get(|| async {
                Json(serde_json::json!({
                    "default_generation_settings": {"n_ctx": 4096},
                    "n_ctx": 8192,
                    "total_slots": 2
                }))
            }),
        )
        .route(
            "/v1/models",
            get(|| async {
                Json(serde_json::json!({"object": "list",
                    "data": [{"id": "smollm2-135m", "meta": {"n_ctx_train": 8192}}]}))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let p = provider(format!("http://{addr}/v1"));
    assert_eq!(p.server_context_window().await, Some(4096));
    // The server's running window wins over the model's training context.
    assert_eq!(
        p.capabilities("smollm2-135m").await.unwrap().context_window,
        4096
    );

    let llm = FakeLlm::start().await; // no /props: the listed window
    let p = provider(llm.base_url());
    assert_eq!(p.server_context_window().await, None);
    assert_eq!(
        p.capabilities("fake-model").await.unwrap().context_window,
        llm.config().context_window
    );
}
