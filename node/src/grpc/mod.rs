//! The node's gRPC API (`turnstone.v1.NodeService`, contract in `proto/turnstone/v1/`, see
//! `docs/grpc.md`), with standard health checking (`grpc.health.v1`) and server reflection
//! (`grpc.reflection.v1` and `v1alpha`).
//!
//! It is served on the HTTP port: [`multiplex`] (`turnstone_grpc::serve`) sends a request
//! whose `content-type` is `application/grpc…` to the gRPC services and everything else to
//! the HTTP router (`--grpc-port` adds a listener that serves gRPC alone, [`serve`]). Every RPC checks the
//! access of the HTTP route it mirrors ([`access`]) and runs that route's code.

pub mod access;
pub mod events;
pub mod service;
pub mod wait;

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use tokio::net::TcpListener;
use turnstone_grpc::serve::{Lifecycle, status_response, with_health_and_reflection};
use turnstone_grpc::v1::node_service_server::NodeServiceServer;

pub use turnstone_grpc::serve::{is_grpc, multiplex};

use crate::server::Node;
use crate::server::body::BODY_LIMIT;

pub use service::NodeGrpc;

/// Largest request message an RPC accepts (as the HTTP body limit); a larger one is refused
/// before it is decoded (`OUT_OF_RANGE`, tonic's code for it).
pub const MAX_MESSAGE_BYTES: usize = BODY_LIMIT;

/// The gRPC services of `node`: the node service, health (`""` and
/// `turnstone.v1.NodeService` serving, `NOT_SERVING` from the start of a drain) and
/// reflection; every call counted in the node's metrics.
pub async fn services(node: Arc<Node>) -> Router {
    let node_service = NodeServiceServer::new(NodeGrpc::new(node.clone()))
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let lifecycle = Lifecycle {
        draining: node.drain.began_token(),
        streams_closing: node.drain.streams_closing_token(),
    };
    let services = with_health_and_reflection(node_service, lifecycle)
        .await
        .layer(axum::middleware::from_fn_with_state(
            node.clone(),
            loopback_only,
        ));
    turnstone_grpc::metrics::observe(services, node.metrics.grpc.clone())
}

/// With auth disabled (loopback binds only), a gRPC request must name this node by a
/// loopback name, as an HTTP request must (DNS rebinding).
async fn loopback_only(
    axum::extract::State(node): axum::extract::State<Arc<Node>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    if !node.auth.is_enabled() && !crate::server::auth::host_is_loopback(req.headers(), req.uri()) {
        return status_response(tonic::Status::permission_denied(
            "auth is disabled, so this node only answers to loopback host names",
        ));
    }
    next.run(req).await
}

/// Serves gRPC alone on `listener` (`--grpc-port`) until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    node: Arc<Node>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = multiplex(None, services(node).await)
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
