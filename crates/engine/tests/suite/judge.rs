//! The LLM tier of the intent judge in real turns: the scripted fake model answers as the
//! judge (its own client, or the workstream's), `intent_verdict` events while the approval
//! is pending, `judge_pending: true`, auto-review deciding only when every item qualifies,
//! malformed and slow answers giving no verdict, and a human decision racing the judge.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use turnstone_engine::{
    ApproveOutcome, Event, JUDGE_APPROVAL, JudgeConfig, LlmJudge, ToolItem, WorkstreamHandle,
};
use turnstone_governance::Posture;
use turnstone_llm::{CircuitBreaker, Provider, Resilient, RetryPolicy};
use turnstone_proto::sse::Verdict;
use turnstone_testkit::{ProviderFault, ScriptReply, ScriptedProvider};

use super::harness::*;

/// A bash line the heuristic tier cannot vouch for (an unknown command: medium / review,
/// confidence 0.5) that still prints a marker when it runs.
const UNKNOWN: &str = "echo judged-ran; judge-probe-cmd";

const QUALIFYING: &str = r#"{"intent_summary":"prints a marker","risk_level":"low","confidence":0.95,"recommendation":"approve","reasoning":"harmless","evidence":["echo"]}"#;
const RISKY: &str = r#"{"intent_summary":"runs an unknown program","risk_level":"high","confidence":0.9,"recommendation":"deny","reasoning":"unknown binary","evidence":["judge-probe-cmd"]}"#;

fn client(provider: Arc<dyn Provider>) -> Resilient {
    Resilient::new(
        provider,
        RetryPolicy::none(),
        Arc::new(CircuitBreaker::default()),
    )
}

/// A judge on `client` (its own model `judge-model`), or on the workstream's client and
/// model (`None`).
fn judge_config(client: Option<Resilient>, timeout: Duration) -> JudgeConfig {
    let model = if client.is_some() { "judge-model" } else { "" };
    JudgeConfig {
        llm: Some(LlmJudge {
            client,
            model: model.into(),
            timeout,
            max_context_ratio: 0.5,
        }),
        ..JudgeConfig::default()
    }
}

/// A harness whose judge is `judge` (its own scripted model), with `timeout`.
async fn with_judge(judge: Arc<dyn Provider>, timeout: Duration) -> Harness {
    Harness::with(|o| o.config.judge = judge_config(Some(client(judge)), timeout)).await
}

fn approve_request(events: &[Event]) -> (Vec<ToolItem>, bool) {
    events
        .iter()
        .find_map(|e| match e {
            Event::ApproveRequest {
                items,
                judge_pending,
                ..
            } => Some((items.clone(), *judge_pending)),
            _ => None,
        })
        .expect("an approve_request")
}

fn verdicts(events: &[Event]) -> Vec<Verdict> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::IntentVerdict(v) => Some((**v).clone()),
            _ => None,
        })
        .collect()
}

fn resolutions(events: &[Event]) -> Vec<(bool, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalResolved {
                approved, feedback, ..
            } => Some((*approved, feedback.clone())),
            _ => None,
        })
        .collect()
}

fn is_verdict(e: &Event) -> bool {
    matches!(e, Event::IntentVerdict(_))
}

fn is_judge_info(e: &Event) -> bool {
    matches!(e, Event::Info { message } if message.starts_with("[Intent judge: no verdict"))
}

/// Sends `text` on an auto-review workstream and reads through its approval request.
async fn ask(ws: &WorkstreamHandle, text: &str) -> (turnstone_engine::Subscription, Vec<Event>) {
    let mut sub = send(ws, text);
    let events = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    (sub, events)
}

#[tokio::test]
async fn a_qualifying_llm_verdict_approves_an_auto_review_batch() {
    let judge = Arc::new(ScriptedProvider::new());
    judge.push_reply(ScriptReply::text(format!("```json\n{QUALIFYING}\n```")));
    let h = with_judge(judge.clone(), Duration::from_secs(30)).await;
    let ws = h.workstream();
    ws.set_posture(Posture::AutoReview);
    let (mut sub, before) = ask(&ws, &format!("TOOL: {UNKNOWN}")).await;
    let (items, judge_pending) = approve_request(&before);
    assert!(
        judge_pending,
        "the LLM judge runs while the prompt is pending"
    );
    let heuristic = items[0].verdict.as_ref().expect("a heuristic verdict");
    assert_eq!(
        (heuristic.tier.as_str(), heuristic.recommendation.as_str()),
        ("heuristic", "review"),
        "the heuristic tier alone would ask"
    );

    let events = read_turn(&mut sub).await;
    let llm = verdicts(&events);
    assert_eq!(llm.len(), 1, "{:?}", types(&events));
    let v = &llm[0];
    assert_eq!(v.call_id, items[0].call_id);
    assert_eq!(
        (
            v.tier.as_str(),
            v.risk_level.as_str(),
            v.recommendation.as_str()
        ),
        ("llm", "low", "approve")
    );
    assert_eq!(v.judge_model, "judge-model");
    assert_eq!(v.verdict_id.len(), 32);
    assert_ne!(v.verdict_id, heuristic.verdict_id);
    assert_eq!(v.func_args, heuristic.func_args);
    assert_eq!(
        resolutions(&events),
        vec![(true, JUDGE_APPROVAL.to_string())]
    );
    let verdict_at = events.iter().position(is_verdict).unwrap();
    let resolved_at = events
        .iter()
        .position(|e| matches!(e, Event::ApprovalResolved { .. }))
        .unwrap();
    assert!(verdict_at < resolved_at, "{:?}", types(&events));
    let results = tool_results(&events);
    assert!(results[0].1.contains("judged-ran"), "it ran: {results:?}");
    // The judge's feedback is no user message.
    assert!(
        !ws.history()
            .iter()
            .any(|m| m.content.as_deref() == Some(JUDGE_APPROVAL))
    );

    // The judge got one request: its own model, the call and the conversation.
    let requests = judge.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.model, "judge-model");
    assert!(request.tools.is_empty());
    let prompt = request
        .messages
        .last()
        .and_then(|m| m.content.clone())
        .unwrap();
    assert!(prompt.contains("judge-probe-cmd"), "{prompt}");
    assert!(prompt.contains("[user] TOOL: echo judged-ran"), "{prompt}");
    assert_eq!(
        h.llm.request_count(),
        2,
        "the workstream's model saw only the turn"
    );
}

#[tokio::test]
async fn a_non_qualifying_llm_verdict_leaves_the_decision_to_the_human() {
    let judge = Arc::new(ScriptedProvider::new());
    judge.push_reply(ScriptReply::text(RISKY));
    let h = with_judge(judge.clone(), Duration::from_secs(30)).await;
    let ws = h.workstream();
    ws.set_posture(Posture::AutoReview);
    let (mut sub, _) = ask(&ws, &format!("TOOL: {UNKNOWN}")).await;
    let more = read_until(&mut sub, is_verdict).await;
    let v = verdicts(&more).remove(0);
    assert_eq!(
        (v.risk_level.as_str(), v.recommendation.as_str()),
        ("high", "deny")
    );
    assert!(ws.pending_approval().is_some(), "still the human's call");
    assert!(matches!(
        ws.approve(false, Some("no".into()), false),
        ApproveOutcome::Resolved(_)
    ));
    let events = read_turn(&mut sub).await;
    assert_eq!(resolutions(&events), vec![(false, "no".to_string())]);
    assert!(tool_results(&events).is_empty(), "nothing ran");
}

#[tokio::test]
async fn a_malformed_answer_gives_no_verdict_and_says_so() {
    let judge = Arc::new(ScriptedProvider::new());
    for bad in [
        "Looks fine to me!",
        r#"{"risk_level":"tiny","confidence":0.9,"recommendation":"approve"}"#,
    ] {
        judge.push_reply(ScriptReply::text(bad));
    }
    let h = with_judge(judge.clone(), Duration::from_secs(30)).await;
    let ws = h.workstream();
    ws.set_posture(Posture::AutoReview);
    for _ in 0..2 {
        let (mut sub, _) = ask(&ws, &format!("TOOL: {UNKNOWN}")).await;
        let more = read_until(&mut sub, is_judge_info).await;
        assert!(verdicts(&more).is_empty());
        let info = infos(&more).pop().unwrap();
        assert!(info.contains("not a JSON verdict"), "{info}");
        assert!(ws.pending_approval().is_some(), "the human decides");
        ws.approve(true, None, false);
        let events = read_turn(&mut sub).await;
        assert!(verdicts(&events).is_empty());
        assert_eq!(resolutions(&events), vec![(true, String::new())]);
    }
    assert_eq!(judge.call_count(), 2);
}

#[tokio::test]
async fn a_judge_slower_than_its_timeout_gives_no_verdict() {
    let judge = Arc::new(ScriptedProvider::new());
    judge.push_fault(ProviderFault::Hang);
    let h = with_judge(judge.clone(), Duration::from_millis(200)).await;
    let ws = h.workstream();
    ws.set_posture(Posture::AutoReview);
    let (mut sub, before) = ask(&ws, &format!("TOOL: {UNKNOWN}")).await;
    assert!(approve_request(&before).1);
    let more = read_until(&mut sub, is_judge_info).await;
    let info = infos(&more).pop().unwrap();
    assert!(info.contains("no answer within 0.2 s"), "{info}");
    assert!(ws.pending_approval().is_some());
    ws.approve(false, None, false);
    let events = read_turn(&mut sub).await;
    assert!(verdicts(&events).is_empty());
}

#[tokio::test]
async fn a_mixed_batch_goes_to_the_human() {
    let judge = Arc::new(ScriptedProvider::new());
    judge.push_reply(ScriptReply::text(QUALIFYING));
    judge.push_reply(ScriptReply::text(RISKY));
    let h = with_judge(judge.clone(), Duration::from_secs(30)).await;
    let ws = h.workstream();
    ws.set_posture(Posture::AutoReview);
    let (mut sub, before) = ask(
        &ws,
        &format!("TOOL: {UNKNOWN}\nTOOL: echo second; judge-probe-cmd"),
    )
    .await;
    let (items, _) = approve_request(&before);
    assert_eq!(items.len(), 2);
    let mut seen = Vec::new();
    while verdicts(&seen).len() < 2 {
        seen.extend(read_until(&mut sub, is_verdict).await);
    }
    let llm = verdicts(&seen);
    assert_eq!(
        llm.iter().map(|v| v.call_id.as_str()).collect::<Vec<_>>(),
        items.iter().map(|i| i.call_id.as_str()).collect::<Vec<_>>(),
        "one verdict per item, in order"
    );
    assert_eq!(llm[0].recommendation, "approve");
    assert_eq!(llm[1].recommendation, "deny");
    assert!(resolutions(&seen).is_empty());
    assert!(ws.pending_approval().is_some(), "one item does not qualify");
    ws.approve(true, None, false);
    let events = read_turn(&mut sub).await;
    assert_eq!(resolutions(&events), vec![(true, String::new())]);
    assert_eq!(tool_results(&events).len(), 2);
}

#[tokio::test]
async fn a_human_decision_wins_the_race_and_stops_the_judge() {
    let judge = Arc::new(ScriptedProvider::new());
    let gate = Arc::new(Semaphore::new(0));
    judge.push_fault(ProviderFault::Hold(gate.clone()));
    judge.push_reply(ScriptReply::text(QUALIFYING));
    judge.push_reply(ScriptReply::text(QUALIFYING));
    let h = with_judge(judge.clone(), Duration::from_secs(60)).await;
    let ws = h.workstream();
    ws.set_posture(Posture::AutoReview);
    let (mut sub, _) = ask(
        &ws,
        &format!("TOOL: {UNKNOWN}\nTOOL: echo second; judge-probe-cmd"),
    )
    .await;
    // The judge is asking about the first item (its answer is held back).
    turnstone_testkit::assert_eventually!(
        judge.call_count() == 1,
        timeout = Duration::from_secs(30),
        "the judge never asked"
    );
    // The human decides first.
    assert!(matches!(
        ws.approve(false, Some("not now".into()), false),
        ApproveOutcome::Resolved(_)
    ));
    gate.add_permits(1);
    let mut events = read_turn(&mut sub).await;
    if verdicts(&events).is_empty() {
        events.extend(read_until(&mut sub, is_verdict).await);
    }
    assert_eq!(resolutions(&events), vec![(false, "not now".to_string())]);
    let resolved_at = events
        .iter()
        .position(|e| matches!(e, Event::ApprovalResolved { .. }))
        .unwrap();
    let verdict_at = events.iter().position(is_verdict).unwrap();
    assert!(
        resolved_at < verdict_at,
        "a late verdict: {:?}",
        types(&events)
    );
    let late = verdicts(&events);
    assert_eq!(late.len(), 1, "the judge stopped after the decision");
    assert_eq!(late[0].recommendation, "approve");
    assert!(tool_results(&events).is_empty(), "the denial stands");
    assert_eq!(
        judge.call_count(),
        1,
        "no item was judged after the decision"
    );
}

#[tokio::test]
async fn the_session_model_judges_when_the_judge_has_no_model_of_its_own() {
    let h = Harness::with(|o| o.config.judge = judge_config(None, Duration::from_secs(30))).await;
    let ws = h.workstream();
    let (mut sub, before) = ask(&ws, &format!("TOOL: {UNKNOWN}")).await;
    assert!(approve_request(&before).1);
    // The fake echoes the judge's prompt: no verdict, said so.
    let more = read_until(&mut sub, is_judge_info).await;
    assert!(infos(&more).pop().unwrap().contains("not a JSON verdict"));
    let judged = h
        .llm
        .requests()
        .into_iter()
        .find(|r| {
            r["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.contains("You review tool calls"))
        })
        .expect("the workstream's model was asked");
    assert_eq!(judged["model"], "fake-model");
    ws.approve(false, None, false);
    read_turn(&mut sub).await;
}

#[tokio::test]
async fn the_ask_posture_gets_verdicts_but_the_judge_never_decides() {
    let judge = Arc::new(ScriptedProvider::new());
    judge.push_reply(ScriptReply::text(QUALIFYING));
    let h = with_judge(judge.clone(), Duration::from_secs(30)).await;
    let ws = h.workstream();
    let (mut sub, _) = ask(&ws, &format!("TOOL: {UNKNOWN}")).await;
    let more = read_until(&mut sub, is_verdict).await;
    assert_eq!(verdicts(&more)[0].recommendation, "approve");
    assert!(ws.pending_approval().is_some(), "ask: only a human decides");
    ws.approve(true, None, false);
    let events = read_turn(&mut sub).await;
    assert_eq!(resolutions(&events), vec![(true, String::new())]);
}

#[tokio::test]
async fn with_the_judge_off_nothing_is_judged() {
    let judge = Arc::new(ScriptedProvider::new());
    let h = Harness::with(|o| {
        o.config.judge = JudgeConfig {
            enabled: false,
            ..judge_config(Some(client(judge.clone())), Duration::from_secs(30))
        }
    })
    .await;
    let ws = h.workstream();
    let (mut sub, before) = ask(&ws, "TOOL: ls").await;
    let (items, judge_pending) = approve_request(&before);
    assert!(!judge_pending);
    assert!(items[0].verdict.is_none());
    ws.approve(true, None, false);
    let events = read_turn(&mut sub).await;
    assert!(verdicts(&events).is_empty());
    assert_eq!(judge.call_count(), 0);
}
