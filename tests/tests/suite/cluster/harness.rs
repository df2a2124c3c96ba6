//! Processes and Redis helpers for the cluster tests.
//!
//! Every test gets its own key prefix on the shared Redis (127.0.0.1:6379) — or a private
//! `redis-server` when it restarts Redis — and its own nodes and bridges on free ports.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use redis::AsyncCommands;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// Shared HS256 secret: nodes verify, bridges mint.
pub const SECRET: &str = "cluster-test-secret-0123456789abcdef0123456789";

pub fn binary(name: &str) -> PathBuf {
    turnstone_e2e::workspace_binary(name).unwrap()
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn unique_prefix(tag: &str) -> String {
    format!("t{tag}{:08x}", rand::random::<u32>())
}

/// A child process killed (SIGKILL) when dropped.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    /// Sends SIGTERM (a graceful stop).
    pub fn sigterm(&self) {
        if let Some(pid) = self.child.id() {
            let status = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .unwrap();
            assert!(status.success(), "kill -TERM {pid} failed");
        }
    }

    pub fn kill9(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }

    pub async fn wait_exit(&mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A `turnstone-server` on a free loopback port (or another local address) with its own
/// SQLite file.
pub struct NodeProc {
    pub proc: Option<Proc>,
    pub node_id: String,
    /// The address it binds (127.0.0.1 unless [`NodeProc::start_on`]).
    pub host: String,
    pub port: u16,
    pub url: String,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
    pub extra_env: Vec<(String, String)>,
    pub extra_args: Vec<String>,
}

impl NodeProc {
    /// The node's `/metrics` text (public, like the original's).
    pub async fn metrics(&self) -> String {
        let resp = self
            .http
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .expect("GET /metrics");
        assert!(
            resp.status().is_success(),
            "GET /metrics: {}",
            resp.status()
        );
        resp.text().await.expect("the metrics text")
    }

    pub async fn start(node_id: &str) -> Self {
        Self::start_with(node_id, Vec::new()).await
    }

    pub async fn start_with(node_id: &str, extra_env: Vec<(String, String)>) -> Self {
        Self::start_full(node_id, extra_env, Vec::new()).await
    }

    pub async fn start_full(
        node_id: &str,
        extra_env: Vec<(String, String)>,
        extra_args: Vec<String>,
    ) -> Self {
        Self::start_on("127.0.0.1", node_id, extra_env, extra_args).await
    }

    /// [`Self::start_full`] bound to `host` (a local address, e.g. a test veth's).
    pub async fn start_on(
        host: &str,
        node_id: &str,
        extra_env: Vec<(String, String)>,
        extra_args: Vec<String>,
    ) -> Self {
        let port = free_port();
        let mut n = Self {
            proc: None,
            node_id: node_id.to_string(),
            host: host.to_string(),
            port,
            url: format!("http://{host}:{port}"),
            dir: tempfile::tempdir().unwrap(),
            http: reqwest::Client::new(),
            extra_env,
            extra_args,
        };
        n.spawn().await;
        n
    }

    /// Starts the node process (again, after it exited: same port, same database).
    pub async fn spawn(&mut self) {
        let mut cmd = Command::new(binary("turnstone-server"));
        cmd.args([
            "--host",
            &self.host,
            "--port",
            &self.port.to_string(),
            "--node-id",
            &self.node_id,
            "--max-workstreams",
            "2000",
            "--log-level",
            "warn",
        ])
        .arg("--db-path")
        .arg(self.dir.path().join("node.db"))
        .arg("--cwd")
        .arg(self.dir.path())
        .env("TURNSTONE_JWT_SECRET", SECRET)
        .env_remove("TURNSTONE_AUTH_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd.args(&self.extra_args);
        let child = cmd.spawn().unwrap();
        self.proc = Some(Proc { child });
        // Generous: a debug build on a loaded 2-core machine (60 s).
        for _ in 0..1200 {
            if self
                .http
                .get(format!("{}/health", self.url))
                .send()
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("node {} did not come up", self.node_id);
    }

    pub fn kill9(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill9();
        }
    }

    pub async fn restart(&mut self) {
        self.kill9();
        self.spawn().await;
    }

    pub fn token(&self) -> String {
        mint_token()
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.post_as(&mint_token(), path, body).await
    }

    /// [`NodeProc::post`] with another bearer token.
    pub async fn post_as(&self, token: &str, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.url))
            .bearer_auth(mint_token())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Ground truth from the node itself: `turn_complete` events per correlation id, read
    /// from the node-wide stream (everything retained) up to the node's current position.
    pub async fn turns_by_correlation(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for v in self.node_events().await {
            if v["type"] == "turn_complete" {
                let cid = v["correlation_id"].as_str().unwrap_or_default().to_string();
                *counts.entry(cid).or_insert(0) += 1;
            }
        }
        counts
    }

    /// Every event the node retains on its node-wide stream, up to its current position.
    pub async fn node_events(&self) -> Vec<Value> {
        let resp = self
            .http
            .get(format!("{}/v1/api/events/node?from=0", self.url))
            .bearer_auth(mint_token())
            .send()
            .await
            .unwrap();
        let mut stream = resp.bytes_stream();
        let mut buf = String::new();
        let mut target = None;
        let mut last = 0u64;
        let mut events = Vec::new();
        loop {
            if let Some(t) = target
                && last >= t
            {
                return events;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .expect("node stream stalled")
                .expect("node stream ended")
                .unwrap();
            buf.push_str(&String::from_utf8_lossy(&chunk));
            for (id, v) in take_sse_frames(&mut buf) {
                if v["type"] == "node_hello" {
                    target = v["node_seq"].as_u64();
                    continue;
                }
                if let Some(i) = id {
                    last = last.max(i);
                }
                events.push(v);
            }
        }
    }
}

/// Removes the complete SSE frames from the front of `buf` and returns their `id` and JSON
/// `data` (frames without JSON data are skipped).
pub fn take_sse_frames(buf: &mut String) -> Vec<(Option<u64>, Value)> {
    let mut frames = Vec::new();
    while let Some(end) = buf.find("\r\n\r\n") {
        let frame: String = buf.drain(..end + 4).collect();
        let mut id = None;
        let mut data = String::new();
        for line in frame.split("\r\n") {
            if let Some(v) = line.strip_prefix("id: ") {
                id = v.trim().parse::<u64>().ok();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
        if let Ok(v) = serde_json::from_str::<Value>(&data) {
            frames.push((id, v));
        }
    }
    frames
}

/// Waits until Redis answers `PING` through `client` (10 s at most).
pub async fn wait_for_redis(what: &str, client: &redis::Client) {
    eventually(what, Duration::from_secs(10), || async {
        match client.get_multiplexed_async_connection().await {
            Ok(mut c) => redis::cmd("PING")
                .query_async::<String>(&mut c)
                .await
                .is_ok(),
            Err(e) => {
                eprintln!("{what}: not yet: {e}");
                false
            }
        }
    })
    .await;
}

/// A service token (the console's proxy identity): every scope, but it may not switch
/// approvals off (`auto_approve`), which needs the `tools.approve` permission by name.
pub fn mint_token() -> String {
    mint_service_token(turnstone_runtime::auth::NewClaims::console_proxy())
}

/// [`mint_token`] that may also switch approvals off (`tools.approve`), for tests whose
/// turns run auto-approved tools.
pub fn approver_token() -> String {
    use turnstone_runtime::auth::{APPROVALS_OFF_PERMISSION, NewClaims, Permissions};
    mint_service_token(
        NewClaims::console_proxy().with_permissions(Permissions::parse(APPROVALS_OFF_PERMISSION)),
    )
}

fn mint_service_token(claims: turnstone_runtime::auth::NewClaims) -> String {
    use turnstone_runtime::auth::{JwtSecret, mint};
    mint(&claims, &JwtSecret::new(SECRET), Duration::from_secs(3600)).unwrap()
}

/// A `turnstone-bridge` for one node, with short liveness timings.
pub struct BridgeProc {
    pub proc: Option<Proc>,
    pub args: Vec<String>,
    /// Extra environment for the process (e.g. the OTLP endpoint).
    pub env: Vec<(String, String)>,
    /// The network namespace it runs in (`ip netns exec`), if not the test's own.
    pub netns: Option<String>,
}

impl BridgeProc {
    pub async fn start(node: &NodeProc, redis_url: &str, prefix: &str) -> Self {
        Self::start_with(node, redis_url, prefix, &[]).await
    }

    pub async fn start_with(
        node: &NodeProc,
        redis_url: &str,
        prefix: &str,
        extra: &[&str],
    ) -> Self {
        let mut b = Self::configure(node, redis_url, prefix, extra);
        b.spawn();
        b
    }

    /// [`Self::start`] with extra environment variables.
    pub async fn start_with_env(
        node: &NodeProc,
        redis_url: &str,
        prefix: &str,
        env: Vec<(String, String)>,
    ) -> Self {
        let mut b = Self::configure(node, redis_url, prefix, &[]);
        b.env = env;
        b.spawn();
        b
    }

    fn configure(node: &NodeProc, redis_url: &str, prefix: &str, extra: &[&str]) -> Self {
        let mut args: Vec<String> = [
            "--server-url",
            &node.url,
            "--redis-url",
            redis_url,
            "--prefix",
            prefix,
            "--node-id",
            &node.node_id,
            "--heartbeat-ttl",
            "4",
            "--lease-ttl",
            "6",
            "--probe-interval-ms",
            "200",
            "--log-level",
            "warn",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // A flag in `extra` replaces the default's value.
        for pair in extra.windows(2).filter(|p| p[0].starts_with("--")) {
            if let Some(i) = args.iter().position(|a| a == pair[0]) {
                args.drain(i..i + 2);
            }
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        Self {
            proc: None,
            args,
            env: Vec::new(),
            netns: None,
        }
    }

    /// A bridge for `node` run inside the network namespace `netns`, reaching Redis at
    /// `redis_url` (an address routed into the namespace).
    pub fn start_in(netns: &str, node: &NodeProc, redis_url: &str, prefix: &str) -> Self {
        let mut b = Self::configure(node, redis_url, prefix, &[]);
        b.netns = Some(netns.to_string());
        b.spawn();
        b
    }

    pub fn spawn(&mut self) {
        let log = std::env::var("TURNSTONE_TEST_BRIDGE_LOG").ok();
        let stderr = match log {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap(),
            ),
            None => Stdio::null(),
        };
        let mut cmd = match &self.netns {
            // `ip netns exec` execs the program: the child's pid is the bridge's.
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns])
                    .arg(binary("turnstone-bridge"));
                c
            }
            None => Command::new(binary("turnstone-bridge")),
        };
        let child = cmd
            .args(&self.args)
            .env("TURNSTONE_JWT_SECRET", SECRET)
            .env_remove("TURNSTONE_AUTH_TOKEN")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        self.proc = Some(Proc { child });
    }

    pub fn kill9(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill9();
        }
    }

    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }
}

/// Redis access for a test: a connection and the key prefix.
#[derive(Clone)]
pub struct Mq {
    pub prefix: String,
    pub url: String,
    pub conn: redis::aio::MultiplexedConnection,
    pub client: redis::Client,
}

impl Mq {
    pub async fn shared(tag: &str) -> Self {
        Self::at("redis://127.0.0.1:6379/0", &unique_prefix(tag)).await
    }

    pub async fn at(url: &str, prefix: &str) -> Self {
        let client = redis::Client::open(url).unwrap();
        // The client's default response timeout (half a second) is too short for a test's
        // reads on a loaded two-core machine.
        let config =
            redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap();
        Self {
            prefix: prefix.to_string(),
            url: url.to_string(),
            conn,
            client,
        }
    }

    pub fn key(&self, rest: &str) -> String {
        format!("{}:{rest}", self.prefix)
    }

    pub async fn push(&mut self, queue: &str, msg: &Value) {
        let _: () = self
            .conn
            .rpush(self.key(queue), msg.to_string())
            .await
            .unwrap();
    }

    pub async fn push_raw(&mut self, queue: &str, raw: &str) {
        let _: () = self.conn.rpush(self.key(queue), raw).await.unwrap();
    }

    pub async fn owner(&mut self, ws_id: &str) -> Option<String> {
        self.conn
            .get(self.key(&format!("ws:{ws_id}")))
            .await
            .unwrap()
    }

    pub async fn alive(&mut self, node: &str) -> bool {
        self.conn
            .exists(self.key(&format!("node:{node}")))
            .await
            .unwrap()
    }

    pub async fn dead_letters(&mut self) -> Vec<Value> {
        let raw: Vec<String> = self.conn.lrange(self.key("dead"), 0, -1).await.unwrap();
        raw.iter()
            .map(|r| serde_json::from_str(r).unwrap())
            .collect()
    }

    /// Events of one workstream's stream, in order.
    pub async fn stream(&mut self, ws_id: &str) -> Vec<Value> {
        self.stream_entries(ws_id)
            .await
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    /// Entries of one workstream's stream: (entry id, event), in order.
    pub async fn stream_entries(&mut self, ws_id: &str) -> Vec<(String, Value)> {
        let entries: redis::streams::StreamRangeReply = self
            .conn
            .xrange_all(self.key(&format!("stream:{ws_id}")))
            .await
            .unwrap();
        entries
            .ids
            .iter()
            .filter_map(|e| Some((e.id.clone(), e.get::<String>("event")?)))
            .map(|(id, s)| (id, serde_json::from_str(&s).unwrap()))
            .collect()
    }

    /// Every stream entry of the prefix: (ws_id, event).
    pub async fn all_stream_events(&mut self) -> Vec<(String, Value)> {
        let pattern = self.key("stream:*");
        let mut keys: Vec<String> = Vec::new();
        let mut iter: redis::AsyncIter<String> = self.conn.scan_match(&pattern).await.unwrap();
        while let Some(k) = iter.next_item().await {
            keys.push(k.unwrap());
        }
        drop(iter);
        // SCAN may return a key more than once.
        keys.sort();
        keys.dedup();
        let mut out = Vec::new();
        for k in keys {
            let ws = k.rsplit(':').next().unwrap().to_string();
            for e in self.stream(&ws).await {
                out.push((ws.clone(), e));
            }
        }
        out
    }

    /// A pub/sub subscription to channels of this prefix (names without the prefix).
    pub async fn subscribe(&self, channels: &[&str]) -> redis::aio::PubSub {
        let mut ps = self.client.get_async_pubsub().await.unwrap();
        for c in channels {
            ps.subscribe(self.key(c)).await.unwrap();
        }
        ps
    }

    /// Creates a workstream through the queue and returns its id (from `ws_created`).
    pub async fn create_ws(&mut self, target: &str, extra: Value) -> String {
        self.try_create_ws(target, extra)
            .await
            .unwrap_or_else(|v| panic!("create failed: {v}"))
    }

    /// [`Mq::create_ws`] on a node that was just started or restarted: while its bridge
    /// notices the restart, its heartbeat can come and go, and a create directed at it is
    /// refused as "not alive" — retried here for up to 30 s (any other refusal fails).
    pub async fn create_ws_when_alive(&mut self, target: &str, extra: Value) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match self.try_create_ws(target, extra.clone()).await {
                Ok(ws) => return ws,
                Err(v)
                    if tokio::time::Instant::now() < deadline
                        && v["detail"]
                            .as_str()
                            .is_some_and(|d| d.ends_with("is not alive")) =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(v) => panic!("create failed: {v}"),
            }
        }
    }

    /// Creates a workstream through the queue: its id, or the `ack` that refused it.
    pub async fn try_create_ws(&mut self, target: &str, extra: Value) -> Result<String, Value> {
        let cid = format!("{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
        let mut ps = self.subscribe(&["events:global"]).await;
        let mut msg =
            json!({"type": "create_workstream", "correlation_id": cid, "target_node": target});
        if let (Some(o), Some(e)) = (msg.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                o.insert(k.clone(), v.clone());
            }
        }
        self.push("inbound", &msg).await;
        let mut s = ps.on_message();
        let v = next_matching(&mut s, "no ws_created", |v| {
            v["correlation_id"] == cid && (v["type"] == "ws_created" || v["type"] == "ack")
        })
        .await;
        if v["type"] != "ws_created" {
            return Err(v);
        }
        Ok(v["ws_id"].as_str().unwrap().to_string())
    }

    pub async fn cleanup(&mut self) {
        for pattern in [format!("{}:*", self.prefix), format!("{{{}:*", self.prefix)] {
            let mut keys: Vec<String> = Vec::new();
            {
                let mut iter: redis::AsyncIter<String> =
                    self.conn.scan_match(&pattern).await.unwrap();
                while let Some(k) = iter.next_item().await {
                    keys.push(k.unwrap());
                }
            }
            for k in keys {
                let _: () = self.conn.del(k).await.unwrap();
            }
        }
    }
}

/// The next pub/sub message (JSON) that `accept` takes; panics with `what` when none comes
/// within 20 s of the previous one.
pub async fn next_matching(
    s: &mut (impl futures::Stream<Item = redis::Msg> + Unpin),
    what: &str,
    accept: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), s.next())
            .await
            .expect(what)
            .unwrap();
        let v: Value = serde_json::from_str(&m.get_payload::<String>().unwrap()).unwrap();
        if accept(&v) {
            return v;
        }
    }
}

/// Waits (bounded) until `check` holds; panics with `what` otherwise.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A private redis-server with an append-only file fsynced on every write.
pub struct PrivateRedis {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<tokio::process::Child>,
    /// Addresses it listens on besides 127.0.0.1.
    also_bind: Vec<String>,
}

impl PrivateRedis {
    pub async fn start() -> Self {
        Self::start_binding(&[]).await
    }

    /// [`Self::start`] listening on `also_bind` (local addresses) besides 127.0.0.1.
    pub async fn start_binding(also_bind: &[&str]) -> Self {
        let mut r = Self {
            port: free_port(),
            dir: tempfile::tempdir().unwrap(),
            child: None,
            also_bind: also_bind.iter().map(|a| a.to_string()).collect(),
        };
        r.spawn().await;
        r
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub async fn spawn(&mut self) {
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(&self.also_bind)
            // The test's own addresses only; protected mode would refuse the non-loopback ones.
            .args(["--protected-mode", "no", "--save", ""])
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        self.child = Some(child);
        wait_for_redis(
            "redis up",
            &redis::Client::open(self.url().as_str()).unwrap(),
        )
        .await;
    }

    /// SIGKILL: whatever was acknowledged is in the AOF (fsynced on every write).
    pub async fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Stops it cleanly (`SHUTDOWN`: the AOF is complete).
    pub async fn stop(&mut self) {
        if let Ok(mut c) = redis::Client::open(self.url().as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
        {
            let _: Result<(), _> = redis::cmd("SHUTDOWN").query_async(&mut c).await;
        }
        if let Some(mut child) = self.child.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
            let _ = child.kill().await;
        }
    }
}
