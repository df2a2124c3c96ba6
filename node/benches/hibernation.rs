//! Hibernation benchmark (issue 17): RSS of one node versus the number of workstreams it
//! holds (0 → 100,000, at most `max_workstreams` of them live, the rest hibernated), and the
//! latency of a request that rehydrates a hibernated workstream from SQLite.
//!
//! `cargo bench -p turnstone-node --bench hibernation` runs the full measurement (release);
//! without the `--bench` argument (`cargo test --benches`) it runs tiny sizes so the bench
//! never rots; `-- --total N` draws the curve up to N workstreams instead.
//!
//! Method (recorded in `docs/benchmarks.md`): one process runs the node as `turnstone-server`
//! does — SQLite persistence in a temp dir, auth on, the zero-latency in-process
//! `ScriptedProvider` — with `max_workstreams` live workstreams and hibernation on. Each
//! workstream is created through `POST /v1/api/workstreams/new` and given one turn through
//! `POST /v1/api/send` (so it has a stored conversation); creating one while
//! `max_workstreams` are live hibernates the oldest idle one. RSS (`/proc/self/statm`, the
//! client in the same process included) is read at checkpoints. Then a sample of hibernated
//! workstreams, in random order, is each asked for `GET /v1/api/workstreams/{id}/queue`
//! (the cheapest per-workstream route): the time of that request is the rehydration
//! latency, next to the same request on a live workstream (the HTTP floor). Every sampled
//! workstream is checked to come back with its conversation.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use serde_json::{Value, json};
use tokio::time::Instant;
use turnstone_engine::{Engine, EngineConfig, ManagerConfig};
use turnstone_llm::{CircuitBreaker, Resilient, RetryPolicy};
use turnstone_node::server::{self, Node, NodeOptions};
use turnstone_runtime::auth::{AUDIENCE_SERVER, Authenticator, ConfigToken, TokenRole};
use turnstone_testkit::ScriptedProvider;
use turnstone_tools::ToolRegistry;

const TOKEN: &str = "bench-hibernation-token";
/// Workstreams populated at once (each batch finishes before the next starts). Well below
/// `max_workstreams`: a workstream being created or sent to is held, and one running its
/// turn is busy; neither may hibernate to make room.
const CONCURRENCY: usize = 16;

struct Sizes {
    /// Live workstreams at most (`max_workstreams`).
    live: usize,
    /// Total workstreams at each RSS checkpoint (ascending; the last is the total).
    checkpoints: Vec<usize>,
    /// Hibernated workstreams rehydrated for the latency sample.
    rehydrations: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    // `--total N`: another curve (e.g. a quick shape in a debug build), 1,000 live.
    let total = args
        .iter()
        .position(|a| a == "--total")
        .and_then(|i| args.get(i + 1)?.parse::<usize>().ok());
    let sizes = if let Some(total) = total {
        Sizes {
            live: 1_000.min(total / 2).max(1),
            checkpoints: vec![0, total / 10, total / 4, total / 2, total],
            rehydrations: 500.min(total / 2),
        }
    } else if full {
        Sizes {
            live: 1_000,
            checkpoints: vec![0, 1_000, 10_000, 25_000, 50_000, 75_000, 100_000],
            rehydrations: 2_000,
        }
    } else {
        Sizes {
            live: 50,
            checkpoints: vec![0, 100, 300],
            rehydrations: 40,
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
    let result = rt.block_on(run(&sizes));
    rt.shutdown_timeout(Duration::from_secs(1));
    if let Err(e) = result {
        eprintln!("hibernation bench failed: {e:#}");
        std::process::exit(1);
    }
}

async fn start_node(db: &std::path::Path, live: usize) -> Result<(Arc<Node>, String)> {
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
        max_workstreams: live,
        idle_timeout: None,
        // Long: workstreams hibernate to make room, not by the clock, so the sample is
        // exactly "everything beyond the newest `live`".
        hibernate_after: Some(Duration::from_secs(24 * 3600)),
    };
    let options = NodeOptions {
        node_id: "bench".into(),
        model: "fake".into(),
        ..NodeOptions::default()
    };
    let store = turnstone_store::StoreConfig::sqlite(db);
    let persistence = turnstone_node::persist::Persistence::open(&store, "bench")
        .await
        .map_err(|e| anyhow!("store: {e}"))?;
    let node = Node::with_persistence(engine, manager, auth, options, persistence);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let served = node.clone();
    tokio::spawn(async move {
        if let Err(e) = server::run(listener, served, std::future::pending()).await {
            eprintln!("server stopped: {e}");
        }
    });
    Ok((node, base))
}

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: Arc<str>,
}

impl Client {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await?;
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("{path}: {status} {body}");
        }
        Ok(body)
    }

    /// Creates a workstream and gives it one turn; returns its id.
    async fn populate_one(&self, n: usize) -> Result<String> {
        let created = self
            .call(
                reqwest::Method::POST,
                "/v1/api/workstreams/new",
                Some(json!({"name": format!("bench-{n}")})),
            )
            .await?;
        let ws_id = created["ws_id"]
            .as_str()
            .ok_or_else(|| anyhow!("no ws_id in {created}"))?
            .to_string();
        let sent = self
            .call(
                reqwest::Method::POST,
                "/v1/api/send",
                Some(json!({"ws_id": ws_id, "message": format!("note number {n}")})),
            )
            .await?;
        if sent["status"] != "ok" {
            bail!("send to a fresh workstream: {sent}");
        }
        Ok(ws_id)
    }
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Nearest-rank percentile of sorted samples, in milliseconds.
fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// A small deterministic shuffle (xorshift), so runs sample the same order.
fn shuffle<T>(items: &mut [T]) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..items.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        items.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

async fn run(sizes: &Sizes) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (node, base) = start_node(&dir.path().join("bench.db"), sizes.live).await?;
    let client = Client {
        http: reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(CONCURRENCY * 2)
            .build()?,
        base: base.into(),
    };
    println!(
        "hibernation bench: max_workstreams {} live, SQLite, {} checkpoints",
        sizes.live,
        sizes.checkpoints.len()
    );
    println!("| workstreams | live | hibernated | RSS MiB | per workstream KiB | create+send/s |");
    println!("|---|---|---|---|---|---|");
    let base_rss = rss_bytes();
    let mut ids: Vec<String> = Vec::new();
    for &target in &sizes.checkpoints {
        let started = Instant::now();
        let before = ids.len();
        while ids.len() < target {
            let batch = (target - ids.len()).min(CONCURRENCY);
            let first = ids.len();
            let made = futures::future::try_join_all((first..first + batch).map(|n| {
                let c = client.clone();
                async move { c.populate_one(n).await }
            }))
            .await?;
            ids.extend(made);
        }
        // Let the last turns finish and the writer commit before reading RSS.
        if let Some(p) = &node.persistence {
            p.writer.flush().await.map_err(|e| anyhow!("flush: {e}"))?;
        }
        let rate = if ids.len() > before {
            (ids.len() - before) as f64 / started.elapsed().as_secs_f64()
        } else {
            0.0
        };
        let rss = rss_bytes();
        let per = if ids.is_empty() {
            0.0
        } else {
            rss.saturating_sub(base_rss) as f64 / 1024.0 / ids.len() as f64
        };
        println!(
            "| {} | {} | {} | {:.1} | {:.2} | {:.0} |",
            ids.len(),
            node.manager.len(),
            node.manager.hibernated_len(),
            mib(rss),
            per,
            rate
        );
    }

    // Rehydration latency: hibernated ones in random order, versus a live one.
    let mut sleeping: Vec<String> = ids
        .iter()
        .filter(|id| node.manager.hibernated(id).is_some())
        .cloned()
        .collect();
    shuffle(&mut sleeping);
    sleeping.truncate(sizes.rehydrations);
    if sleeping.is_empty() {
        bail!("nothing hibernated: max_workstreams too large for the sizes");
    }
    let live_id = ids
        .iter()
        .rev()
        .find(|id| node.workstream(id).is_some())
        .cloned()
        .ok_or_else(|| anyhow!("no live workstream"))?;
    let mut floor = Vec::with_capacity(sleeping.len());
    for _ in 0..sleeping.len() {
        let t = Instant::now();
        client
            .call(
                reqwest::Method::GET,
                &format!("/v1/api/workstreams/{live_id}/queue"),
                None,
            )
            .await?;
        floor.push(t.elapsed());
    }
    let mut wake = Vec::with_capacity(sleeping.len());
    for id in &sleeping {
        let t = Instant::now();
        client
            .call(
                reqwest::Method::GET,
                &format!("/v1/api/workstreams/{id}/queue"),
                None,
            )
            .await?;
        wake.push(t.elapsed());
        let history = node
            .workstream(id)
            .map(|w| w.history().len())
            .unwrap_or_default();
        if history < 2 {
            bail!("workstream {id} came back with {history} messages, expected its turn");
        }
    }
    floor.sort();
    wake.sort();
    println!();
    println!(
        "| request (n = {}) | p50 ms | p90 ms | p99 ms | max ms |",
        wake.len()
    );
    println!("|---|---|---|---|---|");
    for (name, samples) in [
        ("live workstream (HTTP floor)", &floor),
        ("hibernated → rehydrated", &wake),
    ] {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} |",
            pct(samples, 50.0),
            pct(samples, 90.0),
            pct(samples, 99.0),
            pct(samples, 100.0)
        );
    }
    println!(
        "rehydrations counted: {}, hibernations counted: {}",
        node.hibernation.rehydrations(),
        node.hibernation.hibernations()
    );
    Ok(())
}
