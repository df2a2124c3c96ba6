//! The admin fan-out (cluster spec §6.5): console routes under `/v1/api/admin/…` (scope
//! approve, enforced by the auth layer) that call every known node, or one, and merge the
//! answers.
//!
//! * `GET /v1/api/admin/watches` — every node's `/v1/api/watches`; a watch without a
//!   `node_id` gets the node's id; sorted active first, then newest `created`.
//! * `POST /v1/api/admin/watches/{watch_id}/cancel` (`node_id` in the JSON body or the
//!   query) — relayed to that node; its status and body come back unchanged.
//! * `GET /v1/api/admin/mcp-servers` — every node's `_internal/mcp-status` (10 s), merged
//!   per server: `{"servers": {name: {"nodes": {node_id: status}}}}`.
//! * `POST /v1/api/admin/mcp-servers/reload` — every node's `_internal/mcp-reload` (30 s):
//!   `{"status": "ok", "results": {node_id: response | {"error": ...}}}`.
//! * `GET /v1/api/admin/models` — every node's `_internal/model-status`:
//!   `{"nodes": {node_id: {alias: info}}, "definitions": [...]}` (the stored definitions,
//!   [`crate::cluster_settings`], which also pushes settings and models to the nodes).
//! * `GET /v1/api/admin/memories?node_id=&type=&scope=&scope_id=&limit=` — every node's
//!   (or one node's) `/v1/api/memories` with the filters passed on (checked by the node):
//!   `{"memories": [row + node_id], "errors"}`; a memory seen on several nodes (a shared
//!   database) is listed once, with every node in `nodes`. Permission `admin.memories`.
//! * `DELETE /v1/api/admin/memories/{name}?node_id=&scope=&scope_id=` — relayed to that
//!   node's `DELETE /v1/api/memories/{name}`; its status and body come back unchanged.
//!
//! Node requests use the proxy's client and credentials (§6.6: a fresh JWT with the
//! caller's identity when the console has the secret), and all fan-outs share one
//! semaphore of [`crate::ConsoleConfig::node_fan_out_limit`] permits. A node that cannot
//! be reached, times out or answers non-2xx is skipped by the listings and named in an
//! additional `"errors": {node_id: message}` field (ours; the original only logs it).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};
use turnstone_runtime::auth::Identity;

use crate::api::valid_node_id;
use crate::error::ApiError;
use crate::state::Console;

/// Timeout of one node's `_internal/mcp-status`.
pub const MCP_STATUS_TIMEOUT: Duration = Duration::from_secs(10);
/// Timeout of one node's `_internal/mcp-reload`.
pub const MCP_RELOAD_TIMEOUT: Duration = Duration::from_secs(30);

/// A node a fan-out calls.
#[derive(Debug, Clone)]
struct Target {
    node_id: String,
    base: String,
}

/// Every known node with a usable URL (the collector's node list).
fn targets(console: &Console) -> Vec<Target> {
    console.collector.read(|c| {
        c.nodes
            .iter()
            .filter_map(|(id, n)| {
                Some(Target {
                    node_id: id.clone(),
                    base: n.credential_url()?.to_string(),
                })
            })
            .collect()
    })
}

fn auth_header(console: &Console, identity: Option<&Identity>) -> Result<Option<String>, ApiError> {
    console
        .collector
        .credentials
        .proxy_header(identity)
        .map_err(|e| ApiError::Internal(format!("cannot mint the node token: {e}")))
}

/// One node request under the fan-out semaphore: `(status, JSON body)` or a transport
/// failure's message. A non-JSON body is `null`.
async fn call(
    console: &Console,
    auth: Option<&str>,
    method: Method,
    url: &str,
    timeout: Duration,
    body: Option<&Value>,
) -> Result<(StatusCode, Value), String> {
    let _permit = console
        .fan_out
        .acquire()
        .await
        .map_err(|_| "console shutting down".to_string())?;
    let mut req = console
        .proxy_http
        .request(method, url)
        .timeout(timeout)
        .header(header::ACCEPT, "application/json");
    if let Some(a) = auth {
        req = req.header(header::AUTHORIZATION, a);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req.send().await.map_err(describe)?;
    let status = resp.status();
    let bytes = resp.bytes().await.map_err(describe)?;
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok((status, value))
}

fn describe(e: reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "unreachable".into()
    } else {
        format!("request failed: {e}")
    }
}

/// The message of a node's non-2xx answer.
fn http_error(status: StatusCode, body: &Value) -> String {
    match body.get("error").and_then(Value::as_str) {
        Some(m) => format!("HTTP {}: {m}", status.as_u16()),
        None => format!("HTTP {}", status.as_u16()),
    }
}

/// Calls `path` on every node (or only `only`) concurrently, with `body` as JSON when
/// given; per node its 2xx JSON body or an error message.
pub(crate) async fn fan_out(
    console: &Console,
    identity: Option<&Identity>,
    method: Method,
    path: &str,
    timeout: Duration,
    body: Option<&Value>,
    only: Option<&str>,
) -> Result<Vec<(String, Result<Value, String>)>, ApiError> {
    let auth = auth_header(console, identity)?;
    let targets = targets(console)
        .into_iter()
        .filter(|t| only.is_none_or(|id| t.node_id == id));
    let calls = targets.map(|t| {
        let auth = auth.clone();
        let method = method.clone();
        async move {
            let url = format!("{}{path}", t.base);
            let result = match call(console, auth.as_deref(), method, &url, timeout, body).await
            {
                Ok((status, body)) if status.is_success() => Ok(body),
                Ok((status, body)) => Err(http_error(status, &body)),
                Err(e) => Err(e),
            };
            if let Err(e) = &result {
                tracing::warn!(node_id = %t.node_id, path, error = %e, "admin fan-out: node failed");
            }
            (t.node_id, result)
        }
    });
    Ok(futures::future::join_all(calls).await)
}

fn is_active(w: &Value) -> bool {
    match w.get("active") {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
        Some(Value::String(s)) => !matches!(s.as_str(), "" | "0" | "false"),
        _ => false,
    }
}

/// Splits a fan-out's answers: each node's `body[key]` when it `is_ok` by `shape`, and an
/// `errors` map (node id → why) for nodes that failed or answered without it.
fn split_answers(
    results: Vec<(String, Result<Value, String>)>,
    key: &str,
    shape: fn(&Value) -> bool,
) -> (Vec<(String, Value)>, Map<String, Value>) {
    let mut answers = Vec::new();
    let mut errors = Map::new();
    for (node_id, result) in results {
        match result.map(|mut body| body.get_mut(key).map(Value::take)) {
            Ok(Some(value)) if shape(&value) => answers.push((node_id, value)),
            Ok(_) => {
                errors.insert(node_id, json!(format!("malformed response: no '{key}'")));
            }
            Err(e) => {
                errors.insert(node_id, json!(e));
            }
        }
    }
    (answers, errors)
}

/// A listing fan-out: `GET path` on every node, split by [`split_answers`].
async fn gather(
    console: &Console,
    identity: Option<Extension<Identity>>,
    path: &str,
    timeout: Duration,
    key: &str,
    shape: fn(&Value) -> bool,
) -> Result<(Vec<(String, Value)>, Map<String, Value>), ApiError> {
    let identity = identity.as_ref().map(|e| &e.0);
    let results = fan_out(console, identity, Method::GET, path, timeout, None, None).await?;
    Ok(split_answers(results, key, shape))
}

fn created(w: &Value) -> &str {
    w.get("created").and_then(Value::as_str).unwrap_or_default()
}

/// Active watches first, then newest `created` first (ISO timestamps sort as text).
pub fn sort_watches(watches: &mut [Value]) {
    watches.sort_by(|a, b| match is_active(b).cmp(&is_active(a)) {
        Ordering::Equal => created(b).cmp(created(a)),
        other => other,
    });
}

/// `GET /v1/api/admin/watches`.
#[tracing::instrument(skip_all)]
pub async fn watches(
    State(console): State<Arc<Console>>,
    identity: Option<Extension<Identity>>,
) -> Result<Json<Value>, ApiError> {
    let timeout = console.collector.config.fan_out_timeout;
    let (answers, errors) = gather(
        &console,
        identity,
        "/v1/api/watches",
        timeout,
        "watches",
        Value::is_array,
    )
    .await?;
    let mut all = Vec::new();
    for (node_id, rows) in answers {
        let Value::Array(rows) = rows else { continue };
        for mut row in rows {
            if let Some(obj) = row.as_object_mut() {
                let missing = obj
                    .get("node_id")
                    .is_none_or(|v| v.as_str().is_none_or(str::is_empty));
                if missing {
                    obj.insert("node_id".into(), json!(node_id));
                }
                all.push(row);
            }
        }
    }
    sort_watches(&mut all);
    Ok(Json(json!({"watches": all, "errors": errors})))
}

/// Watch ids are hex at v0.9.6; anything URL-safe is passed on, nothing else.
fn valid_watch_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// `POST /v1/api/admin/watches/{watch_id}/cancel`.
#[tracing::instrument(skip_all, fields(watch_id = %watch_id))]
pub async fn cancel_watch(
    State(console): State<Arc<Console>>,
    Path(watch_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    identity: Option<Extension<Identity>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    if !valid_watch_id(&watch_id) {
        return Err(ApiError::BadRequest("Invalid watch id".into()));
    }
    let from_body = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let v: Value = serde_json::from_slice(&body)
            .map_err(|_| ApiError::BadRequest("Invalid JSON body".into()))?;
        v.get("node_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let node_id = from_body
        .or_else(|| query.get("node_id").filter(|s| !s.is_empty()).cloned())
        .ok_or_else(|| ApiError::BadRequest("node_id is required".into()))?;
    let target = valid_node_id(&node_id)
        .then(|| targets(&console).into_iter().find(|t| t.node_id == node_id))
        .flatten()
        .ok_or_else(|| ApiError::NotFound(format!("Unknown node: {node_id}")))?;
    let auth = auth_header(&console, identity.as_ref().map(|e| &e.0))?;
    let url = format!("{}/v1/api/watches/{watch_id}/cancel", target.base);
    let (status, body) = call(
        &console,
        auth.as_deref(),
        Method::POST,
        &url,
        console.collector.config.proxy_timeout,
        Some(&json!({})),
    )
    .await
    .map_err(|e| {
        tracing::warn!(node_id = %node_id, error = %e, "watch cancel: node unreachable");
        ApiError::BadGateway("Node unreachable".into())
    })?;
    tracing::info!(node_id = %node_id, status = status.as_u16(), "watch cancel relayed");
    let body = if body.is_null() {
        json!({"error": http_error(status, &body)})
    } else {
        body
    };
    Ok((status, Json(body)).into_response())
}

/// `GET /v1/api/admin/mcp-servers`.
#[tracing::instrument(skip_all)]
pub async fn mcp_servers(
    State(console): State<Arc<Console>>,
    identity: Option<Extension<Identity>>,
) -> Result<Json<Value>, ApiError> {
    let (answers, errors) = gather(
        &console,
        identity,
        "/v1/api/_internal/mcp-status",
        MCP_STATUS_TIMEOUT,
        "servers",
        Value::is_object,
    )
    .await?;
    let mut servers = Map::new();
    for (node_id, per_node) in answers {
        let Value::Object(per_node) = per_node else {
            continue;
        };
        for (name, status) in per_node {
            let entry = servers.entry(name).or_insert_with(|| json!({"nodes": {}}));
            if let Some(nodes) = entry.get_mut("nodes").and_then(Value::as_object_mut) {
                nodes.insert(node_id.clone(), status);
            }
        }
    }
    Ok(Json(json!({"servers": servers, "errors": errors})))
}

/// `POST /v1/api/admin/mcp-servers/reload`.
#[tracing::instrument(skip_all)]
pub async fn reload_mcp(
    State(console): State<Arc<Console>>,
    identity: Option<Extension<Identity>>,
) -> Result<Json<Value>, ApiError> {
    let results = fan_out(
        &console,
        identity.as_ref().map(|e| &e.0),
        Method::POST,
        "/v1/api/_internal/mcp-reload",
        MCP_RELOAD_TIMEOUT,
        None,
        None,
    )
    .await?;
    let results: Map<String, Value> = results
        .into_iter()
        .map(|(node_id, r)| (node_id, r.unwrap_or_else(|e| json!({"error": e}))))
        .collect();
    tracing::info!(nodes = results.len(), "MCP reload fanned out");
    Ok(Json(json!({"status": "ok", "results": results})))
}

/// `GET /v1/api/admin/models`.
#[tracing::instrument(skip_all)]
pub async fn models(
    State(console): State<Arc<Console>>,
    identity: Option<Extension<Identity>>,
) -> Result<Json<Value>, ApiError> {
    let timeout = console.collector.config.fan_out_timeout;
    let (answers, errors) = gather(
        &console,
        identity,
        "/v1/api/_internal/model-status",
        timeout,
        "models",
        Value::is_object,
    )
    .await?;
    let nodes: Map<String, Value> = answers.into_iter().collect();
    // The stored definitions beside the nodes' view (none without storage).
    let definitions = crate::cluster_settings::definition_views(&console).await?;
    Ok(Json(
        json!({"nodes": nodes, "errors": errors, "definitions": definitions}),
    ))
}

/// The query parameters the memory routes pass on to the node (each at most once).
const MEMORY_FILTERS: [&str; 4] = ["type", "scope", "scope_id", "limit"];

/// The node path of the memory list, or of the memory `name` (one percent-encoded
/// segment), with the given memory filters of `query`; an unknown parameter is a 400
/// naming it.
fn memory_path(name: Option<&str>, query: &HashMap<String, String>) -> Result<String, ApiError> {
    if let Some(key) = query
        .keys()
        .find(|k| *k != "node_id" && !MEMORY_FILTERS.contains(&k.as_str()))
    {
        return Err(ApiError::BadRequest(format!(
            "unknown query parameter {key:?}"
        )));
    }
    let mut url = reqwest::Url::parse("http://node/v1/api/memories")
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    if let Some(name) = name
        && let Ok(mut segments) = url.path_segments_mut()
    {
        segments.push(name);
    }
    {
        let mut pairs = url.query_pairs_mut();
        for key in MEMORY_FILTERS {
            if let Some(v) = query.get(key).filter(|v| !v.is_empty()) {
                pairs.append_pair(key, v);
            }
        }
    }
    Ok(match url.query().filter(|q| !q.is_empty()) {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    })
}

/// The `node_id` query parameter: `None` when absent, 404 for a node the console does not
/// know.
fn known_node(
    console: &Console,
    query: &HashMap<String, String>,
) -> Result<Option<Target>, ApiError> {
    let Some(node_id) = query.get("node_id").filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    valid_node_id(node_id)
        .then(|| targets(console).into_iter().find(|t| &t.node_id == node_id))
        .flatten()
        .map(Some)
        .ok_or_else(|| ApiError::NotFound(format!("Unknown node: {node_id}")))
}

/// `GET /v1/api/admin/memories`.
#[tracing::instrument(skip_all)]
pub async fn memories(
    State(console): State<Arc<Console>>,
    Query(query): Query<HashMap<String, String>>,
    identity: Option<Extension<Identity>>,
) -> Result<Json<Value>, ApiError> {
    let path = memory_path(None, &query)?;
    let only = known_node(&console, &query)?;
    let results = fan_out(
        &console,
        identity.as_ref().map(|e| &e.0),
        Method::GET,
        &path,
        console.collector.config.fan_out_timeout,
        None,
        only.as_ref().map(|t| t.node_id.as_str()),
    )
    .await?;
    let (answers, errors) = split_answers(results, "memories", Value::is_array);
    let mut merged: Vec<Value> = Vec::new();
    for (node_id, rows) in answers {
        let Value::Array(rows) = rows else { continue };
        for mut row in rows {
            let id = row.get("memory_id").cloned();
            if let Some(seen) = merged
                .iter_mut()
                .find(|m| id.is_some() && m.get("memory_id") == id.as_ref())
            {
                if let Some(nodes) = seen.get_mut("nodes").and_then(Value::as_array_mut) {
                    nodes.push(json!(node_id));
                }
                continue;
            }
            if let Some(obj) = row.as_object_mut() {
                obj.insert("node_id".into(), json!(node_id));
                obj.insert("nodes".into(), json!([node_id]));
                merged.push(row);
            }
        }
    }
    Ok(Json(json!({"memories": merged, "errors": errors})))
}

/// `DELETE /v1/api/admin/memories/{name}`.
#[tracing::instrument(skip_all)]
pub async fn delete_memory(
    State(console): State<Arc<Console>>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    identity: Option<Extension<Identity>>,
    actor: turnstone_accounts::audit::Actor,
) -> Result<Response, ApiError> {
    if name.trim().is_empty() || name.chars().count() > 256 {
        return Err(ApiError::BadRequest("Invalid memory name".into()));
    }
    let target = known_node(&console, &query)?
        .ok_or_else(|| ApiError::BadRequest("node_id is required".into()))?;
    let path = memory_path(Some(name.as_str()), &query)?;
    let auth = auth_header(&console, identity.as_ref().map(|e| &e.0))?;
    let (status, body) = call(
        &console,
        auth.as_deref(),
        Method::DELETE,
        &format!("{}{path}", target.base),
        console.collector.config.proxy_timeout,
        None,
    )
    .await
    .map_err(|e| {
        tracing::warn!(node_id = %target.node_id, error = %e, "memory delete: node unreachable");
        ApiError::BadGateway("Node unreachable".into())
    })?;
    if status.is_success()
        && let Some(store) = console.store.clone()
    {
        actor
            .record(
                &store,
                "memory.delete",
                "memory",
                &name,
                json!({"node_id": target.node_id, "scope": query.get("scope"), "scope_id": query.get("scope_id")}),
            )
            .await;
    }
    tracing::info!(node_id = %target.node_id, status = status.as_u16(), "memory delete relayed");
    let body = if body.is_null() {
        json!({"error": http_error(status, &body)})
    } else {
        body
    };
    Ok((status, Json(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_first_then_newest() {
        let mut w = vec![
            json!({"watch_id": "a", "active": 0, "created": "2026-01-03T00:00:00"}),
            json!({"watch_id": "b", "active": 1, "created": "2026-01-01T00:00:00"}),
            json!({"watch_id": "c", "active": true, "created": "2026-01-02T00:00:00"}),
            json!({"watch_id": "d", "created": "2026-01-04T00:00:00"}),
        ];
        sort_watches(&mut w);
        let ids: Vec<&str> = w.iter().map(|v| v["watch_id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["c", "b", "d", "a"]);
    }

    #[test]
    fn memory_filters_are_passed_on_encoded_and_others_refused() {
        let q = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<HashMap<_, _>>()
        };
        assert_eq!(
            memory_path(None, &q(&[("node_id", "n1")])).unwrap(),
            "/v1/api/memories"
        );
        assert_eq!(
            memory_path(None, &q(&[("scope", "a&b=c")])).unwrap(),
            "/v1/api/memories?scope=a%26b%3Dc"
        );
        assert_eq!(
            memory_path(Some("../x y"), &q(&[("scope", "global")])).unwrap(),
            "/v1/api/memories/..%2Fx%20y?scope=global"
        );
        let err = memory_path(None, &q(&[("secret", "1")])).unwrap_err();
        assert!(err.to_string().contains("\"secret\""), "{err}");
    }

    #[test]
    fn watch_ids_cannot_escape_the_path() {
        assert!(valid_watch_id("0a1b2c"));
        assert!(!valid_watch_id("../x"));
        assert!(!valid_watch_id(""));
        assert!(!valid_watch_id("a?b"));
    }
}
