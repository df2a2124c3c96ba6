//! [`McpManager`]: one supervisor task per server (connect with a timeout, discover, serve
//! refreshes and list changes, reconnect with a bounded backoff: [`supervisor`]), and the
//! shared snapshot of everything the ready servers offer, which the calls read.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

use parking_lot::{Mutex, RwLock};
use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{Map, Value};
use tokio::{
    sync::{mpsc, oneshot, watch},
    task::JoinHandle,
    time::Instant,
};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::{
    config::{McpServerConfig, McpTransportConfig, validate_server_name},
    connection::{Catalog, Client, Failure, StderrTail, classify},
    error::McpError,
    types::{
        McpCounts, McpPrompt, McpPromptResult, McpResource, McpResourceContents,
        McpResourceTemplate, McpTool, McpToolResult, ServerState, ServerStatus,
    },
};

mod supervisor;

use supervisor::supervise;

/// Longest error text kept in a status.
const ERROR_MAX_CHARS: usize = 256;

/// Tuning of the manager (the defaults suit a node).
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// Quiet period after a `list_changed` notification before re-listing (more
    /// notifications within it are folded into one refresh).
    pub debounce: Duration,
    /// First delay before reconnecting; doubles per failed attempt.
    pub backoff_initial: Duration,
    /// Longest delay between attempts.
    pub backoff_max: Duration,
    /// After this many consecutive failed reconnects a lost server is marked failed and its
    /// tools are withdrawn (attempts go on at `backoff_max`).
    pub max_reconnect_attempts: u32,
    /// Re-list every server this often even without notifications (`None`: never).
    pub refresh_interval: Option<Duration>,
    /// How long a call waits for a server that is connecting or reconnecting.
    pub call_wait: Duration,
    /// Which of the node's variables stdio servers get (the server's configured `env` is
    /// set on top).
    pub child_env: turnstone_tools::ChildEnv,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(250),
            backoff_initial: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            max_reconnect_attempts: 5,
            refresh_interval: None,
            call_wait: Duration::from_secs(15),
            child_env: turnstone_tools::ChildEnv::default(),
        }
    }
}

type Reply = oneshot::Sender<Result<(), McpError>>;

enum Command {
    Refresh(Option<Reply>),
    Reconnect(Option<Reply>),
}

impl Command {
    fn into_reply(self) -> Option<Reply> {
        match self {
            Command::Refresh(r) | Command::Reconnect(r) => r,
        }
    }
}

/// What the supervisor knows about a connected (or once connected) server.
#[derive(Default)]
struct Runtime {
    client: Option<Arc<Client>>,
    closed: Option<watch::Receiver<bool>>,
    stderr: StderrTail,
    catalog: Catalog,
    last_error: Option<String>,
    reconnects: u64,
    server_info: Option<String>,
}

struct Server {
    config: McpServerConfig,
    /// Set when the configuration is unusable (never connected).
    invalid: Option<String>,
    state: watch::Sender<ServerState>,
    runtime: Mutex<Runtime>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Server {
    fn runtime(&self) -> parking_lot::MutexGuard<'_, Runtime> {
        self.runtime.lock()
    }

    fn set_state(&self, state: ServerState) {
        self.state.send_replace(state);
    }

    /// Ready or reconnecting: its (last known) catalog is offered.
    fn offered(&self) -> bool {
        matches!(
            *self.state.borrow(),
            ServerState::Ready | ServerState::Reconnecting { .. }
        )
    }
}

#[derive(Default, PartialEq)]
struct Snapshot {
    tools: Vec<McpTool>,
    resources: Vec<McpResource>,
    templates: Vec<McpResourceTemplate>,
    prompts: Vec<McpPrompt>,
}

struct Inner {
    servers: Vec<Arc<Server>>,
    by_name: HashMap<String, usize>,
    snapshot: RwLock<Arc<Snapshot>>,
    tool_index: RwLock<Arc<HashMap<String, usize>>>,
    generation: watch::Sender<u64>,
    options: McpOptions,
    cancel: CancellationToken,
}

impl Inner {
    fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.read().clone()
    }

    /// Rebuilds the offered snapshot from the servers; bumps the generation when it changed.
    fn rebuild(&self) {
        let mut slot = self.snapshot.write();
        let mut next = Snapshot::default();
        for server in &self.servers {
            if !server.offered() {
                continue;
            }
            let rt = server.runtime();
            next.tools.extend(rt.catalog.tools.iter().cloned());
            next.resources.extend(rt.catalog.resources.iter().cloned());
            next.templates.extend(rt.catalog.templates.iter().cloned());
            next.prompts.extend(rt.catalog.prompts.iter().cloned());
        }
        if **slot == next {
            return;
        }
        let index: HashMap<String, usize> = next
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.qualified_name.clone(), i))
            .collect();
        *slot = Arc::new(next);
        *self.tool_index.write() = Arc::new(index);
        drop(slot);
        self.generation.send_modify(|g| *g += 1);
    }
}

/// The MCP client of a node: every configured server, connected in the background.
///
/// Dropping the manager (or [`McpManager::shutdown`]) stops every connection and child
/// process.
pub struct McpManager {
    inner: Arc<Inner>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    _guard: DropGuard,
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpManager")
            .field("servers", &self.inner.by_name.keys().collect::<Vec<_>>())
            .field("generation", &self.generation())
            .finish()
    }
}

impl McpManager {
    /// Starts one background connection per server and returns at once. Each server gets
    /// its own startup timeout; one failing or hanging server never delays the others or
    /// the caller. Must be called inside a Tokio runtime (without one, every server is
    /// reported as failed). Invalid names (see [`validate_server_name`]) and duplicates
    /// are reported as failed servers, never connected.
    pub fn start(configs: Vec<McpServerConfig>) -> Arc<Self> {
        Self::start_with(configs, McpOptions::default())
    }

    /// [`McpManager::start`] with explicit options.
    pub fn start_with(configs: Vec<McpServerConfig>, options: McpOptions) -> Arc<Self> {
        let runtime = tokio::runtime::Handle::try_current().ok();
        let mut configs = configs;
        configs.sort_by(|a, b| a.name.cmp(&b.name));
        let mut servers = Vec::with_capacity(configs.len());
        let mut receivers = Vec::with_capacity(configs.len());
        let mut by_name = HashMap::new();
        for config in configs {
            if by_name.contains_key(&config.name) {
                tracing::error!(mcp_server = %config.name, "MCP server configured twice; the first one is used");
                continue;
            }
            let mut invalid = validate_server_name(&config.name)
                .err()
                .map(|e| e.to_string());
            if invalid.is_none() && runtime.is_none() {
                invalid = Some("no Tokio runtime to run the connection on".into());
            }
            let state = match &invalid {
                Some(reason) => ServerState::Failed {
                    reason: reason.clone(),
                },
                None => ServerState::Connecting,
            };
            let (tx, rx) = mpsc::unbounded_channel();
            by_name.insert(config.name.clone(), servers.len());
            let last_error = invalid.clone();
            servers.push(Arc::new(Server {
                config,
                invalid,
                state: watch::channel(state).0,
                runtime: Mutex::new(Runtime {
                    last_error,
                    ..Runtime::default()
                }),
                commands: tx,
            }));
            receivers.push(rx);
        }
        let cancel = CancellationToken::new();
        let inner = Arc::new(Inner {
            servers,
            by_name,
            snapshot: RwLock::default(),
            tool_index: RwLock::default(),
            generation: watch::channel(0).0,
            options,
            cancel: cancel.clone(),
        });
        let mut tasks = Vec::new();
        if let Some(rt) = runtime {
            for (idx, rx) in receivers.into_iter().enumerate() {
                if inner.servers[idx].invalid.is_some() {
                    continue;
                }
                tasks.push(rt.spawn(supervise(inner.clone(), idx, rx)));
            }
        }
        Arc::new(Self {
            inner,
            tasks: Mutex::new(tasks),
            _guard: cancel.drop_guard(),
        })
    }

    /// The configured server names, sorted.
    pub fn server_names(&self) -> Vec<String> {
        self.inner
            .servers
            .iter()
            .map(|s| s.config.name.clone())
            .collect()
    }

    /// A server's configuration.
    pub fn server_config(&self, server: &str) -> Option<McpServerConfig> {
        self.server(server).ok().map(|s| s.config.clone())
    }

    /// The state of one server.
    pub fn server_state(&self, server: &str) -> Option<ServerState> {
        self.server(server).ok().map(|s| s.state.borrow().clone())
    }

    /// Per-server status for `/v1/api/_internal/mcp-status`.
    pub fn status(&self) -> BTreeMap<String, ServerStatus> {
        self.inner
            .servers
            .iter()
            .map(|s| {
                let state = s.state.borrow().clone();
                let rt = s.runtime();
                let offered =
                    matches!(state, ServerState::Ready | ServerState::Reconnecting { .. });
                let count = |n: usize| if offered { n } else { 0 };
                let (command, url) = match &s.config.transport {
                    McpTransportConfig::Stdio { command, args, .. } => {
                        let mut line = command.clone();
                        for a in args {
                            line.push(' ');
                            line.push_str(a);
                        }
                        (line, String::new())
                    }
                    McpTransportConfig::Http { url, .. } => (String::new(), url.clone()),
                };
                let status = ServerStatus {
                    connected: state == ServerState::Ready,
                    tools: count(rt.catalog.tools.len()),
                    resources: count(rt.catalog.resources.len()),
                    resource_templates: count(rt.catalog.templates.len()),
                    prompts: count(rt.catalog.prompts.len()),
                    error: rt
                        .last_error
                        .as_deref()
                        .map(|e| e.chars().take(ERROR_MAX_CHARS).collect())
                        .unwrap_or_default(),
                    transport: s.config.transport_name().to_owned(),
                    command,
                    url,
                    reconnects: rt.reconnects,
                    server_info: rt.server_info.clone(),
                    state,
                };
                (s.config.name.clone(), status)
            })
            .collect()
    }

    /// Totals for `/health` and metrics.
    pub fn counts(&self) -> McpCounts {
        let snap = self.inner.snapshot();
        let mut counts = McpCounts {
            servers: self.inner.servers.len(),
            tools: snap.tools.len(),
            resources: snap.resources.len() + snap.templates.len(),
            prompts: snap.prompts.len(),
            ..McpCounts::default()
        };
        for s in &self.inner.servers {
            match *s.state.borrow() {
                ServerState::Ready => counts.connected += 1,
                ServerState::Failed { .. } | ServerState::Reconnecting { .. } => counts.errors += 1,
                ServerState::Connecting => {}
            }
        }
        counts
    }

    /// Every offered tool (ready servers, and reconnecting ones with their last known
    /// list), ordered by server name, then tool name.
    pub fn tools_snapshot(&self) -> Vec<McpTool> {
        self.inner.snapshot().tools.clone()
    }

    /// One offered tool by its qualified name.
    pub fn tool(&self, qualified_name: &str) -> Option<McpTool> {
        let index = self.inner.tool_index.read().clone();
        let snap = self.inner.snapshot();
        index
            .get(qualified_name)
            .and_then(|&i| snap.tools.get(i))
            .filter(|t| t.qualified_name == qualified_name)
            .cloned()
    }

    /// Every offered concrete resource (by server, then URI).
    pub fn resources(&self) -> Vec<McpResource> {
        self.inner.snapshot().resources.clone()
    }

    /// Every offered resource template (by server, then template).
    pub fn resource_templates(&self) -> Vec<McpResourceTemplate> {
        self.inner.snapshot().templates.clone()
    }

    /// Every offered prompt (by server, then name).
    pub fn prompts(&self) -> Vec<McpPrompt> {
        self.inner.snapshot().prompts.clone()
    }

    /// A prompt by its qualified name `mcp__{server}__{prompt}`.
    pub fn prompt(&self, qualified_name: &str) -> Option<McpPrompt> {
        self.inner
            .snapshot()
            .prompts
            .iter()
            .find(|p| p.qualified_name == qualified_name)
            .cloned()
    }

    /// Which server a URI belongs to: an exact match of a listed resource, else the
    /// template with the longest static prefix (the part before the first `{`) that the URI
    /// starts with.
    pub fn resource_server(&self, uri: &str) -> Option<String> {
        let snap = self.inner.snapshot();
        if let Some(r) = snap.resources.iter().find(|r| r.uri == uri) {
            return Some(r.server.clone());
        }
        snap.templates
            .iter()
            .filter(|t| !t.static_prefix().is_empty() && uri.starts_with(t.static_prefix()))
            .max_by_key(|t| t.static_prefix().len())
            .map(|t| t.server.clone())
    }

    /// Increases on every change of what is offered (tools, resources, templates,
    /// prompts). Re-read the snapshot when it moved.
    pub fn generation(&self) -> u64 {
        *self.inner.generation.borrow()
    }

    /// A receiver that sees every [`McpManager::generation`] change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    /// Calls a tool by its qualified name. `args` must be a JSON object (or null for none).
    /// The server's answer — also one with `isError` — is a result; a JSON-RPC error, a
    /// timeout or a broken connection is an [`McpError`] (after a broken connection the
    /// server is reconnected in the background).
    pub async fn call_tool(
        &self,
        qualified_name: &str,
        args: Value,
    ) -> Result<McpToolResult, McpError> {
        let tool = self
            .tool(qualified_name)
            .ok_or_else(|| McpError::UnknownTool(qualified_name.to_owned()))?;
        let arguments = object_arguments(qualified_name, args)?;
        let server = self.server(&tool.server)?;
        let operation = format!("tools/call '{}'", tool.name);
        let client = self.ready_client(server, &operation).await?;
        let mut params = CallToolRequestParams::new(tool.name.clone());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let answer = tokio::time::timeout(server.config.call_timeout, client.call_tool(params))
            .await
            .map_err(|_| timeout_error(server, &operation))?;
        match answer {
            Ok(result) => Ok(McpToolResult::from_wire(&to_json(
                server, &operation, &result,
            )?)),
            Err(e) => Err(self.failure(server, &operation, classify(e)).await),
        }
    }

    /// Reads a resource from a server (`resources/read`).
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<McpResourceContents, McpError> {
        let server = self.server(server)?;
        let operation = format!("resources/read '{uri}'");
        let client = self.ready_client(server, &operation).await?;
        let answer = tokio::time::timeout(
            server.config.call_timeout,
            client.read_resource(ReadResourceRequestParams::new(uri)),
        )
        .await
        .map_err(|_| timeout_error(server, &operation))?;
        match answer {
            Ok(result) => Ok(McpResourceContents::from_wire(&to_json(
                server, &operation, &result,
            )?)),
            Err(e) => Err(self.failure(server, &operation, classify(e)).await),
        }
    }

    /// Gets a prompt (`prompts/get`). `args` is an object (or null); values that are not
    /// strings are sent as their JSON text.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        args: Value,
    ) -> Result<McpPromptResult, McpError> {
        let srv = self.server(server)?;
        let operation = format!("prompts/get '{name}'");
        let client = self.ready_client(srv, &operation).await?;
        if !srv.runtime().catalog.prompts.iter().any(|p| p.name == name) {
            return Err(McpError::UnknownPrompt {
                server: server.to_owned(),
                prompt: name.to_owned(),
            });
        }
        let arguments = object_arguments(&format!("prompt '{name}'"), args)?.map(|m| {
            m.into_iter()
                .map(|(k, v)| match v {
                    Value::String(s) => (k, Value::String(s)),
                    other => (k, Value::String(other.to_string())),
                })
                .collect::<Map<String, Value>>()
        });
        let mut params = GetPromptRequestParams::new(name);
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let answer = tokio::time::timeout(srv.config.call_timeout, client.get_prompt(params))
            .await
            .map_err(|_| timeout_error(srv, &operation))?;
        match answer {
            Ok(result) => Ok(McpPromptResult::from_wire(&to_json(
                srv, &operation, &result,
            )?)),
            Err(e) => Err(self.failure(srv, &operation, classify(e)).await),
        }
    }

    /// Re-lists one server (`Some`) or all (`None`) now; a disconnected or failed server is
    /// reconnected instead (which ends in a full rediscovery). Waits for the outcome
    /// (bounded by each server's startup timeout); the first failure is returned.
    pub async fn refresh(&self, server: Option<&str>) -> Result<(), McpError> {
        self.command_all(server, Command::Refresh).await
    }

    /// Drops the connection of one server (`Some`) or all (`None`) and connects again, then
    /// rediscovers everything. Waits for the outcome like [`McpManager::refresh`].
    pub async fn reconnect(&self, server: Option<&str>) -> Result<(), McpError> {
        self.command_all(server, Command::Reconnect).await
    }

    /// Stops every connection and child process and waits (bounded) for the supervisors.
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut *self.tasks.lock());
        for task in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }

    async fn command_all(
        &self,
        server: Option<&str>,
        make: fn(Option<Reply>) -> Command,
    ) -> Result<(), McpError> {
        if self.inner.cancel.is_cancelled() {
            return Err(McpError::ShutDown);
        }
        let targets: Vec<&Arc<Server>> = match server {
            Some(name) => vec![self.server(name)?],
            None => self.inner.servers.iter().collect(),
        };
        let mut pending = Vec::new();
        let mut first_error = None;
        for s in targets {
            if let Some(reason) = &s.invalid {
                first_error.get_or_insert(McpError::NotConnected {
                    server: s.config.name.clone(),
                    state: format!("failed: {reason}"),
                });
                continue;
            }
            let (tx, rx) = oneshot::channel();
            if s.commands.send(make(Some(tx))).is_err() {
                first_error.get_or_insert(McpError::ShutDown);
                continue;
            }
            pending.push((s, rx));
        }
        for (s, rx) in pending {
            // A connection attempt or a re-listing is bounded by the startup timeout; the
            // command may first wait for one already under way.
            let bound = s.config.startup_timeout * 2 + Duration::from_secs(2);
            let outcome = match tokio::time::timeout(bound, rx).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err(McpError::ShutDown),
                Err(_) => Err(McpError::Timeout {
                    server: s.config.name.clone(),
                    operation: "refresh".into(),
                    secs: bound.as_secs(),
                }),
            };
            if let Err(e) = outcome {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>, McpError> {
        self.inner
            .by_name
            .get(name)
            .and_then(|&i| self.inner.servers.get(i))
            .ok_or_else(|| McpError::UnknownServer(name.to_owned()))
    }

    /// The live client of a server; waits (bounded) while it connects or reconnects.
    async fn ready_client(
        &self,
        server: &Server,
        operation: &str,
    ) -> Result<Arc<Client>, McpError> {
        let wait = self.inner.options.call_wait;
        let deadline = Instant::now() + wait;
        let mut rx = server.state.subscribe();
        loop {
            if self.inner.cancel.is_cancelled() {
                return Err(McpError::ShutDown);
            }
            let state = rx.borrow_and_update().clone();
            match &state {
                ServerState::Ready => {
                    if let Some(client) = server.runtime().client.clone() {
                        return Ok(client);
                    }
                }
                ServerState::Failed { .. } => {
                    return Err(McpError::NotConnected {
                        server: server.config.name.clone(),
                        state: format!(
                            "{}; retried in the background, or reconnect now with /mcp refresh {}",
                            state.describe(),
                            server.config.name
                        ),
                    });
                }
                ServerState::Connecting | ServerState::Reconnecting { .. } => {}
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(McpError::ShutDown),
                Err(_) => {
                    let state = server.state.borrow().describe();
                    let last = server.runtime().last_error.clone();
                    return Err(McpError::NotConnected {
                        server: server.config.name.clone(),
                        state: match last {
                            Some(e) => format!(
                                "still {state} after waiting {}s for {operation}; last error: {e}",
                                wait.as_secs()
                            ),
                            None => format!(
                                "still {state} after waiting {}s for {operation}",
                                wait.as_secs()
                            ),
                        },
                    });
                }
            }
        }
    }

    /// Turns a failed request into an error; a broken connection also makes sure the
    /// supervisor reconnects.
    async fn failure(&self, server: &Server, operation: &str, failure: Failure) -> McpError {
        match failure {
            Failure::Rpc { code, message } => McpError::Server {
                server: server.config.name.clone(),
                operation: operation.to_owned(),
                code,
                message,
            },
            Failure::Disconnected(detail) => {
                let (closed, stderr) = {
                    let rt = server.runtime();
                    (
                        rt.closed.as_ref().is_none_or(|c| *c.borrow()),
                        rt.stderr.clone(),
                    )
                };
                if !closed {
                    // The transport still looks open (an HTTP send failed): reconnect.
                    let _ = server.commands.send(Command::Reconnect(None));
                }
                let mut detail = if closed {
                    "the server closed the connection".to_owned()
                } else {
                    detail
                };
                if let Some(line) = stderr.last_line().await {
                    detail.push_str(&format!(" (stderr: {line})"));
                }
                McpError::Disconnected {
                    server: server.config.name.clone(),
                    operation: operation.to_owned(),
                    detail,
                }
            }
            Failure::Other(detail) => McpError::Protocol {
                server: server.config.name.clone(),
                operation: operation.to_owned(),
                detail,
            },
        }
    }
}

fn object_arguments(target: &str, args: Value) -> Result<Option<Map<String, Value>>, McpError> {
    match args {
        Value::Object(m) => Ok(Some(m)),
        Value::Null => Ok(None),
        other => Err(McpError::InvalidArguments {
            target: target.to_owned(),
            reason: format!(
                "expected a JSON object, got {}",
                match other {
                    Value::Bool(_) => "a boolean",
                    Value::Number(_) => "a number",
                    Value::String(_) => "a string",
                    _ => "an array",
                }
            ),
        }),
    }
}

fn timeout_error(server: &Server, operation: &str) -> McpError {
    McpError::Timeout {
        server: server.config.name.clone(),
        operation: operation.to_owned(),
        secs: server.config.call_timeout.as_secs().max(1),
    }
}

fn to_json<T: serde::Serialize>(
    server: &Server,
    operation: &str,
    v: &T,
) -> Result<Value, McpError> {
    serde_json::to_value(v).map_err(|e| McpError::Protocol {
        server: server.config.name.clone(),
        operation: operation.to_owned(),
        detail: e.to_string(),
    })
}
