//! Errors of this crate. Failures of a tool *call* are not errors here: they are
//! [`crate::ToolOutput`]s with `is_error` set, or the `Err(String)` of `prepare`.

/// Building or extending a [`crate::ToolRegistry`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// A tool schema is not valid JSON or lacks `name`/`description`/`parameters`.
    #[error("invalid tool schema for '{name}': {reason}")]
    InvalidSchema { name: String, reason: String },
    /// A tool with this name is already registered.
    #[error("tool '{0}' is already registered")]
    DuplicateTool(String),
}

/// The arguments a model sent for a tool call cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    /// No tool of that exact name is registered.
    #[error(
        "Unknown tool: '{name}'. tool '{name}' is not registered. Available tools: {}",
        .available.join(", ")
    )]
    UnknownTool {
        name: String,
        available: Vec<String>,
    },
    /// The arguments are neither a JSON object nor a bare string the tool can take.
    #[error("JSON parse error: {0}")]
    Json(String),
}
