//! What each node API route needs (node spec §3.4 and its role table), as data: the scopes
//! `read` ⊂ `write` ⊂ `approve`, the node's route table [`NODE_ROUTES`], and the lookups
//! every table of routes uses.
//!
//! It is a wire-contract fact, so it lives here and not next to one router: the node
//! enforces [`NODE_ROUTES`] on the route axum matched, and the console classifies a request
//! it proxies to a node (`/node/{id}/{*tail}`) by the same table ([`route_for_path`]). A
//! table is `(method, route template, needs)` rows; templates are axum's (`{param}` is one
//! segment, `{*tail}` the rest of the path).

use std::fmt;
use std::str::FromStr;

/// One access scope. The order of the variants is the hierarchy: a higher scope implies every
/// lower one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Read,
    Write,
    Approve,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Write, Scope::Approve];

    /// The wire name (`read`, `write`, `approve`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Approve => "approve",
        }
    }

    /// True if holding `self` grants `other` (`approve` grants all three).
    pub fn implies(self, other: Scope) -> bool {
        self >= other
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A scope name that is not `read`, `write` or `approve` (trimmed and lowercased).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope {0:?}")]
pub struct UnknownScope(pub String);

impl FromStr for Scope {
    type Err = UnknownScope;

    /// Any case, surrounding spaces ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read" => Ok(Scope::Read),
            "write" => Ok(Scope::Write),
            "approve" => Ok(Scope::Approve),
            other => Err(UnknownScope(other.to_string())),
        }
    }
}

/// What a node route needs.
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

impl Needs {
    /// What the route needs when it is reached through the console's proxy: the same, except
    /// that nothing is public there (the console forwards with credentials of its own, so an
    /// anonymous caller must not get a node page or probe through it).
    pub fn through_proxy(self) -> Needs {
        match self {
            Needs::Public | Needs::Metrics => Needs::Scope(Scope::Read),
            needs => needs,
        }
    }
}

/// One table: method (`*`: any method), route template, what it needs.
pub type RouteTable<T> = [(&'static str, &'static str, T)];

use Needs::{Metrics, Permission, Public};
const READ: Needs = Needs::Scope(Scope::Read);
const WRITE: Needs = Needs::Scope(Scope::Write);

/// Every route of the node (`turnstone-server`) and what it needs. `HEAD` is looked up as
/// `GET`. The node's route-walk test fails on a route missing here or a row for no route.
pub const NODE_ROUTES: &RouteTable<Needs> = &[
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
    ("POST", "/v1/api/sends/outcomes", READ),
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
    ("POST", "/v1/api/workstreams/{ws_id}/posture", WRITE),
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
    (
        "POST",
        "/v1/api/_internal/config-reload",
        Permission(Scope::Approve, "admin.settings"),
    ),
    (
        "POST",
        "/v1/api/_internal/model-reload",
        Permission(Scope::Approve, "admin.models"),
    ),
    (
        "POST",
        "/v1/api/_internal/release",
        Permission(Scope::Write, "workstreams.close"),
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
        "PUT",
        "/v1/api/admin/users/{user_id}",
        Permission(Scope::Approve, "admin.users"),
    ),
    (
        "DELETE",
        "/v1/api/admin/users/{user_id}",
        Permission(Scope::Approve, "admin.users"),
    ),
    (
        "PUT",
        "/v1/api/admin/users/{user_id}/roles",
        Permission(Scope::Approve, "admin.roles"),
    ),
    (
        "GET",
        "/v1/api/admin/roles",
        Permission(Scope::Approve, "admin.roles"),
    ),
    (
        "POST",
        "/v1/api/admin/roles",
        Permission(Scope::Approve, "admin.roles"),
    ),
    (
        "PUT",
        "/v1/api/admin/roles/{role_id}",
        Permission(Scope::Approve, "admin.roles"),
    ),
    (
        "DELETE",
        "/v1/api/admin/roles/{role_id}",
        Permission(Scope::Approve, "admin.roles"),
    ),
    (
        "GET",
        "/v1/api/admin/usage",
        Permission(Scope::Approve, "admin.usage"),
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
        "/v1/api/admin/policies",
        Permission(Scope::Approve, "admin.policies"),
    ),
    (
        "POST",
        "/v1/api/admin/policies",
        Permission(Scope::Approve, "admin.policies"),
    ),
    (
        "PUT",
        "/v1/api/admin/policies/{policy_id}",
        Permission(Scope::Approve, "admin.policies"),
    ),
    (
        "DELETE",
        "/v1/api/admin/policies/{policy_id}",
        Permission(Scope::Approve, "admin.policies"),
    ),
    (
        "GET",
        "/v1/api/admin/verdicts",
        Permission(Scope::Approve, "admin.judge"),
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

/// A table's answer for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<T> {
    /// The row for this method and template.
    Entry(T),
    /// The template is in the table, but not with this method (the router answers 405).
    OtherMethod,
    /// No row has the template (or, by path, no template matches).
    Missing,
}

/// The row of `table` for `method` on the route `template` (as the router reports the route
/// it matched). `HEAD` is looked up as `GET`; a row whose method is `*` takes any method.
pub fn lookup<T: Copy>(table: &RouteTable<T>, method: &str, template: &str) -> Lookup<T> {
    let method = if method.eq_ignore_ascii_case("HEAD") {
        "GET"
    } else {
        method
    };
    let mut known = false;
    for (m, t, needs) in table {
        if *t == template {
            if *m == "*" || m.eq_ignore_ascii_case(method) {
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

/// What every row of `template` needs, whatever its method (for a method the route lacks:
/// the router answers 405, and the caller decides who may hear it).
pub fn rows_of<T: Copy>(table: &RouteTable<T>, template: &str) -> impl Iterator<Item = T> {
    table
        .iter()
        .filter(move |(_, t, _)| *t == template)
        .map(|(_, _, needs)| *needs)
}

/// The template of `table` the router would match for a concrete `path` (no query string):
/// the most specific one that matches (a literal segment beats `{param}`, which beats
/// `{*tail}`), as axum chooses.
pub fn template_for_path<T>(table: &RouteTable<T>, path: &str) -> Option<&'static str> {
    table
        .iter()
        .map(|(_, template, _)| *template)
        .filter(|template| template_matches(template, path))
        .min_by_key(|template| specificity(template))
}

/// The row of `table` for `method` on a concrete `path`: [`lookup`] on the template
/// [`template_for_path`] finds.
pub fn route_for_path<T: Copy>(table: &RouteTable<T>, method: &str, path: &str) -> Lookup<T> {
    match template_for_path(table, path) {
        Some(template) => lookup(table, method, template),
        None => Lookup::Missing,
    }
}

/// Whether `path` is one of the paths of `template`: literal segments equal, `{param}` one
/// non-empty segment, `{*tail}` (last) one or more segments, non-empty.
pub fn template_matches(template: &str, path: &str) -> bool {
    let mut path_segments = path.split('/');
    for segment in template.split('/') {
        if segment.starts_with("{*") {
            let rest: Vec<&str> = path_segments.by_ref().collect();
            return !rest.is_empty() && !rest.concat().is_empty();
        }
        match path_segments.next() {
            Some(p) if segment.starts_with('{') => {
                if p.is_empty() {
                    return false;
                }
            }
            Some(p) if p == segment => {}
            _ => return false,
        }
    }
    path_segments.next().is_none()
}

/// How specific a template is, lower first: per segment 0 literal, 1 `{param}`, 2 `{*tail}`.
fn specificity(template: &str) -> Vec<u8> {
    template
        .split('/')
        .map(|segment| match segment {
            s if s.starts_with("{*") => 2,
            s if s.starts_with('{') => 1,
            _ => 0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_names_and_hierarchy() {
        for scope in Scope::ALL {
            assert_eq!(scope.as_str().parse::<Scope>(), Ok(scope));
            assert!(Scope::Approve.implies(scope));
        }
        assert_eq!(" WRITE ".parse::<Scope>(), Ok(Scope::Write));
        assert_eq!(
            "admin".parse::<Scope>(),
            Err(UnknownScope("admin".to_string()))
        );
        assert!(!Scope::Read.implies(Scope::Write));
    }

    #[test]
    fn node_rows_are_unique_and_found() {
        for (i, (m, t, _)) in NODE_ROUTES.iter().enumerate() {
            for (m2, t2, _) in &NODE_ROUTES[i + 1..] {
                assert!(!(m == m2 && t == t2), "{m} {t} twice");
            }
        }
        assert_eq!(
            lookup(NODE_ROUTES, "HEAD", "/health"),
            Lookup::Entry(Public)
        );
        assert_eq!(
            lookup(NODE_ROUTES, "DELETE", "/v1/api/admin/users/{user_id}"),
            Lookup::Entry(Permission(Scope::Approve, "admin.users"))
        );
        assert_eq!(
            lookup(NODE_ROUTES, "PUT", "/v1/api/send"),
            Lookup::OtherMethod
        );
        assert_eq!(
            lookup(NODE_ROUTES, "GET", "/v1/api/new-thing"),
            Lookup::Missing
        );
    }

    #[test]
    fn any_method_rows() {
        let table: &RouteTable<u8> = &[("*", "/node/{id}/{*tail}", 1), ("GET", "/a", 2)];
        assert_eq!(
            lookup(table, "PATCH", "/node/{id}/{*tail}"),
            Lookup::Entry(1)
        );
        assert_eq!(lookup(table, "head", "/a"), Lookup::Entry(2));
        assert_eq!(lookup(table, "POST", "/a"), Lookup::OtherMethod);
    }

    #[test]
    fn templates_match_paths_as_the_router_does() {
        let yes = [
            ("/v1/api/send", "/v1/api/send"),
            ("/v1/api/memories/{name}", "/v1/api/memories/note"),
            ("/static/{*path}", "/static/app.js"),
            ("/static/{*path}", "/static/js/app.js"),
            ("/", "/"),
        ];
        for (template, path) in yes {
            assert!(template_matches(template, path), "{template} {path}");
        }
        let no = [
            ("/v1/api/send", "/v1/api/send/"),
            ("/v1/api/send", "/v1/api/send/x"),
            ("/v1/api/memories/{name}", "/v1/api/memories/"),
            ("/v1/api/memories/{name}", "/v1/api/memories"),
            ("/static/{*path}", "/static"),
            ("/static/{*path}", "/static/"),
            ("/", "/health"),
        ];
        for (template, path) in no {
            assert!(!template_matches(template, path), "{template} {path}");
        }
    }

    #[test]
    fn by_path_the_literal_route_wins() {
        assert_eq!(
            route_for_path(NODE_ROUTES, "POST", "/v1/api/memories/search"),
            Lookup::Entry(READ)
        );
        assert_eq!(
            route_for_path(NODE_ROUTES, "DELETE", "/v1/api/memories/search"),
            Lookup::OtherMethod
        );
        assert_eq!(
            route_for_path(NODE_ROUTES, "DELETE", "/v1/api/memories/note"),
            Lookup::Entry(WRITE)
        );
        assert_eq!(
            route_for_path(
                NODE_ROUTES,
                "DELETE",
                "/v1/api/workstreams/ws1/queue/c0ffee000001"
            ),
            Lookup::Entry(WRITE)
        );
        assert_eq!(
            route_for_path(NODE_ROUTES, "GET", "/v1/api/workstreams/saved"),
            Lookup::Entry(READ)
        );
        assert_eq!(
            route_for_path(NODE_ROUTES, "GET", "/v1/api/nothing"),
            Lookup::Missing
        );
    }

    #[test]
    fn nothing_is_public_through_the_proxy() {
        assert_eq!(Public.through_proxy(), READ);
        assert_eq!(Metrics.through_proxy(), READ);
        assert_eq!(WRITE.through_proxy(), WRITE);
        let admin = Permission(Scope::Approve, "admin.users");
        assert_eq!(admin.through_proxy(), admin);
    }
}
