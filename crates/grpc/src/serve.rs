//! One port for HTTP and gRPC: [`multiplex`] sends a request whose `content-type` is
//! `application/grpc…` to the gRPC services and everything else to the HTTP router.

use std::convert::Infallible;

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;

/// Whether a request is gRPC (`content-type: application/grpc`, `application/grpc+proto`, …).
pub fn is_grpc(req: &Request) -> bool {
    req.headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// One app for one port: gRPC requests to `grpc`, the others to `http` (`None`: a port that
/// serves gRPC alone answers anything else `415`).
pub fn multiplex(http: Option<Router>, grpc: Router) -> Router {
    let dispatch = tower::service_fn(move |req: Request| {
        let (http, grpc) = (http.clone(), grpc.clone());
        async move {
            let response = if is_grpc(&req) {
                grpc.oneshot(req).await.unwrap_or_else(|e| match e {})
            } else if let Some(http) = http {
                http.oneshot(req).await.unwrap_or_else(|e| match e {})
            } else {
                (
                    axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "this port serves gRPC only",
                )
                    .into_response()
            };
            Ok::<Response, Infallible>(response)
        }
    });
    Router::new().fallback_service(dispatch)
}

/// The `tonic::Status` as a complete gRPC response (trailers-only).
pub fn status_response(status: tonic::Status) -> Response {
    status.into_http::<axum::body::Body>().into_response()
}
