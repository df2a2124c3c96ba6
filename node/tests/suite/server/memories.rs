//! The memory endpoints (`/v1/api/memories`: upsert, list, search, delete, their validation
//! and scope rules) and `/v1/api/models`.

use serde_json::{Value, json};
use turnstone_runtime::auth::{AUDIENCE_SERVER, Authenticator, JwtSecret, NewClaims, Scopes, mint};

use super::*;

const SECRET: &str = "a-test-secret-that-is-long-enough-for-hs256";

/// A persistent node whose authenticator also accepts JWTs (for user identities).
pub(super) struct MemNode {
    pub(super) t: TestNode,
    _db: tempfile::TempDir,
}

pub(super) async fn mem_node() -> MemNode {
    let db = tempfile::tempdir().unwrap();
    let auth = Authenticator::new(
        true,
        Some(JwtSecret::new(SECRET)),
        TestNode::test_tokens(),
        AUDIENCE_SERVER,
    );
    let t = TestNode::spawn(Spec {
        db: Some(db.path().join("m.db")),
        auth: Some(auth),
        ..Spec::default()
    })
    .await;
    MemNode { t, _db: db }
}

/// A JWT for `user` with `scopes`.
pub(super) fn user_token(user: &str, scopes: &str) -> String {
    let claims = NewClaims::new(user, Scopes::parse(scopes), "password", AUDIENCE_SERVER);
    mint(
        &claims,
        &JwtSecret::new(SECRET),
        std::time::Duration::from_secs(600),
    )
    .unwrap()
}

pub(super) async fn save(t: &TestNode, token: &str, body: Value) -> (u16, Value) {
    call(
        t,
        reqwest::Method::POST,
        "/v1/api/memories",
        token,
        Some(body),
    )
    .await
}

async fn list(t: &TestNode, token: &str, query: &str) -> (u16, Value) {
    call(
        t,
        reqwest::Method::GET,
        &format!("/v1/api/memories{query}"),
        token,
        None,
    )
    .await
}

async fn search(t: &TestNode, token: &str, body: Value) -> (u16, Value) {
    call(
        t,
        reqwest::Method::POST,
        "/v1/api/memories/search",
        token,
        Some(body),
    )
    .await
}

async fn delete(t: &TestNode, token: &str, path: &str) -> (u16, Value) {
    call(
        t,
        reqwest::Method::DELETE,
        &format!("/v1/api/memories/{path}"),
        token,
        None,
    )
    .await
}

fn names(body: &Value) -> Vec<&str> {
    body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect()
}

fn error(reply: &(u16, Value)) -> (u16, &str) {
    (reply.0, reply.1["error"].as_str().unwrap_or(""))
}

#[tokio::test]
async fn save_creates_with_201_then_updates_with_200_in_place() {
    let m = mem_node().await;
    let (status, row) = save(
        &m.t,
        FULL,
        json!({"name": "My-Project Notes", "content": "first", "description": "d"}),
    )
    .await;
    assert_eq!(status, 201, "{row}");
    let keys: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = vec![
        "memory_id",
        "name",
        "description",
        "type",
        "scope",
        "scope_id",
        "content",
        "created",
        "updated",
        "last_accessed",
        "access_count",
    ];
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    assert_eq!(row["name"], "my_project_notes");
    assert_eq!(row["type"], "project");
    assert_eq!(row["scope"], "global");
    assert_eq!(row["scope_id"], "");
    assert_eq!(row["content"], "first");
    let id = row["memory_id"].as_str().unwrap();
    assert_eq!(id.len(), 36, "dashed uuid: {id}");
    assert_eq!(id.matches('-').count(), 4);

    let (status, updated) = save(
        &m.t,
        FULL,
        json!({"name": "my_project-notes", "content": "second", "type": "feedback"}),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["memory_id"], row["memory_id"]);
    assert_eq!(updated["content"], "second");
    assert_eq!(updated["type"], "feedback");
    assert_eq!(updated["created"], row["created"]);

    let (status, body) = list(&m.t, READ, "").await;
    assert_eq!(status, 200);
    assert_eq!(body["total"], 1);
    assert_eq!(body["memories"][0]["content"], "second");
}

#[tokio::test]
async fn list_filters_by_type_and_scope_newest_first_with_a_limit() {
    let m = mem_node().await;
    let t = &m.t;
    for (name, ty, scope, scope_id) in [
        ("a", "project", "global", ""),
        ("b", "feedback", "global", ""),
        ("c", "reference", "workstream", "ws1"),
        ("d", "reference", "workstream", "ws2"),
    ] {
        let (status, _) = save(
            t,
            FULL,
            json!({"name": name, "content": "x", "type": ty, "scope": scope, "scope_id": scope_id}),
        )
        .await;
        assert_eq!(status, 201);
    }
    // Touch `a`: it becomes the newest.
    assert_eq!(
        save(t, FULL, json!({"name": "a", "content": "y"})).await.0,
        200
    );

    let (status, body) = list(t, READ, "").await;
    assert_eq!(status, 200);
    assert_eq!(names(&body), ["a", "d", "c", "b"]);
    assert_eq!(body["total"], 4);

    let (_, body) = list(t, READ, "?type=reference").await;
    assert_eq!(names(&body), ["d", "c"]);
    let (_, body) = list(t, READ, "?scope=workstream").await;
    assert_eq!(names(&body), ["d", "c"]);
    let (_, body) = list(t, READ, "?scope=workstream&scope_id=ws1").await;
    assert_eq!(names(&body), ["c"]);
    assert_eq!(body["total"], 1);
    let (_, body) = list(t, READ, "?scope=global").await;
    assert_eq!(names(&body), ["a", "b"]);
    let (_, body) = list(t, READ, "?limit=2").await;
    assert_eq!(names(&body), ["a", "d"]);
    assert_eq!(body["total"], 2);
    let (_, body) = list(t, READ, "?type=project").await;
    assert_eq!(names(&body), ["a"]);

    assert_eq!(
        error(&list(t, READ, "?limit=ten").await),
        (400, "limit must be an integer")
    );
    assert_eq!(
        error(&list(t, READ, "?scope_id=ws1").await),
        (400, "scope is required when scope_id is provided")
    );
    assert_eq!(
        error(&list(t, READ, "?scope=global&scope_id=x").await),
        (400, "scope_id is not allowed with global scope")
    );
    assert_eq!(
        error(&list(t, READ, "?type=general").await),
        (
            400,
            "invalid type: general; must be one of ['feedback', 'project', 'reference', 'user']"
        )
    );
    assert_eq!(
        error(&list(t, READ, "?scope=team").await),
        (
            400,
            "invalid scope: team; must be one of ['global', 'user', 'workstream']"
        )
    );
}

#[tokio::test]
async fn save_validates_every_field() {
    let m = mem_node().await;
    let t = &m.t;
    let cases = [
        (
            json!({"content": "x"}),
            "name is required (max 256 characters)",
        ),
        (
            json!({"name": "   ", "content": "x"}),
            "name is required (max 256 characters)",
        ),
        (
            json!({"name": "n".repeat(257), "content": "x"}),
            "name is required (max 256 characters)",
        ),
        (json!({"name": "n"}), "content is required"),
        (
            json!({"name": "n", "content": "c".repeat(65_537)}),
            "content exceeds 65536 character limit",
        ),
        (
            json!({"name": "n", "content": "x", "type": "general"}),
            "invalid type: general; must be one of ['feedback', 'project', 'reference', 'user']",
        ),
        (
            json!({"name": "n", "content": "x", "scope": "team"}),
            "invalid scope: team; must be one of ['global', 'user', 'workstream']",
        ),
        (
            json!({"name": "n", "content": "x", "scope_id": "ws1"}),
            "scope_id is not allowed with global scope",
        ),
        (
            json!({"name": "n", "content": "x", "scope": "", "scope_id": "ws1"}),
            "scope is required when scope_id is provided",
        ),
        (
            json!({"name": "n", "content": "x", "scope": "workstream"}),
            "scope_id is required for workstream scope",
        ),
        (
            json!({"name": "n", "content": "x", "scope": "user"}),
            "scope_id is required for user scope",
        ),
    ];
    for (body, message) in cases {
        assert_eq!(
            error(&save(t, FULL, body.clone()).await),
            (400, message),
            "{body}"
        );
    }
    // Limits are inclusive.
    let (status, _) = save(
        t,
        FULL,
        json!({"name": "n".repeat(256), "content": "c".repeat(65_536)}),
    )
    .await;
    assert_eq!(status, 201);
    let (status, body) = call(t, reqwest::Method::POST, "/v1/api/memories", FULL, None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("Invalid JSON body"))
    );
    // Nothing invalid was stored.
    assert_eq!(list(t, READ, "").await.1["total"], 1);
}

#[tokio::test]
async fn search_needs_every_term_and_applies_filters() {
    let m = mem_node().await;
    let t = &m.t;
    for (name, description, content, ty) in [
        (
            "deploy_steps",
            "How we ship",
            "Run the Release pipeline",
            "project",
        ),
        (
            "style",
            "code style",
            "tabs versus spaces; release notes",
            "feedback",
        ),
        ("unrelated", "", "nothing here", "project"),
    ] {
        let body =
            json!({"name": name, "description": description, "content": content, "type": ty});
        assert_eq!(save(t, FULL, body).await.0, 201);
    }
    let (status, body) = search(t, READ, json!({"query": "release"})).await;
    assert_eq!(status, 200);
    assert_eq!(names(&body), ["style", "deploy_steps"]);
    assert_eq!(body["total"], 2);

    // Every term must match, in any of name, description, content (case-insensitive).
    let (_, body) = search(t, READ, json!({"query": "RELEASE ship"})).await;
    assert_eq!(names(&body), ["deploy_steps"]);
    let (_, body) = search(t, READ, json!({"query": "release absent"})).await;
    assert_eq!(body["total"], 0);
    let (_, body) = search(t, READ, json!({"query": "deploy_"})).await;
    assert_eq!(names(&body), ["deploy_steps"]);

    let (_, body) = search(t, READ, json!({"query": "release", "type": "feedback"})).await;
    assert_eq!(names(&body), ["style"]);
    let (_, body) = search(t, READ, json!({"query": "e", "limit": 1})).await;
    assert_eq!(body["total"], 1);

    assert_eq!(
        error(&search(t, READ, json!({"query": "  "})).await),
        (400, "query is required")
    );
    assert_eq!(
        error(&search(t, READ, json!({})).await),
        (400, "query is required")
    );
    assert_eq!(
        error(&search(t, READ, json!({"query": "x", "limit": "many"})).await),
        (400, "limit must be an integer")
    );
    assert_eq!(
        error(&search(t, READ, json!({"query": "x", "scope_id": "ws"})).await),
        (400, "scope is required when scope_id is provided")
    );
}

#[tokio::test]
async fn delete_removes_by_normalised_name_and_scope() {
    let m = mem_node().await;
    let t = &m.t;
    let body =
        json!({"name": "Old Note", "content": "x", "scope": "workstream", "scope_id": "ws1"});
    assert_eq!(save(t, FULL, body).await.0, 201);
    assert_eq!(
        save(t, FULL, json!({"name": "old_note", "content": "g"}))
            .await
            .0,
        201
    );

    // The workstream one is not the global one.
    assert_eq!(
        error(&delete(t, FULL, "old_note?scope=workstream&scope_id=ws2").await),
        (404, "Memory 'old_note' not found")
    );
    assert_eq!(
        error(&delete(t, FULL, "old_note?scope=workstream").await),
        (400, "scope_id is required for workstream scope")
    );
    assert_eq!(
        error(&delete(t, FULL, "old_note?scope_id=ws1").await),
        (400, "scope_id is not allowed with global scope")
    );
    let (status, body) = delete(t, FULL, "Old-Note?scope=workstream&scope_id=ws1").await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"status": "ok", "name": "old_note"}));
    assert_eq!(
        error(&delete(t, FULL, "old-note?scope=workstream&scope_id=ws1").await),
        (404, "Memory 'old_note' not found")
    );

    // Default scope is global.
    let (status, _) = delete(t, FULL, "old_note").await;
    assert_eq!(status, 200);
    assert_eq!(list(t, READ, "").await.1["total"], 0);
    assert_eq!(
        error(&delete(t, FULL, "old_note").await),
        (404, "Memory 'old_note' not found")
    );
}

#[tokio::test]
async fn user_scope_is_bound_to_the_callers_identity() {
    let m = mem_node().await;
    let t = &m.t;
    let alice = user_token("alice", "write");
    let bob = user_token("bob", "read");
    let mine =
        json!({"name": "pref", "content": "dark mode", "scope": "user", "scope_id": "alice"});

    // Config tokens have no user id.
    assert_eq!(
        error(&save(t, FULL, mine.clone()).await),
        (
            400,
            "User scope requires authentication with a user identity"
        )
    );
    assert_eq!(
        error(&list(t, READ, "?scope=user").await),
        (
            400,
            "User scope requires authentication with a user identity"
        )
    );

    let (status, row) = save(t, &alice, mine.clone()).await;
    assert_eq!(status, 201, "{row}");
    assert_eq!(
        (row["scope"].as_str(), row["scope_id"].as_str()),
        (Some("user"), Some("alice"))
    );

    // Another user's id is refused everywhere.
    let other = json!({"name": "pref", "content": "x", "scope": "user", "scope_id": "bob"});
    assert_eq!(
        error(&save(t, &alice, other).await),
        (403, "Cannot access another user's memories")
    );
    assert_eq!(
        error(&list(t, &bob, "?scope=user&scope_id=alice").await),
        (403, "Cannot access another user's memories")
    );
    assert_eq!(
        error(
            &search(
                t,
                &bob,
                json!({"query": "dark", "scope": "user", "scope_id": "alice"})
            )
            .await
        ),
        (403, "Cannot access another user's memories")
    );

    // A user filter without an id lists the caller's own memories.
    let (_, body) = list(t, &alice, "?scope=user").await;
    assert_eq!(names(&body), ["pref"]);
    let (_, body) = list(t, &bob, "?scope=user").await;
    assert_eq!(body["total"], 0);
    let (_, body) = search(t, &alice, json!({"query": "dark", "scope": "user"})).await;
    assert_eq!(names(&body), ["pref"]);

    assert_eq!(
        error(&delete(t, &alice, "pref?scope=user&scope_id=bob").await),
        (403, "Cannot access another user's memories")
    );
    let (status, _) = delete(t, &alice, "pref?scope=user&scope_id=alice").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_read_token_can_list_and_search_but_not_save_or_delete() {
    let m = mem_node().await;
    let t = &m.t;
    assert_eq!(
        save(t, FULL, json!({"name": "n", "content": "x"})).await.0,
        201
    );

    let (status, _) = save(t, READ, json!({"name": "m", "content": "x"})).await;
    assert_eq!(status, 403);
    let (status, _) = delete(t, READ, "n").await;
    assert_eq!(status, 403);
    let (status, body) = search(t, READ, json!({"query": "x"})).await;
    assert_eq!((status, body["total"].as_u64()), (200, Some(1)));
    assert_eq!(list(t, READ, "").await.0, 200);

    let (status, _) = list(t, "wrong-token", "").await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn without_storage_every_memory_route_is_503() {
    let t = TestNode::start().await;
    let expected = (503, "Storage not available");
    assert_eq!(error(&list(&t, READ, "").await), expected);
    assert_eq!(
        error(&save(&t, FULL, json!({"name": "n", "content": "x"})).await),
        expected
    );
    assert_eq!(
        error(&search(&t, READ, json!({"query": "x"})).await),
        expected
    );
    assert_eq!(error(&delete(&t, FULL, "n").await), expected);
}

#[tokio::test]
async fn models_lists_the_nodes_model() {
    let t = TestNode::start().await;
    let (status, body) = t.get("/v1/api/models", Some(READ)).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"models": [{"alias": "default", "model": "fake-model", "provider": "openai"}]})
    );
    let (status, _) = t.get("/v1/api/models", None).await;
    assert_eq!(status, 401);

    let t = TestNode::spawn(Spec {
        options: NodeOptions {
            model_alias: "fast".into(),
            ..NodeOptions::default()
        },
        ..Spec::default()
    })
    .await;
    let (_, body) = t.get("/v1/api/models", Some(READ)).await;
    assert_eq!(body["models"][0]["alias"], "fast");
}
