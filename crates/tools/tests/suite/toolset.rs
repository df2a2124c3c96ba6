//! Tool sets by intent, deferred loading, `tool_search`, replay-only aliases and the payload
//! record (seeds 002 §6 / §7.6 and 004).

use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::{Value, json};
use turnstone_tools::toolset::{
    CATALOG_HEADER, LoadedTools, Residency, ResolveError, SearchMode, ToolIntent, ToolSurface,
    ToolsetConfig, expand, sha256_hex,
};
use turnstone_tools::{
    NoOutput, OutputSink, Prepared, Provenance, RegistryError, Tool, ToolContext, ToolDefinition,
    ToolMeta, ToolOutput, ToolRegistry,
};

/// A tool that records the arguments it ran with and echoes them.
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
        self.calls.lock().push(p.args.clone());
        ToolOutput::ok(format!("{} ran with {}", self.def.name, p.args))
    }
}

fn fake_with(name: &str, description: &str, calls: Arc<Mutex<Vec<Value>>>) -> Arc<dyn Tool> {
    Arc::new(Fake {
        def: ToolDefinition {
            name: name.into(),
            description: description.into(),
            parameters: json!({
                "type": "object",
                "properties": {"q": {"type": "string", "description": format!("input of {name}")}},
                "required": ["q"]
            }),
            meta: ToolMeta {
                primary_key: Some("q".into()),
                ..ToolMeta::default()
            },
        },
        calls,
    })
}

fn fake(name: &str, description: &str) -> Arc<dyn Tool> {
    fake_with(name, description, Arc::default())
}

fn mcp(server: &str, tool: &str, description: &str) -> Arc<dyn Tool> {
    fake(&format!("mcp__{server}__{tool}"), description)
}

/// Built-ins plus three MCP servers' tools.
fn registry_with_mcp() -> ToolRegistry {
    let reg = ToolRegistry::with_builtins().unwrap();
    reg.replace_mcp_server(
        "wx",
        vec![
            mcp(
                "wx",
                "forecast",
                "Weather forecast for a city for the next days.",
            ),
            mcp("wx", "alerts", "Severe weather alerts for a region."),
        ],
    )
    .unwrap();
    reg.replace_mcp_server(
        "db",
        vec![mcp(
            "db",
            "query",
            "Run a read-only SQL query against the postgres database.",
        )],
    )
    .unwrap();
    reg
}

fn search_on() -> ToolsetConfig {
    ToolsetConfig {
        search: SearchMode::On,
        ..ToolsetConfig::default()
    }
}

fn surface(
    reg: &ToolRegistry,
    intent: &ToolIntent,
    config: &ToolsetConfig,
    loaded: &LoadedTools,
) -> ToolSurface {
    ToolSurface::build(intent, reg.snapshot(), config, loaded)
}

fn resolve_err(s: &ToolSurface, name: &str) -> ResolveError {
    match s.resolve(name) {
        Ok(_) => panic!("'{name}' resolved"),
        Err(e) => e,
    }
}

fn wire_bytes(s: &ToolSurface) -> Vec<u8> {
    serde_json::to_vec(&s.wire_json()).unwrap()
}

// ---- deterministic expansion --------------------------------------------------------

#[test]
fn the_same_intent_expands_byte_identically() {
    let reg = registry_with_mcp();
    let config = search_on();
    let loaded = LoadedTools::new();
    for intent in [
        ToolIntent::all(),
        ToolIntent::toolset("readonly").with_web_search(true),
        ToolIntent::only(["search", "bash", "bash", "read_file"]),
        ToolIntent::all().with_disabled("bash"),
    ] {
        let a = surface(&reg, &intent, &config, &loaded);
        let b = surface(&reg, &intent, &config, &loaded);
        assert_eq!(wire_bytes(&a), wire_bytes(&b), "{intent:?}");
        assert_eq!(a.payload().sha256, b.payload().sha256);
        assert_eq!(a.catalog_text(), b.catalog_text());
        let names = a.array_names();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "each tool once: {names:?}");
    }
    // A hand-picked list keeps registry order, whatever order it was written in.
    let picked = surface(
        &reg,
        &ToolIntent::only(["search", "bash", "bash", "read_file"]),
        &config,
        &loaded,
    );
    assert_eq!(picked.array_names(), ["bash", "read_file", "search"]);
}

#[test]
fn mcp_registration_order_does_not_change_the_array() {
    let config = ToolsetConfig::default();
    let loaded = LoadedTools::new();
    let a = ToolRegistry::with_builtins().unwrap();
    a.replace_mcp_server("zeta", vec![mcp("zeta", "b", "B."), mcp("zeta", "a", "A.")])
        .unwrap();
    a.replace_mcp_server("alpha", vec![mcp("alpha", "x", "X.")])
        .unwrap();
    let b = ToolRegistry::with_builtins().unwrap();
    b.replace_mcp_server("alpha", vec![mcp("alpha", "x", "X.")])
        .unwrap();
    b.replace_mcp_server("zeta", vec![mcp("zeta", "a", "A."), mcp("zeta", "b", "B.")])
        .unwrap();
    // A refresh (replace) of one server puts its tools back in the same place.
    b.replace_mcp_server("alpha", vec![mcp("alpha", "x", "X.")])
        .unwrap();
    let sa = surface(&a, &ToolIntent::all(), &config, &loaded);
    let sb = surface(&b, &ToolIntent::all(), &config, &loaded);
    assert_eq!(wire_bytes(&sa), wire_bytes(&sb));
    assert_eq!(
        &sa.array_names()[9..],
        ["mcp__alpha__x", "mcp__zeta__a", "mcp__zeta__b"]
    );
}

// ---- intent round trip and writes -----------------------------------------------------

#[test]
fn intent_round_trips_and_old_records_read_back_as_none() {
    let stored = ToolIntent::all().with_web_search(true).to_json();
    assert_eq!(stored, r#"{"web_search":true}"#);
    assert_eq!(
        ToolIntent::from_json(&stored).unwrap().web_search,
        Some(true)
    );

    // Records written before a field existed read back with that field as none.
    let old = ToolIntent::from_json(r#"{"enabled":true}"#).unwrap();
    assert_eq!(old.web_search, None);
    assert_eq!(old.toolset, None);
    assert_eq!(old.enabled, Some(true));
    assert_eq!(ToolIntent::from_json("").unwrap(), ToolIntent::default());
    assert_eq!(
        ToolIntent::from_json("null").unwrap(),
        ToolIntent::default()
    );
    assert_eq!(ToolIntent::from_json("{}").unwrap(), ToolIntent::default());
    // Keys written by a newer version are ignored, not fatal.
    assert_eq!(
        ToolIntent::from_json(r#"{"toolset":"readonly","future_key":[1,2]}"#).unwrap(),
        ToolIntent::toolset("readonly")
    );
    // Legacy shapes: booleans and a hand-picked list.
    assert_eq!(ToolIntent::from_json("false").unwrap(), ToolIntent::none());
    assert_eq!(ToolIntent::from_json("true").unwrap(), ToolIntent::all());
    assert_eq!(
        ToolIntent::from_json(r#"["web_search"]"#).unwrap(),
        ToolIntent::only(["web_search"])
    );
    assert_eq!(
        ToolIntent::from_json("[]").unwrap(),
        ToolIntent::only(Vec::<String>::new())
    );

    let full = ToolIntent {
        enabled: Some(true),
        toolset: Some("readonly".into()),
        disabled: vec!["bash".into()],
        allowed: Some(vec!["@builtin".into()]),
        web_search: Some(false),
        only: None,
        plan: Some(true),
        persona: Some("reviewer".into()),
    };
    assert_eq!(ToolIntent::from_json(&full.to_json()).unwrap(), full);
    assert_eq!(ToolIntent::default().to_json(), "{}");
}

#[test]
fn bad_intents_are_clear_errors() {
    for bad in [
        "{",
        "42",
        r#"{"enabled":"yes"}"#,
        r#"{"disabled":[""]}"#,
        r#"{"only":[1]}"#,
    ] {
        let err = ToolIntent::from_json(bad).unwrap_err();
        assert!(
            err.to_string().starts_with("invalid tool intent"),
            "{bad}: {err}"
        );
    }
    let config = ToolsetConfig::default();
    let err = config.validate(&ToolIntent::toolset("nope")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown toolset 'nope' (known: full, readonly, task_agent)"
    );
    assert!(config.validate(&ToolIntent::toolset("readonly")).is_ok());
    let err = ToolIntent::default()
        .merged(&json!({"colour": "red"}))
        .unwrap_err();
    assert!(err.to_string().contains("unknown key 'colour'"), "{err}");
    assert!(ToolIntent::default().merged(&json!([1])).is_err());
    let long = "x".repeat(300);
    assert!(
        ToolIntent::default()
            .merged(&json!({"disabled": [long]}))
            .is_err()
    );
}

#[test]
fn writes_never_materialize_a_list() {
    let reg = registry_with_mcp();
    let names = reg.names();
    // A client enables web search, then picks a preset, then disables one tool.
    let mut intent = ToolIntent::default();
    for change in [
        json!({"web_search": true}),
        json!({"toolset": "readonly"}),
        json!({"disabled": ["search"]}),
        json!({"enabled": true}),
    ] {
        intent = intent.merged(&change).unwrap();
        let stored: Value = serde_json::from_str(&intent.to_json()).unwrap();
        assert!(stored.is_object(), "stored intent is a dict: {stored}");
        assert!(
            stored.get("only").is_none(),
            "no hand-picked list: {stored}"
        );
        let listed: Vec<&str> = stored
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            listed.len() <= 1,
            "only what the user changed is stored: {stored}"
        );
        assert!(listed.len() < names.len());
    }
    assert_eq!(
        intent.to_json(),
        r#"{"enabled":true,"toolset":"readonly","disabled":["search"],"web_search":true}"#
    );
    // null clears a key.
    let cleared = intent
        .merged(&json!({"toolset": null, "disabled": null}))
        .unwrap();
    assert_eq!(cleared.to_json(), r#"{"enabled":true,"web_search":true}"#);
}

// ---- expansion semantics ---------------------------------------------------------------

#[test]
fn dict_intent_semantics() {
    let reg = registry_with_mcp();
    reg.add(fake("web_search", "Search the web."), Provenance::Builtin)
        .unwrap();
    let snap = reg.snapshot();
    let config = ToolsetConfig {
        opt_in: vec!["web_search".into()],
        ..ToolsetConfig::default()
    };
    // Off → nothing.
    assert!(expand(&ToolIntent::none(), &snap, &config).tools.is_empty());
    // Default: everything except opt-in tools; web_search layers it in.
    let default = expand(&ToolIntent::all(), &snap, &config).names();
    assert!(!default.contains(&"web_search".to_string()));
    assert!(default.contains(&"mcp__db__query".to_string()));
    let with_ws = expand(&ToolIntent::all().with_web_search(true), &snap, &config).names();
    assert!(with_ws.contains(&"web_search".to_string()));
    assert_eq!(with_ws.len(), default.len() + 1);
    // A preset without web_search + the toggle.
    let ro = expand(
        &ToolIntent::toolset("readonly").with_web_search(true),
        &snap,
        &config,
    );
    assert_eq!(
        ro.names(),
        [
            "diff_file",
            "git",
            "man",
            "math",
            "read_file",
            "search",
            "web_search"
        ]
    );
    // web_search=false takes it out even when the preset has it.
    let full = expand(
        &ToolIntent::toolset("full").with_web_search(false),
        &snap,
        &config,
    )
    .names();
    assert!(!full.contains(&"web_search".to_string()));
    assert!(full.contains(&"bash".to_string()));
    // allowed narrows, disabled removes (patterns).
    let narrowed = ToolIntent {
        allowed: Some(vec!["@mcp".into(), "read_file".into()]),
        disabled: vec!["mcp__wx__*".into()],
        ..ToolIntent::default()
    };
    assert_eq!(
        expand(&narrowed, &snap, &config).names(),
        ["read_file", "mcp__db__query"]
    );
    let by_server = ToolIntent::only(["@mcp:wx"]);
    assert_eq!(
        expand(&by_server, &snap, &config).names(),
        ["mcp__wx__alerts", "mcp__wx__forecast"]
    );
    // Hand-picked names that are not registered are skipped; the list never grows.
    let picked = expand(&ToolIntent::only(["bash", "gone_tool"]), &snap, &config);
    assert_eq!(picked.names(), ["bash"]);
    assert!(picked.hand_picked && !picked.search_allowed);
    // An unknown preset (configuration changed) falls back to the default set, with a warning.
    let unknown = expand(&ToolIntent::toolset("removed"), &snap, &config);
    assert_eq!(unknown.names(), default);
    assert_eq!(unknown.warnings.len(), 1);
    // Configured presets replace built-ins of the same name.
    let mut custom = config.clone();
    custom
        .presets
        .insert("readonly".into(), vec!["read_file".into()]);
    assert_eq!(
        expand(&ToolIntent::toolset("readonly"), &snap, &custom).names(),
        ["read_file"]
    );
}

#[test]
fn a_tool_added_to_the_registry_reaches_old_intents() {
    let reg = ToolRegistry::with_builtins().unwrap();
    let intent = ToolIntent::from_json(r#"{"enabled":true}"#).unwrap(); // stored long ago
    let config = ToolsetConfig::default();
    let loaded = LoadedTools::new();
    let before = surface(&reg, &intent, &config, &loaded);
    let generation = reg.generation();
    let old_snapshot = reg.snapshot();
    reg.add(
        fake("send_message", "Message another workstream."),
        Provenance::Builtin,
    )
    .unwrap();
    reg.add(
        mcp("gh", "list_agents", "List agents."),
        Provenance::Mcp("gh".into()),
    )
    .unwrap();
    assert!(reg.generation() > generation);
    let after = surface(&reg, &intent, &config, &loaded);
    assert!(!before.array_names().contains(&"send_message".to_string()));
    assert!(after.array_names().contains(&"send_message".to_string()));
    assert!(
        after
            .array_names()
            .contains(&"mcp__gh__list_agents".to_string())
    );
    // A snapshot taken earlier (a running turn) does not move.
    assert_eq!(old_snapshot.len(), 9);
    assert_eq!(old_snapshot.generation(), generation);
    // Removal is followed too.
    assert!(reg.remove("send_message"));
    assert!(!reg.remove("send_message"));
    assert_eq!(reg.remove_mcp_server("gh"), 1);
    assert_eq!(reg.remove_mcp_server("gh"), 0);
    assert_eq!(
        surface(&reg, &intent, &config, &loaded).array_names(),
        before.array_names()
    );
}

#[test]
fn live_registry_changes_are_all_or_nothing() {
    let reg = registry_with_mcp();
    let generation = reg.generation();
    // A duplicate inside one replacement changes nothing.
    let err = reg
        .replace_mcp_server("wx", vec![mcp("wx", "a", "A."), mcp("wx", "a", "A again.")])
        .unwrap_err();
    assert_eq!(err, RegistryError::DuplicateTool("mcp__wx__a".into()));
    assert_eq!(reg.generation(), generation);
    assert!(reg.get("mcp__wx__forecast").is_some());
    // Reserved names: the synthetic tool search and the replay-only aliases.
    for reserved in ["tool_search", "remember", "forget", "task", "plan"] {
        let err = reg
            .add(fake(reserved, "x"), Provenance::Builtin)
            .unwrap_err();
        assert!(
            matches!(err, RegistryError::InvalidSchema { .. }),
            "{reserved}: {err}"
        );
    }
    assert_eq!(reg.generation(), generation);
    assert_eq!(
        reg.provenance("mcp__db__query"),
        Some(Provenance::Mcp("db".into()))
    );
    assert_eq!(reg.provenance("bash"), Some(Provenance::Builtin));
    // Clone is an independent copy.
    let copy = reg.clone();
    reg.remove("bash");
    assert!(copy.get("bash").is_some());
}

// ---- deferred loading ------------------------------------------------------------------

#[test]
fn deferred_tools_are_in_the_catalog_not_the_array() {
    let reg = registry_with_mcp();
    let s = surface(&reg, &ToolIntent::all(), &search_on(), &LoadedTools::new());
    let array = s.array_names();
    let deferred = s.deferred_names();
    assert_eq!(
        deferred,
        ["mcp__db__query", "mcp__wx__alerts", "mcp__wx__forecast"]
    );
    for name in &deferred {
        assert!(!array.contains(name), "{name} must not be in the array");
    }
    assert_eq!(array.last().unwrap(), "tool_search");
    assert!(s.search_active());
    let catalog = s.catalog_text().unwrap();
    assert!(catalog.starts_with(CATALOG_HEADER));
    // Bare names, one a line: no descriptions.
    assert_eq!(
        &catalog[CATALOG_HEADER.len()..],
        "mcp__db__query\nmcp__wx__alerts\nmcp__wx__forecast\n"
    );
    assert!(!catalog.contains("Weather"));
    let prompt = s.system_prompt(Some("You are helpful.")).unwrap();
    assert!(prompt.starts_with("You are helpful.\n\n"));
    assert!(prompt.ends_with(&catalog));
    // Deferred tools still resolve for dispatch.
    assert!(s.resolve("mcp__wx__forecast").is_ok());
    let payload = s.payload();
    assert_eq!(payload.deferred_count, 3);
    assert_eq!(payload.deferred[0].provenance.to_string(), "mcp:db");
    let ts = payload.tools.last().unwrap();
    assert_eq!(
        (ts.name.as_str(), ts.provenance.to_string()),
        ("tool_search", "synthetic".into())
    );
}

#[test]
fn tool_search_is_never_deferred() {
    let reg = registry_with_mcp();
    // Even a configuration that defers everything keeps tool_search resident.
    let config = ToolsetConfig {
        search: SearchMode::On,
        deferred: vec!["*".into(), "tool_search".into()],
        ..ToolsetConfig::default()
    };
    let s = surface(&reg, &ToolIntent::all(), &config, &LoadedTools::new());
    assert_eq!(s.array_names(), ["tool_search"]);
    assert!(!s.deferred_names().contains(&"tool_search".to_string()));
    assert_eq!(s.deferred_names().len(), reg.len());
    assert!(s.array()[0].residency == Residency::Resident);
    // Building twice is idempotent.
    let again = surface(&reg, &ToolIntent::all(), &config, &LoadedTools::new());
    assert_eq!(wire_bytes(&s), wire_bytes(&again));
    // resident wins over deferred.
    let config = ToolsetConfig {
        resident: vec!["mcp__db__*".into()],
        ..search_on()
    };
    let s = surface(&reg, &ToolIntent::all(), &config, &LoadedTools::new());
    assert!(s.array_names().contains(&"mcp__db__query".to_string()));
}

#[tokio::test]
async fn tool_search_returns_schemas_and_loads_for_the_next_surface() {
    let reg = registry_with_mcp();
    let config = search_on();
    let loaded = LoadedTools::new();
    let turn1 = surface(&reg, &ToolIntent::all(), &config, &loaded);
    let array1 = wire_bytes(&turn1);
    let search = turn1.resolve("tool_search").unwrap();
    let ctx = ToolContext::new("/tmp");
    let prepared = search
        .prepare(json!({"query": "weather forecast city"}), &ctx)
        .unwrap();
    assert!(!prepared.needs_approval, "tool_search is auto-approved");
    let out = search.execute(&prepared, &ctx, &NoOutput).await;
    assert!(!out.is_error, "{}", out.content);
    // Full schemas in the result, in the array-entry shape.
    let json_start = out.content.find('[').unwrap();
    let schemas: Vec<Value> = serde_json::from_str(&out.content[json_start..]).unwrap();
    assert_eq!(schemas[0]["name"], "mcp__wx__forecast");
    assert_eq!(schemas[0]["parameters"]["required"], json!(["q"]));
    assert!(
        schemas[0]["description"]
            .as_str()
            .unwrap()
            .contains("forecast")
    );
    assert!(out.content.contains("call them now"));
    assert!(loaded.contains("mcp__wx__forecast"));
    // This turn's surface is frozen: same array, same catalog.
    assert_eq!(wire_bytes(&turn1), array1);
    assert!(
        turn1
            .deferred_names()
            .contains(&"mcp__wx__forecast".to_string())
    );
    // The next turn's surface has it in the array (loaded), out of the catalog.
    let turn2 = surface(&reg, &ToolIntent::all(), &config, &loaded);
    let entry = turn2
        .array()
        .iter()
        .find(|t| t.name() == "mcp__wx__forecast")
        .unwrap();
    assert_eq!(entry.residency, Residency::Loaded);
    assert!(
        !turn2
            .deferred_names()
            .contains(&"mcp__wx__forecast".to_string())
    );
    assert_eq!(turn2.array_names().last().unwrap(), "tool_search");
    // An exact name is found first; nothing matching is a plain answer.
    let by_name = search
        .prepare(json!({"query": "mcp__db__query"}), &ctx)
        .unwrap();
    let out = search.execute(&by_name, &ctx, &NoOutput).await;
    assert!(
        out.content.contains("\"name\": \"mcp__db__query\""),
        "{}",
        out.content
    );
    let none = search.prepare(json!({"query": "zzzz qqqq"}), &ctx).unwrap();
    let out = search.execute(&none, &ctx, &NoOutput).await;
    assert_eq!(out.content, "No deferred tools match 'zzzz qqqq'.");
    assert!(!out.is_error);
    // Bad input.
    assert!(search.prepare(json!({}), &ctx).is_err());
    assert!(search.prepare(json!({"query": "  "}), &ctx).is_err());
    assert!(
        search
            .prepare(json!({"query": "x".repeat(501)}), &ctx)
            .is_err()
    );
}

#[tokio::test]
async fn tool_search_respects_max_results_and_searches_descriptions() {
    let reg = ToolRegistry::with_builtins().unwrap();
    let tools: Vec<_> = (0..12)
        .map(|i| {
            mcp(
                "many",
                &format!("t{i:02}"),
                &format!("Database helper number {i}."),
            )
        })
        .collect();
    reg.replace_mcp_server("many", tools).unwrap();
    let config = ToolsetConfig {
        search_max_results: 3,
        ..search_on()
    };
    let loaded = LoadedTools::new();
    let s = surface(&reg, &ToolIntent::all(), &config, &loaded);
    let search = s.resolve("tool_search").unwrap();
    let ctx = ToolContext::new("/tmp");
    let p = search.prepare(json!({"query": "database"}), &ctx).unwrap();
    let out = search.execute(&p, &ctx, &NoOutput).await;
    assert!(
        out.content.starts_with("Loaded 3 tool(s)"),
        "{}",
        out.content
    );
    assert_eq!(loaded.names().len(), 3);
    // Built-ins are resident, so not searchable.
    let p = search.prepare(json!({"query": "read_file"}), &ctx).unwrap();
    let out = search.execute(&p, &ctx, &NoOutput).await;
    assert!(
        out.content.starts_with("No deferred tools match"),
        "{}",
        out.content
    );
}

#[test]
fn search_thresholds_and_modes() {
    let reg = registry_with_mcp(); // 9 built-ins + 3 MCP = 12 tools
    let loaded = LoadedTools::new();
    let with = |search, threshold| ToolsetConfig {
        search,
        search_threshold: threshold,
        ..ToolsetConfig::default()
    };
    let auto_high = surface(
        &reg,
        &ToolIntent::all(),
        &with(SearchMode::Auto, 20),
        &loaded,
    );
    assert!(!auto_high.search_active());
    assert_eq!(
        auto_high.array_names().len(),
        12,
        "below the threshold everything is resident"
    );
    assert!(auto_high.catalog_text().is_none());
    let auto_low = surface(
        &reg,
        &ToolIntent::all(),
        &with(SearchMode::Auto, 12),
        &loaded,
    );
    assert!(auto_low.search_active());
    assert_eq!(auto_low.deferred_names().len(), 3);
    let off = surface(&reg, &ToolIntent::all(), &with(SearchMode::Off, 0), &loaded);
    assert!(!off.search_active());
    assert!(matches!(
        off.resolve("tool_search"),
        Err(ResolveError::NotEnabled(_))
    ));
    // On, but nothing deferrable: no tool_search.
    let builtins = ToolRegistry::with_builtins().unwrap();
    assert!(
        !surface(
            &builtins,
            &ToolIntent::all(),
            &with(SearchMode::On, 0),
            &loaded
        )
        .search_active()
    );
    // Hand-picked sets and a disabled tool_search turn search off.
    let on = with(SearchMode::On, 0);
    let picked = surface(&reg, &ToolIntent::only(["bash", "@mcp"]), &on, &loaded);
    assert!(!picked.search_active());
    assert_eq!(picked.array_names().len(), 4);
    let no_search = surface(
        &reg,
        &ToolIntent::all().with_disabled("tool_search"),
        &on,
        &loaded,
    );
    assert!(!no_search.search_active());
    assert_eq!(no_search.array_names().len(), 12);
    assert_eq!("AUTO".parse::<SearchMode>().unwrap(), SearchMode::Auto);
    assert!("sometimes".parse::<SearchMode>().is_err());
    let cfg: ToolsetConfig =
        serde_json::from_value(json!({"search": "off", "search_threshold": 3})).unwrap();
    assert_eq!(
        (cfg.search, cfg.search_threshold, cfg.search_max_results),
        (SearchMode::Off, 3, 5)
    );
    assert!(
        ToolsetConfig {
            search_max_results: 0,
            ..ToolsetConfig::default()
        }
        .check()
        .is_err()
    );
}

#[test]
fn budget_prices_resident_by_schema_and_deferred_by_catalog_line() {
    let reg = registry_with_mcp();
    let s = surface(&reg, &ToolIntent::all(), &search_on(), &LoadedTools::new());
    let b = s.budget();
    // Resident: each array entry's JSON (description + schema + wrapper), ≈ 4 bytes a token.
    let entries: Vec<usize> = s
        .array()
        .iter()
        .map(|t| {
            serde_json::to_vec(&turnstone_tools::toolset::wire_entry(&t.spec()))
                .unwrap()
                .len()
        })
        .collect();
    let expected: u64 = entries.iter().map(|n| n.div_ceil(4) as u64).sum();
    assert_eq!(b.resident_tokens, expected);
    let whole = s.payload().bytes as u64;
    assert!(b.resident_tokens.abs_diff(whole / 4) <= entries.len() as u64 + 1);
    // Descriptions matter: pricing the schema alone would be far less.
    let schema_only: u64 = s
        .array()
        .iter()
        .map(|t| (serde_json::to_vec(&t.spec().parameters).unwrap().len() / 4) as u64)
        .sum();
    assert!(
        b.resident_tokens > schema_only + 100,
        "{b:?} vs {schema_only}"
    );
    // Deferred: the bare name and a newline, never the description.
    let catalog = s.catalog_text().unwrap();
    let lines = &catalog[CATALOG_HEADER.len()..];
    let expected: u64 = lines
        .lines()
        .map(|l| (l.len() + 1).div_ceil(4) as u64)
        .sum();
    assert_eq!(b.deferred_tokens, expected);
    let described: u64 = s
        .deferred()
        .iter()
        .map(|t| (t.tool.definition().description.len() / 4) as u64)
        .sum();
    assert!(
        b.deferred_tokens < described,
        "a catalog line is cheaper than a description"
    );
    assert_eq!(
        b.total_tokens,
        b.resident_tokens + b.deferred_tokens + b.catalog_overhead_tokens
    );
    assert!(b.catalog_overhead_tokens > 0);
    assert_eq!(s.payload().budget, b);
}

// ---- canonical names and aliases -------------------------------------------------------

#[tokio::test]
async fn legacy_names_are_replay_only_aliases() {
    let calls: Arc<Mutex<Vec<Value>>> = Arc::default();
    let reg = registry_with_mcp();
    reg.add(
        fake_with("memory", "Structured persistent memory.", calls.clone()),
        Provenance::Builtin,
    )
    .unwrap();
    let config = search_on();
    let loaded = LoadedTools::new();
    let s = surface(&reg, &ToolIntent::all(), &config, &loaded);
    let ctx = ToolContext::new("/tmp");

    let remember = s.resolve("remember").unwrap();
    let p = remember
        .prepare(json!({"key": "editor", "value": "vim"}), &ctx)
        .unwrap();
    let out = remember.execute(&p, &ctx, &NoOutput).await;
    assert!(
        out.content.starts_with("memory ran with"),
        "{}",
        out.content
    );
    let forget = s.resolve("forget").unwrap();
    let p = forget.prepare(json!({"key": "editor"}), &ctx).unwrap();
    forget.execute(&p, &ctx, &NoOutput).await;
    assert_eq!(
        *calls.lock(),
        [
            json!({"action": "save", "name": "editor", "content": "vim", "description": "vim"}),
            json!({"action": "delete", "name": "editor"}),
        ]
    );
    assert!(remember.prepare(json!({"value": "x"}), &ctx).is_err());

    // Never advertised, never searchable, not registry names.
    for legacy in ["remember", "forget", "task", "plan"] {
        assert!(!s.array_names().contains(&legacy.to_string()));
        assert!(!s.deferred_names().contains(&legacy.to_string()));
        assert!(!reg.names().contains(&legacy.to_string()));
        assert!(!s.catalog_text().unwrap_or_default().contains(legacy));
    }
    let search = s.resolve("tool_search").unwrap();
    let p = search
        .prepare(json!({"query": "remember forget task plan"}), &ctx)
        .unwrap();
    let out = search.execute(&p, &ctx, &NoOutput).await;
    assert!(!out.content.contains("\"remember\""), "{}", out.content);

    // An alias whose canonical tool is not registered is as unknown as any other name.
    assert_eq!(
        resolve_err(&s, "task").to_string(),
        "tool 'task' is not registered"
    );
    // Disabling the canonical tool disables its aliases.
    let off = surface(
        &reg,
        &ToolIntent::all().with_disabled("memory"),
        &config,
        &loaded,
    );
    assert_eq!(
        resolve_err(&off, "remember"),
        ResolveError::NotEnabled("remember".into())
    );
}

#[test]
fn unknown_names_fail_exactly_without_fuzzy_matching() {
    let reg = registry_with_mcp();
    let s = surface(&reg, &ToolIntent::all(), &search_on(), &LoadedTools::new());
    for name in [
        "bassh",
        "Bash",
        "BASH",
        " bash",
        "read-file",
        "mcp__wx__forcast",
        "memory",
        "",
    ] {
        assert_eq!(
            resolve_err(&s, name).to_string(),
            format!("tool '{name}' is not registered")
        );
    }
    let off = surface(
        &reg,
        &ToolIntent::all().with_disabled("bash"),
        &search_on(),
        &LoadedTools::new(),
    );
    assert_eq!(
        resolve_err(&off, "bash").to_string(),
        "tool 'bash' is not enabled for this workstream"
    );
}

// ---- payload record --------------------------------------------------------------------

#[test]
fn payload_digest_is_of_the_exact_array_json() {
    let reg = registry_with_mcp();
    let loaded = LoadedTools::new();
    loaded.mark("mcp__db__query");
    let s = surface(&reg, &ToolIntent::all(), &search_on(), &loaded);
    let bytes = wire_bytes(&s);
    let p = s.payload();
    assert_eq!(p.bytes, bytes.len());
    assert_eq!(p.sha256, sha256_hex(&bytes));
    assert_eq!(p.sha256.len(), 64);
    assert_eq!(p.tool_count, s.array().len());
    assert_eq!(p.names(), s.array_names());
    assert_eq!(p.generation, reg.generation());
    let db = p.tools.iter().find(|t| t.name == "mcp__db__query").unwrap();
    assert_eq!(db.residency, Residency::Loaded);
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["tools"][0]["provenance"], "builtin");
    assert_eq!(json["tools"][0]["residency"], "resident");
    assert_eq!(json["search_active"], true);
    assert_eq!(json["deferred"][0]["provenance"], "mcp:wx");
    // A different array, a different digest.
    let other = surface(
        &reg,
        &ToolIntent::all().with_disabled("bash"),
        &search_on(),
        &loaded,
    );
    assert_ne!(other.payload().sha256, p.sha256);
}

#[test]
fn payload_listing_is_bounded() {
    let reg = ToolRegistry::new();
    let tools: Vec<_> = (0..300)
        .map(|i| mcp("big", &format!("t{i:03}"), "A tool."))
        .collect();
    reg.replace_mcp_server("big", tools).unwrap();
    let s = surface(
        &reg,
        &ToolIntent::all(),
        &ToolsetConfig {
            search: SearchMode::Off,
            ..ToolsetConfig::default()
        },
        &LoadedTools::new(),
    );
    let p = s.payload();
    assert_eq!(p.tool_count, 300);
    assert_eq!(p.tools.len(), 256);
    assert_eq!(p.tools_omitted, 44);
    assert_eq!(
        p.bytes,
        wire_bytes(&s).len(),
        "measured over the whole array"
    );
    let s = surface(&reg, &ToolIntent::all(), &search_on(), &LoadedTools::new());
    let p = s.payload();
    assert_eq!(
        (p.deferred.len(), p.deferred_count, p.deferred_omitted),
        (256, 300, 44)
    );
}

#[tokio::test]
async fn git_man_and_math_defer_and_load_through_tool_search() {
    let reg = ToolRegistry::with_builtins().unwrap();
    let config = ToolsetConfig {
        deferred: vec!["git".into(), "man".into(), "math".into()],
        ..search_on()
    };
    let loaded = LoadedTools::new();
    let s = surface(&reg, &ToolIntent::all(), &config, &loaded);
    assert_eq!(s.deferred_names(), ["git", "man", "math"]);
    assert!(s.catalog_text().unwrap().ends_with("git\nman\nmath\n"));
    // Deferred tools still dispatch by exact name.
    assert!(s.resolve("man").is_ok());
    let search = s.resolve("tool_search").unwrap();
    let ctx = ToolContext::new("/tmp");
    for (query, tool) in [
        ("read a manual page", "man"),
        ("commit history blame", "git"),
        ("evaluate python calculation", "math"),
    ] {
        let p = search.prepare(json!({ "query": query }), &ctx).unwrap();
        let out = search.execute(&p, &ctx, &NoOutput).await;
        assert!(out.content.contains(tool), "{query}: {}", out.content);
    }
    let next = surface(&reg, &ToolIntent::all(), &config, &loaded);
    for name in ["git", "man", "math"] {
        assert!(next.array_names().contains(&name.to_string()), "{name}");
    }
    // The readonly preset (auto-approve metadata) holds all three; the default set too.
    let snap = reg.snapshot();
    let readonly = expand(&ToolIntent::toolset("readonly"), &snap, &config).names();
    for name in ["git", "man", "math"] {
        assert!(readonly.contains(&name.to_string()), "{name}");
    }
}

#[tokio::test]
async fn plan_mode_keeps_read_only_tools_and_tool_search_and_refuses_the_rest() {
    let reg = registry_with_mcp();
    let loaded = LoadedTools::new();
    let config = search_on();
    let plan = ToolIntent::all().with_plan(true);
    assert_eq!(plan.to_json(), r#"{"plan":true}"#);
    assert_eq!(
        ToolIntent::from_json(r#"{"plan":false}"#).unwrap(),
        ToolIntent::all()
    );
    let s = surface(&reg, &plan, &config, &loaded);
    assert!(s.plan_mode());
    assert_eq!(
        s.array_names(),
        ["diff_file", "git", "man", "math", "read_file", "search"],
        "MCP tools are not known to be read-only: not offered, so no tool_search either"
    );
    for name in ["bash", "write_file", "edit_file", "mcp__db__query"] {
        let err = s.resolve(name).err().unwrap();
        assert_eq!(err, ResolveError::PlanMode(name.into()));
        assert!(
            err.to_string().contains("not available in plan mode"),
            "{err}"
        );
    }
    // A replay alias of a refused tool is refused the same way; unknown names stay unknown.
    assert!(matches!(
        s.resolve("nope"),
        Err(ResolveError::NotRegistered(_))
    ));
    let prompt = s.system_prompt(Some("Base.")).unwrap();
    assert!(prompt.starts_with("Base.\n\nPlan mode is on"), "{prompt}");
    // An MCP server configured as read-only joins plan mode, deferred behind tool_search.
    let with_mcp = ToolsetConfig {
        plan_tools: vec!["read_file".into(), "@mcp:db".into()],
        ..search_on()
    };
    let s = surface(&reg, &plan, &with_mcp, &loaded);
    assert_eq!(s.array_names(), ["read_file", "tool_search"]);
    assert_eq!(s.deferred_names(), ["mcp__db__query"]);
    assert!(s.resolve("mcp__db__query").is_ok());
    assert!(matches!(s.resolve("bash"), Err(ResolveError::PlanMode(_))));
    // Leaving plan mode gives the whole set back.
    let off = ToolIntent::all()
        .with_plan(true)
        .merged(&json!({"plan": null}))
        .unwrap();
    assert!(!off.is_plan());
    let s = surface(&reg, &off, &config, &loaded);
    assert!(!s.plan_mode());
    assert!(s.resolve("bash").is_ok());
    // Plan mode narrows a preset too, never widens it.
    let ro = surface(
        &reg,
        &ToolIntent::toolset("readonly").with_plan(true),
        &config,
        &loaded,
    );
    assert!(!ro.array_names().contains(&"bash".to_string()));
}

#[tokio::test]
async fn personas_are_exact_or_hard_tool_visibility_sets() {
    let reg = registry_with_mcp();
    let loaded = LoadedTools::new();
    let config = ToolsetConfig {
        // Tool search would be off without a persona.
        search: SearchMode::Off,
        personas: [
            (
                "reviewer".to_string(),
                vec!["read_file".into(), "git".into(), "tool_search".into()],
            ),
            ("calculator".to_string(), vec!["math".into(), "man".into()]),
        ]
        .into_iter()
        .collect(),
        ..ToolsetConfig::default()
    };
    config.check().unwrap();
    // Exact: the named tools visible, every other tool deferred behind a client-side
    // tool_search, even with search off.
    let exact = ToolIntent::all().with_persona(Some("reviewer".into()));
    assert_eq!(exact.to_json(), r#"{"persona":"reviewer"}"#);
    let s = surface(&reg, &exact, &config, &loaded);
    assert_eq!(s.array_names(), ["git", "read_file", "tool_search"]);
    assert!(s.deferred_names().contains(&"bash".to_string()));
    assert!(s.deferred_names().contains(&"mcp__db__query".to_string()));
    let search = s.resolve("tool_search").unwrap();
    let ctx = ToolContext::new("/tmp");
    let p = search
        .prepare(json!({"query": "run a shell command"}), &ctx)
        .unwrap();
    let out = search.execute(&p, &ctx, &NoOutput).await;
    assert!(out.content.contains("bash"), "{}", out.content);
    assert!(
        surface(&reg, &exact, &config, &loaded)
            .array_names()
            .contains(&"bash".to_string())
    );
    // Hard: exactly its tools, no tool search at all, other tools refused.
    let hard = ToolIntent::all().with_persona(Some("calculator".into()));
    let on = ToolsetConfig {
        search: SearchMode::On,
        ..config.clone()
    };
    let s = surface(&reg, &hard, &on, &LoadedTools::new());
    assert_eq!(s.array_names(), ["man", "math"]);
    assert!(!s.search_active());
    assert!(s.deferred_names().is_empty());
    assert!(matches!(
        s.resolve("bash"),
        Err(ResolveError::NotEnabled(_))
    ));
    assert!(matches!(
        s.resolve("tool_search"),
        Err(ResolveError::NotEnabled(_))
    ));
    // Validation names the configured personas; the shape check bounds the name.
    let unknown = ToolIntent::all().with_persona(Some("nobody".into()));
    assert_eq!(
        config.validate(&unknown).unwrap_err().to_string(),
        "unknown persona 'nobody' (configured: calculator, reviewer)"
    );
    assert!(config.validate(&hard).is_ok());
    let bad = ToolsetConfig {
        personas: [("empty".to_string(), Vec::new())].into_iter().collect(),
        ..ToolsetConfig::default()
    };
    assert!(bad.check().unwrap_err().contains("tools.personas.empty"));
    // A persona changed through the client API (dict form) and cleared with null.
    let set = ToolIntent::all()
        .merged(&json!({"persona": "calculator"}))
        .unwrap();
    assert_eq!(set.persona.as_deref(), Some("calculator"));
    assert_eq!(
        set.merged(&json!({"persona": null})).unwrap(),
        ToolIntent::all()
    );
}
