//! Who may call an RPC, and how the node's errors read as gRPC statuses.
//!
//! Each RPC names the HTTP route it mirrors ([`Route`]); its access is that route's row of
//! [`turnstone_proto::routes::NODE_ROUTES`] (the same lookup the HTTP auth layer does), checked
//! by the node's [`turnstone_runtime::auth::Authenticator`] against the `authorization`
//! metadata (`Bearer <token or JWT>`). No credential or a bad one is `UNAUTHENTICATED`, a
//! missing scope or permission `PERMISSION_DENIED`.

use axum::http::Method;
use tonic::{Code, Status};
use turnstone_runtime::auth::Identity;

use crate::server::auth::{RouteNotInTable, route_access};
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

/// Authenticates `metadata` for `route`: the caller's identity (`None` when auth is off or
/// the route is public). While the node drains, an RPC that starts work is `UNAVAILABLE`.
pub async fn authorize(
    node: &Node,
    metadata: &tonic::metadata::MetadataMap,
    route: Route,
) -> Result<Option<Identity>, Status> {
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
    if node.drain.is_draining() && crate::server::drain::starts_work(&route.method, route.template)
    {
        return Err(Status::unavailable(
            "node is shutting down; retry on another node or later",
        ));
    }
    Ok(identity)
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
}
