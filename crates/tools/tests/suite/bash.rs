use serde_json::json;
use turnstone_tools::{BashTool, Tool, ToolContext};

use super::{Recorder, eventually, prepare, run};

fn ctx() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    (dir, ctx)
}

#[tokio::test]
async fn exit_zero_returns_stdout() {
    let (_d, ctx) = ctx();
    let out = run("bash", json!({"command": "echo hello; echo world"}), &ctx).await;
    assert!(!out.is_error);
    // Stripped of surrounding whitespace, as the original answers.
    assert_eq!(out.content, "hello\nworld");
}

#[tokio::test]
async fn empty_output_is_no_output_and_whitespace_only_output_too() {
    let (_d, ctx) = ctx();
    let out = run("bash", json!({"command": "true"}), &ctx).await;
    assert!(!out.is_error);
    assert_eq!(out.content, "(no output)");
    let blank = run("bash", json!({"command": "printf '  \\n\\n\\t'"}), &ctx).await;
    assert_eq!(blank.content, "(no output)");
    let padded = run(
        "bash",
        json!({"command": "printf '\\n  tool-output-42  \\n\\n'"}),
        &ctx,
    )
    .await;
    assert_eq!(padded.content, "tool-output-42");
}

#[tokio::test]
async fn exit_one_is_reported_but_not_an_error() {
    let (_d, ctx) = ctx();
    let out = run("bash", json!({"command": "grep nothing /dev/null"}), &ctx).await;
    assert!(!out.is_error);
    // Nothing printed: the exit-code line alone, after its line break (as the original).
    assert_eq!(out.content, "\n[exit code: 1]");
}

#[tokio::test]
async fn exit_two_and_more_is_an_error() {
    let (_d, ctx) = ctx();
    let out = run("bash", json!({"command": "echo partial; exit 2"}), &ctx).await;
    assert!(out.is_error);
    assert_eq!(out.content, "partial\n[exit code: 2]");
}

#[tokio::test]
async fn stderr_lines_are_marked_and_follow_stdout() {
    let (_d, ctx) = ctx();
    let out = run("bash", json!({"command": "echo oops >&2; echo fine"}), &ctx).await;
    // The original joins stdout and the tagged stderr with a line break even after stdout's
    // own, then strips the ends.
    assert_eq!(out.content, "fine\n\n[stderr] oops");
    let merged = run("bash", json!({"command": "echo oops 2>&1"}), &ctx).await;
    assert_eq!(merged.content, "oops");
    let only_stderr = run(
        "bash",
        json!({"command": "echo a >&2; echo b >&2; exit 3"}),
        &ctx,
    )
    .await;
    assert!(only_stderr.is_error);
    assert_eq!(
        only_stderr.content,
        "[stderr] a\n[stderr] b\n[exit code: 3]"
    );
}

#[tokio::test]
async fn death_by_signal_is_an_error() {
    let (_d, ctx) = ctx();
    let out = run("bash", json!({"command": "kill -TERM $$"}), &ctx).await;
    assert!(out.is_error);
    // Python's return code for death by signal N is -N.
    assert_eq!(out.content, "\n[exit code: -15]");
}

#[tokio::test]
async fn stop_on_error_aborts_the_script() {
    let (_d, ctx) = ctx();
    let out = run(
        "bash",
        json!({"command": "false\necho after", "stop_on_error": true}),
        &ctx,
    )
    .await;
    assert!(
        out.is_error,
        "non-zero exit under stop_on_error is an error"
    );
    assert!(!out.content.contains("after"), "{}", out.content);
    let lenient = run("bash", json!({"command": "false\necho after"}), &ctx).await;
    assert_eq!(lenient.content, "after");
}

#[tokio::test]
async fn pipefail_is_on() {
    let (_d, ctx) = ctx();
    let out = run("bash", json!({"command": "exit 3 | cat"}), &ctx).await;
    assert!(out.content.contains("[exit code: 3]"), "{}", out.content);
}

#[tokio::test]
async fn runs_in_the_context_cwd() {
    let (dir, ctx) = ctx();
    let out = run("bash", json!({"command": "pwd"}), &ctx).await;
    let expected = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(out.content.trim_end(), expected.to_string_lossy());
}

#[tokio::test]
async fn chunks_stream_line_by_line_in_order() {
    let (_d, ctx) = ctx();
    let tool = super::registry().get("bash").unwrap();
    let prepared = tool
        .prepare(
            json!({"command": "for i in 1 2 3 4 5; do echo line$i; done; echo err >&2"}),
            &ctx,
        )
        .unwrap();
    let rec = Recorder::default();
    let out = tool.execute(&prepared, &ctx, &rec).await;
    let chunks = rec.chunks();
    let stdout: Vec<_> = chunks
        .iter()
        .filter(|c| !c.starts_with("[stderr]"))
        .cloned()
        .collect();
    assert_eq!(
        stdout,
        ["line1\n", "line2\n", "line3\n", "line4\n", "line5\n"]
    );
    assert!(chunks.contains(&"[stderr] err\n".to_owned()));
    assert!(out.content.starts_with("line1\nline2\n"));
}

#[tokio::test]
async fn chunks_arrive_while_the_command_is_still_running() {
    let (dir, ctx) = ctx();
    let gate = dir.path().join("gate");
    let tool = super::registry().get("bash").unwrap();
    // Prints, then waits until the test has seen the line and opened the gate.
    let prepared = tool
        .prepare(
            json!({"command": "echo first; while [ ! -f gate ]; do sleep 0.05; done; echo second"}),
            &ctx,
        )
        .unwrap();
    let rec = Recorder::default();
    let exec = tool.execute(&prepared, &ctx, &rec);
    let watch = async {
        assert!(
            eventually(|| rec.chunks() == ["first\n"]).await,
            "first line was not streamed"
        );
        std::fs::write(&gate, "").unwrap();
    };
    let (out, ()) = tokio::join!(exec, watch);
    assert_eq!(out.content, "first\nsecond");
    assert_eq!(rec.chunks(), ["first\n", "second\n"]);
}

#[tokio::test]
async fn the_environment_is_the_allow_list_plus_configured_variables() {
    let (_d, ctx) = ctx();
    let tool = BashTool::new()
        .unwrap()
        .with_child_env(turnstone_tools::ChildEnv::new(["CARGO_*".to_string()]))
        .with_env("FOO_PLAIN", "visible");
    let prepared = tool
        .prepare(
            json!({"command": "env -0 | tr '\\0' '\\n' | cut -d= -f1"}),
            &ctx,
        )
        .unwrap();
    let out = tool
        .execute(&prepared, &ctx, &turnstone_tools::NoOutput)
        .await;
    let names: Vec<&str> = out.content.lines().filter(|l| !l.is_empty()).collect();
    assert!(names.contains(&"FOO_PLAIN"), "{names:?}");
    // cargo sets CARGO_* for tests: passed through by the configured prefix.
    assert!(names.iter().any(|n| n.starts_with("CARGO_")), "{names:?}");
    // bash itself adds a few (PWD, SHLVL, _); everything else is allowed by name.
    let env = turnstone_tools::ChildEnv::new(["CARGO_*".to_string()]);
    for name in names {
        assert!(
            env.allows(name) || ["FOO_PLAIN", "PWD", "SHLVL", "_", "OLDPWD"].contains(&name),
            "{name} reached the command"
        );
    }
}

#[tokio::test]
async fn destructive_commands_are_refused_at_prepare() {
    let (_d, ctx) = ctx();
    for cmd in [
        "rm -rf /",
        "mkfs.ext4 /dev/sda1",
        ":(){ :|:& };:",
        "chmod -R 777 /",
        "dd if=/dev/zero of=/dev/sda",
    ] {
        let err = prepare("bash", json!({"command": cmd}), &ctx).unwrap_err();
        assert!(err.contains("blocked"), "{cmd}: {err}");
    }
}

#[tokio::test]
async fn invalid_arguments_are_refused_at_prepare() {
    let (_d, ctx) = ctx();
    assert!(
        prepare("bash", json!({}), &ctx)
            .unwrap_err()
            .contains("missing required argument 'command'")
    );
    assert!(prepare("bash", json!({"command": "  "}), &ctx).is_err());
    assert!(prepare("bash", json!({"command": "ls", "timeout": 601}), &ctx).is_err());
    assert!(prepare("bash", json!({"command": "ls", "timeout": "soon"}), &ctx).is_err());
}

#[tokio::test]
async fn timeout_kills_and_reports() {
    let (dir, ctx) = ctx();
    let marker = dir.path().join("marker");
    let tool = super::registry().get("bash").unwrap();
    let prepared = tool
        .prepare(
            json!({"command": "echo started $$; sleep 30; touch marker", "timeout": 5}),
            &ctx,
        )
        .unwrap();
    let rec = Recorder::default();
    let exec = tool.execute(&prepared, &ctx, &rec);
    let watch = async {
        assert!(eventually(|| !rec.chunks().is_empty()).await);
        // From here on, time jumps forward whenever the runtime is idle: the timeout fires.
        tokio::time::pause();
    };
    let (out, ()) = tokio::join!(exec, watch);
    tokio::time::resume();
    assert!(out.is_error);
    assert!(
        out.content.starts_with("Command timed out after 5s"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("started"),
        "partial output kept: {}",
        out.content
    );
    let pid: u32 = rec.chunks()[0]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        eventually(|| process_gone(pid)).await,
        "shell {pid} still running"
    );
    assert!(!marker.exists());
}

/// Gone, or a zombie nobody has reaped yet: either way no longer running.
pub(super) fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie waiting for its reaper has stopped running.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn dropping_the_future_kills_the_whole_process_group() {
    let (dir, ctx) = ctx();
    let marker = dir.path().join("marker");
    let tool = super::registry().get("bash").unwrap();
    let prepared = tool
        .prepare(
            json!({"command": "sleep 30 & echo child $!; echo shell $$; wait; touch marker"}),
            &ctx,
        )
        .unwrap();
    let rec = Recorder::default();
    {
        let exec = tool.execute(&prepared, &ctx, &rec);
        tokio::pin!(exec);
        let seen = tokio::select! {
            _ = &mut exec => false,
            seen = eventually(|| rec.chunks().len() >= 2) => seen,
        };
        assert!(seen, "pids not streamed: {:?}", rec.chunks());
    } // dropped here
    let pids: Vec<u32> = rec
        .chunks()
        .iter()
        .filter_map(|c| c.split_whitespace().nth(1).and_then(|p| p.parse().ok()))
        .collect();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(
            eventually(|| process_gone(pid)).await,
            "process {pid} still running"
        );
    }
    assert!(!marker.exists());
}

#[tokio::test]
async fn background_job_holding_the_pipe_does_not_hang_the_call() {
    let (_d, ctx) = ctx();
    let out = run("bash", json!({"command": "sleep 60 & echo done"}), &ctx).await;
    assert!(!out.is_error);
    assert_eq!(out.content, "done");
}

#[tokio::test]
async fn output_respects_the_truncation_limit() {
    let (_d, mut ctx) = ctx();
    ctx.truncation_limit = 100;
    let out = run(
        "bash",
        json!({"command": "for i in $(seq 1 200); do echo line-$i; done"}),
        &ctx,
    )
    .await;
    assert!(out.content.starts_with("line-1\n"));
    assert!(out.content.ends_with("line-200"));
    assert!(
        out.content
            .contains("chars truncated — output exceeded 100 char limit"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn missing_working_directory_is_a_clear_error() {
    let (dir, _) = ctx();
    let ctx = ToolContext::new(dir.path().join("nope"));
    let out = run("bash", json!({"command": "true"}), &ctx).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("could not start bash"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_huge_line_is_streamed_in_pieces_and_kept_whole() {
    let (_d, ctx) = ctx();
    let tool = super::registry().get("bash").unwrap();
    let prepared = tool
        .prepare(
            json!({"command": "head -c 200000 /dev/zero | tr '\\0' a"}),
            &ctx,
        )
        .unwrap();
    let rec = Recorder::default();
    let out = tool.execute(&prepared, &ctx, &rec).await;
    assert!(rec.chunks().len() >= 4, "{} chunks", rec.chunks().len());
    assert!(rec.chunks().iter().all(|c| c.len() <= 64 * 1024));
    assert_eq!(out.content.len(), 200_000);
    assert!(out.content.bytes().all(|b| b == b'a'));
}
