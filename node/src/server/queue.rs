//! The queued messages of a workstream (`crate::send_queue`): list them, remove one.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};
use turnstone_proto::api::QueueList;

use super::error::ApiError;
use super::state::Node;
use crate::send_queue;

/// `GET /v1/api/workstreams/{ws_id}/queue` — the messages waiting for their turn, next
/// first ([`QueueList`]).
pub async fn list(
    State(node): State<Arc<Node>>,
    Path(ws_id): Path<String>,
) -> Result<Json<QueueList>, ApiError> {
    let ws = node.resolve(&ws_id).await?;
    Ok(Json(QueueList {
        ws_id: ws.id().to_string(),
        busy: ws.is_busy(),
        max: node.options.max_queued_sends as u64,
        queued: node
            .queues
            .snapshot(ws.id())
            .iter()
            .map(|m| m.wire())
            .collect(),
    }))
}

/// `DELETE /v1/api/workstreams/{ws_id}/queue/{correlation_id}` — removes one waiting
/// message (it never runs). `404` when it does not wait (unknown, or its turn started).
pub async fn remove(
    State(node): State<Arc<Node>>,
    Path((ws_id, correlation_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    node.resolve(&ws_id).await?;
    if send_queue::remove(&node, &ws_id, &correlation_id).await? {
        Ok(Json(json!({"status": "ok", "removed": correlation_id})))
    } else {
        Err(ApiError::NotFound(format!(
            "No queued message {correlation_id} in this workstream (unknown, or its turn started)"
        )))
    }
}
