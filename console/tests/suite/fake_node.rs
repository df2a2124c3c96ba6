//! A light stand-in node for the cases a real node cannot be made to show on demand: a
//! stalled or failing node, an event stream held open between two frames, and a record of
//! every request it received (to prove what the proxy sends, and what it never sends).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// One request as the fake node saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub authorization: Option<String>,
    pub cookie: Option<String>,
    pub last_event_id: Option<String>,
    pub traceparent: Option<String>,
}

#[derive(Debug)]
pub struct FakeState {
    pub health: Mutex<Value>,
    pub dashboard_status: Mutex<u16>,
    pub seen: Mutex<Vec<Seen>>,
    /// Releases the second frame of `/v1/api/events`.
    pub release: Notify,
    /// Rows of `GET /v1/api/watches`; a cancel deactivates one (else 404).
    pub watches: Mutex<Vec<Value>>,
    /// `{name: status}` of `_internal/mcp-status`.
    pub mcp_status: Mutex<Value>,
    /// `{alias: info}` of `_internal/model-status`.
    pub models: Mutex<Value>,
    /// Rows of `GET /v1/api/memories`; a delete removes one by name (else 404).
    pub memories: Mutex<Vec<Value>>,
    /// The bodies of every `_internal/config-reload`.
    pub config_reloads: Mutex<Vec<Value>>,
    /// The bodies of every `_internal/model-reload`.
    pub model_reloads: Mutex<Vec<Value>>,
}

pub struct FakeNode {
    pub url: String,
    pub state: Arc<FakeState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn record(
    State(s): State<Arc<FakeState>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let h = req.headers();
    s.seen.lock().unwrap().push(Seen {
        path: req
            .uri()
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        authorization: header(h, "authorization"),
        cookie: header(h, "cookie"),
        last_event_id: header(h, "last-event-id"),
        traceparent: header(h, "traceparent"),
    });
    next.run(req).await
}

async fn health(State(s): State<Arc<FakeState>>) -> axum::Json<Value> {
    axum::Json(s.health.lock().unwrap().clone())
}

async fn dashboard(State(s): State<Arc<FakeState>>) -> Response {
    let status = *s.dashboard_status.lock().unwrap();
    let body = json!({
        "workstreams": [{"id": "fakews1", "name": "fake", "state": "running", "title": "", "tokens": 3,
            "context_ratio": 0.1, "activity": "", "activity_state": "", "tool_calls": 0,
            "node": "local", "model": "m", "model_alias": ""}],
        "aggregate": {"total_tokens": 3, "total_tool_calls": 0, "active_count": 1, "total_count": 1,
            "uptime_seconds": 1.5, "node": "local"},
    });
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        axum::Json(body),
    )
        .into_response()
}

async fn page() -> Response {
    (
        [
            ("content-type", "text/html; charset=utf-8"),
            ("set-cookie", "node=secret"),
        ],
        "<!doctype html><html><head><link rel=\"stylesheet\" href=\"/static/style.css\">\
         <script src=\"/static/app.js\" defer></script></head><body><p>fake node</p></body></html>",
    )
        .into_response()
}

async fn events(State(s): State<Arc<FakeState>>, headers: HeaderMap) -> Response {
    let from: u64 = header(&headers, "last-event-id")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let stream = async_stream_frames(s, from);
    (
        [("content-type", "text/event-stream")],
        Body::from_stream(stream),
    )
        .into_response()
}

fn async_stream_frames(
    s: Arc<FakeState>,
    from: u64,
) -> impl futures::Stream<Item = Result<Bytes, std::convert::Infallible>> {
    futures::stream::unfold(0u8, move |step| {
        let s = s.clone();
        async move {
            match step {
                0 => Some((
                    Ok(Bytes::from(format!(
                        "id: {}\r\ndata: {{\"type\":\"first\",\"n\":{}}}\r\n\r\n",
                        from + 1,
                        from + 1
                    ))),
                    1,
                )),
                1 => {
                    s.release.notified().await;
                    Some((
                        Ok(Bytes::from(format!(
                            "id: {}\r\ndata: {{\"type\":\"second\",\"n\":{}}}\r\n\r\n",
                            from + 2,
                            from + 2
                        ))),
                        2,
                    ))
                }
                _ => {
                    std::future::pending::<()>().await;
                    None
                }
            }
        }
    })
}

async fn echo(headers: HeaderMap, body: Bytes) -> axum::Json<Value> {
    axum::Json(json!({
        "content_type": header(&headers, "content-type"),
        "body": String::from_utf8_lossy(&body),
    }))
}

async fn watches(State(s): State<Arc<FakeState>>) -> axum::Json<Value> {
    axum::Json(json!({"watches": *s.watches.lock().unwrap()}))
}

async fn cancel_watch(
    State(s): State<Arc<FakeState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    let mut rows = s.watches.lock().unwrap();
    match rows.iter_mut().find(|w| w["watch_id"] == id.as_str()) {
        Some(w) => {
            w["active"] = json!(0);
            axum::Json(json!({"status": "ok", "watch_id": id})).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "Watch not found"})),
        )
            .into_response(),
    }
}

async fn mcp_status(State(s): State<Arc<FakeState>>) -> axum::Json<Value> {
    axum::Json(json!({"servers": *s.mcp_status.lock().unwrap()}))
}

async fn mcp_reload(State(s): State<Arc<FakeState>>) -> axum::Json<Value> {
    let n = s
        .mcp_status
        .lock()
        .unwrap()
        .as_object()
        .map_or(0, |m| m.len());
    axum::Json(json!({"status": "ok", "servers": n}))
}

async fn model_status(State(s): State<Arc<FakeState>>) -> axum::Json<Value> {
    axum::Json(json!({"models": *s.models.lock().unwrap()}))
}

async fn memories(State(s): State<Arc<FakeState>>) -> axum::Json<Value> {
    axum::Json(json!({"memories": *s.memories.lock().unwrap()}))
}

async fn delete_memory(
    State(s): State<Arc<FakeState>>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Response {
    let mut rows = s.memories.lock().unwrap();
    let before = rows.len();
    rows.retain(|m| m["name"] != name.as_str());
    if rows.len() == before {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": format!("Memory not found: {name}")})),
        )
            .into_response();
    }
    axum::Json(json!({"status": "ok", "name": name})).into_response()
}

async fn config_reload(State(s): State<Arc<FakeState>>, body: Bytes) -> axum::Json<Value> {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    s.config_reloads.lock().unwrap().push(body);
    axum::Json(json!({"status": "ok", "applied": {}, "refused": {}, "restart_required": []}))
}

async fn model_reload(State(s): State<Arc<FakeState>>, body: Bytes) -> axum::Json<Value> {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    s.model_reloads.lock().unwrap().push(body);
    axum::Json(json!({"status": "ok", "aliases": []}))
}

impl FakeNode {
    pub async fn start(node_id: &str, version: &str) -> Self {
        let state = Arc::new(FakeState {
            health: Mutex::new(json!({
                "status": "ok", "version": version, "node_id": node_id, "uptime_seconds": 1.0,
                "model": "m", "max_ws": 10,
                "workstreams": {"total": 1, "idle": 0, "thinking": 0, "running": 1, "attention": 0, "error": 0},
                "backend": {"status": "up", "circuit_state": "closed"},
                "mcp": {"servers": 2, "resources": 5, "prompts": 1},
                "events": {"node_seq": 10, "truncations": 0},
                "event_loop_lag_ms": 0.2,
            })),
            dashboard_status: Mutex::new(200),
            seen: Mutex::new(Vec::new()),
            release: Notify::new(),
            watches: Mutex::new(Vec::new()),
            mcp_status: Mutex::new(json!({})),
            models: Mutex::new(json!({})),
            memories: Mutex::new(Vec::new()),
            config_reloads: Mutex::new(Vec::new()),
            model_reloads: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/health", get(health))
            .route("/v1/api/dashboard", get(dashboard))
            .route("/", get(page))
            .route("/v1/api/events", get(events))
            .route("/v1/api/send", post(echo))
            .route("/v1/api/watches", get(watches))
            .route("/v1/api/watches/{id}/cancel", post(cancel_watch))
            .route("/v1/api/_internal/mcp-status", get(mcp_status))
            .route("/v1/api/_internal/mcp-reload", post(mcp_reload))
            .route("/v1/api/_internal/model-status", get(model_status))
            .route("/v1/api/_internal/config-reload", post(config_reload))
            .route("/v1/api/_internal/model-reload", post(model_reload))
            .route("/v1/api/memories", get(memories))
            .route(
                "/v1/api/memories/{name}",
                axum::routing::delete(delete_memory),
            )
            .route(
                "/static/style.css",
                get(|| async { ([("content-type", "text/css")], "p{color:red}") }),
            )
            .layer(axum::middleware::from_fn_with_state(state.clone(), record))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, state, task }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// Requests other than the collector's polls.
    pub fn seen_proxied(&self) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.path != "/health" && s.path != "/v1/api/dashboard")
            .collect()
    }

    pub fn set_health(&self, f: impl FnOnce(&mut Value)) {
        f(&mut self.state.health.lock().unwrap());
    }
}
