//! The one table that says what every route needs: public, a scope, or a scope plus an RBAC
//! permission (the spec's role table: `admin.users`, `admin.skills`, `tools.approve`, …).
//! [`super::auth::require_access`] enforces it on the route axum matched (its template, so a
//! path parameter cannot dodge an entry); a test walks the router and fails on any route
//! without an entry, and at run time a route whose template is missing here is refused.

use turnstone_runtime::auth::Scope;

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// No credentials, even with auth on.
    Public,
    /// `/metrics`: public unless the node runs with `--metrics-auth` (then `read`).
    Metrics,
    /// A credential granting the scope.
    Scope(Scope),
    /// The scope and, for a user's credential, the permission (identity-less config tokens
    /// and the services count as holding every permission).
    Permission(Scope, &'static str),
}

use Needs::{Metrics, Permission, Public};
const READ: Needs = Needs::Scope(Scope::Read);
const WRITE: Needs = Needs::Scope(Scope::Write);

/// Method, route template (as axum's `MatchedPath` reports it) and what it needs. `HEAD` is
/// looked up as `GET`.
pub const ROUTE_PERMISSIONS: &[(&str, &str, Needs)] = &[
    // Probes, UI and documentation.
    ("GET", "/health", Public),
    ("GET", "/ready", Public),
    ("GET", "/metrics", Metrics),
    ("GET", "/", Public),
    ("GET", "/static/{*path}", Public),
    ("GET", "/openapi.json", Public),
    ("GET", "/docs", Public),
    // Auth endpoints (setup checks its bootstrap credential itself).
    ("POST", "/v1/api/auth/login", Public),
    ("POST", "/v1/api/auth/logout", Public),
    ("GET", "/v1/api/auth/status", Public),
    ("POST", "/v1/api/auth/setup", Public),
    ("GET", "/v1/api/auth/oidc/authorize", Public),
    ("GET", "/v1/api/auth/oidc/callback", Public),
    ("GET", "/v1/api/auth/whoami", READ),
    // Streams and views.
    ("GET", "/v1/api/events", READ),
    ("GET", "/v1/api/events/global", READ),
    ("GET", "/v1/api/events/node", READ),
    ("GET", "/v1/api/workstreams", READ),
    ("GET", "/v1/api/workstreams/saved", READ),
    ("GET", "/v1/api/dashboard", READ),
    ("GET", "/v1/api/approvals", READ),
    ("GET", "/v1/api/tools", READ),
    ("GET", "/v1/api/previews/{preview_id}", READ),
    ("GET", "/v1/api/models", READ),
    ("GET", "/v1/api/memories", READ),
    ("POST", "/v1/api/memories/search", READ),
    ("GET", "/v1/api/skills", READ),
    ("GET", "/v1/api/watches", READ),
    ("GET", "/v1/api/_internal/mcp-status", READ),
    ("GET", "/v1/api/_internal/model-status", READ),
    // Workstreams and turns.
    (
        "POST",
        "/v1/api/workstreams/new",
        Permission(Scope::Write, "workstreams.create"),
    ),
    (
        "POST",
        "/v1/api/workstreams/close",
        Permission(Scope::Write, "workstreams.close"),
    ),
    ("POST", "/v1/api/send", WRITE),
    ("POST", "/v1/api/cancel", WRITE),
    ("GET", "/v1/api/workstreams/{ws_id}/queue", READ),
    (
        "DELETE",
        "/v1/api/workstreams/{ws_id}/queue/{correlation_id}",
        WRITE,
    ),
    ("POST", "/v1/api/plan", WRITE),
    ("POST", "/v1/api/command", WRITE),
    ("POST", "/v1/api/tools", WRITE),
    ("POST", "/v1/api/memories", WRITE),
    ("DELETE", "/v1/api/memories/{name}", WRITE),
    ("POST", "/v1/api/watches/{watch_id}/cancel", WRITE),
    (
        "POST",
        "/v1/api/approve",
        Permission(Scope::Approve, "tools.approve"),
    ),
    (
        "POST",
        "/v1/api/_internal/mcp-reload",
        Permission(Scope::Approve, "admin.mcp"),
    ),
    // Administration.
    (
        "GET",
        "/v1/api/admin/users",
        Permission(Scope::Approve, "admin.users"),
    ),
    (
        "POST",
        "/v1/api/admin/users",
        Permission(Scope::Approve, "admin.users"),
    ),
    (
        "DELETE",
        "/v1/api/admin/users/{user_id}",
        Permission(Scope::Approve, "admin.users"),
    ),
    (
        "GET",
        "/v1/api/admin/tokens",
        Permission(Scope::Approve, "admin.users"),
    ),
    (
        "POST",
        "/v1/api/admin/tokens",
        Permission(Scope::Approve, "admin.users"),
    ),
    (
        "DELETE",
        "/v1/api/admin/tokens/{token_id}",
        Permission(Scope::Approve, "admin.users"),
    ),
    (
        "GET",
        "/v1/api/admin/skills",
        Permission(Scope::Approve, "admin.skills"),
    ),
    (
        "POST",
        "/v1/api/admin/skills",
        Permission(Scope::Approve, "admin.skills"),
    ),
    (
        "PUT",
        "/v1/api/admin/skills/{name}",
        Permission(Scope::Approve, "admin.skills"),
    ),
    (
        "DELETE",
        "/v1/api/admin/skills/{name}",
        Permission(Scope::Approve, "admin.skills"),
    ),
];

/// What the route needs, by what the table says for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The table's entry for this method and template.
    Entry(Needs),
    /// The template is in the table, but not with this method: axum answers 405 (or the
    /// route walk test fails, if the method is registered).
    OtherMethod,
    /// The template is not in the table at all: refused.
    Missing,
}

/// The table's answer for `method` on `template`.
pub fn lookup(method: &str, template: &str) -> Lookup {
    let method = if method.eq_ignore_ascii_case("HEAD") {
        "GET"
    } else {
        method
    };
    let mut known = false;
    for (m, t, needs) in ROUTE_PERMISSIONS {
        if *t == template {
            if m.eq_ignore_ascii_case(method) {
                return Lookup::Entry(*needs);
            }
            known = true;
        }
    }
    if known {
        Lookup::OtherMethod
    } else {
        Lookup::Missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_unique_and_found() {
        for (i, (m, t, _)) in ROUTE_PERMISSIONS.iter().enumerate() {
            for (m2, t2, _) in &ROUTE_PERMISSIONS[i + 1..] {
                assert!(!(m == m2 && t == t2), "{m} {t} twice");
            }
        }
        assert_eq!(lookup("HEAD", "/health"), Lookup::Entry(Public));
        assert_eq!(
            lookup("DELETE", "/v1/api/admin/users/{user_id}"),
            Lookup::Entry(Permission(Scope::Approve, "admin.users"))
        );
        assert_eq!(lookup("PUT", "/v1/api/send"), Lookup::OtherMethod);
        assert_eq!(lookup("GET", "/v1/api/new-thing"), Lookup::Missing);
    }
}
