//! Structured memories over HTTP (`/v1/api/memories`: list, upsert, search, delete) and the
//! model list (`/v1/api/models`).
//!
//! This module owns the wire rules of those endpoints: name normalisation, the type and scope
//! vocabularies, the scope rules (a `user` scope is bound to the caller's user id) and the
//! captured row shape. Storage is the store's memory API through the node's persistence;
//! without persistence every memory route answers 503. It must not know how the store keeps
//! memories (SQL, backends) nor anything about turns or workstreams.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use turnstone_runtime::auth::Identity;
use turnstone_store::{
    Memory, MemoryFilter, MemoryInput, MemoryScope, MemoryType, ScopeRef, Store,
};

/// Lowercased, trimmed, `-` and spaces become `_`: the `memory` tool's normalisation, so a
/// memory saved by either is found by the other.
pub use turnstone_tools::builtin::normalise_name;

use super::body::WireJson;
use super::error::ApiError;
use super::state::Node;

/// Longest accepted memory name (characters).
pub const MAX_NAME_CHARS: usize = 256;
/// Longest accepted memory content (characters).
pub const MAX_CONTENT_CHARS: usize = 65_536;
/// Default and largest `limit` of the list.
pub const LIST_LIMIT: (usize, usize) = (100, 200);
/// Default and largest `limit` of the search.
pub const SEARCH_LIMIT: (usize, usize) = (20, 50);

/// Valid `type` values, sorted as the original's error message lists them.
const TYPES: [&str; 4] = ["feedback", "project", "reference", "user"];
/// Valid `scope` values, sorted as the original's error message lists them.
const SCOPES: [&str; 3] = ["global", "user", "workstream"];

/// One memory as the API returns it (the captured row shape).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct MemoryRow {
    /// UUIDv4 with dashes.
    pub memory_id: String,
    pub name: String,
    pub description: String,
    /// `user`, `project`, `feedback` or `reference`.
    #[serde(rename = "type")]
    pub mem_type: String,
    /// `global`, `workstream` or `user`.
    pub scope: String,
    /// The workstream or user id; empty for `global`.
    pub scope_id: String,
    pub content: String,
    /// ISO timestamp.
    pub created: String,
    /// ISO timestamp.
    pub updated: String,
    /// ISO timestamp; empty when never read.
    pub last_accessed: String,
    pub access_count: i64,
}

impl From<Memory> for MemoryRow {
    fn from(m: Memory) -> Self {
        Self {
            memory_id: m.memory_id,
            name: m.name,
            description: m.description,
            mem_type: api_type(m.mem_type).to_string(),
            scope: m.scope.as_str().to_string(),
            scope_id: m.scope_id,
            content: m.content,
            created: m.created,
            updated: m.updated,
            last_accessed: m.last_accessed,
            access_count: m.access_count,
        }
    }
}

/// `GET /v1/api/memories` and `POST /v1/api/memories/search`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct MemoryList {
    /// Newest `updated` first.
    pub memories: Vec<MemoryRow>,
    /// Number of rows returned.
    pub total: usize,
}

/// `POST /v1/api/memories`: upsert keyed on (name, scope, scope_id).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SaveMemoryBody {
    /// Normalised: lowercased, `-` and spaces become `_`; at most 256 characters.
    pub name: String,
    /// At most 65536 characters.
    pub content: String,
    pub description: String,
    /// `user`, `project` (default), `feedback` or `reference`.
    #[serde(rename = "type")]
    pub mem_type: Option<String>,
    /// `global` (default), `workstream` or `user`.
    pub scope: Option<String>,
    /// Required for `workstream` and `user`; not allowed for `global`.
    pub scope_id: String,
}

/// `POST /v1/api/memories/search`: every whitespace-separated term of `query` must appear in
/// the name, description or content (case-insensitive).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SearchMemoriesBody {
    pub query: String,
    #[serde(rename = "type")]
    pub mem_type: String,
    pub scope: String,
    pub scope_id: String,
    /// Integer (or integer string), default 20, at most 50.
    pub limit: Option<Value>,
}

/// `DELETE /v1/api/memories/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct DeleteMemoryReply {
    /// `"ok"`.
    pub status: String,
    /// The normalised name.
    pub name: String,
}

/// One model alias of `GET /v1/api/models`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ModelInfo {
    pub alias: String,
    pub model: String,
    pub provider: String,
}

/// `GET /v1/api/models`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ModelList {
    pub models: Vec<ModelInfo>,
}

/// The routes of this module (under `/v1`).
pub fn routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/api/memories", get(list).post(save))
        .route("/api/memories/search", post(search))
        .route("/api/memories/{name}", delete(remove))
        .route("/api/models", get(models))
}

/// `GET /v1/api/models`: the aliases of the model registry (`[models.*]`), else the node's
/// one model as `default`.
pub async fn models(State(node): State<Arc<Node>>) -> Json<ModelList> {
    let registry = node.manager.engine().config().models.clone();
    if let Some(registry) = registry {
        let models = registry
            .aliases()
            .into_iter()
            .filter_map(|alias| registry.get(alias).ok())
            .map(|m| ModelInfo {
                alias: m.alias.clone(),
                model: m.entry.model.clone(),
                provider: provider_name(m.entry.provider).to_string(),
            })
            .collect();
        return Json(ModelList { models });
    }
    let alias = if node.options.model_alias.is_empty() {
        "default".to_string()
    } else {
        node.options.model_alias.clone()
    };
    Json(ModelList {
        models: vec![ModelInfo {
            alias,
            model: node.options.model.clone(),
            provider: "openai".to_string(),
        }],
    })
}

pub(crate) fn provider_name(kind: turnstone_llm::ProviderKind) -> &'static str {
    match kind {
        turnstone_llm::ProviderKind::Openai => "openai",
        turnstone_llm::ProviderKind::Anthropic => "anthropic",
    }
}

/// `GET /v1/api/memories?type=&scope=&scope_id=&limit=`.
pub async fn list(
    State(node): State<Arc<Node>>,
    identity: Option<Extension<Identity>>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<MemoryList>, ApiError> {
    let param = |key: &str| query.get(key).cloned().unwrap_or_default();
    let filter = MemoryQuery {
        mem_type: param("type"),
        scope: param("scope"),
        scope_id: param("scope_id"),
        limit: query.get("limit").map(|s| Value::String(s.clone())),
    };
    list_memories(&node, identity_of(&identity), filter)
        .await
        .map(Json)
}

/// `POST /v1/api/memories/search`.
pub async fn search(
    State(node): State<Arc<Node>>,
    identity: Option<Extension<Identity>>,
    WireJson(body): WireJson<SearchMemoriesBody>,
) -> Result<Json<MemoryList>, ApiError> {
    let filter = MemoryQuery {
        mem_type: body.mem_type,
        scope: body.scope,
        scope_id: body.scope_id,
        limit: body.limit,
    };
    search_memories(&node, identity_of(&identity), &body.query, filter)
        .await
        .map(Json)
}

/// The filters of a memory list or search, as the routes read them.
#[derive(Debug, Clone, Default)]
pub struct MemoryQuery {
    /// Empty: any type.
    pub mem_type: String,
    /// Empty: any scope; `user` is the caller's own memories.
    pub scope: String,
    pub scope_id: String,
    /// An integer (a JSON number or a numeric string); `None`: the route's default.
    pub limit: Option<Value>,
}

/// The memories `identity` may list with these filters (`GET /v1/api/memories`, and the
/// `ListMemories` RPC).
pub async fn list_memories(
    node: &Node,
    identity: Option<&Identity>,
    filter: MemoryQuery,
) -> Result<MemoryList, ApiError> {
    let store = store(node)?;
    let limit = parse_limit(filter.limit, LIST_LIMIT)?;
    let mem_type = parse_type_filter(&filter.mem_type)?;
    let scope = resolve_filter_scope(identity, &filter.scope, &filter.scope_id)?;
    select(store.as_ref(), mem_type, scope.as_ref(), &[], limit).await
}

/// The memories `identity` may list that contain every term of `query`
/// (`POST /v1/api/memories/search`, and the `SearchMemories` RPC).
pub async fn search_memories(
    node: &Node,
    identity: Option<&Identity>,
    query: &str,
    filter: MemoryQuery,
) -> Result<MemoryList, ApiError> {
    let store = store(node)?;
    let terms: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    if terms.is_empty() {
        return Err(bad("query is required"));
    }
    let limit = parse_limit(filter.limit, SEARCH_LIMIT)?;
    let mem_type = parse_type_filter(&filter.mem_type)?;
    let scope = resolve_filter_scope(identity, &filter.scope, &filter.scope_id)?;
    select(store.as_ref(), mem_type, scope.as_ref(), &terms, limit).await
}

/// `POST /v1/api/memories`: 201 with the row when created, 200 when updated.
pub async fn save(
    State(node): State<Arc<Node>>,
    identity: Option<Extension<Identity>>,
    WireJson(body): WireJson<SaveMemoryBody>,
) -> Result<Response, ApiError> {
    let store = store(&node)?;
    let name = normalise_name(&body.name);
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(bad("name is required (max 256 characters)"));
    }
    if body.content.trim().is_empty() {
        return Err(bad("content is required"));
    }
    if body.content.chars().count() > MAX_CONTENT_CHARS {
        return Err(bad("content exceeds 65536 character limit"));
    }
    let type_text = body.mem_type.as_deref().unwrap_or("project");
    let mem_type = store_type(type_text).ok_or_else(|| invalid_type(type_text))?;
    let scope_text = body.scope.as_deref().unwrap_or("global");
    let scope = resolve_exact_scope(identity_of(&identity), scope_text, &body.scope_id)?;

    let existed = exists(store.as_ref(), &name, &scope).await?;
    let saved = store
        .save_memory(MemoryInput {
            name,
            content: body.content,
            description: body.description,
            mem_type,
            scope,
        })
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "memory not saved");
            ApiError::Internal("Failed to save memory".to_string())
        })?;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(MemoryRow::from(saved))).into_response())
}

/// `DELETE /v1/api/memories/{name}?scope=global&scope_id=`.
pub async fn remove(
    State(node): State<Arc<Node>>,
    identity: Option<Extension<Identity>>,
    Path(raw_name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<DeleteMemoryReply>, ApiError> {
    let store = store(&node)?;
    let name = normalise_name(&raw_name);
    let scope_text = query.get("scope").map(String::as_str).unwrap_or("global");
    let scope_id = query.get("scope_id").map(String::as_str).unwrap_or("");
    let scope = resolve_exact_scope(identity_of(&identity), scope_text, scope_id)?;
    let deleted = if name.is_empty() {
        false
    } else {
        store
            .delete_memory(&name, &scope)
            .await
            .map_err(storage_failed)?
    };
    if !deleted {
        return Err(ApiError::NotFound(format!("Memory '{name}' not found")));
    }
    Ok(Json(DeleteMemoryReply {
        status: "ok".to_string(),
        name,
    }))
}

/// A scope filter of list/search: the scope, and the id when one was given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ScopeFilter {
    scope: MemoryScope,
    scope_id: Option<String>,
}

/// The node's store, or 503 `Storage not available`.
pub(crate) fn store(node: &Node) -> Result<Arc<dyn Store>, ApiError> {
    node.store()
        .ok_or_else(|| ApiError::Unavailable("Storage not available".to_string()))
}

fn identity_of(identity: &Option<Extension<Identity>>) -> Option<&Identity> {
    identity.as_ref().map(|Extension(i)| i)
}

fn bad(message: &str) -> ApiError {
    ApiError::BadRequest(message.to_string())
}

fn storage_failed(e: turnstone_store::StoreError) -> ApiError {
    tracing::warn!(error = %e, "memory storage failed");
    ApiError::Internal("Storage error".to_string())
}

fn invalid_type(text: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "invalid type: {text}; must be one of {}",
        python_list(&TYPES)
    ))
}

fn invalid_scope(text: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "invalid scope: {text}; must be one of {}",
        python_list(&SCOPES)
    ))
}

/// `['a', 'b']`, as the original prints a sorted list.
fn python_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The store's type for an API type (the same vocabulary; the store renamed its
/// general-purpose type `general` to `project` in migration 0003, so `general` is refused
/// here as the original refuses it).
fn store_type(text: &str) -> Option<MemoryType> {
    if !TYPES.contains(&text) {
        return None;
    }
    text.parse().ok()
}

/// The API's name of a stored type (the inverse of [`store_type`]).
fn api_type(t: MemoryType) -> &'static str {
    t.as_str()
}

fn parse_type_filter(text: &str) -> Result<Option<MemoryType>, ApiError> {
    if text.is_empty() {
        return Ok(None);
    }
    store_type(text).map(Some).ok_or_else(|| invalid_type(text))
}

fn parse_scope(text: &str) -> Result<MemoryScope, ApiError> {
    if !SCOPES.contains(&text) {
        return Err(invalid_scope(text));
    }
    text.parse().map_err(|_| invalid_scope(text))
}

/// `limit` as an integer (a JSON number or a numeric string), clamped to `1..=max`.
fn parse_limit(value: Option<Value>, (default, max): (usize, usize)) -> Result<usize, ApiError> {
    let n = match value {
        None => return Ok(default),
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
        Some(_) => None,
    }
    .ok_or_else(|| bad("limit must be an integer"))?;
    Ok(usize::try_from(n.max(1)).unwrap_or(max).min(max))
}

/// The `user` scope belongs to the caller: it needs a user identity, and another user's id
/// is refused. Returns the caller's id.
fn caller_user(identity: Option<&Identity>, scope_id: &str) -> Result<String, ApiError> {
    let user = identity.map(|i| i.user_id.as_str()).unwrap_or("");
    if user.is_empty() {
        return Err(bad(
            "User scope requires authentication with a user identity",
        ));
    }
    if !scope_id.is_empty() && scope_id != user {
        return Err(ApiError::Auth {
            status: 403,
            message: "Cannot access another user's memories".to_string(),
        });
    }
    Ok(user.to_string())
}

/// The scope rules shared by every endpoint.
fn check_scope_pair(scope: &str, scope_id: &str) -> Result<(), ApiError> {
    if scope == "global" && !scope_id.is_empty() {
        return Err(bad("scope_id is not allowed with global scope"));
    }
    if scope.is_empty() && !scope_id.is_empty() {
        return Err(bad("scope is required when scope_id is provided"));
    }
    Ok(())
}

/// The exact scope of a save or delete: `workstream`/`user` need a `scope_id`.
fn resolve_exact_scope(
    identity: Option<&Identity>,
    scope: &str,
    scope_id: &str,
) -> Result<ScopeRef, ApiError> {
    check_scope_pair(scope, scope_id)?;
    let parsed = parse_scope(scope)?;
    if parsed != MemoryScope::Global && scope_id.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "scope_id is required for {scope} scope"
        )));
    }
    let scope_id = if parsed == MemoryScope::User {
        caller_user(identity, scope_id)?
    } else {
        scope_id.to_string()
    };
    Ok(ScopeRef::new(parsed, scope_id))
}

/// The optional scope filter of list and search; a `user` filter is the caller's memories.
fn resolve_filter_scope(
    identity: Option<&Identity>,
    scope: &str,
    scope_id: &str,
) -> Result<Option<ScopeFilter>, ApiError> {
    check_scope_pair(scope, scope_id)?;
    if scope.is_empty() {
        return Ok(None);
    }
    let parsed = parse_scope(scope)?;
    let scope_id = match parsed {
        MemoryScope::User => Some(caller_user(identity, scope_id)?),
        MemoryScope::Global => Some(String::new()),
        _ if scope_id.is_empty() => None,
        _ => Some(scope_id.to_string()),
    };
    Ok(Some(ScopeFilter {
        scope: parsed,
        scope_id,
    }))
}

/// Memories of `mem_type` in `scope` containing every term, newest `updated` first.
async fn select(
    store: &dyn Store,
    mem_type: Option<MemoryType>,
    scope: Option<&ScopeFilter>,
    terms: &[String],
    limit: usize,
) -> Result<MemoryList, ApiError> {
    let filter = MemoryFilter {
        mem_type,
        scopes: match scope {
            Some(ScopeFilter {
                scope,
                scope_id: Some(id),
            }) => vec![ScopeRef::new(*scope, id.clone())],
            _ => Vec::new(),
        },
    };
    let memories: Vec<MemoryRow> = store
        .list_memories(&filter, usize::MAX)
        .await
        .map_err(storage_failed)?
        .into_iter()
        .filter(|m| scope.is_none_or(|s| s.scope == m.scope))
        .filter(|m| {
            let hay = format!("{}\n{}\n{}", m.name, m.description, m.content).to_lowercase();
            terms.iter().all(|t| hay.contains(t.as_str()))
        })
        .take(limit)
        .map(MemoryRow::from)
        .collect();
    Ok(MemoryList {
        total: memories.len(),
        memories,
    })
}

/// Whether a memory `name` exists in `scope` (read without counting an access).
async fn exists(store: &dyn Store, name: &str, scope: &ScopeRef) -> Result<bool, ApiError> {
    let filter = MemoryFilter {
        mem_type: None,
        scopes: vec![scope.clone()],
    };
    Ok(store
        .list_memories(&filter, usize::MAX)
        .await
        .map_err(storage_failed)?
        .iter()
        .any(|m| m.name == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalised() {
        assert_eq!(normalise_name("  My-Note here "), "my_note_here");
        assert_eq!(normalise_name("ÄB"), "äb");
    }

    #[test]
    fn api_types_are_the_stores_types() {
        let t = store_type("project").unwrap();
        assert_eq!(t, MemoryType::Project);
        assert_eq!(api_type(t), "project");
        assert_eq!(api_type(store_type("user").unwrap()), "user");
        assert!(store_type("general").is_none());
        assert!(store_type("bogus").is_none());
    }

    #[test]
    fn limits_are_integers_clamped_to_the_cap() {
        assert_eq!(parse_limit(None, SEARCH_LIMIT).unwrap(), 20);
        assert_eq!(
            parse_limit(Some(Value::from(500)), SEARCH_LIMIT).unwrap(),
            50
        );
        assert_eq!(parse_limit(Some(Value::from("7")), LIST_LIMIT).unwrap(), 7);
        assert_eq!(parse_limit(Some(Value::from(-3)), LIST_LIMIT).unwrap(), 1);
        assert!(parse_limit(Some(Value::from("x")), LIST_LIMIT).is_err());
        assert!(parse_limit(Some(Value::from(1.5)), LIST_LIMIT).is_err());
    }

    #[test]
    fn error_lists_match_the_original() {
        assert_eq!(
            invalid_type("x").body()["error"],
            "invalid type: x; must be one of ['feedback', 'project', 'reference', 'user']"
        );
        assert_eq!(
            invalid_scope("x").body()["error"],
            "invalid scope: x; must be one of ['global', 'user', 'workstream']"
        );
    }
}
