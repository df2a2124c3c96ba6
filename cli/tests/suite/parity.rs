//! What the terminal client shares with the node: the Anthropic provider (key from a
//! `*_FILE`, never logged, never another vendor's), the model registry and `/model`, the
//! store tools (`memory`, `recall`, `skill`) and MCP servers from the config file.

use turnstone_testkit::{FakeAnthropic, FakeLlm};

use super::pipe::run_env;

#[tokio::test]
async fn anthropic_runs_with_a_key_from_a_file_and_never_shows_it() {
    let anthropic = FakeAnthropic::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("anthropic.key");
    std::fs::write(&key, "sk-ant-secret-123\n").unwrap();
    let r = run_env(
        &[
            "--provider",
            "anthropic",
            "--base-url",
            &anthropic.base_url(),
            "--model",
            "claude-test",
            "--log-level",
            "debug",
        ],
        &[
            ("ANTHROPIC_API_KEY_FILE", key.to_str().unwrap()),
            ("OPENAI_API_KEY", "sk-openai-not-for-anthropic"),
        ],
        "hello from the terminal\n",
    )
    .await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    assert!(r.stdout.contains("hello from the terminal"), "{}", r.stdout);
    let headers = anthropic.last_headers().unwrap();
    assert_eq!(headers.api_key.as_deref(), Some("sk-ant-secret-123"));
    assert_eq!(anthropic.last_request().unwrap()["model"], "claude-test");
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(!all.contains("sk-ant-secret"), "the key was shown: {all}");
}

#[tokio::test]
async fn slash_model_switches_between_the_registrys_aliases() {
    let small = FakeLlm::start().await;
    let big = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\ndefault = \"small\"\n\
             [models.small]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"small-1\"\n\
             [models.big]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"big-1\"\n",
            small.base_url(),
            big.base_url()
        ),
    )
    .unwrap();
    let r = run_env(
        &["--config", config.to_str().unwrap()],
        &[],
        "/model\nfirst question\n/model big\nsecond question\n/model nope\n",
    )
    .await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let out = &r.stdout;
    assert!(
        out.contains("Model: small-1 (alias small). Aliases: big, small."),
        "{out}"
    );
    assert!(out.contains("Model switched to big (big-1)."), "{out}");
    assert!(out.contains("Unknown model alias 'nope'"), "{out}");
    let asked = |llm: &FakeLlm| -> Vec<String> {
        llm.requests()
            .iter()
            .map(|r| {
                let messages = r["messages"].as_array().unwrap();
                format!(
                    "{} {}",
                    r["model"].as_str().unwrap(),
                    messages.last().unwrap()["content"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(asked(&small), vec!["small-1 first question"]);
    assert_eq!(asked(&big), vec!["big-1 second question"]);
}

#[tokio::test]
async fn memory_saved_in_one_run_is_found_in_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let db = db.to_str().unwrap();
    let save = r#"CALL:memory {"action": "save", "name": "walrus_diet", "content": "the walrus eats clams", "description": "what the walrus eats"}"#;
    let first = run_env(
        &["--skip-permissions"],
        &[("TURNSTONE_DB_PATH", db)],
        &format!("{save}\n/tools\n"),
    )
    .await;
    assert_eq!(first.code, Some(0), "stderr: {}", first.stderr);
    for tool in ["memory", "recall", "skill"] {
        assert!(
            first.stdout.contains(&format!("  {tool} (")),
            "{tool} not offered: {}",
            first.stdout
        );
    }
    let second = run_env(
        &["--skip-permissions"],
        &[("TURNSTONE_DB_PATH", db)],
        "CALL:memory {\"action\": \"search\", \"query\": \"clams\"}\n",
    )
    .await;
    assert_eq!(second.code, Some(0), "stderr: {}", second.stderr);
    assert!(
        second.stdout.contains("walrus_diet"),
        "the saved memory was not found: {}",
        second.stdout
    );
}

#[tokio::test]
async fn mcp_servers_from_the_config_file_offer_their_tools() {
    turnstone_testkit::mcp_fixtures::ensure();
    let script = turnstone_testkit::mcp_fixtures::dir().join("stdio_server.py");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp.servers.fix]\ncommand = \"{}\"\nargs = [\"{}\"]\n",
            turnstone_testkit::mcp_fixtures::python(),
            script.display()
        ),
    )
    .unwrap();
    let r = run_env(
        &["--config", config.to_str().unwrap(), "--skip-permissions"],
        &[],
        "CALL:mcp__fix__ping {}\n",
    )
    .await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    assert!(
        r.stdout.contains("done: pong"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
}

#[tokio::test]
async fn skill_load_activates_a_stored_skill_on_the_workstream() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    {
        let store = turnstone_store::connect(&turnstone_store::StoreConfig::sqlite(&db))
            .await
            .unwrap();
        store
            .upsert_skill(turnstone_store::SkillSpec {
                name: "pirate".into(),
                description: "talks like a pirate".into(),
                content: "Always answer like a pirate, arr.".into(),
                ..turnstone_store::SkillSpec::default()
            })
            .await
            .unwrap();
    }
    let llm = FakeLlm::start().await;
    let r = run_env(
        &[
            "--skip-permissions",
            "--base-url",
            &llm.base_url(),
            "--model",
            "m",
        ],
        &[("TURNSTONE_DB_PATH", db.to_str().unwrap())],
        "CALL:skill {\"action\": \"load\", \"name\": \"pirate\"}\nahoy\n",
    )
    .await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let last = llm.last_request().unwrap();
    let system = last["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(
        system.contains("Always answer like a pirate, arr."),
        "the skill is in the system prompt of the next request: {last}"
    );
}
