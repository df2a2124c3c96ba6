//! The node's OpenAPI document against its behaviour: schemathesis generates requests from
//! `/openapi.json` (every operation but the endless event streams) and checks that no answer
//! is a 5xx, every status is documented and every body matches its schema; `/metrics` stays
//! valid Prometheus text (`promtool check metrics`) after the run. The console's document
//! (its own routes, with storage) is held to the same checks.

use std::process::Stdio;

use tokio::process::Command;

use super::cluster::harness::{NodeProc, mint_token};
use super::security::console_proc::ConsoleProc;

fn venv() -> std::path::PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    std::path::PathBuf::from(
        std::env::var("TURNSTONE_ST_VENV")
            .unwrap_or_else(|_| format!("{home}/.cache/turnstone-st-venv")),
    )
}

/// Runs schemathesis on `base`'s `/openapi.json` with `token`, leaving out the paths `exclude`
/// matches; panics with its report on a problem.
async fn run_schemathesis(base: &str, token: &str, exclude: &str) {
    let st = venv().join("bin/schemathesis");
    assert!(
        st.exists(),
        "schemathesis is missing at {}: run scripts/schemathesis-venv (scripts/services does it)",
        st.display()
    );
    let out = Command::new(&st)
        .args(["run", &format!("{base}/openapi.json")])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args([
            "--checks",
            "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance",
            "--max-examples",
            "25",
            "--exclude-path-regex",
            exclude,
            "--workers",
            "1",
            "--seed",
            "164938256485133405946385779694261097664",
        ])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{report}"
    );
    assert!(report.contains("passed"), "{report}");
}

#[tokio::test]
async fn the_consoles_openapi_holds_under_schemathesis() {
    let prefix = format!("st{}", turnstone_proto::ids::new_correlation_id());
    let console = ConsoleProc::start("redis://127.0.0.1:6379/0", &prefix, &[]).await;
    // Creating a workstream with no node is the spec's `503 No reachable nodes available`
    // (cluster spec §6.3), which the 5xx check would count; it is tested in the console's
    // own suite.
    run_schemathesis(
        &console.url,
        &ConsoleProc::token(),
        "events|workstreams/new",
    )
    .await;
}

#[tokio::test]
async fn schemathesis_finds_no_server_error_or_schema_violation_and_metrics_stay_valid() {
    let node = NodeProc::start("st-node").await;
    run_schemathesis(&node.url, &mint_token(), "events").await;

    let metrics = node.metrics().await;
    // The one lint allowed: the original's gauge name `turnstone_workstreams_active_total`.
    turnstone_testkit::promtool::check_metrics(
        &metrics,
        &[
            "turnstone_workstreams_active_total non-counter metrics should not have \"_total\" suffix",
        ],
    );
    // The run is visible in the request counters (hundreds of requests went through).
    let requests: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("turnstone_http_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(requests > 100.0, "{requests} requests counted:\n{metrics}");
}
