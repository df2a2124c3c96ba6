//! The web UI: how it is served (public, content types, caching), the `last_event_id` query
//! parameter its manual reconnects use, and a real headless Chromium driving it end to end
//! (`node/tests/browser/ui.test.mjs`, with `playwright-core`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use turnstone_testkit::FakeLlmConfig;

use super::*;

const CHROMIUM: &str = "/usr/bin/chromium";

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

fn artifacts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/browser-artifacts")
}

async fn get_raw(t: &TestNode, path: &str, etag: Option<&str>) -> reqwest::Response {
    let mut req = t.http.get(t.url(path));
    if let Some(tag) = etag {
        req = req.header("if-none-match", tag);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn the_page_and_its_files_are_public_typed_and_revalidated() {
    let t = TestNode::start().await;
    // No token: the UI is public even though the API is not.
    let page = get_raw(&t, "/", None).await;
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(page.headers()["cache-control"], "no-cache");
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'self'")
    );
    let etag = page.headers()["etag"].to_str().unwrap().to_string();
    let html = page.text().await.unwrap();
    assert!(html.contains("<title>Turnstone</title>"));
    assert_eq!(t.get("/v1/api/workstreams", None).await.0, 401);

    for (path, kind) in [
        ("/static/app.js", "text/javascript; charset=utf-8"),
        ("/static/markdown.js", "text/javascript; charset=utf-8"),
        ("/static/style.css", "text/css; charset=utf-8"),
        ("/static/favicon.svg", "image/svg+xml"),
        ("/static/index.html", "text/html; charset=utf-8"),
    ] {
        let resp = get_raw(&t, path, None).await;
        assert_eq!(resp.status(), 200, "{path}");
        assert_eq!(resp.headers()["content-type"], kind, "{path}");
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        assert!(!resp.bytes().await.unwrap().is_empty(), "{path} has a body");
    }

    // Revalidation: the same tag is 304 with no body.
    let cached = get_raw(&t, "/", Some(&etag)).await;
    assert_eq!(cached.status(), 304);
    assert!(cached.bytes().await.unwrap().is_empty());
    let stale = get_raw(&t, "/", Some("\"0000000000000000\"")).await;
    assert_eq!(stale.status(), 200);

    for missing in [
        "/static/nope.js",
        "/static/..%2F..%2FCargo.toml",
        "/static/ui/app.js",
        "/static/APP.JS",
    ] {
        let resp = get_raw(&t, missing, None).await;
        assert_eq!(resp.status(), 404, "{missing}");
    }
}

#[tokio::test]
async fn the_last_event_id_query_parameter_resumes_like_the_header() {
    let t = TestNode::start().await;
    let path = format!("/v1/api/events?ws_id={}", t.default_ws);
    let mut live = t.sse(&path, None).await;
    assert_eq!(live.next().await.kind(), "connected");
    t.post(
        "/v1/api/send",
        json!({"ws_id": t.default_ws, "message": "resume by query"}),
    )
    .await;
    let seen = live.until("turn_complete").await;
    let first_content = seen
        .iter()
        .find(|e| e.kind() == "content")
        .and_then(|e| e.id)
        .unwrap();
    let expected: Vec<(Option<u64>, String)> = seen
        .iter()
        .skip_while(|e| e.id != Some(first_content))
        .skip(1)
        .map(|e| (e.id, e.data.to_string()))
        .collect();

    let mut resumed = t
        .sse(&format!("{path}&last_event_id={first_content}"), None)
        .await;
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let e = resumed.next().await;
        got.push((e.id, e.data.to_string()));
    }
    assert_eq!(got, expected, "the query resumes after the given id");

    // The header wins over the query; a non-number is ignored (fresh attach).
    let mut both = t
        .sse(&format!("{path}&last_event_id=1"), Some(first_content))
        .await;
    assert_eq!(both.next().await.data.to_string(), expected[0].1);
    let mut junk = t.sse(&format!("{path}&last_event_id=abc"), None).await;
    assert_eq!(junk.next().await.kind(), "connected");
}

/// Runs `node/tests/browser/<script>` in headless Chromium against `base` (with `token` as
/// `TURNSTONE_TOKEN` and `extra` variables) and returns its stdout; fails the test unless the
/// script exits 0 and prints `done`. Screenshots land in [`artifacts_dir`].
pub async fn run_browser_script(
    script: &str,
    done: &str,
    base: &str,
    token: &str,
    extra: &[(&str, String)],
) -> String {
    assert!(
        Path::new(CHROMIUM).exists(),
        "Chromium is missing at {CHROMIUM}: apt-get install chromium (scripts/services does it)"
    );
    let dir = browser_dir();
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "playwright-core is missing: run `npm ci` in {} (scripts/services does it)",
        dir.display()
    );
    let artifacts = artifacts_dir();
    std::fs::create_dir_all(&artifacts).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(script)
        .current_dir(&dir)
        .env("TURNSTONE_URL", base)
        .env("TURNSTONE_TOKEN", token)
        .env("TURNSTONE_CHROMIUM", CHROMIUM)
        .env("TURNSTONE_ARTIFACTS", &artifacts)
        .env("TURNSTONE_PROFILE", profile.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("node is installed");
    let output = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the browser test finishes within 180 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(done),
        "browser test {script} failed ({})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    stdout
}

#[tokio::test]
async fn a_real_browser_chats_approves_and_resumes_without_duplicates() {
    // An LLM judge on its own fake model: every approval the page shows gets its verdict.
    let judge = turnstone_testkit::FakeLlm::start().await;
    for _ in 0..16 {
        judge.push_reply(turnstone_testkit::ScriptReply::text(
            r#"{"intent_summary":"runs the command","risk_level":"low","confidence":0.95,"recommendation":"approve","reasoning":"harmless","evidence":[]}"#,
        ));
    }
    let judge_url = judge.base_url();
    // Slow streaming so the test can cut the connection in the middle of a reply.
    let t = TestNode::spawn(Spec {
        llm: FakeLlmConfig {
            tokens_per_sec: Some(20.0),
            ..FakeLlmConfig::default()
        },
        engine: Some(Box::new(move |config, _| {
            let provider =
                turnstone_llm::OpenAiProvider::new(turnstone_llm::OpenAiConfig::new(judge_url))
                    .unwrap();
            config.judge.llm = Some(turnstone_engine::LlmJudge {
                client: Some(turnstone_llm::Resilient::new(
                    std::sync::Arc::new(provider),
                    turnstone_llm::RetryPolicy::none(),
                    std::sync::Arc::new(turnstone_llm::CircuitBreaker::default()),
                )),
                model: "judge-model".into(),
                ..turnstone_engine::LlmJudge::session()
            });
        })),
        ..Spec::default()
    })
    .await;
    run_browser_script(
        "ui.test.mjs",
        "browser test: all steps passed",
        &t.base,
        FULL,
        &[],
    )
    .await;
    let artifacts = artifacts_dir();
    assert!(
        artifacts.join("final.png").exists(),
        "a screenshot of the final state"
    );

    // What the browser did really happened on the node.
    let (_, list) = t.get("/v1/api/workstreams", Some(FULL)).await;
    let rows = list["workstreams"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "the default and the one the browser created");
    let created = rows
        .iter()
        .find(|w| w["id"] != t.default_ws.as_str())
        .unwrap();
    let ws = t.node.workstream(created["id"].as_str().unwrap()).unwrap();
    let history = turnstone_node::server::views::history_entries(&ws.history(), false);
    let tool_output = history
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    assert!(tool_output.contains("from-browser"), "{history:?}");
}

/// A node with stored users: the sign-in form offers username and password first, refuses a
/// wrong password, and a right one opens the dashboard (and the token form is one click away).
#[tokio::test]
async fn a_real_browser_signs_in_with_a_username_and_password() {
    let (t, _dir) = super::users::node_with_users().await;
    let (status, _) = t
        .post(
            "/v1/api/auth/setup",
            json!({"username": "ada", "display_name": "Ada", "password": "correct horse"}),
        )
        .await;
    assert_eq!(status, 200);
    run_browser_script(
        "login.test.mjs",
        "login test: all steps passed",
        &t.base,
        FULL,
        &[
            ("TURNSTONE_USERNAME", "ada".to_string()),
            ("TURNSTONE_PASSWORD", "correct horse".to_string()),
        ],
    )
    .await;
}

/// A node with storage and no user: the web UI's setup form asks for the bootstrap
/// credential, refuses a wrong code and creates the first admin with the printed one.
#[tokio::test]
async fn a_real_browser_sets_up_the_first_user_with_the_setup_code() {
    let (t, _dir) = super::users::node_with_users().await;
    run_browser_script(
        "setup.test.mjs",
        "setup test: all steps passed",
        &t.base,
        FULL,
        &[(
            "TURNSTONE_SETUP_CODE",
            t.node.setup_code.expose().to_string(),
        )],
    )
    .await;
    let (status, users) = t.get("/v1/api/admin/users", Some(FULL)).await;
    assert_eq!(status, 200);
    assert_eq!(users["users"][0]["username"], "grace", "{users}");
}
