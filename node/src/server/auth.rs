//! The auth layer: every request is checked against the route's required scope before it
//! reaches a handler; public routes pass; failures get the original's exact 401/403 bodies.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use turnstone_runtime::auth::{APPROVALS_OFF_PERMISSION, Identity};

use super::error::ApiError;
use super::state::Node;

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

pub async fn require_scope(
    State(node): State<Arc<Node>>,
    mut req: Request,
    next: Next,
) -> Response {
    let authorization = header_text(&req, header::AUTHORIZATION);
    let cookie = header_text(&req, header::COOKIE);
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    match node
        .auth
        .check_request(&method, &path, authorization.as_deref(), cookie.as_deref())
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

fn header_text(req: &Request, name: header::HeaderName) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
