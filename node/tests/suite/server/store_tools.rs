//! The `memory`, `recall` and `skill` tools on the node's backends over a real SQLite store
//! in a temp dir (no node: the tools are driven directly, as the engine drives them).

use std::sync::{Arc, Weak};

use serde_json::{Value, json};
use turnstone_store::{MemoryFilter, MemoryType, NewMessage, SkillSpec, Store, StoreConfig};
use turnstone_tools::{NoOutput, Tool, ToolContext, ToolOutput, ToolRegistry};

pub(super) struct Tools {
    registry: ToolRegistry,
    pub(super) store: Arc<dyn Store>,
    dir: tempfile::TempDir,
}

pub(super) async fn tools() -> Tools {
    let dir = tempfile::tempdir().unwrap();
    let store = turnstone_store::connect(&StoreConfig::sqlite(dir.path().join("t.db")))
        .await
        .unwrap();
    let registry = ToolRegistry::new();
    turnstone_node::store_tools::register(&registry, store.clone(), Weak::new()).unwrap();
    Tools {
        registry,
        store,
        dir,
    }
}

impl Tools {
    pub(super) fn ctx(&self, ws_id: &str) -> ToolContext {
        ToolContext::new(self.dir.path()).for_workstream(ws_id, "node-test")
    }

    pub(super) fn tool(&self, name: &str) -> Arc<dyn Tool> {
        self.registry.get(name).unwrap()
    }

    /// Prepares and runs one call; a refused preparation comes back as an error output.
    async fn call(&self, name: &str, ws_id: &str, args: Value) -> ToolOutput {
        let tool = self.tool(name);
        let ctx = self.ctx(ws_id);
        match tool.prepare(args, &ctx) {
            Ok(prepared) => tool.execute(&prepared, &ctx, &NoOutput).await,
            Err(text) => ToolOutput::error(text),
        }
    }

    pub(super) async fn ok(&self, name: &str, ws_id: &str, args: Value) -> String {
        let out = self.call(name, ws_id, args.clone()).await;
        assert!(!out.is_error, "{name} {args} failed: {}", out.content);
        out.content
    }

    async fn err(&self, name: &str, ws_id: &str, args: Value) -> String {
        let out = self.call(name, ws_id, args.clone()).await;
        assert!(out.is_error, "{name} {args} should fail: {}", out.content);
        out.content
    }
}

#[tokio::test]
async fn the_three_tools_register_with_their_metadata() {
    let t = tools().await;
    let names = t.registry.names();
    assert_eq!(names, ["memory", "recall", "skill"]);
    let meta = |n: &str| t.tool(n).definition().meta.clone();
    assert!(meta("memory").auto_approve && !meta("memory").task_agent);
    assert_eq!(meta("memory").primary_key.as_deref(), Some("name"));
    assert!(meta("recall").auto_approve && !meta("recall").task_agent);
    assert_eq!(meta("recall").primary_key.as_deref(), Some("query"));
    assert!(!meta("skill").auto_approve && !meta("skill").task_agent);
    assert_eq!(meta("skill").primary_key.as_deref(), Some("name"));
    let params = t.tool("memory").definition().parameters.clone();
    assert_eq!(
        params["properties"]["type"]["enum"],
        json!(["user", "project", "feedback", "reference"])
    );
    assert_eq!(params["properties"]["limit"]["type"], "integer");
    // A second registration is refused, not duplicated.
    assert!(
        turnstone_node::store_tools::register(&t.registry, t.store.clone(), Weak::new()).is_err()
    );
    assert_eq!(t.registry.len(), 3);
}

#[tokio::test]
async fn memory_save_get_search_list_delete() {
    let t = tools().await;
    let prepared = t
        .tool("memory")
        .prepare(
            json!({"action": "save", "name": "x", "content": "c", "description": "d"}),
            &t.ctx("ws1"),
        )
        .unwrap();
    assert!(!prepared.needs_approval);
    assert_eq!(prepared.approval_label, "memory");

    let saved = t
        .ok(
            "memory",
            "ws1",
            json!({"action": "save", "name": "Deploy-Notes", "content": "deploy with make release",
                   "description": "how releases are shipped"}),
        )
        .await;
    assert!(
        saved.contains("'deploy_notes'") && saved.contains("project") && saved.contains("global"),
        "{saved}"
    );

    let got = t
        .ok(
            "memory",
            "ws2",
            json!({"action": "get", "name": "deploy_notes"}),
        )
        .await;
    assert!(got.contains("deploy with make release"), "{got}");
    assert!(got.contains("how releases are shipped"), "{got}");

    // Stored as the store's `project` type, visible to the HTTP API's vocabulary.
    let stored = t
        .store
        .list_memories(&MemoryFilter::default(), 10)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].mem_type, MemoryType::Project);
    assert_eq!(stored[0].access_count, 1);

    // Upsert by name: same memory, new content and type.
    t.ok(
        "memory",
        "ws1",
        json!({"action": "save", "name": "deploy_notes", "content": "deploy with make ship",
               "description": "how releases are shipped", "type": "reference"}),
    )
    .await;
    let found = t
        .ok(
            "memory",
            "ws1",
            json!({"action": "search", "query": "SHIP releases"}),
        )
        .await;
    assert!(found.starts_with("1 memories:"), "{found}");
    assert!(
        found.contains("deploy_notes [reference, global]"),
        "{found}"
    );
    assert!(found.contains("make ship"), "{found}");
    let none = t
        .ok(
            "memory",
            "ws1",
            json!({"action": "search", "query": "kubernetes"}),
        )
        .await;
    assert_eq!(none, "No memories match 'kubernetes'.");

    let listed = t.ok("memory", "ws1", json!({"action": "list"})).await;
    assert!(listed.contains("deploy_notes [reference, global]: how releases are shipped"));

    let deleted = t
        .ok(
            "memory",
            "ws1",
            json!({"action": "delete", "name": "deploy_notes"}),
        )
        .await;
    assert!(
        deleted.contains("Deleted memory 'deploy_notes'"),
        "{deleted}"
    );
    let gone = t
        .err(
            "memory",
            "ws1",
            json!({"action": "get", "name": "deploy_notes"}),
        )
        .await;
    assert!(gone.contains("not found"), "{gone}");
    let again = t
        .err(
            "memory",
            "ws1",
            json!({"action": "delete", "name": "deploy_notes"}),
        )
        .await;
    assert!(again.contains("not found"), "{again}");
    assert_eq!(
        t.ok("memory", "ws1", json!({"action": "list"})).await,
        "No memories saved."
    );
}

#[tokio::test]
async fn memory_scopes_resolve_per_workstream() {
    let t = tools().await;
    t.ok(
        "memory",
        "ws1",
        json!({"action": "save", "name": "shared", "content": "global fact", "description": "g"}),
    )
    .await;
    t.ok(
        "memory",
        "ws1",
        json!({"action": "save", "name": "local", "content": "ws1 fact", "description": "l",
               "scope": "workstream", "type": "feedback"}),
    )
    .await;

    // Unscoped list/search: global + this workstream's.
    let ws1 = t.ok("memory", "ws1", json!({"action": "list"})).await;
    assert!(ws1.contains("shared [project, global]"), "{ws1}");
    assert!(ws1.contains("local [feedback, workstream]"), "{ws1}");
    let ws2 = t.ok("memory", "ws2", json!({"action": "list"})).await;
    assert!(ws2.contains("shared") && !ws2.contains("local"), "{ws2}");
    let search = t
        .ok(
            "memory",
            "ws2",
            json!({"action": "search", "query": "fact"}),
        )
        .await;
    assert!(search.starts_with("1 memories:"), "{search}");

    // Unscoped get resolves to global: the workstream memory needs its scope.
    let miss = t
        .err("memory", "ws1", json!({"action": "get", "name": "local"}))
        .await;
    assert!(miss.contains("not found in scope global"), "{miss}");
    let hit = t
        .ok(
            "memory",
            "ws1",
            json!({"action": "get", "name": "local", "scope": "workstream"}),
        )
        .await;
    assert!(hit.contains("ws1 fact"), "{hit}");
    // Another workstream's scope is its own.
    t.err(
        "memory",
        "ws2",
        json!({"action": "get", "name": "local", "scope": "workstream"}),
    )
    .await;
    // An explicit scope on list is exactly that scope; a type filter applies.
    let only_global = t
        .ok(
            "memory",
            "ws1",
            json!({"action": "list", "scope": "global"}),
        )
        .await;
    assert!(!only_global.contains("local"), "{only_global}");
    let feedback = t
        .ok(
            "memory",
            "ws1",
            json!({"action": "list", "type": "feedback"}),
        )
        .await;
    assert!(
        feedback.contains("local") && !feedback.contains("shared"),
        "{feedback}"
    );
    let limited = t
        .ok("memory", "ws1", json!({"action": "list", "limit": "1"}))
        .await;
    assert!(limited.starts_with("1 memories:"), "{limited}");
}

#[tokio::test]
async fn memory_bad_input_is_a_clear_error() {
    let t = tools().await;
    let cases = [
        (json!({"name": "x"}), "missing required argument 'action'"),
        (json!({"action": "forget"}), "invalid action 'forget'"),
        (
            json!({"action": "save", "name": "bad name!", "content": "c", "description": "d"}),
            "invalid memory name 'bad name!'",
        ),
        (
            json!({"action": "save", "name": "ok", "content": "c"}),
            "description is required",
        ),
        (
            json!({"action": "save", "name": "ok", "content": "c", "description": "  "}),
            "description is required",
        ),
        (
            json!({"action": "save", "name": "ok", "content": " ", "description": "d"}),
            "'content' must not be empty",
        ),
        (json!({"action": "get"}), "missing required argument 'name'"),
        (
            json!({"action": "search"}),
            "missing required argument 'query'",
        ),
        (
            json!({"action": "list", "type": "gossip"}),
            "invalid type 'gossip'",
        ),
        (
            json!({"action": "list", "scope": "galaxy"}),
            "invalid scope 'galaxy'",
        ),
        (
            json!({"action": "get", "name": "x", "scope": "user"}),
            "user scope needs a user identity",
        ),
        (
            json!({"action": "list", "scope": "coordinator"}),
            "not available to an interactive session",
        ),
        (
            json!({"action": "list", "limit": "many"}),
            "must be an integer",
        ),
        (json!("just a string"), "arguments must be a JSON object"),
    ];
    for (args, expected) in cases {
        let text = t.err("memory", "ws1", args.clone()).await;
        assert!(text.contains(expected), "{args}: {text}");
    }
    // A workstream scope needs a workstream.
    let text = t
        .err(
            "memory",
            "",
            json!({"action": "list", "scope": "workstream"}),
        )
        .await;
    assert!(text.contains("needs a workstream"), "{text}");
    // The seed era's `general` type reads as `project`.
    let saved = t
        .ok(
            "memory",
            "ws1",
            json!({"action": "save", "name": "old", "content": "c", "description": "d", "type": "general"}),
        )
        .await;
    assert!(saved.contains("type project"), "{saved}");
    // Nothing invalid was stored.
    assert_eq!(
        t.store
            .list_memories(&MemoryFilter::default(), 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn recall_finds_messages_written_through_the_store() {
    let t = tools().await;
    t.store
        .append_message(NewMessage::user(
            "ws-old",
            "we rotated the staging credentials on tuesday",
        ))
        .await
        .unwrap();
    t.store
        .append_message(NewMessage::tool_result(
            "ws-other",
            "call_1",
            Some("bash"),
            "credentials file written",
        ))
        .await
        .unwrap();
    t.store
        .append_message(NewMessage::assistant(
            "ws-old",
            Some("unrelated answer".into()),
        ))
        .await
        .unwrap();

    let found = t
        .ok("recall", "ws-new", json!({"query": "credentials"}))
        .await;
    let lines: Vec<&str> = found.lines().collect();
    assert_eq!(lines[0], "2 matches for 'credentials':", "{found}");
    // Newest first, with timestamp, workstream and role.
    assert!(
        lines[1].contains("ws ws-other tool_result (bash):"),
        "{found}"
    );
    assert!(lines[1].contains("[credentials]"), "{found}");
    assert!(lines[2].contains("ws ws-old user:"), "{found}");
    assert!(lines[2].starts_with("[20"), "timestamp first: {found}");

    let one = t
        .ok(
            "recall",
            "ws-new",
            json!({"query": "credentials", "limit": 1}),
        )
        .await;
    assert!(one.starts_with("1 matches"), "{one}");
    let both_words = t
        .ok("recall", "ws-new", json!({"query": "staging tuesday"}))
        .await;
    assert!(both_words.starts_with("1 matches"), "{both_words}");
    assert_eq!(
        t.ok("recall", "ws-new", json!({"query": "kubernetes"}))
            .await,
        "No matches for 'kubernetes' in conversation history."
    );
    // A bare string is the query (primary key), through the registry's lenient parsing.
    let args = t.registry.parse_arguments("recall", "staging").unwrap();
    assert_eq!(args, json!({"query": "staging"}));

    for (args, expected) in [
        (json!({}), "missing required argument 'query'"),
        (json!({"query": "   "}), "must not be empty"),
        (json!({"query": "?!*"}), "contains no words"),
        (json!({"query": "x", "limit": []}), "must be an integer"),
    ] {
        let text = t.err("recall", "ws-new", args.clone()).await;
        assert!(text.contains(expected), "{args}: {text}");
    }
}

#[tokio::test]
async fn skill_search_ranks_by_bm25_and_load_needs_approval() {
    let t = tools().await;
    let skill = |name: &str, description: &str, tags: &[&str], category: &str| SkillSpec {
        description: description.into(),
        tags: tags.iter().map(|s| s.to_string()).collect(),
        category: category.into(),
        ..SkillSpec::new(name, format!("Act as {name}."))
    };
    t.store
        .create_skill(skill("deploy", "Ship releases safely", &["ops"], "ops"))
        .await
        .unwrap();
    t.store
        .create_skill(skill(
            "sql-expert",
            "Write and tune SQL queries",
            &["sql", "database"],
            "data",
        ))
        .await
        .unwrap();
    let mut reviewer = skill("reviewer", "Review SQL migrations", &["review"], "code");
    reviewer.scan_status = "high".into();
    t.store.create_skill(reviewer).await.unwrap();
    let mut off = skill("sql-legacy", "Old SQL SQL SQL helper", &["sql"], "data");
    off.enabled = false;
    t.store.create_skill(off).await.unwrap();

    let found = t
        .ok("skill", "ws1", json!({"action": "search", "query": "sql"}))
        .await;
    let lines: Vec<&str> = found.lines().collect();
    assert_eq!(lines.len(), 3, "{found}");
    assert_eq!(lines[0], "2 skills:");
    // sql-expert mentions `sql` three times, reviewer once; disabled skills never show.
    assert!(
        lines[1].starts_with("- sql-expert (data): Write and tune SQL queries"),
        "{found}"
    );
    assert!(
        lines[1].contains("[risk: unscanned, activation: named]"),
        "{found}"
    );
    assert!(lines[2].starts_with("- reviewer (code)"), "{found}");
    assert!(lines[2].contains("risk: high"), "{found}");

    let all = t.ok("skill", "ws1", json!({"action": "search"})).await;
    assert!(all.starts_with("3 skills:"), "{all}");
    assert_eq!(
        t.ok(
            "skill",
            "ws1",
            json!({"action": "search", "query": "kubernetes"})
        )
        .await,
        "No skills match 'kubernetes'."
    );

    let ctx = t.ctx("ws1");
    let search = t
        .tool("skill")
        .prepare(json!({"action": "search", "query": "sql"}), &ctx)
        .unwrap();
    assert!(!search.needs_approval);
    let load = t
        .tool("skill")
        .prepare(json!({"action": "load", "name": "reviewer"}), &ctx)
        .unwrap();
    assert!(load.needs_approval);
    assert_eq!(load.approval_label, "skill");

    // Without a node behind the backend (the weak reference is empty) load fails cleanly.
    let text = t
        .err(
            "skill",
            "ws1",
            json!({"action": "load", "name": "reviewer"}),
        )
        .await;
    assert!(text.starts_with("Error: "), "{text}");
    for (args, expected) in [
        (
            json!({"action": "load"}),
            "missing required argument 'name'",
        ),
        (json!({"action": "install"}), "invalid action 'install'"),
        (json!({}), "missing required argument 'action'"),
    ] {
        let text = t.err("skill", "ws1", args.clone()).await;
        assert!(text.contains(expected), "{args}: {text}");
    }
    let text = t
        .err("skill", "", json!({"action": "load", "name": "reviewer"}))
        .await;
    assert!(text.contains("only be loaded in a workstream"), "{text}");
}
