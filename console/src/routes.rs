//! The one table that says what every console route needs ([`CONSOLE_ROUTES`]), next to the
//! router ([`crate::router`]) and enforced by its auth layer ([`crate::login::require_scope`])
//! on the route axum matched; a test walks the router and fails on a route without a row or
//! a row for no route.
//!
//! The proxy `/node/{node_id}/{*tail}` is classified by the *node's* table (the contract's
//! [`NODE_ROUTES`]): the path the proxy will request from the node is worked out the way the
//! proxy builds it, looked up there, and asked of the caller — scope and RBAC permission —
//! except that nothing is public through the proxy ([`NodeNeeds::through_proxy`]).

use turnstone_proto::routes::{
    Lookup, NODE_ROUTES, Needs as NodeNeeds, RouteTable, lookup, rows_of, template_for_path,
};
use turnstone_runtime::auth::{Access, Scope};

/// What a console route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// No credentials, even with auth on.
    Public,
    /// A credential granting the scope.
    Scope(Scope),
    /// The scope and, for a user's credential, the RBAC permission (identity-less config
    /// tokens hold every permission).
    Permission(Scope, &'static str),
    /// What the node's route for the proxied path needs, never less than `read`.
    NodeProxy,
}

use Needs::{NodeProxy, Public};
const READ: Needs = Needs::Scope(Scope::Read);
const WRITE: Needs = Needs::Scope(Scope::Write);
const APPROVE: Needs = Needs::Scope(Scope::Approve);
const ADMIN_USERS: Needs = Needs::Permission(Scope::Approve, "admin.users");
const ADMIN_ROLES: Needs = Needs::Permission(Scope::Approve, "admin.roles");
const ADMIN_SCHEDULES: Needs = Needs::Permission(Scope::Approve, "admin.schedules");
const ADMIN_SETTINGS: Needs = Needs::Permission(Scope::Approve, "admin.settings");
const ADMIN_MODELS: Needs = Needs::Permission(Scope::Approve, "admin.models");
const ADMIN_AUDIT: Needs = Needs::Permission(Scope::Approve, "admin.audit");
const ADMIN_POLICIES: Needs = Needs::Permission(Scope::Approve, "admin.policies");
const ADMIN_SKILLS: Needs = Needs::Permission(Scope::Approve, "admin.skills");
const ADMIN_MEMORIES: Needs = Needs::Permission(Scope::Approve, "admin.memories");
const ADMIN_USAGE: Needs = Needs::Permission(Scope::Approve, "admin.usage");

/// The template of the console's reverse proxy to a node.
pub const NODE_PROXY_ROUTE: &str = "/node/{node_id}/{*tail}";

/// Method (`*`: any), route template (as axum's `MatchedPath` reports it) and what it needs.
/// `HEAD` is looked up as `GET`.
pub const CONSOLE_ROUTES: &RouteTable<Needs> = &[
    // Probes, UI.
    ("GET", "/", Public),
    ("GET", "/static/{*path}", Public),
    ("GET", "/health", Public),
    ("GET", "/ready", Public),
    ("GET", "/metrics", Public),
    ("GET", "/openapi.json", Public),
    ("GET", "/docs", Public),
    // The cluster API (cluster spec §6.3).
    ("GET", "/v1/api/cluster/overview", READ),
    ("GET", "/v1/api/cluster/nodes", READ),
    ("GET", "/v1/api/cluster/workstreams", READ),
    ("POST", "/v1/api/cluster/workstreams/new", WRITE),
    ("GET", "/v1/api/cluster/node/{*node_id}", READ),
    ("GET", "/v1/api/cluster/snapshot", READ),
    ("GET", "/v1/api/cluster/events", READ),
    ("GET", "/v1/api/models", READ),
    ("GET", "/v1/api/skills", READ),
    // The admin fan-out across nodes.
    ("GET", "/v1/api/admin/watches", APPROVE),
    ("POST", "/v1/api/admin/watches/{watch_id}/cancel", APPROVE),
    ("GET", "/v1/api/admin/mcp-servers", APPROVE),
    ("POST", "/v1/api/admin/mcp-servers/reload", APPROVE),
    ("GET", "/v1/api/admin/models", ADMIN_MODELS),
    // Model definitions and settings in the console's store, pushed to every node.
    ("POST", "/v1/api/admin/models", ADMIN_MODELS),
    ("POST", "/v1/api/admin/models/reload", ADMIN_MODELS),
    ("PUT", "/v1/api/admin/models/{definition_id}", ADMIN_MODELS),
    (
        "DELETE",
        "/v1/api/admin/models/{definition_id}",
        ADMIN_MODELS,
    ),
    ("GET", "/v1/api/admin/settings", ADMIN_SETTINGS),
    ("PUT", "/v1/api/admin/settings/{key}", ADMIN_SETTINGS),
    ("DELETE", "/v1/api/admin/settings/{key}", ADMIN_SETTINGS),
    ("GET", "/v1/api/admin/audit", ADMIN_AUDIT),
    // Tool policies and skills in the console's store, pushed to every node.
    ("GET", "/v1/api/admin/policies", ADMIN_POLICIES),
    ("POST", "/v1/api/admin/policies", ADMIN_POLICIES),
    ("PUT", "/v1/api/admin/policies/{policy_id}", ADMIN_POLICIES),
    (
        "DELETE",
        "/v1/api/admin/policies/{policy_id}",
        ADMIN_POLICIES,
    ),
    ("GET", "/v1/api/admin/skills", ADMIN_SKILLS),
    ("POST", "/v1/api/admin/skills", ADMIN_SKILLS),
    ("PUT", "/v1/api/admin/skills/{name}", ADMIN_SKILLS),
    ("DELETE", "/v1/api/admin/skills/{name}", ADMIN_SKILLS),
    // Memories, read on every node.
    ("GET", "/v1/api/admin/memories", ADMIN_MEMORIES),
    ("DELETE", "/v1/api/admin/memories/{name}", ADMIN_MEMORIES),
    // Users, API tokens, roles and the usage report on the console's store
    // (`turnstone_accounts::ADMIN_ROUTES`).
    ("GET", "/v1/api/admin/users", ADMIN_USERS),
    ("POST", "/v1/api/admin/users", ADMIN_USERS),
    ("PUT", "/v1/api/admin/users/{user_id}", ADMIN_USERS),
    ("DELETE", "/v1/api/admin/users/{user_id}", ADMIN_USERS),
    ("PUT", "/v1/api/admin/users/{user_id}/roles", ADMIN_ROLES),
    ("GET", "/v1/api/admin/tokens", ADMIN_USERS),
    ("POST", "/v1/api/admin/tokens", ADMIN_USERS),
    ("DELETE", "/v1/api/admin/tokens/{token_id}", ADMIN_USERS),
    ("GET", "/v1/api/admin/roles", ADMIN_ROLES),
    ("POST", "/v1/api/admin/roles", ADMIN_ROLES),
    ("PUT", "/v1/api/admin/roles/{role_id}", ADMIN_ROLES),
    ("DELETE", "/v1/api/admin/roles/{role_id}", ADMIN_ROLES),
    ("GET", "/v1/api/admin/usage", ADMIN_USAGE),
    // The scheduler's tasks.
    ("GET", "/v1/api/admin/schedules", ADMIN_SCHEDULES),
    ("POST", "/v1/api/admin/schedules", ADMIN_SCHEDULES),
    ("GET", "/v1/api/admin/schedules/{task_id}", ADMIN_SCHEDULES),
    ("PUT", "/v1/api/admin/schedules/{task_id}", ADMIN_SCHEDULES),
    (
        "DELETE",
        "/v1/api/admin/schedules/{task_id}",
        ADMIN_SCHEDULES,
    ),
    (
        "GET",
        "/v1/api/admin/schedules/{task_id}/runs",
        ADMIN_SCHEDULES,
    ),
    // Login.
    ("POST", "/v1/api/auth/login", Public),
    ("POST", "/v1/api/auth/setup", Public),
    ("POST", "/v1/api/auth/logout", Public),
    ("GET", "/v1/api/auth/status", Public),
    ("GET", "/v1/api/auth/whoami", READ),
    // The proxy to each node.
    ("GET", "/node/{node_id}", READ),
    ("GET", "/node/{node_id}/", READ),
    ("*", NODE_PROXY_ROUTE, NodeProxy),
];

/// A route the router serves that [`CONSOLE_ROUTES`] has no row for (refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteNotInTable;

/// What a request needs, by the route template axum matched (`None`: no route, a 404
/// follows) and, for the proxy, the `tail` it matched (percent-decoded, as the proxy handler
/// receives it). `OPTIONS` is public (CORS preflight); a method the route lacks (405) needs
/// the strictest scope of the route's rows; a path of no route needs `read`.
pub fn route_access(
    method: &str,
    matched: Option<&str>,
    tail: Option<&str>,
) -> Result<Access, RouteNotInTable> {
    if method.eq_ignore_ascii_case("OPTIONS") {
        return Ok(Access::Public);
    }
    let Some(template) = matched else {
        return Ok(Access::Requires(Scope::Read));
    };
    match lookup(CONSOLE_ROUTES, method, template) {
        Lookup::Entry(Public) => Ok(Access::Public),
        Lookup::Entry(Needs::Scope(scope)) => Ok(Access::Requires(scope)),
        Lookup::Entry(Needs::Permission(scope, permission)) => {
            Ok(Access::RequiresPermission(scope, permission))
        }
        Lookup::Entry(NodeProxy) => Ok(proxied_access(method, tail.unwrap_or_default())),
        Lookup::OtherMethod => Ok(Access::strictest(rows_of(CONSOLE_ROUTES, template).map(
            |needs| match needs {
                Public => Access::Public,
                Needs::Scope(scope) => Access::Requires(scope),
                Needs::Permission(scope, permission) => {
                    Access::RequiresPermission(scope, permission)
                }
                NodeProxy => Access::Requires(Scope::Read),
            },
        ))),
        Lookup::Missing => Err(RouteNotInTable),
    }
}

/// What `method` on the node path the proxy requests for `tail` needs: the node's row
/// through the proxy; a method the node's route lacks, the strictest of its rows; a path of
/// no node route, `read`.
pub fn proxied_access(method: &str, tail: &str) -> Access {
    let Some(path) = proxied_node_path(tail) else {
        return Access::Requires(Scope::Read);
    };
    let through_proxy = |needs: NodeNeeds| Access::of_route(needs.through_proxy(), true);
    match template_for_path(NODE_ROUTES, &path) {
        None => Access::Requires(Scope::Read),
        Some(template) => match lookup(NODE_ROUTES, method, template) {
            Lookup::Entry(needs) => through_proxy(needs),
            Lookup::OtherMethod | Lookup::Missing => {
                Access::strictest(rows_of(NODE_ROUTES, template).map(through_proxy))
            }
        },
    }
}

/// The node path the proxy's request for `tail` reaches, in the form the node's table is
/// written in: the URL the proxy builds (`{node}/{tail}`) parsed as its HTTP client parses
/// it (dot segments resolved, `\` read as `/`, a decoded `?` or `#` ending the path), a
/// trailing `/` dropped, and the original's unversioned `/api/…` read as `/v1/api/…` (so a
/// look-alike is never classified below the route it resembles). `None`: no URL.
pub fn proxied_node_path(tail: &str) -> Option<String> {
    let url = reqwest::Url::parse(&format!("http://node/{tail}")).ok()?;
    let path = url.path().trim_end_matches('/');
    let path = if path == "/api" || path.starts_with("/api/") {
        format!("/v1{path}")
    } else if path.is_empty() {
        "/".to_string()
    } else {
        path.to_string()
    };
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Access = Access::Requires(Scope::Read);
    const W: Access = Access::Requires(Scope::Write);
    const A: Access = Access::Requires(Scope::Approve);

    /// What the auth layer asks of `method` on a concrete `path`: the route axum would match
    /// (query ignored) and, for the proxy, its tail.
    fn access(method: &str, path: &str) -> Access {
        let path = path.split('?').next().unwrap();
        let template = template_for_path(CONSOLE_ROUTES, path);
        let tail = (template == Some(NODE_PROXY_ROUTE))
            .then(|| path.splitn(4, '/').nth(3).unwrap_or_default());
        route_access(method, template, tail)
            .unwrap_or_else(|_| panic!("{method} {path}: a route without a row"))
    }

    /// The console's routes and the proxy forms, as the shared path rule classified them
    /// (spec §3.4): the proxied inner path by the node's table, and never public.
    const CASES: &[(&str, &str, Access)] = &[
        ("GET", "/", Access::Public),
        ("GET", "/static/app.js", Access::Public),
        ("GET", "/health", Access::Public),
        ("GET", "/metrics", Access::Public),
        ("POST", "/v1/api/auth/login", Access::Public),
        ("GET", "/v1/api/auth/whoami", R),
        ("POST", "/v1/api/cluster/workstreams/new", W),
        ("GET", "/v1/api/cluster/events", R),
        ("GET", "/v1/api/cluster/node/n1", R),
        ("GET", "/v1/api/admin/watches", A),
        ("POST", "/v1/api/admin/watches/w1/cancel", A),
        ("POST", "/v1/api/admin/mcp-servers/reload", A),
        ("GET", "/v1/api/admin/models", A),
        ("OPTIONS", "/v1/api/cluster/workstreams/new", Access::Public),
        // A method the route lacks: the route's strictest scope.
        ("GET", "/v1/api/cluster/workstreams/new", W),
        ("DELETE", "/v1/api/admin/models", A),
        // No route: a credential (then 404).
        ("GET", "/v1/api/cluster", R),
        ("POST", "/v1/node/n1/v1/api/send/", R),
        // The proxy.
        ("GET", "/node/n1", R),
        ("GET", "/node/n1/", R),
        ("POST", "/node/n1/api/send", W),
        ("POST", "/node/n1/v1/api/send", W),
        ("POST", "/node/n1/v1/api/send/", W),
        ("POST", "/node/host_a1b2/v1/api/approve", A),
        ("POST", "/node/n1/v1/api/_internal/mcp-reload", A),
        ("GET", "/node/n1/v1/api/events?ws_id=x", R),
        ("DELETE", "/node/n1/v1/api/memories/x", W),
        ("POST", "/node/n1/v1/api/watches/w/cancel", W),
        ("POST", "/node/n1/v1/api/memories/search", R),
        ("GET", "/node/n1/v1/api/admin/users", A),
        ("POST", "/node/n1/v1/api/auth/login", R),
        ("GET", "/node/n1/health", R),
        ("GET", "/node/n1/metrics", R),
        ("GET", "/node/n1/static/app.js", R),
        ("GET", "/node/n1/v1/api/nothing", R),
        // Stricter than the shared path rule, which classified these by the raw path (`read`)
        // while the proxy forwarded them to the route they resolve to.
        ("POST", "/node/n1/static/../v1/api/approve", A),
        ("POST", "/node/n1/static/..\\v1/api/send", W),
        ("GET", "/node/n1/v1/api/send", W),
        ("PUT", "/node/n1/v1/api/admin/users", A),
    ];

    #[test]
    fn routes_need_what_the_spec_says() {
        let mut failures = Vec::new();
        for (method, path, want) in CASES {
            let got = access(method, path);
            if got.scope() != want.scope() {
                failures.push(format!("{method} {path}: got {got:?}, want {want:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn proxied_routes_carry_the_node_permission() {
        assert_eq!(
            access("GET", "/node/n1/v1/api/admin/users"),
            Access::RequiresPermission(Scope::Approve, "admin.users")
        );
        assert_eq!(
            access("POST", "/node/n1/v1/api/approve"),
            Access::RequiresPermission(Scope::Approve, "tools.approve")
        );
        assert_eq!(
            access("POST", "/node/n1/v1/api/workstreams/new"),
            Access::RequiresPermission(Scope::Write, "workstreams.create")
        );
    }

    #[test]
    fn every_shared_admin_route_has_its_permission() {
        for (method, path, permission) in turnstone_accounts::ADMIN_ROUTES {
            let template = format!("/v1{path}");
            assert_eq!(
                lookup(CONSOLE_ROUTES, method, &template),
                Lookup::Entry(Needs::Permission(Scope::Approve, permission)),
                "{method} {template}"
            );
        }
    }

    #[test]
    fn rows_are_unique() {
        for (i, (m, t, _)) in CONSOLE_ROUTES.iter().enumerate() {
            for (m2, t2, _) in &CONSOLE_ROUTES[i + 1..] {
                assert!(!(m == m2 && t == t2), "{m} {t} twice");
            }
        }
    }

    #[test]
    fn the_proxied_path_is_the_one_the_proxy_requests() {
        for (tail, want) in [
            ("v1/api/send", "/v1/api/send"),
            ("api/send", "/v1/api/send"),
            ("v1/api/send/", "/v1/api/send"),
            ("static/../v1/api/approve", "/v1/api/approve"),
            ("static/%2e%2e/v1/api/approve", "/v1/api/approve"),
            ("static\\..\\v1\\api\\approve", "/v1/api/approve"),
            ("v1/api/approve?x=1", "/v1/api/approve"),
            ("v1/api/approve#x", "/v1/api/approve"),
            ("health", "/health"),
            ("..", "/"),
        ] {
            assert_eq!(proxied_node_path(tail).as_deref(), Some(want), "{tail}");
        }
    }
}
