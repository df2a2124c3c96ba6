//! The security suite (issue 12): real `turnstone-server` processes on loopback, one file
//! per item, each test failing on the code before its fix.

mod auth_node;

mod cross_site;
mod login_limiter;
mod memory_caps;
mod metrics_exposure;
mod route_permissions;
mod session_revocation;
mod setup_bootstrap;
