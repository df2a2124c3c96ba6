//! `GET /metrics`: Prometheus text exposition (format 0.0.4), written by hand like the
//! node's. Cluster gauges are computed from the model at scrape time; counters come from
//! the collector and the HTTP side.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::state::Console;

/// The exposition's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn counter(out: &mut String, name: &str, help: &str, v: &AtomicU64) {
    family(out, name, "counter", help);
    let _ = writeln!(out, "{name} {}", v.load(Ordering::Relaxed));
}

/// The whole exposition.
pub fn render(console: &Console) -> String {
    let mut out = String::with_capacity(4096);
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

    family(
        &mut out,
        "turnstone_console_nodes",
        "gauge",
        "Nodes known to the console, by status.",
    );
    for status in ["ok", "degraded", "unreachable", "zombie"] {
        let n = statuses.iter().filter(|s| s.1 == status).count();
        let _ = writeln!(out, "turnstone_console_nodes{{status=\"{status}\"}} {n}");
    }
    family(
        &mut out,
        "turnstone_console_node_up",
        "gauge",
        "1 when the node's last poll succeeded.",
    );
    for (id, _, _, reachable) in &statuses {
        let _ = writeln!(
            out,
            "turnstone_console_node_up{{node_id=\"{}\"}} {}",
            escape_label(id),
            u8::from(*reachable)
        );
    }
    family(
        &mut out,
        "turnstone_console_node_version_drift",
        "gauge",
        "1 when the node's version differs from the cluster majority.",
    );
    for (id, _, drift, _) in &statuses {
        let _ = writeln!(
            out,
            "turnstone_console_node_version_drift{{node_id=\"{}\"}} {}",
            escape_label(id),
            u8::from(*drift)
        );
    }
    family(
        &mut out,
        "turnstone_console_workstreams",
        "gauge",
        "Workstreams in the cluster, by state.",
    );
    if let Some(states) = overview["states"].as_object() {
        for (state, n) in states {
            let _ = writeln!(
                out,
                "turnstone_console_workstreams{{state=\"{}\"}} {}",
                escape_label(state),
                n.as_u64().unwrap_or(0)
            );
        }
    }
    family(
        &mut out,
        "turnstone_console_version_drift",
        "gauge",
        "1 when the nodes report more than one version.",
    );
    let drift = overview["version_drift"].as_bool().unwrap_or(false);
    let _ = writeln!(out, "turnstone_console_version_drift {}", u8::from(drift));
    family(
        &mut out,
        "turnstone_console_capacity_free",
        "gauge",
        "Sum of max_ws minus workstreams over all nodes.",
    );
    let free = overview["capacity"]["free"].as_i64().unwrap_or(0);
    let _ = writeln!(out, "turnstone_console_capacity_free {free}");

    let s = &console.collector.stats;
    family(
        &mut out,
        "turnstone_console_polls_total",
        "counter",
        "Node polls, by result.",
    );
    let _ = writeln!(
        out,
        "turnstone_console_polls_total{{result=\"ok\"}} {}",
        s.polls_ok.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "turnstone_console_polls_total{{result=\"failed\"}} {}",
        s.polls_failed.load(Ordering::Relaxed)
    );
    family(
        &mut out,
        "turnstone_console_poll_seconds_total",
        "counter",
        "Time spent in node polls.",
    );
    let _ = writeln!(
        out,
        "turnstone_console_poll_seconds_total {:.6}",
        s.poll_micros.load(Ordering::Relaxed) as f64 / 1e6
    );
    counter(
        &mut out,
        "turnstone_console_discoveries_total",
        "Heartbeat scans.",
        &s.discoveries,
    );
    counter(
        &mut out,
        "turnstone_console_discovery_errors_total",
        "Heartbeat scans that failed.",
        &s.discovery_errors,
    );
    counter(
        &mut out,
        "turnstone_console_cluster_events_total",
        "Messages received on the cluster channel.",
        &s.events_received,
    );
    counter(
        &mut out,
        "turnstone_console_cluster_events_invalid_total",
        "Cluster channel messages that were not JSON objects (dropped).",
        &s.events_invalid,
    );
    counter(
        &mut out,
        "turnstone_console_sse_dropped_total",
        "Events not delivered to a cluster SSE client whose queue was full.",
        &s.sse_dropped,
    );
    counter(
        &mut out,
        "turnstone_console_redis_reconnects_total",
        "Re-subscriptions to the cluster channel.",
        &s.redis_reconnects,
    );
    family(
        &mut out,
        "turnstone_console_sse_clients",
        "gauge",
        "Connected cluster SSE clients.",
    );
    let _ = writeln!(
        out,
        "turnstone_console_sse_clients {}",
        console.collector.listener_count()
    );
    let h = &console.stats;
    family(
        &mut out,
        "turnstone_console_proxy_requests_total",
        "counter",
        "Proxied requests, by kind.",
    );
    for (kind, v) in [
        ("http", &h.proxy_requests),
        ("sse", &h.proxy_streams),
        ("html", &h.proxy_html),
    ] {
        let _ = writeln!(
            out,
            "turnstone_console_proxy_requests_total{{kind=\"{kind}\"}} {}",
            v.load(Ordering::Relaxed)
        );
    }
    counter(
        &mut out,
        "turnstone_console_proxy_errors_total",
        "Proxied requests whose node was unreachable (502).",
        &h.proxy_errors,
    );
    counter(
        &mut out,
        "turnstone_console_proxy_unknown_node_total",
        "Proxied requests for an unknown node (404).",
        &h.proxy_unknown_node,
    );
    family(
        &mut out,
        "turnstone_console_workstream_creates_total",
        "counter",
        "Workstream creations queued, by result.",
    );
    let _ = writeln!(
        out,
        "turnstone_console_workstream_creates_total{{result=\"queued\"}} {}",
        h.creates.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "turnstone_console_workstream_creates_total{{result=\"failed\"}} {}",
        h.creates_failed.load(Ordering::Relaxed)
    );
    family(
        &mut out,
        "turnstone_console_uptime_seconds",
        "gauge",
        "Seconds since the console started.",
    );
    let _ = writeln!(
        out,
        "turnstone_console_uptime_seconds {:.3}",
        console.started.elapsed().as_secs_f64()
    );
    out
}

/// The handler.
pub async fn metrics(State(console): State<Arc<Console>>) -> Response {
    let mut response = render(&console).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}
