//! # turnstone-node
//!
//! The node server (`turnstone-server`): the HTTP API, SSE, auth and the web UI over the
//! engine. The terminal frontends (`turnstone`, `turnstone-demo`) live in `turnstone-cli`.
//!
//! * [`backend`] — the model a node (or a terminal frontend) runs on: an OpenAI-compatible
//!   endpoint, or — without a base URL and with the default feature `scripted-model` — the
//!   scripted fake model started in-process. Built with `--no-default-features` the node
//!   links no fake model and needs a base URL.
//! * [`store_tools`] — the `memory`, `recall` and `skill` tools over the node's store,
//!   registered into the live tool registry when the node persists.
//! * [`mcp_search`] — `web_search` answered by an MCP tool (`search_backend =
//!   "mcp:server:tool"`).
//! * [`mcp_skills`] — MCP prompts mirrored into the store as read-only skills.
//! * [`rerank`] — `[rerank]`: the optional Cohere/Jina-compatible reranker of `web_search`
//!   results and memory/tool/skill retrieval, and `rerank-calibrate`'s probes.
//!
//! * [`grpc`] — the gRPC API (`turnstone.v1.NodeService`, health, reflection), served on
//!   the HTTP port and optionally on `--grpc-port`.
//!
//! It must not know Redis (the bridge talks to a node over HTTP only).

pub mod backend;
pub mod config_file;
pub mod error;
pub mod grpc;
pub mod judge;
pub mod mcp_resource_tools;
pub mod mcp_search;
pub mod mcp_skills;
pub mod mcp_tools;
pub mod page_answerer;
pub mod persist;
pub mod rerank;
pub mod send_queue;
pub mod server;
pub mod store_tools;
pub mod tuning;
pub mod watch_runner;

pub use error::NodeError;
