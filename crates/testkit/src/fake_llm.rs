//! The HTTP fake: an OpenAI-compatible `/v1/chat/completions` + `/v1/models` server on
//! 127.0.0.1 answering with the [`script`](crate::script) rules, per-request overrides and
//! injected faults.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::error::TestkitError;
use crate::openai_wire::{
    ParsedRequest, ResponseMeta, TokenCounts, completion_json, parse_request, sse_event,
    stream_frames,
};
use crate::script::{ScriptReply, prompt_tokens, reply_for};

/// Settings of a [`FakeLlm`].
#[derive(Debug, Clone, PartialEq)]
pub struct FakeLlmConfig {
    /// Model id listed by `/v1/models` and echoed when a request names none.
    pub model: String,
    /// Reported as `max_model_len` by `/v1/models`.
    pub context_window: u32,
    /// Delay before the response head of every chat completion.
    pub first_byte_delay: Duration,
    /// `None`: as fast as possible. `Some(t)`: one streamed chunk every `1/t` seconds (a chunk
    /// counts as one token); a non-streamed reply waits `completion_tokens / t` seconds.
    pub tokens_per_sec: Option<f64>,
    /// Characters per streamed content / reasoning / arguments chunk (at least 1).
    pub chunk_chars: usize,
    /// Keep every chat-completions request (body and `traceparent`) for
    /// [`FakeLlm::requests`], [`FakeLlm::last_request`] and [`FakeLlm::traceparents`].
    /// A long-running model (the node's built-in one, the standalone binary) keeps none:
    /// each body holds the whole conversation, so they would grow without bound.
    pub record_requests: bool,
}

impl Default for FakeLlmConfig {
    fn default() -> Self {
        Self {
            model: "fake-model".into(),
            context_window: 32_768,
            first_byte_delay: Duration::ZERO,
            tokens_per_sec: None,
            chunk_chars: 4,
            record_requests: true,
        }
    }
}

/// A misbehaviour served to exactly one chat-completions request (FIFO, see
/// [`FakeLlm::push_fault`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this HTTP status, an optional `Retry-After: <seconds>` header and this body
    /// (sent as `application/json` when it parses as JSON, else `text/plain`).
    Status {
        code: u16,
        retry_after: Option<u64>,
        body: String,
    },
    /// Send the first `after_chunks` SSE events of the normal stream, then abort the
    /// connection (no `[DONE]`). A non-streaming request gets half of its JSON body.
    DropMidStream { after_chunks: usize },
    /// A `data: {not json` event right after the role chunk of an otherwise fine stream
    /// (a non-streaming request gets the body `{not json`).
    MalformedChunk,
    /// HTTP 200 with an empty body.
    EmptyBody,
    /// Each item sent verbatim as `data: <item>\n\n`, nothing else (no `[DONE]` unless given).
    RawSse(Vec<String>),
    /// Accept the request and never answer (until the server is dropped).
    Hang,
}

/// A running fake LLM server. Dropping the handle stops it.
///
/// ```no_run
/// # async fn demo() {
/// use turnstone_testkit::{FakeLlm, Fault};
/// let llm = FakeLlm::start().await;
/// llm.push_fault(Fault::Status { code: 503, retry_after: Some(1), body: "busy".into() });
/// let url = llm.base_url(); // http://127.0.0.1:<port>/v1
/// # let _ = url;
/// # }
/// ```
#[derive(Debug)]
pub struct FakeLlm {
    shared: Arc<Shared>,
    addr: SocketAddr,
    /// Dropping this sender stops the server and releases hanging requests.
    _shutdown: watch::Sender<bool>,
}

#[derive(Debug)]
struct Shared {
    config: FakeLlmConfig,
    replies: Mutex<VecDeque<ScriptReply>>,
    faults: Mutex<VecDeque<Fault>>,
    /// Empty unless [`FakeLlmConfig::record_requests`].
    requests: Mutex<Vec<Value>>,
    /// Chat-completions requests received, recorded or not.
    received: AtomicUsize,
    /// The `traceparent` header of each chat-completions request (`None` when absent).
    traceparents: Mutex<Vec<Option<String>>>,
    responses: AtomicU64,
    nodelay_connections: AtomicUsize,
    shutdown: watch::Receiver<bool>,
}

impl FakeLlm {
    /// Starts a server with the default configuration on `127.0.0.1:<random port>`.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (a broken test environment).
    pub async fn start() -> Self {
        Self::start_with(FakeLlmConfig::default()).await
    }

    /// Starts a server with `config` on `127.0.0.1:<random port>`.
    ///
    /// # Panics
    /// When no port on 127.0.0.1 can be bound (a broken test environment).
    pub async fn start_with(config: FakeLlmConfig) -> Self {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        match Self::bind(addr, config).await {
            Ok(llm) => llm,
            Err(e) => panic!("turnstone-testkit: {e}"),
        }
    }

    /// Starts a server on `addr` (port 0 picks one). Must be called inside a tokio runtime.
    pub async fn bind(addr: SocketAddr, config: FakeLlmConfig) -> Result<Self, TestkitError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| TestkitError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| TestkitError::Bind { addr, source })?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            config,
            replies: Mutex::default(),
            faults: Mutex::default(),
            requests: Mutex::default(),
            received: AtomicUsize::new(0),
            traceparents: Mutex::default(),
            responses: AtomicU64::new(0),
            nodelay_connections: AtomicUsize::new(0),
            shutdown: shutdown_rx.clone(),
        });
        let app = Router::new()
            .route("/v1/models", get(list_models))
            .route("/v1/chat/completions", post(chat_completions))
            .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(Arc::clone(&shared));
        let tap_shared = Arc::clone(&shared);
        let listener = listener.tap_io(move |stream| match stream.set_nodelay(true) {
            Ok(()) => {
                tap_shared
                    .nodelay_connections
                    .fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!(error = %e, "fake-llm: cannot set TCP_NODELAY"),
        });
        let mut stop = shutdown_rx;
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        });
        tokio::spawn(async move {
            if let Err(e) = server.await {
                tracing::warn!(error = %e, "fake-llm server ended with an error");
            }
        });
        tracing::debug!(%addr, "fake-llm listening");
        Ok(Self {
            shared,
            addr,
            _shutdown: shutdown_tx,
        })
    }

    /// `http://127.0.0.1:<port>/v1`: the OpenAI `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The configuration the server runs with.
    pub fn config(&self) -> &FakeLlmConfig {
        &self.shared.config
    }

    /// Serve `reply` to the next chat-completions request instead of the rules (FIFO).
    /// [`Fault::DropMidStream`] and [`Fault::MalformedChunk`] also consume a queued reply.
    pub fn push_reply(&self, reply: ScriptReply) {
        self.shared.replies.lock().push_back(reply);
    }

    /// Serve `fault` to the next chat-completions request (FIFO, one request each).
    /// A request rejected with 400 consumes neither a fault nor a reply.
    pub fn push_fault(&self, fault: Fault) {
        self.shared.faults.lock().push_back(fault);
    }

    /// Bodies of every chat-completions request received, in order. A body that is not JSON
    /// is recorded as a JSON string holding its (lossy UTF-8) text.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().clone()
    }

    /// The most recent chat-completions request body.
    pub fn last_request(&self) -> Option<Value> {
        self.shared.requests.lock().last().cloned()
    }

    /// The W3C `traceparent` header of every chat-completions request, in order (`None`
    /// where a request had none).
    pub fn traceparents(&self) -> Vec<Option<String>> {
        self.shared.traceparents.lock().clone()
    }

    /// How many chat-completions requests were received (including rejected and faulted ones).
    pub fn request_count(&self) -> usize {
        self.shared.received.load(Ordering::Relaxed)
    }

    /// How many accepted connections had `TCP_NODELAY` set successfully.
    pub fn nodelay_connections(&self) -> usize {
        self.shared.nodelay_connections.load(Ordering::Relaxed)
    }
}

impl Shared {
    fn next_fault(&self) -> Option<Fault> {
        self.faults.lock().pop_front()
    }

    fn next_reply(&self, request: &ParsedRequest) -> ScriptReply {
        self.replies
            .lock()
            .pop_front()
            .unwrap_or_else(|| reply_for(&request.messages))
    }

    fn meta(&self, request: &ParsedRequest) -> ResponseMeta {
        let n = self.responses.fetch_add(1, Ordering::Relaxed);
        ResponseMeta {
            id: format!("chatcmpl-fake-{n}"),
            model: request
                .model
                .clone()
                .unwrap_or_else(|| self.config.model.clone()),
            created: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }

    fn chunk_interval(&self) -> Option<Duration> {
        self.config
            .tokens_per_sec
            .filter(|t| t.is_finite() && *t > 0.0)
            .and_then(|t| Duration::try_from_secs_f64(1.0 / t).ok())
    }
}

async fn list_models(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{
            "id": shared.config.model,
            "object": "model",
            "owned_by": "turnstone-testkit",
            "max_model_len": shared.config.context_window,
        }],
    }))
    .into_response()
}

fn error_response(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({ "error": { "message": message, "type": "invalid_request_error" } })),
    )
        .into_response()
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    if shared.config.record_requests {
        shared.traceparents.lock().push(
            headers
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        );
        let value = serde_json::from_slice::<Value>(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
        shared.requests.lock().push(value);
    }
    // Counted once recorded: a test that sees the count sees the request.
    shared.received.fetch_add(1, Ordering::Relaxed);
    let request = match parse_request(&body) {
        Ok(request) => request,
        Err(message) => return error_response(StatusCode::BAD_REQUEST, &message),
    };
    let fault = shared.next_fault();
    if fault == Some(Fault::Hang) {
        let mut stop = shared.shutdown.clone();
        let _ = stop.wait_for(|stopped| *stopped).await;
        return error_response(StatusCode::SERVICE_UNAVAILABLE, "fake-llm shutting down");
    }
    if !shared.config.first_byte_delay.is_zero() {
        tokio::time::sleep(shared.config.first_byte_delay).await;
    }
    match fault {
        Some(Fault::Status {
            code,
            retry_after,
            body,
        }) => status_response(code, retry_after, body),
        Some(Fault::EmptyBody) => (StatusCode::OK, Body::empty()).into_response(),
        Some(Fault::RawSse(items)) => {
            let events = items.iter().map(|i| BodyPart::Data(sse_event(i))).collect();
            sse_response(&shared, events)
        }
        Some(Fault::DropMidStream { after_chunks }) => {
            serve_reply(&shared, &request, Damage::Drop(after_chunks)).await
        }
        Some(Fault::MalformedChunk) => serve_reply(&shared, &request, Damage::Malformed).await,
        Some(Fault::Hang) | None => serve_reply(&shared, &request, Damage::None).await,
    }
}

fn status_response(code: u16, retry_after: Option<u64>, body: String) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    let mut response = (status, [(header::CONTENT_TYPE, content_type)], body).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// How a normal reply is spoiled by a fault.
#[derive(Debug, Clone, Copy)]
enum Damage {
    None,
    Drop(usize),
    Malformed,
}

/// One piece of a response body: bytes, or the point where the connection is aborted.
#[derive(Debug)]
enum BodyPart {
    Data(Bytes),
    Abort,
}

/// The error that makes hyper abort the connection, produced only after giving hyper the
/// chance to flush what was sent before (it polls the body eagerly and would otherwise drop
/// the buffered bytes together with the connection).
async fn abort_connection() -> io::Error {
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    io::Error::other("turnstone-testkit: connection dropped mid-stream (Fault::DropMidStream)")
}

/// A body streaming `parts`, one every `interval` when given. Without one (the zero-latency
/// model) the whole reply is ready at once and is written as one chunk, as a server writes a
/// body it already holds; only an abort stays a part of its own, after the bytes before it.
fn body_of(parts: Vec<BodyPart>, interval: Option<Duration>) -> Body {
    let parts = match interval {
        Some(_) => parts,
        None => joined_parts(parts),
    };
    let stream =
        futures::stream::iter(parts.into_iter().enumerate()).then(move |(i, part)| async move {
            if let Some(interval) = interval.filter(|_| i > 0) {
                tokio::time::sleep(interval).await;
            }
            match part {
                BodyPart::Data(bytes) => Ok(bytes),
                BodyPart::Abort => Err(abort_connection().await),
            }
        });
    Body::from_stream(stream)
}

/// `parts` with each run of adjacent data parts as one.
fn joined_parts(parts: Vec<BodyPart>) -> Vec<BodyPart> {
    let mut out: Vec<BodyPart> = Vec::with_capacity(2);
    let mut run = Vec::new();
    for part in parts {
        match part {
            BodyPart::Data(bytes) => run.extend_from_slice(&bytes),
            BodyPart::Abort => {
                if !run.is_empty() {
                    out.push(BodyPart::Data(Bytes::from(std::mem::take(&mut run))));
                }
                out.push(BodyPart::Abort);
            }
        }
    }
    if !run.is_empty() {
        out.push(BodyPart::Data(Bytes::from(run)));
    }
    out
}

async fn serve_reply(shared: &Arc<Shared>, request: &ParsedRequest, damage: Damage) -> Response {
    let reply = shared.next_reply(request);
    let meta = shared.meta(request);
    let tokens = TokenCounts {
        prompt: prompt_tokens(request.messages.iter().map(|m| m.content.as_str())),
        completion: reply.completion_tokens(),
    };
    if request.stream {
        let frames = stream_frames(
            &meta,
            &reply,
            tokens,
            request.include_usage,
            shared.config.chunk_chars,
        );
        let mut events: Vec<BodyPart> = frames
            .iter()
            .map(|f| BodyPart::Data(sse_event(f)))
            .collect();
        match damage {
            Damage::None => {}
            Damage::Malformed => events.insert(1, BodyPart::Data(sse_event("{not json"))),
            Damage::Drop(after) => {
                // Never deliver `[DONE]`: at most every frame before it.
                events.truncate(after.min(events.len().saturating_sub(1)));
                events.push(BodyPart::Abort);
            }
        }
        return sse_response(shared, events);
    }
    if let Some(interval) = shared.chunk_interval() {
        let wait = interval.saturating_mul(u32::try_from(tokens.completion).unwrap_or(u32::MAX));
        tokio::time::sleep(wait).await;
    }
    let body = completion_json(&meta, &reply, tokens).to_string();
    match damage {
        Damage::None => json_response(Body::from(body)),
        Damage::Malformed => json_response(Body::from("{not json")),
        Damage::Drop(_) => {
            let mut half = body.len() / 2;
            while !body.is_char_boundary(half) {
                half -= 1;
            }
            let parts = vec![
                BodyPart::Data(Bytes::copy_from_slice(&body.as_bytes()[..half])),
                BodyPart::Abort,
            ];
            json_response(body_of(parts, None))
        }
    }
}

fn json_response(body: Body) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

fn sse_response(shared: &Shared, events: Vec<BodyPart>) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body_of(events, shared.chunk_interval()),
    )
        .into_response()
}
