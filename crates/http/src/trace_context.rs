//! W3C trace context (`traceparent`, `tracestate`) on HTTP headers, so one OpenTelemetry
//! trace follows a message across the bridge, the console, the node and its provider.
//!
//! The format is the globally installed text-map propagator's (`turnstone-runtime`
//! installs the W3C one); without an OpenTelemetry layer the current span has no context and
//! nothing is injected.

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt as _;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The W3C header (and MQ field) naming the parent span.
pub const TRACEPARENT: &str = "traceparent";

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// The current span's context as headers for an outbound request (empty when there is
/// none to propagate).
pub fn current_headers() -> HeaderMap {
    let cx = tracing::Span::current().context();
    let mut headers = HeaderMap::new();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut HeaderInjector(&mut headers));
    });
    headers
}

/// The current span's `traceparent`, to carry where no headers travel (a queued send).
pub fn current_traceparent() -> Option<String> {
    current_headers()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Makes `span` a child of the remote span named in `headers`. Absent or malformed
/// context leaves `span` where it is.
pub fn set_parent_from_headers(span: &tracing::Span, headers: &HeaderMap) {
    let cx =
        opentelemetry::global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers)));
    if cx.span().span_context().is_valid() {
        // Fails only when `span` is disabled: then there is nothing to parent.
        let _ = span.set_parent(cx);
    }
    record_trace_id(span);
}

/// Records `span`'s OpenTelemetry trace id in its `trace_id` field (declared
/// `trace_id = tracing::field::Empty`), so that log lines in it name the trace; nothing
/// without an OpenTelemetry layer (no trace) or without the field.
pub fn record_trace_id(span: &tracing::Span) {
    let cx = span.context();
    let span_context = cx.span().span_context().clone();
    if span_context.is_valid() {
        span.record("trace_id", tracing::field::display(span_context.trace_id()));
    }
}

/// [`set_parent_from_headers`] for a bare `traceparent` value (an MQ message's field).
pub fn set_parent_from_traceparent(span: &tracing::Span, traceparent: &str) {
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(traceparent.trim()) {
        headers.insert(TRACEPARENT, value);
        set_parent_from_headers(span, &headers);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn log_lines_in_a_continued_trace_name_its_trace_id() {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let logs = Buffer::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(move || writer.clone()),
            );
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", trace_id = tracing::field::Empty);
            set_parent_from_traceparent(
                &span,
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            );
            span.in_scope(|| tracing::info!("handled"));
            let own = tracing::info_span!("inbound", trace_id = tracing::field::Empty);
            record_trace_id(&own);
            own.in_scope(|| tracing::info!("fresh trace"));
        });
        let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].contains("trace_id=4bf92f3577b34da6a3ce929d0e0e4736"),
            "the caller's trace id is on the line: {text}"
        );
        assert!(
            lines[1].contains("trace_id=") && !lines[1].contains("4bf92f3577b34da6"),
            "a span without a caller names its own new trace: {text}"
        );
    }
}
