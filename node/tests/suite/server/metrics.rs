//! `/metrics` and the progress fields of `/health`: names, types, labels and order of the
//! original (node spec §1.3.2), escaped labels that `promtool` accepts, counters that move
//! with the node's events.

use std::time::Duration;

use serde_json::json;
use turnstone_testkit::fake_llm::Fault;

use super::ratelimit::custom_node;
use super::*;

/// The families in the order they must appear (original first, then ours).
const ORDER: &[(&str, &str)] = &[
    ("turnstone_build_info", "gauge"),
    ("turnstone_uptime_seconds", "gauge"),
    ("turnstone_workstreams_active_total", "gauge"),
    ("turnstone_workstreams_by_state", "gauge"),
    ("turnstone_http_requests_total", "counter"),
    ("turnstone_http_request_duration_seconds", "histogram"),
    ("turnstone_messages_sent_total", "counter"),
    ("turnstone_tokens_total", "counter"),
    ("turnstone_tool_calls_total", "counter"),
    ("turnstone_errors_total", "counter"),
    ("turnstone_context_window_used_ratio", "gauge"),
    ("turnstone_sse_connections_active", "gauge"),
    ("turnstone_ratelimit_rejected_total", "counter"),
    ("turnstone_backend_up", "gauge"),
    ("turnstone_circuit_state", "gauge"),
    ("turnstone_workstreams_evicted_total", "counter"),
    ("turnstone_judge_enabled", "gauge"),
    ("turnstone_workstream_info", "gauge"),
    ("turnstone_workstream_prompt_tokens_total", "counter"),
    ("turnstone_workstream_completion_tokens_total", "counter"),
    ("turnstone_workstream_messages_total", "counter"),
    ("turnstone_workstream_tool_calls_total", "counter"),
    ("turnstone_workstream_context_ratio", "gauge"),
    ("turnstone_turn_duration_seconds", "histogram"),
    ("turnstone_provider_first_byte_seconds", "histogram"),
    ("turnstone_sse_events_dropped_total", "counter"),
    ("turnstone_event_loop_lag_seconds", "gauge"),
    ("turnstone_output_guard_flags_total", "counter"),
    ("turnstone_output_guard_warnings_total", "counter"),
    ("turnstone_output_guard_redactions_total", "counter"),
    ("turnstone_workstreams_hibernated", "gauge"),
    ("turnstone_workstream_hibernations_total", "counter"),
    ("turnstone_workstream_rehydrations_total", "counter"),
    ("turnstone_grpc_requests_total", "counter"),
    ("turnstone_grpc_request_duration_seconds", "histogram"),
];

/// The lint complaint about the original's own gauge name (`..._active_total`), which the
/// compatibility contract forbids renaming. Anything else promtool says is a failure.
const KNOWN_LINT: &str =
    "turnstone_workstreams_active_total non-counter metrics should not have \"_total\" suffix";

pub async fn scrape(t: &TestNode) -> String {
    // The token matters only on a node with `metrics_auth`.
    let resp = t
        .http
        .get(t.url("/metrics"))
        .bearer_auth(FULL)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    resp.text().await.unwrap()
}

/// The value of the sample whose line starts with `series ` (name plus exact labels).
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

/// Scrapes until `series` has the value `want` (20 s deadline); returns that scrape.
pub async fn wait_for(t: &TestNode, series: &str, want: f64) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = scrape(t).await;
        if sample(&text, series) == Some(want) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{series} never became {want}; last scrape:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `promtool check metrics` on `text` (the original's gauge name is the one known lint).
pub fn promtool_check(text: &str) {
    turnstone_testkit::promtool::check_metrics(text, &[KNOWN_LINT]);
}

async fn create_ws(t: &TestNode, name: &str, auto_approve: bool) -> String {
    let (status, body) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": name, "auto_approve": auto_approve}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["ws_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn metrics_have_the_original_names_types_labels_and_order_after_a_tool_turn() {
    // Workstream names are labels only behind `--metrics-auth`.
    let t = TestNode::spawn(Spec {
        options: NodeOptions {
            metrics_auth: true,
            ..NodeOptions::default()
        },
        ..Spec::default()
    })
    .await;
    let name = "we\"ird\nname\\x";
    let ws = create_ws(&t, name, true).await;
    let mut sse = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let (status, _) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": "THINK: plan\nTOOL: echo hi"}),
        )
        .await;
    assert_eq!(status, 200);
    sse.until("turn_complete").await;
    let text = wait_for(&t, "turnstone_turn_duration_seconds_count", 1.0).await;

    // Every family has HELP and TYPE lines, in the original's order, then ours.
    let types: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (n, k) = l.split_once(' ').unwrap();
            (n.to_string(), k.to_string())
        })
        .collect();
    let want: Vec<(String, String)> = ORDER
        .iter()
        .map(|(n, k)| (n.to_string(), k.to_string()))
        .collect();
    assert_eq!(types, want);
    for (n, _) in ORDER {
        assert!(text.contains(&format!("# HELP {n} ")), "HELP of {n}");
    }
    assert!(text.ends_with('\n'));

    assert_eq!(
        sample(
            &text,
            "turnstone_build_info{version=\"0.1.0\",model=\"fake-model\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "turnstone_workstreams_active_total"),
        Some(2.0)
    );
    let states: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("turnstone_workstreams_by_state{"))
        .collect();
    assert_eq!(
        states,
        [
            "turnstone_workstreams_by_state{state=\"attention\"} 0",
            "turnstone_workstreams_by_state{state=\"error\"} 0",
            "turnstone_workstreams_by_state{state=\"idle\"} 2",
            "turnstone_workstreams_by_state{state=\"running\"} 0",
            "turnstone_workstreams_by_state{state=\"thinking\"} 0",
        ]
    );
    assert_eq!(
        sample(
            &text,
            "turnstone_http_requests_total{method=\"POST\",endpoint=\"/v1/api/send\",status_code=\"200\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "turnstone_http_request_duration_seconds_count{method=\"POST\",endpoint=\"/v1/api/send\"}"
        ),
        Some(1.0)
    );
    assert!(text.contains(
        "turnstone_http_request_duration_seconds_bucket{method=\"POST\",endpoint=\"/v1/api/send\",le=\"0.005\"} "
    ));
    assert!(text.contains(
        "turnstone_http_request_duration_seconds_bucket{method=\"POST\",endpoint=\"/v1/api/send\",le=\"+Inf\"} 1\n"
    ));
    assert_eq!(sample(&text, "turnstone_messages_sent_total"), Some(1.0));
    let token_types: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("turnstone_tokens_total{type=\""))
        .map(|l| l.split('"').next().unwrap())
        .collect();
    assert_eq!(
        token_types,
        ["prompt", "completion", "cache_creation", "cache_read"]
    );
    assert!(sample(&text, "turnstone_tokens_total{type=\"prompt\"}").unwrap() > 0.0);
    assert_eq!(
        sample(&text, "turnstone_tool_calls_total{tool=\"bash\"}"),
        Some(1.0)
    );
    assert_eq!(sample(&text, "turnstone_errors_total"), Some(0.0));
    assert!(sample(&text, "turnstone_context_window_used_ratio").unwrap() > 0.0);
    assert_eq!(sample(&text, "turnstone_backend_up"), Some(1.0));
    assert_eq!(sample(&text, "turnstone_circuit_state"), Some(0.0));

    // Per-workstream lines carry ws_id and the escaped name.
    let labels = format!("ws_id=\"{ws}\",name=\"we\\\"ird\\nname\\\\x\"");
    assert_eq!(
        sample(&text, &format!("turnstone_workstream_info{{{labels}}}")),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("turnstone_workstream_messages_total{{{labels}}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("turnstone_workstream_tool_calls_total{{{labels},tool=\"bash\"}}")
        ),
        Some(1.0)
    );
    assert!(
        sample(
            &text,
            &format!("turnstone_workstream_prompt_tokens_total{{{labels}}}")
        )
        .unwrap()
            > 0.0
    );
    assert!(
        sample(
            &text,
            &format!("turnstone_workstream_context_ratio{{{labels}}}")
        )
        .unwrap()
            > 0.0
    );
    // The untouched default workstream is listed with zeros.
    assert_eq!(
        sample(
            &text,
            &format!(
                "turnstone_workstream_messages_total{{ws_id=\"{}\",name=\"default\"}}",
                t.default_ws
            )
        ),
        Some(0.0)
    );
    // The turn's model requests got a first byte (reasoning, then "done: ...").
    assert_eq!(
        sample(&text, "turnstone_provider_first_byte_seconds_count"),
        Some(2.0)
    );
    assert!(sample(&text, "turnstone_event_loop_lag_seconds").is_some());
    // No raw newline leaked into the exposition: every line is a comment or a sample.
    for line in text.lines() {
        assert!(
            line.starts_with("# ") || line.starts_with("turnstone_"),
            "stray line {line:?}"
        );
    }
    promtool_check(&text);
}

#[tokio::test]
async fn promtool_accepts_metrics_after_varied_traffic() {
    let t = TestNode::start().await;
    create_ws(&t, "quote \" and \\ and\nnewline", false).await;
    // Requests are labelled by route template; unmatched paths share one label.
    for path in [
        "/nope",
        "/v1/api/x\"y",
        "/v1/api/%0Aescaped",
        "/v1/api/workstreams",
    ] {
        let _ = t.http.get(t.url(path)).bearer_auth(FULL).send().await;
    }
    let _ = t.get("/v1/api/workstreams", None).await; // a 401 is counted too
    let text = scrape(&t).await;
    assert_eq!(
        sample(
            &text,
            "turnstone_http_requests_total{method=\"GET\",endpoint=\"/v1/api/workstreams\",status_code=\"401\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "turnstone_http_requests_total{method=\"GET\",endpoint=\"__unmatched__\",status_code=\"404\"}"
        ),
        Some(3.0)
    );
    assert!(!text.contains("/nope"), "{text}");
    // Public metrics name no workstream.
    assert!(!text.contains("newline"), "{text}");
    promtool_check(&text);
}

#[tokio::test]
async fn messages_sent_counts_accepted_sends_but_not_idempotent_replays() {
    let t = TestNode::start().await;
    let ws = t.default_ws.clone();
    let mut sse = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let send = json!({"ws_id": ws, "message": "one", "correlation_id": "c-1"});
    assert_eq!(t.post("/v1/api/send", send.clone()).await.0, 200);
    sse.until("turn_complete").await;
    // The same correlation id again: replayed, starts nothing.
    let resp = t
        .http
        .post(t.url("/v1/api/send"))
        .bearer_auth(FULL)
        .json(&send)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["idempotent-replayed"], "true");
    let two = json!({"ws_id": ws, "message": "two", "correlation_id": "c-2"});
    assert_eq!(t.post("/v1/api/send", two).await.0, 200);
    sse.until("turn_complete").await;
    // Events are folded in order: once the second turn is counted, so is every send.
    let text = wait_for(&t, "turnstone_turn_duration_seconds_count", 2.0).await;
    assert_eq!(sample(&text, "turnstone_messages_sent_total"), Some(2.0));
    assert_eq!(t.llm.request_count(), 2);
    // Three POSTs reached /send and were all answered 200.
    assert_eq!(
        sample(
            &text,
            "turnstone_http_requests_total{method=\"POST\",endpoint=\"/v1/api/send\",status_code=\"200\"}"
        ),
        Some(3.0)
    );
}

#[tokio::test]
async fn errors_are_counted_from_error_events() {
    let t = TestNode::start().await;
    t.llm.push_fault(Fault::Status {
        code: 400,
        retry_after: None,
        body: json!({"error": {"message": "bad request"}}).to_string(),
    });
    let ws = t.default_ws.clone();
    let mut sse = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    assert_eq!(
        t.post("/v1/api/send", json!({"ws_id": ws, "message": "hi"}))
            .await
            .0,
        200
    );
    let events = sse.until("turn_complete").await;
    let errors = events.iter().filter(|e| e.kind() == "error").count();
    assert!(errors >= 1, "{:?}", kinds(&events));
    let text = wait_for(&t, "turnstone_turn_duration_seconds_count", 1.0).await;
    assert_eq!(sample(&text, "turnstone_errors_total"), Some(errors as f64));
    assert_eq!(sample(&text, "turnstone_messages_sent_total"), Some(1.0));
}

#[tokio::test]
async fn sse_connections_are_counted_while_open_and_recorded_when_closed() {
    let t = TestNode::start().await;
    let sse = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    let global = t.sse("/v1/api/events/global", None).await;
    wait_for(&t, "turnstone_sse_connections_active", 2.0).await;
    drop(sse);
    drop(global);
    let text = wait_for(&t, "turnstone_sse_connections_active", 0.0).await;
    // A finished stream is recorded under its raw path, without the query.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut text = text;
    while sample(
        &text,
        "turnstone_http_requests_total{method=\"GET\",endpoint=\"/v1/api/events\",status_code=\"200\"}",
    ) != Some(1.0)
    {
        assert!(tokio::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
        text = scrape(&t).await;
    }
}

#[tokio::test]
async fn health_reports_progress() {
    let t = TestNode::start().await;
    let (status, body) = t.get("/health", None).await;
    assert_eq!(status, 200);
    assert!(body["event_loop_lag_ms"].as_f64().unwrap() >= 0.0, "{body}");
    assert!(body["last_turn_completed_age_seconds"].is_null(), "{body}");
    // The existing keys are kept.
    for key in [
        "status",
        "version",
        "node_id",
        "uptime_seconds",
        "model",
        "max_ws",
        "workstreams",
        "backend",
    ] {
        assert!(body.get(key).is_some(), "{key} missing: {body}");
    }

    let ws = t.default_ws.clone();
    let mut sse = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    t.post("/v1/api/send", json!({"ws_id": ws, "message": "hi"}))
        .await;
    sse.until("turn_complete").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = t.get("/health", None).await;
        if let Some(age) = body["last_turn_completed_age_seconds"].as_f64() {
            assert!(age >= 0.0);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn truncations_told_to_subscribers_count_as_dropped_events() {
    let t = TestNode::start().await;
    let text = scrape(&t).await;
    assert_eq!(
        sample(&text, "turnstone_sse_events_dropped_total"),
        Some(0.0)
    );
    // More events than a workstream log retains (512 by default), then a resume from the
    // start: the client is told what it missed, and that is counted.
    let ws = t.node.workstream(&t.default_ws).unwrap();
    for i in 0..600 {
        ws.emit_info(format!("note {i}"));
    }
    let mut sse = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), Some(1))
        .await;
    assert_eq!(sse.next().await.kind(), "events_truncated");
    let text = scrape(&t).await;
    assert_eq!(
        sample(&text, "turnstone_sse_events_dropped_total"),
        Some(1.0)
    );
}

#[tokio::test]
async fn evictions_are_counted() {
    let t = custom_node(
        NodeOptions::default(),
        ManagerConfig {
            max_workstreams: 2,
            ..ManagerConfig::default()
        },
    )
    .await;
    create_ws(&t, "second", false).await;
    create_ws(&t, "third", false).await; // evicts the oldest idle one
    let text = wait_for(&t, "turnstone_workstreams_evicted_total", 1.0).await;
    assert_eq!(
        sample(&text, "turnstone_workstreams_active_total"),
        Some(2.0)
    );
    assert!(!text.contains(&format!("ws_id=\"{}\"", t.default_ws)));
}

#[tokio::test]
async fn judge_verdicts_are_counted_by_tier_and_risk_level() {
    let t = TestNode::start().await;
    let text = scrape(&t).await;
    assert_eq!(sample(&text, "turnstone_judge_enabled"), Some(1.0));
    assert!(
        !text.contains("turnstone_judge_verdicts_total"),
        "only once a verdict exists"
    );
    let ws = t.default_ws.clone();
    let mut sse = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws, "message": "TOOL: sudo rm -rf /etc\nTOOL: ls"}),
    )
    .await;
    sse.until("approve_request").await;
    t.post("/v1/api/approve", json!({"ws_id": ws, "approved": false}))
        .await;
    sse.until("turn_complete").await;
    let text = wait_for(
        &t,
        "turnstone_judge_verdicts_total{tier=\"heuristic\",risk_level=\"critical\"}",
        1.0,
    )
    .await;
    assert_eq!(
        sample(
            &text,
            "turnstone_judge_verdicts_total{tier=\"heuristic\",risk_level=\"low\"}"
        ),
        Some(1.0)
    );
    // The spec's place: right after `turnstone_judge_enabled`.
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .collect();
    let at = families
        .iter()
        .position(|f| f.starts_with("turnstone_judge_enabled "))
        .unwrap();
    assert_eq!(
        families[at + 1],
        "turnstone_judge_verdicts_total counter",
        "{families:?}"
    );
    promtool_check(&text);
}

#[tokio::test]
async fn a_persisting_node_reports_its_store_writes_and_search_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestNode::start_persistent(&dir.path().join("node.db")).await;
    let before = scrape(&t).await;
    let written_before =
        sample(&before, "turnstone_store_writes_total{outcome=\"written\"}").unwrap();
    let mut sse = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    let (status, _) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": t.default_ws, "message": "hello store"}),
        )
        .await;
    assert_eq!(status, 200);
    sse.until("turn_complete").await;
    t.flush_store().await;
    let text = scrape(&t).await;
    let written = sample(&text, "turnstone_store_writes_total{outcome=\"written\"}").unwrap();
    assert!(
        written > written_before,
        "a turn's messages were written: {written_before} → {written}"
    );
    for (series, want) in [
        ("turnstone_store_writes_total{outcome=\"dropped\"}", 0.0),
        ("turnstone_store_writes_total{outcome=\"failed\"}", 0.0),
        ("turnstone_store_write_queue_depth", 0.0),
        // SQLite indexes in the write transaction.
        ("turnstone_store_search_backlog", 0.0),
    ] {
        assert_eq!(sample(&text, series), Some(want), "{series}\n{text}");
    }
    assert!(sample(&text, "turnstone_store_write_batches_total").unwrap() >= 1.0);
    promtool_check(&text);
    // A node that does not persist has no store families.
    let plain = TestNode::start().await;
    assert!(!scrape(&plain).await.contains("turnstone_store_"));
}
