//! Context management in real turns against the fake LLM over HTTP: compaction (auto and
//! `/compact`), auto-titles, per-workstream models, provider data (Anthropic thinking) kept
//! in the history, the per-turn `notify` limit and the journaled loaded-tool set.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turnstone_engine::{
    CreateOptions, Engine, EngineConfig, Event, Journal, Manager, ManagerConfig, ModelError,
    SUMMARY_MARKER, SendOutcome, WorkstreamHandle, WsState,
};
use turnstone_llm::openai::{OpenAiConfig, OpenAiProvider};
use turnstone_llm::{
    AnthropicConfig, AnthropicProvider, ChatMessage, CircuitBreaker, ModelEntry, ModelRegistry,
    ModelSection, ProviderKind, RegistryConfig, Resilient, RetryPolicy, Role,
};
use turnstone_testkit::fake_anthropic::fake_signature;
use turnstone_testkit::{FakeAnthropic, FakeLlm, FakeLlmConfig, Fault, ScriptReply};
use turnstone_tools::{BuiltinOptions, NotifyTarget, ToolRegistry, WebOptions};

use super::harness::*;

// ---- helpers ---------------------------------------------------------------------------

/// A journal that records everything it is handed.
#[derive(Default)]
struct Recording {
    replaced: Mutex<Vec<Vec<ChatMessage>>>,
    config: Mutex<Vec<(String, Option<String>)>>,
}

impl Journal for Recording {
    fn appended(&self, _ws_id: &str, _messages: &[ChatMessage]) {}
    fn replaced(&self, _ws_id: &str, messages: &[ChatMessage]) {
        self.replaced.lock().unwrap().push(messages.to_vec());
    }
    fn config_changed(&self, _ws_id: &str, key: &str, value: Option<&str>) {
        self.config
            .lock()
            .unwrap()
            .push((key.to_string(), value.map(str::to_string)));
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_retries: 1,
        delays: vec![Duration::from_millis(10)],
        max_retry_after: Duration::from_millis(50),
    }
}

/// The non-system messages of a recorded OpenAI request, as `(role, content)`.
fn conversation(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// A harness whose engine compacts at half of a 1000-token window.
async fn small_window() -> Harness {
    Harness::with(|o| {
        o.config.context_window = 1000;
        o.config.auto_compact_pct = 0.5;
        o.config.compact_max_tokens = 100;
    })
    .await
}

// ---- compaction ------------------------------------------------------------------------

#[tokio::test]
async fn a_turn_over_the_threshold_compacts_and_the_next_request_carries_only_the_summary() {
    let h = small_window().await;
    let journal = Arc::new(Recording::default());
    let manager = Manager::new(h.manager.engine().clone(), ManagerConfig::default())
        .with_journal(journal.clone());
    let (ws, _) = manager.create(CreateOptions::default()).unwrap();
    // ≈ 2400 / 4 = 600 prompt tokens > 1000 × 0.5.
    let long = format!("{}MIDDLE{}", "a".repeat(1200), "z".repeat(1200));
    h.llm.push_reply(ScriptReply::text("ok"));
    h.llm.push_reply(ScriptReply::text(
        "## Files\nsrc/parser.rs: fixed `parse_expr`",
    ));
    let mut sub = send(&ws, &long);
    let events = read_turn(&mut sub).await;

    // Events: the turn's status, the announcement, thinking around the summary request, the
    // size line, the summary between rules, a fresh status, then idle.
    let kinds = types(&events);
    let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
    let announce = infos(&events)
        .iter()
        .position(|m| m == "\n[Auto-compacting: prompt exceeds 50% of context window]")
        .expect("announced");
    let messages = infos(&events);
    assert!(
        messages[announce + 1].starts_with("[compacted: ~"),
        "{messages:?}"
    );
    assert!(messages[announce + 1].ends_with(" tokens]"));
    let rule = "\u{2500}".repeat(60);
    assert_eq!(
        messages[announce + 2],
        format!("{rule}\n## Files\nsrc/parser.rs: fixed `parse_expr`\n{rule}")
    );
    let statuses: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| **k == "status")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(statuses.len(), 2, "{kinds:?}");
    assert!(statuses[1] > kinds.iter().rposition(|k| *k == "thinking_start").unwrap());
    assert!(at("turn_complete") > statuses[1]);
    let Event::Status(fresh) = &events[statuses[1]] else {
        unreachable!()
    };
    assert!(
        fresh.prompt_tokens < 600,
        "post-compaction estimate: {fresh:?}"
    );

    // The summary request: non-streaming, temperature 0.3, the capped max_tokens, and a
    // transcript with the long message abbreviated to its head and tail.
    let requests = h.llm.requests();
    assert_eq!(requests.len(), 2);
    let summary_request = &requests[1];
    assert_ne!(summary_request["stream"], true);
    assert_eq!(summary_request["temperature"], 0.3);
    assert_eq!(summary_request["max_completion_tokens"], 100);
    assert!(summary_request["tools"].is_null() || summary_request["tools"] == json!([]));
    let prompt = summary_request["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.contains("## Decisions") && prompt.contains("## Open tasks"));
    let transcript = summary_request["messages"][1]["content"].as_str().unwrap();
    assert!(transcript.contains(&"a".repeat(1000)) && transcript.contains(&"z".repeat(500)));
    assert!(!transcript.contains("MIDDLE"), "abbreviated");
    assert!(transcript.contains("characters omitted"));

    // The history is the summary pair; auto mode quotes the (long) last user message.
    let history = ws.history();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0], ChatMessage::user(SUMMARY_MARKER));
    let summary = history[1].content.clone().unwrap();
    assert!(summary.starts_with("## Files\nsrc/parser.rs"));
    assert!(summary.contains("## Continue"));
    assert!(summary.contains(&format!("> {}...", "a".repeat(400))));
    assert_eq!(
        journal.replaced.lock().unwrap().as_slice(),
        std::slice::from_ref(&history)
    );

    // The next request carries only the summary pair and the new message.
    let mut sub = send(&ws, "and now?");
    read_turn(&mut sub).await;
    let next = conversation(&h.llm.last_request().unwrap());
    assert_eq!(
        next,
        [
            ("user".to_string(), SUMMARY_MARKER.to_string()),
            ("assistant".to_string(), summary),
            ("user".to_string(), "and now?".to_string()),
        ]
    );
}

#[tokio::test]
async fn compact_resets_the_read_before_edit_guard() {
    let h = Harness::start().await;
    std::fs::write(h.path("notes.txt"), "alpha\nbeta\n").unwrap();
    let ws = h.workstream();
    let edit =
        r#"CALL:edit_file {"path": "notes.txt", "old_string": "beta", "new_string": "gamma"}"#;

    let mut sub = send(&ws, r#"CALL:read_file {"path": "notes.txt"}"#);
    let events = read_turn(&mut sub).await;
    assert!(!tool_results(&events)[0].2, "read ok");
    // Read: the edit passes the guard and asks for approval (denied here).
    let mut sub = send(&ws, edit);
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    ws.approve(false, None, false);
    read_turn(&mut sub).await;

    h.llm
        .push_reply(ScriptReply::text("summary: notes.txt was read"));
    let mut sub = ws.subscribe(None);
    assert!(matches!(ws.compact(), SendOutcome::Started { .. }));
    let events = read_until(
        &mut sub,
        |e| matches!(e, Event::Info { message } if message.starts_with('\u{2500}')),
    )
    .await;
    assert_eq!(
        types(&events)[..2],
        ["thinking_start", "thinking_stop"],
        "{events:?}"
    );
    assert!(infos(&events)[0].starts_with("[compacted: ~"));
    assert!(
        !types(&events).contains(&"status"),
        "manual mode: no status"
    );
    let history = ws.history();
    assert_eq!(history.len(), 2);
    assert!(
        !history[1]
            .content
            .as_deref()
            .unwrap()
            .contains("## Continue")
    );
    turnstone_testkit::assert_eventually!(!ws.is_busy(), "compaction never ended");

    // After the compaction the file must be read again.
    let mut sub = send(&ws, edit);
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{events:?}");
    assert!(results[0].2, "{results:?}");
    assert!(
        results[0]
            .1
            .contains("has not been read in this conversation"),
        "{}",
        results[0].1
    );
    assert!(!types(&events).contains(&"approve_request"));
    assert_eq!(
        std::fs::read_to_string(h.path("notes.txt")).unwrap(),
        "alpha\nbeta\n"
    );
}

#[tokio::test]
async fn a_failed_compaction_leaves_the_history_untouched() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "remember the number 42");
    read_turn(&mut sub).await;
    let before = ws.history();
    assert_eq!(before.len(), 2);

    h.llm.push_fault(Fault::Status {
        code: 400,
        retry_after: None,
        body: "context too long".into(),
    });
    let mut sub = ws.subscribe(None);
    ws.compact();
    let events = read_until(&mut sub, |e| matches!(e, Event::Error { .. })).await;
    let error = errors(&events).pop().unwrap();
    assert!(error.starts_with("Compaction failed: "), "{error}");
    assert!(error.contains("context too long"), "{error}");
    assert_eq!(types(&events), ["thinking_start", "thinking_stop", "error"]);
    turnstone_testkit::assert_eventually!(!ws.is_busy(), "compaction never ended");
    assert_eq!(ws.history(), before);

    // The workstream still works, with its whole conversation.
    let mut sub = send(&ws, "what number?");
    read_turn(&mut sub).await;
    let sent = conversation(&h.llm.last_request().unwrap());
    assert_eq!(sent[0].1, "remember the number 42");
}

#[tokio::test]
async fn compact_needs_two_messages_and_waits_for_a_running_turn() {
    let h = Harness::with(|o| {
        o.llm = FakeLlmConfig {
            tokens_per_sec: Some(50.0),
            ..FakeLlmConfig::default()
        }
    })
    .await;
    let ws = h.workstream();
    let mut sub = ws.subscribe(None);
    ws.compact();
    let events = read_until(&mut sub, |e| matches!(e, Event::Info { .. })).await;
    assert_eq!(infos(&events), ["Not enough messages to compact."]);
    assert_eq!(h.llm.request_count(), 0);
    turnstone_testkit::assert_eventually!(!ws.is_busy(), "compaction never ended");

    // While a turn runs, /compact is refused with busy_error.
    // ≈ 50 chunks at 50 per second: the turn runs for about a second.
    let slow = "a slow reply of several words ".repeat(7);
    let mut sub = send(&ws, &slow);
    read_until(&mut sub, |e| matches!(e, Event::Content { .. })).await;
    assert_eq!(ws.compact(), SendOutcome::Busy);
    let events = read_turn(&mut sub).await;
    assert!(types(&events).contains(&"busy_error"), "{events:?}");
}

// ---- auto-title ------------------------------------------------------------------------

fn is_title_request(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You name conversations"))
}

#[tokio::test]
async fn the_first_exchange_gets_a_title_retried_after_a_failure_and_again_after_clear() {
    let h = Harness::with(|o| o.config.auto_title = true).await;
    let titles: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let seen = titles.clone();
    let manager = Manager::new(h.manager.engine().clone(), ManagerConfig::default())
        .with_title_hook(Arc::new(move |ws_id: &str, title: &str| {
            seen.lock()
                .unwrap()
                .push((ws_id.to_string(), title.to_string()));
        }));
    let (ws, _) = manager.create(CreateOptions::default()).unwrap();

    // Turn one; the title answer is blank: a failure, retried after the next turn.
    h.llm
        .push_reply(ScriptReply::text("Sure, here is the plan."));
    h.llm.push_reply(ScriptReply::text("  \n  "));
    let mut sub = send(
        &ws,
        "Please help me fix the flaky parser tests in crate foo",
    );
    let events = read_turn(&mut sub).await;
    assert_eq!(
        states(&events).last(),
        Some(&WsState::Idle),
        "the title never delays the turn"
    );
    turnstone_testkit::assert_eventually!(h.llm.request_count() == 2, "no title request");
    let request = &h.llm.requests()[1];
    assert!(is_title_request(request), "{request}");
    assert_eq!(request["temperature"], 0.3);
    assert_eq!(request["max_completion_tokens"], 200);
    let asked = request["messages"][1]["content"].as_str().unwrap();
    assert!(asked.contains("User: Please help me fix the flaky parser tests"));
    assert!(asked.contains("Assistant: Sure, here is the plan."));
    assert_eq!(ws.title(), None);

    h.llm.push_reply(ScriptReply::text("second reply"));
    h.llm.push_reply(ScriptReply::text(
        "\"Fixing Flaky Parser Tests\"\nmore text",
    ));
    let mut sub = send(&ws, "go on");
    read_turn(&mut sub).await;
    turnstone_testkit::assert_eventually!(
        titles.lock().unwrap().len() == 1,
        "the hook was never called"
    );
    assert_eq!(
        titles.lock().unwrap()[0],
        (ws.id().to_string(), "Fixing Flaky Parser Tests".to_string())
    );
    assert_eq!(ws.title().as_deref(), Some("Fixing Flaky Parser Tests"));
    // The retry still titles the first exchange.
    let retry = &h.llm.requests()[3];
    assert!(
        retry["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("flaky parser")
    );

    // Titled: a further turn asks nothing more.
    let mut sub = send(&ws, "thanks");
    read_turn(&mut sub).await;
    // `/clear` starts over: the next exchange is titled again.
    assert!(ws.replace_history(Vec::new()));
    h.llm.push_reply(ScriptReply::text("new topic reply"));
    h.llm.push_reply(ScriptReply::text("Baking Bread"));
    let mut sub = send(&ws, "new topic: bread");
    read_turn(&mut sub).await;
    turnstone_testkit::assert_eventually!(titles.lock().unwrap().len() == 2, "no second title");
    assert_eq!(titles.lock().unwrap()[1].1, "Baking Bread");
    let title_requests = h
        .llm
        .requests()
        .iter()
        .filter(|r| is_title_request(r))
        .count();
    assert_eq!(title_requests, 3);

    // A workstream resumed with history is never titled.
    let (resumed, _) = manager
        .create(CreateOptions {
            history: vec![
                ChatMessage::user("old"),
                ChatMessage::assistant(Some("old reply".into()), Vec::new()),
            ],
            ..CreateOptions::default()
        })
        .unwrap();
    let before = h.llm.request_count();
    let mut sub = send(&resumed, "more");
    read_turn(&mut sub).await;
    let mut sub = send(&resumed, "and more");
    read_turn(&mut sub).await;
    let requests = h.llm.requests();
    assert!(!requests[before..].iter().any(is_title_request));
    assert_eq!(resumed.title(), None);
}

// ---- per-workstream model ------------------------------------------------------------------

#[tokio::test]
async fn a_workstream_switches_to_another_registry_model_for_its_next_turn() {
    let fast = FakeLlm::start().await;
    let big = FakeLlm::start().await;
    let mut config = RegistryConfig::default();
    let mut entry = ModelEntry::new(ProviderKind::Openai, fast.base_url(), "fast-model");
    entry.context_window = Some(8_000);
    config.models.insert("fast".into(), entry);
    let mut entry = ModelEntry::new(ProviderKind::Openai, big.base_url(), "big-model");
    entry.context_window = Some(100_000);
    config.models.insert("big".into(), entry);
    config.model = ModelSection {
        default: Some("fast".into()),
        ..ModelSection::default()
    };
    let registry = ModelRegistry::from_config(&config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = registry_engine(registry, ("fast", "fast-model"), policy(), dir.path()).await;
    let journal = Arc::new(Recording::default());
    let manager =
        Manager::new(engine.clone(), ManagerConfig::default()).with_journal(journal.clone());
    let (ws, _) = manager.create(CreateOptions::default()).unwrap();
    assert_eq!(engine.model_aliases(), ["big", "fast"]);
    assert_eq!(ws.model(), ("fast-model".into(), "fast".into()));

    let err = ws.select_model("huge").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "Unknown model alias 'huge'. Available: big, fast"
    );
    assert_eq!(ws.model().1, "fast");

    assert_eq!(
        ws.select_model("big").await.unwrap(),
        ("big-model".into(), "big".into())
    );
    let mut sub = send(&ws, "hello big");
    let events = read_turn(&mut sub).await;
    assert_eq!(content(&events), "hello big");
    assert_eq!((fast.request_count(), big.request_count()), (0, 1));
    assert_eq!(big.last_request().unwrap()["model"], "big-model");
    assert_eq!(ws.status().context_window, 100_000);
    // Other workstreams keep the engine's model.
    let (other, _) = manager.create(CreateOptions::default()).unwrap();
    let mut sub = send(&other, "hello default");
    read_turn(&mut sub).await;
    assert_eq!((fast.request_count(), big.request_count()), (1, 1));

    // The default alias clears the override.
    assert_eq!(ws.select_model("fast").await.unwrap().1, "fast");
    let mut sub = send(&ws, "back to fast");
    read_turn(&mut sub).await;
    assert_eq!(fast.request_count(), 2);
    assert_eq!(ws.status().context_window, 8_000);
    assert_eq!(
        journal.config.lock().unwrap().as_slice(),
        [
            ("model".to_string(), Some("big".to_string())),
            ("model".to_string(), None)
        ]
    );

    // A resumed session restores its stored alias without journaling it again.
    let (resumed, _) = manager.create(CreateOptions::default()).unwrap();
    resumed.restore_model("big").await;
    assert_eq!(resumed.model().0, "big-model");
    resumed.restore_model("retired").await;
    assert_eq!(
        resumed.model().0,
        "fast-model",
        "an unknown alias falls back"
    );
    assert_eq!(journal.config.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn without_a_registry_the_model_stays() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let err = ws.select_model("other").await.unwrap_err();
    assert_eq!(err, ModelError::NoRegistry("fake-model".into()));
    assert_eq!(ws.model().0, "fake-model");
    assert!(h.manager.engine().model_aliases().is_empty());
}

// ---- thinking blocks in the history --------------------------------------------------------

async fn anthropic_engine(fake: &FakeAnthropic, dir: &tempfile::TempDir) -> Arc<Engine> {
    let provider = AnthropicProvider::new(AnthropicConfig {
        thinking_budget: Some(2048),
        web_search_max_uses: Some(2),
        ..AnthropicConfig::new(fake.base_url())
    })
    .unwrap();
    Engine::new(
        Resilient::new(
            Arc::new(provider),
            policy(),
            Arc::new(CircuitBreaker::default()),
        ),
        Arc::new(ToolRegistry::with_builtins().unwrap()),
        EngineConfig {
            model: "claude-test".into(),
            cwd: dir.path().to_path_buf(),
            skip_permissions: true,
            ..EngineConfig::default()
        },
    )
    .await
}

/// Anthropic's server-side web search is reported to frontends as `info` events, and never
/// becomes conversation text or reasoning.
#[tokio::test]
async fn server_side_web_search_becomes_info_events() {
    let fake = FakeAnthropic::start().await;
    let dir = tempfile::tempdir().unwrap();
    let manager = Manager::new(
        anthropic_engine(&fake, &dir).await,
        ManagerConfig::default(),
    );
    let (ws, _) = manager.create(CreateOptions::default()).unwrap();
    let mut sub = send(&ws, "SEARCH: tokio runtime\nsummarise");
    let events = read_turn(&mut sub).await;
    let infos = infos(&events);
    assert!(
        infos.iter().any(|m| m == "[web search: \"tokio runtime\"]"),
        "{infos:?}"
    );
    assert!(
        infos
            .iter()
            .any(|m| m.starts_with("[web search: ") && m.contains("result(s)")),
        "{infos:?}"
    );
    let reasoning = reasoning(&events);
    assert!(!reasoning.contains("web search"), "{reasoning}");
    let reply = ws
        .history()
        .last()
        .unwrap()
        .content
        .clone()
        .unwrap_or_default();
    assert_eq!(reply, "summarise");
}

#[tokio::test]
async fn thinking_blocks_live_in_the_history_and_replay_from_it_on_a_fresh_provider() {
    let fake = FakeAnthropic::start().await;
    let dir = tempfile::tempdir().unwrap();
    let manager = Manager::new(
        anthropic_engine(&fake, &dir).await,
        ManagerConfig::default(),
    );
    let (ws, _) = manager.create(CreateOptions::default()).unwrap();
    let mut sub = send(&ws, "THINK: list before acting\nTOOL: echo hi");
    let events = read_turn(&mut sub).await;
    assert_eq!(tool_results(&events).len(), 1, "{events:?}");
    let history = ws.history();
    let calling = history
        .iter()
        .find(|m| m.role() == Role::Assistant && !m.tool_calls.is_empty())
        .unwrap();
    let data = calling.provider_data.as_ref().expect("thinking kept");
    assert_eq!(data.provider, "anthropic");
    assert_eq!(
        data.thinking(),
        [(
            "list before acting",
            fake_signature("list before acting").as_str()
        )]
    );

    // A new engine (a restart: its provider has no memory) continues from the history alone.
    let restarted = Manager::new(
        anthropic_engine(&fake, &dir).await,
        ManagerConfig::default(),
    );
    let (resumed, _) = restarted
        .create(CreateOptions {
            history,
            ..CreateOptions::default()
        })
        .unwrap();
    let mut sub = send(&resumed, "next");
    let events = read_turn(&mut sub).await;
    assert_eq!(states(&events).last(), Some(&WsState::Idle), "{events:?}");
    let body = fake.last_request().unwrap();
    let assistant = &body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "list before acting",
               "signature": fake_signature("list before acting")})
    );
}

// ---- notify: at most five per turn -----------------------------------------------------------

/// A webhook receiver on 127.0.0.1 answering 200 to every request and counting them.
async fn webhook() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = bodies.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + length {
                        seen.lock().unwrap().push(text[end + 4..].to_string());
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                            .await;
                        return;
                    }
                }
            });
        }
    });
    (url, bodies)
}

#[tokio::test]
async fn notify_delivers_at_most_five_per_turn_and_the_next_turn_can_notify_again() {
    let (url, received) = webhook().await;
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    let tools = ToolRegistry::with_builtin_options(&BuiltinOptions {
        web: WebOptions {
            enabled: true,
            notify_targets: vec![NotifyTarget::new("ops", url)],
            notify_retry_backoff: Vec::new(),
            ..WebOptions::default()
        },
        ..BuiltinOptions::default()
    })
    .unwrap();
    let engine = Engine::new(
        Resilient::new(
            Arc::new(OpenAiProvider::new(OpenAiConfig::new(llm.base_url())).unwrap()),
            policy(),
            Arc::new(CircuitBreaker::default()),
        ),
        Arc::new(tools),
        EngineConfig {
            model: "fake-model".into(),
            cwd: dir.path().to_path_buf(),
            ..EngineConfig::default()
        },
    )
    .await;
    let manager = Manager::new(engine, ManagerConfig::default());
    let (ws, _) = manager.create(CreateOptions::default()).unwrap();
    let batch = |from: usize, n: usize| {
        ScriptReply::tool_calls((from..from + n).map(|i| {
            (
                "notify",
                json!({"message": format!("note {i}")}).to_string(),
            )
        }))
    };
    // Two batches of three in ONE turn: five delivered, the sixth refused.
    llm.push_reply(batch(1, 3));
    llm.push_reply(batch(4, 3));
    llm.push_reply(ScriptReply::text("notified"));
    let mut sub = send(&ws, "tell the team");
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 6, "{results:?}");
    let refused: Vec<_> = results.iter().filter(|r| r.2).collect();
    assert_eq!(refused.len(), 1, "{results:?}");
    assert_eq!(
        refused[0].1,
        "Error: notification limit reached: 5 of 5 notifications already sent this turn"
    );
    assert_eq!(received.lock().unwrap().len(), 5);

    // The next turn has a fresh budget.
    llm.push_reply(batch(7, 1));
    llm.push_reply(ScriptReply::text("again"));
    let mut sub = send(&ws, "one more");
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(!results[0].2, "{results:?}");
    assert_eq!(received.lock().unwrap().len(), 6);
    let last: Value = serde_json::from_str(received.lock().unwrap().last().unwrap()).unwrap();
    assert_eq!(last["message"], "note 7");
}

// ---- the loaded tool set is journaled ----------------------------------------------------------

#[tokio::test]
async fn restoring_loaded_tools_is_not_journaled_again() {
    let h = Harness::start().await;
    let journal = Arc::new(Recording::default());
    let manager = Manager::new(h.manager.engine().clone(), ManagerConfig::default())
        .with_journal(journal.clone());
    let (ws, _): (WorkstreamHandle, _) = manager.create(CreateOptions::default()).unwrap();
    ws.restore_tools(ws.tool_intent(), ["mcp__db__query"]);
    let mut sub = send(&ws, "hi");
    read_turn(&mut sub).await;
    let config: BTreeMap<_, _> = journal.config.lock().unwrap().iter().cloned().collect();
    assert!(config.is_empty(), "{config:?}");
}

/// A server that streams no usage chunk (llama-cpp-python): the provider's tokenizer-free
/// estimate drives `status` (marked `usage_estimated`) and the compaction threshold.
#[tokio::test]
async fn without_a_usage_chunk_the_estimate_moves_the_gauge_and_compacts() {
    let h = small_window().await;
    let ws = h.workstream();
    let long = "word ".repeat(500); // ≈ 625 estimated prompt tokens > 1000 × 0.5
    h.llm.push_fault(Fault::RawSse(vec![
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"noted"}}]}"#.into(),
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.into(),
        "[DONE]".into(),
    ]));
    h.llm
        .push_reply(ScriptReply::text("## Summary\nthe user sent many words"));
    let mut sub = send(&ws, &long);
    let events = read_turn(&mut sub).await;
    let statuses: Vec<&turnstone_engine::StatusInfo> = events
        .iter()
        .filter_map(|e| match e {
            Event::Status(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(statuses.len(), 2, "{:?}", types(&events));
    let turn = statuses[0];
    assert!(turn.usage_estimated, "{turn:?}");
    assert!(turn.prompt_tokens > 500, "{turn:?}");
    assert_eq!(turn.completion_tokens, 2, "`noted`: 5 bytes");
    assert!(turn.pct > 50.0, "{turn:?}");
    assert!(
        infos(&events)
            .iter()
            .any(|m| m.contains("[Auto-compacting: prompt exceeds 50% of context window]")),
        "{:?}",
        infos(&events)
    );
    assert!(statuses[1].prompt_tokens < turn.prompt_tokens);
}
