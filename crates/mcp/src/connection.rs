//! One connection to one server: spawning/dialing, the `rmcp` client handler (which only
//! forwards `list_changed` notifications), a transport wrapper that reports when the
//! connection ends, the child's stderr tail, and discovery.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    process::Stdio,
    sync::Arc,
    time::Duration,
};

use futures::Future;
use parking_lot::Mutex;
use rmcp::{
    ClientHandler, Peer, ServiceError, ServiceExt,
    model::{ClientCapabilities, ClientConfig, Implementation},
    service::{
        NotificationContext, RoleClient, RunningService, RxJsonRpcMessage, TxJsonRpcMessage,
    },
    transport::{
        StreamableHttpClientTransport, TokioChildProcess, Transport,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    sync::{mpsc, watch},
};

use crate::{
    config::{McpServerConfig, McpTransportConfig},
    types::{McpPrompt, McpResource, McpResourceTemplate, McpTool},
};

/// JSON-RPC "method not found".
pub(crate) const METHOD_NOT_FOUND: i32 = -32601;
/// Lines of a child's stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line kept.
const STDERR_LINE_MAX: usize = 400;

/// Which list a `notifications/*/list_changed` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ListKind {
    Tools,
    Resources,
    Prompts,
}

impl ListKind {
    pub(crate) const ALL: [ListKind; 3] = [ListKind::Tools, ListKind::Resources, ListKind::Prompts];
}

/// The client side of the protocol: identifies as turnstone, declares no optional client
/// capabilities (no roots, sampling or elicitation), forwards list changes.
#[derive(Clone)]
pub(crate) struct Handler {
    changes: mpsc::UnboundedSender<ListKind>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(ListKind::Tools);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(ListKind::Resources);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(ListKind::Prompts);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("turnstone", env!("CARGO_PKG_VERSION")),
        )
    }
}

pub(crate) type Client = RunningService<RoleClient, Handler>;

/// Wraps a transport and flips `closed` to true when the peer's stream ends (EOF on a
/// child's stdout, the HTTP worker giving up) or the transport is closed.
struct Watched<T> {
    inner: T,
    closed: Arc<watch::Sender<bool>>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Watched<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let closed = self.closed.clone();
        let next = self.inner.receive();
        async move {
            let message = next.await;
            if message.is_none() {
                closed.send_replace(true);
            }
            message
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let closed = self.closed.clone();
        let close = self.inner.close();
        async move {
            let result = close.await;
            closed.send_replace(true);
            result
        }
    }
}

/// The last lines a child wrote to stderr (also logged at debug level).
#[derive(Clone, Default)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    done: Option<watch::Receiver<bool>>,
}

impl StderrTail {
    fn capture(server: &str, stderr: tokio::process::ChildStderr) -> Self {
        let lines: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let (done_tx, done_rx) = watch::channel(false);
        let sink = lines.clone();
        let server = server.to_owned();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                tracing::debug!(mcp_server = %server, "stderr: {line}");
                let mut line = line;
                if line.len() > STDERR_LINE_MAX {
                    let mut cut = STDERR_LINE_MAX;
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    line.truncate(cut);
                }
                let mut tail = sink.lock();
                if tail.len() == STDERR_TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            let _ = done_tx.send(true);
        });
        Self {
            lines,
            done: Some(done_rx),
        }
    }

    /// The last non-empty stderr line, after giving the reader a moment to catch up with
    /// a process that just exited.
    pub(crate) async fn last_line(&self) -> Option<String> {
        if let Some(done) = &self.done {
            let mut done = done.clone();
            let _ = tokio::time::timeout(Duration::from_millis(200), done.wait_for(|d| *d)).await;
        }
        let tail = self.lines.lock();
        tail.iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned())
    }
}

/// A live connection.
pub(crate) struct Connection {
    pub(crate) client: Arc<Client>,
    pub(crate) closed: watch::Receiver<bool>,
    pub(crate) stderr: StderrTail,
    pub(crate) server_info: Option<String>,
    /// The server's declared capabilities, as JSON.
    pub(crate) capabilities: Value,
}

/// Spawns or dials the server and runs `initialize`. Not bounded here (the caller applies
/// the startup timeout; dropping this future kills a spawned child).
pub(crate) async fn connect(
    config: &McpServerConfig,
    child_env: &turnstone_tools::ChildEnv,
    changes: mpsc::UnboundedSender<ListKind>,
) -> Result<Connection, String> {
    let handler = Handler { changes };
    let (closed_tx, closed_rx) = watch::channel(false);
    let closed_tx = Arc::new(closed_tx);
    let (client, stderr) = match &config.transport {
        McpTransportConfig::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args)
                .env_clear()
                .envs(child_env.from_process())
                .envs(env)
                .kill_on_drop(true);
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            let (child, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            let stderr = stderr
                .map(|s| StderrTail::capture(&config.name, s))
                .unwrap_or_default();
            let transport = Watched {
                inner: child,
                closed: closed_tx,
            };
            match handler.serve(transport).await {
                Ok(client) => (client, stderr),
                Err(e) => {
                    let mut reason = format!("initialize failed: {}", init_error_text(&e));
                    if let Some(line) = stderr.last_line().await {
                        reason.push_str(&format!(" (stderr: {line})"));
                    }
                    return Err(reason);
                }
            }
        }
        McpTransportConfig::Http { url, headers } => {
            let mut custom = HashMap::new();
            for (k, v) in headers {
                let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| format!("header {k:?}: {e}"))?;
                let value = reqwest::header::HeaderValue::from_str(v)
                    .map_err(|e| format!("header {k:?}: {e}"))?;
                custom.insert(name, value);
            }
            let http = turnstone_http::client_builder()
                .connect_timeout(config.startup_timeout)
                .build()
                .map_err(|e| {
                    format!(
                        "cannot build the HTTP client: {}",
                        turnstone_http::describe(&e)
                    )
                })?;
            let transport = StreamableHttpClientTransport::with_client(
                http,
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom),
            );
            let transport = Watched {
                inner: transport,
                closed: closed_tx,
            };
            let client = handler
                .serve(transport)
                .await
                .map_err(|e| format!("initialize failed at {url}: {}", init_error_text(&e)))?;
            (client, StderrTail::default())
        }
    };
    let info = client.peer().peer_info();
    let server_info = info.as_ref().and_then(|i| {
        i.server_info
            .as_ref()
            .map(|s| format!("{} {}", s.name, s.version))
    });
    let capabilities = info
        .as_ref()
        .and_then(|i| serde_json::to_value(&i.capabilities).ok())
        .unwrap_or(Value::Null);
    // Lists must always be fetched fresh (a refresh after list_changed must not be served
    // from the response cache).
    client
        .peer()
        .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    Ok(Connection {
        client: Arc::new(client),
        closed: closed_rx,
        stderr,
        server_info,
        capabilities,
    })
}

/// What a server offers.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Catalog {
    pub(crate) tools: Vec<McpTool>,
    pub(crate) resources: Vec<McpResource>,
    pub(crate) templates: Vec<McpResourceTemplate>,
    pub(crate) prompts: Vec<McpPrompt>,
}

/// Why a discovery failed.
pub(crate) enum DiscoveryError {
    /// The connection is gone.
    Lost(String),
    /// The server answered `tools/list` with an error (other than method-not-found).
    Failed(String),
}

/// How a failed request is to be understood.
pub(crate) enum Failure {
    Rpc { code: i32, message: String },
    Disconnected(String),
    Other(String),
}

pub(crate) fn classify(e: ServiceError) -> Failure {
    match e {
        ServiceError::McpError(d) => Failure::Rpc {
            code: d.code.0,
            message: d.message.into_owned(),
        },
        ServiceError::TransportClosed => Failure::Disconnected("the connection is closed".into()),
        ServiceError::TransportSend(e) => {
            Failure::Disconnected(format!("send failed: {}", error_text(&e)))
        }
        ServiceError::Cancelled { reason } => Failure::Disconnected(format!(
            "the request was cancelled ({})",
            reason.unwrap_or_else(|| "connection closing".into())
        )),
        other => Failure::Other(other.to_string()),
    }
}

/// Re-lists `kinds` (the other lists are copied from `previous`). `tools/list` must work
/// (method-not-found counts as no tools); the other lists are only asked for when the
/// server declares the capability, and any failure of theirs keeps the previous list and
/// is returned as a warning.
pub(crate) async fn discover(
    peer: &Peer<RoleClient>,
    config: &McpServerConfig,
    capabilities: &Value,
    kinds: &HashSet<ListKind>,
    previous: &Catalog,
) -> Result<(Catalog, Vec<String>), DiscoveryError> {
    let server = config.name.as_str();
    let mut catalog = previous.clone();
    let mut warnings = Vec::new();
    let lost = |what: &str, detail: String| {
        DiscoveryError::Lost(format!("connection lost during {what}: {detail}"))
    };
    if kinds.contains(&ListKind::Tools) {
        match peer.list_all_tools().await {
            Ok(tools) => {
                let mut seen = HashSet::new();
                let mut out: Vec<McpTool> = tools
                    .iter()
                    .filter_map(|t| serde_json::to_value(t).ok())
                    .filter_map(|v| McpTool::from_wire(server, config.auto_approve, &v))
                    .collect();
                out.sort_by(|a, b| a.name.cmp(&b.name));
                out.retain(|t| {
                    let fresh = seen.insert(t.qualified_name.clone());
                    if !fresh {
                        tracing::warn!(mcp_server = server, tool = %t.name,
                            "two tools map to the same name {}; keeping the first", t.qualified_name);
                    }
                    fresh
                });
                catalog.tools = out;
            }
            Err(e) => match classify(e) {
                Failure::Rpc { code, .. } if code == METHOD_NOT_FOUND => catalog.tools.clear(),
                Failure::Rpc { code, message } => {
                    return Err(DiscoveryError::Failed(format!(
                        "tools/list failed with error {code}: {message}"
                    )));
                }
                Failure::Disconnected(d) => return Err(lost("tools/list", d)),
                Failure::Other(d) => {
                    return Err(DiscoveryError::Failed(format!("tools/list failed: {d}")));
                }
            },
        }
    }
    if kinds.contains(&ListKind::Resources) && declares(capabilities, "resources") {
        match peer.list_all_resources().await {
            Ok(list) => {
                let mut out: Vec<McpResource> = list
                    .iter()
                    .filter_map(|r| serde_json::to_value(r).ok())
                    .filter_map(|v| McpResource::from_wire(server, &v))
                    .collect();
                out.sort_by(|a, b| a.uri.cmp(&b.uri));
                out.dedup_by(|a, b| a.uri == b.uri);
                catalog.resources = out;
            }
            Err(e) => match classify(e) {
                Failure::Rpc { code, .. } if code == METHOD_NOT_FOUND => catalog.resources.clear(),
                Failure::Disconnected(d) => return Err(lost("resources/list", d)),
                Failure::Rpc { code, message } => {
                    warnings.push(format!(
                        "resources/list failed with error {code}: {message}"
                    ));
                }
                Failure::Other(d) => warnings.push(format!("resources/list failed: {d}")),
            },
        }
        match peer.list_all_resource_templates().await {
            Ok(list) => {
                let mut out: Vec<McpResourceTemplate> = list
                    .iter()
                    .filter_map(|r| serde_json::to_value(r).ok())
                    .filter_map(|v| McpResourceTemplate::from_wire(server, &v))
                    .collect();
                out.sort_by(|a, b| a.uri_template.cmp(&b.uri_template));
                out.dedup_by(|a, b| a.uri_template == b.uri_template);
                catalog.templates = out;
            }
            Err(e) => match classify(e) {
                Failure::Rpc { code, .. } if code == METHOD_NOT_FOUND => catalog.templates.clear(),
                Failure::Disconnected(d) => return Err(lost("resources/templates/list", d)),
                Failure::Rpc { code, message } => warnings.push(format!(
                    "resources/templates/list failed with error {code}: {message}"
                )),
                Failure::Other(d) => warnings.push(format!("resources/templates/list failed: {d}")),
            },
        }
    } else if kinds.contains(&ListKind::Resources) {
        catalog.resources.clear();
        catalog.templates.clear();
    }
    if kinds.contains(&ListKind::Prompts) && declares(capabilities, "prompts") {
        match peer.list_all_prompts().await {
            Ok(list) => {
                let mut out: Vec<McpPrompt> = list
                    .iter()
                    .filter_map(|p| serde_json::to_value(p).ok())
                    .filter_map(|v| McpPrompt::from_wire(server, &v))
                    .collect();
                out.sort_by(|a, b| a.name.cmp(&b.name));
                out.dedup_by(|a, b| a.qualified_name == b.qualified_name);
                catalog.prompts = out;
            }
            Err(e) => match classify(e) {
                Failure::Rpc { code, .. } if code == METHOD_NOT_FOUND => catalog.prompts.clear(),
                Failure::Disconnected(d) => return Err(lost("prompts/list", d)),
                Failure::Rpc { code, message } => {
                    warnings.push(format!("prompts/list failed with error {code}: {message}"));
                }
                Failure::Other(d) => warnings.push(format!("prompts/list failed: {d}")),
            },
        }
    } else if kinds.contains(&ListKind::Prompts) {
        catalog.prompts.clear();
    }
    Ok((catalog, warnings))
}

/// An error with its sources (`a: b: c`, a source already contained in the text is not
/// repeated), without `rmcp`'s `Transport [<type name>] error: ` decoration.
pub(crate) fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = strip_transport_type(&e.to_string());
    let mut source = next_source(e);
    while let Some(s) = source {
        let part = strip_transport_type(&s.to_string());
        if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = next_source(s);
    }
    text
}

/// `source()`, also through the HTTP transport's client error (which does not expose its
/// cause as a source), so that "connection refused" and the like reach the message.
fn next_source<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    if let Some(StreamableHttpError::Client(inner)) =
        e.downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        return Some(inner);
    }
    e.source()
}

/// An initialize failure; a transport error is followed down to its root cause.
fn init_error_text(e: &rmcp::service::ClientInitializeError) -> String {
    if let rmcp::service::ClientInitializeError::TransportError { error, context } = e {
        format!("{} (when trying to {context})", error_text(error))
    } else {
        error_text(e)
    }
}

fn strip_transport_type(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("Transport [") {
        let Some(end) = rest[start..].find("] error: ") else {
            break;
        };
        out.push_str(&rest[..start]);
        rest = &rest[start + end + "] error: ".len()..];
    }
    out.push_str(rest);
    out
}

fn declares(capabilities: &Value, key: &str) -> bool {
    capabilities.get(key).is_some_and(|v| !v.is_null())
}
