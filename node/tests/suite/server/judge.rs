//! The LLM judge through the node: a second fake model (over HTTP) answers as the judge;
//! `approve_request {judge_pending: true}`, `intent_verdict` on the workstream's SSE stream
//! in the spec's shape, an `auto-review` batch approved by the judge, a human racing the
//! judge, the verdicts in `/v1/api/admin/verdicts` (tier `llm`) and the judge metrics.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;
use turnstone_engine::{JUDGE_APPROVAL, JudgeConfig, LlmJudge};
use turnstone_llm::{
    CircuitBreaker, OpenAiConfig, OpenAiProvider, Provider, Resilient, RetryPolicy,
};
use turnstone_testkit::{FakeLlm, ProviderFault, ScriptReply, ScriptedProvider};

use super::metrics::{promtool_check, scrape};
use super::*;

const UNKNOWN: &str = "echo judged-ran; judge-probe-cmd";
const QUALIFYING: &str = r#"{"intent_summary":"prints a marker","risk_level":"low","confidence":0.95,"recommendation":"approve","reasoning":"harmless","evidence":["echo"]}"#;

/// A persistent node whose judge asks `judge` (model `judge-model`).
async fn judged_node(db: &std::path::Path, judge: Arc<dyn Provider>) -> TestNode {
    let client = Resilient::new(
        judge,
        RetryPolicy::none(),
        Arc::new(CircuitBreaker::default()),
    );
    TestNode::spawn(Spec {
        db: Some(db.to_path_buf()),
        engine: Some(Box::new(move |config, _| {
            config.judge = JudgeConfig {
                llm: Some(LlmJudge {
                    client: Some(client),
                    model: "judge-model".into(),
                    ..LlmJudge::session()
                }),
                ..JudgeConfig::default()
            };
        })),
        ..Spec::default()
    })
    .await
}

async fn auto_review_ws(t: &TestNode) -> (String, SseClient) {
    let (status, reply) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "judged", "posture": "auto-review"}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    let ws = reply["ws_id"].as_str().unwrap().to_string();
    let events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    (ws, events)
}

async fn send(t: &TestNode, ws: &str, message: &str) {
    let (status, body) = t
        .post("/v1/api/send", json!({"ws_id": ws, "message": message}))
        .await;
    assert_eq!(status, 200, "{body}");
}

fn of_kind<'a>(events: &'a [SseEvent], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.kind() == kind)
        .map(|e| &e.data)
        .collect()
}

#[tokio::test]
async fn a_judge_over_http_approves_an_auto_review_batch_and_is_recorded_and_measured() {
    let dir = tempfile::tempdir().unwrap();
    let judge = FakeLlm::start().await;
    judge.push_reply(ScriptReply::text(QUALIFYING));
    let provider = Arc::new(OpenAiProvider::new(OpenAiConfig::new(judge.base_url())).unwrap());
    let t = judged_node(&dir.path().join("j.db"), provider).await;
    let (ws, mut events) = auto_review_ws(&t).await;
    send(&t, &ws, &format!("TOOL: {UNKNOWN}")).await;
    let seen = events.until("turn_complete").await;

    let request = of_kind(&seen, "approve_request")[0];
    assert_eq!(request["judge_pending"], true);
    let item = &request["items"][0];
    assert_eq!(item["verdict"]["tier"], "heuristic");
    let verdict = of_kind(&seen, "intent_verdict")[0];
    // The verdict object spread next to `type` (node spec §2.2), every key present.
    let keys: Vec<&str> = verdict
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "type",
        "verdict_id",
        "call_id",
        "func_name",
        "func_args",
        "intent_summary",
        "risk_level",
        "confidence",
        "recommendation",
        "reasoning",
        "evidence",
        "tier",
        "judge_model",
        "latency_ms",
    ] {
        assert!(keys.contains(&key), "{key} missing: {verdict}");
    }
    assert_eq!(verdict["call_id"], item["call_id"]);
    assert_eq!(verdict["tier"], "llm");
    assert_eq!(verdict["judge_model"], "judge-model");
    assert_eq!(verdict["risk_level"], "low");
    assert_eq!(verdict["confidence"], 0.95);
    assert!(verdict["func_args"].is_string() && verdict["evidence"].is_array());
    assert!(verdict["latency_ms"].is_u64());
    let resolved = of_kind(&seen, "approval_resolved")[0];
    assert_eq!(resolved["approved"], true);
    assert_eq!(resolved["feedback"], JUDGE_APPROVAL);
    let result = of_kind(&seen, "tool_result")[0];
    assert!(result["output"].as_str().unwrap().contains("judged-ran"));
    // The judge's request went to the judge's endpoint with its model.
    let asked = judge.last_request().expect("the judge was asked");
    assert_eq!(asked["model"], "judge-model");

    // Recorded: the heuristic and the LLM verdict, tier by tier.
    let path = format!("/v1/api/admin/verdicts?ws_id={ws}");
    turnstone_testkit::assert_eventually!(
        {
            let (_, list) = t.get(&path, Some(FULL)).await;
            list["verdicts"].as_array().is_some_and(|rows| {
                rows.iter().any(|r| {
                    r["tier"] == "llm"
                        && r["verdict_id"] == verdict["verdict_id"]
                        && r["judge_model"] == "judge-model"
                }) && rows.iter().any(|r| r["tier"] == "heuristic")
            })
        },
        timeout = Duration::from_secs(20),
        "the LLM verdict was not recorded"
    );

    // Measured, promtool-clean.
    let text = scrape(&t).await;
    assert!(text.contains("turnstone_judge_enabled 1"), "{text}");
    assert!(
        text.contains(r#"turnstone_judge_verdicts_total{tier="llm",risk_level="low"} 1"#),
        "{text}"
    );
    assert!(
        text.contains("# TYPE turnstone_judge_llm_latency_seconds histogram"),
        "{text}"
    );
    assert!(
        text.contains("turnstone_judge_llm_latency_seconds_count 1"),
        "{text}"
    );
    promtool_check(&text);
}

#[tokio::test]
async fn a_human_decision_over_http_wins_against_the_judge_and_the_late_verdict_still_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let judge = Arc::new(ScriptedProvider::new());
    let gate = Arc::new(Semaphore::new(0));
    judge.push_fault(ProviderFault::Hold(gate.clone()));
    judge.push_reply(ScriptReply::text(QUALIFYING));
    judge.push_reply(ScriptReply::text(QUALIFYING));
    let t = judged_node(&dir.path().join("j.db"), judge.clone()).await;
    let (ws, mut events) = auto_review_ws(&t).await;
    send(
        &t,
        &ws,
        &format!("TOOL: {UNKNOWN}\nTOOL: echo second; judge-probe-cmd"),
    )
    .await;
    let mut seen = events.until("approve_request").await;
    assert_eq!(seen.last().unwrap().data["judge_pending"], true);
    turnstone_testkit::assert_eventually!(
        judge.call_count() == 1,
        timeout = Duration::from_secs(20),
        "the judge never asked"
    );
    let (status, reply) = t
        .post(
            "/v1/api/approve",
            json!({"ws_id": ws, "approved": false, "feedback": "not now"}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    gate.add_permits(1);
    seen.extend(events.until("turn_complete").await);
    if of_kind(&seen, "intent_verdict").is_empty() {
        seen.extend(events.until("intent_verdict").await);
    }
    let resolved = of_kind(&seen, "approval_resolved");
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0]["approved"], false);
    assert_eq!(resolved[0]["feedback"], "not now");
    let order = kinds(&seen);
    let resolved_at = order
        .iter()
        .position(|k| *k == "approval_resolved")
        .unwrap();
    let verdict_at = order.iter().position(|k| *k == "intent_verdict").unwrap();
    assert!(resolved_at < verdict_at, "a late verdict: {order:?}");
    assert_eq!(of_kind(&seen, "intent_verdict").len(), 1);
    assert!(
        of_kind(&seen, "tool_result").is_empty(),
        "the denial stands"
    );
    assert_eq!(judge.call_count(), 1, "the judge stopped");
}
