//! `diff_file`: unified diff of two files, or of a file against supplied text. Read-only;
//! the files it reads count as read for `edit_file`.

use std::path::Path;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{finish, header, looks_binary, unified_diff};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::paths;
use crate::schema::builtin_definition;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

const DEFAULT_CONTEXT: i64 = 3;
const MAX_CONTEXT: i64 = 20;
/// Files above this size are not diffed.
const MAX_BYTES: u64 = 16 * 1024 * 1024;

/// The `diff_file` tool.
#[derive(Debug, Clone)]
pub struct DiffFileTool {
    definition: ToolDefinition,
}

impl DiffFileTool {
    pub fn new() -> Result<Self, RegistryError> {
        Ok(Self {
            definition: builtin_definition("diff_file")?,
        })
    }
}

#[async_trait]
impl Tool for DiffFileTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let path_a = a.non_blank("path_a")?;
        let path_b = a.opt_string("path_b")?;
        let content_b = a.opt_string("content_b")?;
        let context = a
            .opt_int("context_lines")?
            .unwrap_or(DEFAULT_CONTEXT)
            .clamp(0, MAX_CONTEXT);
        let mut normalized = json!({
            "path_a": paths::resolve(&ctx.cwd, path_a).to_string_lossy(),
            "context_lines": context,
        });
        let summary = match (path_b, content_b) {
            (Some(_), Some(_)) => {
                return Err("Error: give either path_b or content_b, not both".into());
            }
            (None, None) => {
                return Err(
                    "Error: give path_b (a second file) or content_b (text to compare)".into(),
                );
            }
            (Some(b), None) => {
                if b.trim().is_empty() {
                    return Err("Error: argument 'path_b' must not be empty".into());
                }
                normalized["path_b"] = json!(paths::resolve(&ctx.cwd, b).to_string_lossy());
                format!("{path_a} ↔ {b}")
            }
            (None, Some(c)) => {
                normalized["content_b"] = json!(c);
                format!("{path_a} ↔ given content")
            }
        };
        let targets: Vec<std::path::PathBuf> = ["path_a", "path_b"]
            .iter()
            .filter_map(|k| normalized[*k].as_str().map(std::path::PathBuf::from))
            .collect();
        let targets: Vec<&std::path::Path> = targets.iter().map(|p| p.as_path()).collect();
        let access = paths::Access::check(&ctx.cwd, &targets);
        Ok(Prepared {
            args: normalized,
            header: header("diff_file", &summary),
            preview: access.note(),
            needs_approval: !access.is_inside(),
            approval_label: access.read_label("diff_file"),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let output = match diff(&prepared.args, ctx).await {
            Ok(text) => ToolOutput::ok(text),
            Err(text) => ToolOutput::error(text),
        };
        finish(output, ctx)
    }
}

async fn diff(args: &Value, ctx: &ToolContext) -> Result<String, String> {
    let a = Args::new(args)?;
    let path_a = paths::resolve(&ctx.cwd, a.non_blank("path_a")?);
    let context = a
        .opt_int("context_lines")?
        .unwrap_or(DEFAULT_CONTEXT)
        .clamp(0, MAX_CONTEXT);
    let shown_a = paths::display(&ctx.cwd, &path_a);
    let text_a = read_text(&path_a, &shown_a).await?;
    let (text_b, shown_b) = match (a.opt_string("path_b")?, a.opt_string("content_b")?) {
        (Some(b), None) => {
            let path_b = paths::resolve(&ctx.cwd, b);
            let shown_b = paths::display(&ctx.cwd, &path_b);
            let text = read_text(&path_b, &shown_b).await?;
            paths::mark_read(ctx, &path_b);
            (text, shown_b)
        }
        (None, Some(c)) => (c.to_owned(), format!("{shown_a} (given content)")),
        _ => return Err("Error: give either path_b or content_b".into()),
    };
    paths::mark_read(ctx, &path_a);
    let diff = unified_diff(
        &text_a,
        &text_b,
        &shown_a,
        &shown_b,
        usize::try_from(context).unwrap_or(3),
    );
    if diff.is_empty() {
        Ok(format!("No differences between {shown_a} and {shown_b}"))
    } else {
        Ok(diff)
    }
}

async fn read_text(path: &Path, shown: &str) -> Result<String, String> {
    let meta = tokio::fs::metadata(path)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("Error: file not found: {shown}"),
            _ => format!("Error: cannot read {shown}: {e}"),
        })?;
    if meta.is_dir() {
        return Err(format!("Error: {shown} is a directory, not a file"));
    }
    if meta.len() > MAX_BYTES {
        return Err(format!(
            "Error: {shown} is too large to diff ({} bytes)",
            meta.len()
        ));
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| format!("Error: cannot read {shown}: {e}"))?;
    if looks_binary(&bytes) {
        return Err(format!(
            "Error: {shown} is a binary file; only text files can be diffed"
        ));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
