//! `open_preview` on a node: a turn previews a page of a local HTTP server and a file, the
//! `preview` event names the route, the route serves the bytes sandboxed; previews go with
//! their workstream.

use axum::http::header;
use serde_json::{Value, json};

use super::*;

const PAGE: &str = "<!doctype html><html><head><title>Quarterly report</title></head>\
    <body><h1>Numbers</h1><script>document.title = 'pwned'</script></body></html>";

/// A local site serving [`PAGE`] at `/report`.
async fn site() -> String {
    let app = axum::Router::new().route(
        "/report",
        axum::routing::get(|| async {
            ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE)
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}/report")
}

fn call(target: &str) -> String {
    format!("CALL:open_preview {}", json!({ "target": target }))
}

async fn send(t: &TestNode, ws_id: &str, message: &str) {
    let (status, body) = t
        .post("/v1/api/send", json!({"ws_id": ws_id, "message": message}))
        .await;
    assert_eq!(status, 200, "{body}");
}

/// GET with a token: status, headers, body.
async fn fetch(t: &TestNode, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut req = t.http.get(t.url(path));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    req.send().await.unwrap()
}

fn preview_of(events: &[SseEvent]) -> Value {
    events
        .iter()
        .find(|e| e.kind() == "preview")
        .map(|e| e.data.clone())
        .unwrap_or_else(|| panic!("no preview event in {:?}", kinds(events)))
}

#[tokio::test]
async fn a_previewed_page_is_served_sandboxed_from_the_preview_route() {
    let t = TestNode::start().await;
    let page_url = site().await;
    let ws = t.default_ws.clone();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    events.until("connected").await;
    send(&t, &ws, &call(&page_url)).await;

    // A URL needs approval (network access).
    let seen = events.until("approve_request").await;
    let request = seen.last().unwrap();
    assert_eq!(request.data["items"][0]["func_name"], "open_preview");
    let (status, _) = t
        .post("/v1/api/approve", json!({"ws_id": ws, "approved": true}))
        .await;
    assert_eq!(status, 200);
    let seen = events.until("turn_complete").await;
    let preview = preview_of(&seen);
    assert_eq!(preview["kind"], "web");
    assert_eq!(preview["title"], "Quarterly report");
    let id = preview["preview_id"].as_str().unwrap();
    let url = preview["url"].as_str().unwrap();
    assert_eq!(url, format!("/v1/api/previews/{id}?ws_id={ws}"));
    // The model got one line, not the page.
    let result = seen
        .iter()
        .find(|e| e.kind() == "tool_result")
        .map(|e| e.data["output"].as_str().unwrap().to_string())
        .unwrap();
    assert!(result.starts_with("Opened a web preview"), "{result}");
    assert!(!result.contains("Numbers"));

    // The route serves the bytes, sandboxed, to a read token; not to nobody.
    let resp = fetch(&t, url, Some(READ)).await;
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(csp.starts_with("sandbox;"), "{csp}");
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("allow-scripts"),
        "{csp}"
    );
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(resp.text().await.unwrap(), PAGE);
    let remote = fetch(&t, &format!("{url}&remote=1"), Some(READ)).await;
    let csp = remote.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.starts_with("sandbox;") && csp.contains("img-src *"),
        "{csp}"
    );
    assert_eq!(fetch(&t, url, None).await.status(), 401);

    // Unknown preview or workstream: JSON 404; no ws_id: 400.
    let resp = fetch(&t, &format!("/v1/api/previews/nope?ws_id={ws}"), Some(READ)).await;
    assert_eq!(resp.status(), 404);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"],
        "Unknown preview"
    );
    let other = fetch(
        &t,
        &format!("/v1/api/previews/{id}?ws_id=other"),
        Some(READ),
    )
    .await;
    assert_eq!(other.status(), 404);
    let bare = fetch(&t, &format!("/v1/api/previews/{id}"), Some(READ)).await;
    assert_eq!(bare.status(), 400);
}

#[tokio::test]
async fn files_preview_unprompted_and_previews_go_with_their_workstream() {
    let t = TestNode::start().await;
    std::fs::write(t.cwd().join("notes.md"), "# Plan\n\n- one\n").unwrap();
    std::fs::write(t.cwd().join("big.csv"), "a,b\n".repeat(600_000)).unwrap();
    let (_, created) = t
        .post("/v1/api/workstreams/new", json!({"name": "previewing"}))
        .await;
    let ws = created["ws_id"].as_str().unwrap().to_string();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    events.until("connected").await;

    // A file path runs without approval.
    send(&t, &ws, &call("notes.md")).await;
    let seen = events.until("turn_complete").await;
    assert!(
        !kinds(&seen).contains(&"approve_request"),
        "{:?}",
        kinds(&seen)
    );
    let preview = preview_of(&seen);
    assert_eq!(preview["kind"], "markdown");
    assert_eq!(preview["title"], "notes.md");
    let url = preview["url"].as_str().unwrap().to_string();
    let resp = fetch(&t, &url, Some(READ)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()[header::CONTENT_TYPE],
        "text/markdown; charset=utf-8"
    );
    assert_eq!(resp.text().await.unwrap(), "# Plan\n\n- one\n");

    // Over the table cap (2 MB): refused, nothing stored, the model told why.
    send(&t, &ws, &call("big.csv")).await;
    let seen = events.until("turn_complete").await;
    assert!(!kinds(&seen).contains(&"preview"));
    let result = seen.iter().find(|e| e.kind() == "tool_result").unwrap();
    assert_eq!(result.data["is_error"], true);
    assert!(
        result.data["output"]
            .as_str()
            .unwrap()
            .contains("over the 2 MB limit of table previews"),
        "{}",
        result.data
    );
    // A metadata address stays refused even with private space allowed.
    send(&t, &ws, &call("http://169.254.169.254/latest/meta-data/")).await;
    let seen = events.until("turn_complete").await;
    assert!(!kinds(&seen).contains(&"approve_request"));
    let result = seen.iter().find(|e| e.kind() == "tool_result").unwrap();
    assert!(result.data["output"].as_str().unwrap().contains("refused"));

    // Closing the workstream drops its previews.
    let (status, _) = t
        .post("/v1/api/workstreams/close", json!({"ws_id": ws}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(fetch(&t, &url, Some(READ)).await.status(), 404);
    assert_eq!(t.node.previews.usage(), (0, 0));
}

#[tokio::test]
async fn a_real_browser_opens_closes_and_renders_previews() {
    let t = TestNode::start().await;
    std::fs::write(
        t.cwd().join("table.csv"),
        "name,count\nalpha,10\nbeta,2\ngamma,33\n",
    )
    .unwrap();
    let page_url = site().await;
    super::browser::run_browser_script(
        "preview.test.mjs",
        "preview test: all steps passed",
        &t.base,
        FULL,
        &[("TURNSTONE_PAGE_URL", page_url)],
    )
    .await;
    // What the browser showed is what the node stored: two previews of the default workstream.
    assert_eq!(t.node.previews.usage().0, 2);
}
