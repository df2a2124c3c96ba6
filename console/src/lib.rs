//! # turnstone-console
//!
//! The console of a Turnstone cluster (cluster spec §6, v0.9.6-compatible): one process that
//! watches every node and gives operators one place to look and act.
//!
//! * [`collector`] — discovers nodes from the bridges' heartbeat keys (`SCAN` + `MGET`),
//!   polls each node's `/health` and `/v1/api/dashboard` with bounded concurrency, timeouts
//!   and jitter, and follows the `{prefix}:events:cluster` channel;
//! * [`model`] — the in-memory cluster and every query: overview, nodes, workstreams, node
//!   detail, snapshot; **version drift** (nodes off the majority version are flagged and
//!   skipped by `auto` placement) and **zombies** (fresh heartbeat but failing HTTP or
//!   stalled progress: shown, never placed on);
//! * [`api`] — the `/v1/api/cluster/*` JSON API and workstream creation through Redis
//!   (`pool`, `auto`, or a named node);
//! * [`events`] — the cluster SSE stream (snapshot first, then incremental events);
//! * [`admin`] — the admin fan-out: watches, MCP servers and models across every node;
//! * [`proxy`] — `/node/{id}/…`, a streaming reverse proxy to each node's UI and API with a
//!   per-request short-lived JWT;
//! * [`trust`] — which heartbeats are trusted with credentials (signature, age, URL allow-list);
//! * [`routes`] — what every console route needs (the table next to [`router`]; proxied
//!   paths by the node's own table);
//! * [`login`] — the node's auth scheme (tokens, JWT, cookie) on every console route;
//! * [`metrics`], [`ui`] — `/metrics` and the embedded dashboard;
//! * [`launcher`] — `turnstone-cluster up`: a whole local cluster as child processes.
//!
//! It must not know the engine or the node's internals: it talks to nodes over HTTP only
//! and to the bridges through Redis only.
//!
//! [`start`] binds everything on a listener, so tests run a console in-process on port 0.

pub mod admin;
pub mod api;
pub mod collector;
pub mod config;
pub mod error;
pub mod events;
pub mod grpc;
pub mod launcher;
pub mod login;
pub mod metrics;
pub mod model;
pub mod proxy;
pub mod routes;
pub mod state;
pub mod trust;
pub mod ui;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use turnstone_runtime::auth::Authenticator;

pub use collector::Collector;
pub use config::{ConsoleConfig, NodeCredentials};
pub use error::ApiError;
pub use state::Console;

/// Largest request body accepted (proxied POSTs included).
pub const BODY_LIMIT: usize = 4 * 1024 * 1024;

/// Why the console could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Redis(#[from] turnstone_queue::QueueError),
    #[error("cannot build the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
    #[error("cannot read the listener address: {0}")]
    Io(#[from] std::io::Error),
}

/// The routes, with the auth layer on all of them.
pub fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(ui::index))
        .route("/static/{*path}", get(ui::static_file))
        .route("/health", get(api::health))
        .route("/ready", get(api::ready))
        .route("/metrics", get(metrics::metrics))
        .route("/v1/api/cluster/overview", get(api::overview))
        .route("/v1/api/cluster/nodes", get(api::nodes))
        .route("/v1/api/cluster/workstreams", get(api::workstreams))
        .route(
            "/v1/api/cluster/workstreams/new",
            post(api::create_workstream),
        )
        .route("/v1/api/cluster/node/{*node_id}", get(api::node_detail))
        .route("/v1/api/cluster/snapshot", get(api::snapshot))
        .route("/v1/api/cluster/events", get(events::cluster_events))
        .route("/v1/api/admin/watches", get(admin::watches))
        .route(
            "/v1/api/admin/watches/{watch_id}/cancel",
            post(admin::cancel_watch),
        )
        .route("/v1/api/admin/mcp-servers", get(admin::mcp_servers))
        .route("/v1/api/admin/mcp-servers/reload", post(admin::reload_mcp))
        .route("/v1/api/admin/models", get(admin::models))
        .route("/v1/api/auth/login", post(login::login))
        .route("/v1/api/auth/logout", post(login::logout))
        .route("/v1/api/auth/status", get(login::status))
        .route("/v1/api/auth/whoami", get(login::whoami))
        .route("/node/{node_id}", get(proxy::node_root_redirect))
        .route("/node/{node_id}/", get(proxy::node_page))
        .route("/node/{node_id}/{*tail}", any(proxy::node_path))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            console.clone(),
            login::require_scope,
        ))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(console)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("Not found".into())
}

/// Everything [`start`] needs.
#[derive(Debug)]
pub struct Options {
    pub config: ConsoleConfig,
    /// Where Redis is and how to log in (URL, ACL user, password, TLS files).
    pub redis: turnstone_queue::RedisSettings,
    /// Auth of the console's own routes (audience `turnstone-console`).
    pub auth: Authenticator,
    /// What the console presents to nodes.
    pub credentials: NodeCredentials,
}

/// A console serving on a listener, with its collector running. Stops when dropped.
#[derive(Debug)]
pub struct Running {
    pub console: Arc<Console>,
    pub addr: SocketAddr,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server (open streams are cut) and the collector, and waits for them.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
        let server = std::mem::replace(&mut self.server, tokio::spawn(async { Ok(()) }));
        match tokio::time::timeout(std::time::Duration::from_secs(5), server).await {
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "server error at shutdown"),
            Err(_) => tracing::warn!("server did not stop within 5 s"),
            _ => {}
        }
    }

    /// Resolves when the server stopped (e.g. after [`Running::stop_token`] fired).
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
        for t in &self.tasks {
            t.abort();
        }
        self.server.abort();
    }
}

/// Starts the collector and serves the console on `listener`.
pub async fn start(options: Options, listener: TcpListener) -> Result<Running, StartError> {
    let redis = options.redis.client()?;
    let collector = Collector::new(options.config, redis, options.credentials)?;
    let stop = CancellationToken::new();
    let console = Console::new(collector.clone(), options.auth, stop.clone())?;
    let tasks = collector.spawn(stop.clone());
    let addr = listener.local_addr()?;
    // gRPC (`content-type: application/grpc`) and HTTP share the port.
    let app = turnstone_grpc::serve::multiplex(
        Some(router(console.clone())),
        grpc::services(console.clone()).await,
    );
    let s = stop.clone();
    let listener = {
        use axum::serve::ListenerExt;
        listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        })
    };
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { s.cancelled().await })
            .await
    });
    Ok(Running {
        console,
        addr,
        stop,
        server,
        tasks,
    })
}
