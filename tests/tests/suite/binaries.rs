//! The shipped binaries, run from the outside as processes. They belong to other packages, so
//! they are found next to this test executable (see `turnstone_e2e::workspace_binary`); build
//! them first with `cargo build --workspace --bins`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// Generous: a debug build on a loaded 2-core machine.
const PROCESS_DEADLINE: Duration = Duration::from_secs(60);

fn binary(name: &str) -> PathBuf {
    turnstone_e2e::workspace_binary(name).unwrap_or_else(|e| panic!("{e}"))
}

/// The demo with a clean environment (no endpoint from the caller's shell) in `cwd`.
fn demo(cwd: &std::path::Path) -> Command {
    let mut cmd = Command::new(binary("turnstone-demo"));
    cmd.current_dir(cwd)
        .env_remove("TURNSTONE_BASE_URL")
        .env_remove("TURNSTONE_MODEL")
        .env_remove("TURNSTONE_API_KEY")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn finish(child: tokio::process::Child) -> std::process::Output {
    tokio::time::timeout(PROCESS_DEADLINE, child.wait_with_output())
        .await
        .expect("the process did not finish in time")
        .unwrap()
}

#[tokio::test]
async fn the_fake_llm_binary_serves_models_and_streams_then_exits_on_sigterm() {
    let mut child = Command::new(binary("turnstone-fake-llm"))
        .args([
            "--port",
            "0",
            "--model",
            "e2e-model",
            "--context-window",
            "12345",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(PROCESS_DEADLINE, stdout.next_line())
        .await
        .expect("no listening line in time")
        .unwrap()
        .expect("stdout closed before the listening line");
    let base = line
        .strip_prefix("turnstone-fake-llm listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/v1"),
        "{base}"
    );

    let client = reqwest::Client::new();
    let models: Value = client
        .get(format!("{base}/models"))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "e2e-model");
    assert_eq!(models["data"][0]["max_model_len"], 12345);
    assert!(models["data"][0].get("created").is_none(), "{models}");

    let prompt = "hi from the outside, ünïcode included";
    let response = client
        .post(format!("{base}/chat/completions"))
        .json(&json!({
            "model": "e2e-model",
            "messages": [{"role": "user", "content": prompt}],
            "stream": true,
            "stream_options": {"include_usage": true},
        }))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    let content_type = response.headers()["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let body = response.text().await.unwrap();
    let payloads: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(payloads.last(), Some(&"[DONE]"), "{body}");
    let chunks: Vec<Value> = payloads[..payloads.len() - 1]
        .iter()
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, prompt);
    assert!(
        chunks.len() > 3,
        "content arrives in several chunks: {body}"
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let finish: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .collect();
    assert_eq!(finish, ["stop"]);
    let usage = &chunks.last().unwrap()["usage"];
    assert!(usage["total_tokens"].as_u64().unwrap() > 0, "{body}");

    let pid = child.id().expect("still running").to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(PROCESS_DEADLINE, child.wait())
        .await
        .expect("no exit after SIGTERM")
        .unwrap();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut stderr).await.unwrap();
    }
    assert!(
        status.success(),
        "graceful exit on SIGTERM: {status:?}\n{stderr}"
    );
}

#[tokio::test]
async fn the_demo_runs_prompts_with_a_tool_call_and_exits_zero() {
    let cwd = tempfile::tempdir().unwrap();
    let child = demo(cwd.path())
        .args([
            "--skip-permissions",
            "hello",
            "TOOL: echo from-demo",
            "TOOL: touch made-by-demo",
        ])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let output = finish(child).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    for needle in ["hello", "from-demo", "done: from-demo"] {
        assert!(
            stdout.contains(needle),
            "{needle:?} missing from stdout:\n{stdout}"
        );
    }
    // The tool ran in the demo's working directory.
    assert!(cwd.path().join("made-by-demo").is_file(), "{stdout}");
}

#[tokio::test]
async fn the_demo_reads_prompts_and_a_denial_from_stdin() {
    let cwd = tempfile::tempdir().unwrap();
    let mut child = demo(cwd.path()).stdin(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"TOOL: touch marker\nn: nope\n")
        .await
        .unwrap();
    drop(stdin); // end of input: the demo exits after the prompt
    let output = finish(child).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(stdout.contains("approve?"), "{stdout}");
    assert!(
        stdout.contains("done: Denied by user: nope"),
        "the denial text reached the model:\n{stdout}"
    );
    assert!(
        !cwd.path().join("marker").exists(),
        "a denied command must not run"
    );
}
