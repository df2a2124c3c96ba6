//! Shared fixtures: node processes, a console on port 0, heartbeats and cluster events
//! written to the real Redis under a per-test prefix, an SSE reader.

mod accounts;
mod admin;
mod api;
mod browser;
mod cluster;
mod db;
mod events;
mod fake_node;
mod governance_admin;
mod grpc;
mod processes;
mod proxy;
mod python_sdk;
mod routes;
mod scheduler;
mod settings_admin;
mod usage_admin;
mod zombie;

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use processes::{Proc, workspace_binary};
use turnstone_console::{ConsoleConfig, NodeCredentials, Options, Running};
use turnstone_runtime::auth::{AUDIENCE_CONSOLE, Authenticator, ConfigToken, JwtSecret, TokenRole};

/// The JWT secret the console and the test nodes share.
pub const SECRET: &str = "console-tests-shared-secret-0123456789abcdef";
/// A full-access console token.
pub const TOKEN: &str = "console-full-token-for-tests";
/// A read-only console token.
pub const READ_TOKEN: &str = "console-read-token-for-tests";
/// A token the nodes accept directly (not the console).
pub const NODE_TOKEN: &str = "node-token-for-tests";
pub const REDIS_URL: &str = "redis://127.0.0.1:6379/0";

/// A unique Redis key prefix.
pub fn prefix() -> String {
    format!("t{}", turnstone_proto::ids::new_correlation_id())
}

pub async fn redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open(REDIS_URL)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("Redis on 127.0.0.1:6379 (scripts/services starts it)")
}

/// Writes the heartbeat a bridge would write (signed with the shared secret).
pub async fn heartbeat(prefix: &str, node_id: &str, url: &str, max_ws: u64) {
    let mut c = redis().await;
    let signed_at = turnstone_runtime::auth::jwt::unix_seconds(std::time::SystemTime::now());
    let sig =
        turnstone_runtime::auth::heartbeat::sign(&JwtSecret::new(SECRET), node_id, url, signed_at);
    let value = serde_json::json!({"server_url": url, "started": 1.0e9, "max_ws": max_ws,
        "signed_at": signed_at, "sig": sig});
    let _: () = redis::cmd("SET")
        .arg(format!("{prefix}:node:{node_id}"))
        .arg(value.to_string())
        .arg("EX")
        .arg(120)
        .query_async(&mut c)
        .await
        .unwrap();
}

pub async fn drop_heartbeat(prefix: &str, node_id: &str) {
    let mut c = redis().await;
    let _: i64 = redis::cmd("DEL")
        .arg(format!("{prefix}:node:{node_id}"))
        .query_async(&mut c)
        .await
        .unwrap();
}

/// Publishes on the cluster channel.
pub async fn publish(prefix: &str, event: &Value) {
    let mut c = redis().await;
    let _: i64 = redis::cmd("PUBLISH")
        .arg(format!("{prefix}:events:cluster"))
        .arg(event.to_string())
        .query_async(&mut c)
        .await
        .unwrap();
}

/// Pops everything queued on `key`.
pub async fn drain(key: &str) -> Vec<Value> {
    let mut c = redis().await;
    let items: Vec<String> = redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap();
    items
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect()
}

/// A real node: the `turnstone-server` process (its built-in scripted model, no
/// persistence, tools approved without asking) on a free loopback port, accepting the shared
/// JWT secret and [`NODE_TOKEN`]. It starts with one workstream, `default`.
pub struct NodeServer {
    pub url: String,
    pub node_id: String,
    pub default_ws: String,
    http: reqwest::Client,
    _proc: Proc,
    _dir: tempfile::TempDir,
}

impl NodeServer {
    pub async fn start(node_id: &str, version: &str, max_ws: usize) -> Self {
        Self::start_with(node_id, version, max_ws, &["--no-persistence"], &[]).await
    }

    /// A node with other storage flags (`storage`) and more environment (`env`).
    pub async fn start_with(
        node_id: &str,
        version: &str,
        max_ws: usize,
        storage: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = tokio::process::Command::new(workspace_binary("turnstone-server"));
        cmd.args(["--host", "127.0.0.1", "--port", "0", "--node-id", node_id])
            .args([
                "--model",
                "fake-model",
                "--max-workstreams",
                &max_ws.to_string(),
            ])
            .args(storage)
            .args(["--skip-permissions", "--log-level", "warn"])
            .arg("--cwd")
            .arg(dir.path())
            .current_dir(dir.path())
            // No developer config.toml (`~/.config/turnstone`) leaks in.
            .env("HOME", dir.path())
            .env("TURNSTONE_JWT_SECRET", SECRET)
            .env("TURNSTONE_AUTH_TOKEN", NODE_TOKEN)
            .env("TURNSTONE_ADVERTISED_VERSION", version);
        for var in [
            "TURNSTONE_AUTH_ENABLED",
            "TURNSTONE_NODE_ID",
            "TURNSTONE_BASE_URL",
            "TURNSTONE_CONFIG",
            "TURNSTONE_MODEL",
            "TURNSTONE_DB_BACKEND",
            "TURNSTONE_DB_PATH",
            "TURNSTONE_DB_URL",
        ] {
            cmd.env_remove(var);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut proc = Proc::spawn(cmd, dir.path().join("node.log"));
        let url = proc.line_after(" listening on ").await;
        let mut node = Self {
            url,
            node_id: node_id.into(),
            default_ws: String::new(),
            http: reqwest::Client::new(),
            _proc: proc,
            _dir: dir,
        };
        // The server makes its `default` workstream at start-up.
        node.default_ws = node
            .workstream_named("default")
            .await
            .expect("the node's default workstream");
        node
    }

    /// Creates a workstream directly on the node (not through the console); its id.
    pub async fn create_workstream(&self, name: &str) -> String {
        let r = self
            .http
            .post(format!("{}/v1/api/workstreams/new", self.url))
            .bearer_auth(NODE_TOKEN)
            .json(&serde_json::json!({"name": name}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "create {name}: {}", r.status());
        let body: Value = r.json().await.unwrap();
        body["ws_id"].as_str().unwrap().to_string()
    }

    /// Creates `n` more workstreams directly on the node.
    pub async fn add_workstreams(&self, n: usize) {
        for i in 0..n {
            self.create_workstream(&format!("extra-{i}")).await;
        }
    }

    /// The id of the node's workstream named `name`, if there is one.
    pub async fn workstream_named(&self, name: &str) -> Option<String> {
        workstream_named_at(&self.url, name).await
    }

    /// A workstream's history as the node reports it: the `history` event that opens its
    /// event stream.
    pub async fn history(&self, ws_id: &str) -> Vec<Value> {
        let r = self
            .http
            .get(format!("{}/v1/api/events?ws_id={ws_id}", self.url))
            .bearer_auth(NODE_TOKEN)
            .send()
            .await
            .unwrap();
        let mut sse = SseClient::new(r);
        let first = sse.until("history", |_| true).await;
        first["messages"].as_array().cloned().unwrap_or_default()
    }
}

/// The id of the workstream named `name` on the node at `url` (asked with [`NODE_TOKEN`]).
pub async fn workstream_named_at(url: &str, name: &str) -> Option<String> {
    let list: Value = reqwest::Client::new()
        .get(format!("{url}/v1/api/workstreams"))
        .bearer_auth(NODE_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    list["workstreams"]
        .as_array()?
        .iter()
        .find(|w| w["name"] == name)
        .and_then(|w| w["id"].as_str())
        .map(str::to_string)
}

/// A console in-process with fast discovery and polling.
pub struct TestConsole {
    /// Kept for its lifetime: dropping it stops the console.
    pub _running: Running,
    pub url: String,
    pub http: reqwest::Client,
}

impl TestConsole {
    pub async fn start(prefix: &str) -> Self {
        Self::start_with(prefix, |_| {}).await
    }

    pub async fn start_with(prefix: &str, tweak: impl FnOnce(&mut ConsoleConfig)) -> Self {
        Self::start_full(prefix, tweak, None).await
    }

    /// A console with storage (users, tokens, roles).
    pub async fn start_with_store(
        prefix: &str,
        store: std::sync::Arc<dyn turnstone_store::Store>,
    ) -> Self {
        Self::start_full(prefix, |_| {}, Some(store)).await
    }

    pub async fn start_full(
        prefix: &str,
        tweak: impl FnOnce(&mut ConsoleConfig),
        store: Option<std::sync::Arc<dyn turnstone_store::Store>>,
    ) -> Self {
        let mut config = ConsoleConfig {
            prefix: prefix.into(),
            poll_interval: Duration::from_millis(200),
            discovery_interval: Duration::from_millis(200),
            poll_timeout: Duration::from_secs(5),
            poll_jitter: false,
            ..ConsoleConfig::default()
        };
        tweak(&mut config);
        let auth = Authenticator::new(
            true,
            Some(JwtSecret::new(SECRET)),
            vec![
                ConfigToken::new(TOKEN, TokenRole::Full),
                ConfigToken::new(READ_TOKEN, TokenRole::Read),
            ],
            AUDIENCE_CONSOLE,
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let running = turnstone_console::start(
            Options {
                config,
                redis: turnstone_queue::RedisSettings::from_url(REDIS_URL),
                auth,
                credentials: NodeCredentials::new(Some(JwtSecret::new(SECRET)), None),
                store,
            },
            listener,
        )
        .await
        .unwrap();
        Self {
            url: running.url(),
            _running: running,
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    pub async fn get_as(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = self.http.get(self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.get_as(path, Some(TOKEN)).await
    }

    /// Any method, an optional JSON body and an optional bearer token.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Creates the user `name` with `role` (a built-in name or a role id) and signs in as
    /// them by password; their JWT.
    pub async fn user_jwt(&self, name: &str, role: &str) -> String {
        let password = "correct horse battery";
        let (code, body) = self
            .call(
                reqwest::Method::POST,
                "/v1/api/admin/users",
                Some(serde_json::json!({"username": name, "display_name": name,
                    "password": password, "role": role})),
                Some(TOKEN),
            )
            .await;
        assert_eq!(code, 201, "{body}");
        let (code, body) = self
            .call(
                reqwest::Method::POST,
                "/v1/api/auth/login",
                Some(serde_json::json!({"username": name, "password": password})),
                None,
            )
            .await;
        assert_eq!(code, 200, "{body}");
        body["jwt"].as_str().unwrap().to_string()
    }

    pub async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        let resp = self
            .http
            .post(self.url(path))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Waits until the console lists exactly these nodes, each polled at least once.
    pub async fn wait_for_nodes(&self, ids: &[&str]) {
        let mut want: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        want.sort();
        turnstone_testkit::assert_eventually!(
            {
                let (_, v) = self.get("/v1/api/cluster/nodes?sort=name").await;
                let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
                let got: Vec<String> = nodes
                    .iter()
                    .map(|n| n["node_id"].as_str().unwrap_or_default().to_string())
                    .collect();
                got == want
                    && nodes
                        .iter()
                        .all(|n| !n["last_seen"].is_null() || n["reachable"] == false)
            },
            "the console never listed {want:?}"
        );
    }

    pub async fn sse(&self, path: &str) -> SseClient {
        let resp = self
            .http
            .get(self.url(path))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "SSE {path}");
        SseClient::new(resp)
    }
}

/// Reads SSE frames (CRLF-framed as the original, or LF).
pub struct SseClient {
    stream: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
    /// Every byte received so far.
    pub raw: String,
}

impl SseClient {
    pub fn new(resp: reqwest::Response) -> Self {
        Self {
            stream: Box::pin(resp.bytes_stream()),
            buf: String::new(),
            raw: String::new(),
        }
    }

    /// The next frame's text (comments included), within 20 s.
    pub async fn next_frame(&mut self) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let end = self
                .buf
                .find("\r\n\r\n")
                .map(|i| (i, 4))
                .or_else(|| self.buf.find("\n\n").map(|i| (i, 2)));
            if let Some((i, n)) = end {
                let frame: String = self.buf.drain(..i + n).collect();
                return frame;
            }
            let chunk = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .expect("an SSE frame within 20 s")
                .expect("the stream is open")
                .unwrap();
            let text = String::from_utf8_lossy(&chunk).to_string();
            self.raw.push_str(&text);
            self.buf.push_str(&text);
        }
    }

    /// Whether the stream ends (EOF or error) within 5 s, skipping whatever still arrives.
    pub async fn ends(&mut self) -> bool {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Err(_) => return false,
                Ok(None | Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    /// The next `data:` event as JSON (comments skipped).
    pub async fn next(&mut self) -> Value {
        loop {
            let frame = self.next_frame().await;
            let data: Vec<&str> = frame
                .lines()
                .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
                .collect();
            if !data.is_empty() {
                return serde_json::from_str(&data.join("\n")).unwrap();
            }
        }
    }

    /// Reads events until one of type `kind` matching `pred`; returns it.
    pub async fn until(&mut self, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let e = self.next().await;
            if e["type"] == kind && pred(&e) {
                return e;
            }
        }
    }
}

/// Asserts an `(status, body)` answer is `status` with an `error` message containing `needle`.
pub fn assert_error(got: (u16, Value), status: u16, needle: &str) {
    assert_eq!(got.0, status, "{}", got.1);
    let message = got.1["error"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
}
