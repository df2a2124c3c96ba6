//! The Redis settings every Redis user among the services reads (the bridge and the console):
//! one `clap` group with the configuration contract's names, its old names, and its secrets.

use std::path::PathBuf;

use turnstone_runtime::EnvAlias;

use crate::RedisSettings;

/// `--redis-*` and `--prefix`, flattened into the bridge's and the console's arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct RedisArgs {
    /// Redis URL (`redis://[user:password@]host:port/db`, `rediss://` for TLS); wins over
    /// `--redis-host`/`--redis-port`/`--redis-db`.
    #[arg(long, env = "TURNSTONE_REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,
    /// Redis host when no URL is given (old env names: `REDIS_HOST`, `TURNSTONE_REDIS_HOST`).
    #[arg(long, default_value = "localhost")]
    pub redis_host: String,
    /// Redis port when no URL is given (old env names: `REDIS_PORT`, `TURNSTONE_REDIS_PORT`).
    #[arg(long, default_value_t = 6379)]
    pub redis_port: u16,
    /// Redis database when no URL is given.
    #[arg(long, env = "TURNSTONE_REDIS_DB", default_value_t = 0)]
    pub redis_db: i64,
    /// Redis ACL user.
    #[arg(long, env = "TURNSTONE_REDIS_USERNAME")]
    pub redis_username: Option<String>,
    /// Redis password (old env name: `REDIS_PASSWORD`).
    #[arg(long, env = "TURNSTONE_REDIS_PASSWORD", hide_env_values = true)]
    pub redis_password: Option<String>,
    /// Connect to Redis over TLS (as a `rediss://` URL does).
    #[arg(long)]
    pub redis_tls: bool,
    /// PEM CA bundle that verifies Redis's certificate (default: the system roots).
    #[arg(long, env = "TURNSTONE_REDIS_TLS_CA_FILE")]
    pub redis_tls_ca: Option<PathBuf>,
    /// PEM client certificate for mutual TLS (with `--redis-tls-key`).
    #[arg(long, env = "TURNSTONE_REDIS_TLS_CERT_FILE")]
    pub redis_tls_cert: Option<PathBuf>,
    /// PEM key of the client certificate.
    #[arg(long, env = "TURNSTONE_REDIS_TLS_KEY_FILE")]
    pub redis_tls_key: Option<PathBuf>,
    /// Redis key prefix (the original hard-codes `turnstone`; old env names:
    /// `TURNSTONE_MQ_PREFIX`, `TURNSTONE_PREFIX`).
    #[arg(long, env = "TURNSTONE_REDIS_PREFIX", default_value = "turnstone")]
    pub prefix: String,
}

impl RedisArgs {
    /// The connection settings these flags name (checked by [`RedisSettings::validate`]).
    pub fn settings(&self) -> RedisSettings {
        RedisSettings {
            url: self.redis_url.clone(),
            host: self.redis_host.clone(),
            port: self.redis_port,
            username: self.redis_username.clone().filter(|u| !u.is_empty()),
            password: self.redis_password.clone().filter(|p| !p.is_empty()),
            db: self.redis_db,
            tls: self.redis_tls,
            tls_ca_file: self.redis_tls_ca.clone(),
            tls_cert_file: self.redis_tls_cert.clone(),
            tls_key_file: self.redis_tls_key.clone(),
        }
    }
}

const fn alias(old: &'static str, arg: &'static str, instead: &'static str) -> EnvAlias {
    EnvAlias { old, arg, instead }
}

/// The original's Redis environment names (bridge and console), still accepted.
pub const REDIS_ENV_ALIASES: &[EnvAlias] = &[
    alias("REDIS_HOST", "redis_host", "TURNSTONE_REDIS_URL"),
    alias("TURNSTONE_REDIS_HOST", "redis_host", "TURNSTONE_REDIS_URL"),
    alias("REDIS_PORT", "redis_port", "TURNSTONE_REDIS_URL"),
    alias("TURNSTONE_REDIS_PORT", "redis_port", "TURNSTONE_REDIS_URL"),
    alias(
        "REDIS_PASSWORD",
        "redis_password",
        "TURNSTONE_REDIS_PASSWORD",
    ),
    alias("TURNSTONE_MQ_PREFIX", "prefix", "TURNSTONE_REDIS_PREFIX"),
    alias("TURNSTONE_PREFIX", "prefix", "TURNSTONE_REDIS_PREFIX"),
];

/// The Redis secrets (each also accepted as `<NAME>_FILE`).
pub const REDIS_SECRETS: &[&str] = &["TURNSTONE_REDIS_URL", "TURNSTONE_REDIS_PASSWORD"];
