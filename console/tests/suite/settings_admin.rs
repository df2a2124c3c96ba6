//! Cluster settings and model definitions in the console's store, on both backends: create,
//! list, update, delete, bad input answered 400 naming the key or field, the permissions
//! (`admin.settings`, `admin.models`), secrets never returned, and an audit row per change.
//! (Their reaching the nodes is the whole-cluster test's, `tests/…/cluster_settings.rs`.)

use reqwest::Method;
use serde_json::{Value, json};

use super::db::{Db, both_backends};
use super::*;

both_backends!(
    settings_crud_and_checks,
    model_definitions_crud_and_checks,
    reranker_role_checks_and_push,
    permissions,
    account_and_schedule_changes_are_audited
);

async fn console(db: &Db) -> TestConsole {
    TestConsole::start_with_store(&prefix(), db.store.clone()).await
}

async fn settings_crud_and_checks(db: Db) {
    let c = console(&db).await;
    let (code, list) = c.get("/v1/api/admin/settings").await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["settings"], json!([]));
    let keys: Vec<&str> = list["registry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    for key in [
        "server.approval_timeout",
        "judge.enabled",
        "tools.search",
        "session.auto_compact_pct",
        "tools.web_search_backend",
        "model.fallback",
    ] {
        assert!(keys.contains(&key), "{key} missing from {keys:?}");
    }

    let put = |key: &str, body: Value| {
        let path = format!("/v1/api/admin/settings/{key}");
        let c = &c;
        async move { c.call(Method::PUT, &path, Some(body), Some(TOKEN)).await }
    };
    let (code, body) = put("tools.search", json!({"value": "OFF"})).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["setting"]["value"], "off");
    assert_eq!(
        body["reload"]["results"],
        json!({}),
        "no nodes: nothing reloaded"
    );
    let (code, body) = put("tools.search", json!({"value": "on", "node_id": "node-7"})).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = put("server.approval_timeout", json!({"value": 30})).await;
    assert_eq!(code, 200, "{body}");
    let (_, list) = c.get("/v1/api/admin/settings").await;
    let rows: Vec<(String, String, Value)> = list["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().into(),
                r["node_id"].as_str().unwrap().into(),
                r["value"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("server.approval_timeout".into(), "".into(), json!(30)),
            ("tools.search".into(), "".into(), json!("off")),
            ("tools.search".into(), "node-7".into(), json!("on")),
        ]
    );
    // Changed again: replaced, not duplicated.
    assert_eq!(
        put("server.approval_timeout", json!({"value": 60})).await.0,
        200
    );

    // Bad input: 400 naming the key or the problem.
    assert_error(
        put("tools.nope", json!({"value": 1})).await,
        400,
        "Unknown setting: tools.nope",
    );
    assert_error(
        put("server.approval_timeout", json!({"value": 0})).await,
        400,
        "server.approval_timeout: must be between 1 and 604800",
    );
    assert_error(
        put("judge.enabled", json!({"value": "yes"})).await,
        400,
        "judge.enabled",
    );
    assert_error(put("tools.search", json!({})).await, 400, "value");
    assert_error(
        put("tools.search", json!({"value": "on", "extra": 1})).await,
        400,
        "extra",
    );
    assert_error(
        put("tools.search", json!({"value": "on", "node_id": "a/b"})).await,
        400,
        "Invalid node_id",
    );

    // Delete: the row goes; a second delete is a 404; an unknown key a 400.
    let (code, body) = c
        .call(
            Method::DELETE,
            "/v1/api/admin/settings/tools.search?node_id=node-7",
            None,
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_error(
        c.call(
            Method::DELETE,
            "/v1/api/admin/settings/tools.search?node_id=node-7",
            None,
            Some(TOKEN),
        )
        .await,
        404,
        "Setting not set",
    );
    assert_error(
        c.call(
            Method::DELETE,
            "/v1/api/admin/settings/tools.nope",
            None,
            Some(TOKEN),
        )
        .await,
        400,
        "Unknown setting",
    );
    let (_, list) = c.get("/v1/api/admin/settings").await;
    assert_eq!(list["settings"].as_array().unwrap().len(), 2);

    // Every change is in the audit log, newest first, with where it came from.
    let audit = db
        .store
        .list_audit(turnstone_store::AuditQuery {
            limit: 20,
            ..Default::default()
        })
        .await
        .unwrap();
    let actions: Vec<(&str, &str)> = audit
        .iter()
        .map(|e| (e.action.as_str(), e.resource_id.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            ("setting.delete", "tools.search"),
            ("setting.update", "server.approval_timeout"),
            ("setting.update", "server.approval_timeout"),
            ("setting.update", "tools.search"),
            ("setting.update", "tools.search"),
        ]
    );
    assert_eq!(audit[0].ip_address, "127.0.0.1");
    assert!(audit[1].detail.contains("60"), "{}", audit[1].detail);
    // …and through the API, filtered.
    let (code, body) = c
        .get("/v1/api/admin/audit?action=setting.delete&limit=5")
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["events"].as_array().unwrap().len(), 1);
    assert_eq!(body["events"][0]["resource_id"], "tools.search");
    assert_eq!(body["events"][0]["detail"]["node_id"], "node-7");
    let (code, body) = c.get("/v1/api/admin/audit").await;
    assert_eq!((code, body["events"].as_array().unwrap().len()), (200, 5));
    assert_error(c.get("/v1/api/admin/audit?limit=0").await, 400, "limit");
}

async fn model_definitions_crud_and_checks(db: Db) {
    let c = console(&db).await;
    let create = |body: Value| {
        let c = &c;
        async move {
            c.call(
                Method::POST,
                "/v1/api/admin/models",
                Some(body),
                Some(TOKEN),
            )
            .await
        }
    };
    let (code, body) = create(json!({
        "alias": "fast", "model": "m-fast", "base_url": "http://127.0.0.1:9/v1",
        "api_key": "sk-never-shown", "context_window": 8192
    }))
    .await;
    assert_eq!(code, 201, "{body}");
    let def = body["definition"].clone();
    assert_eq!(def["provider"], "openai");
    assert_eq!(def["has_api_key"], true);
    assert!(def.get("api_key").is_none());
    let id = def["definition_id"].as_str().unwrap().to_string();
    // The pickers' list (read scope): enabled aliases only; skills from the store.
    let (code, picker) = c.get("/v1/api/models").await;
    assert_eq!(code, 200, "{picker}");
    assert_eq!(
        picker["models"],
        json!([{"alias": "fast", "model": "m-fast", "provider": "openai"}])
    );
    assert_eq!(c.get("/v1/api/skills").await.1, json!({"skills": []}));

    let (code, list) = c.get("/v1/api/admin/models").await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["definitions"][0]["alias"], "fast");
    assert!(!list.to_string().contains("sk-never-shown"), "{list}");

    // Update: the given fields; the key stays unless given.
    let path = format!("/v1/api/admin/models/{id}");
    let (code, body) = c
        .call(
            Method::PUT,
            &path,
            Some(json!({"model": "m-faster", "enabled": false})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["definition"]["model"], "m-faster");
    assert_eq!(body["definition"]["enabled"], false);
    assert_eq!(body["definition"]["has_api_key"], true);
    assert_eq!(
        c.get("/v1/api/models").await.1["models"],
        json!([]),
        "disabled"
    );
    let stored = db.store.get_model_definition(&id).await.unwrap().unwrap();
    assert_eq!(stored.api_key, "sk-never-shown", "stored, for the nodes");

    // Bad input: 400 naming the field.
    for (body, says) in [
        (json!({"model": "m"}), "alias and model are required"),
        (json!({"alias": "a b", "model": "m"}), "alias"),
        (json!({"alias": "x", "model": " "}), "model"),
        (
            json!({"alias": "x", "model": "m", "provider": "gemini"}),
            "provider",
        ),
        (
            json!({"alias": "x", "model": "m", "base_url": "ftp://x"}),
            "base_url",
        ),
        (
            json!({"alias": "x", "model": "m", "context_window": 0}),
            "context_window",
        ),
        (
            json!({"alias": "x", "model": "m", "colour": "red"}),
            "colour",
        ),
        (json!({"alias": "fast", "model": "m"}), "taken"),
    ] {
        assert_error(create(body.clone()).await, 400, says);
    }
    assert_error(
        c.call(
            Method::PUT,
            "/v1/api/admin/models/nope",
            Some(json!({"model": "m"})),
            Some(TOKEN),
        )
        .await,
        404,
        "Model definition not found",
    );

    // Reload with no nodes: nothing to call.
    let (code, body) = c
        .call(
            Method::POST,
            "/v1/api/admin/models/reload",
            None,
            Some(TOKEN),
        )
        .await;
    assert_eq!((code, &body["status"]), (200, &json!("ok")), "{body}");

    let (code, _) = c.call(Method::DELETE, &path, None, Some(TOKEN)).await;
    assert_eq!(code, 200);
    assert_error(
        c.call(Method::DELETE, &path, None, Some(TOKEN)).await,
        404,
        "not found",
    );
    let audit = db
        .store
        .list_audit(turnstone_store::AuditQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["model.delete", "model.update", "model.create"]);
    assert!(audit.iter().all(|e| !e.detail.contains("sk-never-shown")));
}

/// The last model-reload body `node` received.
fn last_model_push(node: &super::fake_node::FakeNode) -> Value {
    node.state
        .model_reloads
        .lock()
        .unwrap()
        .last()
        .cloned()
        .unwrap_or(Value::Null)
}

async fn reranker_role_checks_and_push(db: Db) {
    let (c, a, b) = super::governance_admin::cluster(&db).await;
    // The catch-up's model push comes after its config push: wait, so a later push is the
    // last one a node got.
    for node in [&a, &b] {
        turnstone_testkit::assert_eventually!(
            !node.state.model_reloads.lock().unwrap().is_empty(),
            timeout = std::time::Duration::from_secs(30),
            "no catch-up model push"
        );
    }
    let call = |method: Method, path: String, body: Option<Value>| {
        let c = &c;
        async move { c.call(method, &path, body, Some(TOKEN)).await }
    };
    let create = |body: Value| call(Method::POST, "/v1/api/admin/models".into(), Some(body));
    let role = |value: Value| {
        call(
            Method::PUT,
            "/v1/api/admin/settings/model.reranker".into(),
            Some(json!({ "value": value })),
        )
    };
    let (code, chat) = create(json!({"alias": "chat", "model": "m-chat"})).await;
    assert_eq!(code, 201, "{chat}");
    assert_eq!(chat["definition"]["capabilities"], json!({}));
    let caps = json!({"supports_rerank": true, "rerank_instruction": "Find passages"});
    let (code, rr) = create(json!({
        "alias": "rr", "model": "qwen3-reranker", "base_url": "http://127.0.0.1:9/rerank",
        "api_key": "rk-never-shown", "capabilities": caps
    }))
    .await;
    assert_eq!(code, 201, "{rr}");
    assert_eq!(rr["definition"]["capabilities"], caps);
    let rr_id = rr["definition"]["definition_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, off) = create(json!({
        "alias": "rr-off", "model": "r", "base_url": "http://127.0.0.1:9",
        "capabilities": {"supports_rerank": true}, "enabled": false
    }))
    .await;
    assert_eq!(code, 201, "{off}");
    assert_error(
        create(json!({"alias": "x", "model": "m", "capabilities": {"supports_rerank": "yes"}}))
            .await,
        400,
        "capabilities.supports_rerank",
    );
    // A reranker is no model a workstream can run on.
    assert_eq!(
        c.get("/v1/api/models").await.1["models"],
        json!([{"alias": "chat", "model": "m-chat", "provider": "openai"}])
    );

    // The role: only an enabled supports_rerank definition; chat roles take no reranker.
    assert_error(role(json!("chat")).await, 400, "\"chat\" is not a reranker");
    assert_error(role(json!("rr-off")).await, 400, "\"rr-off\" is disabled");
    assert_error(
        role(json!("nope")).await,
        400,
        "no model definition \"nope\"",
    );
    assert_error(
        call(
            Method::PUT,
            "/v1/api/admin/settings/model.default".into(),
            Some(json!({"value": "rr"})),
        )
        .await,
        400,
        "model.default: model \"rr\" is a reranker",
    );
    assert_error(
        call(
            Method::PUT,
            "/v1/api/admin/settings/model.fallback".into(),
            Some(json!({"value": ["chat", "rr"]})),
        )
        .await,
        400,
        "not a chat model",
    );
    assert_eq!(
        db.store.list_settings().await.unwrap(),
        [],
        "nothing refused is stored"
    );

    let (code, body) = role(json!("rr")).await;
    assert_eq!(code, 200, "{body}");
    for (id, node) in [("node-a", &a), ("node-b", &b)] {
        assert_eq!(body["reload"]["results"][id]["status"], "ok", "{body}");
        // The model reload carries the role and the definition (its key included: the node
        // calls the endpoint with it).
        let pushed = last_model_push(node);
        let settings = pushed["settings"].as_array().unwrap();
        assert!(
            settings
                .iter()
                .any(|s| s["key"] == "model.reranker" && s["value"] == "rr"),
            "{pushed}"
        );
        let definitions = pushed["definitions"].as_array().unwrap();
        let sent = definitions.iter().find(|d| d["alias"] == "rr").unwrap();
        assert_eq!(sent["api_key"], "rk-never-shown");
    }
    assert!(!body.to_string().contains("rk-never-shown"), "{body}");

    // While selected, the definition cannot stop being usable.
    let path = format!("/v1/api/admin/models/{rr_id}");
    for change in [
        json!({"enabled": false}),
        json!({"capabilities": {}}),
        json!({"alias": "rr2"}),
    ] {
        assert_error(
            call(Method::PUT, path.clone(), Some(change)).await,
            400,
            "selected as the Reranker role",
        );
    }
    assert_error(
        call(Method::DELETE, path.clone(), None).await,
        400,
        "clear the role first",
    );
    // Other changes are fine; cleared, it can go.
    let (code, body) = call(
        Method::PUT,
        path.clone(),
        Some(json!({"capabilities": {"supports_rerank": true, "rerank_timeout": 2}})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = call(
        Method::DELETE,
        "/v1/api/admin/settings/model.reranker".into(),
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let pushed = last_model_push(&a);
    assert!(
        !pushed["settings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["key"] == "model.reranker"),
        "{pushed}"
    );
    assert_eq!(call(Method::DELETE, path, None).await.0, 200);
}

async fn permissions(db: Db) {
    let c = console(&db).await;
    // A role with `admin.settings` only; a viewer.
    let (code, role) = c
        .call(
            Method::POST,
            "/v1/api/admin/roles",
            Some(json!({"name": "settings-admins", "permissions": "read,admin.settings"})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 201, "{role}");
    let sam = &c.user_jwt("sam", role["role_id"].as_str().unwrap()).await;
    let vic = &c.user_jwt("vic", "viewer").await;
    let setting = Some(json!({"value": "on"}));
    let model = Some(json!({"alias": "a", "model": "m"}));
    let put = "/v1/api/admin/settings/tools.search";
    assert_eq!(
        c.call(Method::PUT, put, setting.clone(), Some(sam)).await.0,
        200
    );
    assert_eq!(c.get_as("/v1/api/admin/settings", Some(sam)).await.0, 200);
    assert_eq!(
        c.get_as("/v1/api/admin/audit", Some(sam)).await.0,
        403,
        "admin.settings does not open the audit log"
    );
    assert_eq!(
        c.call(
            Method::POST,
            "/v1/api/admin/models",
            model.clone(),
            Some(sam)
        )
        .await
        .0,
        403,
        "admin.settings does not open models"
    );
    for (method, path, body) in [
        (Method::GET, "/v1/api/admin/settings", None),
        (Method::PUT, put, setting.clone()),
        (Method::DELETE, put, None),
        (Method::POST, "/v1/api/admin/models", model.clone()),
        (Method::PUT, "/v1/api/admin/models/x", model.clone()),
        (Method::DELETE, "/v1/api/admin/models/x", None),
        (Method::POST, "/v1/api/admin/models/reload", None),
        (Method::GET, "/v1/api/admin/audit", None),
    ] {
        assert_eq!(
            c.call(method.clone(), path, body.clone(), Some(vic))
                .await
                .0,
            403,
            "{method} {path} as a viewer"
        );
        assert_eq!(
            c.call(method.clone(), path, body, None).await.0,
            401,
            "{method} {path} without credentials"
        );
    }
    // Nothing a refused caller sent was stored.
    assert_eq!(db.store.list_model_definitions().await.unwrap(), []);
}

async fn account_and_schedule_changes_are_audited(db: Db) {
    let c = console(&db).await;
    let call = |method: Method, path: &str, body: Option<Value>| {
        let c = &c;
        let path = path.to_string();
        async move { c.call(method, &path, body, Some(TOKEN)).await }
    };
    let (code, user) = call(
        Method::POST,
        "/v1/api/admin/users",
        Some(
            json!({"username": "ada", "display_name": "Ada", "password": "correct horse battery"}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{user}");
    let user_id = user["user_id"].as_str().unwrap().to_string();
    let (code, token) = call(
        Method::POST,
        "/v1/api/admin/tokens",
        Some(json!({"user_id": user_id, "name": "ci"})),
    )
    .await;
    assert_eq!(code, 201, "{token}");
    let raw = token["token"].as_str().unwrap().to_string();
    let (code, role) = call(
        Method::POST,
        "/v1/api/admin/roles",
        Some(json!({"name": "auditors", "permissions": "read,admin.audit"})),
    )
    .await;
    assert_eq!(code, 201, "{role}");
    let (code, task) = call(
        Method::POST,
        "/v1/api/admin/schedules",
        Some(json!({"name": "n", "schedule_type": "cron", "cron_expr": "0 3 * * *", "initial_message": "x"})),
    )
    .await;
    assert_eq!(code, 201, "{task}");
    let path = format!(
        "/v1/api/admin/schedules/{}",
        task["task_id"].as_str().unwrap()
    );
    assert_eq!(call(Method::DELETE, &path, None).await.0, 200);
    let path = format!("/v1/api/admin/users/{user_id}");
    assert_eq!(call(Method::DELETE, &path, None).await.0, 200);

    let (code, log) = c.get("/v1/api/admin/audit").await;
    assert_eq!(code, 200, "{log}");
    let actions: Vec<&str> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "user.delete",
            "schedule.delete",
            "schedule.create",
            "role.create",
            "token.create",
            "user.create"
        ]
    );
    assert!(!log.to_string().contains(&raw), "no token in the audit log");
    assert!(!log.to_string().contains("correct horse"), "no password");
    assert_eq!(log["events"][5]["ip_address"], "127.0.0.1");
}
