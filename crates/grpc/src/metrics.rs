//! Call metrics of a gRPC server: how many calls ended with which status, and how long they
//! took (a stream: until it ended), by method.
//!
//! Both labels come from closed sets, so no caller can grow the series: the method is one of
//! the contract's RPCs ([`CONTRACT_METHODS`], generated from the `.proto` files) or of the
//! standard health and reflection services ([`STANDARD_METHODS`]), anything else
//! [`OTHER_METHOD`]; the code is the name of one of the 17 gRPC status codes ([`CODES`]).
//!
//! [`observe`] is the layer that records each call of a router into [`GrpcCalls`]: a
//! trailers-only response (an error, or a refusal before the handler) is recorded at once; any
//! other when its body sends the trailers, or as `CANCELLED` when the body is dropped before
//! (the client went away).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use http_body::Frame;
use parking_lot::Mutex;
use tokio::time::Instant;
use turnstone_runtime::metrics::{Exposition, Histogram};

include!(concat!(env!("OUT_DIR"), "/turnstone_v1_methods.rs"));

/// The methods of the standard services served beside the contract.
pub const STANDARD_METHODS: &[&str] = &[
    "grpc.health.v1.Health/Check",
    "grpc.health.v1.Health/Watch",
    "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// The method label of a path that is no method of [`CONTRACT_METHODS`] or
/// [`STANDARD_METHODS`].
pub const OTHER_METHOD: &str = "__other__";

/// The gRPC status codes by number, as their canonical names.
pub const CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// Upper bounds of the call duration histogram (seconds), `+Inf` implied: the HTTP
/// latency buckets, then the lengths of streams.
pub const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 300.0, 3600.0,
];

/// The method label of a request path (`/package.Service/Method`).
pub fn method_label(path: &str) -> &'static str {
    let name = path.strip_prefix('/').unwrap_or(path);
    CONTRACT_METHODS
        .iter()
        .chain(STANDARD_METHODS)
        .find(|m| **m == name)
        .copied()
        .unwrap_or(OTHER_METHOD)
}

/// The code label of a `grpc-status` value: its canonical name; a missing or unreadable one
/// is `UNKNOWN` (gRPC's rule for a call that ended without a status).
pub fn code_label(status: Option<&HeaderValue>) -> &'static str {
    status
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .and_then(|n| CODES.get(n))
        .copied()
        .unwrap_or("UNKNOWN")
}

#[derive(Debug, Clone)]
struct Series {
    codes: BTreeMap<&'static str, u64>,
    duration: Histogram,
}

/// The calls a server finished, by method and code. Keys are `&'static str` from the closed
/// sets above, so the series are bounded by construction.
#[derive(Debug)]
pub struct GrpcCalls {
    /// Metric name prefix (`turnstone_grpc`, `turnstone_console_grpc`).
    prefix: &'static str,
    series: Mutex<BTreeMap<&'static str, Series>>,
}

impl GrpcCalls {
    pub fn new(prefix: &'static str) -> Self {
        Self {
            prefix,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records one finished call.
    pub fn record(&self, method: &'static str, code: &'static str, elapsed: Duration) {
        let mut series = self.series.lock();
        let s = series.entry(method).or_insert_with(|| Series {
            codes: BTreeMap::new(),
            duration: Histogram::new(DURATION_BUCKETS),
        });
        *s.codes.entry(code).or_insert(0) += 1;
        s.duration.observe(elapsed.as_secs_f64());
    }

    /// Finished calls of `method` that ended with `code`.
    pub fn count(&self, method: &str, code: &str) -> u64 {
        self.series
            .lock()
            .get(method)
            .and_then(|s| s.codes.get(code))
            .copied()
            .unwrap_or(0)
    }

    /// Writes `<prefix>_requests_total{method,code}` and
    /// `<prefix>_request_duration_seconds{method}` (both families even before any call).
    pub fn render(&self, x: &mut Exposition) {
        let series = self.series.lock().clone();
        let total = format!("{}_requests_total", self.prefix);
        x.family(
            &total,
            "counter",
            "Finished gRPC calls by method and status code.",
        );
        for (method, s) in &series {
            for (code, n) in &s.codes {
                x.sample(&total, &[("method", method), ("code", code)], n);
            }
        }
        let duration = format!("{}_request_duration_seconds", self.prefix);
        x.family(
            &duration,
            "histogram",
            "gRPC call duration (a stream: until it ended).",
        );
        for (method, s) in &series {
            x.histogram(&duration, &[("method", method)], &s.duration);
        }
    }
}

/// `router` with every call recorded into `calls`.
pub fn observe(router: Router, calls: Arc<GrpcCalls>) -> Router {
    router.layer(axum::middleware::from_fn_with_state(calls, record_call))
}

async fn record_call(State(calls): State<Arc<GrpcCalls>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(req.uri().path());
    let response = next.run(req).await;
    if let Some(status) = response.headers().get("grpc-status") {
        // Trailers-only: the call ended with the response head.
        calls.record(method, code_label(Some(status)), started.elapsed());
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = Observed {
        inner: body,
        call: Some(Call {
            calls,
            method,
            started,
        }),
    };
    Response::from_parts(parts, Body::new(body))
}

struct Call {
    calls: Arc<GrpcCalls>,
    method: &'static str,
    started: Instant,
}

impl Call {
    fn finish(self, code: &'static str) {
        self.calls.record(self.method, code, self.started.elapsed());
    }
}

/// A response body that records its call when the trailers pass (or when it is dropped
/// before they did).
struct Observed {
    inner: Body,
    call: Option<Call>,
}

impl Observed {
    fn finish(&mut self, code: &'static str) {
        if let Some(call) = self.call.take() {
            call.finish(code);
        }
    }
}

impl HttpBody for Observed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    this.finish(code_label(trailers.get("grpc-status")));
                }
            }
            Poll::Ready(Some(Err(_)) | None) => this.finish("UNKNOWN"),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        // Dropped before the trailers: the client cancelled or the connection went away.
        self.finish("CANCELLED");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_closed_sets() {
        assert_eq!(
            method_label("/turnstone.v1.NodeService/Send"),
            "turnstone.v1.NodeService/Send"
        );
        assert_eq!(
            method_label("/turnstone.v1.ConsoleService/WatchCluster"),
            "turnstone.v1.ConsoleService/WatchCluster"
        );
        assert_eq!(
            method_label("/grpc.health.v1.Health/Check"),
            "grpc.health.v1.Health/Check"
        );
        assert_eq!(method_label("/turnstone.v1.NodeService/Nope"), OTHER_METHOD);
        assert_eq!(method_label("/made/up/path"), OTHER_METHOD);
        assert_eq!(code_label(Some(&HeaderValue::from_static("0"))), "OK");
        assert_eq!(
            code_label(Some(&HeaderValue::from_static("8"))),
            "RESOURCE_EXHAUSTED"
        );
        assert_eq!(
            code_label(Some(&HeaderValue::from_static("16"))),
            "UNAUTHENTICATED"
        );
        assert_eq!(code_label(Some(&HeaderValue::from_static("17"))), "UNKNOWN");
        assert_eq!(code_label(Some(&HeaderValue::from_static("x"))), "UNKNOWN");
        assert_eq!(code_label(None), "UNKNOWN");
        for (n, name) in CODES.iter().enumerate() {
            assert_eq!(
                *name,
                format!("{:?}", tonic::Code::from_i32(n as i32))
                    .chars()
                    .fold(String::new(), |mut s, c| {
                        if c.is_uppercase() && !s.is_empty() {
                            s.push('_');
                        }
                        s.push(c.to_ascii_uppercase());
                        s
                    }),
                "code {n}"
            );
        }
    }

    #[test]
    fn calls_render_as_counters_and_histograms() {
        let calls = GrpcCalls::new("turnstone_grpc");
        calls.record(
            "turnstone.v1.NodeService/Send",
            "OK",
            Duration::from_millis(3),
        );
        calls.record(
            "turnstone.v1.NodeService/Send",
            "OK",
            Duration::from_millis(7),
        );
        calls.record(
            "turnstone.v1.NodeService/Send",
            "UNAVAILABLE",
            Duration::ZERO,
        );
        assert_eq!(calls.count("turnstone.v1.NodeService/Send", "OK"), 2);
        let mut x = Exposition::default();
        calls.render(&mut x);
        let text = x.finish();
        assert!(
            text.contains(
                "turnstone_grpc_requests_total{method=\"turnstone.v1.NodeService/Send\",code=\"OK\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "turnstone_grpc_request_duration_seconds_count{method=\"turnstone.v1.NodeService/Send\"} 3"
            ),
            "{text}"
        );
    }
}
