//! `edit_file`: exact string replacement, single or as an all-or-nothing batch, guarded by
//! read-before-edit. The preview is a unified diff; the write is atomic (temp file + rename).

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{finish, header, looks_binary, unified_diff};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::paths;
use crate::schema::builtin_definition;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

/// The `edit_file` tool.
#[derive(Debug, Clone)]
pub struct EditFileTool {
    definition: ToolDefinition,
}

impl EditFileTool {
    pub fn new() -> Result<Self, RegistryError> {
        Ok(Self {
            definition: builtin_definition("edit_file")?,
        })
    }
}

/// One replacement as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edit {
    old: String,
    new: String,
    near_line: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    Single { edit: Edit, replace_all: bool },
    Batch(Vec<Edit>),
}

impl Request {
    fn to_json(&self) -> Value {
        let edit_json = |e: &Edit| {
            let mut v = json!({ "old_string": e.old, "new_string": e.new });
            if let Some(n) = e.near_line {
                v["near_line"] = json!(n);
            }
            v
        };
        match self {
            Request::Single { edit, replace_all } => {
                let mut v = edit_json(edit);
                v["replace_all"] = json!(replace_all);
                v
            }
            Request::Batch(edits) => {
                json!({ "edits": edits.iter().map(edit_json).collect::<Vec<_>>() })
            }
        }
    }
}

fn parse_edit(a: &Args<'_>, label: &str) -> Result<Edit, String> {
    let old = a.string("old_string").map_err(|e| format!("{label}{e}"))?;
    let new = a.string("new_string").map_err(|e| format!("{label}{e}"))?;
    let near_line = match a.opt_int("near_line")? {
        Some(n) if n < 1 => {
            return Err(format!(
                "{label}Error: near_line must be 1 or more, got {n}"
            ));
        }
        n => n.map(i64::unsigned_abs),
    };
    if old.is_empty() {
        return Err(format!("{label}Error: old_string must not be empty"));
    }
    if old == new {
        return Err(format!(
            "{label}Error: old_string and new_string are identical; nothing to change"
        ));
    }
    Ok(Edit {
        old: old.to_owned(),
        new: new.to_owned(),
        near_line,
    })
}

fn parse_request(args: &Value) -> Result<(String, Request), String> {
    let a = Args::new(args)?;
    let path = a.non_blank("path")?.to_owned();
    let replace_all = a.opt_bool("replace_all")?.unwrap_or(false);
    let request = match a.opt_array("edits")? {
        Some(edits) => {
            if a.has("old_string") || a.has("new_string") {
                return Err("Error: give either old_string/new_string or edits, not both".into());
            }
            if replace_all {
                return Err("Error: replace_all cannot be combined with edits".into());
            }
            if edits.is_empty() {
                return Err("Error: edits is empty".into());
            }
            let mut parsed = Vec::with_capacity(edits.len());
            for (i, e) in edits.iter().enumerate() {
                let label = format!("edit #{}: ", i + 1);
                let ea = Args::new(e).map_err(|err| format!("{label}{err}"))?;
                parsed.push(parse_edit(&ea, &label)?);
            }
            Request::Batch(parsed)
        }
        None => {
            if !a.has("old_string") {
                return Err("Error: give old_string and new_string, or an edits array".into());
            }
            let edit = parse_edit(&a, "")?;
            if replace_all && edit.near_line.is_some() {
                return Err("Error: replace_all cannot be combined with near_line".into());
            }
            Request::Single { edit, replace_all }
        }
    };
    Ok((path, request))
}

/// The result of applying a request to a file's content.
#[derive(Debug)]
struct Applied {
    content: String,
    summary: String,
}

/// 1-based line number of a byte offset.
fn line_of(content: &str, offset: usize) -> u64 {
    content.as_bytes()[..offset]
        .iter()
        .filter(|b| **b == b'\n')
        .count() as u64
        + 1
}

/// Makes an LF-only edit match a CRLF file.
fn adapt_newlines(content: &str, edit: &Edit) -> Edit {
    if content.contains("\r\n")
        && !edit.old.contains('\r')
        && edit.old.contains('\n')
        && !content.contains(&edit.old)
    {
        Edit {
            old: edit.old.replace('\n', "\r\n"),
            new: edit.new.replace('\n', "\r\n"),
            near_line: edit.near_line,
        }
    } else {
        edit.clone()
    }
}

fn not_found(content: &str, edit: &Edit, shown: &str) -> String {
    let mut msg = format!("Error: old_string not found in {shown}");
    let trimmed = edit.old.trim();
    if !trimmed.is_empty() && trimmed != edit.old && content.contains(trimmed) {
        msg.push_str(" (the text occurs with different leading/trailing whitespace)");
    } else {
        msg.push_str("; read the file again and copy the text exactly, including indentation");
    }
    msg
}

/// Byte range of the one occurrence an edit targets.
fn locate(content: &str, edit: &Edit, shown: &str) -> Result<(usize, usize), String> {
    let starts: Vec<usize> = content.match_indices(&edit.old).map(|(i, _)| i).collect();
    let start = match (starts.as_slice(), edit.near_line) {
        ([], _) => return Err(not_found(content, edit, shown)),
        ([only], _) => *only,
        (many, Some(near)) => *many
            .iter()
            .min_by_key(|s| line_of(content, **s).abs_diff(near))
            .unwrap_or(&many[0]),
        (many, None) => {
            let lines: Vec<String> = many
                .iter()
                .take(20)
                .map(|s| line_of(content, *s).to_string())
                .collect();
            return Err(format!(
                "Error: old_string occurs {} times in {shown} (lines {}); add surrounding context to \
                 make it unique, pass near_line, or set replace_all",
                many.len(),
                lines.join(", ")
            ));
        }
    };
    Ok((start, start + edit.old.len()))
}

fn apply(content: &str, request: &Request, shown: &str) -> Result<Applied, String> {
    match request {
        Request::Single {
            edit,
            replace_all: true,
        } => {
            let edit = adapt_newlines(content, edit);
            let count = content.matches(&edit.old).count();
            if count == 0 {
                return Err(not_found(content, &edit, shown));
            }
            Ok(Applied {
                content: content.replace(&edit.old, &edit.new),
                summary: format!(
                    "replaced {count} occurrence{}",
                    if count == 1 { "" } else { "s" }
                ),
            })
        }
        Request::Single {
            edit,
            replace_all: false,
        } => {
            let edit = adapt_newlines(content, edit);
            let (start, end) = locate(content, &edit, shown)?;
            let mut out = String::with_capacity(content.len() + edit.new.len());
            out.push_str(&content[..start]);
            out.push_str(&edit.new);
            out.push_str(&content[end..]);
            Ok(Applied {
                content: out,
                summary: format!("replaced 1 occurrence at line {}", line_of(content, start)),
            })
        }
        Request::Batch(edits) => {
            let mut ranges = Vec::with_capacity(edits.len());
            for (i, edit) in edits.iter().enumerate() {
                let edit = adapt_newlines(content, edit);
                let (start, end) = locate(content, &edit, shown)
                    .map_err(|e| format!("edit #{}: {e}; no edits were applied", i + 1))?;
                ranges.push((start, end, i, edit.new));
            }
            ranges.sort_by_key(|r| (r.0, r.1));
            for pair in ranges.windows(2) {
                if pair[0].1 > pair[1].0 {
                    return Err(format!(
                        "Error: edits #{} and #{} overlap; no edits were applied",
                        pair[0].2.min(pair[1].2) + 1,
                        pair[0].2.max(pair[1].2) + 1
                    ));
                }
            }
            let mut out = content.to_owned();
            // From the end, so earlier offsets stay valid.
            for (start, end, _, new) in ranges.iter().rev() {
                out.replace_range(*start..*end, new);
            }
            let lines: Vec<String> = ranges
                .iter()
                .map(|r| line_of(content, r.0).to_string())
                .collect();
            Ok(Applied {
                content: out,
                summary: format!(
                    "applied {} edits (lines {})",
                    ranges.len(),
                    lines.join(", ")
                ),
            })
        }
    }
}

/// Reads a text file for editing, with messages for the model.
fn load(path: &Path, shown: &str, bytes: std::io::Result<Vec<u8>>) -> Result<String, String> {
    match bytes {
        Ok(bytes) if looks_binary(&bytes) => Err(format!(
            "Error: {shown} looks like a binary file; edit_file only edits text"
        )),
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| {
            format!("Error: {shown} is not valid UTF-8 text; edit_file cannot edit it safely")
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("Error: file not found: {shown}"))
        }
        Err(_) if path.is_dir() => Err(format!("Error: {shown} is a directory, not a file")),
        Err(e) => Err(format!("Error: cannot read {shown}: {e}")),
    }
}

fn guard(ctx: &ToolContext, path: &Path, shown: &str) -> Result<(), String> {
    if paths::was_read(ctx, path) {
        Ok(())
    } else {
        Err(format!(
            "Error: {shown} has not been read in this conversation; call read_file on it first \
             so the edit is based on its current content"
        ))
    }
}

#[async_trait]
impl Tool for EditFileTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let (raw_path, request) = parse_request(&args)?;
        let path = paths::resolve(&ctx.cwd, &raw_path);
        let shown = paths::display(&ctx.cwd, &path);
        if path.is_dir() {
            return Err(format!("Error: {shown} is a directory, not a file"));
        }
        let content = load(&path, &shown, std::fs::read(&path))?;
        guard(ctx, &path, &shown)?;
        let applied = apply(&content, &request, &shown)?;
        let mut normalized = request.to_json();
        normalized["path"] = json!(path.to_string_lossy());
        Ok(Prepared {
            args: normalized,
            header: header(
                "edit_file",
                &format!(
                    "{shown}{} ({})",
                    paths::resolved_suffix(&ctx.cwd, &path),
                    applied.summary
                ),
            ),
            preview: unified_diff(&content, &applied.content, &shown, &shown, 3),
            needs_approval: true,
            approval_label: "edit_file".to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let result = async {
            let (raw_path, request) = parse_request(&prepared.args)?;
            let path = paths::resolve(&ctx.cwd, &raw_path);
            let shown = paths::display(&ctx.cwd, &path);
            guard(ctx, &path, &shown)?;
            // Applied again to the current content: the file may have changed since prepare.
            let content = load(&path, &shown, tokio::fs::read(&path).await)?;
            let applied = apply(&content, &request, &shown)?;
            let target = path.clone();
            let bytes = applied.content.into_bytes();
            tokio::task::spawn_blocking(move || write_atomic(&target, &bytes))
                .await
                .map_err(|e| format!("Error: writing {shown} was interrupted: {e}"))?
                .map_err(|e| format!("Error: cannot write {shown}: {e}"))?;
            Ok::<_, String>(format!("Edited {shown}: {}", applied.summary))
        }
        .await;
        let output = match result {
            Ok(text) => ToolOutput::ok(text),
            Err(text) => ToolOutput::error(text),
        };
        finish(output, ctx)
    }
}

/// Replaces the file (the target of a symlink) with new content via a temp file in the same
/// directory and a rename, keeping its permissions.
fn write_atomic(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let target: PathBuf = std::fs::canonicalize(path)?;
    let dir = target.parent().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "file has no parent directory",
        )
    })?;
    let permissions = std::fs::metadata(&target)?.permissions();
    let mut tmp = tempfile::Builder::new()
        .prefix(".turnstone-edit-")
        .tempfile_in(dir)?;
    tmp.write_all(content)?;
    tmp.as_file().sync_all()?;
    tmp.as_file().set_permissions(permissions)?;
    tmp.persist(&target).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(old: &str, new: &str, near: Option<u64>) -> Request {
        Request::Single {
            edit: Edit {
                old: old.into(),
                new: new.into(),
                near_line: near,
            },
            replace_all: false,
        }
    }

    #[test]
    fn near_line_picks_the_closest_occurrence() {
        let content = "x = 1\ny = 2\nx = 1\nz\nx = 1\n";
        let out = apply(content, &single("x = 1", "x = 9", Some(4)), "f").unwrap();
        assert_eq!(out.content, "x = 1\ny = 2\nx = 9\nz\nx = 1\n");
        let out = apply(content, &single("x = 1", "x = 9", Some(100)), "f").unwrap();
        assert_eq!(out.content, "x = 1\ny = 2\nx = 1\nz\nx = 9\n");
        let err = apply(content, &single("x = 1", "x = 9", None), "f").unwrap_err();
        assert!(
            err.contains("occurs 3 times") && err.contains("lines 1, 3, 5"),
            "{err}"
        );
    }

    #[test]
    fn batch_is_validated_before_anything_changes() {
        let content = "alpha\nbeta\ngamma\n";
        let batch = Request::Batch(vec![
            Edit {
                old: "gamma".into(),
                new: "GAMMA".into(),
                near_line: None,
            },
            Edit {
                old: "alpha".into(),
                new: "ALPHA".into(),
                near_line: None,
            },
        ]);
        assert_eq!(
            apply(content, &batch, "f").unwrap().content,
            "ALPHA\nbeta\nGAMMA\n"
        );
        let overlapping = Request::Batch(vec![
            Edit {
                old: "alpha\nbeta".into(),
                new: "x".into(),
                near_line: None,
            },
            Edit {
                old: "beta\ngamma".into(),
                new: "y".into(),
                near_line: None,
            },
        ]);
        assert!(
            apply(content, &overlapping, "f")
                .unwrap_err()
                .contains("overlap")
        );
    }

    #[test]
    fn crlf_files_accept_lf_edits() {
        let content = "one\r\ntwo\r\nthree\r\n";
        let out = apply(content, &single("one\ntwo", "1\n2", None), "f").unwrap();
        assert_eq!(out.content, "1\r\n2\r\nthree\r\n");
    }

    #[test]
    fn argument_combinations() {
        let bad = [
            json!({"path": "f", "old_string": "a", "new_string": "b", "edits": []}),
            json!({"path": "f", "old_string": "a", "new_string": "b", "replace_all": true, "near_line": 2}),
            json!({"path": "f", "edits": [{"old_string": "a", "new_string": "b"}], "replace_all": true}),
            json!({"path": "f"}),
            json!({"path": "f", "old_string": "", "new_string": "b"}),
            json!({"path": "f", "old_string": "a", "new_string": "a"}),
            json!({"path": "f", "old_string": "a"}),
            json!({"path": "f", "edits": []}),
            json!({"path": "f", "edits": [{"old_string": "a"}]}),
        ];
        for args in bad {
            assert!(parse_request(&args).is_err(), "{args}");
        }
        let (_, req) = parse_request(
            &json!({"path": "f", "old_string": "a", "new_string": "b", "near_line": "3"}),
        )
        .unwrap();
        assert_eq!(req, single("a", "b", Some(3)));
        let (_, again) = parse_request(&{
            let mut v = req.to_json();
            v["path"] = json!("f");
            v
        })
        .unwrap();
        assert_eq!(again, req);
    }
}
