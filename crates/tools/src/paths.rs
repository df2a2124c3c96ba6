//! Path arguments: resolution against the context's working directory, display, and the
//! per-workstream set of files already read (the read-before-edit guard).

use std::path::{Component, Path, PathBuf};

use crate::tool::ToolContext;

/// Resolves a path argument: `~` expands to `$HOME`, relative paths join `cwd`, and `.`/`..`
/// are folded lexically (the file need not exist).
pub(crate) fn resolve(cwd: &Path, raw: &str) -> PathBuf {
    let raw = raw.trim();
    let expanded: PathBuf = match (raw.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(raw),
    };
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // Never climbs above the root.
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// How a path is shown to the model: relative to `cwd` when inside it.
pub(crate) fn display(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// The canonical form of an existing path, or the path itself when it cannot be resolved.
pub(crate) fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Records that the model has seen the content of `path`.
pub(crate) fn mark_read(ctx: &ToolContext, path: &Path) {
    let canonical = canonical(path);
    let mut set = ctx
        .read_files
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    set.insert(canonical);
}

/// Whether the model has seen the content of `path` in this workstream.
pub(crate) fn was_read(ctx: &ToolContext, path: &Path) -> bool {
    let canonical = canonical(path);
    let set = ctx
        .read_files
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    set.contains(&canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_and_dot_segments() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            resolve(cwd, "src/lib.rs"),
            PathBuf::from("/work/project/src/lib.rs")
        );
        assert_eq!(resolve(cwd, "./a/../b"), PathBuf::from("/work/project/b"));
        assert_eq!(resolve(cwd, "../../../../etc"), PathBuf::from("/etc"));
        assert_eq!(resolve(cwd, "/abs/./x"), PathBuf::from("/abs/x"));
        assert_eq!(resolve(cwd, ""), PathBuf::from("/work/project"));
        assert_eq!(
            display(cwd, Path::new("/work/project/src/a.rs")),
            "src/a.rs"
        );
        assert_eq!(display(cwd, Path::new("/other/a.rs")), "/other/a.rs");
    }
}
