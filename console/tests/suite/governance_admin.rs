//! Tool policies, skills and memories administered in the console, on both backends:
//! create, list, update, delete, bad input answered 4xx with a message, the permissions
//! (`admin.policies`, `admin.skills`, `admin.memories`: a user without one gets 403), an
//! audit row per change, and what reaches the nodes — the policies and manual skills in
//! every `_internal/config-reload` body, memories read from every node and deleted on one.
//! (Their effect on real nodes is the whole-cluster test's,
//! `tests/…/cluster/console_governance.rs`.)

use reqwest::Method;
use serde_json::{Value, json};
use turnstone_console::model::CONSOLE_VERSION;

use super::db::{Db, both_backends};
use super::fake_node::FakeNode;
use super::*;

both_backends!(
    policies_crud_checks_and_push,
    skills_crud_checks_and_push,
    memories_across_nodes,
    permissions
);

/// A console on `db` that knows two scripted nodes.
pub(super) async fn cluster(db: &Db) -> (TestConsole, FakeNode, FakeNode) {
    let p = prefix();
    let a = FakeNode::start("node-a", CONSOLE_VERSION).await;
    let b = FakeNode::start("node-b", CONSOLE_VERSION).await;
    heartbeat(&p, "node-a", &a.url, 10).await;
    heartbeat(&p, "node-b", &b.url, 10).await;
    let c = TestConsole::start_with_store(&p, db.store.clone()).await;
    c.wait_for_nodes(&["node-a", "node-b"]).await;
    // The console pushes its state to each node that joins: wait for it, so a later push
    // is the last one a node got.
    for node in [&a, &b] {
        turnstone_testkit::assert_eventually!(
            !node.state.config_reloads.lock().unwrap().is_empty(),
            timeout = std::time::Duration::from_secs(30),
            "no catch-up push"
        );
    }
    (c, a, b)
}

/// The last config-reload body `node` received.
fn last_push(node: &FakeNode) -> Value {
    node.state
        .config_reloads
        .lock()
        .unwrap()
        .last()
        .cloned()
        .unwrap_or(Value::Null)
}

async fn audit_actions(db: &Db) -> Vec<String> {
    db.store
        .list_audit(turnstone_store::AuditQuery {
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect()
}

async fn policies_crud_checks_and_push(db: Db) {
    let (c, a, b) = cluster(&db).await;
    let call = |method: Method, path: String, body: Option<Value>| {
        let c = &c;
        async move { c.call(method, &path, body, Some(TOKEN)).await }
    };
    let (code, list) = c.get("/v1/api/admin/policies").await;
    assert_eq!((code, &list), (200, &json!({"policies": []})));

    let (code, body) = call(
        Method::POST,
        "/v1/api/admin/policies".into(),
        Some(json!({"name": "no-rm", "tool_pattern": "bash", "action": "deny", "priority": 5})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let id = body["policy"]["policy_id"].as_str().unwrap().to_string();
    assert_eq!(body["policy"]["source"], "admin");
    for node in ["node-a", "node-b"] {
        assert_eq!(body["reload"]["results"][node]["status"], "ok", "{body}");
    }
    // Every node got the console's policies in the push.
    for node in [&a, &b] {
        let pushed = last_push(node);
        assert_eq!(pushed["policies"][0]["policy_id"], id.as_str(), "{pushed}");
        assert_eq!(pushed["policies"][0]["action"], "deny");
        assert_eq!(pushed["skills"], json!([]));
    }
    let (code, body) = call(
        Method::POST,
        "/v1/api/admin/policies".into(),
        Some(json!({"name": "ask-mcp", "tool_pattern": "mcp__*", "action": "ask"})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (_, list) = c.get("/v1/api/admin/policies").await;
    let names: Vec<&str> = list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["no-rm", "ask-mcp"], "priority descending");

    // Update: the given fields.
    let path = format!("/v1/api/admin/policies/{id}");
    let (code, body) = call(
        Method::PUT,
        path.clone(),
        Some(json!({"action": "allow", "enabled": false})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["policy"]["action"], "allow");
    assert_eq!(body["policy"]["enabled"], false);
    assert_eq!(body["policy"]["tool_pattern"], "bash");
    assert_eq!(last_push(&a)["policies"][0]["action"], "allow");

    // Bad input: 4xx naming the problem; nothing stored.
    for (body, says) in [
        (json!({"name": "x", "tool_pattern": "bash"}), "required"),
        (
            json!({"name": "x", "tool_pattern": "bash", "action": "block"}),
            "action must be",
        ),
        (
            json!({"name": " ", "tool_pattern": "bash", "action": "deny"}),
            "name must not be empty",
        ),
        (
            json!({"name": "x", "tool_pattern": "bash", "action": "deny", "priority": 2_000_000}),
            "priority must be",
        ),
        (
            json!({"name": "x", "tool_pattern": "bash", "action": "deny", "colour": 1}),
            "colour",
        ),
    ] {
        assert_error(
            call(Method::POST, "/v1/api/admin/policies".into(), Some(body)).await,
            400,
            says,
        );
    }
    assert_error(
        call(Method::PUT, path.clone(), Some(json!({"org_id": "o"}))).await,
        400,
        "org_id cannot be changed",
    );
    assert_error(
        call(
            Method::PUT,
            "/v1/api/admin/policies/nope".into(),
            Some(json!({"action": "deny"})),
        )
        .await,
        404,
        "not found",
    );
    assert_error(
        call(
            Method::DELETE,
            "/v1/api/admin/policies/config:x".into(),
            None,
        )
        .await,
        403,
        "read-only",
    );
    assert_eq!(
        db.store.list_tool_policies(None).await.unwrap().len(),
        2,
        "nothing refused was stored"
    );

    // Delete: gone here and from the next push; a second delete is a 404.
    let (code, body) = call(Method::DELETE, path.clone(), None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["policy_id"], id.as_str());
    assert_eq!(last_push(&b)["policies"].as_array().unwrap().len(), 1);
    assert_error(call(Method::DELETE, path, None).await, 404, "not found");

    let actions = audit_actions(&db).await;
    assert_eq!(
        actions,
        [
            "policy.delete",
            "policy.update",
            "policy.create",
            "policy.create"
        ]
    );
}

async fn skills_crud_checks_and_push(db: Db) {
    let (c, a, _b) = cluster(&db).await;
    let call = |method: Method, path: String, body: Option<Value>| {
        let c = &c;
        async move { c.call(method, &path, body, Some(TOKEN)).await }
    };
    let (code, body) = call(
        Method::POST,
        "/v1/api/admin/skills".into(),
        Some(
            json!({"name": "reviewer", "content": "Review {{ws_id}} carefully.", "tags": ["code"]}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["skill"]["name"], "reviewer");
    assert_eq!(body["skill"]["origin"], "manual");
    assert_eq!(body["reload"]["results"]["node-a"]["status"], "ok");
    let pushed = last_push(&a);
    assert_eq!(pushed["skills"][0]["name"], "reviewer", "{pushed}");
    assert_eq!(
        pushed["skills"][0]["content"],
        "Review {{ws_id}} carefully."
    );
    // The picker lists it (read scope), the admin list with every column.
    let (_, picker) = c.get("/v1/api/skills").await;
    assert_eq!(picker["skills"][0]["name"], "reviewer");
    let (code, list) = c.get("/v1/api/admin/skills").await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["skills"][0]["tags"], json!(["code"]));

    let (code, body) = call(
        Method::PUT,
        "/v1/api/admin/skills/reviewer".into(),
        Some(json!({"enabled": false, "description": "off for now"})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["skill"]["enabled"], false);
    assert_eq!(body["skill"]["content"], "Review {{ws_id}} carefully.");
    assert_eq!(last_push(&a)["skills"][0]["enabled"], false);
    assert_eq!(c.get("/v1/api/skills").await.1, json!({"skills": []}));

    // Bad input.
    for (body, status, says) in [
        (json!({"name": "x"}), 400, "content is required"),
        (json!({"content": "c"}), 400, "name is required"),
        (
            json!({"name": "x", "content": "c", "colour": 1}),
            400,
            "Unknown skill field: colour",
        ),
        (
            json!({"name": "x", "content": "c", "priority": "high"}),
            400,
            "Invalid skill",
        ),
        (
            json!({"name": "reviewer", "content": "c"}),
            409,
            "already exists",
        ),
    ] {
        assert_error(
            call(Method::POST, "/v1/api/admin/skills".into(), Some(body)).await,
            status,
            says,
        );
    }
    assert_error(
        call(
            Method::PUT,
            "/v1/api/admin/skills/reviewer".into(),
            Some(json!({"name": "other"})),
        )
        .await,
        400,
        "name cannot be changed",
    );
    assert_error(
        call(
            Method::PUT,
            "/v1/api/admin/skills/nope".into(),
            Some(json!({"enabled": true})),
        )
        .await,
        404,
        "not found",
    );
    // An MCP-synced skill (a node's, in a shared database) is read-only and never pushed.
    let mut mcp = turnstone_store::SkillSpec::new("mcp-prompt", "from a server");
    mcp.origin = "mcp".into();
    mcp.mcp_server = "srv".into();
    mcp.readonly = true;
    db.store.upsert_mcp_skill(mcp).await.unwrap();
    assert_error(
        call(
            Method::DELETE,
            "/v1/api/admin/skills/mcp-prompt".into(),
            None,
        )
        .await,
        403,
        "read-only",
    );

    let (code, body) = call(Method::DELETE, "/v1/api/admin/skills/reviewer".into(), None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        last_push(&a)["skills"],
        json!([]),
        "MCP skills are never pushed"
    );
    assert_error(
        call(Method::DELETE, "/v1/api/admin/skills/reviewer".into(), None).await,
        404,
        "not found",
    );
    assert_eq!(
        audit_actions(&db).await,
        ["skill.delete", "skill.update", "skill.create"]
    );
}

async fn memories_across_nodes(db: Db) {
    let (c, a, b) = cluster(&db).await;
    let row = |id: &str, name: &str| {
        json!({"memory_id": id, "name": name, "description": "", "type": "project",
               "scope": "global", "scope_id": "", "content": "c"})
    };
    *a.state.memories.lock().unwrap() = vec![row("m1", "alpha"), row("shared", "both")];
    *b.state.memories.lock().unwrap() = vec![row("shared", "both")];

    let (code, body) = c.get("/v1/api/admin/memories").await;
    assert_eq!(code, 200, "{body}");
    let rows = body["memories"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "a shared memory is listed once: {body}");
    let shared = rows.iter().find(|m| m["memory_id"] == "shared").unwrap();
    let mut nodes: Vec<&str> = shared["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    nodes.sort_unstable();
    assert_eq!(nodes, ["node-a", "node-b"]);
    // One node, filters passed on.
    let (code, body) = c
        .get("/v1/api/admin/memories?node_id=node-b&scope=global&type=project")
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["memories"].as_array().unwrap().len(), 1);
    assert!(
        b.seen()
            .iter()
            .any(|s| s.path == "/v1/api/memories?type=project&scope=global"),
        "{:?}",
        b.seen()
    );
    assert_error(
        c.get("/v1/api/admin/memories?colour=red").await,
        400,
        "colour",
    );
    assert_error(
        c.get("/v1/api/admin/memories?node_id=node-z").await,
        404,
        "Unknown node",
    );

    // Delete on the named node, relayed; audited.
    let (code, body) = c
        .call(
            Method::DELETE,
            "/v1/api/admin/memories/alpha?node_id=node-a&scope=global",
            None,
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(a.state.memories.lock().unwrap().len(), 1);
    assert_error(
        c.call(
            Method::DELETE,
            "/v1/api/admin/memories/alpha?node_id=node-a",
            None,
            Some(TOKEN),
        )
        .await,
        404,
        "Memory not found",
    );
    assert_error(
        c.call(
            Method::DELETE,
            "/v1/api/admin/memories/alpha",
            None,
            Some(TOKEN),
        )
        .await,
        400,
        "node_id is required",
    );
    assert_eq!(audit_actions(&db).await, ["memory.delete"]);
}

async fn permissions(db: Db) {
    let (c, _a, _b) = cluster(&db).await;
    // A role with `admin.policies` only.
    let (code, role) = c
        .call(
            Method::POST,
            "/v1/api/admin/roles",
            Some(json!({"name": "policy-admins", "permissions": "read,admin.policies"})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 201, "{role}");
    let pat = c.user_jwt("pat", role["role_id"].as_str().unwrap()).await;
    let policy = Some(json!({"name": "n", "tool_pattern": "bash", "action": "deny"}));
    let skill = Some(json!({"name": "s", "content": "c"}));
    let (code, body) = c
        .call(
            Method::POST,
            "/v1/api/admin/policies",
            policy.clone(),
            Some(&pat),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(c.get_as("/v1/api/admin/policies", Some(&pat)).await.0, 200);
    for (method, path, body) in [
        (Method::GET, "/v1/api/admin/skills", None),
        (Method::POST, "/v1/api/admin/skills", skill.clone()),
        (Method::PUT, "/v1/api/admin/skills/s", skill.clone()),
        (Method::DELETE, "/v1/api/admin/skills/s", None),
        (Method::GET, "/v1/api/admin/memories", None),
        (
            Method::DELETE,
            "/v1/api/admin/memories/m?node_id=node-a",
            None,
        ),
    ] {
        assert_eq!(
            c.call(method.clone(), path, body.clone(), Some(&pat))
                .await
                .0,
            403,
            "{method} {path} with admin.policies only"
        );
        assert_eq!(
            c.call(method.clone(), path, body, None).await.0,
            401,
            "{method} {path} without credentials"
        );
    }
    for (method, path) in [
        (Method::GET, "/v1/api/admin/policies"),
        (Method::POST, "/v1/api/admin/policies"),
        (Method::PUT, "/v1/api/admin/policies/x"),
        (Method::DELETE, "/v1/api/admin/policies/x"),
    ] {
        assert_eq!(
            c.call(method.clone(), path, policy.clone(), None).await.0,
            401,
            "{method} {path} without credentials"
        );
    }
    // Nothing a refused caller sent was stored.
    assert!(db.store.list_skills(false).await.unwrap().is_empty());
}
