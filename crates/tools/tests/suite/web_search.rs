//! `web_search` against a local SearxNG-shaped endpoint, and a custom backend.

use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::json;
use turnstone_tools::{
    SearchBackend, SearchHit, SearchRequest, Tool, ToolContext, WebOptions, WebSearchTool,
};

use super::web_support::{call, closed_port, searx};

fn with_searxng(url: String) -> WebSearchTool {
    WebSearchTool::new(&WebOptions {
        enabled: true,
        searxng_url: Some(url),
        ..WebOptions::default()
    })
    .unwrap()
}

#[tokio::test]
async fn searxng_results_are_numbered_and_capped() {
    let sx = searx().await;
    let tool = with_searxng(sx.base("ok"));
    let ctx = ToolContext::new("/");
    let out = call(&tool, json!({"query": "rust async"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("Results for \"rust async\":"),
        "{}",
        out.content
    );
    assert!(out.content.contains(
        "\n1. Result 1 for rust async\n   https://example.org/1\n   Snippet 1 about rust async"
    ));
    assert!(out.content.contains("\n5. Result 5"));
    assert!(!out.content.contains("\n6. "), "default is 5 results");
    let q = sx.queries();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0]["q"], "rust async");
    assert_eq!(q[0]["format"], "json");
    assert_eq!(q[0]["categories"], "general");

    let out = call(
        &tool,
        json!({"query": "earthquake", "category": "news", "max_results": 7}),
        &ctx,
    )
    .await;
    assert!(out.content.contains("(category: news)"), "{}", out.content);
    assert!(out.content.contains("\n7. ") && !out.content.contains("\n8. "));
    assert_eq!(sx.queries()[1]["categories"], "news");

    // Above the maximum: capped at 20.
    let out = call(&tool, json!({"query": "x", "max_results": "100"}), &ctx).await;
    assert!(out.content.contains("\n20. ") && !out.content.contains("\n21. "));

    let out = call(&tool, json!({"query": "nothing"}), &ctx).await;
    assert!(!out.is_error);
    assert_eq!(out.content, "No results for \"nothing\".");
}

#[tokio::test]
async fn backend_failures_are_clear_errors() {
    let sx = searx().await;
    let ctx = ToolContext::new("/");
    let out = call(&with_searxng(sx.base("fail")), json!({"query": "a"}), &ctx).await;
    assert!(out.is_error);
    assert!(out.content.contains("web search failed"), "{}", out.content);
    assert!(out.content.contains("HTTP 500"), "{}", out.content);
    assert!(out.content.contains("engine exploded"), "{}", out.content);

    let out = call(
        &with_searxng(sx.base("garbage")),
        json!({"query": "a"}),
        &ctx,
    )
    .await;
    assert!(out.is_error);
    assert!(out.content.contains("not SearxNG JSON"), "{}", out.content);

    let port = closed_port().await;
    let out = call(
        &with_searxng(format!("http://127.0.0.1:{port}")),
        json!({"query": "a"}),
        &ctx,
    )
    .await;
    assert!(out.is_error);
    assert!(out.content.contains("unreachable"), "{}", out.content);
}

#[tokio::test]
async fn missing_or_unconnected_backends_are_explained() {
    let ctx = ToolContext::new("/");
    let tool = WebSearchTool::new(&WebOptions::default()).unwrap();
    let out = call(&tool, json!({"query": "a"}), &ctx).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("no web search backend is configured"),
        "{}",
        out.content
    );
    assert!(out.content.contains("searxng_url"));

    let tool = WebSearchTool::new(&WebOptions {
        search_backend: Some("mcp:brave:search".into()),
        ..WebOptions::default()
    })
    .unwrap();
    let out = call(&tool, json!({"query": "a"}), &ctx).await;
    assert!(out.is_error);
    assert!(out.content.contains("mcp:brave:search"), "{}", out.content);

    let tool = WebSearchTool::new(&WebOptions {
        search_backend: Some("bing".into()),
        ..WebOptions::default()
    })
    .unwrap();
    let out = call(&tool, json!({"query": "a"}), &ctx).await;
    assert!(
        out.content.contains("invalid web_search_backend 'bing'"),
        "{}",
        out.content
    );
}

/// What the node plugs in for `mcp:server:tool`.
struct FakeMcpSearch(Mutex<Vec<SearchRequest>>);

#[async_trait]
impl SearchBackend for FakeMcpSearch {
    fn describe(&self) -> String {
        "mcp:test:search".into()
    }
    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, String> {
        self.0.lock().push(request.clone());
        Ok(vec![SearchHit {
            title: String::new(),
            url: "https://mcp.example/1".into(),
            snippet: String::new(),
        }])
    }
}

#[tokio::test]
async fn a_custom_backend_is_used_when_given() {
    let backend = Arc::new(FakeMcpSearch(Mutex::default()));
    let tool = WebSearchTool::new(&WebOptions {
        search_backend: Some("mcp:test:search".into()),
        search: Some(backend.clone()),
        ..WebOptions::default()
    })
    .unwrap();
    let out = call(
        &tool,
        json!({"query": "  tokio  ", "categories": "IT", "max_results": 3}),
        &ToolContext::new("/"),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content
            .contains("1. (untitled)\n   https://mcp.example/1"),
        "{}",
        out.content
    );
    let seen = backend.0.lock().clone();
    assert_eq!(
        seen,
        [SearchRequest {
            query: "tokio".into(),
            category: "it".into(),
            max_results: 3
        }]
    );
}

/// A backend answering with text only (an MCP search tool that returns prose).
struct TextOnly;

#[async_trait]
impl SearchBackend for TextOnly {
    fn describe(&self) -> String {
        "mcp:test:answer".into()
    }
    async fn search(&self, _request: &SearchRequest) -> Result<Vec<SearchHit>, String> {
        let long = "word ".repeat(200);
        Ok(vec![
            SearchHit {
                title: String::new(),
                url: String::new(),
                snippet: format!("Rust 1.0 shipped in 2015. {long}END"),
            },
            SearchHit {
                title: "Named".into(),
                url: String::new(),
                snippet: "A titled answer.".into(),
            },
        ])
    }
}

#[tokio::test]
async fn hits_without_a_url_are_shown_whole_without_an_empty_url_line() {
    let tool = WebSearchTool::new(&WebOptions {
        search: Some(Arc::new(TextOnly)),
        ..WebOptions::default()
    })
    .unwrap();
    let out = call(&tool, json!({"query": "rust"}), &ToolContext::new("/")).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content
            .starts_with("Results for \"rust\":\n\n1. Rust 1.0 shipped in 2015. word"),
        "{}",
        out.content
    );
    assert!(
        out.content
            .contains("word END\n\n2. Named\n   A titled answer.")
    );
    assert!(!out.content.contains("(untitled)"), "{}", out.content);
}

#[test]
fn bad_arguments_and_approval() {
    let tool = WebSearchTool::new(&WebOptions::default()).unwrap();
    let ctx = ToolContext::new("/");
    for (args, expected) in [
        (json!({}), "missing required argument 'query'"),
        (json!({"query": "  "}), "must not be empty"),
        (
            json!({"query": "a", "max_results": 0}),
            "max_results must be 1 or more",
        ),
        (
            json!({"query": "a", "max_results": "many"}),
            "must be an integer",
        ),
        (
            json!({"query": "a", "category": "images"}),
            "unknown category 'images'",
        ),
        (json!({"query": "q".repeat(1001)}), "longer than 1000"),
    ] {
        let err = tool.prepare(args.clone(), &ctx).unwrap_err();
        assert!(err.contains(expected), "{args}: {err}");
    }
    let p = tool.prepare(json!({"query": "x"}), &ctx).unwrap();
    assert!(!p.needs_approval);
    assert_eq!(
        p.args,
        json!({"query": "x", "max_results": 5, "category": "general"})
    );
}
