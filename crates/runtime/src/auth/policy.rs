//! What a request needs, whether auth is on, and where it may be off.
//!
//! Generic mechanics only: which route needs what is said by the tables next to the routers
//! (the node's in `turnstone_proto::routes::NODE_ROUTES`, the console's in
//! `turnstone_console::routes`); a service turns a table row into an [`Access`] and hands it
//! to [`super::Authenticator::check_access`].

use std::net::IpAddr;

use turnstone_proto::routes::Needs;

use super::scope::Scope;

/// What a request needs before it may reach a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No credentials needed, even when auth is enabled.
    Public,
    /// A token granting this scope (through the hierarchy).
    Requires(Scope),
    /// The scope and, for a user's credential, the RBAC permission
    /// ([`super::Identity::has_permission`]).
    RequiresPermission(Scope, &'static str),
}

impl Access {
    /// The check a row of a route table asks for. `metrics_auth`: `/metrics` ([`Needs::Metrics`])
    /// needs `read` instead of being public.
    pub fn of_route(needs: Needs, metrics_auth: bool) -> Access {
        match needs {
            Needs::Public => Access::Public,
            Needs::Metrics if metrics_auth => Access::Requires(Scope::Read),
            Needs::Metrics => Access::Public,
            Needs::Scope(scope) => Access::Requires(scope),
            Needs::Permission(scope, permission) => Access::RequiresPermission(scope, permission),
        }
    }

    /// The strictest scope of `accesses` (public when they are all public or there are
    /// none), without permissions: what a request to a route with a method the route lacks
    /// needs before it hears the 405.
    pub fn strictest(accesses: impl IntoIterator<Item = Access>) -> Access {
        accesses
            .into_iter()
            .filter_map(Access::scope)
            .max()
            .map_or(Access::Public, Access::Requires)
    }

    /// The scope it needs (`None`: public).
    pub fn scope(self) -> Option<Scope> {
        match self {
            Access::Public => None,
            Access::Requires(scope) | Access::RequiresPermission(scope, _) => Some(scope),
        }
    }
}

/// Whether auth is on (spec §3.1). The environment value (`TURNSTONE_AUTH_ENABLED`) beats the
/// config value: `0`/`false`/`no` turn it off, `1`/`true`/`yes` force it on (any case, spaces
/// trimmed). Unset, blank or unrecognised environment values leave the config value.
pub fn auth_enabled(config_value: bool, env_value: Option<&str>) -> bool {
    match env_value.map(|v| v.trim().to_ascii_lowercase()) {
        Some(v) if matches!(v.as_str(), "0" | "false" | "no") => false,
        Some(v) if matches!(v.as_str(), "1" | "true" | "yes") => true,
        _ => config_value,
    }
}

/// True if a server bound to `addr` must run with auth enabled: every address except the
/// loopback ones (`127.0.0.0/8`, `::1`, and `::ffff:127.x.y.z`). The unspecified addresses
/// (`0.0.0.0`, `::`) listen on every interface and so require auth.
pub fn must_require_auth(bind_addr: IpAddr) -> bool {
    !bind_addr.to_canonical().is_loopback()
}

/// The start-up check every server runs: auth may be disabled only on a loopback bind. The
/// error names the setting and the address so the operator knows what to change. (A server
/// that does run without auth should still say so in its log.)
pub fn check_bind_policy(auth_enabled: bool, bind_addr: IpAddr) -> Result<(), String> {
    if auth_enabled || !must_require_auth(bind_addr) {
        return Ok(());
    }
    Err(format!(
        "refusing to start: auth is disabled ([auth] enabled = false or \
         TURNSTONE_AUTH_ENABLED=0) but the server would listen on {bind_addr}, which is not a \
         loopback address; enable auth, or bind to 127.0.0.1 or ::1"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn route_rows_become_checks() {
        assert_eq!(Access::of_route(Needs::Public, true), Access::Public);
        assert_eq!(Access::of_route(Needs::Metrics, false), Access::Public);
        assert_eq!(
            Access::of_route(Needs::Metrics, true),
            Access::Requires(Scope::Read)
        );
        assert_eq!(
            Access::of_route(Needs::Scope(Scope::Write), false),
            Access::Requires(Scope::Write)
        );
        let admin = Access::of_route(Needs::Permission(Scope::Approve, "admin.users"), false);
        assert_eq!(
            admin,
            Access::RequiresPermission(Scope::Approve, "admin.users")
        );
        assert_eq!(admin.scope(), Some(Scope::Approve));
        assert_eq!(Access::Public.scope(), None);
        assert_eq!(
            Access::strictest([Access::Requires(Scope::Read), admin]),
            Access::Requires(Scope::Approve)
        );
        assert_eq!(Access::strictest([Access::Public]), Access::Public);
        assert_eq!(Access::strictest([]), Access::Public);
    }

    #[test]
    fn env_beats_config() {
        assert!(auth_enabled(true, None));
        assert!(!auth_enabled(false, None));
        for off in ["0", "false", "NO", " False "] {
            assert!(!auth_enabled(true, Some(off)), "{off}");
        }
        for on in ["1", "true", "Yes"] {
            assert!(auth_enabled(false, Some(on)), "{on}");
        }
        assert!(auth_enabled(true, Some("maybe")));
        assert!(!auth_enabled(false, Some("")));
    }

    #[test]
    fn bind_policy() {
        let loopbacks: [IpAddr; 4] = [
            Ipv4Addr::LOCALHOST.into(),
            Ipv4Addr::new(127, 0, 0, 2).into(),
            Ipv6Addr::LOCALHOST.into(),
            Ipv4Addr::LOCALHOST.to_ipv6_mapped().into(),
        ];
        for addr in loopbacks {
            assert!(!must_require_auth(addr), "{addr}");
            assert_eq!(check_bind_policy(false, addr), Ok(()));
        }
        let exposed: [IpAddr; 3] = [
            Ipv4Addr::UNSPECIFIED.into(),
            Ipv6Addr::UNSPECIFIED.into(),
            Ipv4Addr::new(10, 0, 0, 5).into(),
        ];
        for addr in exposed {
            assert!(must_require_auth(addr), "{addr}");
            assert_eq!(check_bind_policy(true, addr), Ok(()));
            let err = check_bind_policy(false, addr).unwrap_err();
            assert!(err.contains(&addr.to_string()), "{err}");
            assert!(err.contains("TURNSTONE_AUTH_ENABLED"), "{err}");
        }
    }
}
