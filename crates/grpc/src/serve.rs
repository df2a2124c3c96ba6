//! One port for HTTP and gRPC: [`multiplex`] sends a request whose `content-type` is
//! `application/grpc…` to the gRPC services and everything else to the HTTP router;
//! [`with_health_and_reflection`] adds the standard services to a service of the contract,
//! with health turning `NOT_SERVING` when the server drains ([`Lifecycle`]).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Bytes, HttpBody};
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
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

/// When a server stops taking work, and when its open streams must end: the health service
/// turns `NOT_SERVING` on `draining`; on `streams_closing` the standard services' open
/// streams (health `Watch`, reflection) end with `OK`, so they hold no connection open
/// while the server stops. (The contract's own streams end themselves, after their last
/// event.) The default never fires.
#[derive(Debug, Clone, Default)]
pub struct Lifecycle {
    pub draining: CancellationToken,
    pub streams_closing: CancellationToken,
}

/// `service` with standard health checking (`grpc.health.v1`: `""` and the service's name
/// `SERVING`, then `NOT_SERVING` once `lifecycle.draining` fires) and server reflection
/// (`grpc.reflection.v1` and `v1alpha`, over `turnstone.v1` and the health service), as an
/// axum router for [`multiplex`].
pub async fn with_health_and_reflection<S>(service: S, lifecycle: Lifecycle) -> Router
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
    for name in [S::NAME, ""] {
        reporter
            .set_service_status(name, tonic_health::ServingStatus::Serving)
            .await;
    }
    // NOT_SERVING first, then (once streams must close) the standard services' streams end:
    // a health `Watch` sees the flip before its stream ends.
    let closing = CancellationToken::new();
    let cut = closing.clone();
    tokio::spawn(async move {
        lifecycle.draining.cancelled().await;
        for name in [S::NAME, ""] {
            reporter
                .set_service_status(name, tonic_health::ServingStatus::NotServing)
                .await;
        }
        lifecycle.streams_closing.cancelled().await;
        cut.cancel();
    });
    let mut routes =
        tonic::service::Routes::new(service).add_service(EndOnClose::new(health, &closing));
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
        (Ok(v1), Ok(v1alpha)) => {
            routes = routes
                .add_service(EndOnClose::new(v1, &closing))
                .add_service(EndOnClose::new(v1alpha, &closing));
        }
        (Err(e), _) | (_, Err(e)) => tracing::warn!(error = %e, "gRPC reflection not served"),
    }
    routes.into_axum_router()
}

type GrpcResponse = axum::http::Response<tonic::body::Body>;

/// A gRPC service whose response streams end with `OK` once `closing` fired and they have
/// nothing more ready to send (and only after their first message: a unary answer is never
/// cut).
#[derive(Debug, Clone)]
struct EndOnClose<S> {
    inner: S,
    closing: CancellationToken,
}

impl<S> EndOnClose<S> {
    fn new(inner: S, closing: &CancellationToken) -> Self {
        Self {
            inner,
            closing: closing.clone(),
        }
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for EndOnClose<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> tower::Service<axum::http::Request<tonic::body::Body>> for EndOnClose<S>
where
    S: tower::Service<
            axum::http::Request<tonic::body::Body>,
            Response = GrpcResponse,
            Error = Infallible,
        >,
    S::Future: Send + 'static,
{
    type Response = GrpcResponse;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<GrpcResponse, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: axum::http::Request<tonic::body::Body>) -> Self::Future {
        let closing = self.closing.clone();
        let call = self.inner.call(req);
        Box::pin(async move {
            let response = call.await?;
            Ok(response.map(|body| {
                tonic::body::Body::new(EndsOnClose {
                    inner: body,
                    closing: Box::pin(closing.cancelled_owned()),
                    sent_data: false,
                    ended: false,
                })
            }))
        })
    }
}

/// The body of [`EndOnClose`].
struct EndsOnClose {
    inner: tonic::body::Body,
    closing: Pin<Box<WaitForCancellationFutureOwned>>,
    sent_data: bool,
    ended: bool,
}

impl HttpBody for EndsOnClose {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => {
                if this.sent_data && this.closing.as_mut().poll(cx).is_ready() {
                    this.ended = true;
                    let mut trailers = axum::http::HeaderMap::new();
                    trailers.insert("grpc-status", axum::http::HeaderValue::from_static("0"));
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                Poll::Pending
            }
            Poll::Ready(Some(Ok(frame))) => {
                this.sent_data |= frame.is_data();
                Poll::Ready(Some(Ok(frame)))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
