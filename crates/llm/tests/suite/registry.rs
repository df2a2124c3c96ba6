//! `ModelRegistry` and `FallbackProvider` against real local endpoints.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use turnstone_llm::registry::RegistryOptions;
use turnstone_llm::{
    ChatMessage, ChatRequest, CircuitBreaker, LlmError, ModelRegistry, Provider, RegistryConfig,
    RegistryError, Resilient, RetryPolicy, StreamEvent,
};
use turnstone_testkit::{AnthropicFault, FakeAnthropic, FakeAnthropicConfig, FakeLlm};

fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

fn parse(text: &str) -> RegistryConfig {
    toml::from_str(text).unwrap()
}

fn options(threshold: u32) -> RegistryOptions {
    RegistryOptions {
        request_timeout: Duration::from_secs(30),
        breaker_threshold: threshold,
        ..RegistryOptions::default()
    }
}

fn build(text: &str, threshold: u32) -> ModelRegistry {
    ModelRegistry::from_config_with(&parse(text), &|_| None, &options(threshold)).unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: "ignored-by-the-chain".into(),
        messages: vec![ChatMessage::user(text)].into(),
        ..ChatRequest::default()
    }
}

async fn content(p: &dyn Provider, text: &str) -> Result<String, LlmError> {
    let stream = p.stream(&ask(text)).await?;
    let items: Vec<_> = stream.collect().await;
    let mut out = String::new();
    for item in items {
        if let StreamEvent::Content(t) = item? {
            out.push_str(&t);
        }
    }
    Ok(out)
}

#[test]
fn unknown_alias_is_a_clear_error_listing_the_known_ones() {
    let text = r#"
        [models.claude]
        provider = "anthropic"
        model = "claude-x"
        [models.local]
        provider = "openai"
        base_url = "http://127.0.0.1:9/v1"
        model = "qwen"
        [model]
        default = "claude"
    "#;
    let registry = build(text, 3);
    let err = registry.get("gpt5").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown model alias 'gpt5' (known: claude, local)"
    );
    assert!(matches!(
        registry.chain("gpt5").unwrap_err(),
        RegistryError::UnknownAlias { .. }
    ));
    // The same check at load time for the [model] references.
    let bad = format!("{text}fallback = [\"local\", \"nope\"]\n");
    let err = ModelRegistry::from_config(&parse(&bad))
        .unwrap_err()
        .to_string();
    assert_eq!(err, "unknown model alias 'nope' (known: claude, local)");
}

#[test]
fn config_rejects_unknown_keys() {
    let err = toml::from_str::<RegistryConfig>(
        "[models.a]\nprovider = \"anthropic\"\nmodel = \"m\"\ncontext = 5\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("context"), "{err}");
    let err = toml::from_str::<RegistryConfig>("[model]\nfallbacks = [\"a\"]\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("fallbacks"), "{err}");
}

#[tokio::test]
async fn falls_back_to_the_second_model_when_the_first_refuses_connections() {
    let llm = FakeLlm::start().await;
    let text = format!(
        r#"
        [models.claude]
        provider = "anthropic"
        base_url = "http://127.0.0.1:{dead}"
        model = "claude-x"
        [models.local]
        provider = "openai"
        base_url = "{local}"
        model = "local-model"
        context_window = 65536
        max_tokens = 1000
        [model]
        default = "claude"
        fallback = ["local"]
        agent_model = "local"
        "#,
        dead = closed_port(),
        local = llm.base_url(),
    );
    let registry = build(&text, 3);
    let chain = registry.default_chain();
    assert_eq!(chain.aliases(), ["claude", "local"]);
    assert_eq!(
        content(&chain, "served by the fallback").await.unwrap(),
        "served by the fallback"
    );
    assert_eq!(chain.last_served().as_deref(), Some("local"));
    let body = llm.last_request().unwrap();
    assert_eq!(body["model"], "local-model");
    assert_eq!(body["max_completion_tokens"], 1000);
    assert_eq!(
        registry
            .get("claude")
            .unwrap()
            .breaker
            .consecutive_failures(),
        1
    );
    // Wrapped in Resilient as the engine does: no retry notice, the chain absorbed it.
    let resilient = Resilient::new(
        Arc::new(registry.default_chain()),
        RetryPolicy::none(),
        Arc::new(CircuitBreaker::default()),
    );
    let mut notices = 0;
    let stream = resilient
        .stream(&ask("again"), &mut |_| notices += 1)
        .await
        .unwrap();
    assert_eq!(stream.collect::<Vec<_>>().await.len(), 3); // content, usage, finish
    assert_eq!(notices, 0);
    // The agent chain starts at its own model.
    assert_eq!(registry.agent_chain().aliases(), ["local"]);
    assert_eq!(registry.agent_alias(), "local");
}

#[tokio::test]
async fn an_open_breaker_skips_the_primary_without_contacting_it() {
    let primary = FakeAnthropic::start().await;
    let llm = FakeLlm::start().await;
    primary.push_fault(AnthropicFault::Status {
        code: 503,
        retry_after: None,
        body: "busy".into(),
    });
    let text = format!(
        r#"
        [models.claude]
        provider = "anthropic"
        base_url = "{}"
        model = "claude-x"
        [models.local]
        provider = "openai"
        base_url = "{}"
        model = "local-model"
        [model]
        default = "claude"
        fallback = ["local"]
        "#,
        primary.base_url(),
        llm.base_url()
    );
    let registry = build(&text, 1);
    let chain = registry.default_chain();
    assert_eq!(content(&chain, "one").await.unwrap(), "one");
    assert_eq!((primary.request_count(), llm.request_count()), (1, 1));
    assert_eq!(
        registry.get("claude").unwrap().breaker.state(),
        turnstone_llm::BreakerState::Open
    );
    assert_eq!(content(&chain, "two").await.unwrap(), "two");
    assert_eq!((primary.request_count(), llm.request_count()), (1, 2));
}

#[tokio::test]
async fn a_request_error_is_not_hidden_by_the_fallback() {
    let primary = FakeAnthropic::start().await;
    let llm = FakeLlm::start().await;
    primary.push_fault(AnthropicFault::Status {
        code: 400,
        retry_after: None,
        body: r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}"#.into(),
    });
    let text = format!(
        "[models.a]\nprovider = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
         [models.b]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
         [model]\ndefault = \"a\"\nfallback = [\"b\"]\n",
        primary.base_url(),
        llm.base_url()
    );
    let chain = build(&text, 3).default_chain();
    let err = content(&chain, "x").await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Client { status: 400, body } if body.contains("prompt is too long")),
        "{err:?}"
    );
    assert_eq!(llm.request_count(), 0);
}

#[tokio::test]
async fn every_member_unreachable_returns_the_last_error() {
    let text = format!(
        "[models.a]\nprovider = \"anthropic\"\nbase_url = \"http://127.0.0.1:{}\"\nmodel = \"m\"\n\
         [models.b]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"m\"\n\
         [model]\ndefault = \"a\"\nfallback = [\"b\"]\n",
        closed_port(),
        closed_port()
    );
    let chain = build(&text, 3).default_chain();
    let err = content(&chain, "x").await.unwrap_err();
    assert!(matches!(err, LlmError::Connect(_)), "{err:?}");
    assert!(err.is_retryable());
    assert_eq!(chain.last_served(), None);
}

#[tokio::test]
async fn api_key_env_is_read_and_sent() {
    let fake = FakeAnthropic::start_with(FakeAnthropicConfig {
        api_key: Some("from-env".into()),
        ..FakeAnthropicConfig::default()
    })
    .await;
    let text = format!(
        "[models.c]\nprovider = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"MY_KEY\"\ncontext_window = 1234\n",
        fake.base_url()
    );
    let env = |name: &str| (name == "MY_KEY").then(|| "from-env".to_string());
    let registry = ModelRegistry::from_config_with(&parse(&text), &env, &options(3)).unwrap();
    assert_eq!(registry.default_alias(), "c");
    let chain = registry.default_chain();
    assert_eq!(content(&chain, "keyed").await.unwrap(), "keyed");
    assert_eq!(
        fake.last_headers().unwrap().api_key.as_deref(),
        Some("from-env")
    );
    assert_eq!(
        chain.capabilities("any").await.unwrap().context_window,
        1234
    );
}
