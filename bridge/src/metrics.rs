//! The bridge's Prometheus metrics and its small `/metrics` + `/health` + `/ready` listener.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use turnstone_runtime::metrics::Exposition;

use crate::Ctx;

/// Counters (monotonic) of what went through the bridge.
#[derive(Debug, Default)]
pub struct Metrics {
    pub inbound_received: AtomicU64,
    pub inbound_acked: AtomicU64,
    pub inbound_redriven: AtomicU64,
    pub inbound_forwarded: AtomicU64,
    pub inbound_abandoned: AtomicU64,
    pub node_retries: AtomicU64,
    pub dead_letters: AtomicU64,
    pub dead_letters_trimmed: AtomicU64,
    pub events_received: AtomicU64,
    pub events_published: AtomicU64,
    pub events_replayed: AtomicU64,
    pub events_joined: AtomicU64,
    pub event_stream_reconnects: AtomicU64,
    pub publish_errors: AtomicU64,
    pub approvals_relayed: AtomicU64,
    pub rehomed: AtomicU64,
    pub janitor_moved: AtomicU64,
}

impl Metrics {
    pub fn inc(&self, c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn add(&self, c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Prometheus text exposition.
    pub fn render(&self, node_id: &str, up: bool, inflight: usize) -> String {
        let labels = [("node_id", node_id)];
        let mut out = Exposition::with_capacity(4096);
        let counters: [(&str, &str, &AtomicU64); 17] = [
            (
                "turnstone_bridge_inbound_received_total",
                "Inbound messages taken from the queues.",
                &self.inbound_received,
            ),
            (
                "turnstone_bridge_inbound_acked_total",
                "Inbound messages acknowledged (handled, forwarded or dead-lettered).",
                &self.inbound_acked,
            ),
            (
                "turnstone_bridge_inbound_redriven_total",
                "Messages re-driven from a processing list after a restart or an outage.",
                &self.inbound_redriven,
            ),
            (
                "turnstone_bridge_inbound_forwarded_total",
                "Messages re-routed to another node's queue.",
                &self.inbound_forwarded,
            ),
            (
                "turnstone_bridge_inbound_abandoned_total",
                "Messages left in the processing list because the node went down.",
                &self.inbound_abandoned,
            ),
            (
                "turnstone_bridge_node_retries_total",
                "Node calls retried because the node was unavailable.",
                &self.node_retries,
            ),
            (
                "turnstone_bridge_dead_letters_total",
                "Messages moved to the dead-letter list.",
                &self.dead_letters,
            ),
            (
                "turnstone_bridge_dead_letters_trimmed_total",
                "Oldest dead letters dropped to keep the list within --dead-letter-max.",
                &self.dead_letters_trimmed,
            ),
            (
                "turnstone_bridge_events_received_total",
                "Events read from the node-wide stream.",
                &self.events_received,
            ),
            (
                "turnstone_bridge_events_published_total",
                "Events appended and published (new).",
                &self.events_published,
            ),
            (
                "turnstone_bridge_events_replayed_total",
                "Events skipped because they had been published before.",
                &self.events_replayed,
            ),
            (
                "turnstone_bridge_events_joined_total",
                "Text deltas published as part of the previous delta of their workstream.",
                &self.events_joined,
            ),
            (
                "turnstone_bridge_event_stream_reconnects_total",
                "Reconnects of the node-wide event stream.",
                &self.event_stream_reconnects,
            ),
            (
                "turnstone_bridge_publish_errors_total",
                "Pub/sub publishes that failed.",
                &self.publish_errors,
            ),
            (
                "turnstone_bridge_approvals_relayed_total",
                "Approval decisions relayed to the node.",
                &self.approvals_relayed,
            ),
            (
                "turnstone_bridge_rehomed_total",
                "Workstreams taken over from a dead owner.",
                &self.rehomed,
            ),
            (
                "turnstone_bridge_janitor_moved_total",
                "Messages moved from dead nodes' queues to the shared queue.",
                &self.janitor_moved,
            ),
        ];
        for (name, help, c) in counters {
            out.family(name, "counter", help);
            out.sample(name, &labels, c.load(Ordering::Relaxed));
        }
        out.family(
            "turnstone_bridge_node_up",
            "gauge",
            "Whether the node answers its health probe.",
        );
        out.sample("turnstone_bridge_node_up", &labels, u8::from(up));
        out.family(
            "turnstone_bridge_inflight",
            "gauge",
            "Messages being handled.",
        );
        out.sample("turnstone_bridge_inflight", &labels, inflight);
        out.finish()
    }
}

async fn metrics(State(ctx): State<Arc<Ctx>>) -> impl IntoResponse {
    let inflight = ctx.inbound.in_flight();
    (
        [(
            header::CONTENT_TYPE,
            turnstone_runtime::metrics::CONTENT_TYPE,
        )],
        ctx.metrics.render(&ctx.node_id, ctx.link.is_up(), inflight),
    )
}

async fn health(State(ctx): State<Arc<Ctx>>) -> impl IntoResponse {
    axum::Json(json!({
        "status": if ctx.link.is_up() { "ok" } else { "degraded" },
        "node_id": ctx.node_id,
        "node_up": ctx.link.is_up(),
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

/// `GET /ready`: 200 while the bridge takes work; 503 while it drains, its node does not
/// answer or Redis does not (`/health` stays the liveness probe).
async fn ready(State(ctx): State<Arc<Ctx>>) -> Response {
    let unavailable = |why: String| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"error": why})),
        )
            .into_response()
    };
    if ctx.inbound.is_draining() {
        return unavailable("draining".into());
    }
    if !ctx.link.is_up() {
        return unavailable("the node does not answer".into());
    }
    let mut conn = ctx.redis.clone();
    let cmd = redis::cmd("PING");
    let ping = cmd.query_async::<String>(&mut conn);
    match tokio::time::timeout(std::time::Duration::from_secs(2), ping).await {
        Ok(Ok(_)) => axum::Json(json!({"status": "ready", "node_id": ctx.node_id})).into_response(),
        Ok(Err(e)) => unavailable(format!("redis unreachable: {e}")),
        Err(_) => unavailable("redis unreachable: no answer within 2s".into()),
    }
}

/// Serves `/metrics`, `/health` and `/ready` until cancelled.
pub async fn serve(ctx: Arc<Ctx>, addr: SocketAddr) {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(%addr, error = %e, "cannot bind the metrics listener");
            return;
        }
    };
    tracing::info!(addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "bridge metrics listening");
    let cancel = ctx.cancel.clone();
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .with_state(ctx);
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move { cancel.cancelled().await })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_family_once_with_an_escaped_node_label() {
        let m = Metrics::default();
        m.add(&m.inbound_received, 3);
        let text = m.render("n\"1", true, 2);
        assert!(text.contains(
            "# HELP turnstone_bridge_inbound_received_total Inbound messages taken from the queues.\n\
             # TYPE turnstone_bridge_inbound_received_total counter\n\
             turnstone_bridge_inbound_received_total{node_id=\"n\\\"1\"} 3\n"
        ));
        assert!(text.contains("turnstone_bridge_node_up{node_id=\"n\\\"1\"} 1\n"));
        assert!(text.ends_with("turnstone_bridge_inflight{node_id=\"n\\\"1\"} 2\n"));
        assert_eq!(text.matches("# TYPE ").count(), 19, "{text}");
    }
}
