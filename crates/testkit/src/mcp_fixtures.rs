//! The MCP test fixtures (`crates/mcp/tests/fixtures/`): the reference servers from npm and
//! the FastMCP scripts with their Python venv, shared by the MCP, node and e2e tests.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The fixtures folder.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/fixtures")
}

/// Runs the fixtures' `setup.sh` once per process, under a file lock shared by every test
/// binary (nextest runs tests in parallel processes). Panics with its output on failure.
pub fn ensure() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let lock = std::env::temp_dir().join("turnstone-mcp-fixtures.lock");
        let out = match std::process::Command::new("flock")
            .arg(&lock)
            .arg(dir().join("setup.sh"))
            .output()
        {
            Ok(out) => out,
            Err(e) => panic!("cannot run flock + crates/mcp/tests/fixtures/setup.sh: {e}"),
        };
        assert!(
            out.status.success(),
            "crates/mcp/tests/fixtures/setup.sh failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// The fixtures venv's Python (`TURNSTONE_MCP_VENV`, default `~/.cache/turnstone-mcp-venv`).
pub fn python() -> String {
    let venv = std::env::var("TURNSTONE_MCP_VENV").unwrap_or_else(|_| {
        format!(
            "{}/.cache/turnstone-mcp-venv",
            std::env::var("HOME").unwrap_or_else(|_| "/root".into())
        )
    });
    format!("{venv}/bin/python")
}
