//! `run_suite` in-process: each check type passing and failing, tool-call expectations with
//! real tools in the case's workspace, approval policies, multi-turn tasks, limits, the
//! judge, and A/B.

use turnstone_eval::report::Report;
use turnstone_eval::run_suite;
use turnstone_testkit::{FakeLlm, Fault, ScriptReply};

use super::{judge_on, options, suite, variant};

fn case<'a>(
    report: &'a turnstone_eval::runner::VariantReport,
    id: &str,
) -> &'a turnstone_eval::runner::CaseResult {
    report.cases.iter().find(|c| c.id == id).unwrap()
}

fn check_results(c: &turnstone_eval::runner::CaseResult) -> Vec<(String, bool)> {
    c.checks
        .iter()
        .map(|k| (k.kind.clone(), k.passed))
        .collect()
}

#[tokio::test]
async fn text_checks_pass_and_fail_on_the_model_reply() {
    let llm = FakeLlm::start().await;
    let s = suite(
        r#"
        [[cases]]
        id = "right"
        prompt = "hello world"
        checks = [
          { type = "exact", value = "hello world" },
          { type = "contains", value = "WORLD", ignore_case = true },
          { type = "not_contains", value = "goodbye" },
          { type = "regex", pattern = "^hello \\w+$" },
        ]
        [[cases]]
        id = "wrong"
        prompt = "hello world"
        checks = [
          { type = "exact", value = "goodbye" },
          { type = "contains", value = "WORLD" },
          { type = "not_contains", value = "hello" },
          { type = "regex", pattern = "^\\d+$" },
        ]
        "#,
    );
    let r = run_suite(&s, &variant("A", &llm, None).await, &options(None)).await;
    let right = case(&r, "right");
    assert!(right.passed, "{right:#?}");
    assert_eq!(right.replies, vec!["hello world"]);
    assert_eq!(right.score, 1.0);
    let wrong = case(&r, "wrong");
    assert!(!wrong.passed);
    assert_eq!(wrong.score, 0.0);
    assert!(wrong.checks.iter().all(|k| !k.passed), "{wrong:#?}");
    assert!(
        wrong.checks[0]
            .detail
            .contains("expected \"goodbye\", got \"hello world\""),
        "{:?}",
        wrong.checks[0]
    );
    assert_eq!((r.passed, r.total), (1, 2));
    assert_eq!(r.pass_rate, 0.5);
    assert!(r.tokens > 0, "the cases' token use is counted");
}

#[tokio::test]
async fn tool_expectations_see_real_tools_in_the_case_workspace() {
    let llm = FakeLlm::start().await;
    let s = suite(
        r#"
        [[cases]]
        id = "writes"
        prompt = 'CALL:write_file {"path": "out/result.txt", "content": "answer=42"}'
        checks = [
          { type = "tool_called", tool = "write_file", args = { path = '^out/result\.txt$' }, max = 1 },
          { type = "tool_not_called", tool = "bash" },
          { type = "file", path = "out/result.txt", contains = "answer=42" },
          { type = "contains", value = "done:" },
        ]
        [[cases]]
        id = "reads-a-fixture"
        prompt = 'CALL:read_file {"path": "notes.txt"}'
        files = { "notes.txt" = "the fixture says kumquat" }
        checks = [
          { type = "tool_called", tool = "read_file", args = { path = "notes" } },
          { type = "contains", value = "kumquat" },
        ]
        [[cases]]
        id = "misses"
        prompt = "TOOL: echo from-bash"
        checks = [
          { type = "tool_called", tool = "bash", args = { command = "^rm " } },
          { type = "tool_not_called", tool = "bash" },
          { type = "tool_called", tool = "write_file" },
          { type = "file", path = "out/result.txt" },
        ]
        "#,
    );
    let r = run_suite(&s, &variant("A", &llm, None).await, &options(None)).await;
    let writes = case(&r, "writes");
    assert!(writes.passed, "{writes:#?}");
    assert_eq!(writes.tool_calls.len(), 1);
    assert_eq!(writes.tool_calls[0].arguments["content"], "answer=42");
    assert!(writes.tool_calls[0].output.is_some());
    let reads = case(&r, "reads-a-fixture");
    assert!(reads.passed, "{reads:#?}");
    // Each case has its own workspace: the file the first case wrote is not in the third's.
    let misses = case(&r, "misses");
    assert_eq!(
        check_results(misses),
        vec![
            ("tool_called".into(), false),
            ("tool_not_called".into(), false),
            ("tool_called".into(), false),
            ("file".into(), false),
        ],
        "{misses:#?}"
    );
    assert_eq!(misses.tool_calls[0].name, "bash");
    assert!(
        misses.tool_calls[0]
            .output
            .as_deref()
            .unwrap()
            .contains("from-bash"),
        "bash really ran: {misses:#?}"
    );
}

#[tokio::test]
async fn the_deny_policy_denies_what_needs_approval_and_runs_the_rest() {
    let llm = FakeLlm::start().await;
    let s = suite(
        r#"
        [defaults]
        approval = "deny"
        [[cases]]
        id = "bash-denied"
        prompt = "TOOL: touch made-by-bash"
        checks = [
          { type = "tool_called", tool = "bash" },
          { type = "file", path = "made-by-bash" },
        ]
        [[cases]]
        id = "read-runs"
        prompt = 'CALL:read_file {"path": "a.txt"}'
        files = { "a.txt" = "plain text" }
        checks = [{ type = "contains", value = "plain text" }]
        "#,
    );
    let r = run_suite(&s, &variant("A", &llm, None).await, &options(None)).await;
    let denied = case(&r, "bash-denied");
    assert_eq!(
        check_results(denied),
        vec![("tool_called".into(), true), ("file".into(), false)],
        "{denied:#?}"
    );
    let output = denied.tool_calls[0].output.clone().unwrap();
    assert!(
        output.contains(turnstone_eval::runner::DENIAL),
        "the model saw why: {output}"
    );
    assert!(case(&r, "read-runs").passed, "{r:#?}");
}

#[tokio::test]
async fn a_multi_turn_task_keeps_its_conversation_and_checks_the_last_reply() {
    let llm = FakeLlm::start().await;
    let s = suite(
        r#"
        [[cases]]
        id = "two-turns"
        turns = ["first message", "second message"]
        checks = [{ type = "exact", value = "second message" }]
        "#,
    );
    let r = run_suite(&s, &variant("A", &llm, None).await, &options(None)).await;
    let c = case(&r, "two-turns");
    assert!(c.passed, "{c:#?}");
    assert_eq!(c.replies, vec!["first message", "second message"]);
    let last = llm.last_request().unwrap();
    let contents: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        contents,
        vec!["first message", "first message", "second message"],
        "the second turn carries the first"
    );
}

#[tokio::test]
async fn limits_end_a_case_time_and_model_requests() {
    let llm = FakeLlm::start().await;
    let s = suite(
        r#"
        [[cases]]
        id = "hangs"
        prompt = "anything"
        timeout_secs = 1
        checks = [{ type = "contains", value = "anything" }]
        [[cases]]
        id = "one-request"
        prompt = "TOOL: echo looping"
        max_turns = 1
        checks = [{ type = "tool_called", tool = "bash", max = 1 }]
        "#,
    );
    llm.push_fault(Fault::Hang);
    let r = run_suite(&s, &variant("A", &llm, None).await, &options(None)).await;
    let hangs = case(&r, "hangs");
    assert!(!hangs.passed);
    assert_eq!(hangs.error.as_deref(), Some("timed out after 1s"));
    assert!(hangs.duration_ms < 10_000, "{hangs:#?}");
    let limited = case(&r, "one-request");
    assert!(limited.passed, "{limited:#?}");
    // The tool ran once; the model was not asked again for a reply.
    assert_eq!(limited.replies, vec![""]);
}

#[tokio::test]
async fn a_failed_run_is_retried_and_an_unretried_one_is_an_error() {
    let llm = FakeLlm::start().await;
    let s = suite(
        r#"
        [[cases]]
        id = "flaky"
        prompt = "steady"
        checks = [{ type = "exact", value = "steady" }]
        "#,
    );
    // More failures than the client's own retries: the turn fails.
    for _ in 0..8 {
        llm.push_fault(Fault::Status {
            code: 400,
            retry_after: None,
            body: "{\"error\": {\"message\": \"bad day\"}}".into(),
        });
    }
    let a = variant("A", &llm, None).await;
    let r = run_suite(&s, &a, &options(None)).await;
    let c = case(&r, "flaky");
    assert!(!c.passed);
    assert!(c.error.as_deref().unwrap().contains("bad day"), "{c:#?}");
    assert_eq!(c.attempts, 1);

    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::Status {
        code: 400,
        retry_after: None,
        body: "{\"error\": {\"message\": \"bad day\"}}".into(),
    });
    let a = variant("A", &llm, None).await;
    let mut opts = options(None);
    opts.retries = 2;
    let r = run_suite(&s, &a, &opts).await;
    let c = case(&r, "flaky");
    assert!(c.passed, "{c:#?}");
    assert_eq!(c.attempts, 2);
}

#[tokio::test]
async fn the_judge_passes_fails_and_never_passes_without_a_verdict() {
    let llm = FakeLlm::start().await;
    let judge_llm = FakeLlm::start().await;
    judge_llm.push_reply(ScriptReply::text("PASS: it names the capital"));
    judge_llm.push_reply(ScriptReply::text("FAIL: the answer is rude"));
    let s = suite(
        r#"
        [[cases]]
        id = "judged-pass"
        prompt = "Paris is the capital of France."
        checks = [{ type = "judge", criteria = "names the capital of France" }]
        [[cases]]
        id = "judged-fail"
        prompt = "Go away."
        checks = [{ type = "judge", criteria = "is polite" }]
        [[cases]]
        id = "no-verdict"
        prompt = "whatever"
        checks = [{ type = "judge", criteria = "anything" }]
        "#,
    );
    let judge = judge_on(&judge_llm).await;
    let r = run_suite(&s, &variant("A", &llm, None).await, &options(Some(judge))).await;
    let pass = case(&r, "judged-pass");
    assert!(pass.passed, "{pass:#?}");
    assert_eq!(pass.checks[0].detail, "it names the capital");
    let fail = case(&r, "judged-fail");
    assert!(!fail.passed);
    assert_eq!(fail.checks[0].detail, "the answer is rude");
    // No queued answer: the scripted judge echoes its prompt, which is no verdict.
    let none = case(&r, "no-verdict");
    assert!(!none.passed);
    assert!(
        none.checks[0].detail.contains("has no verdict"),
        "{:?}",
        none.checks[0]
    );
    // The judge saw the case's task, reply and criteria, under its own model name.
    let asked = &judge_llm.requests()[0];
    assert_eq!(asked["model"], "judge-model");
    let prompt = asked["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.contains("names the capital of France"), "{prompt}");
    assert!(
        prompt.contains("Final reply:\nParis is the capital of France."),
        "{prompt}"
    );

    // Without a judge the check fails saying so.
    let r = run_suite(&s, &variant("A", &llm, None).await, &options(None)).await;
    assert_eq!(
        case(&r, "judged-pass").checks[0].detail,
        "no judge model is configured"
    );
}

#[tokio::test]
async fn a_b_compares_two_models_and_two_system_prompts() {
    let a_llm = FakeLlm::start().await;
    let b_llm = FakeLlm::start().await;
    // B's model answers the first case wrongly.
    b_llm.push_reply(ScriptReply::text("something else"));
    let s = suite(
        r#"
        system_prompt = "suite prompt"
        [[cases]]
        id = "one"
        prompt = "alpha"
        checks = [{ type = "exact", value = "alpha" }]
        [[cases]]
        id = "two"
        prompt = "beta"
        checks = [{ type = "exact", value = "beta" }]
        "#,
    );
    let a = variant("A", &a_llm, None).await;
    let b = variant("B", &b_llm, Some("You are B.")).await;
    let ra = run_suite(&s, &a, &options(None)).await;
    let rb = run_suite(&s, &b, &options(None)).await;
    // A ran under the suite's prompt, B under its own.
    assert_eq!(
        a_llm.requests()[0]["messages"][0]["content"],
        "suite prompt"
    );
    assert_eq!(b_llm.requests()[0]["messages"][0]["content"], "You are B.");
    assert_eq!(ra.system_prompt.as_deref(), Some("suite prompt"));
    assert_eq!(rb.system_prompt.as_deref(), Some("You are B."));

    let report = Report::new(&s.name, 0.75, vec![ra, rb]);
    let c = report.comparison.as_ref().unwrap();
    assert_eq!(c.regressed, vec!["one"]);
    assert!(c.improved.is_empty());
    assert_eq!(c.unchanged, 1);
    assert_eq!(c.pass_rate_delta, -0.5);
    assert!(!report.passed, "B's 50% misses 75%");
    let table = report.table();
    assert!(table.contains("regressed (1): one"), "{table}");
    assert!(
        table.contains("[B] exact: expected \"alpha\", got \"something else\""),
        "{table}"
    );
}
