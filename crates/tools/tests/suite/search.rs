use std::path::Path;

use serde_json::json;
use turnstone_tools::ToolContext;

use super::{prepare, run};

fn tree() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let files: &[(&str, &[u8])] = &[
        ("src/lib.rs", b"pub fn alpha() {}\nfn beta() {}\n"),
        ("src/main.rs", b"fn main() { alpha(); }\n"),
        ("notes.md", b"Alpha release notes\n"),
        ("target/out.rs", b"fn alpha_generated() {}\n"),
        (".gitignore", b"target/\n"),
        ("data.bin", b"alpha\x00\x01\x02"),
    ];
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
    }
    let ctx = ToolContext::new(dir.path());
    (dir, ctx)
}

#[tokio::test]
async fn finds_matches_honouring_gitignore_and_skipping_binaries() {
    let (_d, ctx) = tree();
    let out = run("search", json!({"query": "alpha"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "src/lib.rs:1:pub fn alpha() {}\nsrc/main.rs:1:fn main() { alpha(); }"
    );
}

#[tokio::test]
async fn case_insensitive_include_and_path() {
    let (_d, ctx) = tree();
    let out = run(
        "search",
        json!({"query": "ALPHA", "case_insensitive": true, "include": "*.md"}),
        &ctx,
    )
    .await;
    assert_eq!(out.content, "notes.md:1:Alpha release notes");
    let out = run(
        "search",
        json!({"query": "fn \\w+\\(", "path": "src/lib.rs"}),
        &ctx,
    )
    .await;
    assert_eq!(
        out.content,
        "src/lib.rs:1:pub fn alpha() {}\nsrc/lib.rs:2:fn beta() {}"
    );
}

#[tokio::test]
async fn result_cap_and_no_match() {
    let (_d, ctx) = tree();
    let out = run("search", json!({"query": "fn", "max_results": 1}), &ctx).await;
    assert!(out.content.starts_with("src/lib.rs:1:"), "{}", out.content);
    assert!(out.content.contains("stopped after 1 matches"));
    let none = run("search", json!({"query": "zebra"}), &ctx).await;
    assert!(!none.is_error);
    assert!(none.content.starts_with("No matches for 'zebra'"));
}

#[tokio::test]
async fn invalid_regex_and_missing_path() {
    let (_d, ctx) = tree();
    let err = prepare("search", json!({"query": "fn ("}), &ctx).unwrap_err();
    assert!(err.contains("invalid regex"), "{err}");
    let out = run("search", json!({"query": "x", "path": "nowhere"}), &ctx).await;
    assert!(out.is_error);
    assert_eq!(out.content, "Error: path not found: nowhere");
    assert!(
        prepare(
            "search",
            json!({"query": "x", "include": "[unclosed"}),
            &ctx
        )
        .is_err()
    );
}

#[tokio::test]
async fn absolute_paths_outside_cwd_are_shown_absolute() {
    let (dir, _) = tree();
    let other = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(other.path());
    let root: &Path = dir.path();
    let out = run(
        "search",
        json!({"query": "beta", "path": root.to_string_lossy()}),
        &ctx,
    )
    .await;
    assert_eq!(
        out.content,
        format!("{}/src/lib.rs:2:fn beta() {{}}", root.display())
    );
}
