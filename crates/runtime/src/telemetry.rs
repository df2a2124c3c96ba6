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
    init(level, format, None)
}

/// Where spans are exported: set by the standard OpenTelemetry environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is), else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`.
    pub endpoint: String,
    /// `OTEL_SERVICE_NAME`, else the program's own name.
    pub service_name: String,
}

impl OtlpSettings {
    /// The settings the environment asks for; `None` when no OTLP endpoint is set (export
    /// off, the default).
    pub fn from_env(default_service: &str) -> Option<Self> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| {
            var("OTEL_EXPORTER_OTLP_ENDPOINT")
                .map(|base| format!("{}/v1/traces", base.trim().trim_end_matches('/')))
        })?;
        Some(Self {
            endpoint: endpoint.trim().to_string(),
            service_name: var("OTEL_SERVICE_NAME").unwrap_or_else(|| default_service.to_string()),
        })
    }
}

/// Keeps the OpenTelemetry exporter alive; dropping it flushes the spans still batched.
#[must_use = "dropping the guard stops the export"]
#[derive(Default)]
pub struct TelemetryGuard {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl std::fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryGuard")
            .field("exporting", &self.provider.is_some())
            .finish()
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("OpenTelemetry shutdown: {e}");
        }
    }
}

/// [`init_tracing`] for a service: spans are also exported over OTLP (HTTP, protobuf) when
/// the OpenTelemetry environment names an endpoint ([`OtlpSettings::from_env`]); `service`
/// is the default `service.name`. Keep the guard until exit.
pub fn init_service_tracing(
    level: &str,
    format: LogFormat,
    service: &str,
) -> Result<TelemetryGuard, String> {
    let Some(settings) = OtlpSettings::from_env(service) else {
        init(level, format, None)?;
        return Ok(TelemetryGuard::default());
    };
    let provider = otlp_provider(&settings)?;
    init(level, format, Some(&provider))?;
    tracing::info!(endpoint = %settings.endpoint, service = %settings.service_name, "exporting spans over OTLP");
    Ok(TelemetryGuard {
        provider: Some(provider),
    })
}

fn otlp_provider(
    settings: &OtlpSettings,
) -> Result<opentelemetry_sdk::trace::SdkTracerProvider, String> {
    use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
    let endpoint = settings.endpoint.clone();
    // The blocking HTTP client must not be built (or dropped) on an async runtime's thread.
    let exporter = std::thread::spawn(move || {
        let http = turnstone_http::blocking_client_builder()
            .build()
            .map_err(|e| format!("HTTP client: {}", turnstone_http::describe(&e)))?;
        opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(http)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| e.to_string())
    })
    .join()
    .map_err(|_| "OTLP exporter set-up panicked".to_string())?
    .map_err(|e| format!("OTLP exporter: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(settings.service_name.clone())
        .build();
    Ok(opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

fn init(
    level: &str,
    format: LogFormat,
    otel: Option<&opentelemetry_sdk::trace::SdkTracerProvider>,
) -> Result<(), String> {
    use opentelemetry::trace::TracerProvider as _;
    // W3C `traceparent` in and out (`turnstone_http::trace_context`).
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .map_err(|e| format!("invalid log level {level:?}: {e}"))?;
    // Exported spans have their own filter (`TURNSTONE_OTEL_FILTER`, default `info`): a
    // node logging only warnings still exports its request and turn spans.
    let otel_filter = match std::env::var("TURNSTONE_OTEL_FILTER") {
        Ok(f) if !f.trim().is_empty() => EnvFilter::try_new(f.trim())
            .map_err(|e| format!("invalid TURNSTONE_OTEL_FILTER: {e}"))?,
        _ => EnvFilter::new("info"),
    };
    let otel_layer = otel.map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("turnstone"))
            .with_filter(otel_filter)
    });
    let registry = tracing_subscriber::registry().with(otel_layer);
    let result = match format {
        LogFormat::Text => registry
            .with(
                fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_target(true)
                    .with_filter(filter),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .with_current_span(true)
                    // Ancestors too: a turn's lines carry its request's `trace_id`.
                    .with_span_list(true)
                    .with_writer(std::io::stderr)
                    .with_filter(filter),
            )
            .try_init(),
    };
    result.map_err(|e| e.to_string())
}
