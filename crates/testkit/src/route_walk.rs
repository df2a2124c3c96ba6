//! Walking an axum router for route-table tests: which (method, template) pairs does the
//! router really serve? A service keeps a table naming every route with what it requires;
//! its test walks the router with [`walk_router`] and compares both ways (a route without a
//! row, a row without a route).
//!
//! The templates come from the router's `Debug` listing; each is made concrete
//! ([`concrete_path`]) and probed with every method in [`METHODS`] over HTTP: axum answers
//! 405 for a method the route does not have, anything else means the route has it.

use std::collections::BTreeSet;

use reqwest::Method;

/// The methods probed on every template.
pub const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];
const PROBES: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::PATCH,
];

/// The path templates a router registered, read from its `Debug` output
/// (`format!("{router:?}")`).
pub fn router_templates(router_debug: &str) -> BTreeSet<String> {
    router_debug
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|piece| piece.starts_with('/') && !piece.contains("__private__axum"))
        .map(str::to_string)
        .collect()
}

/// A concrete path for a template (`{x}` → `x`, `{*path}` → `app.js`).
pub fn concrete_path(template: &str) -> String {
    template
        .split('/')
        .map(|segment| match segment {
            s if s.starts_with("{*") => "app.js",
            s if s.starts_with('{') => "x",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// What a walk found.
#[derive(Debug, Default)]
pub struct RouteWalk {
    /// Every template of the router.
    pub templates: BTreeSet<String>,
    /// Every (method, template) the router serves.
    pub served: BTreeSet<(&'static str, String)>,
    /// Served pairs `has_row` said no to, as `METHOD template (status)`.
    pub missing: Vec<String>,
}

/// Probes every template of `router_debug` with every method at `base_url` (bearer `token`,
/// a JSON body `{}`) and asks `has_row(method, template)` for each pair the router serves.
pub async fn walk_router(
    router_debug: &str,
    http: &reqwest::Client,
    base_url: &str,
    token: &str,
    has_row: impl Fn(&str, &str) -> bool,
) -> RouteWalk {
    let mut walk = RouteWalk {
        templates: router_templates(router_debug),
        ..RouteWalk::default()
    };
    for template in &walk.templates {
        for (method, probe) in METHODS.into_iter().zip(PROBES) {
            let resp = http
                .request(probe, format!("{base_url}{}", concrete_path(template)))
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap_or_else(|e| panic!("{method} {template}: {e}"));
            if resp.status() == 405 {
                continue;
            }
            walk.served.insert((method, template.clone()));
            if !has_row(method, template) {
                walk.missing
                    .push(format!("{method} {template} ({})", resp.status()));
            }
        }
    }
    walk
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_read_from_a_debug_listing_and_made_concrete() {
        let listing = r#"Router { "/v1/api/x/{id}": 1, "/__private__axum_fallback": 2, "name": "/static/{*path}" }"#;
        let templates = router_templates(listing);
        assert_eq!(
            templates.into_iter().collect::<Vec<_>>(),
            vec!["/static/{*path}".to_string(), "/v1/api/x/{id}".to_string()]
        );
        assert_eq!(concrete_path("/v1/api/x/{id}"), "/v1/api/x/x");
        assert_eq!(concrete_path("/static/{*path}"), "/static/app.js");
    }
}
