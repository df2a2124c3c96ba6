//! The auth layer: every request is checked against what its route needs (the contract's
//! route table [`NODE_ROUTES`], looked up by the route template axum matched, so a path
//! parameter cannot dodge a row) before it reaches a handler; failures get the original's exact
//! 401/403 bodies. It also refuses what a browser can be tricked into sending:
//!
//! * with auth disabled (loopback binds only), a `Host` that is not a loopback name (DNS
//!   rebinding);
//! * a state-changing request authenticated by the session cookie (no bearer header) whose
//!   body is not JSON, or whose `Origin` is another site (cross-site request forgery).

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use turnstone_proto::routes::{Lookup, NODE_ROUTES, lookup, rows_of};
use turnstone_runtime::auth::{
    APPROVALS_OFF_PERMISSION, AUTH_COOKIE, Access, Identity, Scope, bearer_token, cookie_value,
};

use super::error::ApiError;
use super::state::Node;

const HOST_NOT_LOOPBACK: &str =
    "Forbidden: auth is disabled, so this node only answers to loopback host names";
const CROSS_SITE: &str = "Forbidden: cross-site request (Origin does not match this node)";
const COOKIE_NEEDS_JSON: &str =
    "Unsupported Media Type: a request authenticated by the session cookie must send JSON";
const ROUTE_NOT_IN_TABLE: &str = "Forbidden: this route has no permission entry";

fn forbidden(status: StatusCode, message: &str) -> Response {
    ApiError::Auth {
        status: status.as_u16(),
        message: message.to_string(),
    }
    .into_response()
}

/// Refuses a request that would switch approvals off (`auto_approve: true` or a non-empty
/// `auto_approve_tools`) unless the caller may ([`Identity::may_switch_approvals_off`]):
/// 403 with a message naming what is missing. Without auth (`identity` is `None`, a
/// loopback-only node) everything is allowed, as every other route.
pub fn check_approvals_off(
    identity: Option<&Identity>,
    auto_approve: bool,
    auto_approve_tools: &[String],
) -> Result<(), ApiError> {
    let asks = auto_approve || !auto_approve_tools.is_empty();
    match identity {
        Some(who) if asks && !who.may_switch_approvals_off() => Err(ApiError::Auth {
            status: 403,
            message: format!(
                "Forbidden: auto_approve and auto_approve_tools switch approvals off and need \
                 the 'approve' scope and the '{APPROVALS_OFF_PERMISSION}' permission"
            ),
        }),
        _ => Ok(()),
    }
}

/// The middleware (see the module docs).
pub async fn require_access(
    State(node): State<Arc<Node>>,
    mut req: Request,
    next: Next,
) -> Response {
    if !node.auth.is_enabled() && !host_is_loopback(req.headers(), req.uri()) {
        return forbidden(StatusCode::FORBIDDEN, HOST_NOT_LOOPBACK);
    }
    let authorization = header_text(req.headers(), header::AUTHORIZATION);
    let cookie = header_text(req.headers(), header::COOKIE);
    if let Some(refusal) =
        cross_site_refusal(&node, &req, authorization.as_deref(), cookie.as_deref())
    {
        return refusal;
    }

    let matched = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string());
    let access = match route_access(
        req.method().as_str(),
        matched.as_deref(),
        node.options.metrics_auth,
    ) {
        Ok(access) => access,
        Err(RouteNotInTable) => {
            tracing::error!(route = ?matched, "route without a permission entry refused");
            return forbidden(StatusCode::FORBIDDEN, ROUTE_NOT_IN_TABLE);
        }
    };
    match node
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
        Err(e) => ApiError::Auth {
            status: e.status(),
            message: e.body_message(),
        }
        .into_response(),
    }
}

/// A route the router serves that [`NODE_ROUTES`] has no row for (the route walk test fails
/// on it; at run time it is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteNotInTable;

/// What a request needs, by the route template axum matched (`None`: no route, a 404
/// follows). `OPTIONS` (CORS preflight, or its 405) is public; a method the template does
/// not have (axum answers 405) needs the strictest scope of the route's rows, and a path of
/// no route a `read` credential, so nothing about the API is told to an anonymous caller.
pub fn route_access(
    method: &str,
    matched: Option<&str>,
    metrics_auth: bool,
) -> Result<Access, RouteNotInTable> {
    if method.eq_ignore_ascii_case("OPTIONS") {
        return Ok(Access::Public);
    }
    let Some(template) = matched else {
        return Ok(Access::Requires(Scope::Read));
    };
    match lookup(NODE_ROUTES, method, template) {
        Lookup::Entry(needs) => Ok(Access::of_route(needs, metrics_auth)),
        Lookup::OtherMethod => Ok(Access::strictest(
            rows_of(NODE_ROUTES, template).map(|needs| Access::of_route(needs, metrics_auth)),
        )),
        Lookup::Missing => Err(RouteNotInTable),
    }
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Whether the request names this node by a loopback name (`localhost`, `*.localhost`,
/// `127.0.0.0/8`, `::1`). No host at all (not a browser) passes.
pub(crate) fn host_is_loopback(headers: &HeaderMap, uri: &axum::http::Uri) -> bool {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| uri.authority().map(|a| a.as_str().to_string()));
    let Some(host) = host else {
        return true;
    };
    let name = host_name(&host).to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<IpAddr>()
            .is_ok_and(|ip| super::ratelimit::normalize(ip).is_loopback())
}

/// `host[:port]` or `[v6]:port` → the name or address alone.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// For a state-changing request that a browser authenticates with the session cookie alone:
/// refused when the `Origin` is another site, or when a body is not JSON (a cross-site form
/// or `text/plain` fetch needs no CORS preflight; JSON does).
fn cross_site_refusal(
    node: &Node,
    req: &Request,
    authorization: Option<&str>,
    cookie: Option<&str>,
) -> Option<Response> {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let by_cookie = authorization.and_then(bearer_token).is_none()
        && cookie.and_then(|c| cookie_value(c, AUTH_COOKIE)).is_some();
    if !by_cookie {
        return None;
    }
    let headers = req.headers();
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default().trim();
        let own_host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let origin_host = origin
            .split_once("://")
            .map(|(_, rest)| rest.trim_end_matches('/'))
            .unwrap_or_default();
        let allowed = (!origin_host.is_empty() && origin_host.eq_ignore_ascii_case(own_host))
            || node
                .options
                .cors_origins
                .iter()
                .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin));
        if !allowed {
            return Some(forbidden(StatusCode::FORBIDDEN, CROSS_SITE));
        }
    }
    let has_body = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() != "0")
        || headers.contains_key(header::TRANSFER_ENCODING);
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        });
    if has_body && !json {
        return Some(forbidden(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            COOKIE_NEEDS_JSON,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_host_names() {
        let check = |host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, host.parse().unwrap());
            host_is_loopback(&headers, &axum::http::Uri::from_static("/"))
        };
        for ok in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "a.localhost",
            "[::1]:80",
            "127.1.2.3",
        ] {
            assert!(check(ok), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "10.0.0.1",
            "localhost.evil.com",
            "[::2]:80",
        ] {
            assert!(!check(bad), "{bad}");
        }
    }
}
