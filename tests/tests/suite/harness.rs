//! An engine on top of the fake LLM over real HTTP, and helpers reading a turn's envelopes.

use std::sync::Arc;
use std::time::Duration;

use turnstone_engine::{
    CreateOptions, Engine, EngineConfig, Envelope, Event, Item, Manager, ManagerConfig,
    SendOutcome, Subscription, WorkstreamHandle, WsState,
};
use turnstone_llm::{CircuitBreaker, OpenAiConfig, OpenAiProvider, Resilient, RetryPolicy};
use turnstone_testkit::{FakeLlm, FakeLlmConfig};
use turnstone_tools::ToolRegistry;

/// The context window the fake model reports; distinctive so `status` provably carries it.
pub const WINDOW: u32 = 20_480;

pub struct Harness {
    pub llm: FakeLlm,
    pub manager: Manager,
    pub dir: tempfile::TempDir,
}

impl Harness {
    pub async fn start() -> Self {
        Self::with(|_| {}).await
    }

    /// A harness whose fake model is configured by `tweak` (starting from a [`WINDOW`] window).
    pub async fn with(tweak: impl FnOnce(&mut FakeLlmConfig)) -> Self {
        let mut llm_config = FakeLlmConfig {
            context_window: WINDOW,
            ..FakeLlmConfig::default()
        };
        tweak(&mut llm_config);
        let llm = FakeLlm::start_with(llm_config).await;
        let dir = tempfile::tempdir().unwrap();
        let provider = OpenAiProvider::new(OpenAiConfig::new(llm.base_url())).unwrap();
        let policy = RetryPolicy {
            max_retries: 1,
            delays: vec![Duration::from_millis(10)],
            max_retry_after: Duration::from_millis(20),
        };
        let resilient = Resilient::new(
            Arc::new(provider),
            policy,
            Arc::new(CircuitBreaker::default()),
        );
        let config = EngineConfig {
            model: "fake-model".into(),
            cwd: dir.path().to_path_buf(),
            // 0: the engine asks the provider, which reads the fake's /v1/models.
            context_window: 0,
            ..EngineConfig::default()
        };
        let engine = Engine::new(
            resilient,
            Arc::new(ToolRegistry::with_builtins().unwrap()),
            config,
        )
        .await;
        let manager = Manager::new(engine, ManagerConfig::default());
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
pub fn send(ws: &WorkstreamHandle, text: &str) -> Subscription {
    let sub = ws.subscribe(None);
    match ws.send(text, None) {
        SendOutcome::Started { .. } => sub,
        other => panic!("send refused: {other:?}"),
    }
}

/// Reads envelopes until `stop` matches one (inclusive), with a generous deadline.
pub async fn read_until(
    sub: &mut Subscription,
    stop: impl Fn(&Event) -> bool,
) -> Vec<Arc<Envelope>> {
    let mut out: Vec<Arc<Envelope>> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let item = tokio::time::timeout_at(deadline, sub.next())
            .await
            .unwrap_or_else(|_| {
                let seen: Vec<&str> = out.iter().map(|e| e.event.type_name()).collect();
                panic!("no matching event; got so far: {seen:?}")
            })
            .expect("event log closed");
        match item {
            Item::Event(env) => {
                let done = stop(&env.event);
                out.push(env);
                if done {
                    return out;
                }
            }
            Item::Truncated { from, to } => panic!("unexpected truncation {from}..={to}"),
        }
    }
}

/// Reads the rest of the turn: through its final state change and `turn_complete`, which
/// the engine emits in that order.
pub async fn read_turn(sub: &mut Subscription) -> Vec<Arc<Envelope>> {
    let events = read_until(sub, |e| matches!(e, Event::TurnComplete { .. })).await;
    let n = events.len();
    assert!(
        n >= 2
            && matches!(
                events[n - 2].event,
                Event::StateChange {
                    state: WsState::Idle | WsState::Error
                }
            ),
        "a turn ends with its final state change, then turn_complete: {:?}",
        types(&events)
    );
    events
}

pub fn types(events: &[Arc<Envelope>]) -> Vec<&'static str> {
    events.iter().map(|e| e.event.type_name()).collect()
}
