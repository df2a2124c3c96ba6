//! # turnstone-tools
//!
//! The built-in tools of a Turnstone node and the registry that holds them.
//!
//! This crate owns:
//! - the [`Tool`] seam ([`tool`]): definition, prepare (validate + header/preview +
//!   approval label), execute (with streamed output and cancellation by drop);
//! - the JSON schemas of the built-in tools (`schemas/*.json`, embedded at compile time)
//!   and their Turnstone metadata ([`ToolMeta`]: `agent`, `task_agent`, `auto_approve`,
//!   `primary_key`);
//! - the built-in tools themselves: `bash`, `read_file`, `write_file`, `edit_file`,
//!   `diff_file`, `search`, the read-only `git` and `man`, the sandboxed `math`, and (when [`WebOptions::enabled`]) `web_fetch`, `web_search`
//!   and `notify` ([`builtin`]);
//! - the tools that need storage — `memory`, `recall`, `skill` — and their seams
//!   ([`backends`]: [`MemoryBackend`], [`HistoryBackend`], [`SkillBackend`]), which the node
//!   implements over its store;
//!   `open_preview`, registered by the node with its [`PreviewSink`];
//! - the network side of the web tools ([`web`]): SSRF screening of every connected address
//!   and redirect hop, the screened fetcher, HTML to text, the SearxNG client and webhook
//!   delivery, with the seams the node fills in ([`PageAnswerer`], [`SearchBackend`]);
//! - [`ToolRegistry`]: the live set of tools (added and removed at run time, with a
//!   generation counter and immutable snapshots), lookup by exact name, and the lenient
//!   argument parsing of model output ([`ToolRegistry::parse_arguments`]);
//! - [`toolset`]: tool sets by intent, deferred loading with `tool_search`, replay-only
//!   legacy aliases, and the inspection record of a prepared tool array;
//! - [`truncate_output`]: the head + tail truncation applied to tool results.
//!
//! It must not know sessions, workstreams, approval policy, the HTTP API or storage: per-call state
//! arrives through [`ToolContext`], and the engine decides what to do with a [`Prepared`]
//! call and its [`ToolOutput`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use turnstone_tools::{NoOutput, ToolContext, ToolRegistry};
//!
//! let registry = ToolRegistry::with_builtins()?;
//! let ctx = ToolContext::new("/tmp");
//! // The model sent a bare string: it maps to bash's primary key, `command`.
//! let args = registry.parse_arguments("bash", "echo hello")?;
//! if let Some(tool) = registry.get("bash") {
//!     let prepared = tool.prepare(args, &ctx)?;
//!     let output = tool.execute(&prepared, &ctx, &NoOutput).await;
//!     println!("{}", output.content);
//! }
//! # Ok(())
//! # }
//! ```

pub mod tool;
pub use tool::*;

mod arguments;
pub mod backends;
pub mod builtin;
pub mod child_env;
mod error;
mod paths;
mod process;
mod registry;
pub mod rerank;
mod schema;
pub mod toolset;
mod truncate;
pub mod watch;
pub mod web;

pub use backends::{
    BackendError, HistoryBackend, HistoryHit, MemoryBackend, MemoryEntry, MemoryQuery, MemoryScope,
    MemoryScopeRef, MemoryType, NewMemory, SkillBackend, SkillSummary,
};
pub use builtin::WatchTool;
pub use builtin::{
    BashTool, BuiltinOptions, DEFAULT_MAX_IMAGE_BYTES, DiffFileTool, EditFileTool, GitTool,
    ManTool, MathLimits, MathTool, MemoryTool, NotifyTool, OpenPreviewTool, PreviewContent,
    PreviewKind, PreviewSink, ReadFileTool, RecallTool, SearchTool, SkillTool, WebFetchTool,
    WebSearchTool, WriteFileTool,
};
pub use child_env::ChildEnv;
pub use error::{ArgumentError, RegistryError};
pub use registry::{
    FunctionSpec, Provenance, RegisteredTool, RegistrySnapshot, ToolRegistry, parse_tool_arguments,
};
pub use rerank::{RerankUse, Reranker, rerank_items};
pub use schema::{builtin_definitions, parse_definition};
pub use truncate::truncate_output;
pub use web::{
    NotifyLimiter, NotifyTarget, PageAnswerer, SearchBackend, SearchHit, SearchRequest, WebOptions,
};
