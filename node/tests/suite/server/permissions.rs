//! The route → permission table (`turnstone_proto::routes::NODE_ROUTES`) covers the router:
//! every registered route and method has an entry, and every entry names a registered route.
//! The router is walked through its debug listing of path templates; each method is probed
//! over HTTP (axum answers 405 for a method the route does not have). And what the table
//! makes of requests matches the spec (node spec §1.2 + §3.4).

use turnstone_node::server::auth::route_access;
use turnstone_proto::routes::{Lookup, NODE_ROUTES, lookup, template_for_path};
use turnstone_runtime::auth::{Access, Scope};
use turnstone_testkit::route_walk::walk_router;

use super::*;

#[tokio::test]
async fn every_route_of_the_router_has_a_permission_entry() {
    let t = TestNode::start().await;
    let walk = walk_router(
        &format!("{:?}", server::router(t.node.clone())),
        &t.http,
        &t.url(""),
        FULL,
        |method, template| matches!(lookup(NODE_ROUTES, method, template), Lookup::Entry(_)),
    )
    .await;
    assert!(
        walk.templates.contains("/v1/api/send")
            && walk.templates.contains("/v1/api/admin/users/{user_id}"),
        "the router listing no longer shows templates: {:?}",
        walk.templates
    );
    assert!(
        walk.missing.is_empty(),
        "routes without an entry in NODE_ROUTES: {:#?}",
        walk.missing
    );
    let stale: Vec<_> = NODE_ROUTES
        .iter()
        .filter(|(m, p, _)| !walk.served.contains(&(*m, p.to_string())))
        .collect();
    assert!(stale.is_empty(), "entries for no route: {stale:#?}");
}

use Access::{Public, Requires};
const R: Access = Requires(Scope::Read);
const W: Access = Requires(Scope::Write);
const A: Access = Requires(Scope::Approve);

/// What the node's auth layer asks of `method` on a concrete `path`: the route axum would
/// match (query string ignored), then [`route_access`] (`/metrics` public by default).
fn access(method: &str, path: &str) -> Access {
    let path = path.split('?').next().unwrap();
    route_access(method, template_for_path(NODE_ROUTES, path), false)
        .unwrap_or_else(|_| panic!("{method} {path}: a route without a row"))
}

/// Every route of the node with the scope the spec lists (admin, approve and workstream
/// routes also name an RBAC permission, checked below).
const SPEC_ROUTES: &[(&str, &str, Access)] = &[
    ("GET", "/", Public),
    ("GET", "/static/app.js", Public),
    ("GET", "/health", Public),
    ("GET", "/metrics", Public),
    ("GET", "/openapi.json", Public),
    ("GET", "/docs", Public),
    ("GET", "/v1/api/events?ws_id=0123abcd", R),
    ("GET", "/v1/api/events/global", R),
    ("GET", "/v1/api/workstreams", R),
    ("GET", "/v1/api/dashboard", R),
    ("GET", "/v1/api/workstreams/saved", R),
    ("GET", "/v1/api/skills", R),
    ("GET", "/v1/api/models", R),
    ("POST", "/v1/api/send", W),
    ("POST", "/v1/api/approve", A),
    ("POST", "/v1/api/plan", W),
    ("POST", "/v1/api/command", W),
    ("POST", "/v1/api/cancel", W),
    ("POST", "/v1/api/workstreams/new", W),
    ("POST", "/v1/api/workstreams/close", W),
    ("GET", "/v1/api/watches", R),
    ("POST", "/v1/api/watches/w123/cancel", W),
    ("GET", "/v1/api/memories", R),
    ("POST", "/v1/api/memories", W),
    ("POST", "/v1/api/memories/search", R),
    ("DELETE", "/v1/api/memories/my_note", W),
    ("GET", "/v1/api/workstreams/ws1/queue", R),
    ("DELETE", "/v1/api/workstreams/ws1/queue/c0ffee000001", W),
    ("DELETE", "/v1/api/workstreams/ws1/queue/", R),
    ("POST", "/v1/api/auth/login", Public),
    ("POST", "/v1/api/auth/logout", Public),
    ("GET", "/v1/api/auth/status", Public),
    ("POST", "/v1/api/auth/setup", Public),
    ("GET", "/v1/api/auth/whoami", R),
    ("GET", "/v1/api/auth/oidc/authorize", Public),
    ("GET", "/v1/api/auth/oidc/callback?code=x&state=y", Public),
    ("POST", "/v1/api/_internal/mcp-reload", A),
    ("POST", "/v1/api/_internal/config-reload", A),
    ("POST", "/v1/api/_internal/model-reload", A),
    ("GET", "/v1/api/_internal/mcp-status", R),
    ("GET", "/v1/api/_internal/model-status", R),
    ("GET", "/v1/api/admin/users", A),
    ("POST", "/v1/api/admin/users", A),
    ("DELETE", "/v1/api/admin/tokens/abc", A),
];

/// Edge cases of §3.4 as the node answers them.
const EDGE_CASES: &[(&str, &str, Access)] = &[
    // Method case does not matter; OPTIONS (CORS preflight) is never authenticated.
    ("post", "/v1/api/send", W),
    ("OPTIONS", "/v1/api/send", Public),
    ("POST", "/v1/api/watches//cancel", R),
    ("POST", "/v1/api/send/extra", R),
    // Not public: look-alikes of public paths (no route: a credential, then 404).
    ("GET", "/healthz", R),
    ("GET", "/static", R),
    ("GET", "/v1/api/auth/login/x", R),
    ("GET", "/v2/health", R),
    // A method the route lacks (405) needs the strictest scope of the route: stricter than
    // the shared path rule it replaces, which asked `read` of these three.
    ("GET", "/v1/api/approve", A),
    ("GET", "/v1/api/send", W),
    ("DELETE", "/v1/api/memories", W),
    // …and a public route's other methods stay public (as before).
    ("POST", "/health", Public),
    ("DELETE", "/v1/api/auth/login", Public),
    // Paths of no node route need a credential and get a 404. The shared path rule made a
    // few of them public or `approve` (routes of the original this node does not serve, the
    // unversioned and trailing-slash forms); none reaches a handler either way.
    ("GET", "/shared/hljs-11.11.1/highlight.min.js", R),
    ("GET", "/acme/.well-known/x", R),
    ("GET", "/v1/health", R),
    ("POST", "/api/auth/login", R),
    ("DELETE", "/api/admin/tokens/abc", R),
    ("POST", "/api/send", R),
    ("POST", "/v1/api/send/", R),
];

#[test]
fn the_route_table_matches_the_spec() {
    let mut failures = Vec::new();
    for (method, path, want) in SPEC_ROUTES.iter().chain(EDGE_CASES) {
        let got = access(method, path);
        if got.scope() != want.scope() {
            failures.push(format!("{method} {path}: got {got:?}, want {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn role_permissions_are_checked_on_top_of_the_scope() {
    let permission = |method, path| match access(method, path) {
        Access::RequiresPermission(_, permission) => Some(permission),
        _ => None,
    };
    assert_eq!(permission("POST", "/v1/api/approve"), Some("tools.approve"));
    assert_eq!(
        permission("POST", "/v1/api/workstreams/new"),
        Some("workstreams.create")
    );
    assert_eq!(
        permission("POST", "/v1/api/workstreams/close"),
        Some("workstreams.close")
    );
    assert_eq!(
        permission("POST", "/v1/api/_internal/mcp-reload"),
        Some("admin.mcp")
    );
    assert_eq!(
        permission("POST", "/v1/api/_internal/config-reload"),
        Some("admin.settings")
    );
    assert_eq!(
        permission("POST", "/v1/api/_internal/model-reload"),
        Some("admin.models")
    );
    for (method, path) in [
        ("GET", "/v1/api/admin/users"),
        ("DELETE", "/v1/api/admin/users/u1"),
        ("POST", "/v1/api/admin/tokens"),
    ] {
        assert_eq!(permission(method, path), Some("admin.users"), "{path}");
    }
    assert_eq!(
        permission("PUT", "/v1/api/admin/skills/s1"),
        Some("admin.skills")
    );
    assert_eq!(permission("POST", "/v1/api/send"), None);
}

#[test]
fn metrics_needs_read_only_with_metrics_auth() {
    assert_eq!(route_access("GET", Some("/metrics"), false), Ok(Public));
    assert_eq!(route_access("GET", Some("/metrics"), true), Ok(R));
    assert!(route_access("GET", Some("/v1/api/not-in-the-table"), false).is_err());
}
