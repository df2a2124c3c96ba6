//! The sign-in flows both services run the same way (node spec §3.5, cluster spec §6.3):
//! login with a token or a stored user's password under the [`LoginLimiter`], logout that
//! ends a user's sessions, and the one-time setup of the first admin. The caller supplies
//! what differs: its authenticator (audience), store, limiter, the client's address and
//! whether the request came over HTTPS; setup's bootstrap credential is checked by the caller.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;
use turnstone_runtime::auth::{
    AuthError, Authenticator, CredentialKind, DEFAULT_TOKEN_TTL, Identity, clear_cookie_header,
    set_cookie_header,
};
use turnstone_store::Store;

use crate::error::AccountsError;
use crate::limiter::{LoginLimiter, login_keys};
use crate::login::{INVALID_CREDENTIALS, LoginBody, TOO_MANY_ATTEMPTS, login_reply};
use crate::users::NewUserBody;

/// What a sign-in needs from the service.
#[derive(Clone, Copy)]
pub struct SignIn<'a> {
    pub auth: &'a Authenticator,
    pub store: Option<&'a Arc<dyn Store>>,
    pub limiter: &'a LoginLimiter,
    /// The client's address as the service's rate limiter keys it.
    pub client: &'a str,
    /// Whether the session cookie gets `Secure`.
    pub https: bool,
}

/// `{"error": message}` with `status`.
pub fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

fn auth_failure(e: &AuthError) -> Response {
    error(
        StatusCode::from_u16(e.status()).unwrap_or(StatusCode::UNAUTHORIZED),
        &e.body_message(),
    )
}

fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn too_many_attempts(wait: Duration) -> Response {
    let mut response = error(StatusCode::TOO_MANY_REQUESTS, TOO_MANY_ATTEMPTS);
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    response
}

/// Mints the session JWT of a sign-in (`None` without a JWT secret); a failure is answered
/// as the auth layer would.
fn session_jwt(auth: &Authenticator, identity: &Identity) -> Result<Option<String>, AuthError> {
    auth.mint_for(identity, DEFAULT_TOKEN_TTL).inspect_err(|e| {
        tracing::error!(error = %e, "cannot mint a session JWT");
    })
}

/// `POST /v1/api/auth/login`: `{"token"}` or `{"username", "password"}`.
pub async fn login(at: SignIn<'_>, body: LoginBody) -> Response {
    let username = body.username.as_deref().map(str::trim).unwrap_or_default();
    let keys = login_keys(at.client, username);
    let now = Instant::now();
    if let Err(wait) = at.limiter.reserve(&keys, now) {
        return too_many_attempts(wait);
    }
    let token = body.token.as_deref().map(str::trim).unwrap_or_default();
    let password = body.password.as_deref().unwrap_or_default();
    let identity = if !username.is_empty() {
        match at.store {
            Some(store) if !password.is_empty() => {
                let Some(_slot) = at.limiter.hashing_slot().await else {
                    at.limiter.release(&keys, now);
                    return too_many_attempts(Duration::from_secs(1));
                };
                match crate::passwords::password_identity(store, username, password).await {
                    Ok(identity) => identity,
                    Err(e) => return e.into_response(),
                }
            }
            _ => None,
        }
    } else if !token.is_empty() {
        at.auth.authenticate_token(token).await.ok()
    } else {
        None
    };
    let Some(identity) = identity else {
        return error(StatusCode::UNAUTHORIZED, INVALID_CREDENTIALS);
    };
    at.limiter.release(&keys, now);

    let jwt = match session_jwt(at.auth, &identity) {
        Ok(jwt) => jwt,
        Err(e) => return auth_failure(&e),
    };
    if jwt.is_none() && token.is_empty() {
        // A password login with no JWT secret (auth disabled) has nothing to put in a cookie.
        return Json(login_reply(&identity, None)).into_response();
    }
    let cookie = set_cookie_header(jwt.as_deref().unwrap_or(token), at.https);
    with_cookie(Json(login_reply(&identity, jwt)).into_response(), &cookie)
}

/// `POST /v1/api/auth/logout`: clears the cookie and, for a user's session JWT (header or
/// cookie), ends every session of that user.
pub async fn logout(
    auth: &Authenticator,
    store: Option<&Arc<dyn Store>>,
    authorization: Option<&str>,
    cookie: Option<&str>,
) -> Response {
    if let (Some(store), Ok(identity)) = (store, auth.authenticate(authorization, cookie).await)
        && identity.kind == CredentialKind::Jwt
        && identity.generation.is_some()
    {
        match store.bump_session_generation(&identity.user_id).await {
            Ok(_) => tracing::info!(user_id = %identity.user_id, "sessions ended by logout"),
            Err(e) => {
                return AccountsError::Internal(format!("cannot end the session: {e}"))
                    .into_response();
            }
        }
    }
    with_cookie(
        Json(serde_json::json!({"status": "ok"})).into_response(),
        &clear_cookie_header(),
    )
}

/// `POST /v1/api/auth/setup` once the caller has checked the bootstrap credential: creates
/// the first user (admin) and signs them in.
pub async fn setup(
    auth: &Authenticator,
    store: Option<&Arc<dyn Store>>,
    https: bool,
    body: &NewUserBody,
) -> Response {
    let Some(store) = store else {
        return AccountsError::no_storage().into_response();
    };
    let (identity, mut reply) = match crate::users::setup_first_user(store, body).await {
        Ok(done) => done,
        Err(e) => return e.into_response(),
    };
    let jwt = match session_jwt(auth, &identity) {
        Ok(jwt) => jwt,
        Err(e) => return auth_failure(&e),
    };
    reply.jwt = jwt.clone();
    let response = Json(reply).into_response();
    match jwt {
        Some(jwt) => with_cookie(response, &set_cookie_header(&jwt, https)),
        None => response,
    }
}

/// Whether a credential may create the first user: auth is off (loopback only), or the
/// token grants the approve scope and `admin.users` (a full-access config token does).
pub async fn is_bootstrap_credential(
    auth: &Authenticator,
    authorization: Option<&str>,
    cookie: Option<&str>,
) -> bool {
    if !auth.is_enabled() {
        return true;
    }
    auth.authenticate(authorization, cookie)
        .await
        .is_ok_and(|identity| {
            identity.scopes.has(turnstone_runtime::auth::Scope::Approve)
                && identity.has_permission("admin.users")
        })
}
