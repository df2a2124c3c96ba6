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

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
pub use turnstone_accounts::limiter::{
    LOGIN_MAX_FAILURES, LOGIN_MAX_FAILURES_PER_IP, LOGIN_WINDOW, LimitKey, LoginLimiter,
    MAX_CONCURRENT_HASHES, login_keys,
};
use turnstone_accounts::login::NOT_AUTHENTICATED;
pub use turnstone_accounts::login::{AuthStatusReply, LoginBody, LoginReply, WhoamiReply};
use turnstone_accounts::session::{SignIn, error};
use turnstone_runtime::auth::{Identity, generate_api_token, secrets_equal};

use super::body::WireJson;
use super::state::Node;

const SETUP_NEEDS_BOOTSTRAP: &str = "Setup needs the bootstrap credential: the node's \
     full-access token (Authorization: Bearer) or the one-time setup code it printed at start \
     (\"setup_code\" in the body)";

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

fn header_str(parts: &Parts, name: header::HeaderName) -> Option<&str> {
    parts.headers.get(name).and_then(|v| v.to_str().ok())
}

/// `POST /v1/api/auth/login` (the flow shared with the console).
pub async fn login(
    State(node): State<Arc<Node>>,
    Extension(limiter): Extension<Arc<LoginLimiter>>,
    parts: Parts,
    WireJson(body): WireJson<LoginBody>,
) -> Response {
    let store = node.store();
    let client = client_ip(&node, &parts);
    let at = SignIn {
        auth: &node.auth,
        store: store.as_ref(),
        limiter: &limiter,
        client: &client,
        https: is_https(&node, &parts),
    };
    turnstone_accounts::session::login(at, body).await
}

/// Whether a setup request carries the bootstrap credential: a token with the approve scope
/// and `admin.users` (header or cookie) or the setup code. A node without auth (loopback
/// only) needs none.
async fn has_bootstrap_credential(
    node: &Node,
    parts: &Parts,
    body: &super::users::NewUserBody,
) -> bool {
    if let Some(code) = body.setup_code.as_deref()
        && node.setup_code.matches(code)
    {
        return true;
    }
    turnstone_accounts::session::is_bootstrap_credential(
        &node.auth,
        header_str(parts, header::AUTHORIZATION),
        header_str(parts, header::COOKIE),
    )
    .await
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
    let store = node.store();
    turnstone_accounts::session::setup(&node.auth, store.as_ref(), is_https(&node, &parts), &body)
        .await
}

/// `POST /v1/api/auth/logout`: clears the cookie and, for a user's session JWT (header or
/// cookie), ends every session of that user.
pub async fn logout(State(node): State<Arc<Node>>, parts: Parts) -> Response {
    let store = node.store();
    turnstone_accounts::session::logout(
        &node.auth,
        store.as_ref(),
        header_str(&parts, header::AUTHORIZATION),
        header_str(&parts, header::COOKIE),
    )
    .await
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
