//! Item 9: a `bash` command sees only the allow-listed environment (PATH, HOME, LANG, …)
//! plus `[tools] env_passthrough`; the node's secrets never reach it.

use serde_json::json;

use super::super::cluster::harness::*;
use super::node_events::{count, create_ws, send_until};

#[tokio::test]
async fn bash_gets_the_allow_list_and_no_secrets() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "[tools]\nenv_passthrough = [\"SEC_PASSED_THROUGH\"]\n",
    )
    .unwrap();
    let env = [
        (
            "TURNSTONE_DB_URL",
            "postgresql://turnstone:hunter2-db-password@127.0.0.1:5432/unused",
        ),
        ("OPENAI_API_KEY", "sk-security-suite-key"),
        ("MY_SERVICE_DSN", "mysql://svc:dsn-password@127.0.0.1/db"),
        ("SEC_PASSED_THROUGH", "visible-extra"),
    ];
    let node = NodeProc::start_full(
        "sec-env",
        env.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        vec![
            "--skip-permissions".into(),
            "--config".into(),
            config.path().to_str().unwrap().into(),
        ],
    )
    .await;
    let ws = create_ws(&node, "env").await;
    let events = send_until(
        &node,
        &ws,
        &format!("CALL:bash {}", json!({"command": "env"})),
        "the env listing",
        |events| count(events, "tool_result") >= 1,
    )
    .await;
    let output = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .and_then(|e| e["output"].as_str())
        .unwrap()
        .to_string();
    assert!(output.contains("PATH="), "{output}");
    assert!(
        output.contains("SEC_PASSED_THROUGH=visible-extra"),
        "{output}"
    );
    for secret in [
        "hunter2-db-password",
        "sk-security-suite-key",
        "dsn-password",
        "TURNSTONE_",
        "MY_SERVICE_DSN",
    ] {
        assert!(!output.contains(secret), "{secret} reached bash:\n{output}");
    }
}
