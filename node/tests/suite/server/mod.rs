//! The node HTTP server in-process: real HTTP on 127.0.0.1:0, the scripted fake model
//! over HTTP, real tools in a temp dir.

mod api;
mod assessments;
mod browser;
mod caps;
mod ctx;
mod grpc;
mod grpc_operations;
mod grpc_reads;
mod hibernation;
mod judge;
mod login;
mod mcp_resources;
mod mcp_search;
mod mcp_skills;
mod memories;
mod metrics;
mod openapi;
mod permissions;
mod persistence;
mod personas;
mod plan;
mod plan_mode;
mod policies;
mod previews;
mod ratelimit;
mod rerank;
mod rounds;
mod skills;
mod store_tools;
mod streams;
mod usage;
mod users;
mod vision;
mod watches;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use turnstone_engine::{CreateOptions, Engine, EngineConfig, ManagerConfig};
use turnstone_llm::{CircuitBreaker, OpenAiConfig, OpenAiProvider, Resilient, RetryPolicy};
use turnstone_node::server::{self, Node, NodeOptions};
use turnstone_runtime::auth::{AUDIENCE_SERVER, Authenticator, ConfigToken, TokenRole};
use turnstone_testkit::FakeLlm;
use turnstone_tools::ToolRegistry;

pub const FULL: &str = "full-token-for-tests";
pub const READ: &str = "read-token-for-tests";

pub struct TestNode {
    pub llm: FakeLlm,
    pub node: Arc<Node>,
    pub base: String,
    pub default_ws: String,
    pub http: reqwest::Client,
    /// The watch runner, when the spec asked for one (stop it to "restart" the node).
    pub watch_runner: Option<turnstone_node::watch_runner::WatchRunner>,
    _dir: tempfile::TempDir,
    _server: tokio::task::JoinHandle<()>,
}

/// What [`TestNode::spawn`] starts.
#[derive(Default)]
pub struct Spec {
    /// The fake model served over HTTP (used unless `scripted`).
    pub llm: turnstone_testkit::FakeLlmConfig,
    /// Persist to this SQLite file.
    pub db: Option<std::path::PathBuf>,
    /// Default: auth on with [`TestNode::test_tokens`].
    pub auth: Option<Authenticator>,
    /// `node_id` and `model` are set by `spawn`.
    pub options: NodeOptions,
    pub manager: ManagerConfig,
    /// Use the zero-latency in-process scripted model instead of the HTTP fake.
    pub scripted: bool,
    /// Offer the `watch` tool and run the watch runner (needs `db`).
    pub watches: Option<turnstone_node::watch_runner::WatchRunnerConfig>,
    /// Use this model client instead (e.g. an Anthropic provider on a fake).
    pub provider: Option<Arc<dyn turnstone_llm::Provider>>,
    /// Changes the engine configuration; gets the HTTP fake's base URL.
    pub engine: Option<EngineTweak>,
}

/// A change to a test node's engine configuration (gets the HTTP fake's base URL).
pub type EngineTweak = Box<dyn FnOnce(&mut EngineConfig, &str) + Send>;

impl TestNode {
    pub async fn start() -> Self {
        Self::start_with_llm(turnstone_testkit::FakeLlmConfig::default()).await
    }

    /// [`TestNode::start`] with the fake model configured (e.g. slow streaming).
    pub async fn start_with_llm(config: turnstone_testkit::FakeLlmConfig) -> Self {
        Self::spawn(Spec {
            llm: config,
            ..Spec::default()
        })
        .await
    }

    /// A node persisting to the SQLite file `db` (reopen the same file to "restart").
    pub async fn start_persistent(db: &std::path::Path) -> Self {
        Self::spawn(Spec {
            db: Some(db.to_path_buf()),
            ..Spec::default()
        })
        .await
    }

    /// A node with its own authenticator (e.g. with a JWT secret, or disabled) and
    /// options changed by `tweak` (e.g. CORS origins).
    pub async fn start_with_auth(auth: Authenticator, tweak: fn(&mut NodeOptions)) -> Self {
        let mut options = NodeOptions::default();
        tweak(&mut options);
        Self::spawn(Spec {
            auth: Some(auth),
            options,
            ..Spec::default()
        })
        .await
    }

    /// The config tokens every test node accepts: [`FULL`] and [`READ`].
    pub fn test_tokens() -> Vec<ConfigToken> {
        vec![
            ConfigToken::new(FULL, TokenRole::Full),
            ConfigToken::new(READ, TokenRole::Read),
        ]
    }

    /// Starts a node as `spec` says (every constructor above goes through here).
    pub async fn spawn(spec: Spec) -> Self {
        let Spec {
            llm: llm_config,
            db,
            auth,
            options: base_options,
            manager,
            scripted,
            watches,
            provider,
            engine: tweak_engine,
        } = spec;
        let llm = FakeLlm::start_with(llm_config).await;
        let dir = tempfile::tempdir().unwrap();
        let provider: Arc<dyn turnstone_llm::Provider> = if let Some(p) = provider {
            p
        } else if scripted {
            Arc::new(turnstone_testkit::ScriptedProvider::new())
        } else {
            Arc::new(OpenAiProvider::new(OpenAiConfig::new(llm.base_url())).unwrap())
        };
        let policy = RetryPolicy {
            max_retries: 1,
            delays: vec![Duration::from_millis(10)],
            ..RetryPolicy::default()
        };
        let resilient = Resilient::new(provider, policy, Arc::new(CircuitBreaker::default()));
        let mut config = EngineConfig {
            model: "fake-model".into(),
            cwd: dir.path().to_path_buf(),
            node_id: "node-test".into(),
            ..EngineConfig::default()
        };
        if let Some(tweak) = tweak_engine {
            tweak(&mut config, &llm.base_url());
        }
        let engine = Engine::new(
            resilient,
            Arc::new(ToolRegistry::with_builtins().unwrap()),
            config,
        )
        .await;
        turnstone_engine::register_subagent(&engine).unwrap();
        turnstone_engine::register_plan_agent(&engine, None).unwrap();
        let auth = auth.unwrap_or_else(|| {
            Authenticator::new(true, None, Self::test_tokens(), AUDIENCE_SERVER)
        });
        let options = NodeOptions {
            node_id: "node-test".into(),
            model: "fake-model".into(),
            ..base_options
        };
        let node = match db {
            None => Node::new(engine, manager, auth, options),
            Some(path) => {
                let store = turnstone_store::StoreConfig::sqlite(path);
                let p = turnstone_node::persist::Persistence::open(&store, "node-test")
                    .await
                    .unwrap();
                // As the server binary: `ts_` API tokens come from the store.
                let auth = auth.with_api_tokens(Arc::new(
                    turnstone_node::server::users::StoreApiTokens(p.store.clone()),
                ));
                let node = Node::with_persistence(engine, manager, auth, options, p);
                turnstone_node::store_tools::register_for(&node).unwrap();
                node
            }
        };
        // As the server binary: the stored tool policies apply before any turn.
        server::policies::PolicyRegistry::install(&node, Vec::new())
            .await
            .unwrap();
        // open_preview fetches from test servers on 127.0.0.1: private space allowed.
        let web = turnstone_tools::WebOptions {
            allow_private_network: true,
            ..turnstone_tools::WebOptions::default()
        };
        server::previews::register(&node, &web).unwrap();
        let default_ws = node
            .create_workstream(CreateOptions {
                name: Some("default".into()),
                ..CreateOptions::default()
            })
            .unwrap()
            .id()
            .to_string();
        // As the server binary: what an earlier run hibernated is listed again.
        server::hibernation::restore_index(&node).await.unwrap();
        let watch_runner = match watches {
            Some(config) => {
                turnstone_node::watch_runner::WatchRunner::install(&node, config).unwrap()
            }
            None => None,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let served = node.clone();
        let server = tokio::spawn(async move {
            server::run(listener, served, std::future::pending())
                .await
                .unwrap();
        });
        Self {
            llm,
            node,
            base,
            default_ws,
            http: reqwest::Client::new(),
            watch_runner,
            _dir: dir,
            _server: server,
        }
    }

    /// The tools' working directory (a temp dir).
    /// Waits until the node's store writer has committed everything queued so far (the
    /// node persists: panics otherwise).
    pub async fn flush_store(&self) {
        let persistence = self.node.persistence.clone().expect("a persisting node");
        persistence
            .writer
            .flush()
            .await
            .expect("store writes committed");
    }

    pub fn cwd(&self) -> &std::path::Path {
        self._dir.path()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = self.http.get(self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.post_raw(path, body.to_string(), FULL).await
    }

    pub async fn post_raw(&self, path: &str, body: String, token: &str) -> (u16, Value) {
        let resp = self
            .http
            .post(self.url(path))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Opens an SSE stream.
    pub async fn sse(&self, path: &str, last_event_id: Option<u64>) -> SseClient {
        let mut req = self.http.get(self.url(path)).bearer_auth(FULL);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "SSE {path}");
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"),
            "content type"
        );
        SseClient {
            stream: Box::pin(resp.bytes_stream()),
            buf: String::new(),
        }
    }
}

/// One parsed SSE event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub data: Value,
}

impl SseEvent {
    pub fn kind(&self) -> &str {
        self.data["type"].as_str().unwrap_or("")
    }
}

pub struct SseClient {
    stream: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

impl SseClient {
    /// The next event (comments skipped), within 20 s.
    pub async fn next(&mut self) -> SseEvent {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(end) = self.buf.find("\r\n\r\n") {
                let frame: String = self.buf.drain(..end + 4).collect();
                let mut id = None;
                let mut data = None;
                for line in frame.split("\r\n") {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(v).expect("data is JSON"));
                    }
                }
                if let Some(data) = data {
                    return SseEvent { id, data };
                }
                continue;
            }
            let chunk = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .expect("SSE event within 20 s")
                .expect("stream still open")
                .expect("stream readable");
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Events until one of type `kind` (inclusive).
    pub async fn until(&mut self, kind: &str) -> Vec<SseEvent> {
        let mut out = Vec::new();
        loop {
            let e = self.next().await;
            let done = e.kind() == kind;
            out.push(e);
            if done {
                return out;
            }
        }
    }
}

pub fn kinds(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(SseEvent::kind).collect()
}

pub fn text_of(events: &[SseEvent]) -> String {
    events
        .iter()
        .filter(|e| e.kind() == "content")
        .filter_map(|e| e.data["text"].as_str())
        .collect()
}

/// A request with any method, `token` as bearer and an optional JSON body: status and JSON
/// reply (`null` when the reply is not JSON).
pub async fn call(
    t: &TestNode,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = t.http.request(method, t.url(path)).bearer_auth(token);
    if let Some(body) = body {
        req = req
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}
