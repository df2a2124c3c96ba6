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
//! * [`admin`] — the admin fan-out: watches, MCP servers, models and memories across every
//!   node;
//! * [`policies`], [`skills`] — tool policies and skills in the console's store, pushed to
//!   every node with the settings ([`cluster_settings`]);
//! * [`proxy`] — `/node/{id}/…`, a streaming reverse proxy to each node's UI and API with a
//!   per-request short-lived JWT;
//! * [`trust`] — which heartbeats are trusted with credentials (signature, age, URL allow-list);
//! * [`routes`] — what every console route needs (the table next to [`router`]; proxied
//!   paths by the node's own table);
//! * [`login`] — the node's auth scheme (tokens, JWT, cookie) on every console route, and
//!   login with stored users (`turnstone-accounts`, as the node);
//! * users, API tokens and roles under `/v1/api/admin/` — the node's handlers
//!   (`turnstone_accounts::admin_routes`) on the console's store (SQLite by default, or the
//!   PostgreSQL the nodes share);
//! * [`schedules`], [`scheduler`] — cron and one-shot tasks in the store, fired by one
//!   console at a time (`{prefix}:scheduler:lock`) as queued `create_workstream`s;
//! * [`openapi`] — `/openapi.json` and `/docs` from the node's generator and this route table;
//! * [`metrics`], [`ui`] — `/metrics` and the embedded dashboard;
//! * [`launcher`] — `turnstone-cluster up`: a whole local cluster as child processes.
//!
//! It must not know the engine or the node's internals: it talks to nodes over HTTP only
//! and to the bridges through Redis only.
//!
//! [`start`] binds everything on a listener, so tests run a console in-process on port 0.

pub mod admin;
pub mod api;
pub mod cluster_settings;
pub mod collector;
pub mod config;
pub mod error;
pub mod events;
pub mod grpc;
pub mod launcher;
pub mod login;
pub mod metrics;
pub mod model;
pub mod openapi;
pub mod policies;
pub mod proxy;
pub mod routes;
pub mod scheduler;
pub mod schedules;
pub mod skills;
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
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/docs", get(openapi::docs))
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
        .route(
            "/v1/api/admin/models",
            get(admin::models).post(cluster_settings::create_model),
        )
        .route(
            "/v1/api/admin/models/reload",
            post(cluster_settings::reload_models),
        )
        .route(
            "/v1/api/admin/models/{definition_id}",
            axum::routing::put(cluster_settings::update_model)
                .delete(cluster_settings::delete_model),
        )
        .route(
            "/v1/api/admin/settings",
            get(cluster_settings::list_settings),
        )
        .route("/v1/api/admin/audit", get(cluster_settings::audit_log))
        .route("/v1/api/models", get(cluster_settings::models))
        .route("/v1/api/skills", get(cluster_settings::skills))
        .route(
            "/v1/api/admin/settings/{key}",
            axum::routing::put(cluster_settings::put_setting)
                .delete(cluster_settings::delete_setting),
        )
        .route(
            "/v1/api/admin/policies",
            get(policies::list).post(policies::create),
        )
        .route(
            "/v1/api/admin/policies/{policy_id}",
            axum::routing::put(policies::update).delete(policies::delete),
        )
        .route(
            "/v1/api/admin/skills",
            get(skills::list).post(skills::create),
        )
        .route(
            "/v1/api/admin/skills/{name}",
            axum::routing::put(skills::update).delete(skills::delete),
        )
        .route("/v1/api/admin/memories", get(admin::memories))
        .route(
            "/v1/api/admin/memories/{name}",
            axum::routing::delete(admin::delete_memory),
        )
        .nest("/v1", turnstone_accounts::admin_routes::<Console>())
        .route(
            "/v1/api/admin/schedules",
            get(schedules::list).post(schedules::create),
        )
        .route(
            "/v1/api/admin/schedules/{task_id}",
            get(schedules::get)
                .put(schedules::update)
                .delete(schedules::delete),
        )
        .route(
            "/v1/api/admin/schedules/{task_id}/runs",
            get(schedules::runs),
        )
        .route("/v1/api/auth/login", post(login::login))
        .route("/v1/api/auth/setup", post(login::setup))
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
pub struct Options {
    pub config: ConsoleConfig,
    /// Where Redis is and how to log in (URL, ACL user, password, TLS files).
    pub redis: turnstone_queue::RedisSettings,
    /// Auth of the console's own routes (audience `turnstone-console`).
    pub auth: Authenticator,
    /// What the console presents to nodes.
    pub credentials: NodeCredentials,
    /// The console's storage (users, API tokens, roles); `None` leaves the admin routes
    /// answering 503 and password login off.
    pub store: Option<Arc<dyn turnstone_store::Store>>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("config", &self.config)
            .field("redis", &self.redis)
            .field("store", &self.store.as_ref().map(|s| s.backend_name()))
            .finish_non_exhaustive()
    }
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
    // `ts_` API tokens (and the session generation of users' JWTs) come from the store.
    let auth =
        match &options.store {
            Some(store) => options.auth.with_api_tokens(Arc::new(
                turnstone_accounts::api_tokens::StoreApiTokens(store.clone()),
            )),
            None => options.auth,
        };
    let console = Console::new(collector.clone(), auth, options.store, stop.clone())?;
    // Nodes that join (again) get the stored settings and models: subscribed before
    // discovery starts, so no join is missed.
    let catch_up = console
        .store
        .is_some()
        .then(|| cluster_settings::spawn_catch_up(console.clone(), stop.clone()));
    let mut tasks = collector.spawn(stop.clone());
    tasks.extend(catch_up);
    if let Some(store) = console.store.clone() {
        let every = console.collector.config.scheduler_tick;
        tasks.push(scheduler::Scheduler::new(console.clone(), store).spawn(every, stop.clone()));
    }
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
