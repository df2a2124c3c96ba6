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

/// Where `path` really points: symlinks followed as far as the path exists, the missing
/// rest appended (so a link in the workspace to `/etc` counts as `/etc`, and a file about to
/// be created resolves through its existing parent).
pub(crate) fn real_path(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            out.extend(missing.iter().rev());
            return out;
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name);
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Whether a tool call may touch files without asking: every target inside the workspace
/// (the context's `cwd`, both sides resolved with [`real_path`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Access {
    /// The resolved targets outside the workspace (empty: all inside).
    pub outside: Vec<PathBuf>,
}

impl Access {
    /// Checks the (already [`resolve`]d) `targets` against the workspace `cwd`.
    pub(crate) fn check(cwd: &Path, targets: &[&Path]) -> Self {
        let root = real_path(cwd);
        let outside = targets
            .iter()
            .map(|t| real_path(t))
            .filter(|real| !real.starts_with(&root))
            .collect();
        Self { outside }
    }

    pub(crate) fn is_inside(&self) -> bool {
        self.outside.is_empty()
    }

    /// The approval label of a reading tool: `<tool>` inside the workspace (no approval
    /// needed), `<tool>_outside` outside it (approval needed).
    pub(crate) fn read_label(&self, tool: &str) -> String {
        if self.is_inside() {
            tool.to_owned()
        } else {
            format!("{tool}_outside")
        }
    }

    /// The lines the approval prompt shows for targets outside the workspace (empty inside).
    pub(crate) fn note(&self) -> String {
        self.outside
            .iter()
            .map(|p| format!("outside the workspace: {}", p.display()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The resolved target of a writing tool, for its header: ` → /real/path` when it differs
/// from what is shown (outside the workspace, or through a symlink), else empty.
pub(crate) fn resolved_suffix(cwd: &Path, path: &Path) -> String {
    let real = real_path(path);
    let root = real_path(cwd);
    let inside_plainly =
        real.starts_with(&root) && real.strip_prefix(&root).ok() == path.strip_prefix(cwd).ok();
    if inside_plainly {
        String::new()
    } else {
        format!(" \u{2192} {}", real.display())
    }
}

/// Records that the model has seen the content of `path`.
pub(crate) fn mark_read(ctx: &ToolContext, path: &Path) {
    let canonical = canonical(path);
    let mut set = ctx.read_files.lock();
    set.insert(canonical);
}

/// Whether the model has seen the content of `path` in this workstream.
pub(crate) fn was_read(ctx: &ToolContext, path: &Path) -> bool {
    let canonical = canonical(path);
    let set = ctx.read_files.lock();
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

    #[test]
    fn access_follows_symlinks_and_dot_dot() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(root.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret"), ws.join("link")).unwrap();
        let inside = resolve(&ws, "sub/new.txt");
        assert!(Access::check(&ws, &[&inside]).is_inside());
        assert_eq!(resolved_suffix(&ws, &inside), "");
        for raw in ["../secret", "link", "/etc/hostname"] {
            let target = resolve(&ws, raw);
            let access = Access::check(&ws, &[&target]);
            assert!(!access.is_inside(), "{raw}");
            assert_eq!(access.read_label("read_file"), "read_file_outside");
            assert!(!resolved_suffix(&ws, &target).is_empty(), "{raw}");
        }
        let link = Access::check(&ws, &[&resolve(&ws, "link")]);
        assert!(
            link.note()
                .ends_with(&real_path(&root.path().join("secret")).display().to_string()),
            "{}",
            link.note()
        );
    }
}
