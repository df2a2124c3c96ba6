//! # turnstone-node
//!
//! The node: it will own the HTTP API, SSE, auth and the web UI (`turnstone-server`). Today
//! it holds the terminal frontends, both running the engine in-process:
//!
//! * [`cli`] — the `turnstone` terminal client: a REPL with streaming markdown output,
//!   approval prompts, slash commands and several workstreams; also usable through a pipe;
//! * [`demo`] — `turnstone-demo`, one workstream driven by prompts given as arguments;
//! * [`backend`] — the model they run on: an OpenAI-compatible endpoint, or the scripted
//!   fake model started in-process when no base URL is given.
//!
//! * [`store_tools`] — the `memory`, `recall` and `skill` tools over the node's store,
//!   registered into the live tool registry when the node persists.
//! * [`mcp_search`] — `web_search` answered by an MCP tool (`search_backend =
//!   "mcp:server:tool"`).
//! * [`mcp_skills`] — MCP prompts mirrored into the store as read-only skills.
//!
//! It must not know Redis (the bridge talks to a node over HTTP only) and, for now, nothing
//! about persistence: sessions are not saved yet.

pub mod backend;
pub mod cli;
pub mod config_file;
pub mod demo;
pub mod error;
pub mod mcp_resource_tools;
pub mod mcp_search;
pub mod mcp_skills;
pub mod mcp_tools;
pub mod page_answerer;
pub mod persist;
pub mod send_queue;
pub mod server;
pub mod store_tools;
pub mod watch_runner;

pub use error::NodeError;
