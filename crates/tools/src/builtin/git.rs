//! `git`: a structured, read-only view of a repository (seed 004's `Git` tool): `status`,
//! `diff`, `log`, `show` and `blame`, each with a fixed set of validated arguments — no
//! arbitrary flags, and revisions can never be read as options.
//!
//! Paths are confined like `read_file`'s: inside the workspace no approval is needed (label
//! `git`), a path outside it needs one (label `git_outside`).
//!
//! Read-only must hold against the repository too: a repository's own configuration can name
//! programs that git runs while reading (`core.fsmonitor`, `filter.<driver>.clean`,
//! external diff and textconv drivers, signature checks). Every run turns those off on the
//! command line, ignores the system and global configuration, takes no optional locks and
//! never prompts ([`GitTool::safety_args`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::child_env::ChildEnv;
use crate::error::RegistryError;
use crate::paths;
use crate::process::{Captured, CapturedError, run_captured};
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

/// The actions, in schema order.
const ACTIONS: &[&str] = &["status", "diff", "log", "show", "blame"];
/// Commits `log` lists by default and at most.
const DEFAULT_LOG: i64 = 20;
const MAX_LOG: i64 = 200;
/// Longest revision accepted.
const MAX_REV_LEN: usize = 256;
/// How long one git command may run.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes kept of git's output (the context's truncation applies after).
const OUTPUT_CAP: usize = 1024 * 1024;

/// The `git` tool.
#[derive(Debug, Clone)]
pub struct GitTool {
    definition: ToolDefinition,
    program: String,
    child_env: ChildEnv,
    timeout: Duration,
}

impl GitTool {
    pub fn new() -> Result<Self, RegistryError> {
        Ok(Self {
            definition: schema_definition("git", include_str!("../../schemas/git.json"))?,
            program: "git".to_owned(),
            child_env: ChildEnv::default(),
            timeout: GIT_TIMEOUT,
        })
    }

    /// Which of the node's variables git gets ([`ChildEnv`]; `GIT_*` never, unless named).
    pub fn with_child_env(mut self, child_env: ChildEnv) -> Self {
        self.child_env = child_env;
        self
    }

    /// The git executable (default `git` on `PATH`).
    pub fn with_program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// The options before the subcommand that keep a run read-only whatever the
    /// repository's configuration says.
    fn safety_args(filter_keys: &[String]) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--no-pager".into()];
        let overrides = [
            "core.fsmonitor=false",
            "core.untrackedCache=false",
            "core.hooksPath=/dev/null",
            "core.pager=cat",
            "core.quotePath=false",
            "diff.external=",
            "log.showSignature=false",
            "color.ui=false",
            "protocol.allow=never",
        ];
        for value in overrides {
            args.push("-c".into());
            args.push(value.into());
        }
        // A clean filter (or a long-running filter process) runs on working-tree files when
        // status or diff hash them: every configured one is emptied, which git reads as "no
        // filter".
        for key in filter_keys {
            args.push("-c".into());
            args.push(format!("{key}=").into());
        }
        args
    }

    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.child_env.from_process();
        env.retain(|(k, _)| !k.to_string_lossy().starts_with("GIT_"));
        for (k, v) in [
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("GIT_PAGER", "cat"),
            ("GIT_ASKPASS", "true"),
        ] {
            env.push((k.into(), v.into()));
        }
        env
    }

    /// Runs `git -C dir <safety> args…`.
    async fn git(
        &self,
        dir: &Path,
        filter_keys: &[String],
        args: Vec<OsString>,
    ) -> Result<crate::process::CapturedOutput, String> {
        let mut all: Vec<OsString> = vec!["-C".into(), dir.as_os_str().to_owned()];
        all.extend(Self::safety_args(filter_keys));
        all.extend(args);
        run_captured(Captured {
            program: &self.program,
            args: all,
            cwd: dir,
            env: self.environment(),
            stdin: None,
            timeout: self.timeout,
            output_cap: OUTPUT_CAP,
        })
        .await
        .map_err(|e| match e {
            CapturedError::NotInstalled => format!(
                "Error: git is not installed on this node ('{}' was not found)",
                self.program
            ),
            CapturedError::Spawn(e) => format!("Error: cannot run git: {e}"),
            CapturedError::TimedOut => format!(
                "Error: git did not finish within {}s and was stopped",
                self.timeout.as_secs()
            ),
        })
    }

    /// The configured filter drivers' commands (`filter.<driver>.clean|smudge|process`).
    async fn filter_keys(&self, dir: &Path) -> Result<Vec<String>, String> {
        let out = self
            .git(
                dir,
                &[],
                vec![
                    "config".into(),
                    "--name-only".into(),
                    "--get-regexp".into(),
                    r"^filter\..*\.(clean|smudge|process)$".into(),
                ],
            )
            .await?;
        // Exit 1: no such keys. Outside a repository `git config` still reads what it can.
        Ok(out
            .stdout
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect())
    }
}

/// A revision argument: a name, hash, `HEAD~2`, `tag^{commit}`, `a..b`, `a...b`,
/// `rev:path` — never something git could read as an option.
fn check_rev(rev: &str) -> Result<(), String> {
    if rev.len() > MAX_REV_LEN {
        return Err(format!(
            "Error: rev is longer than {MAX_REV_LEN} characters"
        ));
    }
    if rev.starts_with('-') {
        return Err(format!(
            "Error: rev '{rev}' starts with '-': options cannot be passed to git"
        ));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._/~^@{}:+-".contains(c);
    if let Some(bad) = rev.chars().find(|c| !allowed(*c)) {
        return Err(format!(
            "Error: rev '{rev}' contains '{bad}': use a branch or tag name, a commit hash, \
             HEAD~N, or a range a..b"
        ));
    }
    Ok(())
}

/// Only the actions named may carry `key`.
fn only_for(a: &Args<'_>, key: &str, action: &str, actions: &[&str]) -> Result<(), String> {
    if a.has(key) && !actions.contains(&action) {
        return Err(format!(
            "Error: '{key}' applies to {} only, not to {action}",
            actions.join(" and ")
        ));
    }
    Ok(())
}

#[async_trait]
impl Tool for GitTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let action = a.non_blank("action")?.trim();
        if !ACTIONS.contains(&action) {
            return Err(format!(
                "Error: unknown git action '{action}' (expected one of: {})",
                ACTIONS.join(", ")
            ));
        }
        only_for(&a, "staged", action, &["diff"])?;
        only_for(&a, "max_count", action, &["log"])?;
        only_for(&a, "start_line", action, &["blame"])?;
        only_for(&a, "end_line", action, &["blame"])?;
        let mut normalized = json!({ "action": action });
        let path = a.opt_trimmed("path")?;
        if path.is_some_and(|p| p.starts_with('-')) {
            return Err("Error: path must not start with '-' (prefix it with ./)".to_owned());
        }
        if action == "blame" && path.is_none() {
            return Err("Error: blame needs 'path' (the file to blame)".to_owned());
        }
        let resolved = path.map(|p| paths::resolve(&ctx.cwd, p));
        if let Some(r) = &resolved {
            normalized["path"] = json!(r.to_string_lossy());
        }
        if let Some(rev) = a.opt_trimmed("rev")? {
            check_rev(rev)?;
            if action == "status" {
                return Err("Error: 'rev' does not apply to status".to_owned());
            }
            normalized["rev"] = json!(rev);
        }
        if a.opt_bool("staged")?.unwrap_or(false) {
            if normalized.get("rev").is_some() {
                return Err("Error: give either 'staged' or 'rev' for diff, not both".to_owned());
            }
            normalized["staged"] = json!(true);
        }
        if let Some(n) = a.opt_int("max_count")? {
            if !(1..=MAX_LOG).contains(&n) {
                return Err(format!(
                    "Error: max_count must be between 1 and {MAX_LOG}, got {n}"
                ));
            }
            normalized["max_count"] = json!(n);
        }
        let start = a.opt_int("start_line")?;
        let end = a.opt_int("end_line")?;
        for (key, v) in [("start_line", start), ("end_line", end)] {
            if let Some(v) = v.filter(|v| *v < 1) {
                return Err(format!("Error: {key} must be 1 or more, got {v}"));
            }
        }
        if let (Some(s), Some(e)) = (start, end)
            && e < s
        {
            return Err(format!("Error: end_line ({e}) is before start_line ({s})"));
        }
        if let Some(s) = start {
            normalized["start_line"] = json!(s);
        }
        if let Some(e) = end {
            normalized["end_line"] = json!(e);
        }
        let target = resolved.clone().unwrap_or_else(|| ctx.cwd.clone());
        let access = paths::Access::check(&ctx.cwd, &[&target]);
        let mut summary = action.to_owned();
        if let Some(rev) = normalized.get("rev").and_then(Value::as_str) {
            summary.push(' ');
            summary.push_str(rev);
        }
        if let Some(p) = path {
            summary.push(' ');
            summary.push_str(p);
        }
        Ok(Prepared {
            args: normalized,
            header: header("git", &summary),
            preview: access.note(),
            needs_approval: !access.is_inside(),
            approval_label: access.read_label("git"),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let action = match prepared.required_text("action") {
            Ok(a) => a,
            Err(missing) => return missing,
        };
        let path = prepared.text("path").map(PathBuf::from);
        let dir = path
            .as_deref()
            .map_or_else(|| ctx.cwd.clone(), existing_dir);
        let filters = match self.filter_keys(&dir).await {
            Ok(f) => f,
            Err(e) => return ToolOutput::error(e),
        };
        let rev = prepared.text("rev");
        let mut args: Vec<OsString> = Vec::new();
        match action {
            "status" => args.extend(
                [
                    "status",
                    "--porcelain=v2",
                    "--branch",
                    "--untracked-files=normal",
                ]
                .map(OsString::from),
            ),
            "diff" => {
                args.extend(
                    ["diff", "--no-ext-diff", "--no-textconv", "--no-color"].map(OsString::from),
                );
                if prepared.args.get("staged").and_then(Value::as_bool) == Some(true) {
                    args.push("--cached".into());
                }
            }
            "log" => {
                let n = prepared
                    .args
                    .get("max_count")
                    .and_then(Value::as_i64)
                    .unwrap_or(DEFAULT_LOG);
                args.extend(
                    [
                        "log",
                        "--no-color",
                        "--no-show-signature",
                        "--date=short",
                        "--format=%h %ad %an%x09%s",
                    ]
                    .map(OsString::from),
                );
                args.push(format!("--max-count={n}").into());
            }
            "show" => args.extend(
                [
                    "show",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-color",
                    "--no-show-signature",
                    "--format=fuller",
                    "--stat",
                    "--patch",
                ]
                .map(OsString::from),
            ),
            "blame" => {
                args.extend(["blame", "--no-textconv", "--date=short"].map(OsString::from));
                let start = prepared.args.get("start_line").and_then(Value::as_i64);
                let end = prepared.args.get("end_line").and_then(Value::as_i64);
                match (start, end) {
                    (None, None) => {}
                    (s, e) => {
                        let s = s.unwrap_or(1);
                        let e = e.map(|e| e.to_string()).unwrap_or_default();
                        args.push(format!("-L{s},{e}").into());
                    }
                }
            }
            other => {
                return ToolOutput::error(format!("Error: unknown git action '{other}'"));
            }
        }
        // Revisions after --end-of-options can never be options; paths after `--`.
        args.push("--end-of-options".into());
        if let Some(rev) = rev {
            args.push(rev.into());
        }
        if let Some(p) = &path {
            args.push("--".into());
            args.push(p.as_os_str().to_owned());
        }
        let out = match self.git(&dir, &filters, args).await {
            Ok(out) => out,
            Err(e) => return ToolOutput::error(e),
        };
        if !out.status.success() {
            let reason = out.stderr.trim();
            let reason = if reason.is_empty() {
                format!("exit status {}", out.status)
            } else {
                reason.to_owned()
            };
            return finish(
                ToolOutput::error(format!("Error: git {action} failed: {reason}")),
                ctx,
            );
        }
        let mut text = match action {
            "status" => render_status(&out.stdout, &ctx.cwd, &dir),
            "diff" if out.stdout.trim().is_empty() => "(no differences)".to_owned(),
            "log" if out.stdout.trim().is_empty() => "(no commits)".to_owned(),
            _ => out.stdout.trim_end().to_owned(),
        };
        if out.cut {
            text.push_str(&format!(
                "\n[output cut at {OUTPUT_CAP} bytes: narrow it with path, rev or max_count]"
            ));
        }
        finish(ToolOutput::ok(text), ctx)
    }
}

/// The directory git runs in for `path`: the path itself when it is a directory, else the
/// nearest existing ancestor (a file's directory, or above a deleted file).
fn existing_dir(path: &Path) -> PathBuf {
    let mut at = path;
    loop {
        if at.is_dir() {
            return at.to_path_buf();
        }
        match at.parent() {
            Some(parent) => at = parent,
            None => return PathBuf::from("/"),
        }
    }
}

/// `git status --porcelain=v2 --branch` as readable groups: the branch line, then staged,
/// not staged, unmerged and untracked files (paths as git prints them, relative to the
/// directory it ran in).
fn render_status(porcelain: &str, cwd: &Path, dir: &Path) -> String {
    let mut head = String::from("(unknown)");
    let mut oid = String::new();
    let mut upstream: Option<String> = None;
    let mut ahead_behind: Option<(String, String)> = None;
    let mut staged = Vec::new();
    let mut unstaged = Vec::new();
    let mut unmerged = Vec::new();
    let mut untracked = Vec::new();
    for line in porcelain.lines() {
        if let Some(rest) = line.strip_prefix("# branch.head ") {
            head = rest.to_owned();
        } else if let Some(rest) = line.strip_prefix("# branch.oid ") {
            oid = rest.chars().take(12).collect();
        } else if let Some(rest) = line.strip_prefix("# branch.upstream ") {
            upstream = Some(rest.to_owned());
        } else if let Some(rest) = line.strip_prefix("# branch.ab ") {
            let mut parts = rest.split_whitespace();
            let a = parts
                .next()
                .unwrap_or("+0")
                .trim_start_matches('+')
                .to_owned();
            let b = parts
                .next()
                .unwrap_or("-0")
                .trim_start_matches('-')
                .to_owned();
            ahead_behind = Some((a, b));
        } else if let Some(path) = line.strip_prefix("? ") {
            untracked.push(path.to_owned());
        } else if line.starts_with("1 ") || line.starts_with("2 ") {
            let renamed = line.starts_with("2 ");
            // `1 XY sub mH mI mW hH hI path`; `2 XY sub mH mI mW hH hI Xscore path\torig`.
            let fields = if renamed { 9 } else { 8 };
            let mut parts = line.splitn(fields + 1, ' ');
            let xy: Vec<char> = parts.nth(1).unwrap_or("..").chars().collect();
            let rest = parts.last().unwrap_or("");
            let shown = match rest.split_once('\t') {
                Some((new, old)) => format!("{old} -> {new}"),
                None => rest.to_owned(),
            };
            if let Some(x) = xy.first().and_then(|c| change_name(*c)) {
                staged.push(format!("{x}: {shown}"));
            }
            if let Some(y) = xy.get(1).and_then(|c| change_name(*c)) {
                unstaged.push(format!("{y}: {shown}"));
            }
        } else if line.starts_with("u ") {
            let path = line.splitn(11, ' ').nth(10).unwrap_or("");
            unmerged.push(path.to_owned());
        }
    }
    let mut out = format!("branch: {head}");
    if !oid.is_empty() && oid != "(initial)" {
        out.push_str(&format!(" at {oid}"));
    } else if oid == "(initial)" {
        out.push_str(" (no commits yet)");
    }
    if let Some(u) = upstream {
        out.push_str(&format!(", upstream {u}"));
        if let Some((a, b)) = ahead_behind {
            out.push_str(&format!(" (ahead {a}, behind {b})"));
        }
    }
    if dir != cwd {
        out.push_str(&format!(
            "\npaths relative to: {}",
            paths::display(cwd, dir)
        ));
    }
    let groups = [
        ("staged (in the next commit)", &staged),
        ("not staged", &unstaged),
        ("unmerged (conflicts)", &unmerged),
        ("untracked", &untracked),
    ];
    if groups.iter().all(|(_, g)| g.is_empty()) {
        out.push_str("\nworking tree clean");
    }
    for (title, group) in groups {
        if group.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{title}:"));
        for entry in group.iter() {
            out.push_str("\n  ");
            out.push_str(entry);
        }
    }
    out
}

/// The word for a porcelain status letter (`.` = unchanged → `None`).
fn change_name(c: char) -> Option<&'static str> {
    match c {
        'M' => Some("modified"),
        'T' => Some("type changed"),
        'A' => Some("added"),
        'D' => Some("deleted"),
        'R' => Some("renamed"),
        'C' => Some("copied"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_never_options() {
        for ok in [
            "HEAD",
            "HEAD~2",
            "main..feature",
            "a...b",
            "v1.0^{commit}",
            "HEAD:src/a.rs",
            "@{-1}",
            "abc123",
        ] {
            assert!(check_rev(ok).is_ok(), "{ok}");
        }
        for bad in [
            "--output=/tmp/x",
            "-p",
            "HEAD; rm -rf /",
            "a b",
            "$(id)",
            "x\ny",
        ] {
            assert!(check_rev(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn status_groups_porcelain_v2() {
        let porcelain = "# branch.oid 0123456789abcdef\n# branch.head main\n\
                         # branch.upstream origin/main\n# branch.ab +2 -1\n\
                         1 M. N... 100644 100644 100644 aaa bbb staged.txt\n\
                         1 .M N... 100644 100644 100644 aaa bbb changed.txt\n\
                         2 R. N... 100644 100644 100644 aaa bbb R100 new.txt\told.txt\n\
                         u UU N... 100644 100644 100644 100644 a b c both.txt\n\
                         ? fresh.txt\n";
        let cwd = Path::new("/w");
        assert_eq!(
            render_status(porcelain, cwd, cwd),
            "branch: main at 0123456789ab, upstream origin/main (ahead 2, behind 1)\n\
             staged (in the next commit):\n  modified: staged.txt\n  renamed: old.txt -> new.txt\n\
             not staged:\n  modified: changed.txt\n\
             unmerged (conflicts):\n  both.txt\n\
             untracked:\n  fresh.txt"
        );
        assert_eq!(
            render_status("# branch.oid (initial)\n# branch.head main\n", cwd, cwd),
            "branch: main (no commits yet)\nworking tree clean"
        );
    }
}
