//! Queued user turns (issue 20): nothing acknowledged is ever lost.
//!
//! Real node, bridge and Redis processes: a burst from the original Python MQ client, the
//! queue bound and the bridge's dead letter, a node restart with a pending queue, SIGKILLs of
//! the node while clients run turns (everything acknowledged is in the database), and
//! SIGKILLs of the bridge under bursty producers (nothing lost, duplicated or reordered).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use turnstone_store::{Store, StoreConfig};

use super::bridge_faults::assert_exactly_once;
use super::harness::*;
use super::python_mq::{private_redis, python_script, venv_python};

fn cid(tag: u64, i: usize) -> String {
    format!("{:012x}", (tag << 32) + i as u64)
}

/// The node's turns of one workstream, in order: the correlation ids of its
/// `turn_complete`s on the node-wide stream (this boot of the node).
async fn turn_order(node: &NodeProc, ws_id: &str) -> Vec<String> {
    node.node_events()
        .await
        .into_iter()
        .filter(|v| v["type"] == "turn_complete" && v["ws_id"] == ws_id)
        .map(|v| v["correlation_id"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn http_ws(node: &NodeProc) -> String {
    let (status, body) = node.post("/v1/api/workstreams/new", json!({})).await;
    assert_eq!(status, 200, "{body}");
    body["ws_id"].as_str().unwrap().to_string()
}

async fn send(node: &NodeProc, body: Value) -> Value {
    let (status, reply) = node
        .post_as(&approver_token(), "/v1/api/send", body.clone())
        .await;
    assert_eq!(status, 200, "send {body} → {reply}");
    reply
}

/// Starts a turn that runs (a `sleep` through `bash`, auto-approved) until cancelled or
/// `secs` pass, and waits until the workstream is busy.
async fn occupy(node: &NodeProc, ws_id: &str, secs: u32, correlation_id: &str) {
    let reply = send(
        node,
        json!({"ws_id": ws_id, "message": format!("TOOL: sleep {secs}"),
               "auto_approve": true, "correlation_id": correlation_id}),
    )
    .await;
    assert_eq!(reply["status"], "ok", "{reply}");
    let q = format!("/v1/api/workstreams/{ws_id}/queue");
    eventually("workstream busy", Duration::from_secs(20), || async {
        node.get(&q).await["busy"] == true
    })
    .await;
}

async fn open_store(node: &NodeProc) -> Arc<dyn Store> {
    turnstone_store::connect(&StoreConfig::sqlite(node.dir.path().join("node.db")))
        .await
        .unwrap()
}

async fn wait_alive(mq: &mut Mq, node_id: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !mq.alive(node_id).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "bridge heartbeat missing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_burst_of_200_python_mq_sends_to_one_workstream_becomes_200_turns_in_push_order() {
    const COUNT: usize = 200;
    let python = venv_python();
    let (_redis, port, _redis_dir) = private_redis().await;
    let url = format!("redis://127.0.0.1:{port}/0");
    let mut mq = Mq::at(&url, "turnstone").await;
    let node = NodeProc::start("burst-node").await;
    let _bridge = BridgeProc::start(&node, &url, "turnstone").await;
    wait_alive(&mut mq, &node.node_id).await;

    let mut cmd = python_script(&python, "mq_burst.py");
    cmd.args(["127.0.0.1", &port.to_string(), &COUNT.to_string()])
        .env("MQ_BURST_DEADLINE", "150");
    let output = tokio::time::timeout(
        Duration::from_secs(180),
        cmd.spawn().unwrap().wait_with_output(),
    )
    .await
    .expect("mq_burst.py did not finish in time")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = format!(
        "mq_burst.py exited with {}\n--- stdout\n{stdout}--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{report}");
    let result: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no result line\n{report}"));
    let ws_id = result["ws_id"].as_str().unwrap().to_string();
    let sent: Vec<String> = serde_json::from_value(result["sent"].clone()).unwrap();
    let completed: Vec<String> = serde_json::from_value(result["completed"].clone()).unwrap();
    assert_eq!(sent.len(), COUNT);
    assert_eq!(
        sent.iter().collect::<HashSet<_>>().len(),
        COUNT,
        "the client made distinct ids"
    );
    // Ground truth on the node and in the workstream's stream: every send one turn, in
    // push order.
    let on_node = turn_order(&node, &ws_id).await;
    assert_eq!(on_node, sent, "turns on the node\n{report}");
    let streamed: Vec<String> = mq
        .stream(&ws_id)
        .await
        .into_iter()
        .filter(|e| e["type"] == "turn_complete")
        .map(|e| e["correlation_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(streamed, sent, "turn_completes in the workstream's stream");
    // What the Python client saw: one turn_complete per send, its own id, in push order.
    assert_eq!(
        completed, sent,
        "turn_completes seen by the Python client\n{report}"
    );
    assert!(
        result["acks"].get("error").is_none(),
        "error acks: {}",
        result["acks"]
    );
    let dead = mq.dead_letters().await;
    assert!(dead.is_empty(), "dead letters: {dead:?}");
}

#[tokio::test]
async fn a_full_queue_answers_busy_with_a_reason_and_the_bridge_dead_letters_after_its_retries() {
    let node = NodeProc::start_full(
        "bound-node",
        Vec::new(),
        vec!["--max-queued-sends".into(), "2".into()],
    )
    .await;
    let mut mq = Mq::shared("qbound").await;
    let _bridge =
        BridgeProc::start_with(&node, &mq.url, &mq.prefix, &["--busy-retries", "2"]).await;
    wait_alive(&mut mq, &node.node_id).await;
    let ws = mq.create_ws(&node.node_id, json!({})).await;
    occupy(&node, &ws, 60, &cid(0xb0, 0)).await;

    // A plain HTTP client (no opt-in) gets `busy`, as the original's clients expect.
    let plain = send(&node, json!({"ws_id": ws, "message": "plain"})).await;
    assert_eq!(plain["status"], "busy", "{plain}");
    // … and, as the original, a `busy_error` on the workstream's event stream.
    assert!(
        node.node_events()
            .await
            .iter()
            .any(|e| e["type"] == "busy_error" && e["ws_id"] == ws.as_str()),
        "no busy_error event"
    );
    // Opted in: queued up to the bound, then `busy` with the reason.
    let first = send(
        &node,
        json!({"ws_id": ws, "message": "q1", "queue": true, "correlation_id": cid(0xb0, 1)}),
    )
    .await;
    assert_eq!(first, json!({"status": "queued", "position": 1}));
    let second = send(
        &node,
        json!({"ws_id": ws, "message": "q2", "queue": true, "correlation_id": cid(0xb0, 2)}),
    )
    .await;
    assert_eq!(second, json!({"status": "queued", "position": 2}));
    let full = send(
        &node,
        json!({"ws_id": ws, "message": "q3", "queue": true, "correlation_id": cid(0xb0, 3)}),
    )
    .await;
    assert_eq!(full["status"], "busy", "{full}");
    assert!(
        full["reason"].as_str().unwrap().contains("queue full"),
        "{full}"
    );
    // A repeat of a queued send is answered from the queue and queues nothing.
    let again = send(
        &node,
        json!({"ws_id": ws, "message": "q1", "queue": true, "correlation_id": cid(0xb0, 1)}),
    )
    .await;
    assert_eq!(again, json!({"status": "queued", "position": 1}));
    let queue_path = format!("/v1/api/workstreams/{ws}/queue");
    let listed = node.get(&queue_path).await;
    let ids: Vec<&str> = listed["queued"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["correlation_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [cid(0xb0, 1), cid(0xb0, 2)], "{listed}");
    let dashboard = node.get("/v1/api/dashboard").await;
    let row = dashboard["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == ws.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["queue"].as_array().unwrap().len(), 2, "{row}");

    // Through the queue: the bridge retries the `busy`, then dead-letters it and says so.
    let mut ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let dead_cid = cid(0xb0, 9);
    mq.push(
        &format!("inbound:{}", node.node_id),
        &json!({"type": "send", "ws_id": ws, "message": "over the bound", "correlation_id": dead_cid}),
    )
    .await;
    let mut events = ps.on_message();
    let error_event = loop {
        let m = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("no error event for the refused send")
            .unwrap();
        let v: Value = serde_json::from_str(&m.get_payload::<String>().unwrap()).unwrap();
        if v["type"] == "error" && v["correlation_id"] == dead_cid.as_str() {
            break v;
        }
        assert!(
            !(v["type"] == "ack"
                && v["correlation_id"] == dead_cid.as_str()
                && v["status"] != "error"),
            "a refused send was acknowledged: {v}"
        );
    };
    assert!(
        error_event["message"].as_str().unwrap().starts_with("busy"),
        "{error_event}"
    );
    let dead = mq.dead_letters().await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["correlation_id"], dead_cid.as_str());
    assert!(
        dead[0]["reason"].as_str().unwrap().starts_with("busy:"),
        "{dead:?}"
    );

    // Remove one queued message; a second removal is a 404.
    let delete = |c: String| {
        let url = format!("{}{queue_path}/{c}", node.url);
        let http = node.http.clone();
        async move {
            http.delete(url)
                .bearer_auth(mint_token())
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(delete(cid(0xb0, 2)).await, 200);
    assert_eq!(delete(cid(0xb0, 2)).await, 404);
    // `cancel {"all": true}` empties the queue and stops the running turn.
    let (status, cancelled) = node
        .post("/v1/api/cancel", json!({"ws_id": ws, "all": true}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(cancelled, json!({"status": "ok", "removed": 1}));
    eventually(
        "the cancelled turn ends",
        Duration::from_secs(20),
        || async { node.get(&queue_path).await["busy"] == false },
    )
    .await;
    assert_eq!(
        node.get(&queue_path).await["queued"],
        json!([]),
        "queue emptied"
    );
    tokio::time::sleep(Duration::from_millis(700)).await; // a dispatcher sweep
    let turns = node.turns_by_correlation().await;
    for removed in [cid(0xb0, 1), cid(0xb0, 2)] {
        assert!(!turns.contains_key(&removed), "{removed} ran: {turns:?}");
    }
    mq.cleanup().await;
}

#[tokio::test]
async fn a_node_restart_with_50_queued_messages_runs_each_once_in_order() {
    let mut node = NodeProc::start("restart-q").await;
    let ws = http_ws(&node).await;
    occupy(&node, &ws, 120, &cid(0xa0, 999)).await;
    let ids: Vec<String> = (0..50).map(|i| cid(0xa0, i)).collect();
    for (i, c) in ids.iter().enumerate() {
        let reply = send(
            &node,
            json!({"ws_id": ws, "message": format!("queued {i}"), "queue": true, "correlation_id": c}),
        )
        .await;
        assert_eq!(reply, json!({"status": "queued", "position": i + 1}));
    }
    node.restart().await;
    // The turn that was running ends first, once, as interrupted (not run again); then every
    // queued message runs, in order, once.
    let interrupted = cid(0xa0, 999);
    let expected: Vec<String> = std::iter::once(interrupted.clone())
        .chain(ids.iter().cloned())
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let order = turn_order(&node, &ws).await;
        if order.len() >= expected.len() {
            assert_eq!(
                order, expected,
                "after the restart: the interrupted turn ended, then every queued message, in order, once"
            );
            let ended = node
                .node_events()
                .await
                .into_iter()
                .find(|v| {
                    v["type"] == "turn_complete" && v["correlation_id"] == interrupted.as_str()
                })
                .unwrap();
            assert_eq!(
                (ended["content"].as_str(), ended["state"].as_str()),
                (Some(""), Some("error")),
                "{ended}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after the restart only {} of 50 ran: {order:?}",
            order.len()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // A redelivery of one that ran is answered, not run again.
    let (status, replay) = node
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": "queued 0", "queue": true, "correlation_id": ids[0]}),
        )
        .await;
    assert_eq!((status, replay), (200, json!({"status": "ok"})));
    // The database has each message once, and the interrupted turn was not repeated.
    let store = open_store(&node).await;
    node.post("/v1/api/workstreams/close", json!({"ws_id": ws}))
        .await;
    eventually("history stored", Duration::from_secs(10), || {
        let store = store.clone();
        let ws = ws.clone();
        async move {
            let rows = store.load_messages(&ws).await.unwrap();
            rows.iter()
                .filter(|r| r.role == "assistant" && r.content.as_deref() == Some("queued 49"))
                .count()
                == 1
        }
    })
    .await;
    let rows = store.load_messages(&ws).await.unwrap();
    let mut users: HashMap<String, usize> = HashMap::new();
    for r in rows.iter().filter(|r| r.role == "user") {
        *users
            .entry(r.content.clone().unwrap_or_default())
            .or_default() += 1;
    }
    for i in 0..50 {
        assert_eq!(users.get(&format!("queued {i}")), Some(&1), "{users:?}");
    }
    assert_eq!(users.get("TOOL: sleep 120"), Some(&1), "{users:?}");
}

/// What the clients of the crash test observed.
#[derive(Default)]
struct Seen {
    /// `turn_complete`s the node streamed: correlation id → content.
    completed: HashMap<String, String>,
    /// Sends the bridge acknowledged (`ok` or `queued`).
    acked: HashSet<String>,
}

/// Follows the node-wide stream of whatever node answers at `url`, reconnecting after each
/// kill, and records every `turn_complete`.
fn observe_node(url: String, seen: Arc<Mutex<Seen>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let http = reqwest::Client::new();
        loop {
            let Ok(resp) = http
                .get(format!("{url}/v1/api/events/node?from=0"))
                .bearer_auth(mint_token())
                .send()
                .await
            else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let mut body = resp.bytes_stream();
            let mut buf = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\r\n\r\n") {
                    let frame: String = buf.drain(..end + 4).collect();
                    let data: String = frame
                        .split("\r\n")
                        .filter_map(|l| l.strip_prefix("data: "))
                        .collect();
                    let Ok(v) = serde_json::from_str::<Value>(&data) else {
                        continue;
                    };
                    // (A turn the kill interrupted ends after the restart as `error` with
                    // no reply: not one whose reply must be stored.)
                    if v["type"] == "turn_complete" && v["state"] != "error" {
                        let c = v["correlation_id"].as_str().unwrap_or_default().to_string();
                        let content = v["content"].as_str().unwrap_or_default().to_string();
                        seen.lock().unwrap().completed.insert(c, content);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

#[tokio::test]
async fn sigkilling_the_node_under_http_and_queue_load_never_loses_an_acknowledged_turn() {
    const KILLS: usize = 10;
    let mut rng = StdRng::seed_from_u64(0x5eed_0020);
    let mut node = NodeProc::start("crash-node").await;
    let mut mq = Mq::shared("qcrash").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    wait_alive(&mut mq, &node.node_id).await;
    let http_ws_ids = [http_ws(&node).await, http_ws(&node).await];
    let mq_ws_ids = [
        mq.create_ws(&node.node_id, json!({})).await,
        mq.create_ws(&node.node_id, json!({})).await,
    ];
    let seen = Arc::new(Mutex::new(Seen::default()));
    // message text per correlation id (the scripted model echoes it as the reply)
    let texts: Arc<Mutex<HashMap<String, (String, String)>>> = Arc::default();
    let stop = stop_flag();
    let observer = observe_node(node.url.clone(), seen.clone());

    // Acks of the queue producers' sends.
    let mut acks = mq
        .subscribe(
            &mq_ws_ids
                .iter()
                .map(|w| format!("events:{w}"))
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .await;
    let ack_seen = seen.clone();
    let ack_task = tokio::spawn(async move {
        let mut events = acks.on_message();
        while let Some(m) = events.next().await {
            let Ok(v) = serde_json::from_str::<Value>(&m.get_payload::<String>().unwrap()) else {
                continue;
            };
            if v["type"] == "ack" && (v["status"] == "ok" || v["status"] == "queued") {
                let c = v["correlation_id"].as_str().unwrap_or_default().to_string();
                ack_seen.lock().unwrap().acked.insert(c);
            }
        }
    });

    // HTTP clients: sequential sends (opted in to the queue), each retried with the same
    // correlation id until the node answers.
    let mut clients = Vec::new();
    for (k, ws) in http_ws_ids.iter().enumerate() {
        let (url, ws, texts, stop) = (node.url.clone(), ws.clone(), texts.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut i = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let c = cid(0xc0 + k as u64, i);
                let text = format!("http {k} turn {i}");
                texts.lock().unwrap().insert(c.clone(), (ws.clone(), text.clone()));
                loop {
                    let r = http
                        .post(format!("{url}/v1/api/send"))
                        .bearer_auth(mint_token())
                        .json(&json!({"ws_id": ws, "message": text, "queue": true, "correlation_id": c}))
                        .timeout(Duration::from_secs(5))
                        .send()
                        .await;
                    match r {
                        Ok(r) if r.status().is_success() => break,
                        Ok(r) if r.status().as_u16() == 404 => {
                            // The restarted node has not reopened this workstream (nothing
                            // of it was queued): resume it, as a client would.
                            let _ = http
                                .post(format!("{url}/v1/api/workstreams/new"))
                                .bearer_auth(mint_token())
                                .json(&json!({"resume_ws": ws}))
                                .send()
                                .await;
                        }
                        _ => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
    }
    // Queue producers: bursts of sends onto the node's queue.
    for (k, ws) in mq_ws_ids.iter().enumerate() {
        let (ws, texts, stop) = (ws.clone(), texts.clone(), stop.clone());
        let mut p = Mq::at(&mq.url, &mq.prefix).await;
        let queue = format!("inbound:{}", node.node_id);
        clients.push(tokio::spawn(async move {
            let mut i = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..10 {
                    let c = cid(0xd0 + k as u64, i);
                    let text = format!("queue {k} turn {i}");
                    texts
                        .lock()
                        .unwrap()
                        .insert(c.clone(), (ws.clone(), text.clone()));
                    p.push(
                        &queue,
                        &json!({"type": "send", "ws_id": ws, "message": text, "correlation_id": c}),
                    )
                    .await;
                    i += 1;
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        }));
    }

    let mut checked_completed = 0;
    let mut checked_acked = 0;
    for round in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.random_range(1500..3000))).await;
        node.kill9();
        // Let the observer drain what the node sent before it died.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (completed, acked) = {
            let s = seen.lock().unwrap();
            (s.completed.clone(), s.acked.clone())
        };
        let store = open_store(&node).await;
        let mut history: HashMap<String, Vec<turnstone_store::StoredMessage>> = HashMap::new();
        for ws in http_ws_ids.iter().chain(mq_ws_ids.iter()) {
            history.insert(ws.clone(), store.load_messages(ws).await.unwrap());
        }
        let queued: HashSet<String> = store
            .queued_sends("")
            .await
            .unwrap()
            .into_iter()
            .map(|q| q.correlation_id)
            .collect();
        store.close().await;
        let texts_now = texts.lock().unwrap().clone();
        let mut missing = Vec::new();
        for (c, content) in &completed {
            let Some((ws, text)) = texts_now.get(c) else {
                continue;
            };
            let rows = &history[ws];
            let has_user = rows
                .iter()
                .any(|r| r.role == "user" && r.content.as_deref() == Some(text));
            let has_reply = rows
                .iter()
                .any(|r| r.role == "assistant" && r.content.as_deref() == Some(content));
            if !(has_user && has_reply) {
                missing.push((c.clone(), text.clone(), has_user, has_reply));
            }
        }
        assert!(
            missing.is_empty(),
            "kill {round}: turns seen complete but not in the database: {missing:?}"
        );
        let unstored: Vec<&String> = acked.iter().filter(|c| !queued.contains(*c)).collect();
        assert!(
            unstored.is_empty(),
            "kill {round}: acknowledged sends not in the database: {unstored:?}"
        );
        checked_completed = completed.len();
        checked_acked = acked.len();
        node.restart().await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    assert!(
        checked_completed >= 50 && checked_acked >= 20,
        "the load was too light to mean anything: {checked_completed} turns seen complete, \
         {checked_acked} sends acknowledged"
    );
    // Nothing ran twice: every user message is stored at most once.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let store = open_store(&node).await;
    for ws in http_ws_ids.iter().chain(mq_ws_ids.iter()) {
        let mut users: HashMap<String, usize> = HashMap::new();
        for r in store.load_messages(ws).await.unwrap() {
            if r.role == "user" {
                *users.entry(r.content.unwrap_or_default()).or_default() += 1;
            }
        }
        let twice: Vec<_> = users.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "ran twice in {ws}: {twice:?}");
    }
    observer.abort();
    ack_task.abort();
    mq.cleanup().await;
}

fn stop_flag() -> Arc<std::sync::atomic::AtomicBool> {
    Arc::new(std::sync::atomic::AtomicBool::new(false))
}

#[tokio::test]
async fn sigkilling_the_bridge_under_bursty_producers_keeps_every_send_once_and_in_order() {
    const WORKSTREAMS: usize = 10;
    const SENDS: usize = 1000;
    let mut rng = StdRng::seed_from_u64(0x5eed_b41d);
    let node = NodeProc::start("burst-kill").await;
    let mut mq = Mq::shared("qbkill").await;
    let mut bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    wait_alive(&mut mq, &node.node_id).await;
    let mut ws_ids = Vec::new();
    for _ in 0..WORKSTREAMS {
        ws_ids.push(mq.create_ws(&node.node_id, json!({})).await);
    }
    let mut pushed: HashMap<String, Vec<String>> = HashMap::new();
    for i in 0..SENDS {
        pushed
            .entry(ws_ids[i % WORKSTREAMS].clone())
            .or_default()
            .push(cid(0xe0, i));
    }
    let producer = {
        let mut p = Mq::at(&mq.url, &mq.prefix).await;
        let ws_ids = ws_ids.clone();
        let queue = format!("inbound:{}", node.node_id);
        tokio::spawn(async move {
            // No pacing: everything back to back.
            for i in 0..SENDS {
                p.push(
                    &queue,
                    &json!({"type": "send", "ws_id": ws_ids[i % WORKSTREAMS],
                            "message": format!("m{i}"), "correlation_id": cid(0xe0, i)}),
                )
                .await;
            }
        })
    };
    for round in 0..5u64 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(150..900))).await;
        bridge.kill9();
        tokio::time::sleep(Duration::from_millis(50 * (round % 3))).await;
        bridge.restart();
    }
    producer.await.unwrap();
    let ids: HashSet<String> = pushed.values().flatten().cloned().collect();
    assert_exactly_once(&node, &ids, Duration::from_secs(240)).await;
    let events = node.node_events().await;
    for (ws, expected) in &pushed {
        let order: Vec<&str> = events
            .iter()
            .filter(|v| v["type"] == "turn_complete" && v["ws_id"] == ws.as_str())
            .map(|v| v["correlation_id"].as_str().unwrap())
            .collect();
        assert_eq!(order, *expected, "turn order of {ws}");
    }
    let dead = mq.dead_letters().await;
    assert!(dead.is_empty(), "dead letters: {dead:?}");
    mq.cleanup().await;
}

#[tokio::test]
async fn a_draining_node_starts_no_queued_turn_and_runs_them_after_the_restart() {
    let mut node = NodeProc::start("drain-q").await;
    let ws = http_ws(&node).await;
    occupy(&node, &ws, 2, &cid(0xd0, 999)).await;
    let ids: Vec<String> = (0..3).map(|i| cid(0xd0, i)).collect();
    for (i, c) in ids.iter().enumerate() {
        let reply = send(
            &node,
            json!({"ws_id": ws, "message": format!("held {i}"), "queue": true, "correlation_id": c}),
        )
        .await;
        assert_eq!(reply["status"], "queued", "{reply}");
    }
    // SIGTERM while the 2 s turn runs: it finishes, the queue waits for the next start.
    let proc = node.proc.as_mut().unwrap();
    proc.sigterm();
    let status = tokio::time::timeout(Duration::from_secs(20), proc.child.wait())
        .await
        .expect("the node did not exit after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let store = open_store(&node).await;
    let users: Vec<String> = store
        .load_messages(&ws)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.role == "user")
        .filter_map(|r| r.content)
        .collect();
    assert_eq!(
        users,
        vec!["TOOL: sleep 2".to_string()],
        "only the running turn finished during the drain"
    );
    drop(store);
    node.spawn().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let order = turn_order(&node, &ws).await;
        if order.len() >= ids.len() {
            assert_eq!(
                order, ids,
                "after the restart: each held message, in order, once"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after the restart only {order:?} ran"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
