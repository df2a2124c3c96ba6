//! The active skill of a workstream: rendered once when set, added to the system prompt of
//! every request after the engine's prompt, cleared by `set_skill(None)`; its request
//! settings (model, temperature, `max_tokens`, reasoning effort) apply while it is active.

use turnstone_engine::{ActiveSkill, CreateOptions, Manager, ManagerConfig, RequestOverrides};
use turnstone_llm::{
    ModelEntry, ModelRegistry, ModelSection, ProviderKind, RegistryConfig, RetryPolicy,
};
use turnstone_testkit::FakeLlm;

use super::harness::{Harness, read_turn, registry_engine, send};

fn system_of(request: &serde_json::Value) -> Option<String> {
    let first = &request["messages"][0];
    (first["role"] == "system").then(|| first["content"].as_str().unwrap_or("").to_string())
}

#[tokio::test]
async fn an_active_skill_joins_the_system_prompt_until_cleared() {
    let h = Harness::with(|o| {
        o.config.system_prompt = Some("BASE PROMPT".into());
        o.config.node_id = "node-7".into();
    })
    .await;
    let ws = h.workstream();
    assert!(ws.skill().is_none());

    ws.set_skill(Some(ActiveSkill::new(
        "reviewer",
        "Review for {{model}} in {{ ws_id }} on {{node_id}}; keep {{unknown}} and {{ as is",
    )));
    let expected = format!(
        "Review for fake-model in {} on node-7; keep {{{{unknown}}}} and {{{{ as is",
        ws.id()
    );
    let active = ws.skill().unwrap();
    assert_eq!(active.name, "reviewer");
    assert_eq!(active.content, expected);

    let mut sub = send(&ws, "hello");
    read_turn(&mut sub).await;
    let request = h.llm.last_request().unwrap();
    assert_eq!(
        system_of(&request).as_deref(),
        Some(format!("BASE PROMPT\n\n{expected}").as_str())
    );

    // Replacing it: only the new skill is in the next request.
    ws.set_skill(Some(ActiveSkill::new("terse", "Answer in one line.")));
    let mut sub = send(&ws, "again");
    read_turn(&mut sub).await;
    let system = system_of(&h.llm.last_request().unwrap()).unwrap();
    assert_eq!(system, "BASE PROMPT\n\nAnswer in one line.");

    ws.set_skill(None);
    assert!(ws.skill().is_none());
    let mut sub = send(&ws, "and again");
    read_turn(&mut sub).await;
    assert_eq!(
        system_of(&h.llm.last_request().unwrap()).as_deref(),
        Some("BASE PROMPT")
    );
}

#[tokio::test]
async fn a_skill_alone_is_the_system_prompt() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "no prompt yet");
    read_turn(&mut sub).await;
    assert_eq!(system_of(&h.llm.last_request().unwrap()), None);

    ws.set_skill(Some(ActiveSkill::new("s", "Only the skill.")));
    let mut sub = send(&ws, "now");
    read_turn(&mut sub).await;
    assert_eq!(
        system_of(&h.llm.last_request().unwrap()).as_deref(),
        Some("Only the skill.")
    );
}

#[test]
fn render_replaces_only_the_three_variables() {
    assert_eq!(
        ActiveSkill::render("{{model}}/{{ws_id}}/{{node_id}}", "m", "w", "n"),
        "m/w/n"
    );
    assert_eq!(ActiveSkill::render("{{x}} {{", "m", "w", "n"), "{{x}} {{");
    assert_eq!(ActiveSkill::render("", "m", "w", "n"), "");
    assert_eq!(
        ActiveSkill::render("ünï {{model}}}", "m", "w", "n"),
        "ünï m}"
    );
}

#[tokio::test]
async fn a_skills_request_settings_apply_while_it_is_active() {
    let h = Harness::with(|o| {
        o.config.temperature = Some(0.5);
        o.config.reasoning_effort = "medium".into();
    })
    .await;
    let ws = h.workstream();
    let settings = |r: &serde_json::Value| {
        (
            r["temperature"].as_f64(),
            r["max_completion_tokens"].as_u64(),
            r["chat_template_kwargs"]["reasoning_effort"]
                .as_str()
                .map(str::to_string),
        )
    };

    ws.set_skill_with(
        Some(ActiveSkill::new("precise", "Be precise.")),
        RequestOverrides {
            temperature: Some(0.25),
            max_tokens: Some(777),
            reasoning_effort: Some("high".into()),
            ..RequestOverrides::default()
        },
    );
    assert_eq!(ws.request_overrides().max_tokens, Some(777));
    let mut sub = send(&ws, "with the skill");
    read_turn(&mut sub).await;
    assert_eq!(
        settings(&h.llm.last_request().unwrap()),
        (Some(0.25), Some(777), Some("high".into()))
    );
    assert_eq!(ws.status().effort, "high");

    // Another skill replaces the settings with its own (none: the engine's).
    ws.set_skill(Some(ActiveSkill::new("plain", "Plain.")));
    assert!(ws.request_overrides().is_empty());
    let mut sub = send(&ws, "other skill");
    read_turn(&mut sub).await;
    assert_eq!(
        settings(&h.llm.last_request().unwrap()),
        (Some(0.5), None, Some("medium".into()))
    );

    // Clearing the skill clears its settings, whatever is passed along.
    ws.set_skill_with(
        Some(ActiveSkill::new("precise", "Be precise.")),
        RequestOverrides {
            max_tokens: Some(55),
            ..RequestOverrides::default()
        },
    );
    ws.set_skill_with(
        None,
        RequestOverrides {
            max_tokens: Some(66),
            ..RequestOverrides::default()
        },
    );
    assert!(ws.request_overrides().is_empty());
    let mut sub = send(&ws, "no skill");
    read_turn(&mut sub).await;
    assert_eq!(
        settings(&h.llm.last_request().unwrap()),
        (Some(0.5), None, Some("medium".into()))
    );
    assert_eq!(ws.status().effort, "medium");
}

#[tokio::test]
async fn a_skills_model_is_used_until_cleared_or_replaced_by_a_model_choice() {
    let main = FakeLlm::start().await;
    let big = FakeLlm::start().await;
    let small = FakeLlm::start().await;
    let mut config = RegistryConfig::default();
    for (alias, llm, model) in [
        ("main", &main, "main-model"),
        ("big", &big, "big-model"),
        ("small", &small, "small-model"),
    ] {
        let mut entry = ModelEntry::new(ProviderKind::Openai, llm.base_url(), model);
        entry.context_window = Some(10_000);
        config.models.insert(alias.into(), entry);
    }
    config.model = ModelSection {
        default: Some("main".into()),
        ..ModelSection::default()
    };
    let registry = ModelRegistry::from_config(&config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = registry_engine(
        registry,
        ("main", "main-model"),
        RetryPolicy::default(),
        dir.path(),
    )
    .await;
    let manager = Manager::new(engine.clone(), ManagerConfig::default());
    let (ws, _) = manager.create(CreateOptions::default()).unwrap();

    // The user chose `small`; the skill runs on `big` and renders `{{model}}` as it.
    ws.select_model("small").await.unwrap();
    let choice = engine.resolve_model("big").await.unwrap();
    ws.set_skill_with(
        Some(ActiveSkill::new("deep", "You are {{model}}.")),
        RequestOverrides {
            model: choice,
            ..RequestOverrides::default()
        },
    );
    assert_eq!(ws.skill().unwrap().content, "You are big-model.");
    assert_eq!(ws.model(), ("big-model".into(), "big".into()));
    let mut sub = send(&ws, "deep thought");
    read_turn(&mut sub).await;
    assert_eq!(big.last_request().unwrap()["model"], "big-model");

    // Clearing the skill gives the user's choice back.
    ws.set_skill(None);
    assert_eq!(ws.model(), ("small-model".into(), "small".into()));
    let mut sub = send(&ws, "small again");
    read_turn(&mut sub).await;
    assert_eq!(
        (
            main.request_count(),
            big.request_count(),
            small.request_count()
        ),
        (0, 1, 1)
    );

    // A `/model` choice made while a skill is active replaces the skill's model.
    let choice = engine.resolve_model("big").await.unwrap();
    ws.set_skill_with(
        Some(ActiveSkill::new("deep", "Deep.")),
        RequestOverrides {
            model: choice,
            ..RequestOverrides::default()
        },
    );
    ws.select_model("main").await.unwrap();
    assert_eq!(ws.model().0, "main-model");
    assert!(ws.request_overrides().model.is_none());
    let mut sub = send(&ws, "main now");
    read_turn(&mut sub).await;
    assert_eq!(
        (
            main.request_count(),
            big.request_count(),
            small.request_count()
        ),
        (1, 1, 1)
    );
}
