//! A fake LLM, an engine on top of it, and helpers to read a turn's events.

use std::sync::Arc;
use std::time::Duration;

use turnstone_engine::{
    CreateOptions, Engine, EngineConfig, Event, Item, Manager, ManagerConfig, SendOutcome,
    Subscription, WorkstreamHandle, WsState,
};
use turnstone_llm::openai::{OpenAiConfig, OpenAiProvider};
use turnstone_llm::{ChatMessage, CircuitBreaker, Resilient, RetryPolicy, Role};
use turnstone_testkit::{FakeLlm, FakeLlmConfig};
use turnstone_tools::ToolRegistry;

pub struct Harness {
    pub llm: FakeLlm,
    pub manager: Manager,
    pub dir: tempfile::TempDir,
}

pub struct Options {
    pub llm: FakeLlmConfig,
    pub policy: RetryPolicy,
    pub breaker: CircuitBreaker,
    pub config: EngineConfig,
    pub manager: ManagerConfig,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            llm: FakeLlmConfig::default(),
            policy: RetryPolicy {
                max_retries: 3,
                delays: vec![Duration::from_millis(10)],
                max_retry_after: Duration::from_millis(50),
            },
            breaker: CircuitBreaker::default(),
            config: EngineConfig::default(),
            manager: ManagerConfig::default(),
        }
    }
}

impl Harness {
    pub async fn start() -> Self {
        Self::with(|_| {}).await
    }

    pub async fn with(tweak: impl FnOnce(&mut Options)) -> Self {
        let mut options = Options::default();
        tweak(&mut options);
        let llm = FakeLlm::start_with(options.llm).await;
        let dir = tempfile::tempdir().unwrap();
        let provider = OpenAiProvider::new(OpenAiConfig::new(llm.base_url())).unwrap();
        let resilient = Resilient::new(
            Arc::new(provider),
            options.policy,
            Arc::new(options.breaker),
        );
        let mut config = options.config;
        config.model = "fake-model".into();
        config.cwd = dir.path().to_path_buf();
        let engine = Engine::new(
            resilient,
            Arc::new(ToolRegistry::with_builtins().unwrap()),
            config,
        )
        .await;
        let manager = Manager::new(engine, options.manager);
        Self { llm, manager, dir }
    }

    pub fn workstream(&self) -> WorkstreamHandle {
        self.manager.create(CreateOptions::default()).unwrap().0
    }

    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }
}

/// Sends `text` and returns the subscription that sees the whole turn.
/// An engine on `registry`'s default chain, whose default is `(alias, model)`, with the
/// built-in tools, working in `dir`.
pub async fn registry_engine(
    registry: turnstone_llm::ModelRegistry,
    (alias, model): (&str, &str),
    policy: RetryPolicy,
    dir: &std::path::Path,
) -> Arc<Engine> {
    Engine::new(
        Resilient::new(
            Arc::new(registry.default_chain()),
            policy,
            Arc::new(CircuitBreaker::default()),
        ),
        Arc::new(ToolRegistry::with_builtins().unwrap()),
        EngineConfig {
            model: model.into(),
            model_alias: alias.into(),
            models: Some(Arc::new(registry)),
            cwd: dir.to_path_buf(),
            ..EngineConfig::default()
        },
    )
    .await
}

pub fn send(ws: &WorkstreamHandle, text: &str) -> Subscription {
    let sub = ws.subscribe(None);
    match ws.send(text, None) {
        SendOutcome::Started { .. } => sub,
        other => panic!("send refused: {other:?}"),
    }
}

/// Reads events until `stop` matches one (inclusive), with a generous deadline.
pub async fn read_until(sub: &mut Subscription, stop: impl Fn(&Event) -> bool) -> Vec<Event> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let item = tokio::time::timeout_at(deadline, sub.next())
            .await
            .unwrap_or_else(|_| panic!("no matching event; got so far: {:#?}", types(&out)))
            .expect("event log closed");
        match item {
            Item::Event(env) => {
                let done = stop(&env.event);
                out.push(env.event.clone());
                if done {
                    return out;
                }
            }
            Item::Truncated { from, to } => panic!("unexpected truncation {from}..={to}"),
        }
    }
}

/// Reads the rest of the turn (through the final state change and `turn_complete`).
pub async fn read_turn(sub: &mut Subscription) -> Vec<Event> {
    let events = read_until(sub, |e| matches!(e, Event::TurnComplete { .. })).await;
    let n = events.len();
    assert!(
        n >= 2
            && matches!(
                events[n - 2],
                Event::StateChange {
                    state: WsState::Idle | WsState::Error
                }
            ),
        "a turn ends with its final state change, then turn_complete: {:?}",
        types(&events)
    );
    events
}

pub fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::type_name).collect()
}

/// The text of each `content` event.
pub fn deltas(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Content { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

pub fn content(events: &[Event]) -> String {
    deltas(events).concat()
}

pub fn states(events: &[Event]) -> Vec<WsState> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::StateChange { state } => Some(*state),
            _ => None,
        })
        .collect()
}

pub fn errors(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Error { message } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

pub fn infos(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Info { message } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// The reasoning text of a turn, all deltas joined.
pub fn reasoning(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Reasoning { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The tool names a recorded model request offered.
pub fn tool_names(request: &serde_json::Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

pub fn tool_results(events: &[Event]) -> Vec<(String, String, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult {
                name,
                output,
                is_error,
                ..
            } => Some((name.clone(), output.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

/// Asserts the conversation is one an OpenAI-compatible provider accepts: every assistant
/// message with tool calls is followed by exactly one tool message per call id, and no tool
/// message appears anywhere else.
pub fn assert_provider_acceptable(history: &[ChatMessage]) {
    let mut i = 0;
    while i < history.len() {
        let m = &history[i];
        match m.role() {
            Role::Tool => panic!("tool message without a preceding call at {i}: {history:#?}"),
            Role::Assistant if !m.tool_calls.is_empty() => {
                let mut expected: Vec<&str> = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
                expected.sort();
                let mut got = Vec::new();
                i += 1;
                while i < history.len() && history[i].role() == Role::Tool {
                    got.push(history[i].tool_call_id.as_deref().unwrap_or(""));
                    i += 1;
                }
                got.sort();
                assert_eq!(
                    got, expected,
                    "tool results must answer every call: {history:#?}"
                );
                continue;
            }
            Role::Assistant => {
                assert!(
                    m.content.as_deref().is_some_and(|c| !c.is_empty()),
                    "empty assistant message at {i}: {history:#?}"
                );
            }
            _ => {}
        }
        i += 1;
    }
}

/// The tool-result messages of a history, in order.
pub fn tool_messages(history: &[ChatMessage]) -> Vec<String> {
    history
        .iter()
        .filter(|m| m.role() == Role::Tool)
        .map(|m| m.content.clone().unwrap_or_default())
        .collect()
}
