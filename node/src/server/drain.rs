//! The node's graceful drain (SIGTERM/SIGINT) and its readiness probe.
//!
//! [`Node::drain`] runs the phases of [`turnstone_runtime::Drain`]: `GET /ready` turns 503 at
//! once and new turns are refused with 503 + `Retry-After` ([`refuse_new_turns`]); turns in
//! flight finish up to the drain timeout and are then cancelled (the engine closes a
//! cancelled turn into a provider-valid history); finally every open event stream sends its
//! final `stream_closing` event and ends, so clients reconnect with `Last-Event-ID`. The caller
//! then stops the listener and flushes the store writer.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;
use turnstone_runtime::DRAIN_RETRY_AFTER_SECS;

use super::state::Node;

/// How often the drain looks whether turns are still running.
const POLL: Duration = Duration::from_millis(50);
/// How long cancelled turns get to close their history after the drain timeout.
const CANCEL_GRACE: Duration = Duration::from_secs(5);
/// How long `/ready` waits for the store.
const STORE_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What a drain did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Turns still running when the drain began.
    pub in_flight: usize,
    /// Turns cancelled because the drain timeout ran out.
    pub cancelled: usize,
}

impl Node {
    /// Drains the node: see the module docs. Returns once every event stream was told to end.
    pub async fn drain(&self, timeout: Duration) -> DrainReport {
        self.drain.begin();
        let in_flight = self.busy_workstreams().len();
        tracing::info!(
            in_flight,
            timeout_secs = timeout.as_secs_f64(),
            "draining: not ready, new turns refused"
        );
        let deadline = Instant::now() + timeout;
        let mut cancelled = 0;
        if !self.wait_idle(deadline).await {
            let busy = self.busy_workstreams();
            cancelled = busy.iter().filter(|ws| ws.cancel()).count();
            tracing::warn!(
                cancelled,
                "drain timeout reached: turns in flight cancelled"
            );
            if !self.wait_idle(Instant::now() + CANCEL_GRACE).await {
                tracing::warn!("cancelled turns did not end in time");
            }
        }
        self.drain.close_streams();
        DrainReport {
            in_flight,
            cancelled,
        }
    }

    fn busy_workstreams(&self) -> Vec<turnstone_engine::WorkstreamHandle> {
        self.manager
            .list()
            .into_iter()
            .filter(|ws| ws.is_busy())
            .collect()
    }

    /// Waits until no turn runs; `false` when `deadline` came first.
    async fn wait_idle(&self, deadline: Instant) -> bool {
        loop {
            if self.busy_workstreams().is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL.min(deadline - Instant::now())).await;
        }
    }
}

/// The final event of every event stream when the node drains (ignored by clients that do
/// not know it; the stream then ends and they reconnect with `Last-Event-ID`).
pub fn stream_closing_event(node: &Node) -> Value {
    json!({
        "type": "stream_closing",
        "reason": "node_shutdown",
        "node_id": node.options.node_id,
        "retry_after": DRAIN_RETRY_AFTER_SECS,
    })
}

/// Routes that start a turn or a workstream: refused while draining.
pub(crate) fn starts_work(method: &Method, path: &str) -> bool {
    method == Method::POST
        && matches!(
            path,
            "/v1/api/send" | "/v1/api/plan" | "/v1/api/command" | "/v1/api/workstreams/new"
        )
}

/// 503 with `Retry-After`: what a request gets that a draining service no longer takes.
pub fn draining_response(message: &str) -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({"error": message})),
    )
        .into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(DRAIN_RETRY_AFTER_SECS),
    );
    response
}

/// Middleware: while draining, new turns and new workstreams are refused (503,
/// `Retry-After`); approvals, cancels and reads go on, so turns in flight can finish.
pub async fn refuse_new_turns(State(node): State<Arc<Node>>, req: Request, next: Next) -> Response {
    if node.drain.is_draining() && starts_work(req.method(), req.uri().path()) {
        return draining_response("node is shutting down; retry on another node or later");
    }
    next.run(req).await
}

/// `GET /ready`: 200 while the node takes work; 503 while it drains or its store does not
/// answer. `GET /health` stays the liveness probe.
pub async fn ready(State(node): State<Arc<Node>>) -> Response {
    if node.drain.is_draining() {
        return draining_response("draining");
    }
    if let Some(p) = &node.persistence {
        let probe = tokio::time::timeout(STORE_PROBE_TIMEOUT, p.store.get_workstream("")).await;
        let problem = match probe {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {STORE_PROBE_TIMEOUT:?}")),
        };
        if let Some(problem) = problem {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(json!({"error": format!("store unreachable: {problem}")})),
            )
                .into_response();
        }
    }
    axum::Json(json!({"status": "ready"})).into_response()
}
