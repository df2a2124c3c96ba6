//! `man`: pages rendered to plain text, sections, search, validation, and a clear error when
//! man is missing. Needs man-db and its pages (scripts/services installs them).

use serde_json::json;
use turnstone_tools::{ManTool, NoOutput, Tool, ToolContext};

use super::{prepare, run};

#[tokio::test]
async fn man_renders_a_page_as_plain_text() {
    let ctx = ToolContext::new(std::env::temp_dir());
    let prepared = prepare("man", json!({"page": "ls"}), &ctx).unwrap();
    assert!(!prepared.needs_approval);
    assert_eq!(prepared.approval_label, "man");
    assert_eq!(prepared.header, "⚙ man: ls");
    let out = run("man", json!({"page": "ls", "section": "1"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("NAME"), "{}", out.content);
    assert!(
        out.content.contains("ls - list directory contents"),
        "{}",
        out.content
    );
    assert!(!out.content.contains('\u{8}') && !out.content.contains('\u{1b}'));
    // Formatted for 80 columns.
    assert!(
        out.content.lines().all(|l| l.chars().count() <= 80),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn man_truncates_like_the_other_tools() {
    let mut ctx = ToolContext::new(std::env::temp_dir());
    ctx.truncation_limit = 400;
    let out = run("man", json!({"page": "bash"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("chars truncated"), "{}", out.content);
    assert!(out.content.chars().count() < 600);
}

#[tokio::test]
async fn man_searches_names_and_descriptions() {
    let ctx = ToolContext::new(std::env::temp_dir());
    let out = run("man", json!({"page": "^ls$", "search": true}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("list directory contents"),
        "{}",
        out.content
    );
    let none = run(
        "man",
        json!({"page": "zzqqxxnothing", "search": true}),
        &ctx,
    )
    .await;
    assert!(!none.is_error);
    assert_eq!(none.content, "(no manual pages match 'zzqqxxnothing')");
}

#[tokio::test]
async fn man_errors_are_clear() {
    let ctx = ToolContext::new(std::env::temp_dir());
    let missing = run("man", json!({"page": "no-such-page-zz"}), &ctx).await;
    assert!(missing.is_error);
    assert_eq!(
        missing.content,
        "Error: no manual entry for 'no-such-page-zz' (search with search=true to find the \
         page's name)"
    );
    let wrong_section = run("man", json!({"page": "ls", "section": "9"}), &ctx).await;
    assert!(wrong_section.is_error);
    assert!(
        wrong_section.content.contains("'ls' in section 9"),
        "{}",
        wrong_section.content
    );
    let refused = |args| prepare("man", args, &ctx).unwrap_err();
    assert!(refused(json!({})).contains("missing required argument 'page'"));
    assert!(refused(json!({"page": "/etc/passwd"})).contains("not a manual page name"));
    assert!(refused(json!({"page": "-k"})).contains("not a manual page name"));
    assert!(refused(json!({"page": "ls", "section": "x; id"})).contains("not a manual section"));
    assert!(refused(json!({"page": "a b", "search": true})).contains("not a search term"));
    assert!(refused(json!({"page": "ls", "search": "maybe"})).contains("must be a boolean"));
}

#[tokio::test]
async fn man_missing_is_named() {
    let ctx = ToolContext::new(std::env::temp_dir());
    let tool = ManTool::new()
        .unwrap()
        .with_program("turnstone-no-such-man");
    let prepared = tool.prepare(json!({"page": "ls"}), &ctx).unwrap();
    let out = tool.execute(&prepared, &ctx, &NoOutput).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("man is not installed"),
        "{}",
        out.content
    );
    assert!(out.content.contains("man-db"), "{}", out.content);
}
