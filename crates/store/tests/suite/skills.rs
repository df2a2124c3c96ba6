//! Skills (`prompt_templates`) and migration 0003's memory type rename.

use serde_json::json;
use turnstone_store::{MemoryScope, MemoryType, ScopeRef, SkillSpec, StoreError};

use crate::support::{Backend, TestDb};

both_backends!(
    skill_crud_and_defaults,
    skill_candidates_and_enabled_filter,
    general_memories_become_project,
    mcp_skills_never_touch_other_rows
);

fn spec(name: &str, description: &str, tags: &[&str], category: &str) -> SkillSpec {
    SkillSpec {
        description: description.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        category: category.into(),
        ..SkillSpec::new(name, format!("You are {name}. Model {{{{model}}}}."))
    }
}

async fn skill_crud_and_defaults(db: TestDb) {
    let store = db.open().await;
    let created = store
        .create_skill(SkillSpec::new("reviewer", "Review the code."))
        .await
        .unwrap();
    assert_eq!(created.template_id.len(), 36);
    assert_eq!(created.spec.category, "general");
    assert_eq!(created.spec.version, "1.0.0");
    assert_eq!(created.spec.activation, "named");
    assert_eq!(created.spec.origin, "manual");
    assert_eq!(created.spec.variables, json!([]));
    assert_eq!(created.spec.scan_report, json!({}));
    assert!(created.spec.enabled && !created.spec.readonly);
    assert_eq!(created.spec.temperature, None);
    assert_eq!(created.created, created.updated);

    // A second create of the name is refused; the first row is untouched.
    let err = store
        .create_skill(SkillSpec::new("reviewer", "Other."))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidInput(m) if m.contains("already exists")),
        "{err}"
    );

    // Upsert replaces every column, keeping the id and `created`.
    let mut full = spec("reviewer", "Reviews Rust code", &["rust", "review"], "code");
    full.temperature = Some(0.25);
    full.max_tokens = Some(4096);
    full.agent_max_turns = Some(7);
    full.scan_status = "high".into();
    full.scan_report = json!({"findings": ["shell"]});
    full.allowed_tools = vec!["read_file".into()];
    full.is_default = true;
    full.priority = 5;
    full.token_estimate = 123;
    let updated = store.upsert_skill(full.clone()).await.unwrap();
    assert_eq!(updated.template_id, created.template_id);
    assert_eq!(updated.created, created.created);
    assert!(updated.updated >= created.updated);
    assert_eq!(updated.spec, full);

    let got = store.get_skill("reviewer").await.unwrap().unwrap();
    assert_eq!(got, updated);
    assert!(store.get_skill("Reviewer").await.unwrap().is_none());

    // Bad input is a clear error, not a panic or a row.
    for bad in [
        SkillSpec::new("", "x"),
        SkillSpec::new("a/b", "x"),
        SkillSpec::new("ok", "   "),
    ] {
        assert!(matches!(
            store.upsert_skill(bad.clone()).await,
            Err(StoreError::InvalidInput(_))
        ));
        assert!(matches!(
            store.create_skill(bad).await,
            Err(StoreError::InvalidInput(_))
        ));
    }

    assert!(store.delete_skill("reviewer").await.unwrap());
    assert!(!store.delete_skill("reviewer").await.unwrap());
    assert!(store.get_skill("reviewer").await.unwrap().is_none());
    store.close().await;
}

async fn skill_candidates_and_enabled_filter(db: TestDb) {
    let store = db.open().await;
    store
        .create_skill(spec(
            "sql-expert",
            "Writes PostgreSQL queries",
            &["database"],
            "data",
        ))
        .await
        .unwrap();
    let mut high = spec("deploy", "Ships releases to production", &["ops"], "ops");
    high.priority = 10;
    store.create_skill(high).await.unwrap();
    let mut off = spec("old-sql", "Deprecated SQL helper", &["database"], "data");
    off.enabled = false;
    store.create_skill(off).await.unwrap();

    let names = |skills: Vec<turnstone_store::Skill>| -> Vec<String> {
        skills.into_iter().map(|s| s.spec.name).collect()
    };
    // Enabled only, priority first; all when asked.
    assert_eq!(
        names(store.list_skills(true).await.unwrap()),
        ["deploy", "sql-expert"]
    );
    assert_eq!(
        names(store.list_skills(false).await.unwrap()),
        ["deploy", "old-sql", "sql-expert"]
    );

    // Any word, case-insensitive, in name/description/tags/category; disabled skills never.
    assert_eq!(
        names(store.skill_candidates("DATABASE", 10).await.unwrap()),
        ["sql-expert"]
    );
    assert_eq!(
        names(store.skill_candidates("postgresql ops", 10).await.unwrap()),
        ["deploy", "sql-expert"]
    );
    assert!(
        store
            .skill_candidates("nothing-like-this", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // LIKE syntax in the query is plain text.
    assert!(store.skill_candidates("%", 10).await.unwrap().len() == 2);
    assert!(
        store
            .skill_candidates("100%_", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.skill_candidates("", 1).await.unwrap().len(), 1);
    store.close().await;
}

/// A database written before migration 0003 (type `general`) reads as `project` after it.
fn mcp_spec(name: &str, server: &str, content: &str) -> SkillSpec {
    SkillSpec {
        origin: "mcp".into(),
        mcp_server: server.into(),
        readonly: true,
        ..SkillSpec::new(name, content)
    }
}

async fn mcp_skills_never_touch_other_rows(db: TestDb) {
    let store = db.open().await;
    // Inserted, then replaced in place (same id, new content).
    let first = store
        .upsert_mcp_skill(mcp_spec("mcp__docs__intro", "docs", "Hello."))
        .await
        .unwrap()
        .expect("inserted");
    assert_eq!(first.spec.origin, "mcp");
    assert!(first.spec.readonly);
    let again = store
        .upsert_mcp_skill(mcp_spec("mcp__docs__intro", "docs", "Hello again."))
        .await
        .unwrap()
        .expect("updated");
    assert_eq!(again.template_id, first.template_id);
    assert_eq!(again.spec.content, "Hello again.");

    // A manual skill of the name is never overwritten, nor the row of another server.
    store
        .create_skill(SkillSpec::new("shared", "Manual text."))
        .await
        .unwrap();
    assert_eq!(
        store
            .upsert_mcp_skill(mcp_spec("shared", "docs", "From MCP."))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .upsert_mcp_skill(mcp_spec("mcp__docs__intro", "other", "Hijack."))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .get_skill("shared")
            .await
            .unwrap()
            .unwrap()
            .spec
            .content,
        "Manual text."
    );
    assert_eq!(
        store
            .get_skill("mcp__docs__intro")
            .await
            .unwrap()
            .unwrap()
            .spec
            .content,
        "Hello again."
    );
    // Only MCP specs with a server are accepted.
    assert!(matches!(
        store
            .upsert_mcp_skill(SkillSpec::new("plain", "Manual."))
            .await,
        Err(StoreError::InvalidInput(_))
    ));

    // Deletion only removes the MCP row of that server.
    assert!(!store.delete_mcp_skill("shared", "docs").await.unwrap());
    assert!(
        !store
            .delete_mcp_skill("mcp__docs__intro", "other")
            .await
            .unwrap()
    );
    assert!(store.get_skill("shared").await.unwrap().is_some());
    assert!(
        store
            .delete_mcp_skill("mcp__docs__intro", "docs")
            .await
            .unwrap()
    );
    assert!(store.get_skill("mcp__docs__intro").await.unwrap().is_none());
    assert!(
        !store
            .delete_mcp_skill("mcp__docs__intro", "docs")
            .await
            .unwrap()
    );
}

async fn general_memories_become_project(db: TestDb) {
    // Apply only migration 0001 from a copy of the backend's migration directory.
    let dir = tempfile::tempdir().unwrap();
    let sub = match db.backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(sub)
        .join("0001_initial.sql");
    std::fs::copy(&source, dir.path().join("0001_initial.sql")).unwrap();
    let migrator = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
    let insert = "INSERT INTO structured_memories (memory_id, name, description, type, scope, \
                  scope_id, content, created, updated) VALUES \
                  ('m1', 'editor', 'd', 'general', 'global', '', 'uses vim', '2026-01-01', '2026-01-01'), \
                  ('m2', 'who', 'd', 'user', 'global', '', 'alice', '2026-01-01', '2026-01-01')";
    match &db.config.backend {
        turnstone_store::StoreBackend::Sqlite { path } => {
            let opts = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true);
            let pool = sqlx::SqlitePool::connect_with(opts).await.unwrap();
            migrator.run(&pool).await.unwrap();
            sqlx::query(insert).execute(&pool).await.unwrap();
            pool.close().await;
        }
        turnstone_store::StoreBackend::Postgres { url, .. } => {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            migrator.run(&pool).await.unwrap();
            sqlx::query(insert).execute(&pool).await.unwrap();
            pool.close().await;
        }
    }

    let store = db.open().await;
    let editor = store
        .get_memory("editor", &ScopeRef::global())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(editor.mem_type, MemoryType::Project);
    assert_eq!(editor.content, "uses vim");
    assert_eq!(editor.access_count, 1);
    let who = store
        .get_memory("who", &ScopeRef::new(MemoryScope::Global, ""))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(who.mem_type, MemoryType::User);
    // The unique key survived the rebuild: saving the same name updates in place.
    let again = store
        .save_memory(turnstone_store::MemoryInput {
            name: "editor".into(),
            content: "uses helix".into(),
            description: "d".into(),
            mem_type: MemoryType::Project,
            scope: ScopeRef::global(),
        })
        .await
        .unwrap();
    assert_eq!(again.memory_id, "m1");
    assert!("general".parse::<MemoryType>().is_err());
    store.close().await;
}
