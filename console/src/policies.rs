//! Tool policies administered in the console's store (`/v1/api/admin/policies`, permission
//! `admin.policies`), with the node's wire types, checks and store operations
//! ([`turnstone_accounts::policies`]). Each change is written to the audit log and pushed
//! to every node in `_internal/config-reload`'s body with the rest of the console's state
//! ([`crate::cluster_settings`]): a node on its own SQLite stores the policies (and keeps
//! them across restarts and without the console), one sharing the console's PostgreSQL
//! already has them; both rebuild their engine's policy set at once. A change answers with
//! the policy and every node's reply (`reload`: `{results, errors}`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};
use turnstone_accounts::audit::Actor;
use turnstone_accounts::body::AccountsJson;
use turnstone_accounts::policies::{self as shared, PolicyBody, PolicyList};
use turnstone_runtime::auth::Identity;

use crate::cluster_settings::{push_config, store};
use crate::error::ApiError;
use crate::state::Console;

/// `GET /v1/api/admin/policies`: the stored policies in evaluation order.
pub async fn list(State(console): State<Arc<Console>>) -> Result<Json<PolicyList>, ApiError> {
    let policies = shared::list_stored(&store(&console)?).await?;
    Ok(Json(PolicyList { policies }))
}

/// `POST /v1/api/admin/policies`: 201 `{policy, reload}`.
pub async fn create(
    State(console): State<Arc<Console>>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
    AccountsJson(body): AccountsJson<PolicyBody>,
) -> Result<Response, ApiError> {
    shared::checked(&body)?;
    let store = store(&console)?;
    let row = shared::create(&store, &body, actor.user_id.clone()).await?;
    actor
        .record(
            &store,
            "policy.create",
            "policy",
            &row.policy_id,
            json!(row),
        )
        .await;
    let reload = push_config(&console, identity).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"policy": row, "reload": reload})),
    )
        .into_response())
}

/// `PUT /v1/api/admin/policies/{policy_id}`: `{policy, reload}`; 404 unknown.
pub async fn update(
    State(console): State<Arc<Console>>,
    Path(policy_id): Path<String>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
    AccountsJson(body): AccountsJson<PolicyBody>,
) -> Result<Json<Value>, ApiError> {
    shared::read_only(&policy_id)?;
    shared::checked(&body)?;
    let store = store(&console)?;
    let row = shared::update(&store, &policy_id, &body).await?;
    actor
        .record(&store, "policy.update", "policy", &policy_id, json!(row))
        .await;
    let reload = push_config(&console, identity).await?;
    Ok(Json(json!({"policy": row, "reload": reload})))
}

/// `DELETE /v1/api/admin/policies/{policy_id}`: `{status, policy_id, reload}`; 404 unknown.
pub async fn delete(
    State(console): State<Arc<Console>>,
    Path(policy_id): Path<String>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
) -> Result<Json<Value>, ApiError> {
    shared::read_only(&policy_id)?;
    let store = store(&console)?;
    let reply = shared::delete(&store, &policy_id).await?;
    actor
        .record(&store, "policy.delete", "policy", &policy_id, json!({}))
        .await;
    let reload = push_config(&console, identity).await?;
    Ok(Json(
        json!({"status": reply.status, "policy_id": reply.policy_id, "reload": reload}),
    ))
}
