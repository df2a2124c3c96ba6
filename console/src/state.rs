//! [`Console`]: what every handler shares — the collector, the authenticator, the proxy's
//! HTTP client, a Redis connection for workstream creation, and HTTP counters.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use turnstone_runtime::auth::Authenticator;

use crate::collector::Collector;

/// Counters of the HTTP side, exported on `/metrics`.
#[derive(Debug, Default)]
pub struct HttpStats {
    pub requests: AtomicU64,
    pub proxy_requests: AtomicU64,
    pub proxy_streams: AtomicU64,
    pub proxy_html: AtomicU64,
    pub proxy_errors: AtomicU64,
    pub proxy_unknown_node: AtomicU64,
    pub creates: AtomicU64,
    pub creates_failed: AtomicU64,
    pub overview_requests: AtomicU64,
}

/// The console.
pub struct Console {
    pub collector: Arc<Collector>,
    pub auth: Authenticator,
    /// Proxy client: connect timeout only (streams must not time out).
    pub proxy_http: reqwest::Client,
    pub stats: HttpStats,
    /// gRPC calls by method and code (`turnstone_console_grpc_*`).
    pub grpc_calls: Arc<turnstone_grpc::metrics::GrpcCalls>,
    pub started: Instant,
    /// Failed sign-ins per client address and per address and username (the node's rules).
    pub login_limiter: turnstone_accounts::limiter::LoginLimiter,
    /// Users, tokens, roles (and schedules); `None` when storage could not be opened (the
    /// admin routes then answer 503).
    pub store: Option<Arc<dyn turnstone_store::Store>>,
    /// Fired at shutdown: open event streams (cluster and proxied) end.
    pub shutdown: CancellationToken,
    /// Bounds the node requests of every admin fan-out ([`crate::admin`]).
    pub fan_out: tokio::sync::Semaphore,
    redis: AsyncMutex<Option<redis::aio::MultiplexedConnection>>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").finish_non_exhaustive()
    }
}

impl Console {
    pub fn new(
        collector: Arc<Collector>,
        auth: Authenticator,
        store: Option<Arc<dyn turnstone_store::Store>>,
        shutdown: CancellationToken,
    ) -> Result<Arc<Self>, reqwest::Error> {
        let proxy_http = reqwest::Client::builder()
            .connect_timeout(collector.config.proxy_connect_timeout)
            .pool_max_idle_per_host(64)
            .tcp_nodelay(true)
            // A node's redirect goes back to the browser (rewritten), never followed here.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let fan_out_limit = collector.config.node_fan_out_limit.max(1);
        Ok(Arc::new(Self {
            collector,
            auth,
            proxy_http,
            stats: HttpStats::default(),
            grpc_calls: Arc::new(turnstone_grpc::metrics::GrpcCalls::new(
                "turnstone_console_grpc",
            )),
            started: Instant::now(),
            login_limiter: turnstone_accounts::limiter::LoginLimiter::default(),
            store,
            shutdown,
            fan_out: tokio::sync::Semaphore::new(fan_out_limit),
            redis: AsyncMutex::new(None),
        }))
    }

    /// `RPUSH key value` on the shared connection, reconnecting once on failure.
    pub async fn rpush(&self, key: &str, value: &str) -> redis::RedisResult<()> {
        let _: i64 = self
            .redis_query(redis::cmd("RPUSH").arg(key).arg(value))
            .await?;
        Ok(())
    }

    /// One command on the shared connection, reconnecting once on failure.
    pub async fn redis_query<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        let mut guard = self.redis.lock().await;
        let mut last = None;
        for attempt in 0..2 {
            if guard.is_none() {
                *guard = Some(self.collector.redis_connection().await?);
            }
            let Some(conn) = guard.as_mut() else {
                continue;
            };
            match cmd.query_async(conn).await {
                Ok(v) => return Ok(v),
                Err(e) if attempt == 0 => {
                    tracing::warn!(error = %e, "Redis command failed; reconnecting");
                    *guard = None;
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            redis::RedisError::from((redis::ErrorKind::Io, "no Redis connection"))
        }))
    }
}

impl turnstone_accounts::AccountsHost for Console {
    fn accounts_store(&self) -> Option<Arc<dyn turnstone_store::Store>> {
        self.store.clone()
    }
}
