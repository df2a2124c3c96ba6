//! Integration tests of `turnstone-mcp` against real MCP servers (one test binary):
//! `@modelcontextprotocol/server-filesystem` and `server-everything` over stdio (npm), a
//! FastMCP server (PyPI `mcp`) over streamable HTTP, and a low-level Python server over
//! stdio. `tests/fixtures/setup.sh` installs them (the suite runs it itself, idempotently).

// Test helpers outside `#[test]` functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
