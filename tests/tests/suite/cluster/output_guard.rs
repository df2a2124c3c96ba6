//! The output guard end to end (issue 14): secrets printed by `bash`, read by `read_file` and
//! returned by an MCP tool reach no model request, no row of the node's database, no SSE
//! replay and no entry of the Redis stream a real bridge relays to — only their
//! `[REDACTED:…]` markers and an `output_warning` per call do.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use turnstone_testkit::FakeLlm;

use super::harness::*;

/// Every fixture of `turnstone_testkit::secrets` joined into one text (the unterminated
/// key last), and (name, secret) pairs.
fn fixtures() -> (String, Vec<(&'static str, String)>) {
    let cases = turnstone_testkit::secrets::cases();
    let mut text = String::new();
    for (_, output, _) in &cases {
        text.push_str(output);
        if !output.ends_with('\n') {
            text.push('\n');
        }
    }
    (text, cases.into_iter().map(|(n, _, s)| (n, s)).collect())
}

/// Fails naming every fixture whose secret occurs in `haystack`.
fn assert_no_secret(haystack: &str, secrets: &[(&str, String)], place: &str) {
    let leaked: Vec<&str> = secrets
        .iter()
        .filter(|(_, s)| haystack.contains(s.as_str()))
        .map(|(n, _)| *n)
        .collect();
    assert!(leaked.is_empty(), "secrets leaked into {place}: {leaked:?}");
}

/// Every text value of every table of the SQLite database at `path`.
async fn database_text(path: &std::path::Path) -> String {
    use sqlx::Row;
    let url = format!("sqlite://{}?mode=ro", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&pool)
            .await
            .unwrap();
    let mut text = String::new();
    for table in &tables {
        let columns: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info(?)")
            .bind(table)
            .fetch_all(&pool)
            .await
            .unwrap();
        for column in &columns {
            // Names read from the database's own catalogue, quoted.
            let sql = format!("SELECT CAST(\"{column}\" AS TEXT) FROM \"{table}\"");
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .fetch_all(&pool)
                .await
                .unwrap();
            for row in rows {
                if let Ok(Some(value)) = row.try_get::<Option<String>, _>(0) {
                    text.push_str(&value);
                    text.push('\n');
                }
            }
        }
    }
    pool.close().await;
    text
}

/// The workstream's SSE stream replayed from its start (`Last-Event-ID: 0`), read until its
/// first `turn_complete`.
async fn sse_replay(node: &NodeProc, ws: &str) -> Vec<Value> {
    let resp = node
        .http
        .get(format!("{}/v1/api/events?ws_id={ws}", node.url))
        .bearer_auth(mint_token())
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let mut buf = String::new();
    let mut events = Vec::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("the replay stalled before turn_complete")
            .expect("the replay ended")
            .unwrap();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        for (_, v) in take_sse_frames(&mut buf) {
            let done = v["type"] == "turn_complete";
            events.push(v);
            if done {
                return events;
            }
        }
    }
}

#[tokio::test]
async fn secrets_from_bash_files_and_mcp_reach_no_model_request_database_sse_replay_or_redis() {
    let python = turnstone_testkit::mcp_fixtures::python();
    assert!(
        std::path::Path::new(&python).exists(),
        "the MCP venv is missing: run crates/mcp/tests/fixtures/setup.sh (scripts/services does it)"
    );
    let (text, secrets) = fixtures();
    assert!(secrets.len() >= 25, "{} formats", secrets.len());
    let llm = FakeLlm::start().await;
    let config_dir = tempfile::tempdir().unwrap();
    let mcp = config_dir.path().join("mcp.json");
    // The MCP server's `env` tool returns one environment variable: the fixtures.
    std::fs::write(
        &mcp,
        json!({"mcpServers": {"py": {
            "command": python,
            "args": [turnstone_testkit::mcp_fixtures::dir().join("stdio_server.py")],
            "env": {"GUARD_FIXTURES": text},
        }}})
        .to_string(),
    )
    .unwrap();
    let node = NodeProc::start_full(
        "guard-node",
        Vec::new(),
        vec![
            "--base-url".into(),
            llm.base_url(),
            "--model".into(),
            "fake-model".into(),
            "--mcp-config".into(),
            mcp.display().to_string(),
        ],
    )
    .await;
    std::fs::write(node.dir.path().join("secrets.txt"), &text).unwrap();
    eventually(
        "the MCP server is ready",
        Duration::from_secs(30),
        || async { node.get("/health").await["mcp"]["connected"] == 1 },
    )
    .await;
    let mut mq = Mq::shared("guard").await;
    let _bridge = BridgeProc::start_with(
        &node,
        &mq.url,
        &mq.prefix,
        &["--allow-producer-auto-approve"],
    )
    .await;
    let ws = mq.create_ws("", json!({"auto_approve": true})).await;
    let ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let mut live = ps.into_on_message();
    // One batch of three calls; no command line or argument names a secret.
    let message = "TOOL: cat secrets.txt\n\
                   CALL:read_file {\"path\": \"secrets.txt\"}\n\
                   CALL:mcp__py__env {\"name\": \"GUARD_FIXTURES\"}";
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": message, "correlation_id": "9a4d00000001"}),
    )
    .await;
    let mut published = Vec::new();
    loop {
        let v = next_matching(&mut live, "no turn_complete", |_| true).await;
        let done = v["type"] == "turn_complete";
        published.push(v);
        if done {
            break;
        }
    }

    // The bridge published one warning per call, each redacted, and redacted results.
    let warnings: Vec<&Value> = published
        .iter()
        .filter(|v| v["type"] == "output_warning")
        .collect();
    assert_eq!(warnings.len(), 3, "{published:#?}");
    for w in &warnings {
        assert_eq!(w["redacted"], 1, "{w}");
        assert_eq!(w["risk_level"], "high", "{w}");
        assert!(
            w["flags"].as_str().unwrap().contains("credential_leak"),
            "{w}"
        );
    }
    let mut names: Vec<&str> = warnings
        .iter()
        .map(|w| w["func_name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["bash", "mcp__py__env", "read_file"]);
    let results: Vec<&str> = published
        .iter()
        .filter(|v| v["type"] == "tool_result")
        .map(|v| v["output"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 3, "{published:#?}");
    for r in &results {
        assert!(r.contains("[REDACTED:"), "{r}");
    }
    assert_no_secret(
        &serde_json::to_string(&published).unwrap(),
        &secrets,
        "the Redis pub/sub events",
    );

    // The Redis stream kept for late consumers.
    let stream = mq.stream(&ws).await;
    assert!(stream.iter().any(|e| e["type"] == "output_warning"));
    assert_no_secret(
        &serde_json::to_string(&stream).unwrap(),
        &secrets,
        "the Redis stream",
    );

    // The next model request carried the redacted results.
    let requests = serde_json::to_string(&llm.requests()).unwrap();
    assert!(requests.contains("[REDACTED:"), "the model saw the results");
    assert_no_secret(&requests, &secrets, "the model requests");

    // SSE replay: the workstream's stream from its start, and the node-wide stream.
    let replay = sse_replay(&node, &ws).await;
    assert!(replay.iter().any(|e| e["type"] == "output_warning"));
    assert!(
        replay.iter().any(|e| e["type"] == "tool_output_chunk"
            && e["chunk"].as_str().unwrap().contains("[REDACTED:")),
        "the bash output streamed, redacted"
    );
    assert_no_secret(
        &serde_json::to_string(&replay).unwrap(),
        &secrets,
        "the SSE replay",
    );
    assert_no_secret(
        &serde_json::to_string(&node.node_events().await).unwrap(),
        &secrets,
        "the node-wide SSE stream",
    );

    // Every text of every table of the node's database.
    let stored = database_text(&node.dir.path().join("node.db")).await;
    assert!(stored.contains("[REDACTED:"), "the turn is stored");
    assert_no_secret(&stored, &secrets, "the database");

    // The counters moved.
    let metrics = node.metrics().await;
    assert!(
        metrics.contains("turnstone_output_guard_redactions_total 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("turnstone_output_guard_flags_total{flag=\"credential_leak\"} 3"),
        "{metrics}"
    );
    mq.cleanup().await;
}
