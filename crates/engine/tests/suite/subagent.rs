//! `task_agent`: a sub-agent run by the engine's own turn loop against the fake model over
//! HTTP, with real tools in a temp dir.

use serde_json::{Value, json};
use std::sync::Arc;

use turnstone_engine::{
    ApproveOutcome, Envelope, Event, RoundRef, SubagentApprovals, WsState, register_subagent,
};

use super::harness::*;

/// Marks the sub-agent's requests: the start of its system prompt.
const SUB_PROMPT: &str = "You are a task sub-agent of Turnstone";

fn is_sub(request: &Value) -> bool {
    request["messages"][0]["role"] == "system"
        && request["messages"][0]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with(SUB_PROMPT))
}

/// The parent's model message that calls `task_agent` with `prompt`.
fn delegate(prompt: &str) -> String {
    format!("CALL:task_agent {}", json!({ "prompt": prompt }))
}

/// The tool results the sub-agent's second model request carries, in order.
fn second_sub_request_tool_results(h: &Harness) -> Vec<String> {
    let requests = h.llm.requests();
    let second = requests.iter().filter(|r| is_sub(r)).nth(1).unwrap();
    second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
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
async fn the_sub_agent_runs_task_tools_and_its_final_text_is_the_result() {
    // Opted in: the sub-agent runs every tool of its set unasked.
    let h = Harness::with(|o| o.config.subagent_auto_approve_all = true).await;
    register_subagent(h.manager.engine()).unwrap();
    let ws = h.workstream();
    let prompt = format!(
        "{}\nTOOL: echo from-bash > {}",
        r#"CALL:write_file {"path": "notes.txt", "content": "written by the sub-agent\n"}"#,
        h.path("bash.txt").display()
    );
    let mut sub = send(&ws, &delegate(&prompt));
    let events = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    let Some(Event::ApproveRequest { items, .. }) = events.last() else {
        unreachable!()
    };
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].func_name, "task_agent");
    assert!(items[0].needs_approval, "task_agent needs approval");
    assert_eq!(items[0].preview, prompt);
    ws.approve(true, None, false);
    let events = read_turn(&mut sub).await;
    assert_eq!(ws.state(), WsState::Idle);

    // Real effects of the sub-agent's tools (approved by its unattended policy).
    assert_eq!(
        std::fs::read_to_string(h.path("notes.txt")).unwrap(),
        "written by the sub-agent\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.path("bash.txt")).unwrap(),
        "from-bash\n"
    );

    // The sub-agent's final text ("done: <its last tool output>") is the parent's result.
    let history = ws.history();
    assert_provider_acceptable(&history);
    let results = tool_messages(&history);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].starts_with("done: "), "{results:?}");
    let task_result = tool_results(&events);
    assert_eq!(
        task_result.len(),
        1,
        "only the parent's own call reports a result"
    );
    assert_eq!(task_result[0].0, "task_agent");
    assert_eq!(task_result[0].1, results[0]);
    assert!(!task_result[0].2);

    // Progress reached the parent as the call's streamed output.
    let progress = chunks(&events);
    assert!(progress.contains("\u{2192} write_file: "), "{progress}");
    assert!(
        progress.contains("\u{2192} bash: echo from-bash"),
        "{progress}"
    );

    // The sub-agent's requests: a fresh conversation with its own system prompt and the
    // task-agent tool subset only (never task_agent itself).
    let requests = h.llm.requests();
    let (subs, parents): (Vec<&Value>, Vec<&Value>) = requests.iter().partition(|r| is_sub(r));
    assert_eq!(subs.len(), 2, "tool round, then the final answer");
    assert_eq!(parents.len(), 2);
    let expected = h.manager.engine().registry().task_agent_names();
    assert!(!expected.contains(&"task_agent".to_string()));
    for r in &subs {
        assert_eq!(tool_names(r), expected);
        assert_eq!(r["messages"][1]["role"], "user");
        assert_eq!(r["messages"][1]["content"], prompt.as_str());
    }
    assert!(tool_names(parents[0]).contains(&"task_agent".to_string()));
    // The parent's conversation holds none of the sub-agent's messages: its call, the
    // result, its own final reply.
    assert_eq!(history.len(), 4, "{history:#?}");
}

#[tokio::test]
async fn the_turn_limit_stops_the_sub_agent_with_what_it_has() {
    let h = Harness::with(|o| {
        o.config.skip_permissions = true;
        o.config.subagent_auto_approve_all = true;
        o.config.agent_max_turns = 1;
    })
    .await;
    register_subagent(h.manager.engine()).unwrap();
    let ws = h.workstream();
    let marker = h.path("step1");
    let mut sub = send(&ws, &delegate(&format!("TOOL: touch {}", marker.display())));
    let events = read_turn(&mut sub).await;
    assert!(marker.exists(), "the first round ran");
    let sub_requests = h.llm.requests().iter().filter(|r| is_sub(r)).count();
    assert_eq!(sub_requests, 1, "no request after the limit");
    let results = tool_messages(&ws.history());
    assert_eq!(results.len(), 1);
    assert!(
        results[0].contains("stopped after 1 model requests (agent_max_turns)"),
        "{results:?}"
    );
    assert!(chunks(&events).contains("limit of 1 model requests"));
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn cancelling_the_parent_kills_the_sub_agents_tools() {
    let h = Harness::with(|o| {
        o.config.skip_permissions = true;
        o.config.subagent_auto_approve_all = true;
    })
    .await;
    register_subagent(h.manager.engine()).unwrap();
    let ws = h.workstream();
    let pidfile = h.path("pid");
    let marker = h.path("finished");
    let command = format!(
        "echo $$ > {}; sleep 30; touch {}",
        pidfile.display(),
        marker.display()
    );
    let inner = format!("CALL:bash {}", json!({ "command": command, "timeout": 60 }));
    let mut sub = send(&ws, &delegate(&inner));
    read_until(&mut sub, |e| matches!(e, Event::ToolOutputChunk { .. })).await;
    turnstone_testkit::assert_eventually!(
        pidfile.exists(),
        "the sub-agent's command never started"
    );
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    let pid: u32 = pid.trim().parse().unwrap();
    assert!(turnstone_testkit::process_running(pid));
    let requests_before = h.llm.request_count();

    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    assert!(types(&events).contains(&"cancelled"));
    assert_eq!(ws.state(), WsState::Idle);
    // Killed (a zombie until tokio reaps it) or gone: either way it no longer runs.
    turnstone_testkit::assert_eventually!(
        !turnstone_testkit::process_running(pid),
        "the sub-agent's command still runs"
    );
    assert!(!marker.exists());
    let history = ws.history();
    assert_provider_acceptable(&history);
    let results = tool_messages(&history);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].starts_with("Cancelled by user. Effect: "),
        "{results:?}"
    );
    assert_eq!(
        h.llm.request_count(),
        requests_before,
        "no request after the cancel"
    );
}

#[tokio::test]
async fn without_auto_approve_all_only_auto_approve_tools_run() {
    let h = Harness::with(|o| {
        o.config.skip_permissions = true;
        o.config.subagent_auto_approve_all = false;
        o.config.subagent_approvals = SubagentApprovals::Unattended;
    })
    .await;
    register_subagent(h.manager.engine()).unwrap();
    std::fs::write(h.path("a.txt"), "alpha line\n").unwrap();
    let ws = h.workstream();
    let marker = h.path("touched");
    let prompt = format!(
        "{}\nTOOL: touch {}",
        r#"CALL:read_file {"path": "a.txt"}"#,
        marker.display()
    );
    let mut sub = send(&ws, &delegate(&prompt));
    read_turn(&mut sub).await;
    assert!(
        !marker.exists(),
        "bash needs approval: denied in the sub-agent"
    );
    // The sub-agent's second request carries both results: the file (read_file is
    // auto-approve) and the denial with its reason.
    let tools = second_sub_request_tool_results(&h);
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert!(tools[0].contains("alpha line"), "{tools:?}");
    assert!(
        tools[1].starts_with("Error: not run: this tool needs approval")
            && tools[1].contains("subagent_auto_approve_all = false"),
        "{tools:?}"
    );
    let results = tool_messages(&ws.history());
    assert!(
        results[0].starts_with("done: Error: not run"),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_bad_prompt_is_a_tool_error_and_the_tool_is_top_level_only() {
    let h = Harness::with(|o| o.config.skip_permissions = true).await;
    register_subagent(h.manager.engine()).unwrap();
    let registry = h.manager.engine().registry();
    let def = registry.get("task_agent").unwrap().definition().clone();
    assert!(!def.meta.task_agent && !def.meta.auto_approve);
    assert_eq!(
        registry.provenance("task_agent"),
        Some(turnstone_tools::Provenance::Builtin)
    );
    let ws = h.workstream();
    let mut sub = send(&ws, r#"CALL:task_agent {"prompt": "   "}"#);
    read_turn(&mut sub).await;
    // The tool words its own error; the engine adds no second `Error: ` prefix.
    let results = tool_messages(&ws.history());
    assert_eq!(
        results[0], "Error: argument 'prompt' must not be empty",
        "{results:?}"
    );
    let mut sub = send(&ws, r#"CALL:task_agent {"prompt": 42}"#);
    read_turn(&mut sub).await;
    let results = tool_messages(&ws.history());
    assert!(
        results[1].ends_with("Error: argument 'prompt' must be a string"),
        "{results:?}"
    );
    assert_eq!(
        h.llm.requests().iter().filter(|r| is_sub(r)).count(),
        0,
        "no sub-agent ran"
    );
}

#[tokio::test]
async fn an_unattended_sub_agent_runs_only_what_needs_no_approval() {
    // subagent_approvals = unattended, subagent_auto_approve_all = false. A read inside the
    // workspace runs; a read outside it (label `read_file_outside`) needs a decision nobody
    // can give, as bash does.
    let h = Harness::with(|o| o.config.subagent_approvals = SubagentApprovals::Unattended).await;
    register_subagent(h.manager.engine()).unwrap();
    std::fs::write(h.path("inside.txt"), "inside line\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside secret\n").unwrap();
    let ws = h.workstream();
    let prompt = format!(
        "{}\n{}",
        r#"CALL:read_file {"path": "inside.txt"}"#,
        format_args!(
            "CALL:read_file {}",
            json!({"path": outside.path().join("secret.txt")})
        )
    );
    let mut sub = send(&ws, &delegate(&prompt));
    let events = read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    assert!(matches!(events.last(), Some(Event::ApproveRequest { .. })));
    ws.approve(true, None, false);
    read_turn(&mut sub).await;
    let tools = second_sub_request_tool_results(&h);
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert!(tools[0].contains("inside line"), "{tools:?}");
    assert!(
        tools[1].starts_with("Error: not run: this tool needs approval")
            && !tools[1].contains("outside secret"),
        "{tools:?}"
    );
}

/// The pending rounds' `(cycle_id, request_id, call_ids, header of the first item)`.
fn rounds(pending: &[Arc<Envelope>]) -> Vec<(String, String, Vec<String>, String)> {
    pending
        .iter()
        .map(|env| match &env.event {
            Event::ApproveRequest {
                request_id,
                items,
                cycle_id,
                ..
            } => (
                cycle_id.clone(),
                request_id.clone(),
                items.iter().map(|i| i.call_id.clone()).collect(),
                items[0].header.clone(),
            ),
            other => panic!("not an approval: {other:?}"),
        })
        .collect()
}

/// The parent asks about two `task_agent` calls, is approved, and both sub-agents start:
/// each asks about its bash call through the parent, so two rounds wait at once. Returns
/// the rounds, the one whose command has `one` first.
async fn two_sub_agents_waiting(
    ws: &turnstone_engine::WorkstreamHandle,
    one: &str,
    two: &str,
) -> (
    turnstone_engine::Subscription,
    Vec<(String, String, Vec<String>, String)>,
) {
    let message = format!(
        "{}\n{}",
        delegate(&format!("TOOL: echo one > {one}")),
        delegate(&format!("TOOL: echo two > {two}"))
    );
    let mut sub = send(ws, &message);
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    assert_eq!(ws.pending_approvals().len(), 1, "the parent's own round");
    ws.approve(true, None, false);
    turnstone_testkit::assert_eventually!(ws.pending_approvals().len() == 2, "both sub-agents ask");
    let mut rounds = rounds(&ws.pending_approvals());
    rounds.sort_by_key(|r| !r.3.contains("echo one"));
    assert!(rounds[0].3.contains("echo one") && rounds[1].3.contains("echo two"));
    (sub, rounds)
}

#[tokio::test]
async fn parallel_sub_agents_each_ask_through_the_parent_in_their_own_round() {
    let h = Harness::start().await;
    register_subagent(h.manager.engine()).unwrap();
    let ws = h.workstream();
    let (one, two) = (h.path("one.txt"), h.path("two.txt"));
    let (one_s, two_s) = (one.display().to_string(), two.display().to_string());
    let (mut sub, rounds) = two_sub_agents_waiting(&ws, &one_s, &two_s).await;
    let [
        (cycle_a, request_a, calls_a, _),
        (cycle_b, request_b, calls_b, _),
    ] = &rounds[..]
    else {
        unreachable!()
    };
    assert_ne!(cycle_a, cycle_b);
    assert_ne!(request_a, request_b);
    assert_eq!(cycle_a.len(), 16, "{cycle_a}");
    // The sub-agents' calls are qualified with their ids: never the same on the parent.
    assert_eq!(calls_a.len(), 1);
    assert!(
        calls_a[0].starts_with("agent-") && calls_a[0].ends_with("/call_0"),
        "{calls_a:?}"
    );
    assert_ne!(calls_a, calls_b);
    assert_eq!(ws.state(), WsState::Attention);
    assert!(
        !one.exists() && !two.exists(),
        "nothing runs before its decision"
    );

    // Each round is decided on its own: one by a member call_id ("always": the label joins
    // the parent's set), the other by its cycle_id.
    match ws.approve_round(RoundRef::Call(&calls_a[0]), true, None, true) {
        ApproveOutcome::Resolved(v) => assert_eq!(&v.cycle_id, cycle_a),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        ws.pending_approvals().len(),
        1,
        "the other round still waits"
    );
    turnstone_testkit::assert_eventually!(
        ws.always_approved().contains("bash"),
        "an always decision of a sub-agent's round joins the parent's set"
    );
    match ws.approve_round(
        RoundRef::Cycle(cycle_b),
        false,
        Some("not that".into()),
        false,
    ) {
        ApproveOutcome::Resolved(v) => assert!(!v.approved && &v.request_id == request_b),
        other => panic!("{other:?}"),
    }
    // Decided once; an id naming no round is unknown.
    for which in [
        RoundRef::Cycle(cycle_a),
        RoundRef::Request(request_b),
        RoundRef::Call(&calls_b[0]),
    ] {
        assert!(
            matches!(
                ws.approve_round(which, true, None, false),
                ApproveOutcome::NotPending(Some(_))
            ),
            "{which:?}"
        );
    }
    assert_eq!(
        ws.approve_round(RoundRef::Cycle("0000000000000000"), true, None, false),
        ApproveOutcome::Unknown
    );

    let events = read_turn(&mut sub).await;
    assert_eq!(ws.state(), WsState::Idle);
    assert_eq!(std::fs::read_to_string(&one).unwrap(), "one\n");
    assert!(!two.exists(), "the denied sub-agent's call never ran");
    let resolved: Vec<(bool, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalResolved {
                approved, cycle_id, ..
            } => Some((*approved, cycle_id.clone())),
            _ => None,
        })
        .collect();
    // The parent's own round first (approved above), then the sub-agents' rounds.
    assert_eq!(
        resolved[1..],
        [(true, cycle_a.clone()), (false, cycle_b.clone())],
        "each resolution names its round"
    );
    let results = tool_messages(&ws.history());
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("done: "), "{results:?}");
    assert!(
        results[1].contains("Denied by user: not that"),
        "{results:?}"
    );
    assert_provider_acceptable(&ws.history());
}

#[tokio::test]
async fn a_cancel_resolves_every_pending_round() {
    let h = Harness::start().await;
    register_subagent(h.manager.engine()).unwrap();
    let ws = h.workstream();
    let (one, two) = (h.path("one.txt"), h.path("two.txt"));
    let (one_s, two_s) = (one.display().to_string(), two.display().to_string());
    let (mut sub, rounds) = two_sub_agents_waiting(&ws, &one_s, &two_s).await;
    assert!(ws.cancel());
    let events = read_turn(&mut sub).await;
    let cancelled: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalResolved {
                approved: false,
                feedback,
                cycle_id,
            } if feedback == "Cancelled by user" => Some(cycle_id),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled.len(), 2, "{events:?}");
    assert!(cancelled.contains(&&rounds[0].0) && cancelled.contains(&&rounds[1].0));
    assert!(ws.pending_approvals().is_empty());
    assert!(!one.exists() && !two.exists());
    assert_eq!(ws.state(), WsState::Idle);
    assert_provider_acceptable(&ws.history());
}
