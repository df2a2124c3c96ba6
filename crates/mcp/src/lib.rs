//! `turnstone-mcp`: the node's MCP (Model Context Protocol) client, built on `rmcp`.
//!
//! **Owns**: MCP server configuration (`[mcp.servers.<name>]` tables in config.toml and the
//! standard `{"mcpServers": {...}}` JSON file), one background connection per server (stdio
//! child processes and streamable HTTP), discovery of tools, resources, resource templates
//! and prompts, `listChanged` refreshes (debounced), on-demand refresh, reconnects with a
//! bounded backoff that always end in a full rediscovery, and the calls themselves
//! (`tools/call`, `resources/read`, `prompts/get`) with their results turned into text.
//!
//! **Must not know**: sessions, workstreams, approvals, the tool registry
//! (`turnstone_tools::Tool` is implemented by the node, which wraps [`McpTool`]s), HTTP
//! routes. It exposes plain data ([`McpManager::tools_snapshot`], [`McpManager::status`],
//! [`McpManager::counts`]) and a [`McpManager::generation`] counter so that a consumer can
//! notice any change and re-read.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use turnstone_mcp::{McpManager, parse_mcp_json};
//! let servers = parse_mcp_json(r#"{"mcpServers": {"fs": {"command": "npx",
//!     "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}}"#)?;
//! let mcp = McpManager::start(servers); // returns at once; servers connect in the background
//! for tool in mcp.tools_snapshot() {
//!     println!("{} — {}", tool.qualified_name, tool.description);
//! }
//! let result = mcp
//!     .call_tool("mcp__fs__list_directory", serde_json::json!({"path": "/tmp"}))
//!     .await?;
//! println!("{}", result.text);
//! # Ok(()) }
//! ```

mod config;
mod connection;
mod error;
mod manager;
mod types;

pub use config::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, McpServerConfig, McpTransportConfig,
    load_mcp_json, parse_mcp_json, parse_servers_value, parse_toml_config, validate_server_name,
};
pub use error::{McpConfigError, McpError};
pub use manager::{McpManager, McpOptions};
pub use types::{
    McpCounts, McpPrompt, McpPromptArgument, McpPromptMessage, McpPromptResult, McpResource,
    McpResourceContents, McpResourceTemplate, McpTool, McpToolAnnotations, McpToolResult,
    ServerState, ServerStatus, qualified_name,
};
