//! The `turnstone-eval` binary: exit status, table, JSON, A/B flags, bad suites, the seed.

use std::path::{Path, PathBuf};
use std::process::Output;

use turnstone_testkit::FakeLlm;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_turnstone-eval"))
}

/// Variables that would point the binary at the developer's setup.
const SCRUBBED_ENV: &[&str] = &[
    "TURNSTONE_BASE_URL",
    "TURNSTONE_API_KEY",
    "TURNSTONE_API_KEY_FILE",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "TURNSTONE_MODEL",
    "TURNSTONE_LOG_LEVEL",
    "RUST_LOG",
];

async fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = tokio::process::Command::new(binary());
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied()).args(args);
    cmd.output().await.unwrap()
}

fn write_suite(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const SUITE: &str = r#"
name = "smoke"
threshold = 0.5
[[cases]]
id = "echo"
prompt = "ping"
checks = [{ type = "exact", value = "ping" }]
[[cases]]
id = "expects-pong"
prompt = "ping"
checks = [{ type = "exact", value = "pong" }]
"#;

#[tokio::test]
async fn a_run_prints_the_table_and_meets_or_misses_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(dir.path(), "smoke.toml", SUITE);
    let json = dir.path().join("report.json");
    let out = run(
        &[suite.to_str().unwrap(), "--json", json.to_str().unwrap()],
        &[],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("suite: smoke"), "{stdout}");
    assert!(
        stdout.contains("expected \"pong\", got \"ping\""),
        "{stdout}"
    );
    assert!(stdout.contains("threshold 50%: met"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["variants"][0]["passed"], 1);
    assert_eq!(report["variants"][0]["model"], "fake-model");
    assert_eq!(report["passed"], true);

    // The same run with a higher bar: exit status 1.
    let out = run(&[suite.to_str().unwrap(), "--threshold", "1"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("threshold 100%: MISSED"));
}

#[tokio::test]
async fn a_b_by_system_prompt_reports_the_comparison_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(dir.path(), "smoke.toml", SUITE);
    let prompt = write_suite(dir.path(), "b.txt", "Answer like B.");
    let out = run(
        &[
            suite.to_str().unwrap(),
            "--system-prompt",
            "Answer like A.",
            "--b-system-prompt-file",
            prompt.to_str().unwrap(),
            "--json",
            "-",
        ],
        &[],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["variants"][0]["label"], "A");
    assert_eq!(report["variants"][0]["system_prompt"], "Answer like A.");
    assert_eq!(report["variants"][1]["label"], "B");
    assert_eq!(report["variants"][1]["system_prompt"], "Answer like B.");
    assert_eq!(report["comparison"]["unchanged"], 2);
    assert_eq!(report["comparison"]["cases"][0]["id"], "echo");
}

#[tokio::test]
async fn a_bad_suite_fails_with_status_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write_suite(
        dir.path(),
        "bad.json",
        r#"{"cases": [{"id": "a", "prompt": "x", "checks": [{"type": "regex", "patern": "x"}]}]}"#,
    );
    let out = run(&[bad.to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.json: cases[0].checks[0]: unknown field `patern`"),
        "{stderr}"
    );
    let out = run(&[dir.path().join("absent.toml").to_str().unwrap()], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("absent.toml: cannot read"));
}

#[tokio::test]
async fn the_seed_and_model_reach_the_endpoint_and_keys_never_show() {
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(dir.path(), "smoke.toml", SUITE);
    let key_file = write_suite(dir.path(), "key", "sk-very-secret\n");
    let out = run(
        &[
            suite.to_str().unwrap(),
            "--base-url",
            &llm.base_url(),
            "--model",
            "model-under-test",
            "--seed",
            "1234",
            "--log-level",
            "debug",
        ],
        &[("TURNSTONE_API_KEY_FILE", key_file.to_str().unwrap())],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = llm.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r["seed"], 1234, "{r}");
        assert_eq!(r["model"], "model-under-test");
    }
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !all.contains("sk-very-secret"),
        "the key was printed: {all}"
    );

    // Anthropic without a key is refused before anything runs.
    let out = run(
        &[
            suite.to_str().unwrap(),
            "--provider",
            "anthropic",
            "--model",
            "m",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ANTHROPIC_API_KEY"));
}

#[tokio::test]
async fn anthropic_is_evaluated_with_its_own_key() {
    let anthropic = turnstone_testkit::FakeAnthropic::start().await;
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(dir.path(), "smoke.toml", SUITE);
    let out = run(
        &[
            suite.to_str().unwrap(),
            "--provider",
            "anthropic",
            "--base-url",
            &anthropic.base_url(),
            "--model",
            "claude-under-test",
            "--json",
            "-",
        ],
        &[("ANTHROPIC_API_KEY", "sk-ant-eval")],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["variants"][0]["model"], "claude-under-test");
    assert_eq!(report["variants"][0]["passed"], 1);
    let headers = anthropic.last_headers().unwrap();
    assert_eq!(headers.api_key.as_deref(), Some("sk-ant-eval"));
}
