//! `turnstone-grpc` (the `send`, `tail` and `approve` verbs over the node's gRPC API) against a
//! real `turnstone-server`: a turn waited for, a tool call approved, the event stream read
//! and resumed from a sequence number, and a missing credential refused.

use std::process::Output;
use std::time::Duration;

use super::python_sdk::Server;

const PROCESS_DEADLINE: Duration = Duration::from_secs(60);

async fn cli(url: &str, token: Option<&str>, args: &[&str]) -> Output {
    let binary =
        turnstone_e2e::workspace_binary("turnstone-grpc").unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = tokio::process::Command::new(binary);
    cmd.arg("--url")
        .arg(url)
        .args(args)
        .env_remove("TURNSTONE_TOKEN")
        .env_remove("TURNSTONE_URL")
        .kill_on_drop(true);
    if let Some(token) = token {
        cmd.arg("--token").arg(token);
    }
    tokio::time::timeout(PROCESS_DEADLINE, cmd.output())
        .await
        .expect("turnstone-grpc finished in time")
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "turnstone-grpc failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `seq json` lines: the sequence numbers and the events.
fn events(text: &str) -> Vec<(Option<u64>, serde_json::Value)> {
    text.lines()
        .map(|l| {
            let (seq, json) = l.split_once(' ').unwrap();
            (seq.parse().ok(), serde_json::from_str(json).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn send_tail_and_approve_over_grpc_from_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    let token = format!("grpc-cli-{}", std::process::id());
    let server = Server::start(dir.path(), &token).await;
    let url = server.url.clone();
    let list: serde_json::Value = reqwest::Client::new()
        .get(format!("{url}/v1/api/workstreams"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ws = list["workstreams"][0]["id"].as_str().unwrap().to_string();
    let t = Some(token.as_str());

    let waited = stdout(&cli(&url, t, &["send", "--ws", &ws, "--wait", "hello cli"]).await);
    assert_eq!(waited.trim(), "hello cli");

    let sent = stdout(&cli(&url, t, &["send", "--ws", &ws, "TOOL: echo from-cli"]).await);
    assert_eq!(sent.trim(), "ok");
    let first = events(&stdout(
        &cli(
            &url,
            t,
            &[
                "tail",
                "--ws",
                &ws,
                "--after",
                "0",
                "--until",
                "approve_request",
            ],
        )
        .await,
    ));
    assert_eq!(first.last().unwrap().1["type"], "approve_request");
    let seqs: Vec<u64> = first.iter().filter_map(|(s, _)| *s).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order: {seqs:?}");
    assert_eq!(first[0].1["type"], "state_change", "from the first turn on");
    let last = *seqs.last().unwrap();

    let approved = stdout(&cli(&url, t, &["approve", "--ws", &ws]).await);
    assert_eq!(approved.trim(), "ok");
    let rest = events(&stdout(
        &cli(
            &url,
            t,
            &[
                "tail",
                "--ws",
                &ws,
                "--after",
                &last.to_string(),
                "--until",
                "turn_complete",
            ],
        )
        .await,
    ));
    let rest_seqs: Vec<u64> = rest.iter().filter_map(|(s, _)| *s).collect();
    assert!(
        rest_seqs[0] > last,
        "resumed after the last seen: {rest_seqs:?}"
    );
    // (The LLM judge, on by default, may add an `info` line before the decision when the
    // scripted model gives it no verdict.)
    let decided = rest.iter().find(|(_, e)| e["type"] != "info").unwrap();
    assert_eq!(decided.1["type"], "approval_resolved", "nothing missed");
    let done = &rest.last().unwrap().1;
    assert_eq!(done["type"], "turn_complete");
    assert!(
        done["content"].as_str().unwrap().starts_with("done: "),
        "{done}"
    );

    let refused = cli(&url, None, &["send", "--ws", &ws, "no credential"]).await;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Unauthenticated"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

#[tokio::test]
async fn grpc_port_serves_grpc_alone() {
    let dir = tempfile::tempdir().unwrap();
    let token = format!("grpc-port-{}", std::process::id());
    let mut server = Server::start_with(dir.path(), &token, &["--grpc-port", "0"]).await;
    let line = server.next_line().await;
    let addr = line
        .strip_prefix("gRPC also listening on ")
        .unwrap_or_else(|| panic!("unexpected line {line:?}"))
        .trim()
        .to_string();
    let grpc_url = format!("http://{addr}");
    let list: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/v1/api/workstreams", server.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ws = list["workstreams"][0]["id"].as_str().unwrap().to_string();
    let waited = stdout(
        &cli(
            &grpc_url,
            Some(&token),
            &["send", "--ws", &ws, "--wait", "on the gRPC port"],
        )
        .await,
    );
    assert_eq!(waited.trim(), "on the gRPC port");
    // Plain HTTP there is refused: that port is gRPC only.
    let http = reqwest::Client::new()
        .get(format!("{grpc_url}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(http.status(), 415);
}
