//! Item 8: file tools read inside the workstream's directory without asking; outside it
//! (absolute paths, `..`, symlinks resolved) the call needs approval under an `_outside`
//! label and the prompt shows the resolved path.

use serde_json::{Value, json};

use super::super::cluster::harness::*;
use super::node_events::{await_turns, count, create_ws, send_until};

fn approval(events: &[Value], nth: usize) -> Value {
    events
        .iter()
        .filter(|e| e["type"] == "approve_request")
        .nth(nth)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn reads_outside_the_workspace_ask_and_show_the_resolved_path() {
    let node = NodeProc::start("sec-files").await;
    std::fs::write(node.dir.path().join("inside.txt"), "inside text\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "TOP SECRET\n").unwrap();
    std::os::unix::fs::symlink(&secret, node.dir.path().join("link.txt")).unwrap();
    let real_secret = std::fs::canonicalize(&secret).unwrap();
    let real_secret = real_secret.to_str().unwrap();
    let ws = create_ws(&node, "files").await;

    // Inside: no approval, the content comes back.
    let events = send_until(
        &node,
        &ws,
        r#"CALL:read_file {"path": "inside.txt"}"#,
        "the inside read's result",
        |events| count(events, "tool_result") >= 1,
    )
    .await;
    assert_eq!(approval(&events, 0), Value::Null, "no approval inside");
    assert!(events.iter().any(|e| e["type"] == "tool_result"
        && e["output"].as_str().unwrap_or("").contains("inside text")));
    await_turns(&node, &ws, 1).await;

    // Outside, by absolute path, through `..`, and through a symlink in the workspace.
    let parent_relative = format!(
        "../{}/secret.txt",
        outside.path().file_name().unwrap().to_str().unwrap()
    );
    let attempts = [
        ("read_file", json!({"path": secret.to_str().unwrap()})),
        ("read_file", json!({"path": "link.txt"})),
        (
            "search",
            json!({"query": "SECRET", "path": outside.path().to_str().unwrap()}),
        ),
        (
            "diff_file",
            json!({"path_a": "inside.txt", "path_b": "link.txt"}),
        ),
    ];
    let in_tmp = node.dir.path().parent() == outside.path().parent();
    let attempts: Vec<(&str, Value)> = attempts
        .into_iter()
        .chain(in_tmp.then(|| ("read_file", json!({"path": parent_relative}))))
        .collect();
    for (i, (tool, args)) in attempts.iter().enumerate() {
        let events = send_until(
            &node,
            &ws,
            &format!("CALL:{tool} {args}"),
            &format!("an approval request for {tool} {args}"),
            |events| count(events, "approve_request") > i,
        )
        .await;
        let request = approval(&events, i);
        let item = &request["items"][0];
        assert_eq!(
            item["approval_label"],
            format!("{tool}_outside"),
            "{request}"
        );
        assert_eq!(item["needs_approval"], true, "{request}");
        let preview = item["preview"].as_str().unwrap_or_default();
        let expected = if *tool == "search" {
            std::fs::canonicalize(outside.path()).unwrap()
        } else {
            real_secret.into()
        };
        assert!(
            preview.contains(expected.to_str().unwrap()),
            "the prompt shows the resolved path {expected:?}: {request}"
        );
        assert!(
            !events.iter().any(|e| e.to_string().contains("TOP SECRET")),
            "nothing was read before the decision"
        );
        let (status, reply) = node
            .post("/v1/api/approve", json!({"ws_id": ws, "approved": false}))
            .await;
        assert_eq!(status, 200, "{reply}");
        await_turns(&node, &ws, 2 + i).await;
    }
}
