//! Stored users and API tokens: `ts_` token lookup for the authenticator, password checks
//! for login, one-time setup of the first admin (`POST /v1/api/auth/setup`, spec §3.5), and
//! the node's user/token administration under `/v1/api/admin/` (approve scope — the auth
//! layer requires it for every `/api/admin/` path).
//!
//! The original administered users only on the console or with `turnstone-admin`; these
//! routes are an addition so a standalone node can be run with stored users and API tokens.
//! A raw API token is shown once, in the reply that creates it; only its SHA-256 is stored.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnstone_runtime::auth::{
    ApiTokenLookup, ApiTokenLookupError, ApiTokenRecord, CredentialKind, Identity, Permissions,
    Scope, Scopes, generate_api_token, hash_api_token,
};
use turnstone_store::auth::{ROLE_ADMIN, ROLE_OPERATOR, ROLE_VIEWER};
use turnstone_store::{ApiToken, NewApiToken, NewUser, Store, StoreError, User};

use super::body::WireJson;
use super::error::ApiError;
use super::memories::store;
use super::state::Node;

/// bcrypt work factor of new password hashes (the Python original's default).
pub const BCRYPT_COST: u32 = 12;
/// Longest password accepted (bcrypt reads at most 72 bytes; longer ones are refused rather
/// than silently truncated).
const MAX_PASSWORD_BYTES: usize = 72;

/// `ts_` API tokens looked up in the store.
pub struct StoreApiTokens(pub Arc<dyn Store>);

#[async_trait::async_trait]
impl ApiTokenLookup for StoreApiTokens {
    async fn lookup_api_token(
        &self,
        token_hash: &str,
    ) -> Result<Option<ApiTokenRecord>, ApiTokenLookupError> {
        let failed = |e: StoreError| ApiTokenLookupError(e.to_string());
        let Some(row) = self.0.api_token_by_hash(token_hash).await.map_err(failed)? else {
            return Ok(None);
        };
        // An expiry that cannot be read is treated as already expired.
        let expires_at = row
            .expires
            .as_deref()
            .filter(|e| !e.trim().is_empty())
            .map(|text| turnstone_store::timestamp::parse(text).unwrap_or(SystemTime::UNIX_EPOCH));
        let permissions = self
            .0
            .user_permissions(&row.user_id)
            .await
            .map_err(failed)?;
        let generation = self
            .0
            .session_generation(&row.user_id)
            .await
            .map_err(failed)?;
        Ok(Some(ApiTokenRecord {
            user_id: row.user_id,
            scopes: Scopes::parse(&row.scopes),
            expires_at,
            permissions: Permissions::parse(&permissions.join(",")),
            generation,
        }))
    }

    async fn session_generation(&self, user_id: &str) -> Result<Option<i64>, ApiTokenLookupError> {
        self.0
            .session_generation(user_id)
            .await
            .map_err(|e| ApiTokenLookupError(e.to_string()))
    }
}

/// Hashes a password off the async runtime (bcrypt is deliberately slow).
async fn hash_password(password: String) -> Result<String, ApiError> {
    tokio::task::spawn_blocking(move || bcrypt::hash(password, BCRYPT_COST))
        .await
        .map_err(|e| ApiError::Internal(format!("password hashing failed: {e}")))?
        .map_err(|e| ApiError::Internal(format!("password hashing failed: {e}")))
}

/// A bcrypt hash of a random secret nobody knows, verified when the username does not
/// exist so that both failures take as long. Made once, on first use.
fn dummy_hash() -> String {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY
        .get_or_init(|| {
            let secret = generate_api_token().unwrap_or_else(|_| "unguessable".into());
            bcrypt::hash(secret, BCRYPT_COST).unwrap_or_default()
        })
        .clone()
}

/// The identity of `username` if `password` is theirs. Unknown users, SSO-only users (the
/// `!oidc` hash sentinel) and wrong passwords are all `None`.
pub async fn password_identity(
    store: &Arc<dyn Store>,
    username: &str,
    password: &str,
) -> Result<Option<Identity>, ApiError> {
    let creds = store
        .user_credentials(username)
        .await
        .map_err(|e| ApiError::Internal(format!("user lookup failed: {e}")))?;
    let stored = creds
        .as_ref()
        .map(|c| c.password_hash.clone())
        .filter(|h| h.starts_with("$2"));
    let password = password.to_string();
    let matches = tokio::task::spawn_blocking(move || {
        let hash = stored.unwrap_or_else(dummy_hash);
        bcrypt::verify(password, &hash)
    })
    .await
    .ok()
    .and_then(Result::ok)
    .unwrap_or(false);
    match creds {
        Some(c) if matches && c.password_hash.starts_with("$2") => {
            identity_of_user(store, &c.user.user_id).await.map(Some)
        }
        _ => Ok(None),
    }
}

/// A password identity for a stored user: permissions from their roles, scopes derived from
/// them (spec §3.4).
async fn identity_of_user(store: &Arc<dyn Store>, user_id: &str) -> Result<Identity, ApiError> {
    let permissions = store
        .user_permissions(user_id)
        .await
        .map_err(|e| ApiError::Internal(format!("role lookup failed: {e}")))?;
    let generation = store
        .session_generation(user_id)
        .await
        .map_err(|e| ApiError::Internal(format!("session lookup failed: {e}")))?;
    Ok(Identity {
        user_id: user_id.to_string(),
        scopes: Scopes::from_permissions(permissions.iter().map(String::as_str)),
        source: "password".to_string(),
        permissions: Permissions::parse(&permissions.join(",")),
        kind: CredentialKind::Password,
        generation,
        expires_at: None,
    })
}

/// Whether any user exists (`false` without storage).
pub async fn has_users(node: &Node) -> bool {
    match &node.persistence {
        Some(p) => p.store.count_users().await.is_ok_and(|n| n > 0),
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
    /// Admin route only: `admin`, `operator` or `viewer` (default `viewer`).
    pub role: Option<String>,
    /// Setup only: the one-time setup code the node printed at start (the alternative to a
    /// full-access bearer token).
    pub setup_code: Option<String>,
}

fn validate_new_user(body: &NewUserBody) -> Result<(), ApiError> {
    let name = body.username.trim();
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(ApiError::BadRequest(
            "Invalid username (1-64 chars: letters, digits, . _ -)".into(),
        ));
    }
    if body.display_name.trim().is_empty() {
        return Err(ApiError::BadRequest("display_name is required".into()));
    }
    if body.password.chars().count() < 8 {
        return Err(ApiError::BadRequest(
            "Password must be at least 8 characters".into(),
        ));
    }
    if body.password.len() > MAX_PASSWORD_BYTES {
        return Err(ApiError::BadRequest(format!(
            "Password must be at most {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    Ok(())
}

async fn new_user(body: &NewUserBody, role: &str) -> Result<NewUser, ApiError> {
    Ok(NewUser {
        username: body.username.trim().to_string(),
        display_name: body.display_name.trim().to_string(),
        password_hash: hash_password(body.password.clone()).await?,
        roles: vec![role.to_string()],
    })
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
    node: &Node,
    body: &NewUserBody,
) -> Result<(Identity, SetupReply), ApiError> {
    let store = store(node)?;
    validate_new_user(body)?;
    if store.count_users().await.map_err(internal)? > 0 {
        return Err(setup_done());
    }
    let user = new_user(body, ROLE_ADMIN).await?;
    let Some(created) = store.create_first_user(user).await.map_err(store_error)? else {
        return Err(setup_done());
    };
    tracing::info!(user_id = %created.user_id, username = %created.username, "first user created by setup");
    let identity = identity_of_user(&store, &created.user_id).await?;
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

fn setup_done() -> ApiError {
    ApiError::Conflict {
        message: "Setup already completed".into(),
        detail: serde_json::Value::Null,
    }
}

fn internal(e: StoreError) -> ApiError {
    ApiError::Internal(format!("storage error: {e}"))
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::InvalidInput(m) => ApiError::BadRequest(m),
        StoreError::NotFound(m) => ApiError::NotFound(format!("Not found: {m}")),
        other => internal(other),
    }
}

/// The admin routes (relative to `/v1`).
pub fn admin_routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/api/admin/users", get(list_users).post(create_user))
        .route("/api/admin/users/{user_id}", delete(delete_user))
        .route("/api/admin/tokens", get(list_tokens).post(create_token))
        .route("/api/admin/tokens/{token_id}", delete(delete_token))
}

/// `GET /v1/api/admin/users`.
#[derive(Debug, Serialize, JsonSchema)]
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
}

impl From<User> for UserView {
    fn from(u: User) -> Self {
        Self {
            user_id: u.user_id,
            username: u.username,
            display_name: u.display_name,
            created: u.created,
        }
    }
}

pub async fn list_users(State(node): State<Arc<Node>>) -> Result<Json<UserList>, ApiError> {
    let users = store(&node)?.list_users().await.map_err(internal)?;
    Ok(Json(UserList {
        users: users.into_iter().map(UserView::from).collect(),
    }))
}

pub async fn create_user(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<NewUserBody>,
) -> Result<Response, ApiError> {
    let store = store(&node)?;
    validate_new_user(&body)?;
    let role = match body.role.as_deref().map(str::trim).unwrap_or("viewer") {
        "admin" => ROLE_ADMIN,
        "operator" => ROLE_OPERATOR,
        "viewer" | "" => ROLE_VIEWER,
        other => {
            return Err(ApiError::BadRequest(format!(
                "Unknown role '{other}' (expected admin, operator or viewer)"
            )));
        }
    };
    let user = store
        .create_user(new_user(&body, role).await?)
        .await
        .map_err(store_error)?;
    tracing::info!(user_id = %user.user_id, role, "user created");
    Ok((StatusCode::CREATED, Json(UserView::from(user))).into_response())
}

pub async fn delete_user(
    State(node): State<Arc<Node>>,
    Path(user_id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if !store(&node)?
        .delete_user(&user_id)
        .await
        .map_err(internal)?
    {
        return Err(ApiError::NotFound("User not found".into()));
    }
    Ok(Json(
        serde_json::json!({"status": "ok", "user_id": user_id}),
    ))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct TokenQuery {
    pub user_id: Option<String>,
}

/// `GET /v1/api/admin/tokens`.
#[derive(Debug, Serialize, JsonSchema)]
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

pub async fn list_tokens(
    State(node): State<Arc<Node>>,
    Query(query): Query<TokenQuery>,
) -> Result<Json<TokenList>, ApiError> {
    let tokens = store(&node)?
        .list_api_tokens(query.user_id.as_deref().filter(|u| !u.is_empty()))
        .await
        .map_err(internal)?;
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

pub async fn create_token(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<NewTokenBody>,
) -> Result<Response, ApiError> {
    let store = store(&node)?;
    let user_id = match (body.user_id.as_deref(), body.username.as_deref()) {
        (Some(id), None) if !id.trim().is_empty() => store
            .get_user(id.trim())
            .await
            .map_err(internal)?
            .map(|u| u.user_id),
        (None, Some(name)) if !name.trim().is_empty() => store
            .user_credentials(name)
            .await
            .map_err(internal)?
            .map(|c| c.user.user_id),
        _ => {
            return Err(ApiError::BadRequest(
                "Give exactly one of user_id or username".into(),
            ));
        }
    };
    let user_id = user_id.ok_or_else(|| ApiError::NotFound("User not found".into()))?;
    let scopes = parse_scopes(body.scopes.as_deref().unwrap_or("read"))?;
    let expires = match body.expires_days {
        None => None,
        Some(0) => {
            return Err(ApiError::BadRequest(
                "expires_days must be at least 1".into(),
            ));
        }
        Some(days) => Some(turnstone_store::timestamp::format_system_time(
            SystemTime::now() + Duration::from_secs(u64::from(days) * 86_400),
        )),
    };
    let raw = generate_api_token().map_err(|e| ApiError::Internal(e.to_string()))?;
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
        .map_err(store_error)?;
    tracing::info!(token_id = %record.token_id, user_id = %record.user_id, "API token created");
    let mut view = TokenView::from(record);
    view.token = Some(raw);
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// A comma list of scopes, checked and written back sorted.
fn parse_scopes(wire: &str) -> Result<String, ApiError> {
    let mut scopes = Scopes::empty();
    for part in wire.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let scope: Scope = part.parse().map_err(|_| {
            ApiError::BadRequest(format!(
                "Unknown scope '{part}' (expected read, write or approve)"
            ))
        })?;
        scopes.insert(scope);
    }
    if scopes.is_empty() {
        return Err(ApiError::BadRequest("scopes must not be empty".into()));
    }
    Ok(scopes.to_string())
}

pub async fn delete_token(
    State(node): State<Arc<Node>>,
    Path(token_id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if !store(&node)?
        .delete_api_token(&token_id)
        .await
        .map_err(internal)?
    {
        return Err(ApiError::NotFound("Token not found".into()));
    }
    Ok(Json(
        serde_json::json!({"status": "ok", "token_id": token_id}),
    ))
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
            role: None,
            setup_code: None,
        };
        assert!(validate_new_user(&ok).is_ok());
        let bad_name = NewUserBody {
            username: "ada lovelace".into(),
            ..NewUserBody {
                display_name: "Ada".into(),
                password: "correct horse".into(),
                ..NewUserBody::default()
            }
        };
        assert!(
            matches!(validate_new_user(&bad_name), Err(ApiError::BadRequest(m)) if m.starts_with("Invalid username"))
        );
        let short = NewUserBody {
            username: "ada".into(),
            display_name: "Ada".into(),
            password: "short".into(),
            role: None,
            setup_code: None,
        };
        assert!(
            matches!(validate_new_user(&short), Err(ApiError::BadRequest(m)) if m.contains("at least 8"))
        );
    }

    #[test]
    fn the_dummy_hash_is_a_valid_bcrypt_hash() {
        assert!(matches!(
            bcrypt::verify("anything", &dummy_hash()),
            Ok(false)
        ));
    }
}
