//! Console benchmark: `cargo bench -p turnstone-console --bench cluster` measures
//!
//! 1. `GET /v1/api/cluster/overview` latency (p50/p99) with 1,000 simulated nodes (the
//!    original's design size; `--nodes N` for another) — light
//!    fake node servers (in a child process: this binary re-executed) serving `/health` and
//!    a 10-workstream `/v1/api/dashboard`, plus their heartbeat keys in Redis — while the
//!    collector polls all of them every second; also `/nodes` and `/workstreams`;
//! 2. the collector's CPU share: CPU time of this process (the console only; the fake
//!    nodes run in the child) over wall time, while idle apart from polling, and that cost
//!    per node per poll;
//! 3. proxy overhead: a plain `GET` direct to a node vs through `/node/{id}/…` (p50/p99),
//!    and SSE delivery latency (frame written by the node → frame read by the client)
//!    direct vs through the proxy;
//! 4. fan-out: 100 dashboards connect to `/v1/api/cluster/events` at once; how long each
//!    takes to read its snapshot (megabytes at 1,000 nodes); then one event published on the
//!    cluster channel every 10 ms; delivery latency (publish → read, p50/p99) over every
//!    dashboard, how many events a dashboard did not get, and the resyncs the console
//!    announced (with its `sse_dropped` / `sse_resyncs` counters).
//!
//! Without `--bench` (`cargo test --benches`) it runs tiny sizes so it never rots;
//! `--samples N` sets the requests per measured route (2,000 with `--bench`). Needs
//! Redis on 127.0.0.1:6379. Results are recorded in `docs/console.md` (Benchmarks).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::routing::get;
use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::Instant;
use turnstone_console::{ConsoleConfig, NodeCredentials, Options};
use turnstone_runtime::auth::{AUDIENCE_CONSOLE, Authenticator, ConfigToken, TokenRole};

const TOKEN: &str = "bench-console-token";
const REDIS: &str = "redis://127.0.0.1:6379/0";
const CHILD: &str = "--fake-nodes";

struct Sizes {
    nodes: usize,
    samples: usize,
    cpu_window: Duration,
    sse_frames: usize,
    dashboards: usize,
    fanout_events: usize,
}

fn start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn report(name: &str, mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let (p50, p99) = (pct(&v, 0.5), pct(&v, 0.99));
    println!(
        "{name:<44} p50 {:>10}  p99 {:>10}  (n={})",
        ms(p50),
        ms(p99),
        v.len()
    );
    (p50, p99)
}

/// utime + stime of this process, from /proc (USER_HZ = 100).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn fake_node_router(id: String) -> Router {
    let workstreams: Vec<serde_json::Value> = (0..10)
        .map(|i| json!({"id": format!("{id}-{i:02}"), "name": format!("ws-{i}"), "state": if i == 0 {"running"} else {"idle"},
            "title": "", "tokens": 100 + i, "context_ratio": 0.1, "activity": "", "activity_state": "",
            "tool_calls": 1, "node": "local", "model": "m", "model_alias": ""}))
        .collect();
    let dashboard = json!({"workstreams": workstreams, "aggregate": {"total_tokens": 1045, "total_tool_calls": 10,
        "active_count": 1, "total_count": 10, "uptime_seconds": 1.0, "node": "local"}})
    .to_string();
    let health = json!({"status": "ok", "version": env!("CARGO_PKG_VERSION"), "node_id": id, "uptime_seconds": 1.0,
        "model": "m", "max_ws": 50, "workstreams": {"total": 10, "idle": 9, "thinking": 0, "running": 1, "attention": 0, "error": 0},
        "backend": {"status": "up", "circuit_state": "closed"}, "events": {"node_seq": 1, "truncations": 0},
        "event_loop_lag_ms": 0.1})
    .to_string();
    let json_ok = |body: String| ([("content-type", "application/json")], body);
    Router::new()
        .route("/health", get(move || async move { json_ok(health) }))
        .route(
            "/v1/api/dashboard",
            get(move || async move { json_ok(dashboard) }),
        )
        .route(
            "/v1/api/ping",
            get(move || async move { json_ok("{\"pong\":true}".into()) }),
        )
}

async fn serve(router: Router) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, router).await.unwrap() });
    url
}

/// The child: N fake nodes; prints their URLs, then serves until killed (also when the
/// parent dies).
async fn child(n: usize) {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    for i in 0..n {
        let url = serve(fake_node_router(format!("sim-{i:03}"))).await;
        println!("{url}");
    }
    println!("ready");
    std::future::pending::<()>().await;
}

/// A node whose event stream writes one frame (carrying its send time) every `every`.
async fn sse_node(every: Duration) -> String {
    let router = Router::new()
        .route(
            "/v1/api/events",
            get(move || async move {
                let frames = futures::stream::unfold((), move |()| async move {
                    tokio::time::sleep(every).await;
                    let sent = start().elapsed().as_nanos();
                    Some((
                        Ok::<_, std::convert::Infallible>(Bytes::from(format!(
                            "data: {{\"t\":{sent}}}\r\n\r\n"
                        ))),
                        (),
                    ))
                });
                (
                    [("content-type", "text/event-stream")],
                    Body::from_stream(frames),
                )
            }),
        )
        .route("/v1/api/ping", get(|| async { "{\"pong\":true}" }));
    serve(router).await
}

async fn sse_latency(http: &reqwest::Client, url: &str, frames: usize) -> Vec<Duration> {
    let resp = http.get(url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{url}");
    let mut stream = resp.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::with_capacity(frames);
    while out.len() < frames {
        let chunk = stream.next().await.unwrap().unwrap();
        let now = start().elapsed().as_nanos();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\r\n\r\n") {
            let frame: String = buf.drain(..end + 4).collect();
            if let Some(t) = frame.split("\"t\":").nth(1).and_then(|r| {
                r.trim_end_matches(|c: char| !c.is_ascii_digit())
                    .parse::<u128>()
                    .ok()
            }) {
                out.push(Duration::from_nanos(
                    u64::try_from(now.saturating_sub(t)).unwrap_or(0),
                ));
            }
        }
    }
    out
}

async fn run(sizes: Sizes) {
    start();
    let prefix = format!("bench{}", std::process::id());
    // The fake nodes, in a child process.
    let exe = std::env::current_exe().unwrap();
    let mut kid = tokio::process::Command::new(exe)
        .args([CHILD, &sizes.nodes.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(kid.stdout.take().unwrap()).lines();
    let mut urls = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line == "ready" {
            break;
        }
        urls.push(line);
    }
    let client = redis::Client::open(REDIS).unwrap();
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis on 127.0.0.1:6379");
    for (i, url) in urls.iter().enumerate() {
        let v = json!({"server_url": url, "started": 1.0e9, "max_ws": 50}).to_string();
        let _: () = redis::cmd("SET")
            .arg(format!("{prefix}:node:sim-{i:03}"))
            .arg(v)
            .arg("EX")
            .arg(600)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let sse_url = sse_node(Duration::from_millis(10)).await;
    let _: () = redis::cmd("SET")
        .arg(format!("{prefix}:node:sse"))
        .arg(json!({"server_url": sse_url, "started": 1.0e9, "max_ws": 50}).to_string())
        .arg("EX")
        .arg(600)
        .query_async(&mut conn)
        .await
        .unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let console = turnstone_console::start(
        Options {
            config: ConsoleConfig {
                prefix: prefix.clone(),
                poll_interval: Duration::from_secs(1),
                discovery_interval: Duration::from_secs(1),
                ..ConsoleConfig::default()
            },
            redis: turnstone_queue::RedisSettings::from_url(REDIS),
            store: None,
            auth: Authenticator::new(
                true,
                None,
                vec![ConfigToken::new(TOKEN, TokenRole::Full)],
                AUDIENCE_CONSOLE,
            ),
            credentials: NodeCredentials::none(),
        },
        listener,
    )
    .await
    .unwrap();
    let base = console.url();
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let get = |path: String| {
        let req = http.get(format!("{base}{path}")).bearer_auth(TOKEN).send();
        async move {
            req.await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let o = get("/v1/api/cluster/overview".into()).await;
        if o["workstreams"].as_u64() == Some((sizes.nodes * 10) as u64) {
            break;
        }
        assert!(Instant::now() < deadline, "not every node polled: {o}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "== console with {} simulated nodes ({} workstreams), polled every 1 s",
        sizes.nodes,
        sizes.nodes * 10
    );

    // Collector CPU share, idle apart from discovery and polling.
    let (c0, w0) = (cpu_time(), Instant::now());
    tokio::time::sleep(sizes.cpu_window).await;
    let (cpu, wall) = (cpu_time() - c0, w0.elapsed());
    println!(
        "collector CPU: {:.1} % of one core at a 1 s poll interval ({} CPU over {} wall); ≈ {:.2} % at the default 10 s",
        cpu.as_secs_f64() / wall.as_secs_f64() * 100.0,
        ms(cpu),
        ms(wall),
        cpu.as_secs_f64() / wall.as_secs_f64() * 10.0
    );
    println!(
        "collector cost: {:.1} µs of CPU per node per poll",
        cpu.as_secs_f64() * 1e6 / (sizes.nodes as f64 * wall.as_secs_f64())
    );

    for (name, path) in [
        ("GET /v1/api/cluster/overview", "/v1/api/cluster/overview"),
        (
            "GET /v1/api/cluster/nodes?limit=200",
            "/v1/api/cluster/nodes?limit=200",
        ),
        (
            "GET /v1/api/cluster/nodes?limit=1000",
            "/v1/api/cluster/nodes?limit=1000",
        ),
        (
            "GET /v1/api/cluster/workstreams (50/page)",
            "/v1/api/cluster/workstreams",
        ),
    ] {
        let mut v = Vec::with_capacity(sizes.samples);
        for _ in 0..sizes.samples {
            let t = Instant::now();
            let r = http
                .get(format!("{base}{path}"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap();
            let _ = r.bytes().await.unwrap();
            v.push(t.elapsed());
        }
        report(name, v);
    }

    println!("== proxy overhead");
    let node = &urls[0];
    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    for _ in 0..sizes.samples {
        let t = Instant::now();
        let _ = http
            .get(format!("{node}/v1/api/ping"))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        direct.push(t.elapsed());
        let t = Instant::now();
        let r = http
            .get(format!("{base}/node/sim-000/v1/api/ping"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await.unwrap();
        proxied.push(t.elapsed());
    }
    let (d50, d99) = report("plain GET, direct", direct);
    let (p50, p99) = report("plain GET, through /node/{id}/", proxied);
    println!(
        "proxy adds {} at p50, {} at p99",
        ms(p50.saturating_sub(d50)),
        ms(p99.saturating_sub(d99))
    );
    let direct = sse_latency(&http, &format!("{sse_url}/v1/api/events"), sizes.sse_frames).await;
    let proxied = sse_latency(
        &http,
        &format!("{base}/node/sse/v1/api/events"),
        sizes.sse_frames,
    )
    .await;
    let (d50, d99) = report("SSE frame delivery, direct", direct);
    let (p50, p99) = report("SSE frame delivery, through the proxy", proxied);
    println!(
        "proxy adds {} at p50, {} at p99",
        ms(p50.saturating_sub(d50)),
        ms(p99.saturating_sub(d99))
    );

    fanout(&http, &base, &mut conn, &prefix, &sizes).await;

    let _: i64 = redis::cmd("EVAL")
        .arg("local n=0 for _,k in ipairs(redis.call('KEYS', ARGV[1])) do n=n+redis.call('DEL', k) end return n")
        .arg(0)
        .arg(format!("{prefix}:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    console.shutdown().await;
    let _ = kid.kill().await;
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What one dashboard saw.
#[derive(Default)]
struct Seen {
    /// Connect → its first snapshot frame fully read.
    snapshot: Option<Duration>,
    snapshot_bytes: usize,
    /// Publish → read, per tick event.
    latencies: Vec<Duration>,
    /// Snapshot frames marked `"resync": true` (the console's word that it skipped events).
    resyncs: usize,
}

/// `sizes.dashboards` clients on the console's cluster event stream, all connected at once;
/// once every one has read its snapshot (the time each took is reported), an event
/// carrying its publish time goes to the cluster channel every 10 ms; every dashboard's
/// delivery latency, the events it did not get, and the resyncs it was told about.
async fn fanout(
    http: &reqwest::Client,
    base: &str,
    conn: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
    sizes: &Sizes,
) {
    let expected = sizes.fanout_events;
    let (snapshot_tx, mut snapshot_rx) = tokio::sync::mpsc::channel::<()>(sizes.dashboards);
    let published = std::sync::Arc::new(tokio::sync::Notify::new());
    let mut readers = Vec::new();
    for _ in 0..sizes.dashboards {
        let (http, url) = (http.clone(), format!("{base}/v1/api/cluster/events"));
        let (snapshot_tx, published) = (snapshot_tx.clone(), published.clone());
        readers.push(tokio::spawn(async move {
            let connect = Instant::now();
            let resp = http.get(url).bearer_auth(TOKEN).send().await.unwrap();
            assert_eq!(resp.status(), 200);
            let mut stream = resp.bytes_stream();
            // Bytes read and not yet framed; the snapshot frame alone is megabytes at 1,000
            // nodes, so each chunk is searched only where no frame end was looked for yet.
            let mut buf: Vec<u8> = Vec::new();
            let mut searched = 0;
            let mut seen = Seen::default();
            let reading = async {
                while seen.latencies.len() < expected {
                    let Some(Ok(chunk)) = stream.next().await else {
                        break;
                    };
                    let now = start().elapsed().as_nanos();
                    buf.extend_from_slice(&chunk);
                    while let Some(at) = buf[searched..].windows(4).position(|w| w == b"\r\n\r\n") {
                        let frame: Vec<u8> = buf.drain(..searched + at + 4).collect();
                        searched = 0;
                        // Tick frames are small; only a large one can be a snapshot.
                        if frame.len() > 200 && contains(&frame, b"\"type\":\"snapshot\"") {
                            if seen.snapshot.is_none() {
                                seen.snapshot = Some(connect.elapsed());
                                seen.snapshot_bytes = frame.len();
                                let _ = snapshot_tx.send(()).await;
                            } else if contains(&frame, b"\"resync\":true") {
                                seen.resyncs += 1;
                            }
                            continue;
                        }
                        let frame = String::from_utf8_lossy(&frame);
                        if let Some(t) = frame.split("\"bench_t\":").nth(1).and_then(|r| {
                            r.trim_end_matches(|c: char| !c.is_ascii_digit())
                                .parse::<u128>()
                                .ok()
                        }) {
                            seen.latencies.push(Duration::from_nanos(
                                u64::try_from(now.saturating_sub(t)).unwrap_or(0),
                            ));
                        }
                    }
                    searched = buf.len().saturating_sub(3);
                }
            };
            // Events still missing 5 s after the last one was published are counted missing.
            let grace = async {
                published.notified().await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            };
            tokio::select! {
                () = reading => {}
                () = grace => {}
            }
            seen
        }));
    }
    drop(snapshot_tx);
    // Every dashboard has read its snapshot before the first event (or 120 s passed).
    let waited = Instant::now();
    let mut with_snapshot = 0;
    while with_snapshot < sizes.dashboards {
        match tokio::time::timeout(Duration::from_secs(120), snapshot_rx.recv()).await {
            Ok(Some(())) => with_snapshot += 1,
            _ => break,
        }
    }
    let all_snapshots = waited.elapsed();
    let channel = format!("{prefix}:events:cluster");
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    for _ in 0..expected {
        tick.tick().await;
        let event = json!({"type": "bench_tick", "bench_t": start().elapsed().as_nanos() as u64});
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&channel)
            .arg(event.to_string())
            .query_async(conn)
            .await
            .unwrap();
    }
    published.notify_waiters();
    let mut all = Vec::new();
    let mut snapshots = Vec::new();
    let (mut short, mut resyncs, mut snapshot_bytes) = (0, 0, 0);
    for r in readers {
        let seen = r.await.unwrap();
        short += expected - seen.latencies.len();
        resyncs += seen.resyncs;
        snapshots.extend(seen.snapshot);
        snapshot_bytes = snapshot_bytes.max(seen.snapshot_bytes);
        all.extend(seen.latencies);
    }
    let metrics = http
        .get(format!("{base}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let counter = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
            .map_or_else(|| "absent".to_string(), |v| v.to_string())
    };
    println!(
        "== fan-out: {} dashboards × {expected} events on the cluster channel",
        sizes.dashboards
    );
    println!(
        "snapshots read: {with_snapshot} of {} ({:.1} kB each), all within {}",
        sizes.dashboards,
        snapshot_bytes as f64 / 1000.0,
        ms(all_snapshots)
    );
    report("snapshot, connect → read (each dashboard)", snapshots);
    report("cluster event, publish → every dashboard", all);
    println!(
        "events not delivered: {short}; resyncs seen by dashboards: {resyncs}; console sse_dropped {} sse_resyncs {}",
        counter("turnstone_console_sse_dropped_total"),
        counter("turnstone_console_sse_resyncs_total")
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if args.get(1).map(String::as_str) == Some(CHILD) {
        let n = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1);
        rt.block_on(child(n));
        return;
    }
    let mut sizes = if args.iter().any(|a| a == "--bench") {
        Sizes {
            nodes: 1_000,
            samples: 2_000,
            cpu_window: Duration::from_secs(10),
            sse_frames: 1_000,
            dashboards: 100,
            fanout_events: 500,
        }
    } else {
        Sizes {
            nodes: 5,
            samples: 20,
            cpu_window: Duration::from_millis(200),
            sse_frames: 10,
            dashboards: 3,
            fanout_events: 10,
        }
    };
    // `--name N`, when given and a number.
    let number = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    sizes.nodes = number("--nodes").unwrap_or(sizes.nodes);
    sizes.samples = number("--samples").unwrap_or(sizes.samples);
    rt.block_on(run(sizes));
}
