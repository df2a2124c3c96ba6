//! Queue-hop benchmark of the bridge: what a message pays for travelling through Redis and
//! `turnstone-bridge` instead of going to the node over HTTP.
//!
//! `cargo bench -p turnstone-bridge --bench queue_hop` runs the full measurement against the
//! release binaries; without the `--bench` argument (`cargo test --benches`) it runs tiny
//! counts against the debug binaries so the bench never rots. Either way the binaries come
//! from the profile directory of this bench's own target dir: build them first with
//! `cargo build [--release] --bins -p turnstone-node -p turnstone-bridge`.
//!
//! Everything is a real process on 127.0.0.1: a private `redis-server` on a free port (no
//! persistence), `turnstone-server` (built-in zero-latency scripted model, no persistence,
//! JWT auth) and `turnstone-bridge` (JWT minted from the same secret). Measures, in one run:
//!
//! 1. baseline A: raw Redis `RPUSH` → `BLPOP` round trip (the physical bound of a queue hop),
//!    and the rate of one sequential `BLPOP` consumer;
//! 2. baseline B: `POST /v1/api/send` → accepted, and → `turn_complete` seen on the node's
//!    `/v1/api/events/node` stream;
//! 3. through one bridge: `RPUSH` of a `send` → its `ack` on `{p}:events:{ws}`, and →
//!    `turn_complete` on the same channel. Samples of 1–3 are interleaved (A, B, C, A, B, C…)
//!    so load from other processes hits all of them alike;
//! 4. throughput, closed loop over many workstreams (a busy workstream refuses a second
//!    send): direct HTTP, one bridge, and four nodes with four bridges (shared queue, then
//!    each owner's directed queue);
//! 5. the CPU time each process (load generator, Redis, node, bridge) used per send in the
//!    direct and the one-bridge closed loops, read from `/proc/<pid>/stat`: on a machine
//!    where the processes share the cores, throughput is bound by their sum, and a
//!    process's own bound is the rate one core of its own would sustain (1 / its CPU per
//!    send).
//!
//! Method and results are recorded in `docs/benchmarks.md`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures::StreamExt;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use turnstone_runtime::auth::{JwtSecret, NewClaims, mint};
use turnstone_testkit::cpu_seconds;

/// Shared HS256 secret: nodes verify, bridges and this client mint.
const SECRET: &str = "queue-hop-bench-secret-0123456789abcdef0123456789";
const PREFIX: &str = "qhop";
const MESSAGE: &str = "hello from the queue-hop benchmark";
/// Any single wait for an answer or an event.
const WAIT: Duration = Duration::from_secs(30);
/// Turns after which a workstream's history is cleared (so requests stay small).
const CLEAR_EVERY: usize = 25;

/// Sends refused as `busy` (retried with a new correlation id); should stay 0.
static BUSY: AtomicU64 = AtomicU64::new(0);

struct Sizes {
    warmup: usize,
    /// Interleaved A/B/C latency iterations.
    latency: usize,
    /// Messages through the raw Redis consumer for its rate.
    redis_messages: usize,
    /// Workstreams × turns for direct HTTP and one bridge.
    one: (usize, usize),
    /// Workstreams × turns for four bridges.
    four: (usize, usize),
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let sizes = if full {
        Sizes {
            warmup: 100,
            latency: 2_000,
            redis_messages: 50_000,
            one: (200, 30),
            four: (400, 15),
        }
    } else {
        Sizes {
            warmup: 3,
            latency: 10,
            redis_messages: 200,
            one: (4, 3),
            four: (8, 2),
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot build runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = rt.block_on(run(sizes, full));
    rt.shutdown_timeout(Duration::from_secs(2));
    if let Err(e) = result {
        eprintln!("queue_hop bench failed: {e:#}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------
// Processes

/// The binary `name` next to this bench's profile directory (`<target>/<profile>/name`).
fn binary(name: &str, full: bool) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow!("{} is not in a target dir", exe.display()))?;
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if path.is_file() {
        return Ok(path);
    }
    bail!(
        "{} is missing: build it first with `cargo build{} --bins -p turnstone-node -p turnstone-bridge` (same CARGO_TARGET_DIR)",
        path.display(),
        if full { " --release" } else { "" }
    )
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A child process, SIGKILLed when dropped.
struct Proc {
    child: Child,
}

impl Proc {
    fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

fn spawn(cmd: &mut Command) -> Result<Proc> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    Ok(Proc { child })
}

/// Polls `check` every 20 ms for up to `limit`.
async fn wait_until<F, Fut>(what: &str, limit: Duration, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        if Instant::now() >= deadline {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

struct RedisProc {
    proc: Proc,
    url: String,
    client: redis::Client,
}

async fn start_redis(dir: &Path) -> Result<RedisProc> {
    let port = free_port()?;
    let proc = spawn(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(dir),
    )
    .context("starting redis-server (is it installed?)")?;
    let url = format!("redis://127.0.0.1:{port}/0");
    let client = redis::Client::open(url.as_str())?;
    wait_until("redis-server", Duration::from_secs(10), || async {
        match client.get_multiplexed_async_connection().await {
            Ok(mut c) => redis::cmd("PING")
                .query_async::<String>(&mut c)
                .await
                .is_ok(),
            Err(_) => false,
        }
    })
    .await?;
    Ok(RedisProc { proc, url, client })
}

struct NodeProc {
    proc: Proc,
    id: String,
    url: String,
    _dir: tempfile::TempDir,
}

async fn start_node(id: &str, http: &Http, full: bool) -> Result<NodeProc> {
    let port = free_port()?;
    let dir = tempfile::tempdir()?;
    let proc = spawn(
        Command::new(binary("turnstone-server", full)?)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--node-id", id, "--max-workstreams", "100000"])
            .args(["--no-persistence", "--log-level", "warn"])
            .arg("--cwd")
            .arg(dir.path())
            .env("TURNSTONE_JWT_SECRET", SECRET)
            .env_remove("TURNSTONE_AUTH_TOKEN")
            .env_remove("TURNSTONE_BASE_URL"),
    )?;
    let url = format!("http://127.0.0.1:{port}");
    wait_until(&format!("node {id}"), Duration::from_secs(20), || async {
        http.client
            .get(format!("{url}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await?;
    Ok(NodeProc {
        proc,
        id: id.to_string(),
        url,
        _dir: dir,
    })
}

struct BridgeProc {
    proc: Proc,
    metrics_url: String,
}

async fn start_bridge(
    node: &NodeProc,
    redis: &RedisProc,
    conn: &MultiplexedConnection,
    full: bool,
) -> Result<BridgeProc> {
    let metrics_port = free_port()?;
    let proc = spawn(
        Command::new(binary("turnstone-bridge", full)?)
            .args(["--server-url", &node.url, "--redis-url", &redis.url])
            .args(["--prefix", PREFIX, "--node-id", &node.id])
            .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
            .args(["--log-level", "warn"])
            .env("TURNSTONE_JWT_SECRET", SECRET)
            .env_remove("TURNSTONE_AUTH_TOKEN")
            .env_remove("TURNSTONE_REDIS_URL"),
    )?;
    let heartbeat = format!("{PREFIX}:node:{}", node.id);
    wait_until(
        &format!("bridge of {}", node.id),
        Duration::from_secs(20),
        || {
            let mut c = conn.clone();
            let key = heartbeat.clone();
            async move {
                let r: redis::RedisResult<bool> = c.exists(key).await;
                r.unwrap_or(false)
            }
        },
    )
    .await?;
    Ok(BridgeProc {
        proc,
        metrics_url: format!("http://127.0.0.1:{metrics_port}/metrics"),
    })
}

// ---------------------------------------------------------------------------------------
// Clients

#[derive(Clone)]
struct Http {
    client: reqwest::Client,
    token: Arc<str>,
}

impl Http {
    fn new() -> Result<Self> {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1_024)
            .pool_idle_timeout(Duration::from_secs(300))
            .build()?;
        let token = mint(
            &NewClaims::console_proxy(),
            &JwtSecret::new(SECRET),
            Duration::from_secs(4 * 3600),
        )
        .map_err(|e| anyhow!("minting a token: {e}"))?;
        Ok(Self {
            client,
            token: token.into(),
        })
    }

    async fn post(&self, url: &str, body: &Value) -> Result<Value> {
        let resp = self
            .client
            .post(url)
            .bearer_auth(&*self.token)
            .json(body)
            .send()
            .await?;
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("POST {url}: {status} {body}");
        }
        Ok(body)
    }

    /// `POST /v1/api/send`: `true` when accepted, `false` when the workstream was busy.
    async fn send(&self, base: &str, ws_id: &str, cid: &str) -> Result<bool> {
        let body = self
            .post(
                &format!("{base}/v1/api/send"),
                &json!({"ws_id": ws_id, "message": MESSAGE, "correlation_id": cid}),
            )
            .await?;
        match body["status"].as_str() {
            Some("ok") => Ok(true),
            Some("busy") => Ok(false),
            _ => bail!("send refused: {body}"),
        }
    }

    async fn clear(&self, base: &str, ws_id: &str) -> Result<()> {
        self.post(
            &format!("{base}/v1/api/command"),
            &json!({"ws_id": ws_id, "command": "/clear"}),
        )
        .await?;
        Ok(())
    }

    /// One counter of a bridge's `/metrics`.
    async fn metric(&self, url: &str, name: &str) -> Result<f64> {
        let text = self.client.get(url).send().await?.text().await?;
        text.lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("{name} not in {url}"))
    }
}

static NEXT_CID: AtomicU64 = AtomicU64::new(0);

fn next_cid() -> String {
    format!("qh{:09}", NEXT_CID.fetch_add(1, Ordering::Relaxed))
}

/// Who waits for which correlation id: the router tasks fill in the moment an `ack` or a
/// `turn_complete` arrived.
#[derive(Default)]
struct Waiters(Mutex<HashMap<String, Waiter>>);

struct Waiter {
    ack: Option<oneshot::Sender<(Instant, bool)>>,
    done: Option<oneshot::Sender<Instant>>,
}

struct Pending {
    ack: oneshot::Receiver<(Instant, bool)>,
    done: oneshot::Receiver<Instant>,
}

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiter>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self, cid: &str) -> Pending {
        let (ack_tx, ack) = oneshot::channel();
        let (done_tx, done) = oneshot::channel();
        self.lock().insert(
            cid.to_string(),
            Waiter {
                ack: Some(ack_tx),
                done: Some(done_tx),
            },
        );
        Pending { ack, done }
    }

    fn forget(&self, cid: &str) {
        self.lock().remove(cid);
    }

    /// The ack and the turn's events take different paths through the bridge, so either
    /// may come first: a waiter leaves the map once both came (or a refusing ack, after
    /// which no turn follows).
    fn ack(&self, cid: &str, ok: bool, at: Instant) {
        let mut map = self.lock();
        let Some(w) = map.get_mut(cid) else {
            return;
        };
        if let Some(tx) = w.ack.take() {
            let _ = tx.send((at, ok));
        }
        if !ok || w.done.is_none() {
            map.remove(cid);
        }
    }

    fn done(&self, cid: &str, at: Instant) {
        let mut map = self.lock();
        let Some(w) = map.get_mut(cid) else {
            return;
        };
        if let Some(tx) = w.done.take() {
            let _ = tx.send(at);
        }
        // Direct HTTP sends wait for no ack (their receiver is gone).
        if w.ack.as_ref().is_none_or(|tx| tx.is_closed()) {
            map.remove(cid);
        }
    }
}

async fn recv<T>(rx: oneshot::Receiver<T>, what: &str) -> Result<T> {
    match tokio::time::timeout(WAIT, rx).await {
        Err(_) => bail!("no {what} within {WAIT:?}"),
        Ok(Err(_)) => bail!("{what}: the router stopped"),
        Ok(Ok(v)) => Ok(v),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Follows the node-wide stream; every `turn_complete` completes its waiter. Returns once
/// the stream is open (the node subscribes before it answers).
async fn follow_node(http: &Http, base: &str, waiters: Arc<Waiters>) -> Result<JoinHandle<()>> {
    let resp = http
        .client
        .get(format!("{base}/v1/api/events/node"))
        .bearer_auth(&*http.token)
        .send()
        .await?;
    if !resp.status().is_success() {
        bail!("GET /v1/api/events/node: {}", resp.status());
    }
    let mut stream = resp.bytes_stream();
    Ok(tokio::spawn(async move {
        let mut buf: Vec<u8> = Vec::new();
        while let Some(Ok(chunk)) = stream.next().await {
            let at = Instant::now();
            buf.extend_from_slice(&chunk);
            while let Some(end) = find(&buf, b"\r\n\r\n") {
                let frame: Vec<u8> = buf.drain(..end + 4).collect();
                for line in frame.split(|b| *b == b'\n') {
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    let Some(data) = line.strip_prefix(b"data: ") else {
                        continue;
                    };
                    if find(data, b"turn_complete").is_none() {
                        continue;
                    }
                    let Ok(v) = serde_json::from_slice::<Value>(data) else {
                        continue;
                    };
                    if v["type"] == "turn_complete"
                        && let Some(cid) = v["correlation_id"].as_str()
                    {
                        waiters.done(cid, at);
                    }
                }
            }
        }
    }))
}

/// Subscribes to `channels`; every `ack` and `turn_complete` completes its waiter.
async fn follow_pubsub(
    client: &redis::Client,
    channels: Vec<String>,
    waiters: Arc<Waiters>,
) -> Result<JoinHandle<()>> {
    let mut ps = client.get_async_pubsub().await?;
    for chunk in channels.chunks(256) {
        ps.subscribe(chunk).await?;
    }
    let mut stream = ps.into_on_message();
    Ok(tokio::spawn(async move {
        while let Some(msg) = stream.next().await {
            let at = Instant::now();
            let data = msg.get_payload_bytes();
            if find(data, b"\"ack\"").is_none() && find(data, b"turn_complete").is_none() {
                continue;
            }
            let Ok(v) = serde_json::from_slice::<Value>(data) else {
                continue;
            };
            let Some(cid) = v["correlation_id"].as_str() else {
                continue;
            };
            match v["type"].as_str() {
                Some("ack") => waiters.ack(cid, v["status"] == "ok", at),
                Some("turn_complete") => waiters.done(cid, at),
                _ => {}
            }
        }
    }))
}

fn inbound_shared() -> String {
    format!("{PREFIX}:inbound")
}

fn inbound_directed(node: &str) -> String {
    format!("{PREFIX}:inbound:{node}")
}

fn ws_channel(ws_id: &str) -> String {
    format!("{PREFIX}:events:{ws_id}")
}

/// Creates `count` workstreams through the shared queue, `create_workstream` with
/// `target_node` round-robin over `nodes`; returns (ws_id, owner node index).
async fn create_via_queue(
    redis: &RedisProc,
    conn: &MultiplexedConnection,
    nodes: &[&NodeProc],
    count: usize,
) -> Result<Vec<(String, usize)>> {
    let mut ps = redis.client.get_async_pubsub().await?;
    ps.subscribe(format!("{PREFIX}:events:global")).await?;
    let mut expected: HashMap<String, usize> = HashMap::new();
    let mut pipe = redis::pipe();
    for i in 0..count {
        let cid = next_cid();
        let node = i % nodes.len();
        let msg = json!({
            "type": "create_workstream",
            "correlation_id": cid,
            "target_node": nodes[node].id,
            "name": format!("bench-{i}"),
        });
        pipe.rpush(inbound_shared(), msg.to_string()).ignore();
        expected.insert(cid, node);
    }
    let mut c = conn.clone();
    let _: () = pipe.query_async(&mut c).await?;
    let mut out = Vec::with_capacity(count);
    let mut stream = ps.on_message();
    let deadline = Instant::now() + WAIT * 2;
    while out.len() < count {
        let msg = match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => bail!("only {} of {count} workstreams created", out.len()),
            Ok(None) => bail!("pub/sub closed while creating workstreams"),
            Ok(Some(m)) => m,
        };
        let v: Value = serde_json::from_slice(msg.get_payload_bytes())?;
        let Some(cid) = v["correlation_id"].as_str() else {
            continue;
        };
        let Some(node) = expected.get(cid).copied() else {
            continue;
        };
        match v["type"].as_str() {
            Some("ws_created") => {
                let ws = v["ws_id"]
                    .as_str()
                    .ok_or_else(|| anyhow!("ws_created without ws_id: {v}"))?;
                out.push((ws.to_string(), node));
                expected.remove(cid);
            }
            Some("ack" | "error") => bail!("create refused: {v}"),
            _ => {}
        }
    }
    // Every workstream must be leased to its node before sends are routed by owner.
    let mut c = conn.clone();
    for (ws, node) in &out {
        let owner: Option<String> = c.get(format!("{PREFIX}:ws:{ws}")).await?;
        if owner.as_deref() != Some(nodes[*node].id.as_str()) {
            bail!(
                "workstream {ws} is owned by {owner:?}, not {}",
                nodes[*node].id
            );
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Measurements

/// Raw Redis: one consumer blocked in `BLPOP` on its own connection, timestamps each pop.
struct RawRedis {
    push: MultiplexedConnection,
    key: String,
    popped: mpsc::UnboundedReceiver<Instant>,
    consumer: JoinHandle<()>,
}

impl RawRedis {
    async fn start(client: &redis::Client) -> Result<Self> {
        let key = format!("{PREFIX}:raw");
        let push = client.get_multiplexed_async_connection().await?;
        let mut pop =
            turnstone_queue::conn::blocking_connection(client, Duration::from_secs(1)).await?;
        let (tx, popped) = mpsc::unbounded_channel();
        let k = key.clone();
        let consumer = tokio::spawn(async move {
            loop {
                let got: redis::RedisResult<Option<(String, String)>> = pop.blpop(&k, 1.0).await;
                match got {
                    Ok(Some(_)) => {
                        if tx.send(Instant::now()).is_err() {
                            return;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        eprintln!("raw BLPOP failed: {e}");
                        return;
                    }
                }
            }
        });
        Ok(Self {
            push,
            key,
            popped,
            consumer,
        })
    }

    async fn next_pop(&mut self) -> Result<Instant> {
        match tokio::time::timeout(WAIT, self.popped.recv()).await {
            Err(_) => bail!("raw BLPOP: nothing popped within {WAIT:?}"),
            Ok(None) => bail!("raw BLPOP consumer stopped"),
            Ok(Some(at)) => Ok(at),
        }
    }

    async fn round_trip(&mut self) -> Result<Duration> {
        let started = Instant::now();
        let _: i64 = self.push.rpush(&self.key, "x").await?;
        Ok(self.next_pop().await? - started)
    }

    /// Messages/s through the one sequential consumer, producer pipelined.
    async fn rate(&mut self, count: usize) -> Result<f64> {
        let started = Instant::now();
        let mut pushed = 0;
        while pushed < count {
            let n = (count - pushed).min(100);
            let items = vec!["x"; n];
            let _: i64 = self.push.rpush(&self.key, items).await?;
            pushed += n;
        }
        let mut last = started;
        for _ in 0..count {
            last = self.next_pop().await?;
        }
        Ok(count as f64 / (last - started).as_secs_f64())
    }
}

/// One send: submission → accepted, and → `turn_complete`.
#[derive(Clone, Copy)]
struct Sample {
    accepted: Duration,
    complete: Duration,
}

/// How a send travels.
#[derive(Clone)]
enum Route {
    /// `POST /v1/api/send` to the node; completion from the node-wide stream.
    Http { waiters: Arc<Waiters> },
    /// `RPUSH` of a `send` message on `queue` (the shared or the owner's directed queue);
    /// ack and completion from pub/sub.
    Queue {
        conn: MultiplexedConnection,
        waiters: Arc<Waiters>,
        directed: bool,
    },
}

/// One turn on `ws_id` (whose node is `node`), retrying a `busy` refusal.
async fn one_send(http: &Http, route: &Route, node: &NodeProc, ws_id: &str) -> Result<Sample> {
    loop {
        let cid = next_cid();
        match route {
            Route::Http { waiters } => {
                // The node's answer is the acceptance: no ack to wait for.
                let Pending { done, .. } = waiters.register(&cid);
                let started = Instant::now();
                if !http.send(&node.url, ws_id, &cid).await? {
                    waiters.forget(&cid);
                    BUSY.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                    continue;
                }
                let accepted = started.elapsed();
                let done = recv(done, "turn_complete on the node stream").await?;
                return Ok(Sample {
                    accepted,
                    complete: done - started,
                });
            }
            Route::Queue {
                conn,
                waiters,
                directed,
            } => {
                let queue = if *directed {
                    inbound_directed(&node.id)
                } else {
                    inbound_shared()
                };
                let msg =
                    json!({"type": "send", "ws_id": ws_id, "message": MESSAGE, "correlation_id": cid})
                        .to_string();
                let pending = waiters.register(&cid);
                let mut c = conn.clone();
                let started = Instant::now();
                let _: i64 = c.rpush(&queue, msg).await?;
                let (acked, ok) = recv(pending.ack, "ack on pub/sub").await?;
                if !ok {
                    BUSY.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                    continue;
                }
                let done = recv(pending.done, "turn_complete on pub/sub").await?;
                return Ok(Sample {
                    accepted: acked - started,
                    complete: done - started,
                });
            }
        }
    }
}

struct LoopResult {
    rate: f64,
    samples: Vec<Sample>,
}

/// Every workstream runs `turns` turns back to back, all at once; sends/s over the wall time.
async fn closed_loop(
    http: &Http,
    route: &Route,
    nodes: &[Arc<NodeProc>],
    workstreams: &[(String, usize)],
    turns: usize,
) -> Result<LoopResult> {
    let started = Instant::now();
    let tasks: Vec<JoinHandle<Result<Vec<Sample>>>> = workstreams
        .iter()
        .map(|(ws, n)| {
            let (http, route, node, ws) =
                (http.clone(), route.clone(), nodes[*n].clone(), ws.clone());
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(turns);
                for t in 0..turns {
                    if t > 0 && t % CLEAR_EVERY == 0 {
                        http.clear(&node.url, &ws).await?;
                    }
                    samples.push(one_send(&http, &route, &node, &ws).await?);
                }
                Ok(samples)
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(workstreams.len() * turns);
    for t in tasks {
        samples.extend(t.await??);
    }
    let rate = samples.len() as f64 / started.elapsed().as_secs_f64();
    Ok(LoopResult { rate, samples })
}

// ---------------------------------------------------------------------------------------
// Statistics and machine facts

/// Nearest-rank percentile of sorted samples.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

fn accepted(s: &[Sample]) -> Vec<Duration> {
    sorted(s.iter().map(|s| s.accepted).collect())
}

fn complete(s: &[Sample]) -> Vec<Duration> {
    sorted(s.iter().map(|s| s.complete).collect())
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or_else(String::new, |kb| {
            format!(", {:.0} GiB RAM", kb / 1024.0 / 1024.0)
        });
    format!("{cpu}, {cores} cores{mem}")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `INFO <section>` of the bench's Redis (empty when it cannot be read).
async fn redis_info(conn: &MultiplexedConnection, section: &str) -> String {
    let mut c = conn.clone();
    redis::cmd("INFO")
        .arg(section)
        .query_async(&mut c)
        .await
        .unwrap_or_default()
}

async fn redis_version(conn: &MultiplexedConnection) -> String {
    redis_info(conn, "server")
        .await
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string()
}

/// Calls per command so far (`INFO commandstats`): `(command, calls)`, e.g. `("evalsha", 12)`.
async fn redis_calls(conn: &MultiplexedConnection) -> BTreeMap<String, f64> {
    redis_info(conn, "commandstats")
        .await
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}

/// The processes whose CPU a throughput run is charged for: the load generator (this
/// process), Redis, node n0 and its bridge.
#[derive(Clone, Copy)]
struct Pids {
    redis: Option<u32>,
    node: Option<u32>,
    bridge: Option<u32>,
}

/// CPU seconds used by each process during a run, in the order load generator, Redis,
/// node, bridge.
#[derive(Clone, Copy, Default)]
struct CpuUse([f64; 4]);

impl CpuUse {
    const NAMES: [&'static str; 4] = [
        "load generator",
        "redis-server",
        "turnstone-server",
        "turnstone-bridge",
    ];

    fn now(p: Pids) -> Self {
        let read = |pid| cpu_seconds(pid).unwrap_or(f64::NAN);
        Self([read(None), read(p.redis), read(p.node), read(p.bridge)])
    }

    fn since(self, before: Self) -> Self {
        let mut d = [0.0; 4];
        for (i, v) in d.iter_mut().enumerate() {
            *v = self.0[i] - before.0[i];
        }
        Self(d)
    }
}

/// A closed loop with the CPU each process used for it.
async fn measured_loop(
    pids: Pids,
    run: impl std::future::Future<Output = Result<LoopResult>>,
) -> Result<(LoopResult, CpuUse)> {
    let before = CpuUse::now(pids);
    let result = run.await?;
    Ok((result, CpuUse::now(pids).since(before)))
}

async fn bridge_counter(http: &Http, bridges: &[BridgeProc], name: &str) -> f64 {
    let mut sum = 0.0;
    for b in bridges {
        sum += http.metric(&b.metrics_url, name).await.unwrap_or(f64::NAN);
    }
    sum
}

// ---------------------------------------------------------------------------------------

async fn run(sizes: Sizes, full: bool) -> Result<()> {
    let load_start = loadavg();
    let run_started = Instant::now();
    let http = Http::new()?;
    let dir = tempfile::tempdir()?;
    let redis = start_redis(dir.path()).await?;
    let conn = redis.client.get_multiplexed_async_connection().await?;
    let node0 = Arc::new(start_node("n0", &http, full).await?);
    let mut bridges = vec![start_bridge(&node0, &redis, &conn, full).await?];
    let mut nodes = vec![node0.clone()];

    // --- 1–3: interleaved latency on one workstream owned by n0.
    let lat_ws = create_via_queue(&redis, &conn, &[&node0], 1).await?;
    let (ws, _) = lat_ws
        .first()
        .cloned()
        .ok_or_else(|| anyhow!("no workstream"))?;
    let http_waiters = Arc::new(Waiters::default());
    let mq_waiters = Arc::new(Waiters::default());
    let node_follower = follow_node(&http, &node0.url, http_waiters.clone()).await?;
    let mq_follower =
        follow_pubsub(&redis.client, vec![ws_channel(&ws)], mq_waiters.clone()).await?;
    let direct = Route::Http {
        waiters: http_waiters.clone(),
    };
    let queued = Route::Queue {
        conn: conn.clone(),
        waiters: mq_waiters.clone(),
        directed: false,
    };
    let mut raw = RawRedis::start(&redis.client).await?;
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..sizes.warmup + sizes.latency {
        if i > 0 && i % CLEAR_EVERY == 0 {
            http.clear(&node0.url, &ws).await?;
        }
        let ra = raw.round_trip().await?;
        let rb = one_send(&http, &direct, &node0, &ws).await?;
        let rc = one_send(&http, &queued, &node0, &ws).await?;
        if i >= sizes.warmup {
            a.push(ra);
            b.push(rb);
            c.push(rc);
        }
    }
    let a = sorted(a);
    let raw_rate = raw.rate(sizes.redis_messages).await?;
    raw.consumer.abort();
    mq_follower.abort();

    // --- 4a: throughput, direct HTTP and one bridge, same workstreams (owned by n0).
    let (w1, t1) = sizes.one;
    let one_ws = create_via_queue(&redis, &conn, &[&node0], w1).await?;
    let mq_follower = follow_pubsub(
        &redis.client,
        one_ws.iter().map(|(w, _)| ws_channel(w)).collect(),
        mq_waiters.clone(),
    )
    .await?;
    let pids = Pids {
        redis: redis.proc.pid(),
        node: node0.proc.pid(),
        bridge: bridges[0].proc.pid(),
    };
    let (http_loop, http_cpu) =
        measured_loop(pids, closed_loop(&http, &direct, &nodes, &one_ws, t1)).await?;
    // What the bridge did during its run, from its own counters (the work behind its CPU).
    const BRIDGE_COUNTERS: [&str; 7] = [
        "turnstone_bridge_inbound_received_total",
        "turnstone_bridge_events_received_total",
        "turnstone_bridge_events_published_total",
        "turnstone_bridge_events_joined_total",
        "turnstone_bridge_events_replayed_total",
        "turnstone_bridge_event_stream_reconnects_total",
        "turnstone_bridge_node_retries_total",
    ];
    let mut counted = [0.0; BRIDGE_COUNTERS.len()];
    for (c, name) in counted.iter_mut().zip(BRIDGE_COUNTERS) {
        *c = bridge_counter(&http, &bridges[..1], name).await;
    }
    let calls_before = redis_calls(&conn).await;
    let (one_loop, one_cpu) =
        measured_loop(pids, closed_loop(&http, &queued, &nodes, &one_ws, t1)).await?;
    // The Redis commands behind those sends (every client's: the bridge's, the load
    // generator's RPUSHes and subscriptions), most called first.
    let mut redis_per_send: Vec<(String, f64)> = redis_calls(&conn)
        .await
        .into_iter()
        .map(|(name, n)| {
            let before = calls_before.get(&name).copied().unwrap_or(0.0);
            (name, (n - before) / one_loop.samples.len().max(1) as f64)
        })
        .filter(|(name, n)| *n >= 0.01 && name != "info")
        .collect();
    redis_per_send.sort_by(|a, b| b.1.total_cmp(&a.1));
    let redis_per_send = redis_per_send
        .iter()
        .map(|(name, n)| format!("{name} {n:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    for (c, name) in counted.iter_mut().zip(BRIDGE_COUNTERS) {
        *c = bridge_counter(&http, &bridges[..1], name).await - *c;
    }
    let bridge_work = BRIDGE_COUNTERS
        .iter()
        .zip(counted)
        .map(|(name, n)| {
            let short = name.trim_start_matches("turnstone_bridge_");
            format!("{short} {n:.0}")
        })
        .collect::<Vec<_>>()
        .join(", ");
    node_follower.abort();
    mq_follower.abort();

    // --- 4b: four nodes, four bridges.
    for i in 1..4 {
        let node = Arc::new(start_node(&format!("n{i}"), &http, full).await?);
        bridges.push(start_bridge(&node, &redis, &conn, full).await?);
        nodes.push(node);
    }
    let (w4, t4) = sizes.four;
    let node_refs: Vec<&NodeProc> = nodes.iter().map(|n| &**n).collect();
    let four_ws = create_via_queue(&redis, &conn, &node_refs, w4).await?;
    let spread: HashSet<usize> = four_ws.iter().map(|(_, n)| *n).collect();
    let mq_follower = follow_pubsub(
        &redis.client,
        four_ws.iter().map(|(w, _)| ws_channel(w)).collect(),
        mq_waiters.clone(),
    )
    .await?;
    let forwarded_before =
        bridge_counter(&http, &bridges, "turnstone_bridge_inbound_forwarded_total").await;
    let four_shared = closed_loop(&http, &queued, &nodes, &four_ws, t4).await?;
    let forwarded = bridge_counter(&http, &bridges, "turnstone_bridge_inbound_forwarded_total")
        .await
        - forwarded_before;
    let directed = Route::Queue {
        conn: conn.clone(),
        waiters: mq_waiters.clone(),
        directed: true,
    };
    let four_directed = closed_loop(&http, &directed, &nodes, &four_ws, t4).await?;
    mq_follower.abort();
    let mut cc = conn.clone();
    let dead: u64 = cc.llen(format!("{PREFIX}:dead")).await?;
    let load_end = loadavg();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    // --- Report.
    let (b_acc, b_done, c_acc, c_done) = (accepted(&b), complete(&b), accepted(&c), complete(&c));
    let added = |x: &[Duration], y: &[Duration], p: f64| ms(pct(x, p)) - ms(pct(y, p));
    println!(
        "turnstone-bridge queue_hop benchmark ({}): {}; redis {}; load {} → {}",
        if full {
            "full, release"
        } else {
            "smoke, debug"
        },
        machine(),
        redis_version(&conn).await,
        load_start,
        load_end
    );
    println!("| measurement | p50 | p99 | throughput |");
    println!("|---|---|---|---|");
    println!(
        "| A: raw Redis RPUSH → BLPOP ({} round trips) | {:.3} ms | {:.3} ms | {:.0} msgs/s (one BLPOP consumer, {} msgs) |",
        a.len(),
        ms(pct(&a, 50.0)),
        ms(pct(&a, 99.0)),
        raw_rate,
        sizes.redis_messages
    );
    let row = |name: &str, v: &[Duration], tp: &str| {
        println!(
            "| {name} | {:.3} ms | {:.3} ms | {tp} |",
            ms(pct(v, 50.0)),
            ms(pct(v, 99.0))
        );
    };
    row(
        &format!("B: HTTP POST /send → accepted ({} sends)", b.len()),
        &b_acc,
        &format!(
            "{:.0} sends/s ({w1} ws × {t1} turns, direct)",
            http_loop.rate
        ),
    );
    row(
        "B: HTTP POST /send → turn_complete (node stream)",
        &b_done,
        "",
    );
    row(
        &format!("C: bridge RPUSH → ack ({} sends)", c.len()),
        &c_acc,
        &format!(
            "**{:.0} sends/s** ({w1} ws × {t1} turns, one bridge)",
            one_loop.rate
        ),
    );
    row("C: bridge RPUSH → turn_complete (pub/sub)", &c_done, "");
    println!(
        "| added by the bridge, accepted (C − B) | {:+.3} ms | {:+.3} ms | target ≤ 1 ms p50 |",
        added(&c_acc, &b_acc, 50.0),
        added(&c_acc, &b_acc, 99.0)
    );
    println!(
        "| added by the bridge, turn_complete (C − B) | {:+.3} ms | {:+.3} ms | |",
        added(&c_done, &b_done, 50.0),
        added(&c_done, &b_done, 99.0)
    );
    let load_row = |name: &str, r: &LoopResult| {
        let (acc, done) = (accepted(&r.samples), complete(&r.samples));
        println!(
            "| {name}: accepted / turn_complete under load ({} sends) | {:.2} / {:.2} ms | {:.2} / {:.2} ms | **{:.0} sends/s** |",
            r.samples.len(),
            ms(pct(&acc, 50.0)),
            ms(pct(&done, 50.0)),
            ms(pct(&acc, 99.0)),
            ms(pct(&done, 99.0)),
            r.rate
        );
    };
    load_row(&format!("direct HTTP, {w1} ws"), &http_loop);
    load_row(&format!("one bridge, shared queue, {w1} ws"), &one_loop);
    load_row(
        &format!(
            "four bridges, shared queue, {w4} ws on {} nodes",
            spread.len()
        ),
        &four_shared,
    );
    load_row(
        &format!("four bridges, directed queues, {w4} ws"),
        &four_directed,
    );
    // CPU per send: what each process would need of a core of its own.
    println!();
    println!(
        "| CPU per send (ms, {w1} ws × {t1} turns) | direct HTTP | one bridge | sends/s one core sustains (bridge run) |"
    );
    println!("|---|---|---|---|");
    let per_send =
        |cpu: &CpuUse, r: &LoopResult, i: usize| cpu.0[i] * 1_000.0 / r.samples.len().max(1) as f64;
    for (i, name) in CpuUse::NAMES.iter().enumerate() {
        let bridged = per_send(&one_cpu, &one_loop, i);
        println!(
            "| {name} | {:.3} | {:.3} | {:.0} |",
            per_send(&http_cpu, &http_loop, i),
            bridged,
            1_000.0 / bridged
        );
    }
    let total = |cpu: &CpuUse, r: &LoopResult| (0..4).map(|i| per_send(cpu, r, i)).sum::<f64>();
    println!(
        "| all four | {:.3} | {:.3} | {:.0} per core; {cores} cores: {:.0} |",
        total(&http_cpu, &http_loop),
        total(&one_cpu, &one_loop),
        1_000.0 / total(&one_cpu, &one_loop),
        cores as f64 * 1_000.0 / total(&one_cpu, &one_loop),
    );
    println!();
    println!(
        "the bridge's counters over its run ({} sends): {bridge_work}",
        one_loop.samples.len()
    );
    println!("Redis commands per send in that run: {redis_per_send}");
    println!(
        "forwarded between bridges in the shared-queue run: {forwarded:.0} of {} sends; busy refusals retried: {}; dead letters: {dead}; wall {:.1} s",
        four_shared.samples.len(),
        BUSY.load(Ordering::Relaxed),
        run_started.elapsed().as_secs_f64()
    );
    if dead > 0 {
        bail!("{dead} messages were dead-lettered during the benchmark");
    }
    Ok(())
}
