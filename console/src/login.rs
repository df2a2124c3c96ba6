//! Console auth: the middleware that checks every request against what its route needs
//! ([`crate::routes`], by the route axum matched; the node's scheme: bearer token, else the `turnstone_auth` cookie; JWTs for audience
//! `turnstone-console`), and the login endpoints.
//!
//! An unauthenticated browser asking for a proxied node page is sent to the console's login
//! (`/?next=…`) instead of a JSON 401; nothing unauthenticated ever reaches a node.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, RawPathParams};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Json};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::time::Instant;
use turnstone_runtime::auth::{
    DEFAULT_TOKEN_TTL, Identity, clear_cookie_header, set_cookie_header,
};

use crate::error::ApiError;
use crate::routes::{NODE_PROXY_ROUTE, RouteNotInTable, route_access};
use crate::state::Console;

fn header_text(req: &Request, name: header::HeaderName) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The auth middleware.
pub async fn require_scope(
    State(console): State<Arc<Console>>,
    req: Request,
    next: Next,
) -> Response {
    let authorization = header_text(&req, header::AUTHORIZATION);
    let cookie = header_text(&req, header::COOKIE);
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let matched = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string());
    let (mut req, tail) = if matched.as_deref() == Some(NODE_PROXY_ROUTE) {
        proxied_tail(req).await
    } else {
        (req, None)
    };
    let access = match route_access(&method, matched.as_deref(), tail.as_deref()) {
        Ok(access) => access,
        Err(RouteNotInTable) => {
            tracing::error!(route = ?matched, "route without a permission entry refused");
            return ApiError::Forbidden("Forbidden: this route has no permission entry".into())
                .into_response();
        }
    };
    match console
        .auth
        .check_access(access, authorization.as_deref(), cookie.as_deref())
        .await
    {
        Ok(identity) => {
            if let Some(identity) = identity {
                req.extensions_mut().insert(identity);
            }
            next.run(req).await
        }
        Err(e) => {
            let wants_html =
                header_text(&req, header::ACCEPT).is_some_and(|a| a.contains("text/html"));
            if e.status() == 401 && method == "GET" && wants_html && path.starts_with("/node/") {
                let target = req
                    .uri()
                    .path_and_query()
                    .map(|p| p.as_str().to_string())
                    .unwrap_or(path);
                return Redirect::to(&format!("/?next={}", encode_component(&target)))
                    .into_response();
            }
            ApiError::Auth {
                status: e.status(),
                message: e.body_message(),
            }
            .into_response()
        }
    }
}

/// The proxy route's `tail`, percent-decoded exactly as the proxy handler receives it (so the
/// path classified is the path forwarded), and the request back.
async fn proxied_tail(req: Request) -> (Request, Option<String>) {
    let (mut parts, body) = req.into_parts();
    let tail = RawPathParams::from_request_parts(&mut parts, &())
        .await
        .ok()
        .and_then(|params| {
            params
                .iter()
                .find(|(name, _)| *name == "tail")
                .map(|(_, value)| value.to_string())
        });
    (Request::from_parts(parts, body), tail)
}

/// Percent-encodes everything but unreserved characters.
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn is_https(req_headers: &axum::http::HeaderMap) -> bool {
    req_headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// Failed logins allowed per client address within [`LOGIN_WINDOW`] (as the node).
pub const LOGIN_MAX_FAILURES: usize = 5;
/// The window of the login limiter.
pub const LOGIN_WINDOW: Duration = Duration::from_secs(300);
/// Addresses tracked before expired entries are swept.
const SWEEP_THRESHOLD: usize = 4096;

/// Failed login attempts per client address, in a sliding window.
#[derive(Debug, Default)]
pub struct LoginLimiter {
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl LoginLimiter {
    /// `Some(retry_after)` when `ip` used up its failures.
    pub fn blocked(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let mut map = self.failures.lock();
        let times = map.get_mut(&ip)?;
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) >= LOGIN_WINDOW)
        {
            times.pop_front();
        }
        (times.len() >= LOGIN_MAX_FAILURES)
            .then(|| {
                times
                    .front()
                    .map(|oldest| LOGIN_WINDOW.saturating_sub(now.duration_since(*oldest)))
            })
            .flatten()
    }

    pub fn record_failure(&self, ip: IpAddr, now: Instant) {
        let mut map = self.failures.lock();
        if map.len() >= SWEEP_THRESHOLD {
            map.retain(|_, t| {
                t.back()
                    .is_some_and(|last| now.duration_since(*last) < LOGIN_WINDOW)
            });
        }
        map.entry(ip).or_default().push_back(now);
    }
}

fn invalid_credentials() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"error": "Invalid credentials"})),
    )
        .into_response()
}

/// `POST /v1/api/auth/login` with `{"token"}`: a session JWT (audience
/// `turnstone-console`) in the body and the `turnstone_auth` cookie.
pub async fn login(
    State(console): State<Arc<Console>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let ip = peer.map_or(IpAddr::from([0, 0, 0, 0]), |p| p.0.0.ip());
    let now = Instant::now();
    if let Some(wait) = console.login_limiter.blocked(ip, now) {
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!({"error": "Too many login attempts"})),
        )
            .into_response();
        let secs = wait.as_secs().max(1);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return response;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return ApiError::BadRequest("Invalid JSON body".into()).into_response();
    };
    let token = body
        .get("token")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    let identity = if token.is_empty() {
        None
    } else {
        console.auth.authenticate_token(token).await.ok()
    };
    let Some(identity) = identity else {
        console.login_limiter.record_failure(ip, now);
        return invalid_credentials();
    };
    let jwt = match console.auth.mint_for(&identity, DEFAULT_TOKEN_TTL) {
        Ok(jwt) => jwt,
        Err(e) => {
            return ApiError::Auth {
                status: e.status(),
                message: e.body_message(),
            }
            .into_response();
        }
    };
    let cookie = set_cookie_header(jwt.as_deref().unwrap_or(token), is_https(&headers));
    let mut reply = json!({
        "status": "ok",
        "role": identity.role().as_str(),
        "scopes": identity.scopes.to_string(),
    });
    if let Some(o) = reply.as_object_mut() {
        if !identity.permissions.is_empty() {
            o.insert(
                "permissions".into(),
                json!(identity.permissions.to_string()),
            );
        }
        if let Some(jwt) = jwt {
            o.insert("jwt".into(), json!(jwt));
        }
        if !identity.user_id.is_empty() {
            o.insert("user_id".into(), json!(identity.user_id));
        }
    }
    with_cookie(Json(reply).into_response(), &cookie)
}

/// `POST /v1/api/auth/logout`.
pub async fn logout() -> Response {
    with_cookie(
        Json(json!({"status": "ok"})).into_response(),
        &clear_cookie_header(),
    )
}

/// `GET /v1/api/auth/status`.
pub async fn status(State(console): State<Arc<Console>>) -> Json<Value> {
    let enabled = console.auth.is_enabled();
    Json(json!({"auth_enabled": enabled, "has_users": false, "setup_required": false}))
}

/// `GET /v1/api/auth/whoami`.
pub async fn whoami(identity: Option<Extension<Identity>>) -> Response {
    match identity {
        Some(Extension(identity)) => Json(json!({
            "user_id": identity.user_id,
            "scopes": identity.scopes.to_string(),
            "role": identity.role().as_str(),
        }))
        .into_response(),
        None => Json(json!({"user_id": "", "scopes": "approve,read,write", "role": "full", "auth_enabled": false}))
            .into_response(),
    }
}
