//! The command-line settings every Turnstone service shares (node, bridge, console), in one
//! `clap` group each binary flattens into its own arguments.

use std::path::PathBuf;
use std::time::Duration;

use crate::telemetry::LogFormat;

/// Flags and environment shared by `turnstone-server`, `turnstone-bridge` and
/// `turnstone-console`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServiceArgs {
    /// The config file, `config.toml` (the node reads its tables, the bridge `[bridge]`, the
    /// console `[console]`; tables of the other services are ignored).
    #[arg(long, env = "TURNSTONE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log level (error, warn, info, debug, trace, or an EnvFilter directive).
    #[arg(long, env = "TURNSTONE_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log format.
    #[arg(long, env = "TURNSTONE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Seconds work in flight may take to finish after SIGTERM/SIGINT before it is cancelled
    /// (node) or handed back (bridge).
    #[arg(long, env = "TURNSTONE_DRAIN_TIMEOUT", default_value_t = 25.0, value_parser = parse_drain_timeout)]
    pub drain_timeout: f64,
    /// Read flags, environment and config file as a start would, connect to nothing, print
    /// the effective configuration (secrets redacted) and exit: 0 when valid, 2 otherwise.
    #[arg(long)]
    pub check_config: bool,
}

impl ServiceArgs {
    /// `--drain-timeout` as a duration.
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.drain_timeout)
    }
}

fn parse_drain_timeout(raw: &str) -> Result<f64, String> {
    match raw.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a number of seconds from 0 to 86400, got '{raw}'"
        )),
    }
}
