//! The built-in tools. Each file holds one tool: its argument validation (`prepare`) and its
//! execution. Every output goes through [`crate::truncate_output`] with the context's limit.
//! `memory`, `recall` and `skill` need storage ([`crate::backends`]): they are not in
//! `all`; the node builds them over its store and adds them to the live registry.

pub(crate) mod bash;
pub(crate) mod blocklist;
mod diff_file;
mod edit_file;
mod git;
mod man;
mod math;
mod memory;
mod notify;
mod open_preview;
mod read_file;
mod recall;
mod search;
mod skill;
mod watch;
mod web_fetch;
mod web_search;
mod write_file;

use std::sync::Arc;
use std::time::Duration;

pub use bash::BashTool;
pub use diff_file::DiffFileTool;
pub use edit_file::EditFileTool;
pub use git::GitTool;
pub use man::ManTool;
pub use math::{MathLimits, MathTool};
pub use memory::{MemoryTool, normalise_name};
pub use notify::NotifyTool;
pub use open_preview::{OpenPreviewTool, PreviewContent, PreviewKind, PreviewSink};
pub use read_file::{DEFAULT_MAX_IMAGE_BYTES, ReadFileTool};
pub use recall::RecallTool;
pub use search::SearchTool;
pub use skill::{SkillTool, rank_skills};
pub use watch::WatchTool;
pub use web_fetch::WebFetchTool;
pub use web_search::WebSearchTool;
pub use write_file::WriteFileTool;

use crate::error::RegistryError;
use crate::schema::schema_definition;
use crate::tool::{Tool, ToolContext, ToolOutput};
use crate::truncate::truncate_output;
use crate::web::WebOptions;

/// Settings of the built-in tools that come from node configuration.
#[derive(Debug, Clone)]
pub struct BuiltinOptions {
    /// `bash` timeout when the call gives none (`tools.timeout`, default 120 s).
    pub bash_default_timeout: Duration,
    /// Extra environment for `bash` commands, added to the allowed part of the node's own.
    pub bash_env: Vec<(String, String)>,
    /// Which of the node's variables `bash` commands get (`[tools] env_passthrough`).
    pub child_env: crate::child_env::ChildEnv,
    /// How long a `search` may walk before it returns what it found so far.
    pub search_timeout: Duration,
    /// Settings of `web_fetch`, `web_search` and `notify` (registered when `web.enabled`).
    pub web: WebOptions,
    /// `read_file` refuses images larger than this (`tools.max_image_bytes`, default 5 MiB).
    pub max_image_bytes: u64,
}

impl Default for BuiltinOptions {
    fn default() -> Self {
        Self {
            bash_default_timeout: Duration::from_secs(120),
            bash_env: Vec::new(),
            child_env: crate::child_env::ChildEnv::default(),
            search_timeout: Duration::from_secs(30),
            web: WebOptions::default(),
            max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
        }
    }
}

/// All built-in tools, alphabetical by name (the original loads schema files in name order).
pub(crate) fn all(options: &BuiltinOptions) -> Result<Vec<Arc<dyn Tool>>, RegistryError> {
    let mut bash = BashTool::new()?
        .with_default_timeout(options.bash_default_timeout)
        .with_child_env(options.child_env.clone());
    for (key, value) in &options.bash_env {
        bash = bash.with_env(key, value);
    }
    let mut tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(bash),
        Arc::new(DiffFileTool::new()?),
        Arc::new(EditFileTool::new()?),
        Arc::new(GitTool::new()?.with_child_env(options.child_env.clone())),
        Arc::new(ManTool::new()?.with_child_env(options.child_env.clone())),
        Arc::new(MathTool::new()?),
        Arc::new(ReadFileTool::new()?.with_max_image_bytes(options.max_image_bytes)),
        Arc::new(SearchTool::new()?.with_timeout(options.search_timeout)),
        Arc::new(WriteFileTool::new()?),
    ];
    if options.web.enabled {
        tools.push(Arc::new(NotifyTool::new(&options.web)?));
        tools.push(Arc::new(WebFetchTool::new(&options.web)?));
        tools.push(Arc::new(WebSearchTool::new(&options.web)?));
        tools.sort_by(|a, b| a.definition().name.cmp(&b.definition().name));
    }
    Ok(tools)
}

/// Applies the context's truncation limit to a finished output.
fn finish(output: ToolOutput, ctx: &ToolContext) -> ToolOutput {
    ToolOutput {
        content: truncate_output(&output.content, ctx.truncation_limit),
        ..output
    }
}

/// `⚙ <tool>: <summary>` with the summary cut to one line of reasonable length.
fn header(tool: &str, summary: &str) -> String {
    const MAX: usize = 200;
    let first = summary.lines().next().unwrap_or("");
    let mut short: String = first.chars().take(MAX).collect();
    if first.chars().count() > MAX || summary.lines().nth(1).is_some() {
        short.push_str(" …");
    }
    format!("⚙ {tool}: {short}")
}

/// Whether bytes look like binary data (a NUL byte near the start, as git and grep decide).
fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|b| *b == 0)
}

/// The first `max_lines` lines of `text`, with a note of how many were left out.
fn head_lines(text: &str, max_lines: usize) -> String {
    let total = text.lines().count();
    let mut out: String = text.lines().take(max_lines).collect::<Vec<_>>().join("\n");
    if total > max_lines {
        out.push_str(&format!("\n… ({} more lines)", total - max_lines));
    }
    out
}

/// Unified diff of two texts, labelled like `diff -u` (`--- a` / `+++ b`).
fn unified_diff(old: &str, new: &str, label_old: &str, label_new: &str, context: usize) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(context)
        .header(label_old, label_new)
        .to_string()
}
