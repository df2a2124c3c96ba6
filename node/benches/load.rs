//! Load benchmark of the node HTTP server with the zero-latency in-process scripted model.
//!
//! `cargo bench -p turnstone-node --bench load` runs the full measurement; without the
//! `--bench` argument (`cargo test --benches`) it runs tiny sizes so the bench never rots.
//!
//! Everything goes through real HTTP on 127.0.0.1 (reqwest client with a connection pool,
//! SSE parsed from the byte stream); the model is `ScriptedProvider` in-process, so what is
//! measured is the node: HTTP, auth, the engine turn, the event log and SSE encoding.
//!
//! Measures, in one run:
//! 1. baseline: `GET /health` round trip, p50/p99 (the HTTP floor), sequential and with 100
//!    clients in a closed loop (the floor of "100 all sending": no turn, just one HTTP
//!    exchange per cycle, with its CPU per request);
//! 2. `POST /send` → first `content` frame on the workstream's SSE stream (opened before the
//!    send), p50/p99 with 1, 100 and 1,000 concurrent workstreams (a closed loop: each sends
//!    again once its turn completed), with the streams open and one send at a time, and with
//!    100 workstreams all sending on a schedule at 2,000 and 5,000 sends/s in all (an
//!    offered load, as the ≥ 2,000 sends/s target of a bridge puts on its node);
//! 3. turns/s per node: 100 workstreams each running K turns (send, wait `turn_complete`);
//! 4. SSE fan-out: N subscribers on one workstream, one send; delay from just before the
//!    `POST` to each subscriber's first `content` frame (p50/p99/last). The subscribers run
//!    in a child process (this binary re-executed) so that server and client sockets do not
//!    share one open-file limit;
//! 5. RSS growth with 10,000 workstreams opened through `POST /v1/api/workstreams/new`;
//! 6. the same node persisting to SQLite (as `turnstone-server` does): latency at 1 and 100
//!    concurrent and turns/s, next to the in-memory node of the same run — the cost of
//!    answering a send only once it is committed and emitting `turn_complete` only once the
//!    turn is (group commit, issue 20).
//!
//! 7. gRPC (`turnstone.v1.NodeService`, same port) against HTTP+SSE in the same run: send →
//!    first `content` with 1 and with several concurrent workstreams, and turns/s, each
//!    with the sizes of (2) and (3) (`support/grpc.rs`).
//!
//! Method and results are recorded in `docs/benchmarks.md`.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;
use turnstone_engine::{Engine, EngineConfig, Event, Item, ManagerConfig};
use turnstone_llm::{CircuitBreaker, Resilient, RetryPolicy};
use turnstone_node::server::{self, Node, NodeOptions};
use turnstone_runtime::auth::{AUDIENCE_SERVER, Authenticator, ConfigToken, TokenRole};
use turnstone_testkit::{ScriptedProvider, cpu_seconds};
use turnstone_tools::ToolRegistry;

#[path = "support/grpc.rs"]
mod grpc;

const TOKEN: &str = "bench-full-token";
const MESSAGE: &str = "hello from the benchmark";
/// First argument of the re-executed binary acting as the fan-out client.
const FANOUT_CHILD: &str = "--fanout-child";
/// Turns after which a workstream's history is cleared (untimed), so requests stay the size
/// of a short conversation.
const CLEAR_EVERY: usize = 25;
/// How long any single SSE read may wait before the bench gives up.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// `busy` answers to a send (retried); should stay 0.
static BUSY_RETRIES: AtomicU64 = AtomicU64::new(0);
/// SSE data frames parsed, and body chunks read off the event streams (one per chunk the
/// node wrote): per turn, they show how a turn's events were batched on the wire.
static SSE_FRAMES: AtomicU64 = AtomicU64::new(0);
static SSE_CHUNKS: AtomicU64 = AtomicU64::new(0);

struct Sizes {
    health_samples: usize,
    /// (concurrent clients, requests each) for the closed-loop `GET /health` floor.
    health_closed: (usize, usize),
    /// (concurrent workstreams, turns each) for the send → first content latency.
    latency: [(usize, usize); 3],
    /// (open workstreams, rounds) for the same latency with one send at a time.
    paced: [(usize, usize); 2],
    /// (workstreams, turns each, sends/s in all) for the same latency with every workstream
    /// sending on a schedule (an offered load below saturation).
    rated: [(usize, usize, f64); 2],
    throughput_workstreams: usize,
    throughput_turns: usize,
    fanout_subscribers: usize,
    rss_workstreams: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
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
    let result = if args.get(1).map(String::as_str) == Some(FANOUT_CHILD) {
        rt.block_on(fanout_child(&args[2..]))
    } else {
        let full = args.iter().any(|a| a == "--bench");
        let sizes = if full {
            Sizes {
                health_samples: 2_000,
                health_closed: (100, 200),
                latency: [(1, 1_000), (100, 20), (1_000, 5)],
                paced: [(100, 10), (1_000, 2)],
                rated: [(100, 30, 2_000.0), (100, 30, 5_000.0)],
                throughput_workstreams: 100,
                throughput_turns: 30,
                fanout_subscribers: 10_000,
                rss_workstreams: 10_000,
            }
        } else {
            Sizes {
                health_samples: 20,
                health_closed: (10, 5),
                latency: [(1, 10), (10, 2), (20, 2)],
                paced: [(10, 2), (20, 1)],
                rated: [(10, 2, 500.0), (10, 2, 1_000.0)],
                throughput_workstreams: 10,
                throughput_turns: 2,
                fanout_subscribers: 20,
                rss_workstreams: 100,
            }
        };
        if args.iter().any(|a| a == "--persisted") {
            rt.block_on(durability_cost(&sizes))
        } else {
            rt.block_on(run(sizes, full))
        }
    };
    rt.shutdown_timeout(Duration::from_secs(1));
    if let Err(e) = result {
        eprintln!("load bench failed: {e:#}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------
// The node under test

struct Served {
    node: Arc<Node>,
    base: String,
}

async fn start_node(persist: Option<&std::path::Path>) -> Result<Served> {
    let provider = Arc::new(ScriptedProvider::new().without_recording());
    let resilient = Resilient::new(
        provider,
        RetryPolicy::none(),
        Arc::new(CircuitBreaker::default()),
    );
    let config = EngineConfig {
        model: "fake".into(),
        context_window: 32_768,
        ..EngineConfig::default()
    };
    let tools = ToolRegistry::with_builtins().map_err(|e| anyhow!("tool registry: {e}"))?;
    let engine = Engine::new(resilient, Arc::new(tools), config).await;
    let auth = Authenticator::new(
        true,
        None,
        vec![ConfigToken::new(TOKEN, TokenRole::Full)],
        AUDIENCE_SERVER,
    );
    let manager = ManagerConfig {
        max_workstreams: 20_000,
        idle_timeout: None,
        hibernate_after: None,
    };
    let options = NodeOptions {
        node_id: "bench".into(),
        model: "fake".into(),
        // One client identity holds every stream of the bench (up to 10,000 for the
        // fan-out): the per-identity cap (32 by default) is not what is measured.
        sse_per_identity: usize::MAX,
        ..NodeOptions::default()
    };
    let node = match persist {
        Some(path) => {
            let store = turnstone_store::StoreConfig::sqlite(path);
            let persistence = turnstone_node::persist::Persistence::open(&store, "bench")
                .await
                .map_err(|e| anyhow!("store: {e}"))?;
            Node::with_persistence(engine, manager, auth, options, persistence)
        }
        None => Node::new(engine, manager, auth, options),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let served = node.clone();
    tokio::spawn(async move {
        if let Err(e) = server::run(listener, served, std::future::pending()).await {
            eprintln!("server stopped: {e}");
        }
    });
    Ok(Served { node, base })
}

// ---------------------------------------------------------------------------------------
// The client

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: Arc<str>,
}

#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type", default)]
    kind: String,
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// A per-workstream SSE stream, parsed just enough to know each event's `type`.
struct Sse {
    stream: ByteStream,
    buf: Vec<u8>,
}

impl Sse {
    /// The `type` of the next data frame (comments skipped).
    async fn next_kind(&mut self) -> Result<String> {
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let frame: Vec<u8> = self.buf.drain(..end + 4).collect();
                for line in frame.split(|b| *b == b'\n') {
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    if let Some(data) = line.strip_prefix(b"data: ") {
                        SSE_FRAMES.fetch_add(1, Ordering::Relaxed);
                        let kind: Kind = serde_json::from_slice(data).context("SSE data")?;
                        return Ok(kind.kind);
                    }
                }
                continue;
            }
            match tokio::time::timeout(READ_TIMEOUT, self.stream.next()).await {
                Err(_) => bail!("no SSE data within {READ_TIMEOUT:?}"),
                Ok(None) => bail!("SSE stream ended"),
                Ok(Some(chunk)) => {
                    SSE_CHUNKS.fetch_add(1, Ordering::Relaxed);
                    self.buf.extend_from_slice(&chunk?)
                }
            }
        }
    }

    /// Reads frames up to and including one of type `kind`.
    async fn until(&mut self, kind: &str) -> Result<()> {
        while self.next_kind().await? != kind {}
        Ok(())
    }
}

impl Client {
    fn new(base: &str) -> Result<Self> {
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(300))
            .build()?;
        Ok(Self {
            http,
            base: base.into(),
        })
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await?;
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("POST {path}: {status} {body}");
        }
        Ok(body)
    }

    async fn health(&self) -> Result<()> {
        let resp = self
            .http
            .get(format!("{}/health", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("GET /health: {}", resp.status());
        }
        resp.bytes().await?;
        Ok(())
    }

    async fn create(&self) -> Result<String> {
        let body = self.post("/v1/api/workstreams/new", json!({})).await?;
        body["ws_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("no ws_id in {body}"))
    }

    /// `count` workstreams, created `in_flight` at a time.
    async fn create_many(&self, count: usize, in_flight: usize) -> Result<Vec<String>> {
        futures::stream::iter(0..count)
            .map(|_| self.create())
            .buffer_unordered(in_flight)
            .try_collect()
            .await
    }

    /// Starts a turn; a `busy` answer is retried (and counted).
    async fn send(&self, ws_id: &str) -> Result<()> {
        loop {
            let body = self
                .post("/v1/api/send", json!({"ws_id": ws_id, "message": MESSAGE}))
                .await?;
            match body["status"].as_str() {
                Some("ok") => return Ok(()),
                Some("busy") => {
                    BUSY_RETRIES.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
                _ => bail!("send: {body}"),
            }
        }
    }

    async fn clear(&self, ws_id: &str) -> Result<()> {
        self.post(
            "/v1/api/command",
            json!({"ws_id": ws_id, "command": "/clear"}),
        )
        .await?;
        Ok(())
    }

    /// Opens the workstream's SSE stream and waits for its `connected` frame.
    async fn subscribe(&self, ws_id: &str) -> Result<Sse> {
        let resp = self
            .http
            // Workstream ids are hex: no escaping needed.
            .get(format!("{}/v1/api/events?ws_id={ws_id}", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("GET /v1/api/events: {}", resp.status());
        }
        let mut sse = Sse {
            stream: Box::pin(resp.bytes_stream()),
            buf: Vec::new(),
        };
        sse.until("connected").await?;
        Ok(sse)
    }

    async fn subscribe_many(&self, ids: &[String], in_flight: usize) -> Result<Vec<Sse>> {
        futures::stream::iter(ids)
            .map(|id| self.subscribe(id))
            .buffered(in_flight)
            .try_collect()
            .await
    }
}

// ---------------------------------------------------------------------------------------
// Statistics and process facts

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

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The soft limit on open files (`/proc/self/limits`), if readable.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    match line.split_whitespace().nth(3)? {
        "unlimited" => Some(u64::MAX),
        soft => soft.parse().ok(),
    }
}

/// Open file descriptors of this process now.
fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

// ---------------------------------------------------------------------------------------
// Phases

/// How the workstreams of a latency phase send.
#[derive(Debug, Clone, Copy)]
enum Pace {
    /// All at once, each its next turn as soon as the last one completed (a closed loop).
    Closed,
    /// One send at a time, round-robin (no queueing behind other turns).
    OneAtATime,
    /// All sending, at this many sends/s in all: each workstream every `workstreams / rate`
    /// seconds, the workstreams' slots spread evenly over that period. A send whose slot
    /// comes while its previous turn still runs goes out when that turn completes (counted
    /// in [`LATE_SLOTS`]).
    Rate(f64),
}

impl Pace {
    fn describe(self) -> String {
        match self {
            Self::Closed => "concurrent, all sending".into(),
            Self::OneAtATime => "streams open, one send at a time".into(),
            Self::Rate(rate) => format!("all sending, {rate:.0} sends/s in all"),
        }
    }
}

/// Rated sends that went out more than [`LATE_BY`] after their slot (the schedule did not
/// hold: the offered load was not carried); read and reset after each rated phase.
static LATE_SLOTS: AtomicU64 = AtomicU64::new(0);
const LATE_BY: Duration = Duration::from_millis(2);

/// Send → first `content` latency with `workstreams` workstreams, each running `turns`
/// turns as `pace` says, its SSE stream open before the first send. Each sample runs from
/// just before the `POST` to the first `content` frame.
async fn latency(
    client: &Client,
    node: &Node,
    workstreams: usize,
    turns: usize,
    pace: Pace,
) -> Result<Vec<Duration>> {
    let ids = client.create_many(workstreams, 64).await?;
    let streams = client.subscribe_many(&ids, 64).await?;
    if let Pace::OneAtATime = pace {
        let mut streams = streams;
        let mut all = Vec::with_capacity(workstreams * turns);
        for n in 0..turns {
            for (id, sse) in ids.iter().zip(streams.iter_mut()) {
                if n > 0 && n % CLEAR_EVERY == 0 {
                    client.clear(id).await?;
                }
                let started = Instant::now();
                client.send(id).await?;
                sse.until("content").await?;
                all.push(started.elapsed());
                sse.until("turn_complete").await?;
            }
        }
        close_all(node, &ids);
        all.sort();
        return Ok(all);
    }
    // Per workstream: its first slot and the period between its slots (rated only).
    let start = Instant::now() + Duration::from_millis(20);
    let period = match pace {
        Pace::Rate(rate) => Some(Duration::from_secs_f64(workstreams as f64 / rate)),
        _ => None,
    };
    let tasks: Vec<_> = ids
        .iter()
        .cloned()
        .zip(streams)
        .enumerate()
        .map(|(i, (id, mut sse))| {
            let client = client.clone();
            let schedule = period.map(|p| (start + p.mul_f64(i as f64 / workstreams as f64), p));
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(turns);
                for n in 0..turns {
                    if n > 0 && n % CLEAR_EVERY == 0 {
                        client.clear(&id).await?;
                    }
                    if let Some((first, period)) = schedule {
                        let slot = first + period * n as u32;
                        if slot.elapsed() > LATE_BY {
                            LATE_SLOTS.fetch_add(1, Ordering::Relaxed);
                        }
                        tokio::time::sleep_until(slot).await;
                    }
                    let started = Instant::now();
                    client.send(&id).await?;
                    sse.until("content").await?;
                    samples.push(started.elapsed());
                    sse.until("turn_complete").await?;
                }
                Ok::<_, anyhow::Error>(samples)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(workstreams * turns);
    for t in tasks {
        all.extend(t.await??);
    }
    close_all(node, &ids);
    all.sort();
    Ok(all)
}

/// `GET /health` from `clients` clients at once, each sending its next request as soon as
/// the last one was answered: the latency and the CPU per request (node and client) of a
/// closed loop with no turn in it, the floor under the "all sending" rows.
async fn health_closed_loop(
    client: &Client,
    clients: usize,
    requests: usize,
) -> Result<(Vec<Duration>, Duration)> {
    let cpu_before = cpu_seconds(None).unwrap_or(f64::NAN);
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(requests);
                for _ in 0..requests {
                    let started = Instant::now();
                    client.health().await?;
                    samples.push(started.elapsed());
                }
                Ok::<_, anyhow::Error>(samples)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(clients * requests);
    for t in tasks {
        all.extend(t.await??);
    }
    let cpu = cpu_seconds(None).unwrap_or(f64::NAN) - cpu_before;
    all.sort();
    let per_request =
        Duration::try_from_secs_f64(cpu / (clients * requests) as f64).unwrap_or_default();
    Ok((all, per_request))
}

/// A closed loop's rate and what one turn cost this process (node and client) in CPU.
struct Throughput {
    turns_per_sec: f64,
    cpu_per_turn: Duration,
    /// SSE data frames and body chunks the client read per turn.
    frames_per_turn: f64,
    chunks_per_turn: f64,
}

/// Aggregate turns/s of `workstreams` workstreams each running `turns` turns at once.
async fn throughput(
    client: &Client,
    node: &Node,
    workstreams: usize,
    turns: usize,
) -> Result<Throughput> {
    let ids = client.create_many(workstreams, 64).await?;
    let streams = client.subscribe_many(&ids, 64).await?;
    let cpu_before = cpu_seconds(None).unwrap_or(f64::NAN);
    let frames_before = SSE_FRAMES.load(Ordering::Relaxed);
    let chunks_before = SSE_CHUNKS.load(Ordering::Relaxed);
    let started = Instant::now();
    let tasks: Vec<_> = ids
        .iter()
        .cloned()
        .zip(streams)
        .map(|(id, mut sse)| {
            let client = client.clone();
            tokio::spawn(async move {
                for n in 0..turns {
                    if n > 0 && n % CLEAR_EVERY == 0 {
                        client.clear(&id).await?;
                    }
                    client.send(&id).await?;
                    sse.until("turn_complete").await?;
                }
                Ok::<_, anyhow::Error>(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let rate = (workstreams * turns) as f64 / started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(None).unwrap_or(f64::NAN) - cpu_before;
    let all = (workstreams * turns) as f64;
    let frames = SSE_FRAMES.load(Ordering::Relaxed) - frames_before;
    let chunks = SSE_CHUNKS.load(Ordering::Relaxed) - chunks_before;
    close_all(node, &ids);
    Ok(Throughput {
        turns_per_sec: rate,
        cpu_per_turn: Duration::try_from_secs_f64(cpu / all).unwrap_or_default(),
        frames_per_turn: frames as f64 / all,
        chunks_per_turn: chunks as f64 / all,
    })
}

/// Closing a workstream ends its SSE streams server-side, so phases do not overlap.
fn close_all(node: &Node, ids: &[String]) {
    for id in ids {
        let _ = node.manager.close(id);
    }
}

struct RssResult {
    before: u64,
    after_open: u64,
    after_turn: u64,
}

/// RSS before and after opening `count` workstreams over HTTP, and after one turn in each
/// (completion observed in-process, so no SSE connection is left open by this phase).
async fn rss(client: &Client, node: &Node, count: usize) -> Result<RssResult> {
    // Warm up the client pool, the allocator and the router.
    let warm = client.create_many(64, 64).await?;
    for id in &warm {
        turn_in_process(client, node, id).await?;
    }
    close_all(node, &warm);
    settle().await;
    let before = rss_bytes();
    let ids = client.create_many(count, 32).await?;
    settle().await;
    let after_open = rss_bytes();
    futures::stream::iter(&ids)
        .map(|id| turn_in_process(client, node, id))
        .buffer_unordered(100)
        .try_collect::<Vec<()>>()
        .await?;
    settle().await;
    let after_turn = rss_bytes();
    close_all(node, &ids);
    Ok(RssResult {
        before,
        after_open,
        after_turn,
    })
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

async fn turn_in_process(client: &Client, node: &Node, ws_id: &str) -> Result<()> {
    let ws = node
        .workstream(ws_id)
        .ok_or_else(|| anyhow!("workstream {ws_id} is gone"))?;
    let mut sub = ws.subscribe(None);
    client.send(ws_id).await?;
    let deadline = Instant::now() + READ_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, sub.next()).await {
            Err(_) => bail!("no turn_complete within {READ_TIMEOUT:?}"),
            Ok(None) => bail!("event log closed"),
            Ok(Some(Item::Event(env))) if matches!(env.event, Event::TurnComplete { .. }) => {
                return Ok(());
            }
            Ok(Some(_)) => {}
        }
    }
}

/// What the fan-out child reports on its last stdout line.
#[derive(Deserialize, serde::Serialize)]
struct FanoutReport {
    subscribers: usize,
    /// Per subscriber: microseconds from just before the `POST /send` to its first
    /// `content` frame, sorted.
    delays_us: Vec<u64>,
    open_secs: f64,
}

/// Child mode: `--fanout-child BASE WS_ID N`. Opens N subscribers, sends once, prints a
/// [`FanoutReport`] as JSON.
async fn fanout_child(args: &[String]) -> Result<()> {
    let [base, ws_id, n] = args else {
        bail!("usage: {FANOUT_CHILD} BASE WS_ID N");
    };
    let n: usize = n.parse().context("N")?;
    let client = Client::new(base)?;
    let opening = Instant::now();
    let ids = vec![ws_id.clone(); n];
    let streams = client.subscribe_many(&ids, 256).await?;
    let open_secs = opening.elapsed().as_secs_f64();
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|mut sse| {
            tokio::spawn(async move {
                sse.until("content").await?;
                Ok::<_, anyhow::Error>(Instant::now())
            })
        })
        .collect();
    let started = Instant::now();
    client.send(ws_id).await?;
    let mut delays_us = Vec::with_capacity(n);
    for t in tasks {
        let at = t.await??;
        delays_us.push(at.saturating_duration_since(started).as_micros() as u64);
    }
    delays_us.sort_unstable();
    let report = FanoutReport {
        subscribers: n,
        delays_us,
        open_secs,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// Runs the fan-out child against `ws_id` and collects its report.
async fn fanout(base: &str, ws_id: &str, n: usize) -> Result<FanoutReport> {
    let exe = std::env::current_exe()?;
    let out = tokio::process::Command::new(exe)
        .arg(FANOUT_CHILD)
        .arg(base)
        .arg(ws_id)
        .arg(n.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .await?;
    if !out.status.success() {
        bail!("fan-out child failed: {}", out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .last()
        .ok_or_else(|| anyhow!("fan-out child printed nothing"))?;
    Ok(serde_json::from_str(line)?)
}

// ---------------------------------------------------------------------------------------

async fn run(sizes: Sizes, full: bool) -> Result<()> {
    let served = start_node(None).await?;
    let node = served.node.clone();
    let client = Client::new(&served.base)?;
    // One workstream that stays, so closing the others never hits "last workstream".
    let _keeper = client.create().await?;

    // (5) first, on a fresh process, so the total RSS is meaningful.
    let mem = rss(&client, &node, sizes.rss_workstreams).await?;

    // (1) baseline.
    for _ in 0..20 {
        client.health().await?;
    }
    let mut health = Vec::with_capacity(sizes.health_samples);
    for _ in 0..sizes.health_samples {
        let started = Instant::now();
        client.health().await?;
        health.push(started.elapsed());
    }
    health.sort();
    let (clients, requests) = sizes.health_closed;
    let (health_loop, health_cpu) = health_closed_loop(&client, clients, requests).await?;

    // (2) latency.
    let mut lat = Vec::new();
    for (workstreams, turns) in sizes.latency {
        let samples = latency(&client, &node, workstreams, turns, Pace::Closed).await?;
        lat.push((workstreams, Pace::Closed.describe(), samples));
    }
    for (workstreams, turns) in sizes.paced {
        let samples = latency(&client, &node, workstreams, turns, Pace::OneAtATime).await?;
        lat.push((workstreams, Pace::OneAtATime.describe(), samples));
    }
    for (workstreams, turns, rate) in sizes.rated {
        let pace = Pace::Rate(rate);
        let samples = latency(&client, &node, workstreams, turns, pace).await?;
        let late = LATE_SLOTS.swap(0, Ordering::Relaxed);
        let how = format!(
            "{}, {late} of {} sends > {} ms late",
            pace.describe(),
            samples.len(),
            LATE_BY.as_millis()
        );
        lat.push((workstreams, how, samples));
    }

    // (3) turns/s.
    let closed = throughput(
        &client,
        &node,
        sizes.throughput_workstreams,
        sizes.throughput_turns,
    )
    .await?;

    // (7) gRPC, the sizes of (2) and (3), against the HTTP+SSE figures above.
    let grpc = grpc::Grpc::connect(&served.base).await?;
    let mut grpc_lat = Vec::new();
    for (workstreams, turns) in &sizes.latency[..2] {
        let (samples, _) = grpc.turns(&node, *workstreams, *turns).await?;
        grpc_lat.push((*workstreams, samples));
    }
    let (_, grpc_turns_per_sec) = grpc
        .turns(&node, sizes.throughput_workstreams, sizes.throughput_turns)
        .await?;

    // (4) fan-out, sized to the open-file limit (server sockets here, clients in the child).
    let limit = open_files_limit().unwrap_or(1_024);
    let spare = limit.saturating_sub(open_fds() + 256) as usize;
    let subscribers = sizes.fanout_subscribers.min(spare);
    let fan_ws = client.create().await?;
    let fan = fanout(&served.base, &fan_ws, subscribers).await?;
    let _ = node.manager.close(&fan_ws);

    let fan_delays: Vec<Duration> = fan
        .delays_us
        .iter()
        .map(|us| Duration::from_micros(*us))
        .collect();
    let health_p50 = pct(&health, 50.0);
    let health_p99 = pct(&health, 99.0);
    let ratio = |d: Duration| ms(d) / ms(health_p50).max(1e-9);

    println!(
        "turnstone-node load benchmark ({})",
        if full { "full" } else { "smoke" }
    );
    println!("| measurement | p50 | p99 | other |");
    println!("|---|---|---|---|");
    println!(
        "| baseline: GET /health round trip ({} samples) | {:.3} ms | {:.3} ms | |",
        health.len(),
        ms(health_p50),
        ms(health_p99)
    );
    println!(
        "| baseline: GET /health, {clients} clients in a closed loop ({} requests) | {:.3} ms | {:.3} ms | {:.1} µs CPU per request, node + client |",
        health_loop.len(),
        ms(pct(&health_loop, 50.0)),
        ms(pct(&health_loop, 99.0)),
        health_cpu.as_secs_f64() * 1e6,
    );
    for (workstreams, how, samples) in &lat {
        let (p50, p99) = (pct(samples, 50.0), pct(samples, 99.0));
        println!(
            "| send → first content, {workstreams} {how} ({} turns) | {:.3} ms ({:.1}× baseline) | {:.3} ms ({:.1}× baseline) | max {:.3} ms |",
            samples.len(),
            ms(p50),
            ratio(p50),
            ms(p99),
            ratio(p99),
            ms(samples.last().copied().unwrap_or_default()),
        );
    }
    let turns_per_sec = closed.turns_per_sec;
    println!(
        "| turns/s per node, {} workstreams × {} turns | | | **{:.0} turns/s** |",
        sizes.throughput_workstreams, sizes.throughput_turns, turns_per_sec
    );
    // The physical bound of "all sending": in a closed loop of N workstreams on C cores a
    // turn takes, on average, N × (CPU per turn) / C from send to turn_complete once the
    // cores are saturated (Little's law), whatever the scheduling.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_turn = closed.cpu_per_turn;
    println!(
        "| CPU per turn, node + in-process client ({} turns) | | | {:.1} µs; bound on mean send → turn_complete with 100 all sending on {cores} cores: {:.2} ms (≤ 2 ms would need ≤ {:.1} µs per turn) |",
        sizes.throughput_workstreams * sizes.throughput_turns,
        per_turn.as_secs_f64() * 1e6,
        100.0 * per_turn.as_secs_f64() * 1e3 / cores as f64,
        2_000.0 * cores as f64 / 100.0,
    );
    println!(
        "| a turn's events on its stream | | | {:.2} SSE frames in {:.2} body chunks per turn |",
        closed.frames_per_turn, closed.chunks_per_turn,
    );
    println!(
        "| SSE fan-out to {} subscribers (send → each one's first content) | {:.3} ms | {:.3} ms | last {:.3} ms, first {:.3} ms; opening took {:.2} s |",
        fan.subscribers,
        ms(pct(&fan_delays, 50.0)),
        ms(pct(&fan_delays, 99.0)),
        ms(fan_delays.last().copied().unwrap_or_default()),
        ms(fan_delays.first().copied().unwrap_or_default()),
        fan.open_secs,
    );
    for ((workstreams, samples), (_, _, http)) in grpc_lat.iter().zip(&lat) {
        println!(
            "| gRPC: send → first content, {workstreams} concurrent ({} turns) | {:.3} ms (HTTP+SSE {:.3} ms) | {:.3} ms (HTTP+SSE {:.3} ms) | |",
            samples.len(),
            ms(pct(samples, 50.0)),
            ms(pct(http, 50.0)),
            ms(pct(samples, 99.0)),
            ms(pct(http, 99.0)),
        );
    }
    println!(
        "| gRPC: turns/s per node, {} workstreams × {} turns | | | **{:.0} turns/s** (HTTP+SSE {:.0}) |",
        sizes.throughput_workstreams, sizes.throughput_turns, grpc_turns_per_sec, turns_per_sec
    );
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let n = sizes.rss_workstreams.max(1) as f64;
    println!(
        "| RSS, {} workstreams opened via HTTP | | | total {:.1} MiB (before {:.1} MiB): +{:.1} MiB, {:.1} KiB each |",
        sizes.rss_workstreams,
        mib(mem.after_open),
        mib(mem.before),
        mib(mem.after_open.saturating_sub(mem.before)),
        mem.after_open.saturating_sub(mem.before) as f64 / n / 1024.0,
    );
    println!(
        "| RSS, same after one turn each | | | total {:.1} MiB: +{:.1} MiB, {:.1} KiB each |",
        mib(mem.after_turn),
        mib(mem.after_turn.saturating_sub(mem.before)),
        mem.after_turn.saturating_sub(mem.before) as f64 / n / 1024.0,
    );
    println!(
        "open-file soft limit {limit}; fan-out target {}, ran {}; busy retries {}",
        sizes.fanout_subscribers,
        fan.subscribers,
        BUSY_RETRIES.load(Ordering::Relaxed)
    );
    if fan.subscribers < sizes.fanout_subscribers {
        println!("NOTE: fan-out reduced to fit the open-file limit");
    }
    durability_cost(&sizes).await
}

/// (6) The same turns on an in-memory node and on one persisting to SQLite (as
/// `turnstone-server` does), in one run: what durable answers cost (a send is answered once
/// its message is committed, `turn_complete` once the turn is — group commit). Alone with
/// `--persisted` (the rest of the bench skipped).
async fn durability_cost(sizes: &Sizes) -> Result<()> {
    let dir = tempfile::tempdir()?;
    println!(
        "| node | send → first content, 1 conc. p50 / p99 | 100 conc. p50 / p99 | turns/s ({} × {}) | store transactions |",
        sizes.throughput_workstreams, sizes.throughput_turns
    );
    println!("|---|---|---|---|---|");
    for persist in [None, Some(dir.path().join("bench.db"))] {
        let served = start_node(persist.as_deref()).await?;
        let client = Client::new(&served.base)?;
        let _keeper = client.create().await?;
        let one = latency(&client, &served.node, 1, sizes.latency[0].1, Pace::Closed).await?;
        let many = latency(
            &client,
            &served.node,
            sizes.latency[1].0,
            sizes.latency[1].1,
            Pace::Closed,
        )
        .await?;
        let rate = throughput(
            &client,
            &served.node,
            sizes.throughput_workstreams,
            sizes.throughput_turns,
        )
        .await?
        .turns_per_sec;
        let store = match served.node.persistence.as_ref() {
            Some(p) => {
                let c = p.writer.counters();
                format!("{} rows in {} transactions", c.written, c.batches)
            }
            None => "—".into(),
        };
        println!(
            "| {} | {:.3} / {:.3} ms | {:.3} / {:.3} ms | **{:.0}** | {store} |",
            if persist.is_some() {
                "persisted (SQLite)"
            } else {
                "in memory"
            },
            ms(pct(&one, 50.0)),
            ms(pct(&one, 99.0)),
            ms(pct(&many, 50.0)),
            ms(pct(&many, 99.0)),
            rate,
        );
    }
    Ok(())
}
