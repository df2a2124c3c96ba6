//! Bridge settings: the original's flags and environment (cluster spec §3.1) plus ours.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use turnstone_queue::{REDIS_ENV_ALIASES, REDIS_SECRETS, RedisArgs, RedisSettings};
use turnstone_runtime::ServiceSpec;

/// The bridge's part of the configuration contract beyond its flags: old names, secrets,
/// its `[bridge]` table.
pub const SPEC: ServiceSpec = ServiceSpec {
    binary: "turnstone-bridge",
    table: Some("bridge"),
    own_keys: &[],
    home_config: None,
    aliases: &[REDIS_ENV_ALIASES],
    secrets: &[
        &["TURNSTONE_JWT_SECRET", "TURNSTONE_AUTH_TOKEN"],
        REDIS_SECRETS,
    ],
    extra_env: &[],
    tables: &[],
};

/// `turnstone-bridge` command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "turnstone-bridge",
    version,
    about = "Moves messages between Redis queues and one Turnstone node, losing and duplicating nothing"
)]
pub struct Args {
    /// The node this bridge serves.
    #[arg(
        long,
        env = "TURNSTONE_SERVER_URL",
        default_value = "http://localhost:8080"
    )]
    pub server_url: String,
    /// `--redis-url`, `--redis-username`, `--redis-password`, TLS files, `--prefix`, …
    #[command(flatten)]
    pub redis: RedisArgs,
    /// Accepted for compatibility: approvals time out on the node (its
    /// `--approval-timeout`), which records the verdict.
    #[arg(long, default_value_t = 3600.0)]
    pub approval_timeout: f64,
    /// The node's id; empty = the id the node's `/health` reports (the node's own default is
    /// its host name, so a sidecar bridge gets the pod name either way).
    #[arg(long, env = "TURNSTONE_NODE_ID", default_value = "")]
    pub node_id: String,
    /// Heartbeat TTL in seconds (refreshed every ttl/2).
    #[arg(long, default_value_t = 60)]
    pub heartbeat_ttl: u64,
    /// Static bearer token for the node; without it the bridge mints HS256 JWTs from
    /// `TURNSTONE_JWT_SECRET`. Neither: only a loopback node without auth works.
    #[arg(long, env = "TURNSTONE_AUTH_TOKEN", hide_env_values = true)]
    pub auth_token: Option<String>,
    /// `--config` (its `[bridge]` table), `--log-level`, `--log-format`, `--drain-timeout`,
    /// `--check-config`.
    #[command(flatten)]
    pub service: turnstone_runtime::ServiceArgs,
    /// Ownership lease TTL in seconds (ours; refreshed every ttl/3 while the node lives).
    #[arg(long, default_value_t = 120)]
    pub lease_ttl: u64,
    /// How often the node's `/health` is probed, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub probe_interval_ms: u64,
    /// Approximate cap of each per-workstream Redis Stream.
    #[arg(long, default_value_t = 10_000)]
    pub stream_maxlen: u64,
    /// Most entries kept in the dead-letter list (`{prefix}:dead`): the oldest are trimmed
    /// (and counted in `turnstone_bridge_dead_letters_trimmed_total`) so that a flood of bad
    /// messages cannot grow Redis without bound.
    #[arg(long, env = "TURNSTONE_DEAD_LETTER_MAX", default_value_t = 10_000)]
    pub dead_letter_max: u64,
    /// Seconds a per-workstream stream lives after its last event.
    #[arg(long, default_value_t = 86_400)]
    pub stream_ttl: u64,
    /// Messages handled at once (ordered per workstream).
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Serve `/metrics` and `/health` of the bridge on this address (off when absent).
    #[arg(long, env = "TURNSTONE_BRIDGE_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Relay a producer's `auto_approve` / `auto_approve_tools` to the node (switching its
    /// approvals off). Off by default: such messages are refused with an error event and a
    /// dead letter, and the bridge's token does not carry `tools.approve`.
    #[arg(
        long,
        env = "TURNSTONE_BRIDGE_ALLOW_PRODUCER_AUTO_APPROVE",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub allow_producer_auto_approve: bool,
    /// How often a `send` the node answers `busy` (its workstream's queue is full, or an
    /// older node) is tried again, with backoff, before it is dead-lettered.
    #[arg(long, env = "TURNSTONE_BUSY_RETRIES", default_value_t = 40)]
    pub busy_retries: u32,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    pub server_url: String,
    pub redis: RedisSettings,
    pub node_id: String,
    pub prefix: String,
    pub heartbeat_ttl: Duration,
    pub lease_ttl: Duration,
    pub probe_interval: Duration,
    pub stream_maxlen: u64,
    /// Most entries kept in the dead-letter list (`--dead-letter-max`).
    pub dead_letter_max: u64,
    pub stream_ttl: Duration,
    pub concurrency: usize,
    /// How long a blocking pop waits before it re-checks for shutdown.
    pub pop_timeout: Duration,
    pub auth: NodeAuth,
    pub metrics_addr: Option<SocketAddr>,
    /// Relay producers' `auto_approve` / `auto_approve_tools` (`--allow-producer-auto-approve`).
    pub allow_producer_auto_approve: bool,
    /// The cluster's JWT secret (`TURNSTONE_JWT_SECRET`), which signs the heartbeats so the
    /// console trusts their `server_url`; unsigned without it.
    pub heartbeat_secret: Option<turnstone_runtime::auth::JwtSecret>,
    /// Tries of a `send` answered `busy` before it is dead-lettered (reason `busy`).
    pub busy_retries: u32,
    /// Longest pause between two of those tries (the backoff starts at 100 ms).
    pub busy_retry_max_delay: Duration,
}

/// How the bridge authenticates to its node.
#[derive(Clone)]
pub enum NodeAuth {
    None,
    Token(String),
    Jwt(String),
}

impl std::fmt::Debug for NodeAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "None",
            Self::Token(_) => "Token(<redacted>)",
            Self::Jwt(_) => "Jwt(<redacted>)",
        })
    }
}

impl BridgeConfig {
    /// Settings for a bridge of the node at `server_url` (tests and embedding).
    pub fn new(server_url: impl Into<String>, redis: RedisSettings) -> Self {
        Self {
            server_url: server_url.into().trim_end_matches('/').to_string(),
            redis,
            node_id: String::new(),
            prefix: "turnstone".into(),
            heartbeat_ttl: Duration::from_secs(60),
            lease_ttl: Duration::from_secs(120),
            probe_interval: Duration::from_secs(2),
            stream_maxlen: 10_000,
            dead_letter_max: 10_000,
            stream_ttl: Duration::from_secs(86_400),
            concurrency: 64,
            pop_timeout: Duration::from_secs(5),
            auth: NodeAuth::None,
            metrics_addr: None,
            allow_producer_auto_approve: false,
            heartbeat_secret: None,
            busy_retries: 40,
            busy_retry_max_delay: Duration::from_secs(2),
        }
    }

    /// From the command line and environment (`jwt_secret`: `TURNSTONE_JWT_SECRET` or its
    /// `_FILE`); names the bad flag on error. Connects to nothing.
    pub fn from_args(args: &Args, jwt_secret: Option<String>) -> Result<Self, String> {
        if args.heartbeat_ttl < 2 {
            return Err("--heartbeat-ttl must be at least 2 seconds".into());
        }
        if args.lease_ttl < 3 {
            return Err("--lease-ttl must be at least 3 seconds".into());
        }
        if args.concurrency == 0 {
            return Err("--concurrency must be at least 1".into());
        }
        if args.redis.prefix.is_empty() || args.redis.prefix.contains(char::is_whitespace) {
            return Err("--prefix must be a non-empty word".into());
        }
        if !(args.server_url.starts_with("http://") || args.server_url.starts_with("https://")) {
            return Err(format!(
                "--server-url must be an http(s) URL, got '{}'",
                args.server_url
            ));
        }
        let redis = args.redis.settings();
        redis.validate().map_err(|e| e.to_string())?;
        let auth = match (&args.auth_token, &jwt_secret) {
            (Some(t), _) if !t.is_empty() => NodeAuth::Token(t.clone()),
            (_, Some(s)) => NodeAuth::Jwt(s.clone()),
            _ => NodeAuth::None,
        };
        let mut c = Self::new(args.server_url.clone(), redis);
        c.node_id = args.node_id.trim().to_string();
        c.prefix = args.redis.prefix.clone();
        c.heartbeat_ttl = Duration::from_secs(args.heartbeat_ttl);
        c.lease_ttl = Duration::from_secs(args.lease_ttl);
        c.probe_interval = Duration::from_millis(args.probe_interval_ms.max(50));
        c.stream_maxlen = args.stream_maxlen.max(1);
        c.dead_letter_max = args.dead_letter_max.max(1);
        c.stream_ttl = Duration::from_secs(args.stream_ttl.max(1));
        c.concurrency = args.concurrency;
        c.auth = auth;
        c.metrics_addr = args.metrics_addr;
        c.allow_producer_auto_approve = args.allow_producer_auto_approve;
        c.heartbeat_secret = jwt_secret.map(turnstone_runtime::auth::JwtSecret::new);
        c.busy_retries = args.busy_retries;
        Ok(c)
    }
}
