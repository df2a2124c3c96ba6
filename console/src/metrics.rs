//! `GET /metrics`: Prometheus text exposition (format 0.0.4), written with the services' one
//! writer ([`turnstone_runtime::metrics`]). Cluster gauges are computed from the model at
//! scrape time; counters come from the collector, the HTTP side and the gRPC calls
//! (`turnstone_console_grpc_*`, by RPC and status code).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use turnstone_runtime::metrics::Exposition;

use crate::state::Console;

pub use turnstone_runtime::metrics::CONTENT_TYPE;

fn counter(x: &mut Exposition, name: &str, help: &str, v: &AtomicU64) {
    x.counter(name, help, v.load(Ordering::Relaxed));
}

/// The whole exposition.
pub fn render(console: &Console) -> String {
    let mut x = Exposition::with_capacity(4096);
    let (overview, statuses) = console.collector.read(|c| {
        let nodes = c.nodes_page(crate::model::NodeSort::Name, usize::MAX, 0);
        let mut statuses: Vec<(String, String, bool, bool)> = Vec::new();
        if let Some(list) = nodes["nodes"].as_array() {
            for n in list {
                statuses.push((
                    n["node_id"].as_str().unwrap_or_default().to_string(),
                    n["status"].as_str().unwrap_or_default().to_string(),
                    n["version_drift"].as_bool().unwrap_or(false),
                    n["reachable"].as_bool().unwrap_or(false),
                ));
            }
        }
        (c.overview(), statuses)
    });

    x.family(
        "turnstone_console_nodes",
        "gauge",
        "Nodes known to the console, by status.",
    );
    for status in ["ok", "degraded", "unreachable", "zombie"] {
        let n = statuses.iter().filter(|s| s.1 == status).count();
        x.sample("turnstone_console_nodes", &[("status", status)], n);
    }
    x.family(
        "turnstone_console_node_up",
        "gauge",
        "1 when the node's last poll succeeded.",
    );
    for (id, _, _, reachable) in &statuses {
        x.sample(
            "turnstone_console_node_up",
            &[("node_id", id)],
            u8::from(*reachable),
        );
    }
    x.family(
        "turnstone_console_node_version_drift",
        "gauge",
        "1 when the node's version differs from the cluster majority.",
    );
    for (id, _, drift, _) in &statuses {
        x.sample(
            "turnstone_console_node_version_drift",
            &[("node_id", id)],
            u8::from(*drift),
        );
    }
    x.family(
        "turnstone_console_workstreams",
        "gauge",
        "Workstreams in the cluster, by state.",
    );
    if let Some(states) = overview["states"].as_object() {
        for (state, n) in states {
            x.sample(
                "turnstone_console_workstreams",
                &[("state", state)],
                n.as_u64().unwrap_or(0),
            );
        }
    }
    x.family(
        "turnstone_console_version_drift",
        "gauge",
        "1 when the nodes report more than one version.",
    );
    let drift = overview["version_drift"].as_bool().unwrap_or(false);
    x.sample("turnstone_console_version_drift", &[], u8::from(drift));
    x.family(
        "turnstone_console_capacity_free",
        "gauge",
        "Sum of max_ws minus workstreams over all nodes.",
    );
    let free = overview["capacity"]["free"].as_i64().unwrap_or(0);
    x.sample("turnstone_console_capacity_free", &[], free);

    let s = &console.collector.stats;
    x.family(
        "turnstone_console_polls_total",
        "counter",
        "Node polls, by result.",
    );
    for (result, v) in [("ok", &s.polls_ok), ("failed", &s.polls_failed)] {
        x.sample(
            "turnstone_console_polls_total",
            &[("result", result)],
            v.load(Ordering::Relaxed),
        );
    }
    x.family(
        "turnstone_console_poll_seconds_total",
        "counter",
        "Time spent in node polls.",
    );
    x.sample(
        "turnstone_console_poll_seconds_total",
        &[],
        format_args!("{:.6}", s.poll_micros.load(Ordering::Relaxed) as f64 / 1e6),
    );
    counter(
        &mut x,
        "turnstone_console_discoveries_total",
        "Heartbeat scans.",
        &s.discoveries,
    );
    counter(
        &mut x,
        "turnstone_console_discovery_errors_total",
        "Heartbeat scans that failed.",
        &s.discovery_errors,
    );
    counter(
        &mut x,
        "turnstone_console_cluster_events_total",
        "Messages received on the cluster channel.",
        &s.events_received,
    );
    counter(
        &mut x,
        "turnstone_console_cluster_events_invalid_total",
        "Cluster channel messages that were not JSON objects (dropped).",
        &s.events_invalid,
    );
    counter(
        &mut x,
        "turnstone_console_sse_dropped_total",
        "Events a cluster SSE client fell too far behind to get (it was resynced instead).",
        &s.sse_dropped,
    );
    counter(
        &mut x,
        "turnstone_console_sse_resyncs_total",
        "Cluster SSE clients sent a fresh snapshot (resync) after falling behind.",
        &s.sse_resyncs,
    );
    counter(
        &mut x,
        "turnstone_console_redis_reconnects_total",
        "Re-subscriptions to the cluster channel.",
        &s.redis_reconnects,
    );
    x.family(
        "turnstone_console_sse_clients",
        "gauge",
        "Connected cluster SSE clients.",
    );
    x.sample(
        "turnstone_console_sse_clients",
        &[],
        console.collector.listener_count(),
    );
    let h = &console.stats;
    x.family(
        "turnstone_console_proxy_requests_total",
        "counter",
        "Proxied requests, by kind.",
    );
    for (kind, v) in [
        ("http", &h.proxy_requests),
        ("sse", &h.proxy_streams),
        ("html", &h.proxy_html),
    ] {
        x.sample(
            "turnstone_console_proxy_requests_total",
            &[("kind", kind)],
            v.load(Ordering::Relaxed),
        );
    }
    counter(
        &mut x,
        "turnstone_console_proxy_errors_total",
        "Proxied requests whose node was unreachable (502).",
        &h.proxy_errors,
    );
    counter(
        &mut x,
        "turnstone_console_proxy_unknown_node_total",
        "Proxied requests for an unknown node (404).",
        &h.proxy_unknown_node,
    );
    x.family(
        "turnstone_console_workstream_creates_total",
        "counter",
        "Workstream creations queued, by result.",
    );
    for (result, v) in [("queued", &h.creates), ("failed", &h.creates_failed)] {
        x.sample(
            "turnstone_console_workstream_creates_total",
            &[("result", result)],
            v.load(Ordering::Relaxed),
        );
    }
    x.family(
        "turnstone_console_uptime_seconds",
        "gauge",
        "Seconds since the console started.",
    );
    x.sample(
        "turnstone_console_uptime_seconds",
        &[],
        format_args!("{:.3}", console.started.elapsed().as_secs_f64()),
    );
    console.grpc_calls.render(&mut x);
    x.finish()
}

/// The handler.
pub async fn metrics(State(console): State<Arc<Console>>) -> Response {
    let mut response = render(&console).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}
