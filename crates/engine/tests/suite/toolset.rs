//! Tool resolution in real turns: the per-turn freeze of the tool array, deferred tools and
//! `tool_search`, tool intent, replay-only aliases, exact unknown-name errors, and the
//! recorded tool payload (seeds 002 and 004), against the fake LLM over HTTP.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use turnstone_engine::{CreateOptions, Engine, EngineConfig, Event, Manager, ManagerConfig};
use turnstone_llm::openai::{OpenAiConfig, OpenAiProvider};
use turnstone_llm::{CircuitBreaker, Resilient, RetryPolicy};
use turnstone_testkit::{FakeLlm, ScriptReply};
use turnstone_tools::toolset::{
    CATALOG_HEADER, Residency, SearchMode, ToolIntent, ToolsetConfig, sha256_hex,
};
use turnstone_tools::{
    OutputSink, Prepared, Provenance, Tool, ToolContext, ToolDefinition, ToolMeta, ToolOutput,
    ToolRegistry,
};

use super::harness::{read_turn, read_until, send, tool_names, tool_results};

struct Fake {
    def: ToolDefinition,
    calls: Arc<Mutex<Vec<Value>>>,
}

#[async_trait]
impl Tool for Fake {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }
    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        Ok(Prepared {
            args,
            header: format!("⚙ {}", self.def.name),
            preview: String::new(),
            needs_approval: false,
            approval_label: self.def.name.clone(),
        })
    }
    async fn execute(&self, p: &Prepared, _ctx: &ToolContext, _out: &dyn OutputSink) -> ToolOutput {
        self.calls.lock().unwrap().push(p.args.clone());
        ToolOutput::ok(format!("{} ran with {}", self.def.name, p.args))
    }
}

fn fake(name: &str, description: &str, calls: &Arc<Mutex<Vec<Value>>>) -> Arc<dyn Tool> {
    Arc::new(Fake {
        def: ToolDefinition {
            name: name.into(),
            description: description.into(),
            parameters: json!({
                "type": "object",
                "properties": {"q": {"type": "string"}},
            }),
            meta: ToolMeta {
                primary_key: Some("q".into()),
                ..ToolMeta::default()
            },
        },
        calls: calls.clone(),
    })
}

struct Setup {
    llm: FakeLlm,
    registry: Arc<ToolRegistry>,
    manager: Manager,
    calls: Arc<Mutex<Vec<Value>>>,
    _dir: tempfile::TempDir,
}

/// Built-ins + `memory` + three MCP tools, tool search on, a system prompt.
async fn setup(tweak: impl FnOnce(&mut EngineConfig)) -> Setup {
    let calls: Arc<Mutex<Vec<Value>>> = Arc::default();
    let registry = Arc::new(ToolRegistry::with_builtins().unwrap());
    registry
        .add(
            fake("memory", "Structured persistent memory.", &calls),
            Provenance::Builtin,
        )
        .unwrap();
    registry
        .replace_mcp_server(
            "wx",
            vec![
                fake("mcp__wx__forecast", "Weather forecast for a city.", &calls),
                fake(
                    "mcp__wx__alerts",
                    "Severe weather alerts for a region.",
                    &calls,
                ),
            ],
        )
        .unwrap();
    registry
        .replace_mcp_server(
            "db",
            vec![fake("mcp__db__query", "Run a read-only SQL query.", &calls)],
        )
        .unwrap();
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    let provider = OpenAiProvider::new(OpenAiConfig::new(llm.base_url())).unwrap();
    let resilient = Resilient::new(
        Arc::new(provider),
        RetryPolicy {
            max_retries: 1,
            delays: vec![Duration::from_millis(10)],
            max_retry_after: Duration::from_millis(50),
        },
        Arc::new(CircuitBreaker::default()),
    );
    let mut config = EngineConfig {
        model: "fake-model".into(),
        cwd: dir.path().to_path_buf(),
        system_prompt: Some("You are a test.".into()),
        toolset: ToolsetConfig {
            search: SearchMode::On,
            ..ToolsetConfig::default()
        },
        ..EngineConfig::default()
    };
    tweak(&mut config);
    let engine = Engine::new(resilient, registry.clone(), config).await;
    let manager = Manager::new(engine, ManagerConfig::default());
    Setup {
        llm,
        registry,
        manager,
        calls,
        _dir: dir,
    }
}

fn system_text(request: &Value) -> Option<String> {
    let first = &request["messages"][0];
    (first["role"] == "system").then(|| first["content"].as_str().unwrap().to_string())
}

fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

#[tokio::test]
async fn tool_search_moves_a_tool_into_the_array_only_at_the_next_turn() {
    let s = setup(|_| {}).await;
    let (ws, _) = s.manager.create(CreateOptions::default()).unwrap();
    s.llm.push_reply(ScriptReply::tool_calls([(
        "tool_search",
        r#"{"query": "weather forecast"}"#,
    )]));
    // Same turn: the just-loaded tool and a deferred tool never loaded both dispatch.
    s.llm.push_reply(ScriptReply::tool_calls([
        ("mcp__wx__forecast", r#"{"q": "Paris"}"#),
        ("mcp__db__query", r#"{"q": "select 1"}"#),
    ]));
    s.llm.push_reply(ScriptReply::text("turn one done"));
    let mut sub = send(&ws, "find the weather");
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0].0, "tool_search");
    assert!(!results[0].2);
    assert!(results[0].1.contains("\"parameters\""), "{}", results[0].1);
    assert!(results[0].1.contains("mcp__wx__forecast"));
    assert_eq!(results[1].1, r#"mcp__wx__forecast ran with {"q":"Paris"}"#);
    assert!(!results[1].2 && !results[2].2, "{results:?}");
    // BM25 loads every match (up to the maximum): "weather" also finds the alerts tool.
    assert_eq!(ws.loaded_tools(), ["mcp__wx__alerts", "mcp__wx__forecast"]);

    s.llm.push_reply(ScriptReply::text("turn two done"));
    let mut sub = send(&ws, "again");
    read_turn(&mut sub).await;

    let requests = s.llm.requests();
    assert_eq!(requests.len(), 4);
    // Within turn one the array and the system prompt (catalog) are byte-identical.
    for r in &requests[1..3] {
        assert_eq!(r["tools"], requests[0]["tools"]);
        assert_eq!(system_text(r), system_text(&requests[0]));
    }
    let first = tool_names(&requests[0]);
    assert!(!has(&first, "mcp__wx__forecast") && !has(&first, "mcp__db__query"));
    assert_eq!(first.last().unwrap(), "tool_search", "{first:?}");
    let catalog = system_text(&requests[0]).unwrap();
    assert!(catalog.starts_with("You are a test.\n\n"), "{catalog}");
    assert!(catalog.contains(CATALOG_HEADER));
    assert!(catalog.contains("\nmcp__wx__forecast\n"), "{catalog}");
    assert!(
        !catalog.contains("Weather forecast"),
        "names only: {catalog}"
    );
    // Turn two: the loaded tool is in the array and out of the catalog.
    let second = tool_names(&requests[3]);
    assert!(has(&second, "mcp__wx__forecast"), "{second:?}");
    assert!(!has(&second, "mcp__db__query"));
    assert_eq!(second.last().unwrap(), "tool_search");
    let catalog = system_text(&requests[3]).unwrap();
    assert!(!catalog.contains("mcp__wx__forecast"), "{catalog}");
    assert!(catalog.contains("\nmcp__db__query\n"));

    // The recorded payload is the last request's exact array.
    let prepared = ws.prepared_tools().unwrap();
    assert_eq!((prepared.turn, prepared.step), (2, 1));
    let bytes = serde_json::to_vec(&requests[3]["tools"]).unwrap();
    assert_eq!(prepared.payload.bytes, bytes.len());
    assert_eq!(prepared.payload.sha256, sha256_hex(&bytes));
    let forecast = prepared
        .payload
        .tools
        .iter()
        .find(|t| t.name == "mcp__wx__forecast")
        .unwrap();
    assert_eq!(forecast.residency, Residency::Loaded);
    assert_eq!(forecast.provenance.to_string(), "mcp:wx");
    assert_eq!(
        s.calls.lock().unwrap().clone(),
        [json!({"q": "Paris"}), json!({"q": "select 1"})]
    );
}

#[tokio::test]
async fn the_payload_is_recorded_per_request_and_absent_before_the_first() {
    let s = setup(|c| c.toolset.search = SearchMode::Auto).await;
    let (ws, _) = s.manager.create(CreateOptions::default()).unwrap();
    assert!(ws.prepared_tools().is_none(), "no request prepared yet");
    // The next surface is available for previews without a turn.
    assert!(
        ws.next_tool_surface()
            .array_names()
            .contains(&"bash".to_string())
    );
    let mut sub = send(&ws, r#"CALL:read_file {"path": "missing.txt"}"#);
    read_turn(&mut sub).await;
    let prepared = ws.prepared_tools().unwrap();
    assert_eq!((prepared.turn, prepared.step), (1, 2));
    let last = s.llm.last_request().unwrap();
    let bytes = serde_json::to_vec(&last["tools"]).unwrap();
    assert_eq!(prepared.payload.sha256, sha256_hex(&bytes));
    assert_eq!(prepared.payload.names(), tool_names(&last));
    // `memory`, added after the built-ins, sits among them by name; MCP tools come last.
    assert_eq!(
        tool_names(&last),
        [
            "bash",
            "diff_file",
            "edit_file",
            "git",
            "man",
            "math",
            "memory",
            "read_file",
            "search",
            "write_file",
            "mcp__db__query",
            "mcp__wx__alerts",
            "mcp__wx__forecast"
        ]
    );
    // 13 tools < threshold 20 with `auto`: everything resident, no tool_search, no catalog.
    assert!(!prepared.payload.search_active);
    assert_eq!(prepared.payload.tool_count, 13);
    assert_eq!(system_text(&last).unwrap(), "You are a test.");
    let json = serde_json::to_value(&prepared).unwrap();
    assert_eq!(json["turn"], 1);
    assert_eq!(json["step"], 2);
    assert_eq!(json["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(json["tools"][0]["provenance"], "builtin");
    assert!(
        !ws.history().iter().any(|m| m
            .content
            .as_deref()
            .is_some_and(|c| c.contains(&prepared.payload.sha256))),
        "the payload record never enters the conversation"
    );
}

#[tokio::test]
async fn a_new_tool_reaches_an_old_workstream_at_its_next_turn_not_mid_turn() {
    let s = setup(|_| {}).await;
    let (ws, _) = s.manager.create(CreateOptions::default()).unwrap();
    // bash needs approval: the turn waits, and the registry changes meanwhile.
    let mut sub = send(&ws, r#"CALL:bash {"command": "echo hi"}"#);
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    s.registry
        .add(
            fake("send_message", "Message another workstream.", &s.calls),
            Provenance::Builtin,
        )
        .unwrap();
    ws.approve(true, None, false);
    read_turn(&mut sub).await;
    let requests = s.llm.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1]["tools"], requests[0]["tools"],
        "frozen for the turn"
    );
    assert!(!has(&tool_names(&requests[1]), "send_message"));

    let mut sub = send(&ws, "hello");
    read_turn(&mut sub).await;
    let names = tool_names(&s.llm.last_request().unwrap());
    assert!(has(&names, "send_message"), "{names:?}");
    // Built-ins first, then the added tool, MCP tools deferred, tool_search last.
    assert_eq!(names[0], "bash");
    assert_eq!(names.last().unwrap(), "tool_search");
    // An MCP server's tools going away follow too.
    assert_eq!(s.registry.remove_mcp_server("wx"), 2);
    let mut sub = send(&ws, "hello again");
    read_turn(&mut sub).await;
    let catalog = system_text(&s.llm.last_request().unwrap()).unwrap();
    assert!(!catalog.contains("mcp__wx__"), "{catalog}");
}

#[tokio::test]
async fn the_intent_decides_the_array_and_is_checked() {
    let s = setup(|_| {}).await;
    let (ws, _) = s.manager.create(CreateOptions::default()).unwrap();
    ws.restore_tools(
        ToolIntent::only(["read_file", "search"]),
        Vec::<String>::new(),
    );
    let mut sub = send(&ws, "hi");
    read_turn(&mut sub).await;
    let last = s.llm.last_request().unwrap();
    assert_eq!(tool_names(&last), ["read_file", "search"]);
    assert_eq!(system_text(&last).unwrap(), "You are a test.", "no catalog");

    // A change through the client API: dict form, validated, effective next turn.
    let err = ws
        .update_tool_intent(&json!({"toolset": "nope"}))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("unknown toolset 'nope'"),
        "{err}"
    );
    assert_eq!(ws.tool_intent(), ToolIntent::only(["read_file", "search"]));
    let next = ws
        .update_tool_intent(&json!({"only": null, "toolset": "readonly"}))
        .unwrap();
    assert_eq!(next.to_json(), r#"{"toolset":"readonly"}"#);
    let mut sub = send(&ws, "hi");
    read_turn(&mut sub).await;
    assert_eq!(
        tool_names(&s.llm.last_request().unwrap()),
        ["diff_file", "git", "man", "math", "read_file", "search"]
    );

    // A call to a tool the intent leaves out is refused, clearly.
    let mut sub = send(&ws, r#"CALL:bash {"command": "echo hi"}"#);
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    assert_eq!(
        results,
        [(
            "bash".to_string(),
            "tool 'bash' is not enabled for this workstream".to_string(),
            true
        )]
    );

    // All off: the request carries no tools at all.
    ws.set_tool_intent(ToolIntent::none()).unwrap();
    let mut sub = send(&ws, "hi");
    read_turn(&mut sub).await;
    let last = s.llm.last_request().unwrap();
    assert!(tool_names(&last).is_empty(), "{last}");
    assert_eq!(ws.prepared_tools().unwrap().payload.tool_count, 0);
}

#[tokio::test]
async fn workstreams_with_different_intents_each_get_their_own_array_turn_after_turn() {
    // The engine keeps what each distinct surface froze and reuses it: alternating turns
    // of two intents (and a third workstream sharing the first's) must never see the
    // other's array, and equal surfaces share one payload.
    let s = setup(|_| {}).await;
    let (a, _) = s.manager.create(CreateOptions::default()).unwrap();
    let (b, _) = s.manager.create(CreateOptions::default()).unwrap();
    let (c, _) = s.manager.create(CreateOptions::default()).unwrap();
    for ws in [&a, &c] {
        ws.restore_tools(
            ToolIntent::only(["read_file", "search"]),
            Vec::<String>::new(),
        );
    }
    b.restore_tools(ToolIntent::only(["bash"]), Vec::<String>::new());
    for round in 0..3 {
        for (ws, want) in [
            (&a, &["read_file", "search"][..]),
            (&b, &["bash"][..]),
            (&c, &["read_file", "search"][..]),
        ] {
            let mut sub = send(ws, &format!("round {round}"));
            read_turn(&mut sub).await;
            assert_eq!(
                tool_names(&s.llm.last_request().unwrap()),
                want,
                "round {round}"
            );
        }
    }
    let (pa, pb, pc) = (
        a.prepared_tools().unwrap().payload,
        b.prepared_tools().unwrap().payload,
        c.prepared_tools().unwrap().payload,
    );
    assert!(Arc::ptr_eq(&pa, &pc), "equal surfaces share one payload");
    assert!(!Arc::ptr_eq(&pa, &pb));
    assert_eq!((pa.tool_count, pb.tool_count), (2, 1));
    // A tool loaded by `tool_search` changes the surface of that workstream only.
    a.set_tool_intent(ToolIntent::default()).unwrap();
    c.set_tool_intent(ToolIntent::default()).unwrap();
    let mut sub = send(&a, r#"CALL:tool_search {"query": "weather forecast"}"#);
    read_turn(&mut sub).await;
    let mut sub = send(&a, "next");
    read_turn(&mut sub).await;
    assert!(has(
        &tool_names(&s.llm.last_request().unwrap()),
        "mcp__wx__forecast"
    ));
    let mut sub = send(&c, "next");
    read_turn(&mut sub).await;
    assert!(!has(
        &tool_names(&s.llm.last_request().unwrap()),
        "mcp__wx__forecast"
    ));
}

#[tokio::test]
async fn legacy_aliases_replay_and_unknown_names_fail_exactly() {
    let s = setup(|_| {}).await;
    let (ws, _) = s.manager.create(CreateOptions::default()).unwrap();
    s.llm.push_reply(ScriptReply::tool_calls([
        ("remember", r#"{"key": "editor", "value": "vim"}"#),
        ("forget", "editor"),
        ("frobnicate", "{}"),
        ("Memory", "{}"),
        ("task", r#"{"prompt": "x"}"#),
    ]));
    s.llm.push_reply(ScriptReply::text("ok"));
    let mut sub = send(&ws, "replay");
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    let by_name = |n: &str| results.iter().find(|r| r.0 == n).unwrap().clone();
    assert!(!by_name("remember").2, "{results:?}");
    assert!(by_name("remember").1.starts_with("memory ran with"));
    assert!(
        !by_name("forget").2,
        "a bare string maps to the legacy primary key"
    );
    for unknown in ["frobnicate", "Memory", "task"] {
        let r = by_name(unknown);
        assert_eq!(r.1, format!("tool '{unknown}' is not registered"));
        assert!(r.2);
    }
    assert_eq!(
        s.calls.lock().unwrap().clone(),
        [
            json!({"action": "save", "name": "editor", "content": "vim", "description": "vim"}),
            json!({"action": "delete", "name": "editor"}),
        ]
    );
    // The conversation stays acceptable to a provider, and aliases are never advertised.
    super::harness::assert_provider_acceptable(&ws.history());
    for r in s.llm.requests() {
        let names = tool_names(&r);
        for legacy in ["remember", "forget", "task", "plan"] {
            assert!(!has(&names, legacy));
            assert!(
                !system_text(&r)
                    .unwrap_or_default()
                    .contains(&format!("\n{legacy}\n"))
            );
        }
    }
}

#[tokio::test]
async fn default_settings_keep_the_plain_builtin_array() {
    let s = setup(|c| {
        c.toolset = ToolsetConfig::default();
        c.system_prompt = None;
    })
    .await;
    s.registry.remove("memory");
    s.registry.remove_mcp_server("wx");
    s.registry.remove_mcp_server("db");
    let (ws, _) = s.manager.create(CreateOptions::default()).unwrap();
    let mut sub = send(&ws, "hi");
    read_turn(&mut sub).await;
    let last = s.llm.last_request().unwrap();
    assert_eq!(
        tool_names(&last),
        [
            "bash",
            "diff_file",
            "edit_file",
            "git",
            "man",
            "math",
            "read_file",
            "search",
            "write_file"
        ]
    );
    assert_eq!(
        last["messages"][0]["role"], "user",
        "no system message added"
    );
}

#[tokio::test]
async fn a_resumed_session_keeps_its_loaded_tools_and_a_stale_preset_falls_back() {
    let s = setup(|_| {}).await;
    let (ws, _) = s.manager.create(CreateOptions::default()).unwrap();
    // As stored by an older run: a preset since removed from the configuration, one tool
    // loaded by tool_search.
    let stored = ToolIntent::from_json(r#"{"toolset":"retired"}"#).unwrap();
    assert!(
        ws.set_tool_intent(stored.clone()).is_err(),
        "a client may not pick it"
    );
    ws.restore_tools(stored.clone(), ["mcp__db__query"]);
    assert_eq!(ws.tool_intent(), stored);
    let mut sub = send(&ws, "hi");
    read_turn(&mut sub).await;
    let last = s.llm.last_request().unwrap();
    let names = tool_names(&last);
    assert!(
        has(&names, "mcp__db__query"),
        "loaded before the restart: {names:?}"
    );
    assert!(has(&names, "bash"), "default set: {names:?}");
    assert!(!has(&names, "mcp__wx__forecast"));
    assert_eq!(ws.loaded_tools(), ["mcp__db__query"]);
}
