//! `write_file`: replaces a file's content, or appends to it; parent directories are created.

use std::path::Path;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::{finish, head_lines, header, looks_binary, unified_diff};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::paths;
use crate::schema::builtin_definition;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

/// Existing files above this size get a content preview instead of a diff.
const MAX_DIFF_BYTES: u64 = 1024 * 1024;
/// Lines of new content shown in a preview.
const PREVIEW_LINES: usize = 40;

/// The `write_file` tool.
#[derive(Debug, Clone)]
pub struct WriteFileTool {
    definition: ToolDefinition,
}

impl WriteFileTool {
    pub fn new() -> Result<Self, RegistryError> {
        Ok(Self {
            definition: builtin_definition("write_file")?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Overwrite,
    Append,
}

fn parse_mode(raw: Option<&str>) -> Result<Mode, String> {
    match raw.map(str::trim) {
        None | Some("") | Some("overwrite") => Ok(Mode::Overwrite),
        Some("append") => Ok(Mode::Append),
        Some(other) => Err(format!(
            "Error: mode must be 'overwrite' or 'append', got '{other}'"
        )),
    }
}

#[async_trait]
impl Tool for WriteFileTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let raw_path = a.non_blank("path")?;
        let content = a.string("content")?;
        let mode = parse_mode(a.opt_string("mode")?)?;
        let path = paths::resolve(&ctx.cwd, raw_path);
        let shown = paths::display(&ctx.cwd, &path);
        let existing = std::fs::metadata(&path).ok();
        if existing.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(format!("Error: {shown} is a directory; give a file path"));
        }
        let exists = existing.is_some();
        let approval_label = match mode {
            Mode::Append => "append_file",
            Mode::Overwrite if exists && !paths::was_read(ctx, &path) => "overwrite_file",
            Mode::Overwrite => "write_file",
        };
        let preview = match (mode, existing) {
            (Mode::Overwrite, Some(meta)) if meta.len() <= MAX_DIFF_BYTES => {
                match std::fs::read(&path) {
                    Ok(old) if !looks_binary(&old) => {
                        let old = String::from_utf8_lossy(&old);
                        let diff = unified_diff(&old, content, &shown, &shown, 3);
                        if diff.is_empty() {
                            "(content unchanged)".to_owned()
                        } else {
                            diff
                        }
                    }
                    _ => head_lines(content, PREVIEW_LINES),
                }
            }
            _ => head_lines(content, PREVIEW_LINES),
        };
        let verb = match (mode, exists) {
            (Mode::Append, _) => "append to",
            (Mode::Overwrite, true) => "overwrite",
            (Mode::Overwrite, false) => "create",
        };
        Ok(Prepared {
            args: json!({
                "path": path.to_string_lossy(),
                "content": content,
                "mode": if mode == Mode::Append { "append" } else { "overwrite" },
            }),
            header: header(
                "write_file",
                &format!(
                    "{verb} {shown}{} ({} bytes)",
                    paths::resolved_suffix(&ctx.cwd, &path),
                    content.len()
                ),
            ),
            preview,
            needs_approval: true,
            approval_label: approval_label.to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let (Some(raw_path), Some(content)) = (prepared.text("path"), prepared.text("content"))
        else {
            return ToolOutput::error("Error: 'path' and 'content' are required");
        };
        let mode = match parse_mode(prepared.text("mode")) {
            Ok(mode) => mode,
            Err(e) => return ToolOutput::error(e),
        };
        let path = paths::resolve(&ctx.cwd, raw_path);
        finish(write(&path, content, mode, ctx).await, ctx)
    }
}

async fn write(path: &Path, content: &str, mode: Mode, ctx: &ToolContext) -> ToolOutput {
    let shown = paths::display(&ctx.cwd, path);
    if tokio::fs::metadata(path).await.is_ok_and(|m| m.is_dir()) {
        return ToolOutput::error(format!("Error: {shown} is a directory; give a file path"));
    }
    if let Some(parent) = path.parent()
        && let Err(e) = tokio::fs::create_dir_all(parent).await
    {
        return ToolOutput::error(format!(
            "Error: cannot create directory {}: {e}",
            parent.display()
        ));
    }
    let result = match mode {
        Mode::Overwrite => tokio::fs::write(path, content).await,
        Mode::Append => append(path, content).await,
    };
    if let Err(e) = result {
        return ToolOutput::error(format!("Error: cannot write {shown}: {e}"));
    }
    // The model knows what it wrote: a later edit needs no extra read.
    if mode == Mode::Overwrite {
        paths::mark_read(ctx, path);
    }
    let lines = content.lines().count();
    match mode {
        Mode::Overwrite => ToolOutput::ok(format!(
            "Wrote {} bytes ({lines} lines) to {shown}",
            content.len()
        )),
        Mode::Append => ToolOutput::ok(format!(
            "Appended {} bytes ({lines} lines) to {shown}",
            content.len()
        )),
    }
}

async fn append(path: &Path, content: &str) -> std::io::Result<()> {
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await?;
    file.write_all(content.as_bytes()).await?;
    file.flush().await
}
