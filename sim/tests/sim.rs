//! The simulator against a real Redis (127.0.0.1:6379, started by `scripts/services`), each
//! test under a prefix of its own: a real queue client talks to simulated nodes, a seeded
//! burst loses and duplicates nothing, killed nodes stop heartbeating, and a real console
//! process follows 1,000 simulated nodes for 100 dashboards.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use redis::aio::MultiplexedConnection;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::time::Instant;
use turnstone_proto::mq::{CreateWorkstreamMessage, SendMessage};
use turnstone_queue::{TurnstoneClient, WaitOptions};
use turnstone_sim::scenario::{digest, drive, schedule};
use turnstone_sim::{Cluster, Metrics, SimConfig};

const REDIS_URL: &str = "redis://127.0.0.1:6379/0";

fn prefix() -> String {
    format!("sim{}", turnstone_proto::ids::new_correlation_id())
}

/// A fast configuration (no streaming delay, short latencies) under `prefix`.
fn config(prefix: &str, extra: &[&str]) -> SimConfig {
    let mut args = vec![
        "turnstone-sim",
        "--redis-url",
        REDIS_URL,
        "--prefix",
        prefix,
        "--llm-latency",
        "0.02",
        "--llm-latency-sd",
        "0.01",
        "--tokens",
        "40",
        "--tokens-sd",
        "10",
        "--tokens-per-sec",
        "0",
        "--tool-latency",
        "0.01",
        "--drain-timeout",
        "30",
    ];
    args.extend_from_slice(extra);
    SimConfig::parse_from(args)
}

async fn redis() -> MultiplexedConnection {
    redis::Client::open(REDIS_URL)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("Redis on 127.0.0.1:6379 (scripts/services starts it)")
}

async fn keys(conn: &mut MultiplexedConnection, pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .unwrap();
        out.extend(batch);
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

/// Every key under `prefix` goes (heartbeats, leases, streams, queues).
async fn cleanup(prefix: &str) {
    let mut conn = redis().await;
    for key in keys(&mut conn, &format!("{prefix}:*")).await {
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_client_runs_turns_on_simulated_nodes() {
    let p = prefix();
    let cfg = config(
        &p,
        &[
            "--nodes",
            "3",
            "--max-tool-rounds",
            "2",
            "--tool-failure-rate",
            "0",
        ],
    );
    let cluster = Cluster::start(cfg, Arc::new(Metrics::default()))
        .await
        .unwrap();
    let client = TurnstoneClient::new(REDIS_URL, &p).await.unwrap();

    // Heartbeats as the original simulator writes them, read the way producers do.
    let nodes = client.list_nodes().await.unwrap();
    assert_eq!(nodes.len(), 3);
    for (i, n) in nodes.iter().enumerate() {
        let id = format!("sim-{i:04}");
        assert_eq!(n["node_id"], id.as_str());
        assert_eq!(n["server_url"], format!("sim://{id}"));
        assert_eq!(n["sim"], true);
        assert_eq!(n["max_ws"], 10);
        assert_eq!(n["workstreams"], 0);
    }

    // A create through the shared queue: announced on global, leased to its node.
    let ws = client
        .create_workstream_and_wait(
            CreateWorkstreamMessage {
                name: "probe".into(),
                ..CreateWorkstreamMessage::default()
            },
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(ws.len(), 32);
    let owner = client.owner(&ws).await.unwrap().unwrap();
    assert!(owner.starts_with("sim-"), "{owner}");

    // A send routed to the owner's queue; the turn read from the workstream's stream.
    let mut seen = Vec::new();
    let msg = SendMessage {
        ws_id: ws.clone(),
        message: "hello".into(),
        ..SendMessage::default()
    };
    let cid = msg.correlation_id.clone();
    let events: Arc<parking_lot::Mutex<Vec<String>>> = Arc::default();
    let sink = events.clone();
    let turn = client
        .send_and_wait(
            msg,
            WaitOptions {
                timeout: Duration::from_secs(20),
                on_event: Some(Box::new(move |e| {
                    sink.lock().push(e.type_name().to_string())
                })),
                approver: None,
            },
        )
        .await
        .unwrap();
    seen.extend(events.lock().drain(..));
    assert!(turn.ok(), "{turn:?}");
    assert_eq!(turn.correlation_id, cid);
    assert_eq!(turn.ws_id, ws);
    assert!(!turn.content().is_empty());
    assert_eq!(turn.final_content, turn.content());
    assert!(turn.tool_results.len() <= 2);
    assert!(turn.tool_results.iter().all(|(name, _)| name == "bash"));
    // The `ack` travels on pub/sub, the turn on the workstream's stream: two connections, so
    // where the ack falls among the turn's events is not fixed. It comes exactly once; the
    // stream keeps the bridge's order: thinking, content…, stream_end, status, idle,
    // turn_complete.
    assert_eq!(seen.iter().filter(|t| *t == "ack").count(), 1, "{seen:?}");
    let turn_events: Vec<&str> = seen
        .iter()
        .map(String::as_str)
        .filter(|t| *t != "ack")
        .collect();
    assert_eq!(turn_events.first(), Some(&"state_change"), "{seen:?}");
    let tail: Vec<&str> = turn_events.iter().copied().rev().take(4).rev().collect();
    assert_eq!(
        tail,
        ["stream_end", "status", "state_change", "turn_complete"],
        "{seen:?}"
    );
    assert!(seen.iter().any(|t| t == "content"));

    // A send without a workstream creates one on the least loaded node, then runs the turn.
    let turn = client
        .send_and_wait(
            SendMessage {
                message: "new one".into(),
                ..SendMessage::default()
            },
            WaitOptions {
                timeout: Duration::from_secs(20),
                ..WaitOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(turn.ok(), "{turn:?}");
    assert_ne!(turn.ws_id, ws);
    assert!(!turn.final_content.is_empty());

    // An unknown workstream is refused with an ack of status error.
    let refused = client
        .send_and_wait(
            SendMessage {
                ws_id: "0123456789abcdef0123456789abcdef".into(),
                message: "nobody".into(),
                ..SendMessage::default()
            },
            WaitOptions {
                timeout: Duration::from_secs(10),
                ..WaitOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(refused.errors, ["Unknown workstream"], "{refused:?}");
    cluster.stop();
    cleanup(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_burst_yields_exactly_one_turn_per_send() {
    let p = prefix();
    let cfg = config(
        &p,
        &[
            "--scenario",
            "burst",
            "--burst-size",
            "150",
            "--nodes",
            "4",
            "--seed",
            "9",
        ],
    );
    let report = turnstone_sim::run(cfg.clone()).await.unwrap();
    assert_eq!(report.total_sent, 150);
    assert_eq!(report.total_turns, 150);
    assert_eq!(
        (report.lost, report.duplicated, report.total_errors),
        (0, 0, 0)
    );
    assert_eq!(report.interrupted_turns, 0);
    assert_eq!(report.turns_per_node.values().sum::<u64>(), 150);
    assert_eq!(
        report.schedule_digest,
        format!("{:016x}", digest(&schedule(&cfg)))
    );
    let l = &report.latency;
    assert!(
        0.0 < l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max,
        "{l:?}"
    );
    assert!(report.duration_seconds > 0.0);
    assert!(report.throughput.turns_per_sec > 0.0);
    assert_eq!(report.utilization.mean_ws_per_node, 2.0);
    assert!(report.tool_failures <= report.tool_calls);

    // Counted again on Redis: one turn_complete per send in the workstreams' streams.
    let mut conn = redis().await;
    let mut completes: HashMap<String, u32> = HashMap::new();
    for stream in keys(&mut conn, &format!("{p}:stream:*")).await {
        let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap();
        for (_, fields) in entries {
            let fields: HashMap<_, _> = fields.into_iter().collect();
            if fields.get("type").map(String::as_str) == Some("turn_complete") {
                let event: Value = serde_json::from_str(&fields["event"]).unwrap();
                let cid = event["correlation_id"].as_str().unwrap().to_string();
                *completes.entry(cid).or_default() += 1;
            }
        }
    }
    assert_eq!(completes.len(), 150);
    assert!(completes.values().all(|n| *n == 1));
    cleanup(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_nodes_stop_heartbeating_and_their_work_moves() {
    let p = prefix();
    let cfg = config(
        &p,
        &[
            "--scenario",
            "node-failure",
            "--nodes",
            "4",
            "--mps",
            "10",
            "--duration",
            "4",
            "--node-kill-interval",
            "1",
            "--node-kill-count",
            "1",
            "--heartbeat-ttl",
            "2",
            "--seed",
            "5",
        ],
    );
    let metrics = Arc::new(Metrics::default());
    let cluster = Cluster::start(cfg.clone(), metrics.clone()).await.unwrap();
    let report = drive(&cfg, &cluster, &metrics).await.unwrap();
    assert_eq!(report.node_kills, 2, "{report:?}");
    assert_eq!(report.lost, 0, "{report:?}");
    assert_eq!(report.duplicated, 0);
    assert_eq!(
        report.total_turns + report.interrupted_turns + report.total_errors,
        report.total_sent,
        "{report:?}"
    );
    let mut conn = redis().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let live: Vec<String> = keys(&mut conn, &format!("{p}:node:*")).await;
        let killed_gone = report
            .killed_nodes
            .iter()
            .all(|k| !live.contains(&format!("{p}:node:{k}")));
        if killed_gone {
            assert_eq!(live.len(), 2, "{live:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "killed heartbeats still there: {live:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The killed nodes' queues were handed to the shared queue and emptied.
    for k in &report.killed_nodes {
        let len: i64 = redis::cmd("LLEN")
            .arg(format!("{p}:inbound:{k}"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(len, 0, "{k}");
    }
    cluster.stop();
    cleanup(&p).await;
}

/// `target/<profile>/<name>`, built with the same profile as this test.
fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let path = profile.join(name);
    assert!(
        path.is_file(),
        "binary `{name}` not found at {}: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// A real console process under `prefix` (signed heartbeats with `secret`, `token` for the
/// test's requests), logging into `dir`; returns it and its URL.
/// The cluster secret and token the console tests share with their simulated nodes.
const SECRET: &str = "sim-console-test-secret-0123456789abcdef";
const TOKEN: &str = "sim-console-test-token";

/// `nodes` simulated nodes whose heartbeats are signed with [`SECRET`] (what a console
/// with that secret trusts), slow to expire.
async fn signed_cluster(prefix: &str, nodes: &str) -> Arc<Cluster> {
    let mut cfg = config(prefix, &["--nodes", nodes, "--heartbeat-ttl", "30"]);
    cfg.jwt_secret = Some(SECRET.into());
    Cluster::start(cfg, Arc::new(Metrics::default()))
        .await
        .unwrap()
}

async fn start_console(
    dir: &Path,
    prefix: &str,
    secret: &str,
    token: &str,
    extra: &[&str],
) -> (tokio::process::Child, String) {
    let log = dir.join("console.log");
    let mut console = Command::new(workspace_binary("turnstone-console"))
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--redis-url",
            REDIS_URL,
            "--prefix",
            prefix,
            "--auth-token",
            token,
        ])
        .args(extra)
        .env("TURNSTONE_JWT_SECRET", secret)
        .env("HOME", dir)
        .env_remove("TURNSTONE_CONFIG")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(console.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(15), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some((_, url)) = line.split_once("listening on ") {
                return url.trim().to_string();
            }
        }
        panic!(
            "console exited: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    })
    .await
    .expect("console did not start");
    (console, url)
}

async fn overview(http: &reqwest::Client, url: &str, token: &str) -> Value {
    http.get(format!("{url}/v1/api/cluster/overview"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls the console's overview until `done` holds for it (or `limit` passes); returns the
/// last overview read.
async fn overview_until(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    limit: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let last = overview(http, url, token).await;
        if done(&last) || Instant::now() >= deadline {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One dashboard on the console's cluster event stream: the ids of the `ws_created` events it
/// has read, shared with the test.
fn dashboard(
    http: reqwest::Client,
    url: String,
    token: &'static str,
    created: Arc<parking_lot::Mutex<std::collections::HashSet<String>>>,
    connected: tokio::sync::mpsc::Sender<()>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let resp = http
            .get(format!("{url}/v1/api/cluster/events"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = resp.bytes_stream();
        let mut buf = String::new();
        let mut snapshot_seen = false;
        while let Some(chunk) = futures::StreamExt::next(&mut body).await {
            buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(end) = buf.find("\r\n\r\n").or_else(|| buf.find("\n\n")) {
                let frame: String = buf.drain(..end).collect();
                buf = buf.trim_start_matches(['\r', '\n']).to_string();
                let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                let event: Value = serde_json::from_str(data).unwrap();
                match event["type"].as_str() {
                    Some("snapshot") if !snapshot_seen => {
                        snapshot_seen = true;
                        connected.send(()).await.unwrap();
                    }
                    Some("ws_created") => {
                        created
                            .lock()
                            .insert(event["ws_id"].as_str().unwrap().to_string());
                    }
                    _ => {}
                }
            }
        }
    })
}

/// The console at the original's design size: a real console process discovers 1,000
/// simulated nodes (signed heartbeats), learns 1,000 workstreams from the cluster channel, and
/// fans every `ws_created` out to 100 dashboards on `/v1/api/cluster/events` — each reads all
/// 1,000, none is dropped (`sse_dropped` on `/metrics` stays 0). Latency and collector cost at
/// this size are the console bench's (`docs/benchmarks.md`); this checks that nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_process_follows_a_thousand_simulated_nodes_for_a_hundred_dashboards() {
    const NODES: usize = 1000;
    const DASHBOARDS: usize = 100;
    let p = prefix();
    let dir = tempfile::tempdir().unwrap();
    let cluster = signed_cluster(&p, "1000").await;
    let started = Instant::now();

    let (mut console, url) = start_console(
        dir.path(),
        &p,
        SECRET,
        TOKEN,
        &["--discovery-interval", "0.5", "--poll-interval", "1"],
    )
    .await;

    let http = reqwest::Client::new();
    let last = overview_until(&http, &url, TOKEN, Duration::from_secs(30), |o| {
        o["nodes"] == NODES
    })
    .await;
    assert_eq!(last["nodes"], NODES, "{last}");
    assert_eq!(last["capacity"]["max_ws"], NODES * 10, "{last}");
    let discovered = started.elapsed();
    let nodes: Value = http
        .get(format!("{url}/v1/api/cluster/nodes?limit=1000"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(nodes["total"], NODES, "{nodes}");

    // 100 dashboards attach (each has read its snapshot) before the workstreams appear.
    let created: Vec<_> = (0..DASHBOARDS)
        .map(|_| Arc::new(parking_lot::Mutex::new(std::collections::HashSet::new())))
        .collect();
    let (connected_tx, mut connected) = tokio::sync::mpsc::channel(DASHBOARDS);
    let dashboards: Vec<_> = created
        .iter()
        .map(|c| {
            dashboard(
                http.clone(),
                url.clone(),
                TOKEN,
                c.clone(),
                connected_tx.clone(),
            )
        })
        .collect();
    for _ in 0..DASHBOARDS {
        tokio::time::timeout(Duration::from_secs(20), connected.recv())
            .await
            .expect("a dashboard never got its snapshot");
    }

    // One workstream per node; the console learns them from the cluster channel.
    let ids: std::collections::HashSet<String> =
        futures::future::join_all((0..NODES).map(|node| {
            let cluster = cluster.clone();
            async move { cluster.create(node, "", "c0ffee000000").await.unwrap() }
        }))
        .await
        .into_iter()
        .collect();
    assert_eq!(ids.len(), NODES);
    let last = overview_until(&http, &url, TOKEN, Duration::from_secs(20), |o| {
        o["workstreams"] == NODES
    })
    .await;
    assert_eq!(last["workstreams"], NODES, "{last}");
    assert_eq!(last["states"]["idle"], NODES, "{last}");

    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && created.iter().any(|c| c.lock().len() < NODES) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (i, c) in created.iter().enumerate() {
        let seen = c.lock();
        assert_eq!(
            *seen,
            ids,
            "dashboard {i} read {} of {NODES} ws_created events",
            seen.len()
        );
    }
    let metrics = http
        .get(format!("{url}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped = metrics
        .lines()
        .find(|l| l.starts_with("turnstone_console_sse_dropped_total"))
        .unwrap_or_else(|| panic!("no SSE drop counter in /metrics:\n{metrics}"));
    assert!(dropped.ends_with(" 0"), "{dropped}");
    eprintln!("{NODES} simulated nodes discovered in {discovered:?}");
    for d in dashboards {
        d.abort();
    }
    cluster.stop();
    let _ = console.start_kill();
    cleanup(&p).await;
}

/// What one dashboard on the cluster event stream knows: the workstreams of its last
/// snapshot patched by the events since, the padding events it read, and the snapshots
/// (first and resyncs) it was sent.
#[derive(Debug, Default)]
struct View {
    snapshots: usize,
    resyncs: usize,
    workstreams: std::collections::HashSet<String>,
    pads: usize,
}

/// A dashboard that keeps a [`View`]. After its first snapshot it reads on only once `go`
/// holds: until then it is a client that has stopped reading.
fn viewing_dashboard(
    http: reqwest::Client,
    url: String,
    token: &'static str,
    view: Arc<parking_lot::Mutex<View>>,
    mut go: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let resp = http
            .get(format!("{url}/v1/api/cluster/events"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        while let Some(chunk) = futures::StreamExt::next(&mut body).await {
            buf.extend_from_slice(&chunk.unwrap());
            let mut hold = false;
            while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let frame: Vec<u8> = buf.drain(..end + 4).collect();
                let frame = String::from_utf8_lossy(&frame);
                let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                let event: Value = serde_json::from_str(data).unwrap();
                let mut v = view.lock();
                match event["type"].as_str() {
                    Some("snapshot") => {
                        hold = v.snapshots == 0;
                        v.snapshots += 1;
                        if event["resync"] == true {
                            v.resyncs += 1;
                        }
                        v.workstreams = event["nodes"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .flat_map(|n| n["workstreams"].as_array().unwrap())
                            .map(|w| w["id"].as_str().unwrap().to_string())
                            .collect();
                    }
                    Some("ws_created") => {
                        v.workstreams
                            .insert(event["ws_id"].as_str().unwrap().to_string());
                    }
                    Some("ws_closed") => {
                        v.workstreams.remove(event["ws_id"].as_str().unwrap());
                    }
                    Some("load_test_pad") => v.pads += 1,
                    _ => {}
                }
            }
            if hold {
                while !*go.borrow() {
                    if go.changed().await.is_err() {
                        break;
                    }
                }
            }
        }
    })
}

/// Waits until every view satisfies `done` (or `limit` passes).
async fn views_until(
    views: &[Arc<parking_lot::Mutex<View>>],
    limit: Duration,
    done: impl Fn(&View) -> bool,
) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !views.iter().all(|v| done(&v.lock())) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The console's fan-out never loses an event silently (the short form of the 1,000-node
/// fan-out bench, whose dashboards missed reads): simulated nodes, a console whose ring
/// holds 64 events, four dashboards that read and one that stops reading after its
/// snapshot. A burst of large events plus workstreams made and closed on the simulated
/// nodes pass while it is stalled. Every reading dashboard gets every event (or is told of
/// a resync) and ends with the cluster's workstreams; the stalled one, once it reads again,
/// is sent a snapshot marked `resync` (counted on `/metrics`) and ends with them too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_gets_every_event_or_a_visible_resync() {
    const NODES: usize = 20;
    const READERS: usize = 4;
    const PADS: usize = 300;
    let p = prefix();
    let dir = tempfile::tempdir().unwrap();
    let cluster = signed_cluster(&p, "20").await;
    let (mut console, url) = start_console(
        dir.path(),
        &p,
        SECRET,
        TOKEN,
        &[
            "--discovery-interval",
            "0.5",
            "--poll-interval",
            "1",
            "--sse-queue",
            "64",
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let last = overview_until(&http, &url, TOKEN, Duration::from_secs(30), |o| {
        o["nodes"] == NODES
    })
    .await;
    assert_eq!(last["nodes"], NODES, "{last}");

    // One workstream per node before the dashboards attach: their snapshots hold them.
    let create_one_per_node = || {
        futures::future::join_all((0..NODES).map(|node| {
            let cluster = cluster.clone();
            async move { cluster.create(node, "", "c0ffee000000").await.unwrap() }
        }))
    };
    let mut truth: std::collections::HashSet<String> =
        create_one_per_node().await.into_iter().collect();
    let last = overview_until(&http, &url, TOKEN, Duration::from_secs(20), |o| {
        o["workstreams"] == NODES
    })
    .await;
    assert_eq!(last["workstreams"], NODES, "{last}");

    let (go, stalled_go) = tokio::sync::watch::channel(false);
    let views: Vec<Arc<parking_lot::Mutex<View>>> = (0..=READERS).map(|_| Arc::default()).collect();
    let tasks: Vec<_> = views
        .iter()
        .enumerate()
        .map(|(i, view)| {
            let gate = if i == READERS {
                stalled_go.clone()
            } else {
                tokio::sync::watch::channel(true).1
            };
            viewing_dashboard(http.clone(), url.clone(), TOKEN, view.clone(), gate)
        })
        .collect();
    views_until(&views, Duration::from_secs(20), |v| v.snapshots > 0).await;
    for (i, v) in views.iter().enumerate() {
        let v = v.lock();
        assert_eq!(v.snapshots, 1, "dashboard {i} has no snapshot");
        assert_eq!(v.workstreams, truth, "dashboard {i}'s snapshot");
    }

    // A burst far beyond what the stalled client's buffers and the 64-event ring hold
    // (300 × 64 KiB), then workstreams made and closed on the simulated nodes.
    let mut conn = redis().await;
    let pad = "x".repeat(64 * 1024);
    for i in 0..PADS {
        let event = serde_json::json!({"type": "load_test_pad", "i": i, "pad": pad});
        let _: i64 = redis::cmd("PUBLISH")
            .arg(format!("{p}:events:cluster"))
            .arg(event.to_string())
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    truth.extend(create_one_per_node().await);
    let closed: Vec<String> = truth.iter().take(5).cloned().collect();
    for ws_id in &closed {
        assert!(cluster.close(ws_id).await, "{ws_id}");
        truth.remove(ws_id);
    }
    let last = overview_until(&http, &url, TOKEN, Duration::from_secs(20), |o| {
        o["workstreams"] == truth.len()
    })
    .await;
    assert_eq!(last["workstreams"], truth.len(), "{last}");

    let readers = &views[..READERS];
    views_until(readers, Duration::from_secs(60), |v| v.workstreams == truth).await;
    for (i, v) in readers.iter().enumerate() {
        let v = v.lock();
        assert_eq!(v.workstreams, truth, "reading dashboard {i}: {v:?}");
        assert!(
            v.pads == PADS || v.resyncs > 0,
            "reading dashboard {i} read {} of {PADS} events and was told of no resync",
            v.pads
        );
    }

    // The stalled client reads again: it is told it missed events and catches up.
    go.send(true).unwrap();
    let stalled = &views[READERS..];
    views_until(stalled, Duration::from_secs(60), |v| {
        v.resyncs > 0 && v.workstreams == truth
    })
    .await;
    {
        let v = stalled[0].lock();
        assert!(
            v.resyncs > 0,
            "the stalled dashboard read {} of {PADS} events and no resync",
            v.pads
        );
        assert!(v.pads < PADS, "{v:?}");
        assert_eq!(
            v.workstreams, truth,
            "the stalled dashboard after its resync"
        );
    }
    let metrics = http
        .get(format!("{url}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let counter = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{metrics}"))
    };
    assert!(counter("turnstone_console_sse_resyncs_total") >= 1);
    assert!(counter("turnstone_console_sse_dropped_total") >= 1);
    for t in tasks {
        t.abort();
    }
    cluster.stop();
    let _ = console.start_kill();
    cleanup(&p).await;
}
