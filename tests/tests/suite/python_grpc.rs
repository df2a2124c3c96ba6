//! The gRPC contract from another language: `tests/py/grpc_client.py` generates a Python
//! client from `proto/turnstone/v1/*.proto` with grpcio-tools at test time and drives a real
//! `turnstone-server` on its HTTP port (gRPC shares it): reflection lists the services, auth
//! and bad input give their status codes, a tool call is approved, and the event stream,
//! dropped mid-turn, resumes from a sequence number with no gap and no duplicate; memories
//! and skills (written over HTTP) are read, and the workstream renamed.
//!
//! grpcio, grpcio-tools and grpcio-reflection live in the venv that `scripts/python-venv`
//! creates (`scripts/test` runs it); without them this test fails and says so.

use std::time::Duration;

use super::python_sdk::{Server, venv_python};

/// Generous: a debug build on a loaded 2-core machine. Guards against hangs only.
const PROCESS_DEADLINE: Duration = Duration::from_secs(90);

/// The checks the script must report as passed, in order.
const CHECKS: &[&str] = &[
    "codegen.protoc",
    "reflection.list_services",
    "reflection.file_containing_symbol",
    "auth.unauthenticated",
    "auth.bad_token",
    "list_workstreams",
    "create_workstream",
    "bad_input.unknown_workstream",
    "bad_input.empty_message",
    "bad_input.malformed",
    "bad_input.oversized",
    "stream_events.connected",
    "send.tool",
    "stream_events.approve_request",
    "stream_events.disconnected",
    "approve",
    "approve.decided_once",
    "resume.no_gap_no_duplicate",
    "resume.tool_result",
    "resume.content",
    "resume.turn_complete",
    "send_and_wait",
    "memories.list",
    "memories.search",
    "skills.list",
    "rename_workstream",
    "close_workstream",
];

#[tokio::test]
async fn a_python_client_generated_from_the_proto_files_drives_the_node() {
    let python = venv_python();
    let dir = tempfile::tempdir().unwrap();
    let token = format!("grpc-py-{}", std::process::id());
    let server = Server::start(dir.path(), &token).await;
    let target = server
        .url
        .strip_prefix("http://")
        .unwrap_or(&server.url)
        .to_string();

    let mut cmd = super::cluster::python_mq::python_script(&python, "grpc_client.py");
    cmd.args([target.as_str(), token.as_str()]);
    // grpcio honours proxy variables; the node is on loopback.
    for var in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "GRPC_PROXY"] {
        cmd.env_remove(var).env_remove(var.to_lowercase());
    }
    let child = cmd.spawn().unwrap();
    let output = tokio::time::timeout(PROCESS_DEADLINE, child.wait_with_output())
        .await
        .expect("grpc_client.py did not finish in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = format!(
        "grpc_client.py exited with {}\n--- stdout\n{stdout}--- stderr\n{}--- server stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        server.stderr()
    );
    assert!(output.status.success(), "{report}");
    let passed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .filter_map(|l| l.split_once(':').map(|(name, _)| name))
        .collect();
    assert_eq!(passed, CHECKS, "{report}");
    assert!(
        stdout
            .lines()
            .last()
            .is_some_and(|l| l.starts_with(&format!("all {} checks passed", CHECKS.len()))),
        "{report}"
    );
}
