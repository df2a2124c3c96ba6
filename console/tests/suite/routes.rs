//! The console's route table (`turnstone_console::routes::CONSOLE_ROUTES`) covers its router:
//! every registered route and method has a row, and every row names a registered route. The
//! router is walked through its debug listing of path templates; each method is probed over
//! HTTP (axum answers 405 for a method the route does not have). And a proxied path is
//! classified as the node it reaches would classify it, however the path is spelt.

use std::collections::BTreeSet;

use turnstone_console::routes::CONSOLE_ROUTES;
use turnstone_proto::routes::{Lookup, lookup};

use super::*;

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

/// The path templates the router registered (its `Debug` output lists them).
fn registered_templates(console: &TestConsole) -> BTreeSet<String> {
    let router = turnstone_console::router(console._running.console.clone());
    let listing = format!("{router:?}");
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
async fn every_route_of_the_router_has_a_row() {
    let console = TestConsole::start(&prefix()).await;
    let templates = registered_templates(&console);
    assert!(
        templates.contains("/v1/api/cluster/overview")
            && templates.contains("/node/{node_id}/{*tail}"),
        "the router listing no longer shows templates: {templates:?}"
    );
    let mut missing = Vec::new();
    let mut registered = BTreeSet::new();
    for template in &templates {
        for method in METHODS {
            let resp = console
                .http
                .request(method.parse().unwrap(), console.url(&concrete(template)))
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            if resp.status() == 405 {
                continue;
            }
            registered.insert((method, template.clone()));
            if !matches!(lookup(CONSOLE_ROUTES, method, template), Lookup::Entry(_)) {
                missing.push(format!("{method} {template} ({})", resp.status()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "routes without a row in CONSOLE_ROUTES: {missing:#?}"
    );
    let stale: Vec<_> = CONSOLE_ROUTES
        .iter()
        .filter(|(m, p, _)| {
            let methods: Vec<&str> = if *m == "*" {
                METHODS.to_vec()
            } else {
                vec![*m]
            };
            methods
                .iter()
                .any(|m| !registered.contains(&(*m, p.to_string())))
        })
        .collect();
    assert!(stale.is_empty(), "rows for no route: {stale:#?}");
}

/// A read-only caller asking the proxy for a path that resolves to `/v1/api/approve` on the
/// node (dot segments, `%2F`, `\`) is refused by the console itself: the node id is unknown,
/// so a request that passed auth would get the proxy's 404 instead.
#[tokio::test]
async fn a_spelling_of_a_node_path_does_not_lower_what_it_needs() {
    let console = TestConsole::start(&prefix()).await;
    for path in [
        "/node/ghost/v1/api/approve",
        "/node/ghost/static%2F..%2Fv1%2Fapi%2Fapprove",
        "/node/ghost/static%2F..%5Cv1%5Capi%5Capprove",
        "/node/ghost/api/approve",
    ] {
        let resp = console
            .http
            .post(console.url(path))
            .bearer_auth(READ_TOKEN)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 403, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(
            body["error"], "Forbidden: token lacks 'approve' scope",
            "{path}"
        );
        let (status, _) = console.post(path, "{}").await;
        assert_eq!(status, 404, "{path}: the full token passes auth");
    }
}
