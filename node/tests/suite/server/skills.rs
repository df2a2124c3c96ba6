//! Skills end to end on a persistent node: the admin routes, `GET /v1/api/skills`, a
//! workstream created with a skill (the skill text reaches the model), `/skill`, the `skill`
//! tool, resume; and the model using `memory` and `recall`.

use serde_json::{Value, json};

use super::*;

struct SkillNode {
    t: TestNode,
    _db: tempfile::TempDir,
}

async fn skill_node() -> SkillNode {
    let db = tempfile::tempdir().unwrap();
    let t = TestNode::start_persistent(&db.path().join("s.db")).await;
    SkillNode { t, _db: db }
}

async fn create_skill(t: &TestNode, body: Value) -> (u16, Value) {
    call(
        t,
        reqwest::Method::POST,
        "/v1/api/admin/skills",
        FULL,
        Some(body),
    )
    .await
}

/// The system message of the fake model's latest request ("" when there is none).
fn last_system(t: &TestNode) -> String {
    let request = t.llm.last_request().unwrap();
    let first = &request["messages"][0];
    if first["role"] == "system" {
        first["content"].as_str().unwrap_or("").to_string()
    } else {
        String::new()
    }
}

/// Sends `message` to `ws_id` and reads its events through `turn_complete`.
async fn turn(t: &TestNode, events: &mut SseClient, ws_id: &str, message: &str) -> Vec<SseEvent> {
    let (status, body) = t
        .post("/v1/api/send", json!({"ws_id": ws_id, "message": message}))
        .await;
    assert_eq!(status, 200, "{body}");
    events.until("turn_complete").await
}

async fn command(t: &TestNode, events: &mut SseClient, ws_id: &str, text: &str) -> SseEvent {
    let (status, body) = t
        .post("/v1/api/command", json!({"ws_id": ws_id, "command": text}))
        .await;
    assert_eq!(status, 200, "{body}");
    loop {
        let e = events.next().await;
        if matches!(e.kind(), "info" | "error") {
            return e;
        }
    }
}

fn tool_outputs(events: &[SseEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind() == "tool_result")
        .map(|e| e.data["output"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn admin_routes_create_list_update_delete() {
    let n = skill_node().await;
    let t = &n.t;
    let (status, row) = create_skill(
        t,
        json!({"name": "reviewer", "content": "Review carefully.", "description": "Code review",
               "tags": ["code", "review"], "category": "engineering", "author": "ops"}),
    )
    .await;
    assert_eq!(status, 201, "{row}");
    assert_eq!(row["name"], "reviewer");
    assert_eq!(row["version"], "1.0.0");
    assert_eq!(row["activation"], "named");
    assert_eq!(row["enabled"], true);
    assert_eq!(row["template_id"].as_str().unwrap().len(), 36);

    // The approve scope is required for every admin path.
    let (status, _) = call(t, reqwest::Method::GET, "/v1/api/admin/skills", READ, None).await;
    assert_eq!(status, 403);
    let (status, _) = call(
        t,
        reqwest::Method::POST,
        "/v1/api/admin/skills",
        READ,
        Some(json!({"name": "x", "content": "y"})),
    )
    .await;
    assert_eq!(status, 403);

    // Duplicates and bad bodies are clear 4xx errors.
    let (status, body) = create_skill(t, json!({"name": "reviewer", "content": "again"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "Skill 'reviewer' already exists");
    for (body, expected) in [
        (json!({"content": "no name"}), "name is required"),
        (json!({"name": "n"}), "content is required"),
        (json!({"name": "a/b", "content": "x"}), "Invalid skill:"),
        (
            json!({"name": "n", "content": "x", "activation": "always"}),
            "Invalid skill:",
        ),
        (
            json!({"name": "n", "content": "x", "tags": "a,b"}),
            "Invalid skill:",
        ),
        (
            json!({"name": "n", "content": "x", "colour": "red"}),
            "Unknown skill field: colour",
        ),
    ] {
        let (status, reply) = create_skill(t, body.clone()).await;
        assert_eq!(status, 400, "{body}: {reply}");
        assert!(
            reply["error"].as_str().unwrap().contains(expected),
            "{body}: {reply}"
        );
    }

    let (status, disabled) = create_skill(
        t,
        json!({"name": "hidden", "content": "Hidden.", "enabled": false, "priority": 3}),
    )
    .await;
    assert_eq!(status, 201, "{disabled}");

    // The public list: enabled skills only, in the spec's shape.
    let (status, list) = t.get("/v1/api/skills", Some(READ)).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(
        list,
        json!({"skills": [{
            "name": "reviewer", "category": "engineering", "description": "Code review",
            "tags": ["code", "review"], "is_default": false, "activation": "named",
            "origin": "manual", "author": "ops", "version": "1.0.0"
        }]})
    );
    let (_, admin) = t.get("/v1/api/admin/skills", Some(FULL)).await;
    let names: Vec<&str> = admin["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hidden", "reviewer"]);

    // Update: the given fields change, the rest stays.
    let (status, updated) = call(
        t,
        reqwest::Method::PUT,
        "/v1/api/admin/skills/reviewer",
        FULL,
        Some(json!({"description": "Strict review", "version": "1.1.0"})),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["description"], "Strict review");
    assert_eq!(updated["content"], "Review carefully.");
    assert_eq!(updated["template_id"], row["template_id"]);
    for (path, body, want) in [
        (
            "/v1/api/admin/skills/nope",
            json!({"description": "x"}),
            404,
        ),
        (
            "/v1/api/admin/skills/reviewer",
            json!({"name": "renamed"}),
            400,
        ),
        ("/v1/api/admin/skills/reviewer", json!({"bogus": 1}), 400),
    ] {
        let (status, reply) = call(t, reqwest::Method::PUT, path, FULL, Some(body)).await;
        assert_eq!(status, want, "{path}: {reply}");
        assert!(reply["error"].is_string(), "{reply}");
    }

    // MCP-synced skills are read-only over the admin API.
    let (status, _) = create_skill(
        t,
        json!({"name": "mcp-prompt", "content": "From MCP.", "origin": "mcp",
               "mcp_server": "docs", "readonly": true}),
    )
    .await;
    assert_eq!(status, 201);
    let (status, reply) = call(
        t,
        reqwest::Method::PUT,
        "/v1/api/admin/skills/mcp-prompt",
        FULL,
        Some(json!({"description": "x"})),
    )
    .await;
    assert_eq!(status, 403, "{reply}");
    assert!(reply["error"].as_str().unwrap().contains("read-only"));
    let (status, _) = call(
        t,
        reqwest::Method::DELETE,
        "/v1/api/admin/skills/mcp-prompt",
        FULL,
        None,
    )
    .await;
    assert_eq!(status, 403);

    let (status, reply) = call(
        t,
        reqwest::Method::DELETE,
        "/v1/api/admin/skills/reviewer",
        FULL,
        None,
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply, json!({"status": "ok", "name": "reviewer"}));
    let (status, reply) = call(
        t,
        reqwest::Method::DELETE,
        "/v1/api/admin/skills/reviewer",
        FULL,
        None,
    )
    .await;
    assert_eq!(status, 404, "{reply}");
    assert_eq!(reply["error"], "Skill 'reviewer' not found");
}

#[tokio::test]
async fn skills_need_storage() {
    let t = TestNode::start().await;
    let (status, body) = t.get("/v1/api/skills", Some(READ)).await;
    assert_eq!(status, 503);
    assert_eq!(body, json!({"error": "Storage not available"}));
    let (status, body) = create_skill(&t, json!({"name": "x", "content": "y"})).await;
    assert_eq!(status, 503, "{body}");
    // Without storage no skill exists: the original's 400, and nothing is created.
    let before = t.node.manager.len();
    let (status, body) = t
        .post("/v1/api/workstreams/new", json!({"skill": "reviewer"}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], "Skill not found or disabled: reviewer");
    assert_eq!(t.node.manager.len(), before);
    // Nor the storage tools.
    assert!(t.node.manager.engine().registry().get("memory").is_none());
}

#[tokio::test]
async fn a_workstream_created_with_a_skill_sends_it_to_the_model() {
    let n = skill_node().await;
    let t = &n.t;
    let (status, _) = create_skill(
        t,
        json!({"name": "reviewer", "content": "SKILL-REVIEWER: review for {{model}} in {{ws_id}}.",
               "description": "Code review"}),
    )
    .await;
    assert_eq!(status, 201);
    create_skill(
        t,
        json!({"name": "off", "content": "Disabled.", "enabled": false}),
    )
    .await;

    for name in ["nope", "off"] {
        let before = t.node.manager.len();
        let (status, body) = t
            .post("/v1/api/workstreams/new", json!({"skill": name}))
            .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(
            body,
            json!({"error": format!("Skill not found or disabled: {name}")})
        );
        assert_eq!(t.node.manager.len(), before, "nothing created for {name}");
    }

    let (status, created) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "rev", "skill": "reviewer"}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let ws_id = created["ws_id"].as_str().unwrap().to_string();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    turn(t, &mut events, &ws_id, "hello").await;
    let expected = format!("SKILL-REVIEWER: review for fake-model in {ws_id}.");
    assert!(
        last_system(t).contains(&expected),
        "system prompt: {:?}",
        last_system(t)
    );

    // `/skill` shows it; `/skill clear` removes it from the next request.
    let shown = command(t, &mut events, &ws_id, "/skill").await;
    assert_eq!(
        shown.data["message"],
        "Active skill: reviewer. Available: reviewer."
    );
    let cleared = command(t, &mut events, &ws_id, "/skill clear").await;
    assert_eq!(cleared.data["message"], "Skill cleared: reviewer.");
    turn(t, &mut events, &ws_id, "after clear").await;
    assert!(
        !last_system(t).contains("SKILL-REVIEWER"),
        "{:?}",
        last_system(t)
    );
    let none = command(t, &mut events, &ws_id, "/skill").await;
    assert_eq!(
        none.data["message"],
        "No active skill. Available: reviewer."
    );

    // `/skill <name>` activates; an unknown one is an error event.
    let bad = command(t, &mut events, &ws_id, "/skill nope").await;
    assert_eq!(bad.kind(), "error");
    assert_eq!(bad.data["message"], "Skill not found or disabled: nope");
    let on = command(t, &mut events, &ws_id, "/skill reviewer").await;
    assert_eq!(on.data["message"], "Skill activated: reviewer.");
    turn(t, &mut events, &ws_id, "again").await;
    assert!(last_system(t).contains(&expected));

    // The choice is persisted and restored on resume.
    let p = t.node.persistence.clone().unwrap();
    p.writer.flush().await.unwrap();
    assert_eq!(
        p.store.load_config(&ws_id).await.unwrap().get("skill"),
        Some(&"reviewer".to_string())
    );
    let (status, _) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": ws_id}))
        .await;
    assert_eq!(status, 200);
    let (status, resumed) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["ws_id"], json!(ws_id));
    let live = t.node.workstream(&ws_id).unwrap();
    assert_eq!(live.skill().unwrap().name, "reviewer");
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    turn(t, &mut events, &ws_id, "resumed").await;
    assert!(last_system(t).contains(&expected));
}

/// The request settings of the fake model's latest request: temperature, max tokens,
/// reasoning effort.
fn last_settings(t: &TestNode) -> (Option<f64>, Option<u64>, Option<String>) {
    let r = t.llm.last_request().unwrap();
    (
        r["temperature"].as_f64(),
        r["max_completion_tokens"].as_u64(),
        r["chat_template_kwargs"]["reasoning_effort"]
            .as_str()
            .map(str::to_string),
    )
}

#[tokio::test]
async fn a_skills_request_settings_reach_the_model_until_it_is_cleared() {
    let n = skill_node().await;
    let t = &n.t;
    let (status, body) = create_skill(
        t,
        json!({"name": "precise", "content": "Be precise.", "temperature": 0.25,
               "max_tokens": 321, "reasoning_effort": "high"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Unusable values are ignored (logged), the rest applies; an unknown model too.
    create_skill(
        t,
        json!({"name": "odd", "content": "Odd.", "temperature": 7.5, "max_tokens": 0,
               "reasoning_effort": "extreme", "model": "no-such-model"}),
    )
    .await;
    let (status, created) = t.post("/v1/api/workstreams/new", json!({})).await;
    assert_eq!(status, 200, "{created}");
    let ws_id = created["ws_id"].as_str().unwrap().to_string();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;

    turn(t, &mut events, &ws_id, "before").await;
    let engine_default = last_settings(t);
    assert_eq!(engine_default, (None, None, Some("medium".into())));

    let on = command(t, &mut events, &ws_id, "/skill precise").await;
    assert_eq!(on.data["message"], "Skill activated: precise.");
    turn(t, &mut events, &ws_id, "with the skill").await;
    assert_eq!(
        last_settings(t),
        (Some(0.25), Some(321), Some("high".into()))
    );
    let live = t.node.workstream(&ws_id).unwrap();
    assert_eq!(live.status().effort, "high");

    let cleared = command(t, &mut events, &ws_id, "/skill clear").await;
    assert_eq!(cleared.data["message"], "Skill cleared: precise.");
    turn(t, &mut events, &ws_id, "after clear").await;
    assert_eq!(last_settings(t), engine_default);

    let on = command(t, &mut events, &ws_id, "/skill odd").await;
    assert_eq!(on.data["message"], "Skill activated: odd.");
    turn(t, &mut events, &ws_id, "odd skill").await;
    assert_eq!(last_settings(t), engine_default);
    assert_eq!(live.model().0, "fake-model");
    assert!(last_system(t).contains("Odd."));

    // A resumed session gets the skill's settings back with the skill.
    command(t, &mut events, &ws_id, "/skill precise").await;
    t.flush_store().await;
    let (status, _) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": ws_id}))
        .await;
    assert_eq!(status, 200);
    let (status, resumed) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200, "{resumed}");
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    turn(t, &mut events, &ws_id, "resumed").await;
    assert_eq!(
        last_settings(t),
        (Some(0.25), Some(321), Some("high".into()))
    );
}

#[tokio::test]
async fn the_model_loads_a_skill_with_the_skill_tool() {
    let n = skill_node().await;
    let t = &n.t;
    create_skill(
        t,
        json!({"name": "risky", "content": "SKILL-RISKY on {{node_id}}.",
               "description": "Runs scripts", "scan_status": "critical"}),
    )
    .await;
    let ws = t.default_ws.clone();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws, "message": r#"CALL: skill {"action": "search", "query": "scripts"}"#}),
    )
    .await;
    let done = events.until("turn_complete").await;
    let outputs = tool_outputs(&done);
    assert!(
        outputs[0].contains("- risky (general): Runs scripts [risk: critical"),
        "{outputs:?}"
    );

    // load needs approval; once approved, the next request of the same turn has the skill.
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws, "message": r#"CALL: skill {"action": "load", "name": "risky"}"#}),
    )
    .await;
    let asked = events.until("approve_request").await;
    let request = asked.last().unwrap();
    assert_eq!(request.data["items"][0]["func_name"], "skill");
    assert!(last_system(t).is_empty() || !last_system(t).contains("SKILL-RISKY"));
    let (status, _) = t
        .post("/v1/api/approve", json!({"ws_id": ws, "approved": true}))
        .await;
    assert_eq!(status, 200);
    let done = events.until("turn_complete").await;
    let outputs = tool_outputs(&done);
    assert!(
        outputs[0].starts_with("Skill 'risky' loaded: Runs scripts\nRisk level: critical"),
        "{outputs:?}"
    );
    assert!(outputs[0].contains("Warning:"), "{outputs:?}");
    assert!(
        last_system(t).contains("SKILL-RISKY on node-test."),
        "{:?}",
        last_system(t)
    );
    assert_eq!(
        t.node.workstream(&ws).unwrap().skill().unwrap().name,
        "risky"
    );

    // An unknown skill is a tool error the model sees.
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws, "message": r#"CALL: skill {"action": "load", "name": "ghost"}"#}),
    )
    .await;
    events.until("approve_request").await;
    t.post("/v1/api/approve", json!({"ws_id": ws, "approved": true}))
        .await;
    let done = events.until("turn_complete").await;
    let result = done.iter().find(|e| e.kind() == "tool_result").unwrap();
    assert_eq!(result.data["is_error"], true);
    assert_eq!(
        result.data["output"],
        "Error: Skill not found or disabled: ghost"
    );
}

#[tokio::test]
async fn the_model_saves_a_memory_and_recalls_it_later() {
    let n = skill_node().await;
    let t = &n.t;
    let ws = t.default_ws.clone();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let save = r#"CALL: memory {"action": "save", "name": "release_day", "content": "Releases ship on Thursdays after the freeze", "description": "when releases happen"}"#;
    let done = turn(t, &mut events, &ws, save).await;
    // Auto-approved: no approval was asked.
    assert!(
        !kinds(&done).contains(&"approve_request"),
        "{:?}",
        kinds(&done)
    );
    assert_eq!(
        tool_outputs(&done),
        ["Saved memory 'release_day' (type project, scope global)."]
    );

    // The HTTP API sees it with the API's vocabulary.
    let (status, list) = t.get("/v1/api/memories", Some(READ)).await;
    assert_eq!(status, 200);
    assert_eq!(list["total"], 1);
    assert_eq!(list["memories"][0]["type"], "project");
    assert_eq!(list["memories"][0]["name"], "release_day");

    // A later turn in another workstream gets it back.
    let (_, other) = t.post("/v1/api/workstreams/new", json!({})).await;
    let other = other["ws_id"].as_str().unwrap().to_string();
    let mut other_events = t.sse(&format!("/v1/api/events?ws_id={other}"), None).await;
    let done = turn(
        t,
        &mut other_events,
        &other,
        r#"CALL: memory {"action": "get", "name": "release_day"}"#,
    )
    .await;
    assert!(
        tool_outputs(&done)[0].contains("Releases ship on Thursdays after the freeze"),
        "{:?}",
        tool_outputs(&done)
    );

    // recall searches the conversation history (the first workstream's messages).
    t.flush_store().await;
    let done = turn(
        t,
        &mut other_events,
        &other,
        r#"CALL: recall {"query": "Thursdays freeze"}"#,
    )
    .await;
    let out = &tool_outputs(&done)[0];
    assert!(out.contains(&format!("ws {ws} ")), "{out}");
    assert!(out.contains("[Thursdays]"), "{out}");

    // Bad input comes back to the model as a tool error.
    let done = turn(
        t,
        &mut other_events,
        &other,
        r#"CALL: memory {"action": "save", "name": "x y!", "content": "c"}"#,
    )
    .await;
    let result = done.iter().find(|e| e.kind() == "tool_result").unwrap();
    assert_eq!(result.data["is_error"], true);
    assert!(
        result.data["output"]
            .as_str()
            .unwrap()
            .contains("invalid memory name"),
        "{}",
        result.data
    );
}
