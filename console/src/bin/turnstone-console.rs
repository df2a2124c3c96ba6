//! `turnstone-console`: the cluster console (collector, cluster API and SSE, reverse proxy to
//! node UIs, dashboard). See `docs/console.md`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::Parser;
use turnstone_console::{ConsoleConfig, NodeCredentials, Options};
use turnstone_runtime::auth::{
    AUDIENCE_CONSOLE, AuthConfig, AuthEnv, Authenticator, ConfigToken, JwtSecret, TokenRole,
    check_bind_policy,
};
use turnstone_runtime::{LogFormat, Shutdown};

#[derive(Debug, Parser)]
#[command(name = "turnstone-console", about = "The Turnstone cluster console")]
struct Args {
    /// Address to bind.
    #[arg(long, env = "TURNSTONE_CONSOLE_HOST", default_value = "0.0.0.0")]
    host: IpAddr,
    /// Port to bind (0 picks a free one).
    #[arg(long, env = "TURNSTONE_CONSOLE_PORT", default_value_t = 8090)]
    port: u16,
    /// Redis URL (`redis://[:password@]host:port/db`); overrides the --redis-* flags.
    #[arg(long, env = "TURNSTONE_REDIS_URL", hide_env_values = true)]
    redis_url: Option<String>,
    #[arg(long, env = "TURNSTONE_REDIS_HOST", default_value = "localhost")]
    redis_host: String,
    #[arg(long, env = "TURNSTONE_REDIS_PORT", default_value_t = 6379)]
    redis_port: u16,
    #[arg(long, env = "TURNSTONE_REDIS_PASSWORD", hide_env_values = true)]
    redis_password: Option<String>,
    #[arg(long, env = "TURNSTONE_REDIS_DB", default_value_t = 0)]
    redis_db: u32,
    /// Redis key prefix.
    #[arg(long, env = "TURNSTONE_PREFIX", default_value = "turnstone")]
    prefix: String,
    /// Seconds between polls of every node.
    #[arg(long, default_value_t = 10.0)]
    poll_interval: f64,
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
    /// A static token: accepted by the console (full access) and sent to the nodes.
    #[arg(long, env = "TURNSTONE_AUTH_TOKEN", hide_env_values = true)]
    auth_token: Option<String>,
    #[arg(long, env = "TURNSTONE_LOG_LEVEL", default_value = "info")]
    log_level: String,
    #[arg(long, env = "TURNSTONE_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

fn seconds(name: &str, v: f64) -> anyhow::Result<Duration> {
    if !v.is_finite() || v <= 0.0 {
        anyhow::bail!("--{name} must be a positive number of seconds (got {v})");
    }
    Ok(Duration::from_secs_f64(v))
}

fn redis_url(args: &Args) -> String {
    if let Some(url) = &args.redis_url {
        return url.clone();
    }
    let auth = args
        .redis_password
        .as_deref()
        .map(|p| format!(":{p}@"))
        .unwrap_or_default();
    format!(
        "redis://{auth}{}:{}/{}",
        args.redis_host, args.redis_port, args.redis_db
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _telemetry = turnstone_runtime::init_service_tracing(
        &args.log_level.to_lowercase(),
        args.log_format,
        "turnstone-console",
    )
    .map_err(anyhow::Error::msg)?;

    let env = AuthEnv::from_process();
    let mut auth_config = AuthConfig::default();
    if let Some(t) = args.auth_token.as_deref().filter(|t| !t.trim().is_empty())
        && env.auth_token.as_deref() != Some(t)
    {
        auth_config
            .tokens
            .push(ConfigToken::new(t.trim(), TokenRole::Full));
    }
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
    if !auth.is_enabled() {
        tracing::warn!(host = %args.host, "auth is DISABLED (allowed only on a loopback bind)");
    }
    let credentials = NodeCredentials::new(secret, args.auth_token.clone());

    let config = ConsoleConfig {
        prefix: args.prefix.clone(),
        poll_interval: seconds("poll-interval", args.poll_interval)?,
        discovery_interval: seconds("discovery-interval", args.discovery_interval)?,
        poll_timeout: seconds("poll-timeout", args.poll_timeout)?,
        poll_concurrency: args.poll_concurrency.max(1),
        stall_after: seconds("stall-after", args.stall_after)?,
        max_event_loop_lag: Duration::from_millis(args.max_event_loop_lag_ms),
        node_fan_out_limit: args.node_fan_out_limit.max(1),
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
    match (credentials.secret().is_some(), &config.node_url_allow) {
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
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.host, args.port)).await?;
    let running = turnstone_console::start(
        Options {
            config,
            redis_url: redis_url(&args),
            auth,
            credentials,
        },
        listener,
    )
    .await?;
    println!("turnstone-console listening on {}", running.url());
    {
        use std::io::Write;
        std::io::stdout().flush()?;
    }
    let shutdown = Shutdown::new();
    tokio::spawn(shutdown.clone().trigger_on_signals());
    let stopped = running.stop_token();
    tokio::select! {
        _ = shutdown.triggered() => {}
        _ = stopped.cancelled() => {}
    }
    running.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}
