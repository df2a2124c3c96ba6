//! Tracing initialisation: human text or JSON lines, filtered by level or `RUST_LOG`.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt;
use tracing_subscriber::prelude::*;

/// Log line format (`--log-format`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber. `level` is a default filter (`info`, `debug`, or a full
/// `EnvFilter` directive); `RUST_LOG` wins when set. Logs go to stderr so stdout stays free
/// for program output. Returns an error if a subscriber was already installed.
pub fn init_tracing(level: &str, format: LogFormat) -> Result<(), String> {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .map_err(|e| format!("invalid log level {level:?}: {e}"))?;
    let registry = tracing_subscriber::registry().with(filter);
    let result = match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_writer(std::io::stderr).with_target(true))
            .try_init(),
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    result.map_err(|e| e.to_string())
}
