//! The auth endpoints (node spec §3.5): login with a token or a stored user's password,
//! logout, one-time setup of the first user, the login UI's status and `whoami`. Without
//! storage there are no users: a `{"username", "password"}` login then fails with
//! `401 Invalid credentials` and setup answers `503`.
//!
//! Failed logins are limited per client IP (and per username): 5 failures within 300 s and
//! the next attempt is `429 {"error": "Too many login attempts"}` with `Retry-After`.
//! Successful logins do not count.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use turnstone_runtime::auth::{
    DEFAULT_TOKEN_TTL, Identity, clear_cookie_header, set_cookie_header,
};

use super::body::WireJson;
use super::error::ApiError;
use super::state::Node;

/// Failed attempts allowed per key within [`LOGIN_WINDOW`].
pub const LOGIN_MAX_FAILURES: usize = 5;
/// The window of the login limiter.
pub const LOGIN_WINDOW: Duration = Duration::from_secs(300);
/// Keys tracked before expired ones are swept.
const SWEEP_THRESHOLD: usize = 4096;

const INVALID_CREDENTIALS: &str = "Invalid credentials";
const TOO_MANY_ATTEMPTS: &str = "Too many login attempts";
const NOT_AUTHENTICATED: &str = "Not authenticated";

/// `POST /v1/api/auth/login`: `{"token"}`, or `{"username", "password"}`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct LoginBody {
    /// A config token, a `ts_` API token or a JWT.
    pub token: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
}

/// The 200 reply of login.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoginReply {
    /// Always `"ok"`.
    pub status: String,
    /// `"full"` when the scopes include `write`, else `"read"`.
    pub role: String,
    /// Comma-joined, sorted (`approve,read,write`).
    pub scopes: String,
    /// Comma-joined, sorted; absent when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
    /// A session JWT; absent when the node has no JWT secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
    /// Absent for identity-less tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// `GET /v1/api/auth/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuthStatusReply {
    pub auth_enabled: bool,
    pub has_users: bool,
    /// `auth_enabled && !has_users`.
    pub setup_required: bool,
}

/// `GET /v1/api/auth/whoami`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WhoamiReply {
    pub user_id: String,
    /// Comma-joined, sorted; absent when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
}

/// Failed login attempts per key (client IP, username) within a sliding window.
#[derive(Debug)]
pub struct LoginLimiter {
    max_failures: usize,
    window: Duration,
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl Default for LoginLimiter {
    fn default() -> Self {
        Self::new(LOGIN_MAX_FAILURES, LOGIN_WINDOW)
    }
}

impl LoginLimiter {
    pub fn new(max_failures: usize, window: Duration) -> Self {
        Self {
            max_failures,
            window,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<Instant>>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Some(retry_after)` when any of `keys` has used up its failures.
    pub fn blocked(&self, keys: &[String], now: Instant) -> Option<Duration> {
        let mut failures = self.lock();
        let mut wait: Option<Duration> = None;
        for key in keys {
            let Some(times) = failures.get_mut(key) else {
                continue;
            };
            prune(times, now, self.window);
            if times.len() >= self.max_failures
                && let Some(oldest) = times.front()
            {
                let left = self.window.saturating_sub(now.duration_since(*oldest));
                wait = Some(wait.map_or(left, |w| w.max(left)));
            }
        }
        wait
    }

    /// Records one failed attempt under every key.
    pub fn record_failure(&self, keys: &[String], now: Instant) {
        let mut failures = self.lock();
        if failures.len() >= SWEEP_THRESHOLD {
            failures.retain(|_, times| {
                prune(times, now, self.window);
                !times.is_empty()
            });
        }
        for key in keys {
            let times = failures.entry(key.clone()).or_default();
            prune(times, now, self.window);
            times.push_back(now);
        }
    }
}

fn prune(times: &mut VecDeque<Instant>, now: Instant, window: Duration) {
    while times
        .front()
        .is_some_and(|t| now.duration_since(*t) >= window)
    {
        times.pop_front();
    }
}

/// The auth routes (relative to `/v1`), with their own login limiter.
pub fn routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/api/auth/login", post(login))
        .route("/api/auth/logout", post(logout))
        .route("/api/auth/status", get(status))
        .route("/api/auth/setup", post(setup))
        .route("/api/auth/whoami", get(whoami))
        .route("/api/auth/oidc/authorize", get(oidc_authorize))
        .route("/api/auth/oidc/callback", get(oidc_callback))
        .layer(Extension(Arc::new(LoginLimiter::default())))
}

/// The message of the OIDC routes: this node has no OIDC provider settings (SSO is not
/// supported yet), so it answers as the original does when none is configured.
const OIDC_NOT_CONFIGURED: &str = "OIDC not configured";

/// `GET /v1/api/auth/oidc/authorize`: `404 {"error": "OIDC not configured"}`.
pub async fn oidc_authorize() -> Response {
    error(StatusCode::NOT_FOUND, OIDC_NOT_CONFIGURED)
}

/// `GET /v1/api/auth/oidc/callback`: back to the UI with the error, as the original's
/// failures (`302 /?oidc_error=<message>`).
pub async fn oidc_callback() -> Response {
    let mut response = StatusCode::FOUND.into_response();
    response.headers_mut().insert(
        header::LOCATION,
        HeaderValue::from_static("/?oidc_error=OIDC%20not%20configured"),
    );
    response
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

/// The client address: the peer (served with connect info), or the address a trusted proxy
/// forwarded for (the rate limiter's rule); `unknown` without connect info.
fn client_ip(node: &Node, parts: &Parts) -> String {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or_else(
            || "unknown".to_string(),
            |c| {
                node.options
                    .ratelimit
                    .client_ip(c.0.ip(), &parts.headers)
                    .to_string()
            },
        )
}

/// Whether the client reached us over HTTPS (directly or via a proxy that says so).
fn is_https(parts: &Parts) -> bool {
    parts.uri.scheme_str() == Some("https")
        || parts
            .headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// `POST /v1/api/auth/login`.
pub async fn login(
    State(node): State<Arc<Node>>,
    Extension(limiter): Extension<Arc<LoginLimiter>>,
    parts: Parts,
    WireJson(body): WireJson<LoginBody>,
) -> Response {
    let mut keys = vec![format!("ip:{}", client_ip(&node, &parts))];
    let username = body.username.as_deref().map(str::trim).unwrap_or_default();
    if !username.is_empty() {
        keys.push(format!("user:{username}"));
    }
    let now = Instant::now();
    if let Some(wait) = limiter.blocked(&keys, now) {
        let mut response = error(StatusCode::TOO_MANY_REQUESTS, TOO_MANY_ATTEMPTS);
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        return response;
    }

    let token = body.token.as_deref().map(str::trim).unwrap_or_default();
    let password = body.password.as_deref().unwrap_or_default();
    let identity = if !username.is_empty() {
        match &node.persistence {
            Some(p) if !password.is_empty() => {
                match super::users::password_identity(&p.store, username, password).await {
                    Ok(identity) => identity,
                    Err(e) => return e.into_response(),
                }
            }
            _ => None,
        }
    } else if !token.is_empty() {
        node.auth.authenticate_token(token).await.ok()
    } else {
        None
    };
    let Some(identity) = identity else {
        limiter.record_failure(&keys, now);
        return error(StatusCode::UNAUTHORIZED, INVALID_CREDENTIALS);
    };

    let jwt = match session_jwt(&node, &identity) {
        Ok(jwt) => jwt,
        Err(e) => return e.into_response(),
    };
    if jwt.is_none() && token.is_empty() {
        // A password login with no JWT secret (auth disabled) has nothing to put in a cookie.
        return Json(login_reply(&identity, None)).into_response();
    }
    let cookie = set_cookie_header(jwt.as_deref().unwrap_or(token), is_https(&parts));
    let reply = login_reply(&identity, jwt);
    with_cookie(Json(reply).into_response(), &cookie)
}

/// Mints the session JWT of a login (`None` when the node has no JWT secret).
fn session_jwt(node: &Node, identity: &Identity) -> Result<Option<String>, ApiError> {
    node.auth
        .mint_for(identity, DEFAULT_TOKEN_TTL)
        .map_err(|e| {
            tracing::error!(error = %e, "cannot mint a session JWT");
            ApiError::Auth {
                status: e.status(),
                message: e.body_message(),
            }
        })
}

/// `POST /v1/api/auth/setup`: creates the first user (admin) once, and logs them in.
pub async fn setup(
    State(node): State<Arc<Node>>,
    parts: Parts,
    WireJson(body): WireJson<super::users::NewUserBody>,
) -> Response {
    let (identity, mut reply) = match super::users::setup_first_user(&node, &body).await {
        Ok(done) => done,
        Err(e) => return e.into_response(),
    };
    let jwt = match session_jwt(&node, &identity) {
        Ok(jwt) => jwt,
        Err(e) => return e.into_response(),
    };
    reply.jwt = jwt.clone();
    let response = Json(reply).into_response();
    match jwt {
        Some(jwt) => with_cookie(response, &set_cookie_header(&jwt, is_https(&parts))),
        None => response,
    }
}

fn login_reply(identity: &Identity, jwt: Option<String>) -> LoginReply {
    LoginReply {
        status: "ok".to_string(),
        role: identity.role().as_str().to_string(),
        scopes: identity.scopes.to_string(),
        permissions: (!identity.permissions.is_empty()).then(|| identity.permissions.to_string()),
        jwt,
        user_id: (!identity.user_id.is_empty()).then(|| identity.user_id.clone()),
    }
}

/// `POST /v1/api/auth/logout`.
pub async fn logout() -> Response {
    with_cookie(
        Json(serde_json::json!({"status": "ok"})).into_response(),
        &clear_cookie_header(),
    )
}

/// `GET /v1/api/auth/status`.
pub async fn status(State(node): State<Arc<Node>>) -> Json<AuthStatusReply> {
    let auth_enabled = node.auth.is_enabled();
    let has_users = super::users::has_users(&node).await;
    Json(AuthStatusReply {
        auth_enabled,
        has_users,
        setup_required: auth_enabled && !has_users,
    })
}

/// `GET /v1/api/auth/whoami`: 401 unless the caller is a user (JWT or API token with a
/// user id); config tokens and a node without auth have none.
pub async fn whoami(identity: Option<Extension<Identity>>) -> Response {
    match identity {
        Some(Extension(identity)) if !identity.user_id.is_empty() => Json(WhoamiReply {
            user_id: identity.user_id.clone(),
            permissions: (!identity.permissions.is_empty())
                .then(|| identity.permissions.to_string()),
        })
        .into_response(),
        _ => error(StatusCode::UNAUTHORIZED, NOT_AUTHENTICATED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ip: &str) -> Vec<String> {
        vec![format!("ip:{ip}")]
    }

    #[test]
    fn five_failures_block_until_the_oldest_leaves_the_window() {
        let limiter = LoginLimiter::default();
        let t0 = Instant::now();
        let a = keys("10.0.0.1");
        for i in 0..5 {
            assert_eq!(limiter.blocked(&a, t0), None, "after {i} failures");
            limiter.record_failure(&a, t0 + Duration::from_secs(i * 10));
        }
        let now = t0 + Duration::from_secs(60);
        assert_eq!(limiter.blocked(&a, now), Some(Duration::from_secs(240)));
        assert_eq!(limiter.blocked(&keys("10.0.0.2"), now), None, "per address");
        // The first failure expires at 300 s: one attempt is allowed again.
        let later = t0 + Duration::from_secs(300);
        assert_eq!(limiter.blocked(&a, later), None);
        limiter.record_failure(&a, later);
        assert_eq!(
            limiter.blocked(&a, later),
            Some(Duration::from_secs(10)),
            "the failure at 10 s is now the oldest"
        );
    }

    #[test]
    fn a_username_is_limited_across_addresses() {
        let limiter = LoginLimiter::new(2, LOGIN_WINDOW);
        let now = Instant::now();
        let user = "user:admin".to_string();
        limiter.record_failure(&["ip:a".into(), user.clone()], now);
        limiter.record_failure(&["ip:b".into(), user.clone()], now);
        assert!(limiter.blocked(&["ip:c".into(), user], now).is_some());
        assert!(limiter.blocked(&["ip:c".into()], now).is_none());
    }

    #[test]
    fn expired_keys_are_swept() {
        let limiter = LoginLimiter::new(5, Duration::from_secs(1));
        let t0 = Instant::now();
        for i in 0..SWEEP_THRESHOLD {
            limiter.record_failure(&keys(&i.to_string()), t0);
        }
        limiter.record_failure(&keys("late"), t0 + Duration::from_secs(5));
        assert_eq!(limiter.lock().len(), 1);
    }
}
