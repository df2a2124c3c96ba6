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
}

/// [`set_parent_from_headers`] for a bare `traceparent` value (an MQ message's field).
pub fn set_parent_from_traceparent(span: &tracing::Span, traceparent: &str) {
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(traceparent.trim()) {
        headers.insert(TRACEPARENT, value);
        set_parent_from_headers(span, &headers);
    }
}
