//! Approval postures of workstreams over HTTP (ours; see `turnstone_governance::posture`).
//!
//! * `POST /v1/api/workstreams/new` takes `posture` (`ask`, `auto-review`, `full`; empty =
//!   `ask`).
//! * `POST /v1/api/workstreams/{ws_id}/posture` with `{"posture": …}` changes it (write
//!   scope); the reply is `{"ws_id", "posture"}`. The `connected` frame carries it.
//!
//! `full` approves everything, so asking for it is switching approvals off: it needs what
//! `auto_approve: true` needs (the approve scope, and for a user the `tools.approve`
//! permission); a write token gets 403. An unknown posture is a 400 naming the three.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::{Extension, Json};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnstone_governance::Posture;
use turnstone_runtime::auth::Identity;

use super::body::WireJson;
use super::error::ApiError;
use super::state::Node;

/// The body of `POST /v1/api/workstreams/{ws_id}/posture`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostureBody {
    /// `ask`, `auto-review` or `full` (`full` needs the approve scope).
    pub posture: String,
}

/// The reply of `POST /v1/api/workstreams/{ws_id}/posture`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PostureReply {
    pub ws_id: String,
    pub posture: String,
}

/// The posture a request asks for (`None` for an empty string), if the caller may set it.
pub fn requested(identity: Option<&Identity>, text: &str) -> Result<Option<Posture>, ApiError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let posture = Posture::parse(text).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "posture must be \"ask\", \"auto-review\" or \"full\", not {text:?}"
        ))
    })?;
    if posture == Posture::Full
        && let Some(who) = identity
        && !who.may_switch_approvals_off()
    {
        return Err(ApiError::Auth {
            status: 403,
            message: format!(
                "Forbidden: posture \"full\" switches approvals off and needs the 'approve' \
                 scope and the '{}' permission",
                turnstone_runtime::auth::APPROVALS_OFF_PERMISSION
            ),
        });
    }
    Ok(Some(posture))
}

/// `POST /v1/api/workstreams/{ws_id}/posture`.
pub async fn set(
    State(node): State<Arc<Node>>,
    identity: Option<Extension<Identity>>,
    Path(ws_id): Path<String>,
    WireJson(body): WireJson<PostureBody>,
) -> Result<Json<PostureReply>, ApiError> {
    let ws = node
        .workstream(&ws_id)
        .ok_or_else(ApiError::unknown_workstream)?;
    let posture = requested(identity.as_deref(), &body.posture)?
        .ok_or_else(|| ApiError::BadRequest("posture is required".into()))?;
    ws.set_posture(posture);
    tracing::info!(%ws_id, %posture, "posture set");
    Ok(Json(PostureReply {
        ws_id,
        posture: posture.as_str().to_owned(),
    }))
}
