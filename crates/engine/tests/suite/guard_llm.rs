//! The output guard's optional LLM tier (`OutputGuard::llm`) in real turns: the scripted
//! fake model answers as the judge about a flagged result; it never sees the secret, it
//! raises the warning's risk level and adds its findings; a slow judge costs at most its
//! timeout; off (the default) or on an unflagged result, it is never asked.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use turnstone_engine::{Event, JudgeConfig, LlmJudge, OutputGuard};
use turnstone_llm::{CircuitBreaker, Resilient, RetryPolicy};
use turnstone_testkit::{ProviderFault, ScriptReply, ScriptedProvider};

use super::harness::*;

/// A GitHub token (the heuristics flag and redact it).
const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyzABCDEF0123";

async fn harness(judge: &Arc<ScriptedProvider>, llm_tier: bool, timeout: Duration) -> Harness {
    let client = Resilient::new(
        judge.clone(),
        RetryPolicy::none(),
        Arc::new(CircuitBreaker::default()),
    );
    Harness::with(move |o| {
        o.config.skip_permissions = true;
        o.config.judge = JudgeConfig {
            llm: Some(LlmJudge {
                client: Some(client),
                model: "guard-model".into(),
                timeout,
                max_context_ratio: 0.5,
            }),
            ..JudgeConfig::default()
        };
        o.config.output_guard = OutputGuard {
            llm: llm_tier,
            ..OutputGuard::default()
        };
    })
    .await
}

fn warnings(events: &[Event]) -> Vec<turnstone_proto::sse::OutputWarning> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::OutputWarning(w) => Some(w.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_flagged_result_gets_the_models_findings_and_the_model_never_sees_the_secret() {
    let judge = Arc::new(ScriptedProvider::new());
    judge.push_reply(ScriptReply::text(
        r#"{"risk_level":"critical","annotations":["a live GitHub token in the output"]}"#,
    ));
    let h = harness(&judge, true, Duration::from_secs(10)).await;
    let ws = h.workstream();
    let mut sub = send(&ws, &format!("TOOL: echo token={TOKEN}"));
    let events = read_turn(&mut sub).await;
    let warned = warnings(&events);
    assert_eq!(warned.len(), 1, "{:?}", types(&events));
    assert_eq!(
        warned[0].risk_level, "critical",
        "raised by the model from high"
    );
    assert!(
        warned[0]
            .annotations
            .contains(&"llm: a live GitHub token in the output".to_string()),
        "{:?}",
        warned[0].annotations
    );
    assert!(warned[0].redacted);
    // One request to the judge's model, about this result, without the secret.
    let requests = judge.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].model, "guard-model");
    let asked: String = requests[0]
        .messages
        .iter()
        .filter_map(|m| m.content.clone())
        .collect();
    assert!(
        asked.contains("token=") && asked.contains("REDACTED"),
        "{asked}"
    );
    assert!(
        !asked.contains(TOKEN),
        "the secret reached the judge's model"
    );
    // The turn went on with the redacted result.
    let results = tool_results(&events);
    assert!(!results[0].1.contains(TOKEN), "{results:?}");
    assert!(content(&events).starts_with("done: "));
}

#[tokio::test]
async fn a_slow_or_malformed_answer_costs_at_most_the_timeout_and_says_so() {
    let judge = Arc::new(ScriptedProvider::new());
    judge.push_fault(ProviderFault::Hang);
    let h = harness(&judge, true, Duration::from_millis(300)).await;
    let ws = h.workstream();
    let started = Instant::now();
    let mut sub = send(&ws, &format!("TOOL: echo token={TOKEN}"));
    let events = read_turn(&mut sub).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the turn waited {:?}",
        started.elapsed()
    );
    let warned = warnings(&events);
    assert_eq!(warned.len(), 1);
    assert_eq!(warned[0].risk_level, "high", "the heuristics' level");
    assert!(
        warned[0]
            .annotations
            .iter()
            .any(|a| a == "llm: no assessment (no answer within 0.3 s)"),
        "{:?}",
        warned[0].annotations
    );
    assert!(content(&events).starts_with("done: "), "the turn went on");

    judge.push_reply(ScriptReply::text("looks fine to me"));
    let mut sub = send(&ws, &format!("TOOL: echo again={TOKEN}"));
    let events = read_turn(&mut sub).await;
    let warned = warnings(&events);
    assert!(
        warned[0]
            .annotations
            .iter()
            .any(|a| a == "llm: no assessment (the answer was not a JSON assessment)"),
        "{:?}",
        warned[0].annotations
    );
}

#[tokio::test]
async fn off_by_default_and_never_asked_about_an_unflagged_result() {
    let judge = Arc::new(ScriptedProvider::new());
    let h = harness(&judge, false, Duration::from_secs(10)).await;
    let ws = h.workstream();
    let mut sub = send(&ws, &format!("TOOL: echo token={TOKEN}"));
    let events = read_turn(&mut sub).await;
    assert_eq!(warnings(&events).len(), 1, "the heuristics still flag it");
    assert_eq!(judge.call_count(), 0, "the LLM tier is off by default");
    assert!(!OutputGuard::default().llm);

    let judge = Arc::new(ScriptedProvider::new());
    let h = harness(&judge, true, Duration::from_secs(10)).await;
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: echo nothing-secret-here");
    let events = read_turn(&mut sub).await;
    assert!(warnings(&events).is_empty());
    assert_eq!(
        judge.call_count(),
        0,
        "only flagged results are put before the model"
    );
}
