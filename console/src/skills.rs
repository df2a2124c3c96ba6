//! Skills administered in the console's store (`/v1/api/admin/skills`, permission
//! `admin.skills`), with the node's operations and checks
//! ([`turnstone_accounts::skills`]). Each change is written to the audit log and the
//! console's manual skills are pushed to every node in `_internal/config-reload`'s body
//! ([`crate::cluster_settings`]), as the policies are ([`crate::policies`]); a node's
//! MCP-synced skills stay its own. A change answers with the skill and every node's reply
//! (`reload`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};
use turnstone_accounts::audit::Actor;
use turnstone_accounts::body::AccountsJson;
use turnstone_accounts::skills as shared;
use turnstone_runtime::auth::Identity;
use turnstone_store::Skill;

use crate::cluster_settings::{push_config, store};
use crate::error::ApiError;
use crate::state::Console;

/// `GET /v1/api/admin/skills`: every skill, enabled or not, every column.
pub async fn list(State(console): State<Arc<Console>>) -> Result<Json<Value>, ApiError> {
    let skills = shared::list_all(&store(&console)?).await?;
    Ok(Json(json!({ "skills": skills })))
}

/// What the audit log keeps of a skill (not its content).
fn audit_detail(s: &Skill) -> Value {
    json!({
        "template_id": s.template_id,
        "enabled": s.spec.enabled,
        "activation": s.spec.activation,
        "version": s.spec.version,
    })
}

/// `POST /v1/api/admin/skills`: 201 `{skill, reload}`; 409 when the name is taken.
pub async fn create(
    State(console): State<Arc<Console>>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
    AccountsJson(body): AccountsJson<Value>,
) -> Result<Response, ApiError> {
    let store = store(&console)?;
    let user = (!actor.user_id.is_empty()).then_some(actor.user_id.as_str());
    let skill = shared::create(&store, &body, user).await?;
    actor
        .record(
            &store,
            "skill.create",
            "skill",
            &skill.spec.name,
            audit_detail(&skill),
        )
        .await;
    let reload = push_config(&console, identity).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"skill": skill, "reload": reload})),
    )
        .into_response())
}

/// `PUT /v1/api/admin/skills/{name}`: `{skill, reload}`; 404 unknown, 403 read-only.
pub async fn update(
    State(console): State<Arc<Console>>,
    Path(name): Path<String>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
    AccountsJson(body): AccountsJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    let skill = shared::update(&store, &name, &body).await?;
    actor
        .record(&store, "skill.update", "skill", &name, audit_detail(&skill))
        .await;
    let reload = push_config(&console, identity).await?;
    Ok(Json(json!({"skill": skill, "reload": reload})))
}

/// `DELETE /v1/api/admin/skills/{name}`: `{status, name, reload}`; 404 unknown, 403
/// read-only.
pub async fn delete(
    State(console): State<Arc<Console>>,
    Path(name): Path<String>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    let reply = shared::delete(&store, &name).await?;
    actor
        .record(&store, "skill.delete", "skill", &name, json!({}))
        .await;
    let reload = push_config(&console, identity).await?;
    Ok(Json(
        json!({"status": reply.status, "name": reply.name, "reload": reload}),
    ))
}
