//! `web_fetch` against a real local HTTP server (private network allowed: it is on 127.0.0.1).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::json;
use turnstone_tools::{PageAnswerer, Tool, ToolContext, WebFetchTool, WebOptions};

use super::web_support::{call, closed_port, site};

fn options() -> WebOptions {
    WebOptions {
        enabled: true,
        allow_private_network: true,
        ..WebOptions::default()
    }
}

/// Records what it was asked and answers from the page like a model would.
#[derive(Default)]
struct Recording {
    asked: Mutex<Vec<(String, String)>>,
    fail: bool,
}

#[async_trait]
impl PageAnswerer for Recording {
    async fn answer(&self, question: &str, page: &str) -> Result<String, String> {
        self.asked
            .lock()
            .push((question.to_owned(), page.to_owned()));
        if self.fail {
            return Err("model unavailable".into());
        }
        let line = page
            .lines()
            .find(|l| l.contains("answer"))
            .unwrap_or("not found");
        Ok(format!("From the page: {line}"))
    }
}

#[tokio::test]
async fn html_is_reduced_to_text_and_answered() {
    let site = site().await;
    let answerer = Arc::new(Recording::default());
    let tool = WebFetchTool::new(&WebOptions {
        page_answerer: Some(answerer.clone()),
        ..options()
    })
    .unwrap();
    let ctx = ToolContext::new("/");
    let out = call(
        &tool,
        json!({"url": site.url("/page"), "question": "What is the answer?"}),
        &ctx,
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("From the page: The answer is 42."),
        "{}",
        out.content
    );
    assert!(
        out.content
            .contains(&format!("Source: {}", site.url("/page")))
    );
    let asked = answerer.asked.lock().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, "What is the answer?");
    let page = &asked[0].1;
    assert!(page.contains("Heading one"), "{page}");
    assert!(
        !page.contains("<p>") && !page.contains("SCRIPT-TEXT") && !page.contains("color: red"),
        "{page}"
    );
}

#[tokio::test]
async fn without_an_answerer_the_page_text_is_returned_with_a_note() {
    let site = site().await;
    let tool = WebFetchTool::new(&options()).unwrap();
    let out = call(
        &tool,
        json!({"url": site.url("/hop/2"), "question": "What is the answer?"}),
        &ToolContext::new("/"),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("[No page answerer is configured"),
        "{}",
        out.content
    );
    assert!(out.content.contains("What is the answer?"));
    assert!(out.content.contains("The answer is 42."));
    assert!(out.content.contains("redirected to"), "{}", out.content);
    assert_eq!(site.hits(), 3);
}

#[tokio::test]
async fn a_failing_answerer_falls_back_to_the_page_text() {
    let site = site().await;
    let answerer = Arc::new(Recording {
        fail: true,
        ..Recording::default()
    });
    let tool = WebFetchTool::new(&WebOptions {
        page_answerer: Some(answerer),
        ..options()
    })
    .unwrap();
    let out = call(
        &tool,
        json!({"url": site.url("/page"), "question": "q"}),
        &ToolContext::new("/"),
    )
    .await;
    assert!(!out.is_error);
    assert!(out.content.contains("model unavailable"), "{}", out.content);
    assert!(out.content.contains("The answer is 42."));
}

#[tokio::test]
async fn content_types_sizes_statuses_and_timeouts() {
    let site = site().await;
    let ctx = ToolContext::new("/");
    let tool = WebFetchTool::new(&WebOptions {
        max_bytes: 1000,
        fetch_timeout: Duration::from_millis(500),
        ..options()
    })
    .unwrap();
    let q = |path: &str| json!({"url": site.url(path), "question": "q"});

    let out = call(&tool, q("/json"), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("\"status\":\"green\""),
        "{}",
        out.content
    );

    let out = call(&tool, q("/big"), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("body cut at 1000 bytes"),
        "{}",
        out.content
    );
    assert!(out.content.contains("0123456789"));
    assert!(out.content.len() < 3000, "{}", out.content.len());

    let out = call(&tool, q("/image"), &ctx).await;
    assert!(out.is_error);
    assert!(out.content.contains("image/png"), "{}", out.content);

    let out = call(&tool, q("/missing"), &ctx).await;
    assert!(out.is_error);
    assert!(out.content.contains("HTTP 404"), "{}", out.content);
    assert!(out.content.contains("No such page here"));

    let out = call(&tool, q("/slow"), &ctx).await;
    assert!(out.is_error);
    assert!(out.content.contains("timed out"), "{}", out.content);

    let port = closed_port().await;
    let out = call(
        &tool,
        json!({"url": format!("http://127.0.0.1:{port}/"), "question": "q"}),
        &ctx,
    )
    .await;
    assert!(out.is_error);
    assert!(out.content.contains("failed"), "{}", out.content);
}

#[test]
fn bad_arguments_are_refused_with_clear_errors() {
    let tool = WebFetchTool::new(&WebOptions::default()).unwrap();
    let ctx = ToolContext::new("/");
    let cases = [
        (json!({}), "missing required argument 'url'"),
        (json!({"url": ""}), "must not be empty"),
        (json!({"url": 5}), "must be a string"),
        (json!({"url": "example.com/page"}), "invalid URL"),
        (json!({"url": "ftp://example.com/"}), "only http and https"),
        (json!({"url": "javascript:alert(1)"}), "only http and https"),
        (json!({"url": "http://169.254.169.254/"}), "cloud metadata"),
        (
            json!({"url": "http://[::ffff:127.0.0.1]/"}),
            "private address",
        ),
    ];
    for (args, expected) in cases {
        let err = tool.prepare(args.clone(), &ctx).unwrap_err();
        assert!(err.contains(expected), "{args}: {err}");
    }
}

#[test]
fn prepare_needs_approval_and_marks_private_targets() {
    let tool = WebFetchTool::new(&options()).unwrap();
    let ctx = ToolContext::new("/");
    let p = tool
        .prepare(json!({"url": "https://example.com/docs"}), &ctx)
        .unwrap();
    assert!(p.needs_approval);
    assert_eq!(p.approval_label, "web_fetch");
    assert_eq!(p.header, "⚙ web_fetch: https://example.com/docs");
    // A bare URL (primary key rescue) gets a default question.
    assert!(p.args["question"].as_str().unwrap().contains("Summarize"));
    let p = tool
        .prepare(
            json!({"url": "http://localhost:8080/", "question": "x"}),
            &ctx,
        )
        .unwrap();
    assert!(p.header.ends_with("[private network]"), "{}", p.header);
    let p = tool
        .prepare(json!({"url": "http://10.0.0.5/", "question": "x"}), &ctx)
        .unwrap();
    assert!(p.header.ends_with("[private network]"), "{}", p.header);
}
