//! The node's HTTP server: the v0.9.6 API under `/v1/api`, its SSE streams with
//! `Last-Event-ID` resumption, the node-wide ordered stream, health, and auth on every route.
//!
//! [`router`] builds the axum app for a [`Node`]; [`run`] serves it on a listener until the
//! shutdown signal, so tests bind port 0 and run the server in-process.

pub mod auth;
pub mod body;
pub mod error;
pub mod events;
pub mod health;
pub mod sse;
pub mod state;
pub mod turns;
pub mod views;
pub mod workstreams;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tracing::Instrument;

pub use error::ApiError;
pub use state::{Node, NodeEvent, NodeEventKind, NodeOptions};

/// The node's routes, with auth, body limit and a tracing span per request.
pub fn router(node: Arc<Node>) -> Router {
    let api = Router::new()
        .route("/api/events", get(events::workstream_events))
        .route("/api/events/global", get(events::global_events))
        .route("/api/events/node", get(events::node_events))
        .route("/api/workstreams", get(workstreams::list))
        .route("/api/dashboard", get(workstreams::dashboard))
        .route("/api/workstreams/new", post(workstreams::create))
        .route("/api/workstreams/close", post(workstreams::close))
        .route("/api/send", post(turns::send))
        .route("/api/approve", post(turns::approve))
        .route("/api/cancel", post(turns::cancel))
        .route("/api/plan", post(turns::plan))
        .route("/api/command", post(turns::command));
    Router::new()
        .route("/health", get(health::health))
        .nest("/v1", api)
        .layer(axum::middleware::from_fn_with_state(
            node.clone(),
            auth::require_scope,
        ))
        .layer(DefaultBodyLimit::max(body::BODY_LIMIT))
        .layer(axum::middleware::from_fn(trace_request))
        .with_state(node)
}

async fn trace_request(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let span = tracing::info_span!("request", method = %req.method(), path = %req.uri().path());
    async move {
        let response = next.run(req).await;
        tracing::debug!(status = response.status().as_u16(), "response");
        response
    }
    .instrument(span)
    .await
}

/// Serves `node` on `listener` until `shutdown` resolves.
pub async fn run(
    listener: TcpListener,
    node: Arc<Node>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(node))
        .with_graceful_shutdown(shutdown)
        .await
}
