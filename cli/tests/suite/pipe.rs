//! Pipe mode: prompts on stdin, replies on stdout, no terminal.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::{SCRUBBED_ENV, binary};

pub(super) struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `turnstone` with `input` on stdin (then end of input) and waits for it to exit.
async fn run(args: &[&str], input: &str) -> Run {
    let home = tempfile::tempdir().unwrap();
    run_with_db(args, input, &home.path().join("sessions.db")).await
}

/// [`run`] with sessions saved in `db`.
async fn run_with_db(args: &[&str], input: &str, db: &std::path::Path) -> Run {
    run_full(args, &[], input, db).await
}

/// [`run`] with extra environment variables.
pub(super) async fn run_env(args: &[&str], env: &[(&str, &str)], input: &str) -> Run {
    let home = tempfile::tempdir().unwrap();
    run_full(args, env, input, &home.path().join("sessions.db")).await
}

async fn run_full(args: &[&str], env: &[(&str, &str)], input: &str, db: &std::path::Path) -> Run {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(binary());
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home.path())
        .env("TURNSTONE_DB_PATH", db)
        .envs(env.iter().copied())
        .arg("--cwd")
        .arg(work.path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("turnstone did not exit at end of input")
        .unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[tokio::test]
async fn replies_come_in_prompt_order_as_plain_text() {
    let r = run(&[], "hello **there**\nsecond prompt\n").await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    assert_eq!(lines(&r.stdout), ["hello **there**", "second prompt"]);
    assert!(
        !r.stdout.contains('\x1b'),
        "no ANSI in pipe mode: {:?}",
        r.stdout
    );
    assert!(
        r.stderr.contains("built-in scripted model"),
        "says which model it uses: {}",
        r.stderr
    );
}

#[tokio::test]
async fn a_tool_call_runs_with_skip_permissions() {
    let r = run(&["--skip-permissions"], "TOOL: echo pipe-x\n").await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let out = lines(&r.stdout);
    assert!(out.contains(&"\u{2699} bash: echo pipe-x"), "{out:?}");
    assert!(
        out.contains(&"  \u{2502} pipe-x"),
        "tool output shown: {out:?}"
    );
    assert_eq!(out.last(), Some(&"done: pipe-x"), "{out:?}");
    assert!(!r.stdout.contains("denied"), "{out:?}");
}

#[tokio::test]
async fn without_skip_permissions_tool_calls_are_denied_as_non_interactive() {
    let r = run(&[], "TOOL: echo should-not-run\nafter\n").await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let out = lines(&r.stdout);
    assert!(
        out.iter()
            .any(|l| l.contains("non-interactive") && l.contains("--skip-permissions")),
        "the denial is explained: {out:?}"
    );
    assert!(
        out.contains(
            &"done: Denied by user: non-interactive. Effect: none \u{2014} it never started."
        ),
        "the model saw the denial feedback: {out:?}"
    );
    assert!(
        !out.iter().any(|l| l.contains('\u{2502}')),
        "the command did not run: {out:?}"
    );
    assert_eq!(
        out.last(),
        Some(&"after"),
        "the next prompt still ran: {out:?}"
    );
}

#[tokio::test]
async fn workstream_commands_work_through_a_pipe() {
    let r = run(
        &[],
        "first\n/ws new second\n/ws list\nin second\n/ws 1\n/ws list\n",
    )
    .await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let out = lines(&r.stdout);
    let created = out
        .iter()
        .position(|l| *l == "Created workstream 2: second (now current)")
        .unwrap_or_else(|| panic!("{out:?}"));
    let list = &out[created + 1..created + 3];
    assert!(
        list[0].starts_with("  1. ws-") && list[0].contains(" idle "),
        "{list:?}"
    );
    assert!(list[1].starts_with("* 2. second  idle  "), "{list:?}");
    assert!(out.contains(&"in second"));
    assert!(
        out.iter()
            .any(|l| l.starts_with("Switched to workstream 1: ws-")),
        "{out:?}"
    );
    assert!(out.last().unwrap().starts_with("  2. second"), "{out:?}");
    assert!(out[out.len() - 2].starts_with("* 1. ws-"), "{out:?}");
}

#[tokio::test]
async fn other_commands_answer_with_their_texts() {
    let input = "/frobnicate\n/resume my-session\n/model\n/clear\n/name alpha\n/ws list\n/ws close\n/ws 7\n/exit\nnever sent\n";
    let r = run(&[], input).await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let out = &r.stdout;
    assert!(
        out.contains("Unknown command: /frobnicate. Type /help for available commands."),
        "{out}"
    );
    assert!(out.contains("Cannot resume \"my-session\""), "{out}");
    assert!(out.contains("Model: fake-model"), "{out}");
    assert!(out.contains("Conversation context cleared."), "{out}");
    assert!(out.contains("* 1. alpha  idle"), "{out}");
    assert!(out.contains("Cannot close last workstream"), "{out}");
    assert!(out.contains("No workstream 7"), "{out}");
    assert!(!out.contains("never sent"), "/exit stops reading: {out}");
}

#[tokio::test]
async fn new_replaces_the_current_workstream_in_place() {
    // `/new` keeps the list position, with a fresh workstream (and so a fresh default name).
    // (`/clear` is checked in-process, where the conversation can be inspected.)
    let r = run(&[], "/name keep\n/ws new other\n/ws 1\n/new\n/ws list\n").await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let out = lines(&r.stdout);
    let n = out.len();
    assert!(out[n - 2].starts_with("* 1. ws-"), "{out:?}");
    assert!(out[n - 1].starts_with("  2. other"), "{out:?}");
    assert!(!r.stdout.contains("1. keep  idle"), "{out:?}");
}

#[tokio::test]
async fn unsupported_provider_and_bad_config_fail_clearly() {
    let r = run(&["--provider", "bedrock"], "").await;
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("`anthropic`"), "{}", r.stderr);
    let r = run(&["--provider", "anthropic", "--model", "m"], "").await;
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("ANTHROPIC_API_KEY"), "{}", r.stderr);

    let r = run(&["--config", "/nonexistent/turnstone.toml"], "").await;
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("not found"), "{}", r.stderr);
}

#[tokio::test]
async fn a_session_saved_in_one_run_resumes_in_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let first = run_with_db(&[], "remember the walrus\n/name walrus-chat\n", &db).await;
    assert_eq!(first.code, Some(0), "stderr: {}", first.stderr);

    let second = run_with_db(&[], "/resume walrus-chat\nwhat next\n", &db).await;
    assert_eq!(second.code, Some(0), "stderr: {}", second.stderr);
    assert!(
        second.stdout.contains("Resumed walrus-chat (2 messages)"),
        "{}",
        second.stdout
    );
    assert!(second.stdout.contains("what next"), "{}", second.stdout);

    let missing = run_with_db(&[], "/resume nothing-like-this\n", &db).await;
    assert!(
        missing.stdout.contains("Cannot resume"),
        "{}",
        missing.stdout
    );
}

#[tokio::test]
async fn tools_shows_the_tool_array_of_the_latest_request() {
    let r = run(&[], "/tools\nhello tools\n/tools\n").await;
    assert_eq!(r.code, Some(0), "stderr: {}", r.stderr);
    let out = &r.stdout;
    assert!(
        out.contains("No model request yet in this workstream."),
        "{out}"
    );
    let summary = out
        .lines()
        .find(|l| l.starts_with("Turn 1, request 1: "))
        .unwrap_or_else(|| panic!("no summary: {out}"));
    let sha = summary.rsplit("sha256 ").next().unwrap().trim();
    assert_eq!(sha.len(), 64, "{summary}");
    assert!(out.contains("  bash ("), "{out}");
    assert!(out.contains("  read_file ("), "{out}");
}
