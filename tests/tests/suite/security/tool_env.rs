//! Item 9: a `bash` command sees only the allow-listed environment (PATH, HOME, LANG, …)
//! plus `[tools] env_passthrough`; the node's secrets never reach it.

use serde_json::json;

use super::super::cluster::harness::*;
use super::node_events::call_output;

/// The node's environment: secrets under names a deny-list of suffixes misses, and one
/// harmless variable.
const NODE_ENV: [(&str, &str); 4] = [
    (
        "TURNSTONE_DB_URL",
        "postgresql://turnstone:hunter2-db-password@127.0.0.1:5432/unused",
    ),
    ("OPENAI_API_KEY", "sk-security-suite-key"),
    ("MY_SERVICE_DSN", "mysql://svc:dsn-password@127.0.0.1/db"),
    ("SEC_PASSED_THROUGH", "visible-extra"),
];

/// What `env` prints in a bash tool call on a node started with [`NODE_ENV`] and `args`.
async fn bash_env(node_id: &str, args: Vec<String>) -> String {
    let env = NODE_ENV
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut args = args;
    args.push("--skip-permissions".into());
    let node = NodeProc::start_full(node_id, env, args).await;
    call_output(&node, "env", "bash", &json!({"command": "env"})).await
}

#[tokio::test]
async fn bash_gets_the_allow_list_and_no_secrets() {
    let output = bash_env("sec-env", Vec::new()).await;
    assert!(output.contains("PATH="), "{output}");
    for secret in [
        "hunter2-db-password",
        "sk-security-suite-key",
        "dsn-password",
        "TURNSTONE_",
        "MY_SERVICE_DSN",
        "SEC_PASSED_THROUGH",
    ] {
        assert!(!output.contains(secret), "{secret} reached bash:\n{output}");
    }

    // `[tools] env_passthrough` adds a name; secrets stay out.
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "[tools]\nenv_passthrough = [\"SEC_PASSED_THROUGH\", \"TURNSTONE_DB_URL\"]\n",
    )
    .unwrap();
    let output = bash_env(
        "sec-env-extra",
        vec!["--config".into(), config.path().to_str().unwrap().into()],
    )
    .await;
    assert!(
        output.contains("SEC_PASSED_THROUGH=visible-extra"),
        "{output}"
    );
    assert!(
        !output.contains("hunter2-db-password"),
        "TURNSTONE_* never passes:\n{output}"
    );
}
