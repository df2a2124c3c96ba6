//! Console auth: the middleware that checks every request against what its route needs
//! ([`crate::routes`], by the route axum matched; the node's scheme: bearer token, else the `turnstone_auth` cookie; JWTs for audience
//! `turnstone-console`), and the login endpoints.
//!
//! An unauthenticated browser asking for a proxied node page is sent to the console's login
//! (`/?next=…`) instead of a JSON 401; nothing unauthenticated ever reaches a node.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, RawPathParams};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Json};
use serde_json::json;
use turnstone_accounts::body::AccountsJson;
use turnstone_accounts::login::{AuthStatusReply, LoginBody};
use turnstone_accounts::session::SignIn;
use turnstone_accounts::users::NewUserBody;
use turnstone_runtime::auth::Identity;

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

/// Whether the client says it reached the console over HTTPS (the console is run behind a
/// TLS-terminating proxy or not at all over TLS).
fn is_https(req_headers: &axum::http::HeaderMap) -> bool {
    req_headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

fn header_str(headers: &axum::http::HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The limiter's key of a client: its address (IPv6 per /64, as the node), `unknown`
/// without connect info.
fn client_key(peer: Option<Extension<ConnectInfo<SocketAddr>>>) -> String {
    match peer.map(|p| p.0.0.ip()) {
        Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
        Some(IpAddr::V6(v6)) => v6
            .to_ipv4_mapped()
            .map_or_else(String::new, |v4| v4.to_string()),
        Some(ip) => ip.to_string(),
        None => "unknown".into(),
    }
}

/// `POST /v1/api/auth/login` with `{"token"}` or `{"username", "password"}` (a user in the
/// console's store): a session JWT (audience `turnstone-console`) in the body and the
/// `turnstone_auth` cookie. The node's flow and limiter rules (`turnstone_accounts`).
pub async fn login(
    State(console): State<Arc<Console>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: axum::http::HeaderMap,
    AccountsJson(body): AccountsJson<LoginBody>,
) -> Response {
    let client = client_key(peer);
    let at = SignIn {
        auth: &console.auth,
        store: console.store.as_ref(),
        limiter: &console.login_limiter,
        client: &client,
        https: is_https(&headers),
    };
    turnstone_accounts::session::login(at, body).await
}

/// `POST /v1/api/auth/logout`: clears the cookie and ends the sessions of a user's JWT.
pub async fn logout(
    State(console): State<Arc<Console>>,
    headers: axum::http::HeaderMap,
) -> Response {
    turnstone_accounts::session::logout(
        &console.auth,
        console.store.as_ref(),
        header_str(&headers, header::AUTHORIZATION),
        header_str(&headers, header::COOKIE),
    )
    .await
}

/// `POST /v1/api/auth/setup`: the first user (admin) of the console's store, once; needs a
/// credential with the approve scope and `admin.users` (the console's full-access token).
pub async fn setup(
    State(console): State<Arc<Console>>,
    headers: axum::http::HeaderMap,
    AccountsJson(body): AccountsJson<NewUserBody>,
) -> Response {
    if !turnstone_accounts::session::is_bootstrap_credential(
        &console.auth,
        header_str(&headers, header::AUTHORIZATION),
        header_str(&headers, header::COOKIE),
    )
    .await
    {
        return turnstone_accounts::session::error(
            StatusCode::UNAUTHORIZED,
            "Setup needs the console's full-access token (Authorization: Bearer)",
        );
    }
    turnstone_accounts::session::setup(
        &console.auth,
        console.store.as_ref(),
        is_https(&headers),
        &body,
    )
    .await
}

/// `GET /v1/api/auth/status`.
pub async fn status(State(console): State<Arc<Console>>) -> Json<AuthStatusReply> {
    let auth_enabled = console.auth.is_enabled();
    let has_users = turnstone_accounts::users::has_users(console.store.as_ref()).await;
    Json(AuthStatusReply {
        auth_enabled,
        has_users,
        setup_required: auth_enabled && !has_users && console.store.is_some(),
    })
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
