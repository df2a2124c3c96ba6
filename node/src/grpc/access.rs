//! Who may call an RPC, and how the node's errors read as gRPC statuses.
//!
//! Each RPC names the HTTP route it mirrors ([`Route`]); its access is that route's row of
//! [`turnstone_proto::routes::NODE_ROUTES`] (the same lookup the HTTP auth layer does), checked
//! by the node's [`turnstone_runtime::auth::Authenticator`] against the `authorization`
//! metadata (`Bearer <token or JWT>`). No credential or a bad one is `UNAUTHENTICATED`, a
//! missing scope or permission `PERMISSION_DENIED`. Then, as for HTTP, the node's rate
//! limiter takes a token from the caller's bucket (`RESOURCE_EXHAUSTED` with the wait in the
//! metadata when it is empty), and a draining node refuses RPCs that start work.

use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use axum::http::Method;
use tonic::{Code, Status};
use turnstone_runtime::auth::Identity;

use crate::server::auth::{RouteNotInTable, route_access};
use crate::server::ratelimit::{self, Decision, RATE_LIMITED};
use crate::server::{ApiError, Node};

/// The HTTP route an RPC mirrors: its method and route template.
#[derive(Debug, Clone)]
pub struct Route {
    pub method: Method,
    pub template: &'static str,
}

impl Route {
    pub const fn get(template: &'static str) -> Self {
        Self {
            method: Method::GET,
            template,
        }
    }

    pub const fn post(template: &'static str) -> Self {
        Self {
            method: Method::POST,
            template,
        }
    }
}

/// Authenticates `request` for `route`: the caller's identity (`None` when auth is off or
/// the route is public). Then the rate limit; while the node drains, an RPC that starts work
/// is `UNAVAILABLE`.
pub async fn authorize<T>(
    node: &Node,
    request: &tonic::Request<T>,
    route: Route,
) -> Result<Option<Identity>, Status> {
    let metadata = request.metadata();
    let access = route_access(
        route.method.as_str(),
        Some(route.template),
        node.options.metrics_auth,
    )
    .map_err(|RouteNotInTable| Status::permission_denied("this RPC has no permission entry"))?;
    let authorization = metadata.get("authorization").and_then(|v| v.to_str().ok());
    let identity = node
        .auth
        .check_access(access, authorization, None)
        .await
        .map_err(|e| {
            let code = match e.status() {
                401 => Code::Unauthenticated,
                403 => Code::PermissionDenied,
                _ => Code::Internal,
            };
            Status::new(code, e.body_message())
        })?;
    rate_limit(node, request, &route)?;
    if node.drain.is_draining() && crate::server::drain::starts_work(&route.method, route.template)
    {
        return Err(Status::unavailable(
            "node is shutting down; retry on another node or later",
        ));
    }
    Ok(identity)
}

/// The node's rate limit for one call: the HTTP limiter's buckets, keyed by the same client
/// address (the peer, or the `x-forwarded-for` metadata from a trusted proxy); the routes
/// HTTP exempts (`/health`) are exempt here too. A call without a known peer (a server not
/// started by `server::run` or `grpc::serve`) is not limited, as for HTTP.
fn rate_limit<T>(node: &Node, request: &tonic::Request<T>, route: &Route) -> Result<(), Status> {
    let Some(limiter) = &node.ratelimiter else {
        return Ok(());
    };
    if ratelimit::is_exempt(&route.method, route.template) {
        return Ok(());
    }
    let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>() else {
        return Ok(());
    };
    let headers = request.metadata().clone().into_headers();
    match limiter.admit(peer.ip(), &headers) {
        Decision::Allow => Ok(()),
        Decision::Reject { retry_after } => Err(rate_limited(retry_after)),
    }
}

/// `RESOURCE_EXHAUSTED` for a call the rate limiter refused, with the wait in the metadata:
/// `retry-after` (whole seconds, as the HTTP header) and `grpc-retry-pushback-ms` (gRPC's
/// retry pushback, which clients with a retry policy obey).
pub fn rate_limited(retry_after: f64) -> Status {
    let mut status = Status::resource_exhausted(RATE_LIMITED);
    let pushback_ms = (retry_after.max(0.0) * 1000.0).ceil() as u64;
    let metadata = status.metadata_mut();
    metadata.insert(
        "retry-after",
        ratelimit::retry_after_secs(retry_after).into(),
    );
    metadata.insert("grpc-retry-pushback-ms", pushback_ms.into());
    status
}

/// The status of a route's error: 400 `INVALID_ARGUMENT`, 404 `NOT_FOUND`, 409 (decided
/// already, exists already) `FAILED_PRECONDITION` with the HTTP body as the details, 401
/// `UNAUTHENTICATED`, 403 `PERMISSION_DENIED`, 413 `RESOURCE_EXHAUSTED`, 503 `UNAVAILABLE`,
/// 500 `INTERNAL`. The message is the HTTP body's `error`.
pub fn status_of(e: ApiError) -> Status {
    let message = e.body()["error"].as_str().unwrap_or_default().to_string();
    match &e {
        ApiError::BadRequest(_) => Status::invalid_argument(message),
        ApiError::NotFound(_) => Status::not_found(message),
        ApiError::Conflict { .. } => Status::with_details(
            Code::FailedPrecondition,
            message,
            e.body().to_string().into_bytes().into(),
        ),
        ApiError::Auth { status: 401, .. } => Status::unauthenticated(message),
        ApiError::Auth { status: 415, .. } => Status::invalid_argument(message),
        ApiError::Auth { .. } => Status::permission_denied(message),
        ApiError::TooLarge(_) => Status::resource_exhausted(message),
        ApiError::Unavailable(_) => Status::unavailable(message),
        ApiError::Internal(_) => Status::internal(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_codes() {
        assert_eq!(
            status_of(ApiError::BadRequest("Empty message".into())).code(),
            Code::InvalidArgument
        );
        let missing = status_of(ApiError::unknown_workstream());
        assert_eq!(missing.code(), Code::NotFound);
        assert_eq!(missing.message(), "Unknown workstream");
        let decided = status_of(ApiError::Conflict {
            message: "Approval already decided".into(),
            detail: serde_json::json!({"verdict": {"approved": true}}),
        });
        assert_eq!(decided.code(), Code::FailedPrecondition);
        assert!(String::from_utf8_lossy(decided.details()).contains("\"verdict\""));
        assert_eq!(
            status_of(ApiError::Auth {
                status: 403,
                message: "no".into()
            })
            .code(),
            Code::PermissionDenied
        );
    }

    #[test]
    fn a_rate_limited_call_says_how_long_to_wait() {
        let status = rate_limited(2.5);
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(status.message(), "Rate limit exceeded");
        assert_eq!(status.metadata().get("retry-after").unwrap(), "3");
        assert_eq!(
            status.metadata().get("grpc-retry-pushback-ms").unwrap(),
            "2500"
        );
    }
}
