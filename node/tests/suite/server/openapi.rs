//! `/openapi.json` and `/docs`, and the shape of the router around the routes: 404 and 405
//! bodies, CORS only when configured.

use std::collections::BTreeSet;

use serde_json::Value;
use turnstone_node::server::openapi::{ROUTES, UNDOCUMENTED};

use super::*;

async fn document(t: &TestNode) -> Value {
    let resp = t.http.get(t.url("/openapi.json")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let text = resp.text().await.unwrap();
    assert!(
        text.starts_with("{\n  \"openapi\": \"3.1.0\""),
        "pretty-printed, indent 2"
    );
    serde_json::from_str(&text).unwrap()
}

/// Every `.route("<path>", <methods>)` in the server's sources, as (method, full path).
fn routes_in_sources() -> BTreeSet<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server");
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let mut rest = source.as_str();
        while let Some(at) = rest.find(".route(") {
            rest = &rest[at + ".route(".len()..];
            let Some(args) = rest.trim_start().strip_prefix('"') else {
                continue;
            };
            let Some(end) = args.find('"') else { continue };
            let route = &args[..end];
            // The method routers: up to the closing parenthesis of `.route(`.
            let mut depth = 1;
            let mut close = args.len();
            for (i, c) in args[end..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            close = end + i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let methods = &args[end..close];
            let full = if route.starts_with("/api/") {
                format!("/v1{route}")
            } else {
                route.to_string()
            };
            for method in ["get", "post", "delete", "put", "patch"] {
                let called = methods
                    .match_indices(&format!("{method}("))
                    .any(|(i, _)| i == 0 || !methods.as_bytes()[i - 1].is_ascii_alphanumeric());
                if called {
                    found.insert((method.to_string(), full.clone()));
                }
            }
        }
    }
    found
}

#[tokio::test]
async fn the_document_is_openapi_3_1_and_public() {
    let t = TestNode::start().await;
    let doc = document(&t).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "turnstone Server API");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["bearerAuth"]["scheme"], "bearer");
    assert_eq!(schemes["cookieAuth"]["name"], "turnstone_auth");

    let send = &doc["paths"]["/v1/api/send"]["post"];
    assert_eq!(send["operationId"], "v1_api_send_post");
    let send_schema = &send["requestBody"]["content"]["application/json"]["schema"];
    assert!(send_schema["$ref"].is_string(), "send has a request body");
    for status in ["200", "400", "401", "403", "404"] {
        assert!(send["responses"][status].is_object(), "send {status}");
    }
    assert_eq!(
        send["responses"]["404"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorReply"
    );
    assert_eq!(
        send["security"],
        serde_json::json!([{"bearerAuth": []}, {"cookieAuth": []}])
    );
    let properties = &doc["components"]["schemas"]["SendRequest"]["properties"];
    for field in ["ws_id", "message", "correlation_id"] {
        assert!(properties[field].is_object(), "SendRequest.{field}");
    }

    let health = &doc["paths"]["/health"]["get"];
    assert_eq!(health["security"], serde_json::json!([]), "public");
    assert!(health["responses"].get("401").is_none());

    for sse in [
        "/v1/api/events",
        "/v1/api/events/global",
        "/v1/api/events/node",
    ] {
        let content = &doc["paths"][sse]["get"]["responses"]["200"]["content"];
        assert!(content["text/event-stream"].is_object(), "{sse}");
    }
    let events = &doc["paths"]["/v1/api/events"]["get"]["parameters"];
    assert_eq!(events[0]["name"], "ws_id");
    assert_eq!(events[0]["required"], true);

    // The schemas come from the Rust types.
    let states: Vec<&str> = doc["components"]["schemas"]["WorkstreamState"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["const"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        [
            "idle",
            "thinking",
            "running",
            "attention",
            "error",
            "closed"
        ]
    );
    let health_schema = &doc["components"]["schemas"]["Health"];
    assert!(health_schema["properties"]["uptime_seconds"].is_object());
    let required = health_schema["required"].as_array().unwrap();
    assert!(
        required.contains(&"node_id".into()),
        "responses list what is sent"
    );
    assert!(
        !required.contains(&"mcp".into()),
        "mcp is omitted when absent"
    );
}

#[tokio::test]
async fn every_reference_resolves_and_operation_ids_are_unique() {
    let t = TestNode::start().await;
    let doc = document(&t).await;
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let mut refs = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    if k == "$ref" {
                        out.push(v.as_str().unwrap().to_string());
                    } else {
                        walk(v, out);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&doc, &mut refs);
    assert!(refs.len() > 20, "{refs:?}");
    for r in &refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected reference {r}"));
        assert!(schemas.contains_key(name), "missing schema {name}");
    }

    let mut ids = BTreeSet::new();
    let mut operations = 0;
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            operations += 1;
            assert!(ids.insert(op["operationId"].as_str().unwrap().to_string()));
            assert!(op["responses"]["200"].is_object());
        }
    }
    assert_eq!(operations, ROUTES.len());
}

#[tokio::test]
async fn every_route_is_documented_and_every_documented_route_is_served() {
    let t = TestNode::start().await;
    let doc = document(&t).await;

    let served = routes_in_sources();
    assert!(
        served.contains(&("post".to_string(), "/v1/api/send".to_string())),
        "the scan finds the routes: {served:?}"
    );
    for (method, path) in &served {
        let documented = ROUTES.iter().any(|r| r.method == method && r.path == path);
        let excluded = UNDOCUMENTED.iter().any(|(m, p)| m == method && p == path);
        assert!(
            documented || excluded,
            "{method} {path} is served but neither in openapi::ROUTES nor in UNDOCUMENTED"
        );
        if documented {
            assert!(doc["paths"][path][method.as_str()].is_object());
        }
    }

    // And each documented operation answers (not the router's 404 or 405).
    for route in ROUTES {
        let mut url = t.url(route.path);
        if route.params.iter().any(|p| p.name == "ws_id") {
            url = format!("{url}?ws_id={}", t.default_ws);
        }
        let req = match route.method {
            "get" => t.http.get(&url),
            "post" => t
                .http
                .post(&url)
                .header("content-type", "application/json")
                .body("{}"),
            "put" => t
                .http
                .put(&url)
                .header("content-type", "application/json")
                .body("{}"),
            "delete" => t.http.delete(&url),
            other => panic!("method {other}"),
        };
        let resp = req.bearer_auth(FULL).send().await.unwrap();
        let status = resp.status().as_u16();
        let is_json = resp
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("application/json"));
        assert_ne!(status, 405, "{route:?}");
        assert!(status != 404 || is_json, "{route:?} is not served");
        assert!(
            served.contains(&(route.method.to_string(), route.path.to_string())),
            "{route:?} not found in the router's sources"
        );
    }
}

#[tokio::test]
async fn docs_is_a_self_contained_page() {
    let t = TestNode::start().await;
    let resp = t.http.get(t.url("/docs")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = resp.text().await.unwrap();
    assert!(html.contains("fetch(\"/openapi.json\")"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no CDN"
    );
    assert!(!html.contains("<script src"), "inline script only");
}

async fn raw(t: &TestNode, method: &str, path: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let resp = t
        .http
        .request(method.parse().unwrap(), t.url(path))
        .bearer_auth(FULL)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

#[tokio::test]
async fn unknown_paths_are_404_and_wrong_methods_405_in_plain_text() {
    let t = TestNode::start().await;
    for path in [
        "/nope",
        "/v1/api/nope",
        "/api/workstreams",
        "/v1/api/send/x",
    ] {
        let (status, headers, body) = raw(&t, "GET", path).await;
        assert_eq!((status, body.as_str()), (404, "Not Found"), "{path}");
        assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    }

    let (status, headers, body) = raw(&t, "GET", "/v1/api/send").await;
    assert_eq!((status, body.as_str()), (405, "Method Not Allowed"));
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(headers["allow"], "POST");

    let (status, headers, body) = raw(&t, "POST", "/health").await;
    assert_eq!((status, body.as_str()), (405, "Method Not Allowed"));
    let allow = headers["allow"].to_str().unwrap();
    assert!(allow.contains("GET"), "{allow}");

    let (status, _, _) = raw(&t, "DELETE", "/v1/api/auth/login").await;
    assert_eq!(status, 405);

    // Without CORS configured, OPTIONS is just another method.
    let resp = t
        .http
        .request(reqwest::Method::OPTIONS, t.url("/v1/api/send"))
        .header("origin", "http://ui.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert!(resp.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn cors_only_when_origins_are_configured() {
    let t = TestNode::start_with_auth(
        Authenticator::new(true, None, TestNode::test_tokens(), AUDIENCE_SERVER),
        |o| o.cors_origins = vec!["http://ui.example".into()],
    )
    .await;
    let resp = t
        .http
        .request(reqwest::Method::OPTIONS, t.url("/v1/api/send"))
        .header("origin", "http://ui.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type,authorization",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "preflight needs no token");
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], "http://ui.example");
    let methods = h["access-control-allow-methods"].to_str().unwrap();
    for m in ["GET", "POST", "OPTIONS"] {
        assert!(methods.contains(m), "{methods}");
    }
    let headers = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(headers.contains("content-type") && headers.contains("authorization"));

    // Actual requests carry the header too, even refused ones.
    let resp = t
        .http
        .get(t.url("/v1/api/workstreams"))
        .header("origin", "http://ui.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(
        resp.headers()["access-control-allow-origin"],
        "http://ui.example"
    );

    // Another origin is not allowed.
    let resp = t
        .http
        .get(t.url("/health"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("access-control-allow-origin").is_none());
}
