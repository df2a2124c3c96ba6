//! The cluster API (cluster spec §6.3): overview, nodes, workstreams, node detail, snapshot,
//! console health, and workstream creation through Redis (`pool` / `auto` / a named node).
//!
//! Deliberate difference from v0.9.6: bad query values (`page=abc`, `per_page=0`,
//! `limit=5000`, an unknown `sort`) are a 400 naming the parameter instead of silently
//! falling back to defaults.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use turnstone_proto::mq::{CreateWorkstreamMessage, InboundMessage};
use turnstone_runtime::auth::Identity;

use crate::error::ApiError;
use crate::model::{NodeSort, WsQuery, WsSort};
use crate::state::Console;

pub type Params = Query<HashMap<String, String>>;

/// The rule the original proxy applies to node ids.
pub fn valid_node_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 256
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// An integer query parameter in `min..=max`, `default` when absent or empty.
fn int_param(
    params: &HashMap<String, String>,
    name: &str,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, ApiError> {
    let Some(raw) = params.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) else {
        return Ok(default);
    };
    match raw.parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(ApiError::BadRequest(format!(
            "{name} must be an integer from {min} to {max} (got {raw:?})"
        ))),
    }
}

fn opt_param(params: &HashMap<String, String>, name: &str) -> Option<String> {
    params
        .get(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// `GET /health` (public, always 200).
pub async fn health(State(console): State<Arc<Console>>) -> Json<Value> {
    let o = console.collector.read(|c| c.overview());
    Json(json!({
        "status": "ok",
        "service": "turnstone-console",
        "nodes": o["nodes"],
        "workstreams": o["workstreams"],
        "version_drift": o["version_drift"],
        "versions": o["versions"],
    }))
}

/// `GET /ready`: 200 while the console serves; 503 while it shuts down or Redis does not
/// answer (`/health` stays the liveness probe).
pub async fn ready(State(console): State<Arc<Console>>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let unavailable = |why: String| {
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": why})),
        )
            .into_response()
    };
    if console.shutdown.is_cancelled() {
        return unavailable("draining".into());
    }
    let ping = async {
        let mut conn = console.collector.redis_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    match tokio::time::timeout(std::time::Duration::from_secs(2), ping).await {
        Ok(Ok(_)) => Json(json!({"status": "ready"})).into_response(),
        Ok(Err(e)) => unavailable(format!("redis unreachable: {e}")),
        Err(_) => unavailable("redis unreachable: no answer within 2s".into()),
    }
}

/// `GET /v1/api/cluster/overview`.
pub async fn overview(State(console): State<Arc<Console>>) -> Json<Value> {
    console
        .stats
        .overview_requests
        .fetch_add(1, Ordering::Relaxed);
    Json(console.collector.read(|c| c.overview()))
}

/// `GET /v1/api/cluster/nodes?sort&limit&offset`.
pub async fn nodes(
    State(console): State<Arc<Console>>,
    Query(params): Params,
) -> Result<Json<Value>, ApiError> {
    let sort_raw = opt_param(&params, "sort").unwrap_or_else(|| "activity".into());
    let sort = NodeSort::parse(&sort_raw).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "sort must be one of activity, tokens, name (got {sort_raw:?})"
        ))
    })?;
    let limit = int_param(&params, "limit", 100, 1, 1000)?;
    let offset = int_param(&params, "offset", 0, 0, 10_000)?;
    Ok(Json(console.collector.read(|c| {
        c.nodes_page(
            sort,
            usize::try_from(limit).unwrap_or(100),
            usize::try_from(offset).unwrap_or(0),
        )
    })))
}

/// `GET /v1/api/cluster/workstreams?state&node&search&sort&page&per_page`.
pub async fn workstreams(
    State(console): State<Arc<Console>>,
    Query(params): Params,
) -> Result<Json<Value>, ApiError> {
    let sort_raw = opt_param(&params, "sort").unwrap_or_else(|| "state".into());
    let sort = WsSort::parse(&sort_raw).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "sort must be one of state, tokens, name (got {sort_raw:?})"
        ))
    })?;
    let q = WsQuery {
        state: opt_param(&params, "state"),
        node: opt_param(&params, "node"),
        search: opt_param(&params, "search"),
        sort,
        page: int_param(&params, "page", 1, 1, 1_000_000)?,
        per_page: int_param(&params, "per_page", 50, 1, 200)?,
    };
    Ok(Json(console.collector.read(|c| c.workstreams_page(&q))))
}

/// `GET /v1/api/cluster/node/{node_id}`.
pub async fn node_detail(
    State(console): State<Arc<Console>>,
    Path(node_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if node_id.contains('/') || node_id.len() > 256 {
        return Err(ApiError::BadRequest("Invalid node ID".into()));
    }
    console
        .collector
        .read(|c| c.node_detail(&node_id))
        .map(|mut v| {
            strip_non_integer_aggregate(&mut v);
            Json(v)
        })
        .ok_or_else(|| ApiError::NotFound("Node not found".into()))
}

/// The SDK types `aggregate` as `dict[str, int]`; the node's has a string `node` and a
/// float uptime. Keep the integer entries only.
fn strip_non_integer_aggregate(v: &mut Value) {
    if let Some(agg) = v.get_mut("aggregate").and_then(Value::as_object_mut) {
        agg.retain(|_, x| x.is_i64() || x.is_u64());
    }
}

/// `GET /v1/api/cluster/snapshot`.
pub async fn snapshot(State(console): State<Arc<Console>>) -> Json<Value> {
    let mut snap = console
        .collector
        .read(|c| c.snapshot(turnstone_proto::ids::now_timestamp()));
    if let Some(nodes) = snap.get_mut("nodes").and_then(Value::as_array_mut) {
        for n in nodes {
            strip_non_integer_aggregate(n);
        }
    }
    Json(snap)
}

const STRING_FIELDS_ERROR: &str =
    "node_id, name, model, initial_message, skill, and resume_ws must be strings";

/// A string field of the create body, truncated to `max` characters (null/absent → "").
fn field(body: &Value, name: &str, max: usize) -> Result<String, ApiError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.chars().take(max).collect()),
        Some(_) => Err(ApiError::BadRequest(STRING_FIELDS_ERROR.into())),
    }
}

/// `POST /v1/api/cluster/workstreams/new`.
pub async fn create_workstream(
    State(console): State<Arc<Console>>,
    identity: Option<axum::Extension<Identity>>,
    body: axum::body::Bytes,
) -> Response {
    match create_counted(&console, identity.map(|e| e.0), &body).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

/// The create of `POST /v1/api/cluster/workstreams/new` and of gRPC
/// `CreateClusterWorkstream` (`body`: the JSON body), counted in the console's stats.
pub async fn create_counted(
    console: &Console,
    identity: Option<Identity>,
    body: &[u8],
) -> Result<Value, ApiError> {
    let created = create(console, identity, body).await;
    let counter = match &created {
        Ok(_) => &console.stats.creates,
        Err(_) => &console.stats.creates_failed,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    created
}

async fn create(
    console: &Console,
    identity: Option<Identity>,
    body: &[u8],
) -> Result<Value, ApiError> {
    let body: Value = serde_json::from_slice(body)
        .map_err(|_| ApiError::BadRequest("Invalid JSON body".into()))?;
    if !body.is_object() {
        return Err(ApiError::BadRequest(
            "Invalid JSON body: expected an object".into(),
        ));
    }
    let node_id = field(&body, "node_id", 256)?;
    let msg = CreateWorkstreamMessage {
        name: field(&body, "name", 256)?,
        model: field(&body, "model", 128)?,
        initial_message: field(&body, "initial_message", 4096)?,
        skill: field(&body, "skill", 256)?,
        resume_ws: field(&body, "resume_ws", 64)?,
        user_id: identity.map(|i| i.user_id).unwrap_or_default(),
        ..CreateWorkstreamMessage::default()
    };
    let (target, correlation_id) = queue_create(console, &node_id, msg).await?;
    Ok(json!({"status": "ok", "correlation_id": correlation_id, "target_node": target}))
}

/// Queues a `create_workstream` for `node_id`: `pool` on the shared queue, `""`/`auto` on the
/// best node (503 when none is placeable), else on that node's queue (404 when the console
/// does not know it). The target and the message's correlation id.
pub async fn queue_create(
    console: &Console,
    node_id: &str,
    msg: CreateWorkstreamMessage,
) -> Result<(String, String), ApiError> {
    let keys = &console.collector.keys;
    let (queue, target, msg) = match node_id.trim() {
        "pool" => (keys.inbound(), "pool".to_string(), msg),
        "" | "auto" => {
            let placed = console
                .collector
                .read(|c| c.place_auto())
                .ok_or_else(|| ApiError::Unavailable("No reachable nodes available".into()))?;
            let target = placed.node_id;
            let msg = CreateWorkstreamMessage {
                target_node: target.clone(),
                ..msg
            };
            (keys.inbound_node(&target), target, msg)
        }
        id => {
            if !valid_node_id(id) || !console.collector.read(|c| c.nodes.contains_key(id)) {
                return Err(ApiError::NotFound("Node not found".into()));
            }
            let msg = CreateWorkstreamMessage {
                target_node: id.to_string(),
                ..msg
            };
            (keys.inbound_node(id), id.to_string(), msg)
        }
    };
    let correlation_id = msg.correlation_id.clone();
    let wire = InboundMessage::CreateWorkstream(msg).encode();
    console.rpush(&queue, &wire).await.map_err(|e| {
        tracing::error!(error = %e, "cannot queue create_workstream");
        ApiError::Unavailable(format!("Redis unavailable: {e}"))
    })?;
    tracing::info!(target_node = %target, %correlation_id, "create_workstream queued");
    Ok((target, correlation_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_follow_the_proxy_rule() {
        assert!(valid_node_id("node-1.a_b"));
        assert!(!valid_node_id(""));
        assert!(!valid_node_id("a/b"));
        assert!(!valid_node_id("a b"));
        assert!(!valid_node_id(&"x".repeat(257)));
    }

    #[test]
    fn integer_params_are_checked() {
        let mut p = HashMap::new();
        assert_eq!(int_param(&p, "page", 1, 1, 10).unwrap(), 1);
        p.insert("page".to_string(), "3".to_string());
        assert_eq!(int_param(&p, "page", 1, 1, 10).unwrap(), 3);
        for bad in ["0", "11", "-1", "abc", "1.5"] {
            p.insert("page".to_string(), bad.to_string());
            let err = int_param(&p, "page", 1, 1, 10).unwrap_err().to_string();
            assert!(err.contains("page must be an integer"), "{bad}: {err}");
        }
    }
}
