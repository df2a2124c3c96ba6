//! # turnstone-e2e
//!
//! Whole-system tests: they cross crate boundaries and run the shipped binaries from the
//! outside. The tests live in `tests/` (`tests/tests/suite/*.rs`):
//!
//! * `wire_contract` — real turns through the engine against the fake LLM over HTTP; every
//!   engine event must decode as the node's SSE payload (`turnstone_proto::sse::WsEvent`,
//!   node spec §2.2) with its fields intact;
//! * `turn_order` — the per-workstream event order of the captures in node spec §2.4/§2.6;
//! * `binaries` — `turnstone-fake-llm` and `turnstone-demo` as processes;
//! * `openai_load` — many concurrent streams through one OpenAI-compatible client.
//!
//! This library only holds what the tests need besides the crates under test: locating the
//! workspace's binaries ([`workspace_binary`]). It must not know any Turnstone type, so that it
//! never has to change when a crate under test does.
//!
//! The binaries are those of *other* packages, so Cargo does not build them for this
//! package's tests (`CARGO_BIN_EXE_*` exists only for a package's own binaries). They are
//! looked up next to the test executable (`target/<profile>/`); build them first with
//! `cargo build --workspace --bins`.

use std::path::{Path, PathBuf};

/// Why a workspace binary cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    /// The running test executable's path is unknown.
    #[error("cannot locate the test executable: {0}")]
    CurrentExe(#[source] std::io::Error),
    /// The test executable is not inside a Cargo target directory (`<profile>/deps/`).
    #[error("the test executable {0} is not in a cargo `target/<profile>/deps` directory")]
    NotInTargetDir(PathBuf),
    /// The binary was not built.
    #[error(
        "binary `{name}` not found at {path}: run `cargo build --workspace --bins` (same profile \
         and target dir) before these tests"
    )]
    Missing { name: String, path: PathBuf },
}

/// The directory holding the binaries of the profile the tests were built with: the parent
/// of the `deps/` directory the test executable runs from.
pub fn profile_dir() -> Result<PathBuf, E2eError> {
    let exe = std::env::current_exe().map_err(E2eError::CurrentExe)?;
    profile_dir_of(&exe)
}

/// [`profile_dir`] for a given test executable path.
pub fn profile_dir_of(exe: &Path) -> Result<PathBuf, E2eError> {
    let deps = exe
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "deps"))
        .ok_or_else(|| E2eError::NotInTargetDir(exe.to_path_buf()))?;
    deps.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| E2eError::NotInTargetDir(exe.to_path_buf()))
}

/// The path of the workspace binary `name` (e.g. `turnstone-demo`), built for the same profile
/// as the running tests.
pub fn workspace_binary(name: &str) -> Result<PathBuf, E2eError> {
    let path = profile_dir()?.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if path.is_file() {
        Ok(path)
    } else {
        Err(E2eError::Missing {
            name: name.to_string(),
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_dir_is_the_parent_of_deps() {
        let dir = profile_dir_of(Path::new("/t/target/debug/deps/all-0123")).unwrap();
        assert_eq!(dir, Path::new("/t/target/debug"));
    }

    #[test]
    fn an_executable_outside_deps_is_refused() {
        let err = profile_dir_of(Path::new("/usr/bin/all")).unwrap_err();
        assert!(matches!(err, E2eError::NotInTargetDir(_)), "{err}");
    }

    #[test]
    fn a_missing_binary_names_the_build_command() {
        let err = workspace_binary("turnstone-no-such-binary").unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("cargo build --workspace --bins"),
            "{message}"
        );
    }
}
