//! `git`: every action against a real repository made with the git binary, argument
//! validation, workspace confinement, and that a repository's configuration cannot make a
//! read run a program.

use std::path::Path;
use std::process::Command;

use serde_json::json;
use turnstone_tools::ToolContext;

use super::{prepare, registry, run};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("the git binary is needed by these tests");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository with two commits, one unstaged change, one staged file and one untracked.
fn repo() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.email", "ada@example.com"]);
    git(d, &["config", "user.name", "Ada"]);
    std::fs::write(d.join("a.txt"), "one\ntwo\n").unwrap();
    git(d, &["add", "a.txt"]);
    git(d, &["commit", "-q", "-m", "first commit"]);
    std::fs::write(d.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    git(d, &["commit", "-q", "-am", "second commit"]);
    std::fs::write(d.join("a.txt"), "one\nTWO\nthree\n").unwrap();
    std::fs::write(d.join("staged.txt"), "new\n").unwrap();
    git(d, &["add", "staged.txt"]);
    std::fs::write(d.join("loose.txt"), "x\n").unwrap();
    let ctx = ToolContext::new(d);
    (dir, ctx)
}

#[tokio::test]
async fn git_status_is_grouped_and_needs_no_approval() {
    let (_dir, ctx) = repo();
    let prepared = prepare("git", json!({"action": "status"}), &ctx).unwrap();
    assert!(!prepared.needs_approval);
    assert_eq!(prepared.approval_label, "git");
    assert_eq!(prepared.header, "⚙ git: status");
    let out = run("git", json!({"action": "status"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("branch: main at "),
        "{}",
        out.content
    );
    assert!(
        out.content.contains(
            "staged (in the next commit):\n  added: staged.txt\n\
             not staged:\n  modified: a.txt\nuntracked:\n  loose.txt"
        ),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn git_diff_log_show_and_blame() {
    let (_dir, ctx) = repo();
    let diff = run("git", json!({"action": "diff"}), &ctx).await;
    assert!(!diff.is_error, "{}", diff.content);
    assert!(diff.content.contains("-two\n+TWO"), "{}", diff.content);
    assert!(!diff.content.contains("staged.txt"));
    let staged = run("git", json!({"action": "diff", "staged": true}), &ctx).await;
    assert!(
        staged.content.contains("+++ b/staged.txt"),
        "{}",
        staged.content
    );
    let between = run(
        "git",
        json!({"action": "diff", "rev": "HEAD~1..HEAD"}),
        &ctx,
    )
    .await;
    assert!(between.content.contains("+three"), "{}", between.content);
    let none = run(
        "git",
        json!({"action": "diff", "rev": "HEAD", "path": "loose.txt"}),
        &ctx,
    )
    .await;
    assert_eq!(none.content, "(no differences)");

    let log = run("git", json!({"action": "log"}), &ctx).await;
    let lines: Vec<&str> = log.content.lines().collect();
    assert_eq!(lines.len(), 2, "{}", log.content);
    assert!(lines[0].ends_with(" Ada\tsecond commit"), "{}", lines[0]);
    assert!(lines[1].ends_with(" Ada\tfirst commit"), "{}", lines[1]);
    let one = run("git", json!({"action": "log", "max_count": 1}), &ctx).await;
    assert_eq!(one.content.lines().count(), 1);

    let show = run("git", json!({"action": "show", "rev": "HEAD~1"}), &ctx).await;
    assert!(show.content.contains("first commit"), "{}", show.content);
    assert!(show.content.contains("+two"), "{}", show.content);
    let blob = run(
        "git",
        json!({"action": "show", "rev": "HEAD~1:a.txt"}),
        &ctx,
    )
    .await;
    assert_eq!(blob.content, "one\ntwo");

    let blame = run(
        "git",
        json!({"action": "blame", "path": "a.txt", "start_line": 3, "end_line": 3}),
        &ctx,
    )
    .await;
    assert!(!blame.is_error, "{}", blame.content);
    assert_eq!(blame.content.lines().count(), 1, "{}", blame.content);
    assert!(blame.content.contains("Ada") && blame.content.contains("three"));
}

#[tokio::test]
async fn git_arguments_are_validated() {
    let (_dir, ctx) = repo();
    let refused = |args| prepare("git", args, &ctx).unwrap_err();
    assert!(refused(json!({})).contains("missing required argument 'action'"));
    assert!(refused(json!({"action": "push"})).contains("unknown git action 'push'"));
    assert!(
        refused(json!({"action": "log", "rev": "--output=/tmp/x"})).contains("starts with '-'")
    );
    assert!(refused(json!({"action": "show", "rev": "HEAD; id"})).contains("contains ';'"));
    assert!(refused(json!({"action": "blame"})).contains("blame needs 'path'"));
    assert!(refused(json!({"action": "status", "rev": "HEAD"})).contains("does not apply"));
    assert!(refused(json!({"action": "log", "staged": true})).contains("applies to diff only"));
    assert!(refused(json!({"action": "log", "max_count": 0})).contains("between 1 and 200"));
    assert!(refused(json!({"action": "diff", "staged": true, "rev": "HEAD"})).contains("not both"));
    assert!(
        refused(json!({"action": "blame", "path": "a.txt", "start_line": 5, "end_line": 2}))
            .contains("before start_line")
    );
    assert!(refused(json!({"action": "diff", "path": "--cached"})).contains("must not start"));
    // A bare string is the action (the primary key).
    let args = registry().parse_arguments("git", "status").unwrap();
    assert_eq!(args, json!({"action": "status"}));
    // Git's own refusals come back as tool errors.
    let unknown = run(
        "git",
        json!({"action": "show", "rev": "no-such-branch"}),
        &ctx,
    )
    .await;
    assert!(unknown.is_error);
    assert!(
        unknown.content.starts_with("Error: git show failed:"),
        "{}",
        unknown.content
    );
    let not_repo = tempfile::tempdir().unwrap();
    let out = run(
        "git",
        json!({"action": "status"}),
        &ToolContext::new(not_repo.path()),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.content.contains("not a git repository"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn git_outside_the_workspace_needs_approval() {
    let (dir, _) = repo();
    let workspace = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(workspace.path());
    let prepared = prepare(
        "git",
        json!({"action": "log", "path": dir.path().to_str().unwrap()}),
        &ctx,
    )
    .unwrap();
    assert!(prepared.needs_approval);
    assert_eq!(prepared.approval_label, "git_outside");
    assert!(prepared.preview.starts_with("outside the workspace: "));
}

#[tokio::test]
async fn a_repository_config_cannot_make_git_run_a_program() {
    let (dir, ctx) = repo();
    let d = dir.path();
    let marker = |name: &str| d.join(name);
    std::fs::write(d.join(".gitattributes"), "*.txt filter=evil diff=evil\n").unwrap();
    let touch = |name: &str| format!("touch {}; cat", marker(name).display());
    git(d, &["config", "filter.evil.clean", &touch("CLEAN")]);
    git(d, &["config", "filter.evil.process", &touch("PROCESS")]);
    git(d, &["config", "diff.evil.textconv", &touch("TEXTCONV")]);
    git(d, &["config", "diff.external", &touch("EXTERNAL")]);
    git(d, &["config", "core.fsmonitor", &touch("FSMONITOR")]);
    git(d, &["config", "core.pager", &touch("PAGER")]);
    // Make the index stale so status has to look at (and would filter) the file contents.
    std::fs::write(d.join("a.txt"), "one\nTWO!\nthree\n").unwrap();
    for args in [
        json!({"action": "status"}),
        json!({"action": "diff"}),
        json!({"action": "diff", "staged": true}),
        json!({"action": "show"}),
        json!({"action": "log", "path": "a.txt"}),
        json!({"action": "blame", "path": "a.txt"}),
    ] {
        let out = run("git", args.clone(), &ctx).await;
        assert!(!out.is_error, "{args}: {}", out.content);
    }
    for name in [
        "CLEAN",
        "PROCESS",
        "TEXTCONV",
        "EXTERNAL",
        "FSMONITOR",
        "PAGER",
    ] {
        assert!(
            !marker(name).exists(),
            "the repository's {name} command ran"
        );
    }
}
