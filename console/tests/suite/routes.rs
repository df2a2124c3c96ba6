//! The console's route table (`turnstone_console::routes::CONSOLE_ROUTES`) covers its router:
//! every registered route and method has a row, and every row names a registered route. The
//! router is walked through its debug listing of path templates; each method is probed over
//! HTTP (axum answers 405 for a method the route does not have). And a proxied path is
//! classified as the node it reaches would classify it, however the path is spelt.

use turnstone_console::routes::CONSOLE_ROUTES;
use turnstone_proto::routes::{Lookup, lookup};
use turnstone_testkit::route_walk::{METHODS, walk_router};

use super::*;

#[tokio::test]
async fn every_route_of_the_router_has_a_row() {
    let console = TestConsole::start(&prefix()).await;
    let router = turnstone_console::router(console._running.console.clone());
    let walk = walk_router(
        &format!("{router:?}"),
        &console.http,
        &console.url(""),
        TOKEN,
        |method, template| matches!(lookup(CONSOLE_ROUTES, method, template), Lookup::Entry(_)),
    )
    .await;
    assert!(
        walk.templates.contains("/v1/api/cluster/overview")
            && walk.templates.contains("/node/{node_id}/{*tail}"),
        "the router listing no longer shows templates: {:?}",
        walk.templates
    );
    assert!(
        walk.missing.is_empty(),
        "routes without a row in CONSOLE_ROUTES: {:#?}",
        walk.missing
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
                .any(|m| !walk.served.contains(&(*m, p.to_string())))
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
