//! `open_preview` against a real local HTTP server and real files: what reaches the sink,
//! the SSRF screening shared with `web_fetch`, approval by target kind, the size caps.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::json;
use turnstone_tools::{
    NoOutput, OpenPreviewTool, PreviewContent, PreviewKind, PreviewSink, Tool, ToolContext,
    WebOptions,
};

use super::web_support::{PAGE, site};

/// Keeps what it was given; ids `p1`, `p2`, …
#[derive(Default)]
struct Sink {
    stored: Mutex<Vec<(String, PreviewContent)>>,
    refuse: bool,
}

impl PreviewSink for Sink {
    fn store(&self, ws_id: &str, preview: PreviewContent) -> Result<String, String> {
        if self.refuse {
            return Err("no room".into());
        }
        let mut stored = self.stored.lock();
        stored.push((ws_id.to_owned(), preview));
        Ok(format!("p{}", stored.len()))
    }
}

impl Sink {
    fn take(&self) -> Vec<(String, PreviewContent)> {
        std::mem::take(&mut *self.stored.lock())
    }
}

fn make(allow_private_network: bool) -> (OpenPreviewTool, Arc<Sink>) {
    let sink = Arc::new(Sink::default());
    let options = WebOptions {
        allow_private_network,
        ..WebOptions::default()
    };
    (OpenPreviewTool::new(&options, sink.clone()).unwrap(), sink)
}

fn ctx(dir: &std::path::Path) -> ToolContext {
    ToolContext::new(dir).for_workstream("ws-1", "node-1")
}

#[tokio::test]
async fn a_url_is_fetched_classified_and_stored_with_only_a_confirmation_for_the_model() {
    let site = site().await;
    let dir = tempfile::tempdir().unwrap();
    let (tool, sink) = make(true);
    let ctx = ctx(dir.path());
    let prepared = tool
        .prepare(json!({"target": site.url("/page")}), &ctx)
        .unwrap();
    assert!(prepared.needs_approval, "URL targets need approval");
    assert_eq!(prepared.approval_label, "open_preview");
    let out = tool.execute(&prepared, &ctx, &NoOutput).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.content.lines().count(), 1, "one line: {}", out.content);
    assert!(
        out.content.contains("web preview \"Turnstone test page\""),
        "{}",
        out.content
    );
    assert!(
        !out.content.contains("The answer is"),
        "no content for the model"
    );
    let stored = sink.take();
    assert_eq!(stored.len(), 1);
    let (ws, p) = &stored[0];
    assert_eq!(ws, "ws-1");
    assert_eq!(p.kind, PreviewKind::Web);
    assert_eq!(p.mime, "text/html");
    assert_eq!(p.bytes, PAGE.as_bytes());
    assert_eq!(p.source, site.url("/page"));

    // JSON is a table; an image is an image; the title argument wins.
    let out = super::web_support::call(
        &tool,
        json!({"target": site.url("/json"), "title": "Cluster  status"}),
        &ctx,
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let out = super::web_support::call(&tool, json!({"target": site.url("/image")}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    let stored = sink.take();
    assert_eq!(stored[0].1.kind, PreviewKind::Table);
    assert_eq!(stored[0].1.mime, "application/json");
    assert_eq!(stored[0].1.title, "Cluster status");
    assert_eq!(stored[1].1.kind, PreviewKind::Image);
    assert_eq!(stored[1].1.mime, "image/png");

    // A 2 MB text body is over the text cap; an HTTP error is an error.
    let out = super::web_support::call(&tool, json!({"target": site.url("/big")}), &ctx).await;
    assert!(out.is_error);
    assert!(
        out.content
            .contains("over the 512 KB limit of text previews"),
        "{}",
        out.content
    );
    let out = super::web_support::call(&tool, json!({"target": site.url("/missing")}), &ctx).await;
    assert!(
        out.is_error && out.content.contains("HTTP 404"),
        "{}",
        out.content
    );
    assert!(sink.take().is_empty());
}

#[tokio::test]
async fn private_addresses_are_refused_without_the_opt_in() {
    let site = site().await;
    let dir = tempfile::tempdir().unwrap();
    let (tool, sink) = make(false);
    let ctx = ctx(dir.path());
    // A literal private address: refused before anything runs.
    let err = tool
        .prepare(json!({"target": site.url("/page")}), &ctx)
        .unwrap_err();
    assert!(err.contains("refused to fetch"), "{err}");
    // A name resolving to a private address: refused at connect time.
    let out =
        super::web_support::call(&tool, json!({"target": site.localhost_url("/page")}), &ctx).await;
    assert!(out.is_error);
    assert!(out.content.contains("refused"), "{}", out.content);
    assert_eq!(site.hits(), 0, "the server was never contacted");
    // Metadata addresses stay refused even with the opt-in.
    let (open, _) = make(true);
    let err = open
        .prepare(
            json!({"target": "http://169.254.169.254/latest/meta-data"}),
            &ctx,
        )
        .unwrap_err();
    assert!(err.contains("refused"), "{err}");
    assert!(sink.take().is_empty());
}

#[tokio::test]
async fn file_paths_run_unprompted_with_read_file_checks_and_caps() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, sink) = make(false);
    let ctx = ctx(dir.path());
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/table.csv"), "name,count\nalpha,1\n").unwrap();
    std::fs::write(dir.path().join("README.md"), "# Hello\n").unwrap();
    std::fs::write(dir.path().join("huge.txt"), "x".repeat(600 * 1024)).unwrap();
    std::fs::write(dir.path().join("blob.bin"), [0u8, 1, 2, 3, 0, 9]).unwrap();

    let prepared = tool
        .prepare(json!({"target": "data/table.csv"}), &ctx)
        .unwrap();
    assert!(!prepared.needs_approval, "file paths run unprompted");
    let out = tool.execute(&prepared, &ctx, &NoOutput).await;
    assert!(!out.is_error, "{}", out.content);
    let out =
        super::web_support::call(&tool, json!({"target": "README.md", "kind": "text"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    let stored = sink.take();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].1.kind, PreviewKind::Table);
    assert_eq!(stored[0].1.title, "table.csv");
    assert_eq!(stored[0].1.bytes, b"name,count\nalpha,1\n");
    assert_eq!(
        stored[1].1.kind,
        PreviewKind::Text,
        "the kind override wins"
    );

    for (target, expected) in [
        ("huge.txt", "over the 512 KB limit of text previews"),
        ("missing.txt", "file not found: missing.txt"),
        ("data", "is a directory"),
        ("blob.bin", "cannot be previewed: it is binary data (.bin)"),
    ] {
        let out = super::web_support::call(&tool, json!({"target": target}), &ctx).await;
        assert!(out.is_error, "{target}: {}", out.content);
        assert!(out.content.contains(expected), "{target}: {}", out.content);
    }
    assert!(sink.take().is_empty(), "nothing stored for refused targets");
}

#[tokio::test]
async fn bad_targets_and_arguments_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, _) = make(true);
    let ctx = ctx(dir.path());
    let err = |args| tool.prepare(args, &ctx).unwrap_err();
    assert!(err(json!({})).contains("missing required argument 'target'"));
    assert!(err(json!({"target": "  "})).contains("must not be empty"));
    assert!(
        err(json!({"target": "file:///etc/passwd"})).contains("scheme 'file' is not supported")
    );
    assert!(err(json!({"target": "attachment:abc"})).contains("attachment 'abc' is not available"));
    assert!(err(json!({"target": "a.txt", "kind": "video"})).contains("unknown kind 'video'"));
    assert!(err(json!({"target": 5})).contains("must be a string"));

    // A store that refuses is reported, not hidden.
    std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
    let refusing = OpenPreviewTool::new(
        &WebOptions::default(),
        Arc::new(Sink {
            refuse: true,
            ..Sink::default()
        }),
    )
    .unwrap();
    let out = super::web_support::call(&refusing, json!({"target": "a.txt"}), &ctx).await;
    assert!(
        out.is_error && out.content.contains("no room"),
        "{}",
        out.content
    );

    let def = tool.definition();
    assert_eq!(def.name, "open_preview");
    assert!(!def.meta.task_agent, "not for task agents");
    assert_eq!(def.meta.primary_key.as_deref(), Some("target"));
}
