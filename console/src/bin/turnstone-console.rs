//! `turnstone-console`: the cluster console (collector, cluster API and SSE, reverse proxy to
//! node UIs, dashboard). See `docs/console.md`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Parser;
use turnstone_console::{ConsoleConfig, NodeCredentials, Options};
use turnstone_queue::{REDIS_ENV_ALIASES, REDIS_SECRETS, RedisArgs};
use turnstone_runtime::auth::{
    AUDIENCE_CONSOLE, AuthConfig, AuthEnv, Authenticator, JwtSecret, check_bind_policy,
};
use turnstone_runtime::{ServiceSpec, Settings, exit_config_error};

/// The console's part of the configuration contract beyond its flags.
const SPEC: ServiceSpec = ServiceSpec {
    binary: "turnstone-console",
    table: Some("console"),
    own_keys: &[],
    home_config: None,
    aliases: &[REDIS_ENV_ALIASES],
    secrets: &[
        &[
            "TURNSTONE_JWT_SECRET",
            "TURNSTONE_AUTH_TOKEN",
            "TURNSTONE_DB_URL",
        ],
        REDIS_SECRETS,
    ],
    extra_env: &[],
    tables: &[],
};

#[derive(Debug, Parser)]
#[command(name = "turnstone-console", about = "The Turnstone cluster console")]
struct Args {
    /// Address to bind.
    #[arg(long, env = "TURNSTONE_CONSOLE_HOST", default_value = "0.0.0.0")]
    host: IpAddr,
    /// Port to bind (0 picks a free one).
    #[arg(long, env = "TURNSTONE_CONSOLE_PORT", default_value_t = 8090)]
    port: u16,
    /// `--redis-url`, `--redis-username`, `--redis-password`, TLS files, `--prefix`, …
    #[command(flatten)]
    redis: RedisArgs,
    /// Seconds between polls of every node.
    #[arg(long, default_value_t = 10.0)]
    poll_interval: f64,
    /// Seconds between two looks of the scheduler for due tasks.
    #[arg(long, default_value_t = 15.0)]
    scheduler_tick: f64,
    /// Days model usage rows are kept; older ones are pruned by the scheduler (0: kept
    /// forever).
    #[arg(long, env = "TURNSTONE_USAGE_RETENTION_DAYS", default_value_t = 90)]
    usage_retention_days: u32,
    /// Seconds between scans of the heartbeat keys.
    #[arg(long, default_value_t = 15.0)]
    discovery_interval: f64,
    /// Timeout of one poll request, seconds.
    #[arg(long, default_value_t = 10.0)]
    poll_timeout: f64,
    /// Most node polls in flight at once.
    #[arg(long, default_value_t = 200)]
    poll_concurrency: usize,
    /// Seconds a node may show busy workstreams without any new event before it counts as
    /// a zombie.
    #[arg(long, default_value_t = 120.0)]
    stall_after: f64,
    /// Event-loop lag (ms) above which a node counts as a zombie.
    #[arg(long, default_value_t = 2000)]
    max_event_loop_lag_ms: u64,
    /// Cluster events a dashboard may fall behind by before it is resynced with a fresh
    /// snapshot (`"resync": true`) instead of the events it missed.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    sse_queue: u32,
    /// Most node calls of one admin fan-out in flight at once (`cluster.node_fan_out_limit`).
    #[arg(long, default_value_t = 200)]
    node_fan_out_limit: usize,
    /// Timeout of one node call of an admin fan-out (watches, models), seconds.
    #[arg(long, default_value_t = 10.0)]
    fan_out_timeout: f64,
    /// Oldest heartbeat signature the console trusts, seconds (checked when it has
    /// TURNSTONE_JWT_SECRET).
    #[arg(long, env = "TURNSTONE_HEARTBEAT_MAX_AGE", default_value_t = 120.0)]
    heartbeat_max_age: f64,
    /// Comma-separated CIDRs, addresses and host names node URLs must name; a heartbeat
    /// with any other URL gets no credentials (not polled, not proxied to).
    #[arg(long, env = "TURNSTONE_NODE_URL_ALLOW")]
    node_url_allow: Option<String>,
    /// `--db-backend` (`sqlite`, default, or `postgresql` — the nodes' database shares users,
    /// tokens and roles with them), `--db-path`, `--db-url`, `--db-pool-size`.
    #[command(flatten)]
    db: turnstone_accounts::db::DbArgs,
    /// A static token: accepted by the console (full access) and sent to the nodes.
    #[arg(long, env = "TURNSTONE_AUTH_TOKEN", hide_env_values = true)]
    auth_token: Option<String>,
    /// `--config` (its `[console]` table), `--log-level`, `--log-format`, `--drain-timeout`,
    /// `--check-config`.
    #[command(flatten)]
    service: turnstone_runtime::ServiceArgs,
}

fn seconds(name: &str, v: f64) -> anyhow::Result<Duration> {
    if !v.is_finite() || v <= 0.0 {
        anyhow::bail!("--{name} must be a positive number of seconds (got {v})");
    }
    Ok(Duration::from_secs_f64(v))
}

/// Everything a start needs, checked without connecting anywhere.
struct Prepared {
    options: Options,
    bind: SocketAddr,
    store: turnstone_store::StoreConfig,
}

fn prepare(settings: &Settings<Args>) -> anyhow::Result<Prepared> {
    let args = &settings.args;
    let env = AuthEnv {
        auth_enabled: std::env::var("TURNSTONE_AUTH_ENABLED").ok(),
        auth_token: args.auth_token.clone(),
        jwt_secret: settings.secret("TURNSTONE_JWT_SECRET"),
    };
    let auth_config = AuthConfig::default();
    let auth = Authenticator::from_config(&auth_config, &env, AUDIENCE_CONSOLE)?;
    check_bind_policy(auth.is_enabled(), args.host).map_err(anyhow::Error::msg)?;
    let secret = env
        .jwt_secret
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(JwtSecret::new);
    if auth.is_enabled() && secret.is_none() && args.auth_token.is_none() {
        anyhow::bail!(
            "set TURNSTONE_JWT_SECRET (the secret the nodes share) or --auth-token \
             (a token the nodes accept): the console needs one to sign in users and to poll nodes"
        );
    }
    let credentials = NodeCredentials::new(secret, args.auth_token.clone());
    let store = args.db.store_config().map_err(anyhow::Error::msg)?;
    let redis = args.redis.settings();
    redis.validate()?;
    let config = ConsoleConfig {
        prefix: args.redis.prefix.clone(),
        poll_interval: seconds("poll-interval", args.poll_interval)?,
        scheduler_tick: seconds("scheduler-tick", args.scheduler_tick)?,
        usage_retention_days: args.usage_retention_days,
        discovery_interval: seconds("discovery-interval", args.discovery_interval)?,
        poll_timeout: seconds("poll-timeout", args.poll_timeout)?,
        poll_concurrency: args.poll_concurrency.max(1),
        stall_after: seconds("stall-after", args.stall_after)?,
        max_event_loop_lag: Duration::from_millis(args.max_event_loop_lag_ms),
        node_fan_out_limit: args.node_fan_out_limit.max(1),
        sse_queue: args.sse_queue as usize,
        fan_out_timeout: seconds("fan-out-timeout", args.fan_out_timeout)?,
        heartbeat_max_age: seconds("heartbeat-max-age", args.heartbeat_max_age)?,
        node_url_allow: args
            .node_url_allow
            .as_deref()
            .map(turnstone_console::trust::NodeUrlAllow::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        ..ConsoleConfig::default()
    };
    Ok(Prepared {
        options: Options {
            config,
            redis,
            auth,
            credentials,
            store: None,
        },
        bind: SocketAddr::new(args.host, args.port),
        store,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings =
        Settings::<Args>::load(&SPEC).unwrap_or_else(|e| exit_config_error(SPEC.binary, &e));
    let mut prepared = prepare(&settings).unwrap_or_else(|e| exit_config_error(SPEC.binary, &e));
    if settings.check {
        settings.print_check(&[
            ("redis", prepared.options.redis.display()),
            ("storage", settings.args.db.display()),
            (
                "auth_enabled",
                prepared.options.auth.is_enabled().to_string(),
            ),
        ]);
        return Ok(());
    }
    let args = &settings.args;
    let _telemetry = turnstone_runtime::init_service_tracing(
        &args.service.log_level.to_lowercase(),
        args.service.log_format,
        "turnstone-console",
    )
    .map_err(anyhow::Error::msg)?;
    settings.log_warnings();
    if !prepared.options.auth.is_enabled() {
        tracing::warn!(host = %args.host, "auth is DISABLED (allowed only on a loopback bind)");
    }
    match (
        prepared.options.credentials.secret().is_some(),
        &prepared.options.config.node_url_allow,
    ) {
        (true, _) => tracing::info!(
            "node heartbeats must be signed with TURNSTONE_JWT_SECRET to get credentials"
        ),
        (false, Some(_)) => tracing::warn!(
            "no TURNSTONE_JWT_SECRET: heartbeat signatures are not checked; only --node-url-allow limits where credentials go"
        ),
        (false, None) => tracing::warn!(
            "no TURNSTONE_JWT_SECRET and no --node-url-allow: any heartbeat written to Redis decides where the console sends its token"
        ),
    }
    // Without storage the console still aggregates and proxies; users, tokens and roles are
    // then off (503) and only config tokens sign in (cluster spec §6.1).
    prepared.options.store = match turnstone_store::connect(&prepared.store).await {
        Ok(store) => {
            tracing::info!(backend = store.backend_name(), "storage open");
            Some(store)
        }
        Err(e) => {
            tracing::error!(error = %e, "storage unavailable: user administration and password login are off");
            None
        }
    };
    let listener = tokio::net::TcpListener::bind(prepared.bind).await?;
    let running = turnstone_console::start(prepared.options, listener).await?;
    println!("turnstone-console listening on {}", running.url());
    {
        use std::io::Write;
        std::io::stdout().flush()?;
    }
    // SIGTERM/SIGINT: `/ready` turns 503, cluster streams send their last event and end,
    // the collector stops.
    let stopped = running.stop_token();
    tokio::select! {
        _ = turnstone_runtime::signal_received() => {}
        _ = stopped.cancelled() => {}
    }
    running.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}
