//! Graceful drain on SIGTERM: the node with open event streams and turns in flight, the
//! bridge under traffic. Real processes, real Redis, the fake model streaming slowly.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::time::Instant;
use turnstone_testkit::{FakeLlm, FakeLlmConfig};

use super::harness::*;

/// What one SSE client saw: every frame (`id`, data) and whether the stream ended cleanly
/// (the server closed it; no transport error).
struct Seen {
    frames: Vec<(Option<u64>, Value)>,
    clean_end: bool,
}

/// Opens `path` on `url` and reads it until the server ends it (or `limit`); counts itself
/// in `opened` once the response head arrived.
fn sse_client(
    url: String,
    path: String,
    headers: Vec<(String, String)>,
    limit: Duration,
    opened: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<Seen> {
    tokio::spawn(async move {
        let http = reqwest::Client::new();
        let mut req = http.get(format!("{url}{path}")).bearer_auth(mint_token());
        for (k, v) in &headers {
            req = req.header(k, v);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        opened.fetch_add(1, Ordering::SeqCst);
        let mut stream = resp.bytes_stream();
        let mut buf = String::new();
        let mut frames = Vec::new();
        let deadline = Instant::now() + limit;
        let clean_end = loop {
            let chunk = match tokio::time::timeout_at(deadline, stream.next()).await {
                Err(_) => break false,
                Ok(None) => break true,
                Ok(Some(Err(_))) => break false,
                Ok(Some(Ok(c))) => c,
            };
            buf.push_str(&String::from_utf8_lossy(&chunk));
            frames.extend(take_sse_frames(&mut buf));
        };
        Seen { frames, clean_end }
    })
}

/// Exit status of `node`'s process within `limit` (panics when it is still running).
async fn exit_within(proc: &mut Proc, limit: Duration) -> std::process::ExitStatus {
    tokio::time::timeout(limit, proc.child.wait())
        .await
        .unwrap_or_else(|_| panic!("still running {limit:?} after SIGTERM"))
        .unwrap()
}

#[tokio::test]
async fn sigterm_drains_a_node_with_fifty_streams_and_turns_in_flight() {
    // ~2.5 s per turn: 200 characters streamed 4 at a time, 20 chunks a second.
    let llm = FakeLlm::start_with(FakeLlmConfig {
        tokens_per_sec: Some(20.0),
        ..FakeLlmConfig::default()
    })
    .await;
    let drain_timeout = 12u64;
    let mut node = NodeProc::start_full(
        "drain-node",
        Vec::new(),
        vec![
            "--base-url".into(),
            llm.base_url(),
            "--model".into(),
            "fake-model".into(),
            "--drain-timeout".into(),
            drain_timeout.to_string(),
            // The 50 streams share one identity here; the per-identity cap (32 by
            // default) is tested in security::memory_caps.
            "--sse-per-identity".into(),
            "64".into(),
        ],
    )
    .await;
    let mut ws_ids = Vec::new();
    for i in 0..10 {
        let (status, body) = node
            .post("/v1/api/workstreams/new", json!({"name": format!("d{i}")}))
            .await;
        assert_eq!(status, 200, "{body}");
        ws_ids.push(body["ws_id"].as_str().unwrap().to_string());
    }
    // 50 open streams: 4 per workstream, 10 on the node-wide stream.
    let limit = Duration::from_secs(60);
    let opened = Arc::new(AtomicUsize::new(0));
    let mut ws_clients = Vec::new();
    for ws in &ws_ids {
        for _ in 0..4 {
            ws_clients.push((
                ws.clone(),
                sse_client(
                    node.url.clone(),
                    format!("/v1/api/events?ws_id={ws}"),
                    Vec::new(),
                    limit,
                    opened.clone(),
                ),
            ));
        }
    }
    let node_clients: Vec<_> = (0..10)
        .map(|_| {
            sse_client(
                node.url.clone(),
                "/v1/api/events/node".into(),
                Vec::new(),
                limit,
                opened.clone(),
            )
        })
        .collect();
    let http = reqwest::Client::new();
    eventually("50 streams open", Duration::from_secs(10), || async {
        opened.load(Ordering::SeqCst) == 50
    })
    .await;
    let text = "x".repeat(200);
    for ws in &ws_ids {
        let (status, body) = node
            .post("/v1/api/send", json!({"ws_id": ws, "message": text}))
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "ok");
    }
    let proc = node.proc.as_mut().unwrap();
    let pid = proc.child.id().unwrap();
    let sent = Instant::now();
    proc.sigterm();

    // At once: not ready, and new turns are refused with Retry-After.
    eventually("/ready is 503", Duration::from_secs(2), || async {
        http.get(format!("{}/ready", node.url))
            .send()
            .await
            .map(|r| r.status().as_u16() == 503)
            .unwrap_or(false)
    })
    .await;
    let refused = http
        .post(format!("{}/v1/api/send", node.url))
        .bearer_auth(mint_token())
        .json(&json!({"ws_id": ws_ids[0], "message": "too late"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 503);
    assert!(refused.headers().get("retry-after").is_some());
    let health = http
        .get(format!("{}/health", node.url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        health.status().as_u16(),
        200,
        "liveness stays up while draining"
    );

    let status = exit_within(
        node.proc.as_mut().unwrap(),
        Duration::from_secs(drain_timeout + 8),
    )
    .await;
    let took = sent.elapsed();
    assert!(status.success(), "node {pid} exited with {status}");
    assert!(
        took < Duration::from_secs(drain_timeout),
        "turns of ~2.5 s should end the drain well before the timeout: {took:?}"
    );

    // Every stream saw its workstream's turn end, then the final event, then a clean end.
    for (ws, client) in ws_clients {
        let seen = client.await.unwrap();
        assert!(seen.clean_end, "stream of {ws} did not end cleanly");
        let types: Vec<&str> = seen
            .frames
            .iter()
            .map(|(_, v)| v["type"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(types.last(), Some(&"stream_closing"), "{ws}: {types:?}");
        assert!(types.contains(&"turn_complete"), "{ws}: {types:?}");
    }
    let mut last_seq = 0;
    let mut old_boot = 0;
    for client in node_clients {
        let seen = client.await.unwrap();
        assert!(seen.clean_end);
        let (_, hello) = &seen.frames[0];
        assert_eq!(hello["type"], "node_hello");
        old_boot = hello["boot"].as_u64().unwrap();
        let (_, end) = seen.frames.last().unwrap();
        assert_eq!(end["type"], "stream_closing", "{end}");
        assert_eq!(end["node_id"], "drain-node");
        // No gap: the ids seen are consecutive.
        let ids: Vec<u64> = seen.frames.iter().filter_map(|(id, _)| *id).collect();
        assert!(
            ids.windows(2).all(|w| w[1] == w[0] + 1),
            "gap in the node stream"
        );
        let completes = seen
            .frames
            .iter()
            .filter(|(_, v)| v["type"] == "turn_complete")
            .count();
        assert_eq!(completes, 10, "every turn ended on the node stream");
        last_seq = last_seq.max(*ids.last().unwrap());
    }

    // Every finished turn is in the database (the writer was flushed before exit).
    let store = turnstone_store::connect(&turnstone_store::StoreConfig::sqlite(
        node.dir.path().join("node.db"),
    ))
    .await
    .unwrap();
    for ws in &ws_ids {
        let messages = store.load_messages(ws).await.unwrap();
        assert!(
            messages
                .iter()
                .any(|m| m.role == "assistant" && m.content.as_deref() == Some(text.as_str())),
            "{ws}: the finished turn is not in the database: {messages:?}"
        );
    }
    drop(store);

    // A client resumes on the restarted node with Last-Event-ID (and the boot it knew):
    // the new boot says so, so nothing is skipped.
    node.spawn().await;
    let resumed = sse_client(
        node.url.clone(),
        format!("/v1/api/events/node?boot={old_boot}"),
        vec![("Last-Event-ID".into(), last_seq.to_string())],
        Duration::from_secs(2),
        Arc::new(AtomicUsize::new(0)),
    )
    .await
    .unwrap();
    let (_, hello) = &resumed.frames[0];
    assert_eq!(hello["type"], "node_hello");
    assert_eq!(hello["reset"], true, "{hello}");
}

#[tokio::test]
async fn sigterm_drains_a_bridge_under_traffic_and_loses_nothing() {
    let node = NodeProc::start("drain-b").await;
    let mut mq = Mq::shared("drainb").await;
    let metrics_port = free_port();
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let mut bridge = BridgeProc::start_with(
        &node,
        &mq.url,
        &mq.prefix,
        &["--drain-timeout", "10", "--metrics-addr", &metrics_addr],
    )
    .await;
    let http = reqwest::Client::new();
    let ready = format!("http://{metrics_addr}/ready");
    eventually("bridge ready", Duration::from_secs(15), || async {
        http.get(&ready)
            .send()
            .await
            .map(|r| r.status().as_u16() == 200)
            .unwrap_or(false)
    })
    .await;
    let n = 300;
    let cid = |i: usize| format!("{:012x}", 0xd7a1_0000_0000u64 + i as u64);
    let ids: HashSet<String> = (0..n).map(cid).collect();
    for i in 0..n / 2 {
        mq.push(
            "inbound",
            &json!({"type": "send", "message": format!("m{i}"), "correlation_id": cid(i)}),
        )
        .await;
    }
    // Mid-traffic: some handled, some held, some still queued.
    eventually("traffic flowing", Duration::from_secs(20), || async {
        node.turns_by_correlation().await.len() >= 20
    })
    .await;
    let proc = bridge.proc.as_mut().unwrap();
    proc.sigterm();
    for i in n / 2..n {
        mq.push(
            "inbound",
            &json!({"type": "send", "message": format!("m{i}"), "correlation_id": cid(i)}),
        )
        .await;
    }
    let status = exit_within(proc, Duration::from_secs(15)).await;
    assert!(status.success(), "bridge exited with {status}");
    assert!(!mq.alive("drain-b").await, "the heartbeat was removed");
    let mut conn = redis::Client::open(mq.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{}*:processing:*", mq.prefix))
        .query_async(&mut conn)
        .await
        .unwrap();
    for key in keys {
        // (A processing list's handed marks live in a hash beside it: `…:handed`.)
        let len = if key.ends_with(":handed") {
            "HLEN"
        } else {
            "LLEN"
        };
        let held: u64 = redis::cmd(len)
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(held, 0, "{key} still holds messages after the drain");
    }
    // A new bridge carries on: every send runs exactly once.
    bridge.spawn();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let turns = node.turns_by_correlation().await;
        let dup: Vec<_> = turns
            .iter()
            .filter(|(c, k)| ids.contains(*c) && **k > 1)
            .collect();
        assert!(dup.is_empty(), "duplicated: {dup:?}");
        let done = ids.iter().filter(|c| turns.contains_key(*c)).count();
        if done == n {
            break;
        }
        assert!(Instant::now() < deadline, "lost {} of {n}", n - done);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(mq.dead_letters().await.is_empty());
    mq.cleanup().await;
}

/// The health status of `service` (`None` when the call fails, e.g. the node stopped).
async fn grpc_health(
    health: &mut tonic_health::pb::health_client::HealthClient<tonic::transport::Channel>,
    service: &str,
) -> Option<i32> {
    health
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        })
        .await
        .ok()
        .map(|r| r.into_inner().status)
}

#[tokio::test]
async fn sigterm_turns_grpc_health_not_serving_and_ends_grpc_streams() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use turnstone_grpc::v1 as pb;

    // ~2.5 s per turn, so the drain has a turn to wait for.
    let llm = FakeLlm::start_with(FakeLlmConfig {
        tokens_per_sec: Some(20.0),
        ..FakeLlmConfig::default()
    })
    .await;
    let drain_timeout = 12u64;
    let mut node = NodeProc::start_full(
        "grpc-drain",
        Vec::new(),
        vec![
            "--base-url".into(),
            llm.base_url(),
            "--model".into(),
            "fake-model".into(),
            "--drain-timeout".into(),
            drain_timeout.to_string(),
        ],
    )
    .await;
    let (status, body) = node
        .post("/v1/api/workstreams/new", json!({"name": "grpc"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let ws = body["ws_id"].as_str().unwrap().to_string();
    let token = mint_token();
    let mut c = turnstone_grpc::client::connect(&node.url, Some(&token))
        .await
        .unwrap();
    let channel = tonic::transport::Channel::from_shared(node.url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    for service in ["", turnstone_grpc::NODE_SERVICE] {
        assert_eq!(
            grpc_health(&mut health, service).await,
            Some(ServingStatus::Serving as i32)
        );
    }
    let mut watch = health
        .watch(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut events = c
        .stream_events(pb::StreamEventsRequest {
            ws_id: ws.clone(),
            after_seq: None,
        })
        .await
        .unwrap()
        .into_inner();
    let limit = Duration::from_secs(30);
    let next = |item: Result<Option<pb::StreamEventsResponse>, tonic::Status>| {
        item.expect("the event stream ends cleanly")
            .map(|i| i.event.unwrap().r#type)
    };
    let mut kinds: Vec<String> = Vec::new();
    let reply = c
        .send(pb::SendRequest {
            ws_id: ws.clone(),
            message: "y".repeat(200),
            ..pb::SendRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.status, "ok");
    // The turn is streaming when the node is told to stop.
    while !kinds.iter().any(|k| k == "content") {
        let kind = next(tokio::time::timeout(limit, events.message()).await.unwrap())
            .expect("the stream is open mid-turn");
        kinds.push(kind);
    }
    let proc = node.proc.as_mut().unwrap();
    let sent = Instant::now();
    proc.sigterm();

    // Draining: health flips for "" and the node service, the watch sees it, work is
    // refused.
    eventually("gRPC health NOT_SERVING", Duration::from_secs(5), || {
        let mut health = health.clone();
        async move { grpc_health(&mut health, "").await == Some(ServingStatus::NotServing as i32) }
    })
    .await;
    assert_eq!(
        grpc_health(&mut health, turnstone_grpc::NODE_SERVICE).await,
        Some(ServingStatus::NotServing as i32)
    );
    let mut statuses = Vec::new();
    while statuses.last() != Some(&(ServingStatus::NotServing as i32)) {
        let item = tokio::time::timeout(limit, watch.message())
            .await
            .expect("a health update")
            .expect("the watch is open");
        statuses.push(item.expect("the watch is open").status);
    }
    let refused = c
        .send(pb::SendRequest {
            ws_id: ws.clone(),
            message: "too late".into(),
            ..pb::SendRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable);

    // The turn finishes, the stream says it closes and ends with OK; the watch ends too.
    while let Some(kind) = next(tokio::time::timeout(limit, events.message()).await.unwrap()) {
        kinds.push(kind);
    }
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("stream_closing"),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "turn_complete"), "{kinds:?}");
    let watch_end = tokio::time::timeout(limit, watch.message())
        .await
        .expect("the watch ends");
    assert!(
        matches!(watch_end, Ok(None)),
        "the watch ends with OK: {watch_end:?}"
    );

    // And the process exits, well within the drain timeout.
    let status = exit_within(
        node.proc.as_mut().unwrap(),
        Duration::from_secs(drain_timeout + 8),
    )
    .await;
    assert!(status.success(), "node exited with {status}");
    let took = sent.elapsed();
    assert!(
        took < Duration::from_secs(drain_timeout),
        "a ~2.5 s turn should end the drain well before the timeout: {took:?}"
    );
}
