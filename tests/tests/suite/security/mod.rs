//! The black-box security suite (issue 12): real `turnstone-server`, `turnstone-bridge`,
//! `turnstone-console` and Redis processes on loopback, one file per item, each test failing
//! on the code before its fix.

mod auth_node;
mod auto_approve_scope;
mod config_tokens;
pub(crate) mod console_proc;
mod cross_site;
mod file_tools_outside;
mod heartbeat_signing;
mod login_limiter;
mod memory_caps;
mod metrics_exposure;
pub(crate) mod node_events;
mod proxy_headers;
mod route_permissions;
mod session_revocation;
mod setup_bootstrap;
mod tool_env;
