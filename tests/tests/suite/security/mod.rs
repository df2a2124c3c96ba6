//! The black-box security suite (issue 12): real `turnstone-server`, `turnstone-bridge`,
//! `turnstone-console` and Redis processes on loopback, one file per item.

mod auto_approve_scope;
mod console_proc;
mod file_tools_outside;
mod heartbeat_signing;
mod node_events;
mod proxy_headers;
mod tool_env;
