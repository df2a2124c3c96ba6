//! The two error types: configuration (bad input at start-up) and runtime (a call failed).

use std::path::PathBuf;

/// A configuration error: always names the server (or the file) it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpConfigError {
    /// The server name is empty, contains `__` or characters outside `[A-Za-z0-9_-]`.
    #[error("MCP server name '{server}' is invalid: {reason}")]
    InvalidName {
        /// The name as configured.
        server: String,
        /// Why it was refused.
        reason: String,
    },
    /// The server's table is malformed (no command and no url, wrong types, bad header …).
    #[error("MCP server '{server}': {reason}")]
    InvalidServer {
        /// The server's name.
        server: String,
        /// What is wrong.
        reason: String,
    },
    /// The document itself could not be parsed.
    #[error("MCP configuration: {0}")]
    Parse(String),
    /// The `--mcp-config` file could not be read.
    #[error("MCP configuration file {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: String,
    },
}

/// A runtime error of [`McpManager`](crate::McpManager) calls. Every variant reads as a
/// complete sentence that can be shown to the model or a person as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// No ready server exposes a tool with this qualified name.
    #[error("MCP tool '{0}' is not available")]
    UnknownTool(String),
    /// No server is configured under this name.
    #[error("MCP server '{0}' is not configured")]
    UnknownServer(String),
    /// The server has no prompt with this name.
    #[error("MCP server '{server}' has no prompt '{prompt}'")]
    UnknownPrompt {
        /// The server.
        server: String,
        /// The prompt name asked for.
        prompt: String,
    },
    /// The server is not connected (still connecting, failed, or reconnecting for too long).
    #[error("MCP server '{server}' is not connected ({state})")]
    NotConnected {
        /// The server.
        server: String,
        /// Its state and last error, in words.
        state: String,
    },
    /// The connection broke during the operation (the server crashed or went away); the
    /// server is being reconnected in the background.
    #[error("MCP server '{server}' disconnected during {operation}: {detail}; reconnecting")]
    Disconnected {
        /// The server.
        server: String,
        /// What was being done (`tools/call 'x'` …).
        operation: String,
        /// The transport's account, with the server's last stderr line when there is one.
        detail: String,
    },
    /// The operation did not finish in time.
    #[error("MCP {operation} on server '{server}' timed out after {secs}s")]
    Timeout {
        /// The server.
        server: String,
        /// What was being done.
        operation: String,
        /// The limit, in seconds.
        secs: u64,
    },
    /// The server answered with a JSON-RPC error.
    #[error("MCP server '{server}' answered {operation} with error {code}: {message}")]
    Server {
        /// The server.
        server: String,
        /// What was being done.
        operation: String,
        /// The JSON-RPC error code (e.g. -32601 method not found, -32602 invalid params).
        code: i32,
        /// The server's message.
        message: String,
    },
    /// The arguments are not acceptable before anything is sent.
    #[error("invalid arguments for {target}: {reason}")]
    InvalidArguments {
        /// The tool or prompt.
        target: String,
        /// What is wrong.
        reason: String,
    },
    /// The server sent something the protocol does not allow here.
    #[error("MCP server '{server}' gave an unexpected answer to {operation}: {detail}")]
    Protocol {
        /// The server.
        server: String,
        /// What was being done.
        operation: String,
        /// What was wrong.
        detail: String,
    },
    /// The manager has been shut down.
    #[error("the MCP client has been shut down")]
    ShutDown,
}
