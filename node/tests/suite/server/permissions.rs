//! The route → permission table covers the router: every registered route and method has an
//! entry, and every entry names a registered route. The router is walked through its debug
//! listing of path templates; each method is probed over HTTP (axum answers 405 for a
//! method the route does not have).

use std::collections::BTreeSet;

use turnstone_node::server::permissions::{Lookup, ROUTE_PERMISSIONS, lookup};

use super::*;

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

/// The path templates the router registered (its `Debug` output lists them).
fn registered_templates(t: &TestNode) -> BTreeSet<String> {
    let listing = format!("{:?}", server::router(t.node.clone()));
    let mut templates = BTreeSet::new();
    for piece in listing.split('"').skip(1).step_by(2) {
        if piece.starts_with('/') && !piece.contains("__private__axum") {
            templates.insert(piece.to_string());
        }
    }
    templates
}

/// A concrete path for a template (`{x}` → `x`, `{*path}` → `app.js`).
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|segment| match segment {
            s if s.starts_with("{*") => "app.js".to_string(),
            s if s.starts_with('{') => "x".to_string(),
            s => s.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_route_of_the_router_has_a_permission_entry() {
    let t = TestNode::start().await;
    let templates = registered_templates(&t);
    assert!(
        templates.contains("/v1/api/send") && templates.contains("/v1/api/admin/users/{user_id}"),
        "the router listing no longer shows templates: {templates:?}"
    );
    let mut missing = Vec::new();
    let mut registered = BTreeSet::new();
    for template in &templates {
        for method in METHODS {
            let resp = t
                .http
                .request(method.parse().unwrap(), t.url(&concrete(template)))
                .bearer_auth(FULL)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            if resp.status() == 405 {
                continue;
            }
            registered.insert((method, template.clone()));
            if !matches!(lookup(method, template), Lookup::Entry(_)) {
                missing.push(format!("{method} {template} ({})", resp.status()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "routes without an entry in ROUTE_PERMISSIONS: {missing:#?}"
    );
    let stale: Vec<_> = ROUTE_PERMISSIONS
        .iter()
        .filter(|(m, p, _)| !registered.contains(&(*m, p.to_string())))
        .collect();
    assert!(stale.is_empty(), "entries for no route: {stale:#?}");
}
