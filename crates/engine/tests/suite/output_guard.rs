//! The output guard in the turn loop: every tool result (bash, file reads, sub-agents) is
//! screened before the `tool_result` event, the history and the next model request; chunks
//! streamed while a call runs are redacted too.

use serde_json::json;
use turnstone_engine::{Event, OutputGuard, register_subagent};
use turnstone_testkit::secrets;

use super::harness::*;

/// Every fixture of `turnstone_testkit::secrets`, joined (the unterminated key last).
fn all_fixtures() -> (String, Vec<(&'static str, String)>) {
    let cases = secrets::cases();
    let text: String = cases
        .iter()
        .map(|(_, output, _)| {
            if output.ends_with('\n') {
                output.clone()
            } else {
                format!("{output}\n")
            }
        })
        .collect();
    let secrets = cases.into_iter().map(|(n, _, s)| (n, s)).collect();
    (text, secrets)
}

/// Fails naming every fixture whose secret occurs in `haystack` (`where` says what it is).
fn assert_no_secret(haystack: &str, secrets: &[(&str, String)], place: &str) {
    let leaked: Vec<&str> = secrets
        .iter()
        .filter(|(_, s)| haystack.contains(s.as_str()))
        .map(|(n, _)| *n)
        .collect();
    assert!(leaked.is_empty(), "secrets leaked into {place}: {leaked:?}");
}

fn warnings(events: &[Event]) -> Vec<&turnstone_proto::sse::OutputWarning> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::OutputWarning(w) => Some(w),
            _ => None,
        })
        .collect()
}

fn tool_results(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult {
                call_id, output, ..
            } => Some((call_id.clone(), output.clone())),
            _ => None,
        })
        .collect()
}

fn chunks(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolOutputChunk { chunk, .. } => Some(chunk.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn secrets_in_bash_output_and_file_reads_reach_no_event_history_or_model_request() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let (text, secrets) = all_fixtures();
    assert!(secrets.len() >= 25, "{} formats", secrets.len());
    std::fs::write(h.path("secrets.txt"), &text).unwrap();
    let ws = h.workstream();
    // Two calls of one batch: bash prints the file line by line (streamed), read_file reads
    // it. Neither command line names a secret.
    let mut sub = send(
        &ws,
        "TOOL: cat secrets.txt\nCALL:read_file {\"path\": \"secrets.txt\"}",
    );
    let events = read_turn(&mut sub).await;

    let results = tool_results(&events);
    assert_eq!(results.len(), 2, "{:?}", types(&events));
    for (_, output) in &results {
        assert!(output.contains("[REDACTED:"), "{output}");
    }
    // One warning per call, before its result, naming the call.
    let warned = warnings(&events);
    assert_eq!(warned.len(), 2, "{:?}", types(&events));
    for w in &warned {
        assert!(w.redacted, "{w:?}");
        assert_eq!(w.risk_level, "high");
        assert!(w.flags.contains(&"credential_leak".to_string()), "{w:?}");
        assert!(w.flags.contains(&"private_key_leak".to_string()), "{w:?}");
        assert!(w.output_length > 0);
        let warning_at = events
            .iter()
            .position(|e| matches!(e, Event::OutputWarning(x) if x.call_id == w.call_id))
            .unwrap();
        let result_at = events
            .iter()
            .position(|e| matches!(e, Event::ToolResult { call_id, .. } if *call_id == w.call_id))
            .unwrap();
        assert!(warning_at < result_at, "{:?}", types(&events));
    }
    let mut names: Vec<&str> = warned.iter().map(|w| w.func_name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["bash", "read_file"]);
    // The bash output streamed (one chunk per line), redacted.
    let streamed = chunks(&events);
    assert!(streamed.contains("[REDACTED:"), "{streamed}");
    assert_no_secret(&streamed, &secrets, "tool_output_chunk");

    let all_events = serde_json::to_string(&events).unwrap();
    assert_no_secret(&all_events, &secrets, "the events");
    let replay: Vec<_> = ws
        .subscribe(Some(0))
        .backlog()
        .into_iter()
        .map(|i| format!("{i:?}"))
        .collect();
    assert_no_secret(&replay.join("\n"), &secrets, "the event log replay");
    let history = serde_json::to_string(&ws.history()).unwrap();
    assert_no_secret(&history, &secrets, "the history");
    let requests = serde_json::to_string(&h.llm.requests()).unwrap();
    assert!(requests.contains("[REDACTED:"), "the model saw the results");
    assert_no_secret(&requests, &secrets, "the model requests");

    let counts = h.manager.engine().output_guard_counts();
    assert_eq!((counts.warnings, counts.redactions), (2, 2));
    let flagged = |flag: &str| counts.flags.iter().find(|(f, _)| *f == flag).unwrap().1;
    assert_eq!(flagged("credential_leak"), 2);
}

#[tokio::test]
async fn ordinary_output_passes_byte_identical_and_raises_no_warning() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    let ordinary = "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f\nAuthor: Dev <dev@example.com>\n\n    \
                    Fix the password reset form (#123)\n\ntotal 16\n-rw-r--r-- 1 dev dev  220 Cargo.lock\n\
                    sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n";
    std::fs::write(h.path("log.txt"), ordinary).unwrap();
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: cat log.txt");
    let events = read_turn(&mut sub).await;
    assert!(warnings(&events).is_empty(), "{:?}", types(&events));
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    // bash's result is stripped of surrounding whitespace (as the original's); the streamed
    // chunks are the raw lines.
    assert_eq!(results[0].1, ordinary.trim());
    assert_eq!(chunks(&events), ordinary);
    let counts = h.manager.engine().output_guard_counts();
    assert_eq!((counts.warnings, counts.redactions), (0, 0));
}

#[tokio::test]
async fn with_redaction_off_the_warning_is_emitted_and_the_text_kept() {
    let h = Harness::with(|o| {
        o.config.skip_permissions = true;
        o.config.output_guard = OutputGuard {
            scan: true,
            redact: false,
            ..OutputGuard::default()
        };
    })
    .await;
    let (text, secrets) = all_fixtures();
    std::fs::write(h.path("secrets.txt"), &text).unwrap();
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: cat secrets.txt");
    let events = read_turn(&mut sub).await;
    let warned = warnings(&events);
    assert_eq!(warned.len(), 1, "{:?}", types(&events));
    assert!(!warned[0].redacted);
    assert!(warned[0].flags.contains(&"credential_leak".to_string()));
    let results = tool_results(&events);
    assert_eq!(
        results[0].1,
        text.trim(),
        "the text is kept as it was (stripped)"
    );
    assert_eq!(chunks(&events), text);

    // With the guard off entirely: no warning either.
    let h = Harness::with(|o| {
        o.config.skip_permissions = true;
        o.config.output_guard = OutputGuard {
            scan: false,
            redact: true,
            ..OutputGuard::default()
        };
    })
    .await;
    std::fs::write(h.path("secrets.txt"), &text).unwrap();
    let ws = h.workstream();
    let mut sub = send(&ws, "TOOL: cat secrets.txt");
    let events = read_turn(&mut sub).await;
    assert!(warnings(&events).is_empty());
    assert_eq!(tool_results(&events)[0].1, text.trim());
    let _ = secrets;
}

/// A sub-agent's tool results are screened inside its own turn, and its final answer is
/// screened before the size cap: a secret the cap would cut in half leaves no fragment.
#[tokio::test]
async fn a_sub_agents_tool_results_and_its_answer_are_guarded_before_the_size_cap() {
    let h = Harness::with(|o| {
        o.config.skip_permissions = true;
        o.config.subagent_auto_approve_all = true;
        o.config.truncation = 300;
    })
    .await;
    register_subagent(h.manager.engine()).unwrap();
    let (text, secrets) = all_fixtures();
    std::fs::write(h.path("secrets.txt"), &text).unwrap();
    let ws = h.workstream();

    // 1. The sub-agent runs bash on the file: its model sees only redacted text.
    let prompt = "TOOL: cat secrets.txt";
    let mut sub = send(
        &ws,
        &format!("CALL:task_agent {}", json!({ "prompt": prompt })),
    );
    let events = read_turn(&mut sub).await;
    let requests = serde_json::to_string(&h.llm.requests()).unwrap();
    assert!(
        requests.contains("[REDACTED:"),
        "the sub-agent saw its result"
    );
    assert_no_secret(&requests, &secrets, "the model requests");
    assert_no_secret(
        &serde_json::to_string(&events).unwrap(),
        &secrets,
        "the parent's events",
    );
    // The parent's frontends hear of the sub-agent's warning through its progress lines.
    assert!(
        chunks(&events).contains("output guard: credential_leak"),
        "{}",
        chunks(&events)
    );

    // 2. The sub-agent's answer (the fake echoes its prompt) holds a token right where the
    //    300-character cap cuts (150 + 150): screened first, nothing of it survives the cut.
    let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let answer = format!("{} {token}{}", "a".repeat(129), " b".repeat(200));
    let mut sub = send(
        &ws,
        &format!("CALL:task_agent {}", json!({ "prompt": answer })),
    );
    let events = read_turn(&mut sub).await;
    let results = tool_results(&events);
    let result = &results.last().unwrap().1;
    assert!(result.contains("chars truncated"), "{result}");
    assert!(result.contains("[REDACTED:"), "{result}");
    assert!(
        !result.contains(&token[..8]),
        "a fragment survived: {result}"
    );
    let counts = h.manager.engine().output_guard_counts();
    assert!(counts.redactions >= 2, "{counts:?}");
}

/// A plan (`plan_agent`, the planner's final answer) is screened before the user reviews
/// it, and so is every refined plan; the saved file and the result hold no secret.
#[tokio::test]
async fn plans_are_screened_before_their_review_and_after_each_refinement() {
    let h = Harness::with(|o| {
        o.config.auto_approve_labels.insert("plan_agent".into());
    })
    .await;
    turnstone_engine::register_plan_agent(h.manager.engine(), None).unwrap();
    let ws = h.workstream();
    let first = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let second = "glpat-abcdefghij0123456789";
    // The fake planner answers with its prompt: the goal, then goal + feedback.
    let goal = format!("Rotate the deploy token {first} everywhere");
    let mut sub = send(&ws, &format!("CALL:plan_agent {}", json!({ "goal": goal })));
    let plan_review = |events: &[Event]| {
        events.iter().rev().find_map(|e| match e {
            Event::PlanReview { content, .. } => Some(content.clone()),
            _ => None,
        })
    };
    let events = read_until(&mut sub, |e| matches!(e, Event::PlanReview { .. })).await;
    let shown = plan_review(&events).unwrap();
    assert!(
        shown.contains("[REDACTED:") && !shown.contains(first),
        "{shown}"
    );
    assert_eq!(warnings(&events).len(), 1, "{:?}", types(&events));

    ws.plan_feedback(&format!("also the gitlab token {second}"));
    let events = read_until(&mut sub, |e| matches!(e, Event::PlanReview { .. })).await;
    let shown = plan_review(&events).unwrap();
    assert!(!shown.contains(second) && !shown.contains(first), "{shown}");
    assert_eq!(warnings(&events).len(), 1, "{:?}", types(&events));

    ws.plan_feedback("");
    let events = read_turn(&mut sub).await;
    let result = &tool_results(&events)[0].1;
    assert!(
        !result.contains(first) && !result.contains(second),
        "{result}"
    );
    let saved = std::fs::read_to_string(h.path(&format!(".plan-{}.md", ws.id()))).unwrap();
    assert!(!saved.contains(first) && !saved.contains(second), "{saved}");
}
