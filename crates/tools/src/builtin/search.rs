//! `search`: regex search over a directory tree with the ripgrep libraries. The walk honours
//! `.gitignore` (also outside git repositories), skips hidden and binary files, visits files
//! in name order, and runs on the blocking pool; it stops at a result cap, at a timeout, or
//! when the call is dropped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::WalkBuilder;
use ignore::overrides::{Override, OverrideBuilder};
use serde_json::{Value, json};

use super::{finish, header};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::paths;
use crate::schema::builtin_definition;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

const DEFAULT_MAX_RESULTS: i64 = 200;
const MAX_MAX_RESULTS: i64 = 2000;
/// Characters of a matching line shown.
const MAX_LINE_CHARS: usize = 500;

/// The `search` tool.
#[derive(Debug, Clone)]
pub struct SearchTool {
    definition: ToolDefinition,
    timeout: Duration,
}

impl SearchTool {
    pub fn new() -> Result<Self, RegistryError> {
        Ok(Self {
            definition: builtin_definition("search")?,
            timeout: Duration::from_secs(30),
        })
    }

    /// How long a search may run before it returns the matches found so far.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// A validated search request.
#[derive(Debug, Clone)]
struct Query {
    pattern: String,
    root: PathBuf,
    include: Vec<String>,
    case_insensitive: bool,
    max_results: usize,
}

impl Query {
    fn parse(args: &Value, cwd: &Path) -> Result<Self, String> {
        let a = Args::new(args)?;
        let pattern = a.string("query")?;
        if pattern.is_empty() {
            return Err("Error: argument 'query' must not be empty".into());
        }
        let root = match a.opt_string("path")?.map(str::trim) {
            None | Some("") => cwd.to_path_buf(),
            Some(p) => paths::resolve(cwd, p),
        };
        let include = a
            .opt_string("include")?
            .map(|s| {
                s.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let max = a.opt_int("max_results")?.unwrap_or(DEFAULT_MAX_RESULTS);
        if max < 1 {
            return Err(format!("Error: max_results must be 1 or more, got {max}"));
        }
        let query = Self {
            pattern: pattern.to_owned(),
            root,
            include,
            case_insensitive: a.opt_bool("case_insensitive")?.unwrap_or(false),
            max_results: usize::try_from(max.min(MAX_MAX_RESULTS)).unwrap_or(200),
        };
        query.matcher()?;
        query.overrides()?;
        Ok(query)
    }

    fn matcher(&self) -> Result<RegexMatcher, String> {
        RegexMatcherBuilder::new()
            .case_insensitive(self.case_insensitive)
            .build(&self.pattern)
            .map_err(|e| format!("Error: invalid regex '{}': {e}", self.pattern))
    }

    fn overrides(&self) -> Result<Override, String> {
        let mut builder = OverrideBuilder::new(&self.root);
        for glob in &self.include {
            builder
                .add(glob)
                .map_err(|e| format!("Error: invalid include glob '{glob}': {e}"))?;
        }
        builder
            .build()
            .map_err(|e| format!("Error: invalid include glob: {e}"))
    }

    fn to_json(&self) -> Value {
        json!({
            "query": self.pattern,
            "path": self.root.to_string_lossy(),
            "include": self.include.join(","),
            "case_insensitive": self.case_insensitive,
            "max_results": self.max_results,
        })
    }
}

/// Sets the flag when dropped: stops the blocking walk if the call is cancelled.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
struct Found {
    lines: Vec<String>,
    capped: bool,
    stopped: bool,
}

#[async_trait]
impl Tool for SearchTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let query = Query::parse(&args, &ctx.cwd)?;
        let shown = paths::display(&ctx.cwd, &query.root);
        let shown = if query.root == ctx.cwd {
            ".".to_owned()
        } else {
            shown
        };
        let access = paths::Access::check(&ctx.cwd, &[&query.root]);
        Ok(Prepared {
            args: query.to_json(),
            header: header("search", &format!("/{}/ in {shown}", query.pattern)),
            preview: access.note(),
            needs_approval: !access.is_inside(),
            approval_label: access.read_label("search"),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let query = match Query::parse(&prepared.args, &ctx.cwd) {
            Ok(q) => q,
            Err(e) => return finish(ToolOutput::error(e), ctx),
        };
        let shown = paths::display(&ctx.cwd, &query.root);
        match tokio::fs::metadata(&query.root).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return finish(
                    ToolOutput::error(format!("Error: path not found: {shown}")),
                    ctx,
                );
            }
            Err(e) => {
                return finish(
                    ToolOutput::error(format!("Error: cannot search {shown}: {e}")),
                    ctx,
                );
            }
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let guard = CancelOnDrop(cancel.clone());
        let cwd = ctx.cwd.clone();
        let q = query.clone();
        let mut handle = tokio::task::spawn_blocking(move || walk(&q, &cwd, &cancel));
        let (found, timed_out) = match tokio::time::timeout(self.timeout, &mut handle).await {
            Ok(joined) => (joined, false),
            Err(_) => {
                guard.0.store(true, Ordering::Relaxed);
                (handle.await, true)
            }
        };
        let found = match found {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => return finish(ToolOutput::error(e), ctx),
            Err(e) => return finish(ToolOutput::error(format!("Error: search failed: {e}")), ctx),
        };
        finish(
            ToolOutput::ok(render(
                &query,
                &shown,
                found,
                timed_out.then_some(self.timeout),
            )),
            ctx,
        )
    }
}

fn render(query: &Query, shown: &str, found: Found, timed_out: Option<Duration>) -> String {
    let mut text = found.lines.join("\n");
    if found.lines.is_empty() {
        text = format!("No matches for '{}' in {shown}", query.pattern);
    }
    if found.capped {
        text.push_str(&format!(
            "\n[stopped after {} matches; narrow the query, path or include]",
            query.max_results
        ));
    }
    if let Some(t) = timed_out.filter(|_| found.stopped) {
        text.push_str(&format!(
            "\n[search timed out after {}s; results are partial]",
            t.as_secs()
        ));
    }
    text
}

fn walk(query: &Query, cwd: &Path, cancel: &AtomicBool) -> Result<Found, String> {
    let matcher = query.matcher()?;
    let overrides = query.overrides()?;
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .line_number(true)
        .build();
    let walker = WalkBuilder::new(&query.root)
        .require_git(false)
        .overrides(overrides)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let mut found = Found::default();
    for entry in walker {
        if cancel.load(Ordering::Relaxed) {
            found.stopped = true;
            break;
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let shown = paths::display(cwd, entry.path());
        let lines = &mut found.lines;
        let max = query.max_results;
        let mut capped = false;
        // Unreadable files are skipped, as grep -s would.
        let _ = searcher.search_path(
            &matcher,
            entry.path(),
            Lossy(|line_number, line| {
                let line = line.trim_end_matches(['\n', '\r']);
                let count = line.chars().count();
                let text = if count > MAX_LINE_CHARS {
                    let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
                    format!("{cut}… [{count} chars]")
                } else {
                    line.to_owned()
                };
                lines.push(format!("{shown}:{line_number}:{text}"));
                if lines.len() >= max {
                    capped = true;
                    return Ok(false);
                }
                Ok(!cancel.load(Ordering::Relaxed))
            }),
        );
        if capped {
            found.capped = true;
            break;
        }
    }
    Ok(found)
}
