//! Context management through the node: `/compact` and `/model` commands, auto-titles
//! (stored and announced as `ws_rename`), the per-workstream model in the dashboard and on
//! resume, the loaded tool set and Anthropic thinking blocks surviving a close/restart.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use turnstone_llm::{
    AnthropicConfig, AnthropicProvider, ModelEntry, ModelRegistry, ModelSection, ProviderKind,
    RegistryConfig,
};
use turnstone_testkit::fake_anthropic::fake_signature;
use turnstone_testkit::{FakeAnthropic, FakeLlm, ScriptReply};
use turnstone_tools::toolset::SearchMode;
use turnstone_tools::{
    OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolMeta, ToolOutput,
};

use super::*;

async fn command(t: &TestNode, ws_id: &str, command: &str) -> (u16, Value) {
    t.post(
        "/v1/api/command",
        json!({"ws_id": ws_id, "command": command}),
    )
    .await
}

async fn send_and_wait(t: &TestNode, events: &mut SseClient, ws_id: &str, message: &str) {
    let (status, body) = t
        .post("/v1/api/send", json!({"ws_id": ws_id, "message": message}))
        .await;
    assert_eq!(status, 200, "{body}");
    events.until("turn_complete").await;
}

/// Reads per-workstream events until an `info`/`error` whose message satisfies `matches`.
async fn until_message(events: &mut SseClient, matches: impl Fn(&str) -> bool) -> SseEvent {
    loop {
        let e = events.next().await;
        if matches!(e.kind(), "info" | "error") && matches(e.data["message"].as_str().unwrap_or(""))
        {
            return e;
        }
    }
}

fn dashboard_row<'a>(dashboard: &'a Value, ws_id: &str) -> &'a Value {
    dashboard["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == ws_id)
        .unwrap()
}

#[tokio::test]
async fn titles_and_compaction_are_stored_and_a_restart_resumes_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let spawn = || {
        TestNode::spawn(Spec {
            db: Some(db.clone()),
            engine: Some(Box::new(|c: &mut EngineConfig, _: &str| {
                c.auto_title = true
            })),
            ..Spec::default()
        })
    };
    let ws_id = {
        let t = spawn().await;
        let ws_id = t.default_ws.clone();
        let mut global = t.sse("/v1/api/events/global", None).await;
        let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;

        // Fewer than two messages: nothing to compact.
        let (status, body) = command(&t, &ws_id, "/compact").await;
        assert_eq!((status, body), (200, json!({"status": "ok"})));
        until_message(&mut events, |m| m == "Not enough messages to compact.").await;

        t.llm
            .push_reply(ScriptReply::text("Sure, src/main.rs it is."));
        t.llm
            .push_reply(ScriptReply::text("Editing The Main Module"));
        send_and_wait(&t, &mut events, &ws_id, "please edit src/main.rs").await;
        let rename = global.until("ws_rename").await.pop().unwrap();
        assert_eq!(
            rename.data,
            json!({"type": "ws_rename", "ws_id": ws_id, "name": "Editing The Main Module"})
        );
        let p = t.node.persistence.clone().unwrap();
        turnstone_testkit::assert_eventually!(
            p.store
                .get_workstream(&ws_id)
                .await
                .unwrap()
                .is_some_and(|w| w.title.as_deref() == Some("Editing The Main Module")),
            "title not stored"
        );
        let (_, dashboard) = t.get("/v1/api/dashboard", Some(FULL)).await;
        assert_eq!(
            dashboard_row(&dashboard, &ws_id)["title"],
            "Editing The Main Module"
        );

        t.llm
            .push_reply(ScriptReply::text("## Files\nsrc/main.rs: to be edited"));
        let (status, body) = command(&t, &ws_id, "/compact").await;
        assert_eq!((status, body), (200, json!({"status": "ok"})));
        let compacted = until_message(&mut events, |m| m.starts_with("[compacted: ~")).await;
        assert_eq!(compacted.kind(), "info");
        let block = events.next().await;
        assert!(
            block.data["message"]
                .as_str()
                .unwrap()
                .contains("src/main.rs: to be edited"),
            "{:?}",
            block.data
        );
        let history = t.node.workstream(&ws_id).unwrap().history();
        assert_eq!(history.len(), 2);
        assert_eq!(
            history[0].content.as_deref(),
            Some(turnstone_engine::SUMMARY_MARKER)
        );
        p.writer.flush().await.unwrap();
        ws_id
    };

    // Second life: the resumed conversation is the summary, not the full old history.
    let t = spawn().await;
    let (status, resumed) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["message_count"], 2);
    let live = t.node.workstream(&ws_id).unwrap();
    let history = live.history();
    assert_eq!(
        history[0].content.as_deref(),
        Some(turnstone_engine::SUMMARY_MARKER)
    );
    assert_eq!(
        history[1].content.as_deref(),
        Some("## Files\nsrc/main.rs: to be edited")
    );
    assert_eq!(
        resumed["name"], "Editing The Main Module",
        "named by its title"
    );
    // The old rows are still searchable.
    let p = t.node.persistence.clone().unwrap();
    let hits = p.store.search("please edit", 10).await.unwrap();
    assert!(!hits.is_empty());
}

fn registry_for(main_url: &str, alt_url: &str) -> ModelRegistry {
    let mut config = RegistryConfig::default();
    config.models.insert(
        "main".into(),
        ModelEntry::new(ProviderKind::Openai, main_url, "fake-model"),
    );
    let mut alt = ModelEntry::new(ProviderKind::Openai, alt_url, "alt-model");
    alt.context_window = Some(64_000);
    config.models.insert("alt".into(), alt);
    config.model = ModelSection {
        default: Some("main".into()),
        ..ModelSection::default()
    };
    ModelRegistry::from_config(&config).unwrap()
}

#[tokio::test]
async fn model_switches_per_workstream_and_survives_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let alt = FakeLlm::start().await;
    let alt_url = alt.base_url();
    let t = TestNode::spawn(Spec {
        db: Some(dir.path().join("node.db")),
        engine: Some(Box::new(move |c: &mut EngineConfig, main_url: &str| {
            c.model_alias = "main".into();
            c.models = Some(Arc::new(registry_for(main_url, &alt_url)));
        })),
        ..Spec::default()
    })
    .await;
    // The registry's aliases are what `/v1/api/models` and the model status list.
    let (status, models) = t.get("/v1/api/models", Some(READ)).await;
    assert_eq!(status, 200);
    assert_eq!(
        models,
        json!({"models": [
            {"alias": "alt", "model": "alt-model", "provider": "openai"},
            {"alias": "main", "model": "fake-model", "provider": "openai"}
        ]})
    );
    let (status, detail) = t.get("/v1/api/_internal/model-status", Some(READ)).await;
    assert_eq!(status, 200);
    assert_eq!(detail["models"]["alt"]["context_window"], 64_000);
    assert_eq!(detail["models"]["alt"]["source"], "config");
    assert_eq!(detail["models"]["main"]["model"], "fake-model");
    let (_, created) = t
        .post("/v1/api/workstreams/new", json!({"name": "switcher"}))
        .await;
    let ws_id = created["ws_id"].as_str().unwrap().to_string();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    assert_eq!(events.next().await.data["model"], "fake-model");

    command(&t, &ws_id, "/model").await;
    let shown = until_message(&mut events, |m| m.starts_with("Model:")).await;
    assert_eq!(
        shown.data["message"],
        "Model: main (fake-model)\nAvailable: alt, main"
    );
    command(&t, &ws_id, "/model nope").await;
    let refused = until_message(&mut events, |m| m.contains("nope")).await;
    assert_eq!(refused.kind(), "error");
    assert_eq!(
        refused.data["message"],
        "Unknown model alias 'nope'. Available: alt, main"
    );
    command(&t, &ws_id, "/model alt").await;
    until_message(&mut events, |m| {
        m == "Model switched to alt (alt-model); it applies from the next turn."
    })
    .await;

    send_and_wait(&t, &mut events, &ws_id, "hello alt").await;
    assert_eq!(alt.request_count(), 1);
    assert_eq!(alt.last_request().unwrap()["model"], "alt-model");
    assert_eq!(t.llm.request_count(), 0);
    let (_, dashboard) = t.get("/v1/api/dashboard", Some(FULL)).await;
    let row = dashboard_row(&dashboard, &ws_id);
    assert_eq!(
        (&row["model"], &row["model_alias"]),
        (&json!("alt-model"), &json!("alt"))
    );
    let other = dashboard_row(&dashboard, &t.default_ws);
    assert_eq!(other["model"], "fake-model");
    let p = t.node.persistence.clone().unwrap();
    turnstone_testkit::assert_eventually!(
        p.store
            .load_config(&ws_id)
            .await
            .unwrap()
            .get("model")
            .is_some_and(|m| m == "alt"),
        "model not stored"
    );

    // Closed and resumed: the stored alias is restored.
    let (status, _) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": ws_id}))
        .await;
    assert_eq!(status, 200);
    let (status, resumed) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(
        t.node.workstream(&ws_id).unwrap().model(),
        ("alt-model".to_string(), "alt".to_string())
    );

    // `workstreams/new` with a model alias uses the same mechanism; an unknown one is a 400.
    let (status, body) = t
        .post("/v1/api/workstreams/new", json!({"model": "nope"}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"],
        "Unknown model alias 'nope'. Available: alt, main"
    );
    let (status, body) = t
        .post("/v1/api/workstreams/new", json!({"model": "alt"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let ws = t.node.workstream(body["ws_id"].as_str().unwrap()).unwrap();
    assert_eq!(ws.model().1, "alt");
}

#[tokio::test]
async fn without_a_registry_model_lists_nothing_and_a_create_keeps_the_model() {
    let t = TestNode::start().await;
    let (_, models) = t.get("/v1/api/models", Some(READ)).await;
    assert_eq!(
        models,
        json!({"models": [{"alias": "default", "model": "fake-model", "provider": "openai"}]})
    );
    let (_, detail) = t.get("/v1/api/_internal/model-status", Some(READ)).await;
    assert_eq!(detail["models"]["default"]["source"], "");
    let mut events = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    command(&t, &t.default_ws, "/model").await;
    let shown = until_message(&mut events, |m| m.starts_with("Model:")).await;
    assert_eq!(
        shown.data["message"],
        "Model: fake-model\nNo model aliases are configured."
    );
    command(&t, &t.default_ws, "/model other").await;
    let refused = until_message(&mut events, |m| m.contains("stays")).await;
    assert_eq!(refused.kind(), "error");
    let (status, body) = t
        .post("/v1/api/workstreams/new", json!({"model": "whatever"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let ws = t.node.workstream(body["ws_id"].as_str().unwrap()).unwrap();
    assert_eq!(ws.model().0, "fake-model");
}

/// A tool that reports its call (stands in for an MCP tool).
struct Forecast(ToolDefinition);

#[async_trait]
impl Tool for Forecast {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }
    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        Ok(Prepared {
            args,
            header: "forecast".into(),
            preview: String::new(),
            needs_approval: false,
            approval_label: self.0.name.clone(),
        })
    }
    async fn execute(&self, p: &Prepared, _ctx: &ToolContext, _out: &dyn OutputSink) -> ToolOutput {
        ToolOutput::ok(format!("sunny {}", p.args))
    }
}

fn tool_names(request: &Value) -> Vec<String> {
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

#[tokio::test]
async fn tools_loaded_by_tool_search_are_stored_and_back_after_close_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestNode::spawn(Spec {
        db: Some(dir.path().join("node.db")),
        engine: Some(Box::new(|c: &mut EngineConfig, _: &str| {
            c.toolset.search = SearchMode::On;
        })),
        ..Spec::default()
    })
    .await;
    t.node
        .manager
        .engine()
        .registry()
        .replace_mcp_server(
            "wx",
            vec![Arc::new(Forecast(ToolDefinition {
                name: "mcp__wx__forecast".into(),
                description: "Weather forecast for a city.".into(),
                parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
                meta: ToolMeta::default(),
            })) as Arc<dyn Tool>],
        )
        .unwrap();
    let (_, created) = t.post("/v1/api/workstreams/new", json!({})).await;
    let ws_id = created["ws_id"].as_str().unwrap().to_string();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    t.llm.push_reply(ScriptReply::tool_calls([(
        "tool_search",
        r#"{"query": "weather forecast"}"#,
    )]));
    t.llm.push_reply(ScriptReply::text("found it"));
    send_and_wait(&t, &mut events, &ws_id, "find a weather tool").await;
    assert!(!tool_names(&t.llm.requests()[0]).contains(&"mcp__wx__forecast".to_string()));
    let p = t.node.persistence.clone().unwrap();
    turnstone_testkit::assert_eventually!(
        p.store
            .load_config(&ws_id)
            .await
            .unwrap()
            .get(turnstone_engine::TOOL_LOADED_CONFIG_KEY)
            .is_some_and(|v| v == r#"["mcp__wx__forecast"]"#),
        "loaded set not stored"
    );

    let (status, _) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": ws_id}))
        .await;
    assert_eq!(status, 200);
    let (status, body) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200, "{body}");
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    let before = t.llm.request_count();
    send_and_wait(&t, &mut events, &ws_id, "now the forecast").await;
    let first = &t.llm.requests()[before];
    assert!(
        tool_names(first).contains(&"mcp__wx__forecast".to_string()),
        "{:?}",
        tool_names(first)
    );
}

fn thinking_provider(fake: &FakeAnthropic) -> Arc<dyn turnstone_llm::Provider> {
    Arc::new(
        AnthropicProvider::new(AnthropicConfig {
            thinking_budget: Some(2048),
            ..AnthropicConfig::new(fake.base_url())
        })
        .unwrap(),
    )
}

#[tokio::test]
async fn thinking_blocks_are_persisted_and_replayed_after_a_restart() {
    let fake = FakeAnthropic::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let spawn = || {
        TestNode::spawn(Spec {
            db: Some(db.clone()),
            // A fresh provider each life: nothing is remembered in memory.
            provider: Some(thinking_provider(&fake)),
            engine: Some(Box::new(|c: &mut EngineConfig, _: &str| {
                c.skip_permissions = true;
            })),
            ..Spec::default()
        })
    };
    let ws_id = {
        let t = spawn().await;
        let mut events = t
            .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
            .await;
        send_and_wait(
            &t,
            &mut events,
            &t.default_ws,
            "THINK: check the directory first\nTOOL: echo hi",
        )
        .await;
        t.flush_store().await;
        t.default_ws.clone()
    };

    let t = spawn().await;
    let (status, body) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200, "{body}");
    let history = t.node.workstream(&ws_id).unwrap().history();
    let data = history[1]
        .provider_data
        .clone()
        .expect("restored from the store");
    assert_eq!(
        data.thinking(),
        [(
            "check the directory first",
            fake_signature("check the directory first").as_str()
        )]
    );
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    send_and_wait(&t, &mut events, &ws_id, "next").await;
    let request = fake.last_request().unwrap();
    assert_eq!(request["messages"][1]["role"], "assistant");
    assert_eq!(
        request["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "check the directory first",
               "signature": fake_signature("check the directory first")})
    );
    assert_eq!(request["thinking"]["type"], "enabled");
}
