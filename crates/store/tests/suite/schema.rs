//! The two migration sets must produce the same tables and columns.

use crate::support::{Backend, TestDb};

/// Backend-specific search machinery, the only allowed differences.
fn normalise(mut schema: turnstone_store::SchemaDescription) -> turnstone_store::SchemaDescription {
    schema.retain(|table, _| {
        !table.starts_with("conversations_fts") && !table.starts_with("conversation_search")
    });
    schema
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_and_postgres_schemas_match() {
    let sqlite_db = TestDb::new(Backend::Sqlite).await;
    let pg_db = TestDb::new(Backend::Postgres).await;
    let sqlite = sqlite_db.open().await;
    let pg = pg_db.open().await;
    let sqlite_schema = sqlite.describe_schema().await.unwrap();
    let pg_schema = pg.describe_schema().await.unwrap();

    // The search machinery exists where expected.
    assert!(sqlite_schema.contains_key("conversations_fts"));
    assert_eq!(
        pg_schema["conversation_search"]
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["id", "tsv"]
    );
    assert!(pg_schema.contains_key("conversation_search_pending"));
    // The search vector left the write path (migration 0014).
    assert!(!pg_schema["conversations"].contains("content_tsv"));

    let sqlite_schema = normalise(sqlite_schema);
    let pg_schema = normalise(pg_schema);
    assert_eq!(sqlite_schema, pg_schema);
    let tables: Vec<_> = sqlite_schema.keys().map(String::as_str).collect();
    assert_eq!(
        tables,
        [
            "api_tokens",
            "approvals",
            "audit_events",
            "conversations",
            "intent_verdicts",
            "model_definitions",
            "output_assessments",
            "prompt_templates",
            "queued_sends",
            "roles",
            "scheduled_task_runs",
            "scheduled_tasks",
            "structured_memories",
            "system_settings",
            "tool_policies",
            "usage_events",
            "user_roles",
            "users",
            "watches",
            "workstream_config",
            "workstream_events",
            "workstreams"
        ]
    );
    assert!(sqlite_schema["conversations"].contains("tool_call_id"));
    assert_eq!(sqlite_schema["prompt_templates"].len(), 38);
    assert_eq!(
        sqlite_schema["watches"]
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        [
            "active",
            "command",
            "created",
            "created_by",
            "interval_secs",
            "last_exit_code",
            "last_output",
            "last_poll",
            "max_polls",
            "name",
            "next_poll",
            "node_id",
            "poll_count",
            "stop_on",
            "updated",
            "watch_id",
            "ws_id"
        ]
    );
    sqlite.close().await;
    pg.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_idempotent_across_restarts() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let db = TestDb::new(backend).await;
        let first = db.open().await;
        first.close().await;
        let second = db.open().await;
        assert!(
            second
                .describe_schema()
                .await
                .unwrap()
                .contains_key("workstreams")
        );
        second.close().await;
    }
}

#[tokio::test]
async fn unopenable_sqlite_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing-dir").join("x.db");
    let config = turnstone_store::StoreConfig::sqlite(&path);
    match turnstone_store::connect(&config).await {
        Err(turnstone_store::StoreError::Connect { target, .. }) => {
            assert!(target.contains("missing-dir"), "{target}");
        }
        Err(other) => panic!("expected a connect error, got {other}"),
        Ok(_) => panic!("opening a file in a missing directory must fail"),
    }
}

#[test]
fn default_config_is_sqlite_in_working_dir() {
    let config = turnstone_store::StoreConfig::default();
    assert_eq!(
        config.backend,
        turnstone_store::StoreBackend::Sqlite {
            path: ".turnstone.db".into()
        }
    );
    // The URL (which may hold a password) never shows in Debug output.
    let pg = turnstone_store::StoreConfig::postgres("postgres://u:secret@127.0.0.1/db", 3);
    assert!(!format!("{pg:?}").contains("secret"));
}
