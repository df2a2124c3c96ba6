//! The node's reranker against the fake rerank server the tests start: memory, skill and
//! tool_search candidates re-ordered (and thresholded) with `rerank_bm25`, every failure
//! falling back to the native order and counted, and `turnstone-admin rerank-calibrate`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use turnstone_node::rerank::{NodeReranker, PROBES, RerankSection};
use turnstone_store::SkillSpec;
use turnstone_testkit::fake_rerank::overlap_score;
use turnstone_testkit::{FakeRerank, RerankFault, RerankShape};
use turnstone_tools::toolset::{LoadedTools, ToolSearchTool};
use turnstone_tools::{FunctionSpec, NoOutput, Reranker, Tool, ToolContext};

use super::store_tools::{Tools, tools};

fn section(server: &FakeRerank, threshold: f64) -> RerankSection {
    RerankSection {
        base_url: server.base_url(),
        model: "fake-reranker".into(),
        timeout: Some(1.0),
        bm25: Some(true),
        bm25_threshold: Some(threshold),
        ..RerankSection::default()
    }
}

fn reranker(server: &FakeRerank, threshold: f64) -> Arc<NodeReranker> {
    let s = section(server, threshold);
    NodeReranker::new(s.client(&|_| None).unwrap(), s.settings())
}

/// Runs one call of `tool` with `reranker` in its context.
async fn run(
    tool: &dyn Tool,
    ctx: &ToolContext,
    reranker: Option<&Arc<NodeReranker>>,
    args: Value,
) -> String {
    let mut ctx = ctx.clone();
    ctx.reranker = reranker.map(|r| r.clone() as Arc<dyn Reranker>);
    let prepared = tool.prepare(args.clone(), &ctx).unwrap();
    let out = tool.execute(&prepared, &ctx, &NoOutput).await;
    assert!(!out.is_error, "{args}: {}", out.content);
    out.content
}

/// The names of the `- name …` lines, in order.
fn listed(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(|l| l.split([' ', ':']).next().unwrap_or_default().to_string())
        .collect()
}

async fn memories() -> Tools {
    let t = tools().await;
    // Both contain "deploy" as a substring (the store's match); only the first as a word
    // (the fake reranker's).
    for (name, content) in [
        ("release_checklist", "how we deploy on fridays"),
        ("deployment_notes", "deployments of the api, newest"),
    ] {
        t.ok(
            "memory",
            "ws1",
            json!({"action": "save", "name": name, "content": content,
                   "description": "ops", "scope": "global"}),
        )
        .await;
        // Distinct update times: the native order is newest first.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t
}

#[tokio::test]
async fn memory_search_is_reranked_and_thresholded() {
    let t = memories().await;
    let server = FakeRerank::start(RerankShape::Jina).await;
    let (memory, ctx) = (t.tool("memory"), t.ctx("ws1"));
    let search = json!({"action": "search", "query": "deploy"});
    let native = listed(&run(memory.as_ref(), &ctx, None, search.clone()).await);
    assert_eq!(native, ["deployment_notes", "release_checklist"]);

    let r = reranker(&server, 0.0);
    let ranked = listed(&run(memory.as_ref(), &ctx, Some(&r), search.clone()).await);
    assert_eq!(ranked, ["release_checklist", "deployment_notes"]);
    let sent = server.requests().pop().unwrap();
    assert_eq!(sent["query"], "deploy");
    assert_eq!(sent["documents"].as_array().unwrap().len(), 2);

    // With a floor the unrelated memory is gone.
    let floor = reranker(&server, 0.5);
    let text = run(memory.as_ref(), &ctx, Some(&floor), search.clone()).await;
    assert_eq!(listed(&text), ["release_checklist"], "{text}");
    assert!(text.starts_with("1 memories:"), "{text}");
    assert_eq!(r.reranked().get("memory"), Some(&1));
}

#[tokio::test]
async fn every_failure_keeps_the_native_order_and_is_counted() {
    let t = memories().await;
    let server = FakeRerank::start(RerankShape::Cohere).await;
    let (memory, ctx) = (t.tool("memory"), t.ctx("ws1"));
    let search = json!({"action": "search", "query": "deploy"});
    let native = run(memory.as_ref(), &ctx, None, search.clone()).await;
    let r = reranker(&server, 0.9);
    for fault in [
        RerankFault::Slow(Duration::from_secs(10)),
        RerankFault::Status(500),
        RerankFault::Garbage,
        RerankFault::OutOfRange,
    ] {
        server.set_fault(fault.clone());
        let text = run(memory.as_ref(), &ctx, Some(&r), search.clone()).await;
        assert_eq!(text, native, "{fault:?}");
    }
    // A closed port as well.
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let s = RerankSection {
            base_url: url,
            ..section(&server, 0.9)
        };
        NodeReranker::new(s.client(&|_| None).unwrap(), s.settings())
    };
    let text = run(memory.as_ref(), &ctx, Some(&gone), search.clone()).await;
    assert_eq!(text, native);
    let counted: Vec<(&str, &str, u64)> = r
        .fallbacks()
        .into_iter()
        .map(|((u, reason), n)| (u, reason, n))
        .collect();
    assert_eq!(
        counted,
        [
            ("memory", "index", 1),
            ("memory", "malformed", 1),
            ("memory", "status", 1),
            ("memory", "timeout", 1),
        ]
    );
    assert_eq!(
        gone.fallbacks().into_iter().collect::<Vec<_>>(),
        [(("memory", "connect"), 1)]
    );
    assert!(r.reranked().is_empty());
}

#[tokio::test]
async fn skill_search_bm25_candidates_are_reranked() {
    let t = tools().await;
    let skill = |name: &str, description: &str, category: &str| SkillSpec {
        description: description.into(),
        category: category.into(),
        ..SkillSpec::new(name, format!("Act as {name}."))
    };
    // BM25 reads the category, the reranker does not: a tie for BM25 (the store's order,
    // by name, decides), a clear order for the reranker.
    t.store
        .create_skill(skill("aaa-cluster", "cluster helper", "kubernetes"))
        .await
        .unwrap();
    t.store
        .create_skill(skill("zzz-rollout", "kubernetes rollout guide", ""))
        .await
        .unwrap();
    let server = FakeRerank::start(RerankShape::Voyage).await;
    let (tool, ctx) = (t.tool("skill"), t.ctx("ws1"));
    let search = json!({"action": "search", "query": "kubernetes"});
    let native = listed(&run(tool.as_ref(), &ctx, None, search.clone()).await);
    assert_eq!(native, ["aaa-cluster", "zzz-rollout"]);
    let r = reranker(&server, 0.0);
    let ranked = listed(&run(tool.as_ref(), &ctx, Some(&r), search.clone()).await);
    assert_eq!(ranked, ["zzz-rollout", "aaa-cluster"]);
    // rerank_bm25 off (the stored setting over the section): the native order, no request.
    let before = server.request_count();
    r.apply_stored(&std::collections::BTreeMap::from([(
        turnstone_node::rerank::SETTING_BM25.to_string(),
        json!(false),
    )]));
    let off = listed(&run(tool.as_ref(), &ctx, Some(&r), search).await);
    assert_eq!(off, native);
    assert_eq!(server.request_count(), before);
}

#[tokio::test]
async fn tool_search_bm25_candidates_are_reranked() {
    let spec = |name: &str, description: &str| FunctionSpec {
        name: name.into(),
        description: description.into(),
        parameters: json!({"type": "object"}),
    };
    let deferred = vec![
        spec(
            "weather_now",
            "current weather: weather weather weather now",
        ),
        spec(
            "sky_report",
            "a forecast of the weather for the whole region, with rain, wind, sun, clouds, \
             pressure and humidity figures per hour and per day",
        ),
        spec("forecast_archive", "past forecast files"),
        spec("forecast_api", "forecast endpoint"),
        spec("clock", "tells the time"),
    ];
    let search = ToolSearchTool::new(deferred, LoadedTools::new(), 2);
    let ctx = ToolContext::new("/");
    let names = |text: &str| -> Vec<String> {
        let start = text.find('[').unwrap();
        let found: Vec<Value> = serde_json::from_str(&text[start..]).unwrap();
        found
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect()
    };
    let query = json!({"query": "weather forecast"});
    let native = names(&run(&search, &ctx, None, query.clone()).await);
    assert_eq!(native, ["weather_now", "forecast_api"]);
    let server = FakeRerank::start(RerankShape::Tei).await;
    let ranked = names(&run(&search, &ctx, Some(&reranker(&server, 0.0)), query.clone()).await);
    assert_eq!(ranked, ["sky_report", "weather_now"]);
    let floor = names(&run(&search, &ctx, Some(&reranker(&server, 0.75)), query.clone()).await);
    assert_eq!(floor, ["sky_report"]);
    // An exact name stays first whatever the reranker says.
    let exact = names(
        &run(
            &search,
            &ctx,
            Some(&reranker(&server, 0.0)),
            json!({"query": "clock"}),
        )
        .await,
    );
    assert_eq!(exact, ["clock"]);
}

/// Runs `turnstone-admin rerank-calibrate <args>`: exit code, stdout, stderr.
async fn calibrate(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnstone-admin"))
        .arg("rerank-calibrate")
        .args(args)
        .env("CAL_KEY", "rk-calibrate")
        .env_remove("TURNSTONE_DB_BACKEND")
        .env_remove("TURNSTONE_CONFIG")
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The threshold `rerank-calibrate` must recommend against the fake: midway between the
/// best off-diagonal and the worst diagonal overlap of the probes.
fn expected_threshold() -> f64 {
    let (mut relevant, mut irrelevant) = (f64::INFINITY, f64::NEG_INFINITY);
    for (i, (query, _)) in PROBES.iter().enumerate() {
        for (j, (_, passage)) in PROBES.iter().enumerate() {
            let s = overlap_score(query, passage);
            if i == j {
                relevant = relevant.min(s);
            } else {
                irrelevant = irrelevant.max(s);
            }
        }
    }
    assert!(
        relevant > irrelevant,
        "the probes must separate under token overlap"
    );
    ((relevant + irrelevant) / 2.0 * 1000.0).round() / 1000.0
}

#[tokio::test]
async fn rerank_calibrate_reports_and_applies_the_threshold() {
    let server = FakeRerank::start(RerankShape::Cohere).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[rerank]\nbase_url = \"{}\"\nmodel = \"fake-reranker\"\napi_key_env = \"CAL_KEY\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let db = dir.path().join("admin.db");
    let common = [
        "--config".as_ref(),
        config.as_os_str(),
        "--db-path".as_ref(),
        db.as_os_str(),
    ];
    let want = expected_threshold();
    let (code, stdout, stderr) = calibrate(&common).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("scale: probability [0, 1]"), "{stdout}");
    assert!(stdout.contains("separation: clean"), "{stdout}");
    assert!(
        stdout.contains(&format!("recommended tools.rerank_bm25_threshold = {want}")),
        "{stdout}"
    );
    assert_eq!(server.request_count(), PROBES.len());
    assert!(
        server
            .authorizations()
            .iter()
            .all(|a| a.as_deref() == Some("Bearer rk-calibrate"))
    );
    assert!(!stdout.contains("rk-calibrate") && !stderr.contains("rk-calibrate"));
    assert!(
        !db.exists(),
        "a calibration without --apply opened the store"
    );

    let mut apply = common.to_vec();
    apply.push("--apply".as_ref());
    let (code, stdout, stderr) = calibrate(&apply).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("stored tools.rerank_bm25_threshold"),
        "{stdout}"
    );
    let store = turnstone_store::connect(&turnstone_store::StoreConfig::sqlite(&db))
        .await
        .unwrap();
    let rows = store.list_settings().await.unwrap();
    let row = rows
        .iter()
        .find(|r| r.key == "tools.rerank_bm25_threshold")
        .unwrap();
    assert_eq!(row.node_id, "");
    assert_eq!(serde_json::from_str::<f64>(&row.value).unwrap(), want);
    assert_eq!(row.changed_by, "turnstone-admin");

    // A broken endpoint: exit 1 with the reason.
    server.set_fault(RerankFault::Garbage);
    let (code, _, stderr) = calibrate(&apply).await;
    assert_eq!(code, Some(1));
    assert!(stderr.contains("malformed"), "{stderr}");
}

#[tokio::test]
async fn rerank_calibrate_without_a_reranker_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[server]\nmax_workstreams = 3\n").unwrap();
    let missing = dir.path().join("none.db");
    let common = [
        "--config".as_ref(),
        config.as_os_str(),
        "--db-path".as_ref(),
        missing.as_os_str(),
    ];
    let (code, _, stderr) = calibrate(&common).await;
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no store at"), "{stderr}");
    assert!(!missing.exists(), "a missing store is not created");
    // A store without the role.
    let db = dir.path().join("admin.db");
    turnstone_store::connect(&turnstone_store::StoreConfig::sqlite(&db))
        .await
        .unwrap();
    let (code, _, stderr) = calibrate(&[
        "--config".as_ref(),
        config.as_os_str(),
        "--db-path".as_ref(),
        db.as_os_str(),
    ])
    .await;
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("no [rerank] section") && stderr.contains("no model.reranker role"),
        "{stderr}"
    );
}

/// Stores `alias` as a model definition with `capabilities` on `base_url`.
async fn store_definition(
    store: &dyn turnstone_store::Store,
    alias: &str,
    base_url: &str,
    capabilities: &str,
) {
    store
        .create_model_definition(turnstone_store::NewModelDefinition {
            definition_id: None,
            alias: alias.into(),
            model: format!("{alias}-model"),
            provider: "openai".into(),
            base_url: base_url.into(),
            api_key: format!("rk-{alias}"),
            context_window: 512,
            capabilities: capabilities.into(),
            enabled: true,
            created_by: "test".into(),
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn rerank_calibrate_probes_the_stored_role_or_the_named_definition() {
    let server = FakeRerank::start(RerankShape::Jina).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let db = dir.path().join("admin.db");
    let store = turnstone_store::connect(&turnstone_store::StoreConfig::sqlite(&db))
        .await
        .unwrap();
    let rerank = r#"{"supports_rerank": true}"#;
    store_definition(store.as_ref(), "role-rr", &server.base_url(), rerank).await;
    store_definition(store.as_ref(), "named-rr", &server.base_url(), rerank).await;
    store_definition(store.as_ref(), "chat", "http://127.0.0.1:9/v1", "{}").await;
    store
        .put_setting(turnstone_store::SettingRow {
            key: "model.reranker".into(),
            value: "\"role-rr\"".into(),
            node_id: String::new(),
            is_secret: false,
            changed_by: "test".into(),
            created: String::new(),
            updated: String::new(),
        })
        .await
        .unwrap();
    let common = [
        "--config".as_ref(),
        config.as_os_str(),
        "--db-path".as_ref(),
        db.as_os_str(),
    ];
    // No --model, no [rerank]: the role's definition, with its stored key.
    let (code, stdout, stderr) = calibrate(&common).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("model role-rr-model"), "{stdout}");
    assert!(stdout.contains("separation: clean"), "{stdout}");
    assert_eq!(server.request_count(), PROBES.len());
    let sent = server.requests();
    assert!(sent.iter().all(|r| r["model"] == "role-rr-model"));
    assert!(
        server
            .authorizations()
            .iter()
            .all(|a| a.as_deref() == Some("Bearer rk-role-rr"))
    );
    // --model names another, and --apply stores the threshold.
    let mut named = common.to_vec();
    named.extend(["--model", "named-rr", "--apply"].map(std::ffi::OsStr::new));
    let (code, stdout, stderr) = calibrate(&named).await;
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("model named-rr-model"), "{stdout}");
    let rows = store.list_settings().await.unwrap();
    let row = rows
        .iter()
        .find(|r| r.key == "tools.rerank_bm25_threshold")
        .unwrap();
    assert_eq!(
        serde_json::from_str::<f64>(&row.value).unwrap(),
        expected_threshold()
    );
    // A chat definition is no reranker; an unknown alias is named.
    for (alias, says) in [
        ("chat", "is not a reranker"),
        ("nope", "no stored model definition"),
    ] {
        let mut args = common.to_vec();
        args.extend(["--model", alias].map(std::ffi::OsStr::new));
        let (code, _, stderr) = calibrate(&args).await;
        assert_eq!(code, Some(1));
        assert!(stderr.contains(says), "{alias}: {stderr}");
    }
}
