//! Which requests need which scope, whether auth is on, and where it may be off.
//!
//! These are pure functions of the method and path: they know the URL layout the original
//! services share (node, console and its `/node/<id>/...` proxy), not any router.

use std::net::IpAddr;

use super::scope::Scope;

/// What a request needs before it may reach a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No credentials needed, even when auth is enabled.
    Public,
    /// A token granting this scope (through the hierarchy).
    Requires(Scope),
}

/// Exact paths (after the `/v1` prefix is stripped) that are always public.
const PUBLIC_PATHS: &[&str] = &[
    "/",
    "/health",
    "/ready",
    "/metrics",
    "/openapi.json",
    "/docs",
    "/api/auth/login",
    "/api/auth/logout",
    "/api/auth/status",
    "/api/auth/setup",
    "/api/auth/oidc/authorize",
    "/api/auth/oidc/callback",
];

/// Path prefixes that are always public.
const PUBLIC_PREFIXES: &[&str] = &["/static/", "/shared/", "/acme/"];

/// POST paths that need `approve`.
const APPROVE_POSTS: &[&str] = &[
    "/api/approve",
    "/api/_internal/config-reload",
    "/api/_internal/mcp-reload",
    "/api/_internal/model-reload",
];

/// POST paths that need `write`.
const WRITE_POSTS: &[&str] = &[
    "/api/send",
    "/api/plan",
    "/api/command",
    "/api/cancel",
    "/api/workstreams/new",
    "/api/workstreams/close",
    "/api/cluster/workstreams/new",
    "/api/memories",
    // Ours: changing a workstream's tool set.
    "/api/tools",
];

/// The access a request needs (node API spec §3.4).
///
/// `path` is the URL path; a query string, if present, is ignored. A leading `/v1` and a
/// trailing `/` are stripped first. `OPTIONS` is always public (CORS preflight; auth skips
/// it). The console proxy forms `/node/<id>/api/<tail>` and `/node/<id>/v1/api/<tail>` are
/// classified by their inner `/api/<tail>`, but never public.
pub fn required_scope(method: &str, path: &str) -> Access {
    if method.eq_ignore_ascii_case("OPTIONS") {
        return Access::Public;
    }
    let path = normalize(path);
    if is_public(path) {
        return Access::Public;
    }
    let inner = proxied_inner_path(path).unwrap_or(path);
    Access::Requires(scope_for(method, inner))
}

/// Strips a query string, a leading `/v1` segment and trailing slashes (`/` stays `/`).
fn normalize(path: &str) -> &str {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let path = strip_v1(path);
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() { "/" } else { trimmed }
}

fn strip_v1(path: &str) -> &str {
    match path.strip_prefix("/v1") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    }
}

fn is_public(path: &str) -> bool {
    PUBLIC_PATHS.contains(&path) || PUBLIC_PREFIXES.iter().any(|p| path.starts_with(p))
}

/// `/node/<id>/api/<tail>` or `/node/<id>/v1/api/<tail>` → `/api/<tail>`.
fn proxied_inner_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/node/")?;
    let slash = rest.find('/')?;
    if slash == 0 {
        return None;
    }
    let inner = strip_v1(&rest[slash..]);
    (inner == "/api" || inner.starts_with("/api/")).then_some(inner)
}

fn scope_for(method: &str, path: &str) -> Scope {
    if path.starts_with("/api/admin/") || path == "/api/admin" {
        return Scope::Approve;
    }
    if method.eq_ignore_ascii_case("POST") {
        if APPROVE_POSTS.contains(&path) {
            return Scope::Approve;
        }
        if WRITE_POSTS.contains(&path) || is_watch_cancel(path) {
            return Scope::Write;
        }
    }
    if method.eq_ignore_ascii_case("DELETE")
        && (path
            .strip_prefix("/api/memories/")
            .is_some_and(|name| !name.is_empty())
            || is_queued_message(path))
    {
        return Scope::Write;
    }
    Scope::Read
}

/// `/api/workstreams/<ws>/queue/<correlation_id>` (one queued message).
fn is_queued_message(path: &str) -> bool {
    path.strip_prefix("/api/workstreams/")
        .and_then(|rest| rest.split_once("/queue/"))
        .is_some_and(|(ws, cid)| !ws.is_empty() && !cid.is_empty())
}

/// `/api/watches/<id>/cancel` with a non-empty id.
fn is_watch_cancel(path: &str) -> bool {
    path.strip_prefix("/api/watches/")
        .and_then(|rest| rest.strip_suffix("/cancel"))
        .is_some_and(|id| !id.is_empty())
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
    fn normalize_strips_v1_query_and_trailing_slash() {
        assert_eq!(normalize("/v1/api/send/"), "/api/send");
        assert_eq!(normalize("/v1"), "/");
        assert_eq!(normalize("/v1/"), "/");
        assert_eq!(normalize("/v10/api/send"), "/v10/api/send");
        assert_eq!(normalize("/v1/api/events?ws_id=abc"), "/api/events");
        assert_eq!(normalize(""), "/");
    }

    #[test]
    fn proxy_inner_path() {
        assert_eq!(proxied_inner_path("/node/n1/api/send"), Some("/api/send"));
        assert_eq!(
            proxied_inner_path("/node/n1/v1/api/send"),
            Some("/api/send")
        );
        assert_eq!(proxied_inner_path("/node/n1/health"), None);
        assert_eq!(proxied_inner_path("/node//api/send"), None);
        assert_eq!(proxied_inner_path("/node/n1/apix"), None);
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
