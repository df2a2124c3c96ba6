//! Roles: the admin routes over [`turnstone_store::RoleStore`]. A role's permissions must
//! come from [`PERMISSIONS`] (the vocabulary the built-in admin role holds, spec §3.4);
//! built-in roles are read-only.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnstone_store::{NewRole, Role, RoleUpdate};

use crate::body::AccountsJson;
use crate::error::AccountsError;
use crate::users::{AccountsHost, store_of};

/// Every permission a role may hold.
pub const PERMISSIONS: &[&str] = &[
    "read",
    "write",
    "approve",
    "admin.audit",
    "admin.judge",
    "admin.mcp",
    "admin.memories",
    "admin.models",
    "admin.orgs",
    "admin.policies",
    "admin.roles",
    "admin.schedules",
    "admin.settings",
    "admin.skills",
    "admin.usage",
    "admin.users",
    "admin.watches",
    "conversation.modify",
    "tools.approve",
    "workstreams.close",
    "workstreams.create",
];

/// A comma list of known permissions, or the 400 naming the first unknown one.
pub fn check_permissions(list: &str) -> Result<(), AccountsError> {
    let mut any = false;
    for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if !PERMISSIONS.contains(&p) {
            return Err(AccountsError::BadRequest(format!(
                "Unknown permission '{p}' (expected one of: {})",
                PERMISSIONS.join(", ")
            )));
        }
        any = true;
    }
    if !any {
        return Err(AccountsError::BadRequest(
            "permissions must not be empty".into(),
        ));
    }
    Ok(())
}

/// A role as the admin routes show it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RoleView {
    pub role_id: String,
    pub name: String,
    pub display_name: String,
    /// Comma list, sorted.
    pub permissions: String,
    pub builtin: bool,
    pub created: String,
    pub updated: String,
}

impl From<Role> for RoleView {
    fn from(r: Role) -> Self {
        Self {
            role_id: r.role_id,
            name: r.name,
            display_name: r.display_name,
            permissions: r.permissions,
            builtin: r.builtin,
            created: r.created,
            updated: r.updated,
        }
    }
}

/// `GET /v1/api/admin/roles`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RoleList {
    pub roles: Vec<RoleView>,
    /// Every permission a role may hold ([`PERMISSIONS`]), for a role editor.
    #[serde(default)]
    pub permissions: Vec<String>,
}

/// `POST /v1/api/admin/roles` (every field) and `PUT /v1/api/admin/roles/{role_id}`
/// (`display_name` and/or `permissions`; the name is fixed).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct RoleBody {
    pub name: Option<String>,
    pub display_name: Option<String>,
    /// Comma list of [`PERMISSIONS`].
    pub permissions: Option<String>,
}

pub async fn list_roles<S: AccountsHost>(
    State(host): State<Arc<S>>,
) -> Result<Json<RoleList>, AccountsError> {
    let roles = store_of(&*host)?
        .list_roles()
        .await
        .map_err(AccountsError::storage)?;
    Ok(Json(RoleList {
        roles: roles.into_iter().map(RoleView::from).collect(),
        permissions: PERMISSIONS.iter().map(|p| p.to_string()).collect(),
    }))
}

pub async fn create_role<S: AccountsHost>(
    State(host): State<Arc<S>>,
    actor: crate::audit::Actor,
    AccountsJson(body): AccountsJson<RoleBody>,
) -> Result<Response, AccountsError> {
    let store = store_of(&*host)?;
    let name = body.name.as_deref().map(str::trim).unwrap_or_default();
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(AccountsError::BadRequest(
            "Invalid role name (1-64 chars: letters, digits, . _ -)".into(),
        ));
    }
    let permissions = body.permissions.unwrap_or_default();
    check_permissions(&permissions)?;
    let display_name = body
        .display_name
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| name.to_string());
    let role = store
        .create_role(NewRole {
            name: name.to_string(),
            display_name,
            permissions,
        })
        .await
        .map_err(AccountsError::from_store)?;
    tracing::info!(role_id = %role.role_id, name = %role.name, "role created");
    let detail = serde_json::json!({"name": role.name, "permissions": role.permissions});
    actor
        .record(&store, "role.create", "role", &role.role_id, detail)
        .await;
    Ok((StatusCode::CREATED, Json(RoleView::from(role))).into_response())
}

pub async fn update_role<S: AccountsHost>(
    State(host): State<Arc<S>>,
    Path(role_id): Path<String>,
    actor: crate::audit::Actor,
    AccountsJson(body): AccountsJson<RoleBody>,
) -> Result<Json<RoleView>, AccountsError> {
    let store = store_of(&*host)?;
    if body.name.is_some() {
        return Err(AccountsError::BadRequest(
            "A role's name cannot be changed".into(),
        ));
    }
    if body.display_name.is_none() && body.permissions.is_none() {
        return Err(AccountsError::BadRequest(
            "Nothing to change: give display_name and/or permissions".into(),
        ));
    }
    if let Some(p) = &body.permissions {
        check_permissions(p)?;
    }
    let role = store
        .update_role(
            &role_id,
            RoleUpdate {
                display_name: body.display_name,
                permissions: body.permissions,
            },
        )
        .await
        .map_err(AccountsError::from_store)?
        .ok_or_else(role_not_found)?;
    tracing::info!(role_id, "role updated");
    let detail =
        serde_json::json!({"display_name": role.display_name, "permissions": role.permissions});
    actor
        .record(&store, "role.update", "role", &role_id, detail)
        .await;
    Ok(Json(RoleView::from(role)))
}

fn role_not_found() -> AccountsError {
    AccountsError::NotFound("Role not found".into())
}

pub async fn delete_role<S: AccountsHost>(
    State(host): State<Arc<S>>,
    Path(role_id): Path<String>,
    actor: crate::audit::Actor,
) -> Result<Json<serde_json::Value>, AccountsError> {
    let store = store_of(&*host)?;
    let done = store
        .delete_role(&role_id)
        .await
        .map_err(AccountsError::from_store)?;
    if done {
        actor
            .record(
                &store,
                "role.delete",
                "role",
                &role_id,
                serde_json::json!({}),
            )
            .await;
    }
    crate::users::deleted(done, "role_id", role_id, role_not_found())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_come_from_the_vocabulary() {
        assert!(check_permissions("read, admin.users").is_ok());
        let err = check_permissions("read,root").unwrap_err();
        assert!(err.to_string().contains("'root'"), "{err}");
        assert!(check_permissions(" , ").is_err());
    }
}
