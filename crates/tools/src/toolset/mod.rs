//! Tool sets by intent, deferred loading and canonical names (seeds 002 and 004).
//!
//! - [`ToolIntent`] ([`intent`]): what a workstream stores — toggles, never a list of all
//!   tools;
//! - [`expand()`] ([`expand`](mod@expand)): the intent against the live registry, deterministically;
//! - [`ToolSurface`] ([`surface`]): one turn's tools — the array (resident + loaded +
//!   `tool_search`), the deferred catalog for the system prompt, and dispatch by exact name;
//! - [`ToolSearchTool`] ([`search_tool`]): the synthetic `tool_search` (BM25 in [`bm25`]);
//! - [`aliases`]: the replay-only legacy names (`remember`, `forget`, `task`, `plan`);
//! - [`ToolPayload`] ([`payload`]): the inspection record of a prepared tool array (bytes,
//!   SHA-256, provenance, residency) and the tool budget.
//!
//! Nothing here knows workstreams or turns: the engine builds a surface at each turn
//! boundary and keeps it for the turn.

pub mod aliases;
pub mod bm25;
pub mod expand;
pub mod intent;
pub mod payload;
pub mod search_tool;
pub mod surface;

/// The name of the synthetic tool-search tool.
pub const TOOL_SEARCH: &str = "tool_search";

pub use aliases::{Alias, AliasTool, LEGACY_ALIASES};
pub use expand::{DEFAULT_PLAN_TOOLS, Expansion, SearchMode, ToolsetConfig, WEB_SEARCH, expand};
pub use intent::{IntentError, ToolIntent};
pub use payload::{PayloadDeferred, PayloadTool, ToolBudget, ToolPayload, sha256_hex};
pub use search_tool::{LoadedTools, ToolSearchTool, tool_search_definition};
pub use surface::{
    CATALOG_HEADER, PLAN_MODE_PROMPT, Residency, ResolveError, SurfaceTool, ToolSurface, wire_entry,
};
