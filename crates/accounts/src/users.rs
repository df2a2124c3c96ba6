//! Users and `ts_` API tokens: the bodies and views of the admin routes, their checks, and
//! the handlers (generic over the service, [`AccountsHost`]). A raw API token is shown once,
//! in the reply that creates it; only its SHA-256 is stored.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnstone_runtime::auth::{Identity, Scope, Scopes, generate_api_token, hash_api_token};
use turnstone_store::auth::{ROLE_ADMIN, ROLE_OPERATOR, ROLE_VIEWER};
use turnstone_store::{ApiToken, NewApiToken, NewUser, Store, StoreError, User, UserUpdate};

use crate::body::AccountsJson;
use crate::error::AccountsError;
use crate::passwords::{hash_password, identity_of_user, validate_password};

/// A service serving the account routes: it may have storage.
pub trait AccountsHost: Send + Sync + 'static {
    /// The store, `None` when the service runs without one (the routes answer 503).
    fn accounts_store(&self) -> Option<Arc<dyn Store>>;
}

/// The host's store, or 503 `Storage not available`.
pub fn store_of<S: AccountsHost + ?Sized>(host: &S) -> Result<Arc<dyn Store>, AccountsError> {
    host.accounts_store().ok_or_else(AccountsError::no_storage)
}

/// Whether any user exists (`false` without storage or when storage fails).
pub async fn has_users(store: Option<&Arc<dyn Store>>) -> bool {
    match store {
        Some(s) => s.count_users().await.is_ok_and(|n| n > 0),
        None => false,
    }
}

/// `POST /v1/api/auth/setup` and `POST /v1/api/admin/users`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct NewUserBody {
    pub username: String,
    pub display_name: String,
    pub password: String,
    /// Admin route only: `admin`, `operator`, `viewer` (default) or a role id.
    pub role: Option<String>,
    /// Setup only: the one-time setup code the service printed at start (the alternative to
    /// a full-access bearer token).
    pub setup_code: Option<String>,
}

/// Checks a new user's fields; the error is the original's 400 message.
pub fn validate_new_user(body: &NewUserBody) -> Result<(), AccountsError> {
    let name = body.username.trim();
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(AccountsError::BadRequest(
            "Invalid username (1-64 chars: letters, digits, . _ -)".into(),
        ));
    }
    if body.display_name.trim().is_empty() {
        return Err(AccountsError::BadRequest("display_name is required".into()));
    }
    validate_password(&body.password)
}

async fn new_user(body: &NewUserBody, role: &str) -> Result<NewUser, AccountsError> {
    Ok(NewUser {
        username: body.username.trim().to_string(),
        display_name: body.display_name.trim().to_string(),
        password_hash: hash_password(body.password.clone()).await?,
        roles: vec![role.to_string()],
    })
}

/// The role id a `role` field names: the built-in names, else the id as given.
pub fn role_id_of(name: &str) -> &str {
    match name.trim() {
        "admin" => ROLE_ADMIN,
        "operator" => ROLE_OPERATOR,
        "viewer" | "" => ROLE_VIEWER,
        other => other,
    }
}

/// The reply of setup: login's fields plus the new user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SetupReply {
    pub status: String,
    pub user_id: String,
    pub username: String,
    pub role: String,
    pub scopes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
}

/// Creates the first user (admin role) if there is none; the login reply's identity.
pub async fn setup_first_user(
    store: &Arc<dyn Store>,
    body: &NewUserBody,
) -> Result<(Identity, SetupReply), AccountsError> {
    validate_new_user(body)?;
    if store.count_users().await.map_err(AccountsError::storage)? > 0 {
        return Err(setup_done());
    }
    let user = new_user(body, ROLE_ADMIN).await?;
    let Some(created) = store
        .create_first_user(user)
        .await
        .map_err(AccountsError::from_store)?
    else {
        return Err(setup_done());
    };
    tracing::info!(user_id = %created.user_id, username = %created.username, "first user created by setup");
    let identity = identity_of_user(store, &created.user_id).await?;
    let reply = SetupReply {
        status: "ok".into(),
        user_id: created.user_id,
        username: created.username,
        role: identity.role().as_str().to_string(),
        scopes: identity.scopes.to_string(),
        permissions: (!identity.permissions.is_empty()).then(|| identity.permissions.to_string()),
        jwt: None,
    };
    Ok((identity, reply))
}

fn setup_done() -> AccountsError {
    AccountsError::Conflict("Setup already completed".into())
}

/// `GET /v1/api/admin/users`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct UserList {
    pub users: Vec<UserView>,
}

/// A user as the admin routes show it (never the password hash).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct UserView {
    pub user_id: String,
    pub username: String,
    pub display_name: String,
    pub created: String,
    /// The role ids the user holds.
    #[serde(default)]
    pub roles: Vec<String>,
}

impl UserView {
    async fn of(store: &Arc<dyn Store>, u: User) -> Result<Self, AccountsError> {
        let roles = store
            .user_role_ids(&u.user_id)
            .await
            .map_err(AccountsError::storage)?;
        Ok(Self {
            user_id: u.user_id,
            username: u.username,
            display_name: u.display_name,
            created: u.created,
            roles,
        })
    }
}

pub async fn list_users<S: AccountsHost>(
    State(host): State<Arc<S>>,
) -> Result<Json<UserList>, AccountsError> {
    let store = store_of(&*host)?;
    let mut users = Vec::new();
    for u in store.list_users().await.map_err(AccountsError::storage)? {
        users.push(UserView::of(&store, u).await?);
    }
    Ok(Json(UserList { users }))
}

pub async fn create_user<S: AccountsHost>(
    State(host): State<Arc<S>>,
    actor: crate::audit::Actor,
    AccountsJson(body): AccountsJson<NewUserBody>,
) -> Result<Response, AccountsError> {
    let store = store_of(&*host)?;
    validate_new_user(&body)?;
    let role = role_id_of(body.role.as_deref().unwrap_or("viewer"));
    let user = match store.create_user(new_user(&body, role).await?).await {
        Err(StoreError::InvalidInput(m)) if m.starts_with("unknown role") => {
            return Err(AccountsError::BadRequest(format!(
                "Unknown role '{role}' (expected admin, operator, viewer or a role id)"
            )));
        }
        other => other.map_err(AccountsError::from_store)?,
    };
    tracing::info!(user_id = %user.user_id, role, "user created");
    actor
        .record(
            &store,
            "user.create",
            "user",
            &user.user_id,
            serde_json::json!({"username": user.username, "role": role}),
        )
        .await;
    Ok((StatusCode::CREATED, Json(UserView::of(&store, user).await?)).into_response())
}

/// `PUT /v1/api/admin/users/{user_id}`: a new display name and/or password (a new password
/// ends the user's sessions).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct UpdateUserBody {
    pub display_name: Option<String>,
    pub password: Option<String>,
}

pub async fn update_user<S: AccountsHost>(
    State(host): State<Arc<S>>,
    Path(user_id): Path<String>,
    actor: crate::audit::Actor,
    AccountsJson(body): AccountsJson<UpdateUserBody>,
) -> Result<Json<UserView>, AccountsError> {
    let store = store_of(&*host)?;
    if body.display_name.is_none() && body.password.is_none() {
        return Err(AccountsError::BadRequest(
            "Nothing to change: give display_name and/or password".into(),
        ));
    }
    if body
        .display_name
        .as_deref()
        .is_some_and(|d| d.trim().is_empty())
    {
        return Err(AccountsError::BadRequest(
            "display_name must not be empty".into(),
        ));
    }
    let password_hash = match body.password {
        Some(p) => {
            validate_password(&p)?;
            Some(hash_password(p).await?)
        }
        None => None,
    };
    let detail = serde_json::json!({
        "display_name": body.display_name,
        "password_changed": password_hash.is_some(),
    });
    let update = UserUpdate {
        display_name: body.display_name,
        password_hash,
    };
    let user = store
        .update_user(&user_id, update)
        .await
        .map_err(AccountsError::from_store)?
        .ok_or_else(user_not_found)?;
    tracing::info!(user_id = %user.user_id, "user updated");
    actor
        .record(&store, "user.update", "user", &user_id, detail)
        .await;
    Ok(Json(UserView::of(&store, user).await?))
}

fn user_not_found() -> AccountsError {
    AccountsError::NotFound("User not found".into())
}

/// The reply of a delete: `{"status": "ok", <key>: id}` when a row went, else `missing`.
pub fn deleted(
    done: bool,
    key: &str,
    id: String,
    missing: AccountsError,
) -> Result<Json<serde_json::Value>, AccountsError> {
    if !done {
        return Err(missing);
    }
    tracing::info!(key, id, "deleted");
    let mut reply = serde_json::json!({"status": "ok"});
    reply[key] = serde_json::Value::String(id);
    Ok(Json(reply))
}

pub async fn delete_user<S: AccountsHost>(
    State(host): State<Arc<S>>,
    Path(user_id): Path<String>,
    actor: crate::audit::Actor,
) -> Result<Json<serde_json::Value>, AccountsError> {
    let store = store_of(&*host)?;
    let done = store
        .delete_user(&user_id)
        .await
        .map_err(AccountsError::storage)?;
    if done {
        actor
            .record(
                &store,
                "user.delete",
                "user",
                &user_id,
                serde_json::json!({}),
            )
            .await;
    }
    deleted(done, "user_id", user_id, user_not_found())
}

/// `PUT /v1/api/admin/users/{user_id}/roles`: the user's whole set of roles.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct UserRolesBody {
    /// Role ids (or `admin`, `operator`, `viewer`); an empty list leaves the user none.
    pub roles: Vec<String>,
}

pub async fn set_user_roles<S: AccountsHost>(
    State(host): State<Arc<S>>,
    Path(user_id): Path<String>,
    identity: Option<Extension<Identity>>,
    actor: crate::audit::Actor,
    AccountsJson(body): AccountsJson<UserRolesBody>,
) -> Result<Json<UserView>, AccountsError> {
    let store = store_of(&*host)?;
    let roles: Vec<String> = body
        .roles
        .iter()
        .map(|r| role_id_of(r).to_string())
        .collect();
    let by = identity.map(|Extension(i)| i.user_id).unwrap_or_default();
    if !store
        .set_user_roles(&user_id, &roles, &by)
        .await
        .map_err(AccountsError::from_store)?
    {
        return Err(user_not_found());
    }
    let user = store
        .get_user(&user_id)
        .await
        .map_err(AccountsError::storage)?
        .ok_or_else(user_not_found)?;
    tracing::info!(user_id, ?roles, "user roles set");
    actor
        .record(
            &store,
            "user.roles",
            "user",
            &user_id,
            serde_json::json!({"roles": roles}),
        )
        .await;
    Ok(Json(UserView::of(&store, user).await?))
}

/// `GET /v1/api/admin/tokens`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenView>,
}

/// A stored token as the admin routes show it (never the hash).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct TokenView {
    pub token_id: String,
    pub token_prefix: String,
    pub user_id: String,
    pub name: String,
    pub scopes: String,
    pub created: String,
    pub expires: Option<String>,
    /// The raw token: only in the reply that creates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl From<ApiToken> for TokenView {
    fn from(t: ApiToken) -> Self {
        Self {
            token_id: t.token_id,
            token_prefix: t.token_prefix,
            user_id: t.user_id,
            name: t.name,
            scopes: t.scopes,
            created: t.created,
            expires: t.expires,
            token: None,
        }
    }
}

pub async fn list_tokens<S: AccountsHost>(
    State(host): State<Arc<S>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Result<Json<TokenList>, AccountsError> {
    // A map, so a repeated parameter is not a (plain-text) rejection: the last one counts.
    let user_id = query.get("user_id").map(String::as_str);
    let tokens = store_of(&*host)?
        .list_api_tokens(user_id.filter(|u| !u.is_empty()))
        .await
        .map_err(AccountsError::storage)?;
    Ok(Json(TokenList {
        tokens: tokens.into_iter().map(TokenView::from).collect(),
    }))
}

/// `POST /v1/api/admin/tokens`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct NewTokenBody {
    /// The owner, by id or by username (one of the two).
    pub user_id: Option<String>,
    pub username: Option<String>,
    pub name: String,
    /// Comma list of `read`, `write`, `approve` (default `read`).
    pub scopes: Option<String>,
    /// Days until it expires; absent = never.
    pub expires_days: Option<u32>,
}

pub async fn create_token<S: AccountsHost>(
    State(host): State<Arc<S>>,
    actor: crate::audit::Actor,
    AccountsJson(body): AccountsJson<NewTokenBody>,
) -> Result<Response, AccountsError> {
    let store = store_of(&*host)?;
    let user_id = match (body.user_id.as_deref(), body.username.as_deref()) {
        (Some(id), None) if !id.trim().is_empty() => store
            .get_user(id.trim())
            .await
            .map_err(AccountsError::storage)?
            .map(|u| u.user_id),
        (None, Some(name)) if !name.trim().is_empty() => store
            .user_credentials(name)
            .await
            .map_err(AccountsError::storage)?
            .map(|c| c.user.user_id),
        _ => {
            return Err(AccountsError::BadRequest(
                "Give exactly one of user_id or username".into(),
            ));
        }
    };
    let user_id = user_id.ok_or_else(user_not_found)?;
    let scopes = parse_scopes(body.scopes.as_deref().unwrap_or("read"))?;
    let expires = match body.expires_days {
        None => None,
        Some(0) => {
            return Err(AccountsError::BadRequest(
                "expires_days must be at least 1".into(),
            ));
        }
        Some(days) => Some(turnstone_store::timestamp::format_system_time(
            SystemTime::now() + Duration::from_secs(u64::from(days) * 86_400),
        )),
    };
    let raw = generate_api_token().map_err(|e| AccountsError::Internal(e.to_string()))?;
    let record = store
        .create_api_token(NewApiToken {
            token_hash: hash_api_token(&raw),
            token_prefix: raw.chars().take(8).collect(),
            user_id,
            name: body.name.trim().to_string(),
            scopes,
            expires,
        })
        .await
        .map_err(AccountsError::from_store)?;
    tracing::info!(token_id = %record.token_id, user_id = %record.user_id, "API token created");
    let detail = serde_json::json!({"user_id": record.user_id, "name": record.name, "scopes": record.scopes});
    actor
        .record(&store, "token.create", "token", &record.token_id, detail)
        .await;
    let mut view = TokenView::from(record);
    view.token = Some(raw);
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// A comma list of scopes, checked and written back sorted.
pub fn parse_scopes(wire: &str) -> Result<String, AccountsError> {
    let mut scopes = Scopes::empty();
    for part in wire.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let scope: Scope = part.parse().map_err(|_| {
            AccountsError::BadRequest(format!(
                "Unknown scope '{part}' (expected read, write or approve)"
            ))
        })?;
        scopes.insert(scope);
    }
    if scopes.is_empty() {
        return Err(AccountsError::BadRequest("scopes must not be empty".into()));
    }
    Ok(scopes.to_string())
}

pub async fn delete_token<S: AccountsHost>(
    State(host): State<Arc<S>>,
    Path(token_id): Path<String>,
    actor: crate::audit::Actor,
) -> Result<Json<serde_json::Value>, AccountsError> {
    let store = store_of(&*host)?;
    let done = store
        .delete_api_token(&token_id)
        .await
        .map_err(AccountsError::storage)?;
    if done {
        actor
            .record(
                &store,
                "token.delete",
                "token",
                &token_id,
                serde_json::json!({}),
            )
            .await;
    }
    let missing = AccountsError::NotFound("Token not found".into());
    deleted(done, "token_id", token_id, missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_checked_and_sorted() {
        assert_eq!(parse_scopes("write, read").unwrap(), "read,write");
        assert!(parse_scopes("admin").is_err());
        assert!(parse_scopes(" , ").is_err());
    }

    #[test]
    fn new_users_are_validated_as_the_original() {
        let ok = NewUserBody {
            username: "ada.l-1_x".into(),
            display_name: "Ada".into(),
            password: "correct horse".into(),
            ..NewUserBody::default()
        };
        assert!(validate_new_user(&ok).is_ok());
        let bad_name = NewUserBody {
            username: "ada lovelace".into(),
            display_name: "Ada".into(),
            password: "correct horse".into(),
            ..NewUserBody::default()
        };
        assert!(
            matches!(validate_new_user(&bad_name), Err(AccountsError::BadRequest(m)) if m.starts_with("Invalid username"))
        );
        let short = NewUserBody {
            username: "ada".into(),
            display_name: "Ada".into(),
            password: "short".into(),
            ..NewUserBody::default()
        };
        assert!(
            matches!(validate_new_user(&short), Err(AccountsError::BadRequest(m)) if m.contains("at least 8"))
        );
    }

    #[test]
    fn role_names_map_to_the_builtin_ids() {
        assert_eq!(role_id_of("admin"), ROLE_ADMIN);
        assert_eq!(role_id_of(""), ROLE_VIEWER);
        assert_eq!(role_id_of("custom-1"), "custom-1");
    }
}
