//! One port for HTTP and gRPC: [`multiplex`] sends a request whose `content-type` is
//! `application/grpc…` to the gRPC services and everything else to the HTTP router;
//! [`with_health_and_reflection`] adds the standard services to a service of the contract.

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

/// The name of the standard health service.
pub const HEALTH_SERVICE: &str = "grpc.health.v1.Health";

/// `service` with standard health checking (`grpc.health.v1`: `""` and the service's name
/// `SERVING`) and server reflection (`grpc.reflection.v1` and `v1alpha`, over `turnstone.v1`
/// and the health service), as an axum router for [`multiplex`].
pub async fn with_health_and_reflection<S>(service: S) -> Router
where
    S: tower::Service<axum::http::Request<tonic::body::Body>, Error = Infallible>
        + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Response: IntoResponse,
    S::Future: Send + 'static,
{
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status(S::NAME, tonic_health::ServingStatus::Serving)
        .await;
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let mut routes = tonic::service::Routes::new(service).add_service(health);
    // Only what this port serves is listed (the contract's files hold other services too).
    let reflection = |version: &str| {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(crate::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .with_service_name(S::NAME)
            .with_service_name(HEALTH_SERVICE)
            .with_service_name(format!("grpc.reflection.{version}.ServerReflection"))
    };
    match (
        reflection("v1").build_v1(),
        reflection("v1alpha").build_v1alpha(),
    ) {
        (Ok(v1), Ok(v1alpha)) => routes = routes.add_service(v1).add_service(v1alpha),
        (Err(e), _) | (_, Err(e)) => tracing::warn!(error = %e, "gRPC reflection not served"),
    }
    routes.into_axum_router()
}
