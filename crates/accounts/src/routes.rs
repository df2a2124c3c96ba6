//! The admin routes both services serve the same way — users, API tokens, roles and the
//! usage report — relative to `/v1` (both services nest them there). What each needs (scope
//! approve and `admin.users` / `admin.roles` / `admin.usage`) is in the services' route
//! tables, checked by their auth layers before a handler runs.

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, put};

use crate::roles::{create_role, delete_role, list_roles, update_role};
use crate::usage::usage_report;
use crate::users::{
    AccountsHost, create_token, create_user, delete_token, delete_user, list_tokens, list_users,
    set_user_roles, update_user,
};

/// Method and path (relative to `/v1`) of every shared admin route, and the permission it
/// needs (with scope approve).
pub const ADMIN_ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/api/admin/users", "admin.users"),
    ("POST", "/api/admin/users", "admin.users"),
    ("PUT", "/api/admin/users/{user_id}", "admin.users"),
    ("DELETE", "/api/admin/users/{user_id}", "admin.users"),
    ("PUT", "/api/admin/users/{user_id}/roles", "admin.roles"),
    ("GET", "/api/admin/tokens", "admin.users"),
    ("POST", "/api/admin/tokens", "admin.users"),
    ("DELETE", "/api/admin/tokens/{token_id}", "admin.users"),
    ("GET", "/api/admin/roles", "admin.roles"),
    ("POST", "/api/admin/roles", "admin.roles"),
    ("PUT", "/api/admin/roles/{role_id}", "admin.roles"),
    ("DELETE", "/api/admin/roles/{role_id}", "admin.roles"),
    ("GET", "/api/admin/usage", "admin.usage"),
];

/// The routes (relative to `/v1`).
pub fn admin_routes<S: AccountsHost>() -> Router<Arc<S>> {
    Router::new()
        .route(
            "/api/admin/users",
            get(list_users::<S>).post(create_user::<S>),
        )
        .route(
            "/api/admin/users/{user_id}",
            put(update_user::<S>).delete(delete_user::<S>),
        )
        .route("/api/admin/users/{user_id}/roles", put(set_user_roles::<S>))
        .route(
            "/api/admin/tokens",
            get(list_tokens::<S>).post(create_token::<S>),
        )
        .route(
            "/api/admin/tokens/{token_id}",
            axum::routing::delete(delete_token::<S>),
        )
        .route(
            "/api/admin/roles",
            get(list_roles::<S>).post(create_role::<S>),
        )
        .route(
            "/api/admin/roles/{role_id}",
            put(update_role::<S>).delete(delete_role::<S>),
        )
        .route("/api/admin/usage", get(usage_report::<S>))
}
