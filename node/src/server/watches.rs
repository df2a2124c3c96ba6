//! Watches over HTTP: `GET /v1/api/watches[?ws_id=]` lists active watches (every column of
//! the `watches` row), `POST /v1/api/watches/{watch_id}/cancel` deactivates one (write
//! scope, by the auth policy). Without persistence the list is empty and cancel answers 500
//! `Storage unavailable`, as the original.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use turnstone_store::Watch;

use super::error::ApiError;
use super::state::Node;

/// One watch as the API returns it: every column of the `watches` row.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WatchRow {
    /// 32 hex characters.
    pub watch_id: String,
    pub ws_id: String,
    /// The node that polls it (empty: any).
    pub node_id: String,
    pub name: String,
    pub command: String,
    pub interval_secs: f64,
    /// The stop condition; `null` for change detection.
    pub stop_on: Option<String>,
    pub max_polls: i64,
    pub poll_count: i64,
    pub last_output: Option<String>,
    pub last_exit_code: Option<i64>,
    /// ISO timestamp.
    pub last_poll: Option<String>,
    /// ISO timestamp.
    pub next_poll: Option<String>,
    /// 1 while active (always 1 in the list).
    pub active: i64,
    pub created_by: String,
    /// ISO timestamp.
    pub created: String,
    /// ISO timestamp.
    pub updated: String,
}

impl From<Watch> for WatchRow {
    fn from(w: Watch) -> Self {
        Self {
            watch_id: w.watch_id,
            ws_id: w.ws_id,
            node_id: w.node_id,
            name: w.name,
            command: w.command,
            interval_secs: w.interval_secs,
            stop_on: w.stop_on,
            max_polls: w.max_polls,
            poll_count: w.poll_count,
            last_output: w.last_output,
            last_exit_code: w.last_exit_code,
            last_poll: w.last_poll,
            next_poll: w.next_poll,
            active: i64::from(w.active),
            created_by: w.created_by,
            created: w.created,
            updated: w.updated,
        }
    }
}

/// `GET /v1/api/watches`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WatchList {
    /// Active watches, oldest first.
    pub watches: Vec<WatchRow>,
}

/// `POST /v1/api/watches/{watch_id}/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct CancelWatchReply {
    /// `"ok"`.
    pub status: String,
    pub watch_id: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub ws_id: Option<String>,
}

pub fn routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/api/watches", get(list))
        .route("/api/watches/{watch_id}/cancel", post(cancel))
}

fn storage_unavailable() -> ApiError {
    ApiError::Internal("Storage unavailable".to_string())
}

/// `GET /v1/api/watches[?ws_id=]` — a workstream's active watches, or without `ws_id`
/// every active watch of this node.
pub async fn list(
    State(node): State<Arc<Node>>,
    Query(query): Query<ListQuery>,
) -> Result<Json<WatchList>, ApiError> {
    let Some(p) = &node.persistence else {
        return Ok(Json(WatchList {
            watches: Vec::new(),
        }));
    };
    let ws_id = query.ws_id.filter(|w| !w.is_empty());
    let rows = match &ws_id {
        Some(ws_id) => p.store.list_active_watches(Some(ws_id), None).await,
        None => {
            p.store
                .list_active_watches(None, Some(&node.options.node_id))
                .await
        }
    }
    .map_err(|e| {
        tracing::warn!(error = %e, "watches not listed");
        storage_unavailable()
    })?;
    Ok(Json(WatchList {
        watches: rows.into_iter().map(WatchRow::from).collect(),
    }))
}

/// `POST /v1/api/watches/{watch_id}/cancel` — 404 for an unknown id, 403 for another
/// node's watch; cancelling an ended watch again is fine.
pub async fn cancel(
    State(node): State<Arc<Node>>,
    Path(watch_id): Path<String>,
) -> Result<Response, ApiError> {
    let Some(p) = &node.persistence else {
        return Err(storage_unavailable());
    };
    let failed = |e: turnstone_store::StoreError| {
        tracing::warn!(error = %e, %watch_id, "watch not cancelled");
        storage_unavailable()
    };
    let Some(watch) = p.store.get_watch(&watch_id).await.map_err(failed)? else {
        return Err(ApiError::NotFound("Watch not found".to_string()));
    };
    if !watch.node_id.is_empty() && watch.node_id != node.options.node_id {
        return Ok((
            StatusCode::FORBIDDEN,
            Json(json!({"error": "Watch belongs to another node"})),
        )
            .into_response());
    }
    let was_active = p.store.deactivate_watch(&watch_id).await.map_err(failed)?;
    tracing::info!(%watch_id, ws_id = %watch.ws_id, was_active, "watch cancelled over the API");
    Ok(Json(CancelWatchReply {
        status: "ok".to_string(),
        watch_id,
    })
    .into_response())
}
