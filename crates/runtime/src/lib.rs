//! # turnstone-runtime
//!
//! What every Turnstone binary shares: layered configuration ([`config`]: defaults → TOML
//! file → `TURNSTONE_*` environment → command line), tracing initialisation ([`telemetry`]:
//! text or JSON logs), graceful shutdown ([`shutdown`]), and authentication and authorisation
//! ([`auth`]: scopes, HS256 JWTs, config and API tokens, the route → scope table), and the
//! Prometheus text writer of every `/metrics` ([`metrics`]), and the memory allocator of every
//! process that links it ([`allocator`]).
//!
//! It must not know domain logic: no workstreams, tools, models, Redis or HTTP routes.

pub mod allocator;
pub mod auth;
pub mod config;
pub mod metrics;
pub mod service;
pub mod settings;
pub mod shutdown;
pub mod telemetry;

pub use config::{ConfigError, ConfigLoader};
pub use service::ServiceArgs;
pub use settings::{EnvAlias, ServiceSpec, Settings, TableSpec, exit_config_error};
pub use shutdown::{
    DEFAULT_DRAIN_TIMEOUT, DRAIN_RETRY_AFTER_SECS, Drain, Shutdown, signal_received,
};
pub use telemetry::{LogFormat, OtlpSettings, TelemetryGuard, init_service_tracing, init_tracing};
pub use turnstone_http::trace_context;
