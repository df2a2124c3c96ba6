//! Local HTTP servers for the web tool tests: a site for `web_fetch`, a SearxNG-shaped JSON
//! endpoint and a webhook receiver. All bind 127.0.0.1 port 0.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use parking_lot::Mutex;
use serde_json::{Value, json};
use turnstone_tools::{NoOutput, Tool, ToolContext, ToolOutput};

pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    addr
}

/// prepare + execute of one tool; panics if prepare refuses.
pub async fn call(tool: &dyn Tool, args: Value, ctx: &ToolContext) -> ToolOutput {
    let prepared = tool
        .prepare(args, ctx)
        .unwrap_or_else(|e| panic!("prepare refused: {e}"));
    tool.execute(&prepared, ctx, &NoOutput).await
}

pub const PAGE: &str = "<!DOCTYPE html><html><head><title>Turnstone test page</title>\
    <style>body { color: red }</style><script>var leaked = 'SCRIPT-TEXT';</script></head>\
    <body><h1>Heading one</h1><p>The answer is <b>42</b>.</p>\
    <p>See <a href=\"/other\">the other page</a>.</p></body></html>";

/// The `web_fetch` test site. `hits` counts every request it received.
#[derive(Clone)]
pub struct Site {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicUsize>,
}

impl Site {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
    /// The same URL spelled with the name `localhost`.
    pub fn localhost_url(&self, path: &str) -> String {
        format!("http://localhost:{}{path}", self.addr.port())
    }
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

pub async fn site() -> Site {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = |hits: &Arc<AtomicUsize>| {
        hits.fetch_add(1, Ordering::SeqCst);
    };
    let h = hits.clone();
    let router = Router::new()
        .route("/page", get(|| async { html(PAGE) }))
        .route(
            "/hop/{n}",
            get(|Path(n): Path<u32>| async move {
                if n == 0 {
                    html(PAGE)
                } else {
                    redirect(&format!("/hop/{}", n - 1))
                }
            }),
        )
        .route(
            "/redirect",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                redirect(q.get("to").map_or("/page", String::as_str))
            }),
        )
        .route(
            "/big",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain")],
                    "0123456789".repeat(200_000),
                )
                    .into_response()
            }),
        )
        .route(
            "/image",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "image/png")],
                    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec(),
                )
                    .into_response()
            }),
        )
        .route(
            "/json",
            get(|| async { Json(json!({"status": "green", "nodes": 3})).into_response() }),
        )
        .route(
            "/missing",
            get(|| async {
                (StatusCode::NOT_FOUND, html("<p>No such page here</p>")).into_response()
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(120)).await;
                html(PAGE)
            }),
        )
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                counted(&h);
                async move { next.run(req).await }
            },
        ));
    let addr = serve(router).await;
    Site { addr, hits }
}

fn html(body: &str) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body.to_owned(),
    )
        .into_response()
}

fn redirect(to: &str) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, to.to_owned())]).into_response()
}

/// Every query string the SearxNG endpoint received.
type QueryLog = Arc<Mutex<Vec<HashMap<String, String>>>>;

/// A SearxNG-shaped endpoint: `{base}/ok/search` answers, `/fail/search` is a 500,
/// `/garbage/search` is not JSON. Every query string is recorded.
#[derive(Clone)]
pub struct Searx {
    pub addr: SocketAddr,
    pub queries: QueryLog,
}

impl Searx {
    pub fn base(&self, kind: &str) -> String {
        format!("http://{}/{kind}", self.addr)
    }
    pub fn queries(&self) -> Vec<HashMap<String, String>> {
        self.queries.lock().clone()
    }
}

pub async fn searx() -> Searx {
    let queries: QueryLog = Arc::default();
    let router = Router::new()
        .route("/ok/search", get(searx_ok))
        .route(
            "/fail/search",
            get(|| async {
                (StatusCode::INTERNAL_SERVER_ERROR, "engine exploded").into_response()
            }),
        )
        .route(
            "/garbage/search",
            get(|| async { html("<html>not json</html>") }),
        )
        .with_state(queries.clone());
    let addr = serve(router).await;
    Searx { addr, queries }
}

async fn searx_ok(
    State(queries): State<QueryLog>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    queries.lock().push(q.clone());
    if q.get("format").map(String::as_str) != Some("json") {
        return (StatusCode::FORBIDDEN, "format not allowed").into_response();
    }
    let query = q.get("q").cloned().unwrap_or_default();
    if query == "nothing" {
        return Json(json!({"query": query, "results": []})).into_response();
    }
    let results: Vec<Value> = (1..=30)
        .map(|i| {
            json!({
                "url": format!("https://example.org/{i}"),
                "title": format!("Result {i} for {query}"),
                "content": format!("Snippet {i}\nabout {query}"),
                "engine": "duckduckgo",
                "score": 1.0 / f64::from(i),
            })
        })
        .collect();
    Json(json!({
        "query": query,
        "number_of_results": 30,
        "results": results,
        "answers": [],
        "suggestions": [],
        "unresponsive_engines": []
    }))
    .into_response()
}

/// One request the webhook receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub body: Value,
    pub authorization: Option<String>,
}

/// A webhook receiver: `/hook` accepts, `/flaky` fails twice then accepts, `/down` always
/// fails (500), `/reject` answers 400.
#[derive(Clone)]
pub struct Hooks {
    pub addr: SocketAddr,
    pub received: Arc<Mutex<Vec<Received>>>,
    flaky: Arc<AtomicUsize>,
}

impl Hooks {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().clone()
    }
    pub fn count(&self, path: &str) -> usize {
        self.received().iter().filter(|r| r.path == path).count()
    }
}

#[derive(Clone)]
struct HookState {
    received: Arc<Mutex<Vec<Received>>>,
    flaky: Arc<AtomicUsize>,
}

pub async fn hooks() -> Hooks {
    let state = HookState {
        received: Arc::default(),
        flaky: Arc::default(),
    };
    let router = Router::new()
        .route("/{kind}", post(hook))
        .with_state(state.clone());
    let addr = serve(router).await;
    Hooks {
        addr,
        received: state.received,
        flaky: state.flaky,
    }
}

async fn hook(
    State(state): State<HookState>,
    Path(kind): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    state.received.lock().push(Received {
        path: format!("/{kind}"),
        body,
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    });
    match kind.as_str() {
        "hook" => StatusCode::NO_CONTENT.into_response(),
        "flaky" if state.flaky.fetch_add(1, Ordering::SeqCst) >= 2 => {
            StatusCode::OK.into_response()
        }
        "reject" => (StatusCode::BAD_REQUEST, "bad payload").into_response(),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "gateway down").into_response(),
    }
}

impl Hooks {
    /// Attempts seen by `/flaky` so far.
    pub fn flaky_attempts(&self) -> usize {
        self.flaky.load(Ordering::SeqCst)
    }
}

/// A port nothing listens on (bound, then released).
pub async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}
