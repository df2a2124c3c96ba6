//! The node's HTTP server: the v0.9.6 API under `/v1/api`, its SSE streams with
//! `Last-Event-ID` resumption, the node-wide ordered stream, health, and auth on every route.
//!
//! [`router`] builds the axum app for a [`Node`]; [`run`] serves it on a listener until the
//! shutdown signal, so tests bind port 0 and run the server in-process.

pub mod auth;
pub mod body;
pub mod cluster_settings;
pub mod conn;
pub mod drain;
pub mod error;
pub mod events;
pub mod health;
pub mod hibernation;
pub mod internal;
pub mod login;
pub mod memories;
pub mod metrics;
pub mod openapi;
pub mod outcomes;
pub mod policies;
pub mod posture;
pub mod previews;
pub mod queue;
pub mod ratelimit;
pub mod skills;
pub mod sse;
pub mod state;
pub mod turns;
pub mod ui;
pub mod users;
pub mod views;
pub mod watches;
pub mod workstreams;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tracing::Instrument;

pub use error::ApiError;
pub use state::{Node, NodeEvent, NodeEventKind, NodeOptions};

/// The node's routes, with (outermost first) a tracing span per request, HTTP metrics, body
/// limit, auth and the per-IP rate limit.
pub fn router(node: Arc<Node>) -> Router {
    metrics::Metrics::start(&node);
    let limiter = node.ratelimiter.clone();
    let api = Router::new()
        .route("/api/events", get(events::workstream_events))
        .route("/api/events/global", get(events::global_events))
        .route("/api/events/node", get(events::node_events))
        .route("/api/workstreams", get(workstreams::list))
        .route("/api/workstreams/saved", get(workstreams::saved))
        .route("/api/dashboard", get(workstreams::dashboard))
        .route("/api/workstreams/new", post(workstreams::create))
        .route("/api/workstreams/close", post(workstreams::close))
        .route("/api/approvals", get(workstreams::pending_approvals))
        .route("/api/workstreams/{ws_id}/queue", get(queue::list))
        .route("/api/workstreams/{ws_id}/posture", post(posture::set))
        .route(
            "/api/workstreams/{ws_id}/queue/{correlation_id}",
            axum::routing::delete(queue::remove),
        )
        .route("/api/send", post(turns::send))
        .route("/api/sends/outcomes", post(outcomes::outcomes))
        .route("/api/approve", post(turns::approve))
        .route("/api/cancel", post(turns::cancel))
        .route("/api/plan", post(turns::plan))
        .route("/api/command", post(turns::command))
        .route(
            "/api/tools",
            get(internal::prepared_tools).post(internal::set_tools),
        )
        .route("/api/previews/{preview_id}", get(previews::get_preview))
        .route("/api/_internal/mcp-status", get(internal::mcp_status))
        .route("/api/_internal/mcp-reload", post(internal::mcp_reload))
        .route("/api/_internal/model-status", get(internal::model_status))
        .route(
            "/api/_internal/config-reload",
            post(cluster_settings::config_reload),
        )
        .route(
            "/api/_internal/model-reload",
            post(cluster_settings::model_reload),
        )
        .route("/api/_internal/release", post(internal::release))
        .merge(login::routes())
        .merge(users::admin_routes())
        .merge(memories::routes())
        .merge(skills::routes())
        .merge(policies::routes())
        .merge(watches::routes());
    Router::new()
        .route("/health", get(health::health))
        .route("/ready", get(drain::ready))
        .route("/metrics", get(metrics::metrics))
        .route("/", get(ui::index))
        .route("/static/{*path}", get(ui::static_file))
        .nest("/v1", api)
        .merge(openapi::routes())
        // Unknown path: 404 `Not Found`; known path, wrong method: 405 with `Allow`. Keep
        // these after every route (the 405 fallback applies to routes registered before it).
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            node.clone(),
            sse::limit_streams,
        ))
        .layer(axum::middleware::from_fn_with_state(
            node.clone(),
            drain::refuse_new_turns,
        ))
        .layer(axum::middleware::from_fn_with_state(
            limiter,
            ratelimit::limit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            node.clone(),
            auth::require_access,
        ))
        .layer(DefaultBodyLimit::max(body::BODY_LIMIT))
        .layer(tower::util::option_layer(cors_layer(
            &node.options.cors_origins,
        )))
        .layer(axum::middleware::from_fn_with_state(
            node.clone(),
            metrics::track_http,
        ))
        .layer(axum::middleware::from_fn(trace_request))
        .with_state(node)
}

/// Plain-text 404 for unknown paths, as the original.
async fn not_found() -> (axum::http::StatusCode, &'static str) {
    (axum::http::StatusCode::NOT_FOUND, "Not Found")
}

/// Plain-text 405 for a known path with another method (axum adds `Allow`).
async fn method_not_allowed() -> (axum::http::StatusCode, &'static str) {
    (
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "Method Not Allowed",
    )
}

/// CORS, only when origins are configured: methods `GET, POST, OPTIONS`, headers
/// `Content-Type, Authorization`.
fn cors_layer(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderValue, Method, header};
    let origins: Vec<HeaderValue> = origins
        .iter()
        .map(|o| o.trim())
        .filter(|o| !o.is_empty())
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    if origins.is_empty() {
        return None;
    }
    Some(
        tower_http::cors::CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
            .allow_headers([header::CONTENT_TYPE, header::AUTHORIZATION]),
    )
}

async fn trace_request(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let span = tracing::info_span!(
        "request",
        method = %req.method(),
        path = %req.uri().path(),
        trace_id = tracing::field::Empty
    );
    // A caller's `traceparent` (the bridge, the console, any client) makes this a child span.
    turnstone_runtime::trace_context::set_parent_from_headers(&span, req.headers());
    async move {
        let response = next.run(req).await;
        tracing::debug!(status = response.status().as_u16(), "response");
        response
    }
    .instrument(span)
    .await
}

/// Serves `node` (HTTP, and gRPC on the same port) on `listener` until `shutdown` resolves.
pub async fn run(
    listener: TcpListener,
    node: Arc<Node>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let header_read_timeout = node.options.header_read_timeout;
    // gRPC (`content-type: application/grpc`) and HTTP share the port.
    let grpc = crate::grpc::services(node.clone()).await;
    let app = crate::grpc::multiplex(Some(router(node)), grpc)
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    // SSE frames are small separate writes: without TCP_NODELAY some wait for the client's
    // delayed ACK (~40 ms).
    let listener = conn::HeaderDeadlineListener::new(listener, header_read_timeout);
    let listener = listener.tap_io(|stream| {
        if let Err(e) = stream.get_mut().set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
