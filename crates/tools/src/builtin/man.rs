//! `man`: a manual page installed on the node, rendered to plain text, or a search of page
//! names and descriptions (`man -k`, as `apropos`). Read-only, no approval (label `man`).
//!
//! Page names and sections are validated before anything runs: no option can be smuggled
//! in, and no name with a `/` (man-db would read it as a file path, a way around
//! `read_file`'s workspace check). The page is formatted for 80 columns with no pager, and
//! any overstrike or colour sequence left in it is removed.

use std::ffi::OsString;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::child_env::ChildEnv;
use crate::error::RegistryError;
use crate::process::{Captured, CapturedError, run_captured};
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

/// Longest page name or search accepted.
const MAX_PAGE_LEN: usize = 100;
/// How long `man` may run.
const MAN_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes kept of a page (the context's truncation applies after).
const OUTPUT_CAP: usize = 1024 * 1024;
/// man-db's exit status for "no such page" (and for a search with no match).
const NOT_FOUND: i32 = 16;

/// The `man` tool.
#[derive(Debug, Clone)]
pub struct ManTool {
    definition: ToolDefinition,
    program: String,
    child_env: ChildEnv,
}

impl ManTool {
    pub fn new() -> Result<Self, RegistryError> {
        Ok(Self {
            definition: schema_definition("man", include_str!("../../schemas/man.json"))?,
            program: "man".to_owned(),
            child_env: ChildEnv::default(),
        })
    }

    /// The man executable (default `man` on `PATH`).
    pub fn with_program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// Which of the node's variables `man` gets ([`ChildEnv`]).
    pub fn with_child_env(mut self, child_env: ChildEnv) -> Self {
        self.child_env = child_env;
        self
    }

    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.child_env.from_process();
        env.retain(|(k, _)| {
            let k = k.to_string_lossy();
            !(k.starts_with("MAN") || k == "PAGER" || k == "LESS")
        });
        for (k, v) in [("MANWIDTH", "80"), ("MANPAGER", "cat"), ("PAGER", "cat")] {
            env.push((k.into(), v.into()));
        }
        env
    }
}

/// A page name: letters, digits and `_ . : + @ -`, not starting with `-`.
fn check_page(page: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_.:+@-".contains(c);
    if page.starts_with('-') || page.chars().any(|c| !allowed(c)) {
        return Err(format!(
            "Error: '{page}' is not a manual page name (letters, digits and _ . : + @ -; \
             no paths, no options)"
        ));
    }
    Ok(())
}

/// A search: a word or regular expression, no whitespace, not starting with `-`.
fn check_search(query: &str) -> Result<(), String> {
    if query.starts_with('-') || query.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "Error: '{query}' is not a search term (one word or regular expression, not \
             starting with '-')"
        ));
    }
    Ok(())
}

/// A section: `1`–`9`, `n` or `l`, optionally followed by a suffix such as `3p` or `1ssl`.
fn check_section(section: &str) -> Result<(), String> {
    let mut chars = section.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| matches!(c, '1'..='9' | 'n' | 'l'));
    if !first_ok || section.len() > 10 || !chars.all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "Error: '{section}' is not a manual section (e.g. 1, 3, 3p, 5, 8)"
        ));
    }
    Ok(())
}

/// Removes overstrike (`x\bx`, `_\bx`) and ANSI escape sequences from formatted text.
fn plain_text(text: &str) -> String {
    let mut out: Vec<char> = Vec::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{8}' => {
                out.pop();
            }
            '\u{1b}' => {
                // CSI: ESC [ parameters final-byte.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
            }
            c => out.push(c),
        }
    }
    out.into_iter().collect()
}

#[async_trait]
impl Tool for ManTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let page = a.non_blank("page")?.trim();
        if page.len() > MAX_PAGE_LEN {
            return Err(format!(
                "Error: page is longer than {MAX_PAGE_LEN} characters"
            ));
        }
        let search = a.opt_bool("search")?.unwrap_or(false);
        let section = a.opt_trimmed("section")?;
        if search {
            check_search(page)?;
        } else {
            check_page(page)?;
        }
        if let Some(s) = section {
            check_section(s)?;
        }
        let mut normalized = json!({ "page": page, "search": search });
        if let Some(s) = section {
            normalized["section"] = json!(s);
        }
        let summary = match (search, section) {
            (true, Some(s)) => format!("search '{page}' in section {s}"),
            (true, None) => format!("search '{page}'"),
            (false, Some(s)) => format!("{page}({s})"),
            (false, None) => page.to_owned(),
        };
        Ok(Prepared {
            args: normalized,
            header: header("man", &summary),
            preview: String::new(),
            needs_approval: false,
            approval_label: "man".to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let page = match prepared.required_text("page") {
            Ok(p) => p,
            Err(missing) => return missing,
        };
        let search = prepared.args.get("search").and_then(Value::as_bool) == Some(true);
        let section = prepared.text("section");
        let mut args: Vec<OsString> = vec!["-P".into(), "cat".into()];
        if search {
            args.push("-k".into());
            if let Some(s) = section {
                args.push("-s".into());
                args.push(s.into());
            }
        } else if let Some(s) = section {
            args.push(s.into());
        }
        // No `--` before the page: man-db would look it up as a page too. The page and the
        // search were checked not to start with '-'.
        args.push(page.into());
        let run = run_captured(Captured {
            program: &self.program,
            args,
            cwd: &ctx.cwd,
            env: self.environment(),
            stdin: None,
            timeout: MAN_TIMEOUT,
            output_cap: OUTPUT_CAP,
        })
        .await;
        let out = match run {
            Ok(out) => out,
            Err(CapturedError::NotInstalled) => {
                return ToolOutput::error(format!(
                    "Error: man is not installed on this node ('{}' was not found; install \
                     the man-db package)",
                    self.program
                ));
            }
            Err(CapturedError::Spawn(e)) => {
                return ToolOutput::error(format!("Error: cannot run man: {e}"));
            }
            Err(CapturedError::TimedOut) => {
                return ToolOutput::error(format!(
                    "Error: man did not finish within {}s and was stopped",
                    MAN_TIMEOUT.as_secs()
                ));
            }
        };
        let in_section = section
            .map(|s| format!(" in section {s}"))
            .unwrap_or_default();
        if out.status.code() == Some(NOT_FOUND) {
            return if search {
                ToolOutput::ok(format!("(no manual pages match '{page}'{in_section})"))
            } else {
                ToolOutput::error(format!(
                    "Error: no manual entry for '{page}'{in_section} (search with \
                     search=true to find the page's name)"
                ))
            };
        }
        let text = plain_text(&out.stdout);
        if !out.status.success() || text.trim().is_empty() {
            let reason = out.stderr.trim();
            return finish(
                ToolOutput::error(format!(
                    "Error: man failed for '{page}'{in_section}: {}",
                    if reason.is_empty() {
                        format!("exit status {}", out.status)
                    } else {
                        reason.to_owned()
                    }
                )),
                ctx,
            );
        }
        let mut text = text.trim_end().to_owned();
        if out.cut {
            text.push_str(&format!("\n[page cut at {OUTPUT_CAP} bytes]"));
        }
        finish(ToolOutput::ok(text), ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sections_and_searches_are_checked() {
        for ok in [
            "ls",
            "git-log",
            "printf",
            "std::vector",
            "g++",
            "systemd.unit",
        ] {
            assert!(check_page(ok).is_ok(), "{ok}");
        }
        for bad in [
            "-k",
            "../etc/passwd",
            "/etc/passwd",
            "ls; id",
            "a b",
            "$(id)",
        ] {
            assert!(check_page(bad).is_err(), "{bad}");
        }
        for ok in ["1", "3p", "8", "n", "1ssl"] {
            assert!(check_section(ok).is_ok(), "{ok}");
        }
        for bad in ["", "0", "-1", "1 2", "x", "3/p"] {
            assert!(check_section(bad).is_err(), "{bad}");
        }
        assert!(check_search("^ls$").is_ok());
        assert!(check_search("--regex").is_err());
        assert!(check_search("two words").is_err());
    }

    #[test]
    fn overstrike_and_colour_are_removed() {
        assert_eq!(plain_text("N\u{8}NA\u{8}AM\u{8}ME\u{8}E"), "NAME");
        assert_eq!(plain_text("_\u{8}f_\u{8}i_\u{8}l_\u{8}e"), "file");
        assert_eq!(plain_text("\u{1b}[1mbold\u{1b}[0m text"), "bold text");
    }
}
