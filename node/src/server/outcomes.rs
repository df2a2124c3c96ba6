//! `POST /v1/api/sends/outcomes` (ours): what became of sends, by correlation id.
//!
//! For a bridge that handed sends to this node and then saw it restart: a `turn_complete`
//! the node emitted just before it stopped may never have reached the bridge (the event
//! stream lives in memory). Each send's row in the store says where it is; one that
//! `completed` in a previous run carries its `turn_complete`, which the bridge then
//! publishes once. (A turn the previous run left unfinished is reported `completed` by this
//! run's start-up, on its own event stream: see `crate::send_queue::recover`.)

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use turnstone_proto::api::{MAX_OUTCOME_QUERY, SendOutcome, SendOutcomes, SendOutcomesBody};
use turnstone_store::QueuedState;

use super::body::WireJson;
use super::error::ApiError;
use super::state::Node;

pub async fn outcomes(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<SendOutcomesBody>,
) -> Result<Json<SendOutcomes>, ApiError> {
    if body.correlation_ids.len() > MAX_OUTCOME_QUERY {
        return Err(ApiError::BadRequest(format!(
            "at most {MAX_OUTCOME_QUERY} correlation_ids per request, got {}",
            body.correlation_ids.len()
        )));
    }
    let Some(p) = &node.persistence else {
        return Err(ApiError::Unavailable(
            "this node stores no sends (no persistence)".into(),
        ));
    };
    let run_began = turnstone_store::timestamp::format_system_time(node.started);
    let mut outcomes = Vec::with_capacity(body.correlation_ids.len());
    for correlation_id in body.correlation_ids {
        let row = p
            .store
            .queued_send(&correlation_id)
            .await
            .map_err(|e| ApiError::Unavailable(format!("store: {e}")))?;
        let outcome = match row {
            None => SendOutcome {
                correlation_id,
                state: turnstone_proto::api::OUTCOME_UNKNOWN.into(),
                ..SendOutcome::default()
            },
            Some(row) => {
                let completed = row.state == QueuedState::Completed;
                SendOutcome {
                    correlation_id,
                    ws_id: row.ws_id,
                    state: row.state.as_str().into(),
                    previous_run: completed && row.updated < run_began,
                    turn_complete: completed
                        .then(|| serde_json::from_str(&row.outcome).ok())
                        .flatten(),
                }
            }
        };
        outcomes.push(outcome);
    }
    Ok(Json(SendOutcomes { outcomes }))
}
