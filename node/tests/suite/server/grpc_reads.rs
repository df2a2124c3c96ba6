//! Memories and skills read over gRPC (`ListMemories`, `SearchMemories`, `ListSkills`): the
//! rows the HTTP routes answer, the same scopes and scope rules, the same refusals.

use serde_json::{Value, json};
use tonic::Code;
use turnstone_grpc::v1 as pb;

use super::grpc::{authed, client};
use super::memories::{mem_node, save, user_token};
use super::*;

/// A memory row as the HTTP API writes it.
fn row_json(m: &pb::Memory) -> Value {
    json!({
        "memory_id": m.memory_id,
        "name": m.name,
        "description": m.description,
        "type": m.r#type,
        "scope": m.scope,
        "scope_id": m.scope_id,
        "content": m.content,
        "created": m.created,
        "updated": m.updated,
        "last_accessed": m.last_accessed,
        "access_count": m.access_count,
    })
}

fn list_request(mem_type: &str, scope: &str, limit: Option<i64>) -> pb::ListMemoriesRequest {
    pb::ListMemoriesRequest {
        r#type: mem_type.into(),
        scope: scope.into(),
        scope_id: String::new(),
        limit,
    }
}

#[tokio::test]
async fn memories_are_listed_and_searched_as_over_http() {
    let m = mem_node().await;
    let t = &m.t;
    for (name, content, mem_type) in [
        ("alpha", "the blue harbour", "project"),
        ("beta", "a red harbour light", "reference"),
        ("gamma", "nothing to see", "project"),
    ] {
        let (status, body) = save(
            t,
            FULL,
            json!({"name": name, "content": content, "type": mem_type}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let alice = user_token("alice", "write");
    let (status, body) = save(
        t,
        &alice,
        json!({"name": "mine", "content": "harbour notes", "scope": "user", "scope_id": "alice"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let mut c = client(t).await;

    // The whole list: the rows of GET /v1/api/memories, in its order.
    let (status, http) = t.get("/v1/api/memories", Some(READ)).await;
    assert_eq!(status, 200);
    let listed = c
        .list_memories(authed(list_request("", "", None), READ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.total, 4);
    let rows: Vec<Value> = listed.memories.iter().map(row_json).collect();
    assert_eq!(Value::from(rows), http["memories"]);

    // Filters and the limit, as the query parameters.
    let projects = c
        .list_memories(authed(list_request("project", "global", Some(1)), READ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(projects.total, 1);
    let (_, http) = t
        .get(
            "/v1/api/memories?type=project&scope=global&limit=1",
            Some(READ),
        )
        .await;
    assert_eq!(
        Value::from(vec![row_json(&projects.memories[0])]),
        http["memories"]
    );

    // Search: every term must appear; the same rows as POST /v1/api/memories/search.
    let found = c
        .search_memories(authed(
            pb::SearchMemoriesRequest {
                query: "HARBOUR red".into(),
                ..Default::default()
            },
            READ,
        ))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<&str> = found.memories.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["beta"]);
    let (status, http) = t
        .post("/v1/api/memories/search", json!({"query": "HARBOUR red"}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        Value::from(found.memories.iter().map(row_json).collect::<Vec<_>>()),
        http["memories"]
    );

    // The user scope is the caller's own memories: alice sees hers, a config token has no
    // user, another user's id is refused.
    let user = |token: &str, scope_id: &str| {
        authed(
            pb::SearchMemoriesRequest {
                query: "harbour".into(),
                scope: "user".into(),
                scope_id: scope_id.into(),
                ..Default::default()
            },
            token,
        )
    };
    let own = c
        .search_memories(user(&alice, ""))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<&str> = own.memories.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["mine"]);
    assert_eq!(own.memories[0].scope_id, "alice");
    let no_user = c.search_memories(user(FULL, "")).await.unwrap_err();
    assert_eq!(no_user.code(), Code::InvalidArgument);
    assert_eq!(
        no_user.message(),
        "User scope requires authentication with a user identity"
    );
    let other = c.search_memories(user(&alice, "bob")).await.unwrap_err();
    assert_eq!(other.code(), Code::PermissionDenied);
    assert_eq!(other.message(), "Cannot access another user's memories");

    // Bad input: the route's messages.
    let bad_type = c
        .list_memories(authed(list_request("general", "", None), READ))
        .await
        .unwrap_err();
    assert_eq!(bad_type.code(), Code::InvalidArgument);
    assert_eq!(
        bad_type.message(),
        "invalid type: general; must be one of ['feedback', 'project', 'reference', 'user']"
    );
    let empty = c
        .search_memories(authed(
            pb::SearchMemoriesRequest {
                query: "   ".into(),
                ..Default::default()
            },
            READ,
        ))
        .await
        .unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument);
    assert_eq!(empty.message(), "query is required");
    let global_id = c
        .list_memories(authed(
            pb::ListMemoriesRequest {
                scope: "global".into(),
                scope_id: "x".into(),
                ..Default::default()
            },
            READ,
        ))
        .await
        .unwrap_err();
    assert_eq!(global_id.code(), Code::InvalidArgument);

    // The read scope is needed: no credential is refused.
    let anonymous = c
        .list_memories(tonic::Request::new(list_request("", "", None)))
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated);
}

#[tokio::test]
async fn skills_are_listed_as_over_http() {
    let m = mem_node().await;
    let t = &m.t;
    for (name, priority, enabled) in [
        ("writer", 1, true),
        ("reviewer", 5, true),
        ("off", 9, false),
    ] {
        let (status, body) = call(
            t,
            reqwest::Method::POST,
            "/v1/api/admin/skills",
            FULL,
            Some(json!({
                "name": name,
                "content": format!("You are the {name}."),
                "description": format!("{name} skill"),
                "tags": ["a", name],
                "priority": priority,
                "enabled": enabled,
                "author": "tests",
            })),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let mut c = client(t).await;
    let skills = c
        .list_skills(authed(pb::ListSkillsRequest {}, READ))
        .await
        .unwrap()
        .into_inner()
        .skills;
    let (status, http) = t.get("/v1/api/skills", Some(READ)).await;
    assert_eq!(status, 200);
    let rows: Vec<Value> = skills
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "category": s.category,
                "description": s.description,
                "tags": s.tags,
                "is_default": s.is_default,
                "activation": s.activation,
                "origin": s.origin,
                "author": s.author,
                "version": s.version,
            })
        })
        .collect();
    assert_eq!(Value::from(rows), http["skills"]);
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["reviewer", "writer"], "enabled only, by priority");
    assert_eq!(skills[0].tags, ["a", "reviewer"]);

    let anonymous = c
        .list_skills(tonic::Request::new(pb::ListSkillsRequest {}))
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated);
}

#[tokio::test]
async fn without_storage_memories_and_skills_are_unavailable() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    let memories = c
        .list_memories(authed(list_request("", "", None), READ))
        .await
        .unwrap_err();
    assert_eq!(memories.code(), Code::Unavailable);
    assert_eq!(memories.message(), "Storage not available");
    let skills = c
        .list_skills(authed(pb::ListSkillsRequest {}, READ))
        .await
        .unwrap_err();
    assert_eq!(skills.code(), Code::Unavailable);
}
