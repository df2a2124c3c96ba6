//! The auth endpoints (node spec §3.5): login with a token or a stored user's password,
//! logout, one-time setup of the first user, the login UI's status and `whoami`. Without
//! storage there are no users: a `{"username", "password"}` login then fails with
//! `401 Invalid credentials` and setup answers `503`.
//!
//! Failed logins are limited per client IP (and per username): 5 failures within 300 s and
//! the next attempt is `429 {"error": "Too many login attempts"}` with `Retry-After`.
//! Successful logins do not count.
//!
//! Setup needs a bootstrap credential (docs/security.md): a token with the approve scope (the
//! configured or printed full-access token) as `Authorization: Bearer`, or the one-time setup
//! code printed at start as `"setup_code"` in the body; anything else is `401`. Logout ends
//! the user's sessions: the JWTs minted for them carry their session generation, which
//! logout moves on.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use turnstone_runtime::auth::{
    CredentialKind, DEFAULT_TOKEN_TTL, Identity, Scope, clear_cookie_header, generate_api_token,
    secrets_equal, set_cookie_header,
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
const SETUP_NEEDS_BOOTSTRAP: &str = "Setup needs the bootstrap credential: the node's \
     full-access token (Authorization: Bearer) or the one-time setup code it printed at start \
     (\"setup_code\" in the body)";
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
    /// `auth_enabled && !has_users`, on a node with storage (setup is impossible without).
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

/// The one-time code that authorises `POST /v1/api/auth/setup` when no full-access token is
/// at hand. Made at start (the server prints it while no user exists); never logged.
pub struct SetupCode(String);

impl SetupCode {
    /// A fresh random code (`ts_` + 64 hex, from the system random generator; a failing
    /// generator leaves no code, and setup then needs a token).
    pub fn generate() -> Self {
        Self(generate_api_token().unwrap_or_default())
    }

    /// The code, for printing at start.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison with a presented code.
    pub fn matches(&self, presented: &str) -> bool {
        !self.0.is_empty() && secrets_equal(presented.trim(), &self.0)
    }
}

impl std::fmt::Debug for SetupCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SetupCode(<redacted>)")
    }
}

/// Failed attempts allowed per client address (over all usernames) within [`LOGIN_WINDOW`].
pub const LOGIN_MAX_FAILURES_PER_IP: usize = 20;
/// Password checks (bcrypt) that may run at once; more wait for a slot.
pub const MAX_CONCURRENT_HASHES: usize = 2;
/// How long a login waits for a hashing slot before it is answered 429.
const HASH_SLOT_WAIT: Duration = Duration::from_secs(10);

/// One limiter key and the failures it allows.
pub type LimitKey = (String, usize);

/// The keys of one attempt: the client address (all usernames), and the address with the
/// username (`""` for token logins). There is no key for the username alone, so a stranger
/// cannot lock a user out from elsewhere.
pub fn login_keys(ip: &str, username: &str) -> Vec<LimitKey> {
    vec![
        (format!("ip:{ip}"), LOGIN_MAX_FAILURES_PER_IP),
        (format!("ip-user:{ip}:{username}"), LOGIN_MAX_FAILURES),
    ]
}

/// Login attempts per key within a sliding window. An attempt is reserved atomically before
/// the credential is checked (so parallel attempts cannot all pass the check), and released
/// again when it succeeds: only failures count. Also bounds concurrent password hashing.
#[derive(Debug)]
pub struct LoginLimiter {
    window: Duration,
    attempts: Mutex<HashMap<String, VecDeque<Instant>>>,
    hashing: tokio::sync::Semaphore,
}

impl Default for LoginLimiter {
    fn default() -> Self {
        Self::new(LOGIN_WINDOW)
    }
}

impl LoginLimiter {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            attempts: Mutex::new(HashMap::new()),
            hashing: tokio::sync::Semaphore::new(MAX_CONCURRENT_HASHES),
        }
    }

    /// Reserves one attempt at `now` under every key, or `Err(retry_after)` when any key has
    /// used up its attempts (then nothing is reserved).
    pub fn reserve(&self, keys: &[LimitKey], now: Instant) -> Result<(), Duration> {
        let mut attempts = self.attempts.lock();
        if attempts.len() >= SWEEP_THRESHOLD {
            attempts.retain(|_, times| {
                prune(times, now, self.window);
                !times.is_empty()
            });
        }
        let mut wait: Option<Duration> = None;
        for (key, max) in keys {
            let Some(times) = attempts.get_mut(key) else {
                continue;
            };
            prune(times, now, self.window);
            if times.len() >= *max
                && let Some(oldest) = times.front()
            {
                let left = self.window.saturating_sub(now.duration_since(*oldest));
                wait = Some(wait.map_or(left, |w| w.max(left)));
            }
        }
        if let Some(wait) = wait {
            return Err(wait);
        }
        for (key, _) in keys {
            attempts.entry(key.clone()).or_default().push_back(now);
        }
        Ok(())
    }

    /// Gives back the attempt reserved at `at` (it succeeded).
    pub fn release(&self, keys: &[LimitKey], at: Instant) {
        let mut attempts = self.attempts.lock();
        for (key, _) in keys {
            if let Some(times) = attempts.get_mut(key)
                && let Some(i) = times.iter().position(|t| *t == at)
            {
                times.remove(i);
            }
        }
    }

    /// A slot for one password check, or `None` when none frees up in time.
    pub async fn hashing_slot(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        tokio::time::timeout(HASH_SLOT_WAIT, self.hashing.acquire())
            .await
            .ok()
            .and_then(Result::ok)
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
/// forwarded for, IPv6 per /64 (the rate limiter's rules); `unknown` without connect info.
fn client_ip(node: &Node, parts: &Parts) -> String {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or_else(
            || "unknown".to_string(),
            |c| {
                super::ratelimit::limit_key(
                    node.options.ratelimit.client_ip(c.0.ip(), &parts.headers),
                )
                .to_string()
            },
        )
}

/// Whether the client reached us over HTTPS: directly, or via a proxy that says so — believed
/// only from a trusted proxy (`--trusted-proxy`), since any client can send the header.
fn is_https(node: &Node, parts: &Parts) -> bool {
    let from_trusted_proxy = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .is_some_and(|c| node.options.ratelimit.is_trusted(c.0.ip()));
    parts.uri.scheme_str() == Some("https")
        || (from_trusted_proxy
            && parts
                .headers
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(',').next())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("https")))
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

/// `POST /v1/api/auth/login`.
pub async fn login(
    State(node): State<Arc<Node>>,
    Extension(limiter): Extension<Arc<LoginLimiter>>,
    parts: Parts,
    WireJson(body): WireJson<LoginBody>,
) -> Response {
    let username = body.username.as_deref().map(str::trim).unwrap_or_default();
    let keys = login_keys(&client_ip(&node, &parts), username);
    let now = Instant::now();
    if let Err(wait) = limiter.reserve(&keys, now) {
        return too_many_attempts(wait);
    }

    let token = body.token.as_deref().map(str::trim).unwrap_or_default();
    let password = body.password.as_deref().unwrap_or_default();
    let identity = if !username.is_empty() {
        match &node.persistence {
            Some(p) if !password.is_empty() => {
                let Some(_slot) = limiter.hashing_slot().await else {
                    limiter.release(&keys, now);
                    return too_many_attempts(Duration::from_secs(1));
                };
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
        return error(StatusCode::UNAUTHORIZED, INVALID_CREDENTIALS);
    };
    limiter.release(&keys, now);

    let jwt = match session_jwt(&node, &identity) {
        Ok(jwt) => jwt,
        Err(e) => return e.into_response(),
    };
    if jwt.is_none() && token.is_empty() {
        // A password login with no JWT secret (auth disabled) has nothing to put in a cookie.
        return Json(login_reply(&identity, None)).into_response();
    }
    let cookie = set_cookie_header(jwt.as_deref().unwrap_or(token), is_https(&node, &parts));
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

/// Whether a setup request carries the bootstrap credential: a token with the approve scope
/// (header or cookie) or the setup code. A node without auth (loopback only) needs none.
async fn has_bootstrap_credential(
    node: &Node,
    parts: &Parts,
    body: &super::users::NewUserBody,
) -> bool {
    if !node.auth.is_enabled() {
        return true;
    }
    if let Some(code) = body.setup_code.as_deref()
        && node.setup_code.matches(code)
    {
        return true;
    }
    let header = |name| {
        parts
            .headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    node.auth
        .authenticate(header(header::AUTHORIZATION), header(header::COOKIE))
        .await
        .is_ok_and(|identity| {
            identity.scopes.has(Scope::Approve) && identity.has_permission("admin.users")
        })
}

/// `POST /v1/api/auth/setup`: creates the first user (admin) once, and logs them in. Needs the
/// bootstrap credential (see the module docs).
pub async fn setup(
    State(node): State<Arc<Node>>,
    parts: Parts,
    WireJson(body): WireJson<super::users::NewUserBody>,
) -> Response {
    if node.persistence.is_some() && !has_bootstrap_credential(&node, &parts, &body).await {
        return error(StatusCode::UNAUTHORIZED, SETUP_NEEDS_BOOTSTRAP);
    }
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
        Some(jwt) => with_cookie(response, &set_cookie_header(&jwt, is_https(&node, &parts))),
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

/// `POST /v1/api/auth/logout`: clears the cookie and, for a user's session JWT (header or
/// cookie), ends every session of that user.
pub async fn logout(State(node): State<Arc<Node>>, parts: Parts) -> Response {
    let header = |name| {
        parts
            .headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let (Some(p), Ok(identity)) = (
        &node.persistence,
        node.auth
            .authenticate(header(header::AUTHORIZATION), header(header::COOKIE))
            .await,
    ) && identity.kind == CredentialKind::Jwt
        && identity.generation.is_some()
    {
        match p.store.bump_session_generation(&identity.user_id).await {
            Ok(_) => tracing::info!(user_id = %identity.user_id, "sessions ended by logout"),
            Err(e) => {
                return ApiError::Internal(format!("cannot end the session: {e}")).into_response();
            }
        }
    }
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
        // Only where setup can happen: without storage there are no users at all.
        setup_required: auth_enabled && !has_users && node.persistence.is_some(),
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

    fn keys(ip: &str) -> Vec<LimitKey> {
        login_keys(ip, "")
    }

    #[test]
    fn five_failures_block_until_the_oldest_leaves_the_window() {
        let limiter = LoginLimiter::default();
        let t0 = Instant::now();
        let a = keys("10.0.0.1");
        for i in 0..5 {
            assert_eq!(
                limiter.reserve(&a, t0 + Duration::from_secs(i * 10)),
                Ok(()),
                "attempt {i}"
            );
        }
        let now = t0 + Duration::from_secs(60);
        assert_eq!(limiter.reserve(&a, now), Err(Duration::from_secs(240)));
        assert_eq!(
            limiter.reserve(&keys("10.0.0.2"), now),
            Ok(()),
            "per address"
        );
        // The first failure expires at 300 s: one attempt is allowed again.
        let later = t0 + Duration::from_secs(300);
        assert_eq!(limiter.reserve(&a, later), Ok(()));
        assert_eq!(
            limiter.reserve(&a, later),
            Err(Duration::from_secs(10)),
            "the failure at 10 s is now the oldest"
        );
    }

    #[test]
    fn released_attempts_do_not_count() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        let a = keys("10.0.0.1");
        for i in 0..20 {
            let at = now + Duration::from_millis(i);
            assert_eq!(limiter.reserve(&a, at), Ok(()));
            limiter.release(&a, at);
        }
        assert_eq!(limiter.reserve(&a, now), Ok(()));
    }

    #[test]
    fn a_username_is_limited_per_address_only() {
        let limiter = LoginLimiter::default();
        let now = Instant::now();
        for _ in 0..5 {
            assert!(limiter.reserve(&login_keys("a", "admin"), now).is_ok());
        }
        assert!(limiter.reserve(&login_keys("a", "admin"), now).is_err());
        assert!(
            limiter.reserve(&login_keys("b", "admin"), now).is_ok(),
            "another address may still try admin"
        );
        assert!(limiter.reserve(&login_keys("a", "other"), now).is_ok());
        // Over all usernames, one address gets 20.
        for i in 0..14 {
            let _ = limiter.reserve(&login_keys("a", &format!("u{i}")), now);
        }
        assert!(limiter.reserve(&login_keys("a", "fresh"), now).is_err());
    }

    #[test]
    fn expired_keys_are_swept() {
        let limiter = LoginLimiter::new(Duration::from_secs(1));
        let t0 = Instant::now();
        for i in 0..SWEEP_THRESHOLD {
            let _ = limiter.reserve(&[(i.to_string(), 5)], t0);
        }
        let _ = limiter.reserve(&keys("late"), t0 + Duration::from_secs(5));
        assert_eq!(limiter.attempts.lock().len(), 2);
    }
}
