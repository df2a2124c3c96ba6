//! The Rust queue client (`turnstone_queue::TurnstoneClient`) and the `turnstone-mq` CLI
//! against real `turnstone-server` + `turnstone-bridge` processes and the shared Redis:
//! `send_and_wait`, an approval round trip, lossless replay of a finished turn from the
//! workstream's stream, resumption from a middle id, and the CLI's `send`/`wait`/`tail`.

use std::collections::HashSet;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use turnstone_proto::mq::{CreateWorkstreamMessage, OutboundEvent, SendMessage};
use turnstone_queue::{Decision, TurnstoneClient, WaitOptions, WsEvents};

use super::harness::{BridgeProc, Mq, NodeProc, binary};

/// Guards against hangs only (debug build on a loaded machine).
const TURN: Duration = Duration::from_secs(60);

struct Cluster {
    mq: Mq,
    client: TurnstoneClient,
    node: NodeProc,
    _bridge: BridgeProc,
}

impl Cluster {
    async fn start(tag: &str) -> Self {
        let mq = Mq::shared(tag).await;
        let node = NodeProc::start(&format!("{tag}-n1")).await;
        // These producers switch approvals off (`auto_approve`): a bridge relays that only
        // when configured to.
        let bridge = BridgeProc::start_with(
            &node,
            &mq.url,
            &mq.prefix,
            &["--allow-producer-auto-approve"],
        )
        .await;
        let client = TurnstoneClient::new(&mq.url, &mq.prefix).await.unwrap();
        let c = Self {
            mq,
            client,
            node,
            _bridge: bridge,
        };
        let id = c.node.node_id.clone();
        super::harness::eventually("bridge heartbeat", TURN, || {
            let mut conn = c.mq.conn.clone();
            let key = c.mq.key(&format!("node:{id}"));
            async move {
                redis::cmd("EXISTS")
                    .arg(key)
                    .query_async::<bool>(&mut conn)
                    .await
                    .unwrap()
            }
        })
        .await;
        let nodes = c.client.list_nodes().await.unwrap();
        assert_eq!(nodes.len(), 1, "{nodes:?}");
        assert_eq!(nodes[0]["node_id"], json!(id));
        c
    }

    async fn new_ws(&self, auto_approve: bool) -> String {
        self.client
            .create_workstream_and_wait(
                CreateWorkstreamMessage {
                    name: "mq-client".into(),
                    auto_approve,
                    ..CreateWorkstreamMessage::default()
                },
                TURN,
            )
            .await
            .unwrap()
    }
}

fn send(ws_id: &str, message: &str) -> SendMessage {
    SendMessage {
        ws_id: ws_id.to_string(),
        message: message.to_string(),
        ..SendMessage::default()
    }
}

fn opts() -> WaitOptions {
    WaitOptions {
        timeout: TURN,
        ..WaitOptions::default()
    }
}

/// Reads events until the `turn_complete` of `cid` (bounded).
async fn until_turn_complete(events: &mut WsEvents, cid: &str) -> Vec<(String, OutboundEvent)> {
    let mut out = Vec::new();
    loop {
        let item = tokio::time::timeout(TURN, events.next())
            .await
            .expect("stream stalled")
            .expect("stream ended")
            .unwrap();
        let done = matches!(&item.1, OutboundEvent::TurnComplete(t) if t.correlation_id == cid);
        out.push(item);
        if done {
            return out;
        }
    }
}

/// Stream ids compare as (ms, seq).
fn id_key(id: &str) -> (u64, u64) {
    let (a, b) = id.split_once('-').unwrap_or((id, "0"));
    (a.parse().unwrap(), b.parse().unwrap())
}

#[tokio::test]
async fn send_and_wait_returns_the_full_reply_on_existing_and_new_workstreams() {
    let mut c = Cluster::start("mqa").await;
    let ws = c.new_ws(false).await;
    assert_eq!(
        c.client.owner(&ws).await.unwrap().as_deref(),
        Some(c.node.node_id.as_str())
    );

    let text = "the quick brown fox jumps over the lazy dog";
    let r = c
        .client
        .send_and_wait(send(&ws, text), opts())
        .await
        .unwrap();
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.ws_id, ws);
    assert!(r.final_content.contains(text), "{r:?}");
    assert_eq!(
        r.content(),
        r.final_content,
        "streamed parts add up to the turn"
    );

    // No ws_id: the bridge creates one; its id comes from `ws_created`, the reply from the stream.
    let r2 = c
        .client
        .send_and_wait(send("", "a brand new workstream"), opts())
        .await
        .unwrap();
    assert!(r2.ok(), "{r2:?}");
    assert!(!r2.ws_id.is_empty() && r2.ws_id != ws, "{r2:?}");
    assert_eq!(r2.content(), r2.final_content);
    assert!(r2.content().contains("a brand new workstream"), "{r2:?}");

    // Bad input: a send to an unknown workstream ends with an error, not a hang.
    let r3 = c
        .client
        .send_and_wait(
            send("00000000000000000000000000000000", "nobody home"),
            opts(),
        )
        .await
        .unwrap();
    assert!(!r3.timed_out && !r3.errors.is_empty(), "{r3:?}");
    c.mq.cleanup().await;
}

#[tokio::test]
async fn an_approval_request_is_answered_through_the_response_list() {
    let mut c = Cluster::start("mqb").await;
    let ws = c.new_ws(false).await;
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let approver = {
        let seen = seen.clone();
        Box::new(move |req: &turnstone_proto::mq::ApprovalRequestEvent| {
            seen.lock().unwrap().push(req.correlation_id.clone());
            assert!(req.items.iter().any(|i| i.func_name == "bash"), "{req:?}");
            Some(Decision::approve())
        })
    };
    let r = c
        .client
        .send_and_wait(
            send(&ws, "TOOL: echo hi"),
            WaitOptions {
                timeout: TURN,
                approver: Some(approver),
                ..WaitOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(r.ok(), "{r:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "exactly one approval prompt: {seen:?}");
    assert_eq!(r.tool_results.len(), 1, "{r:?}");
    assert_eq!(r.tool_results[0].0, "bash");
    assert!(r.tool_results[0].1.contains("hi"), "{r:?}");
    assert!(r.final_content.contains("done"), "{r:?}");

    // Denied: the tool does not run; the turn still completes.
    let r = c
        .client
        .send_and_wait(
            send(&ws, "TOOL: echo nope"),
            WaitOptions {
                timeout: TURN,
                approver: Some(Box::new(|_| Some(Decision::deny("not now")))),
                ..WaitOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(!r.timed_out, "{r:?}");
    assert!(
        r.tool_results.is_empty(),
        "a denied command must not run: {r:?}"
    );
    assert!(
        r.final_content.contains("not now"),
        "the feedback reaches the model: {r:?}"
    );
    c.mq.cleanup().await;
}

#[tokio::test]
async fn a_late_subscriber_replays_a_finished_turn_and_resumes_from_any_id() {
    let mut c = Cluster::start("mqc").await;
    let ws = c.new_ws(true).await;
    let r = c
        .client
        .send_and_wait(send(&ws, "first turn\nTOOL: echo replay"), opts())
        .await
        .unwrap();
    assert!(r.ok(), "{r:?}");

    // Subscribe after the turn is over: everything is replayed, in order, ids increasing.
    let mut events = c.client.subscribe_ws(&ws, Some("0")).await.unwrap();
    let replay = until_turn_complete(&mut events, &r.correlation_id).await;
    drop(events);
    let stored = c.mq.stream(&ws).await;
    assert_eq!(
        replay.len(),
        stored.len(),
        "the whole stream up to turn_complete"
    );
    for ((_, ev), raw) in replay.iter().zip(&stored) {
        assert_eq!(ev.to_value(), *raw);
    }
    let ids: Vec<&str> = replay.iter().map(|(id, _)| id.as_str()).collect();
    assert!(
        ids.windows(2).all(|w| id_key(w[0]) < id_key(w[1])),
        "{ids:?}"
    );
    assert_eq!(ids.last().copied(), Some(r.last_stream_id.as_str()));
    let content: String = replay
        .iter()
        .filter_map(|(_, e)| match e {
            OutboundEvent::Content(c) => Some(c.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        content,
        r.content(),
        "replayed text equals the live turn's text"
    );
    let types: HashSet<&str> = replay.iter().map(|(_, e)| e.type_name()).collect();
    for t in ["content", "tool_result", "turn_complete"] {
        assert!(types.contains(t), "{t} missing from {types:?}");
    }

    // Resume from a middle id: exactly the rest, nothing before, nothing twice.
    let mid = replay.len() / 2;
    let mut resumed = c
        .client
        .subscribe_ws(&ws, Some(&replay[mid].0))
        .await
        .unwrap();
    let rest = until_turn_complete(&mut resumed, &r.correlation_id).await;
    assert_eq!(
        rest.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ids[mid + 1..].to_vec()
    );
    // ... and then it follows live: the next item is the next turn's first event.
    let cid2 = c.client.send_text(&ws, "second turn").await.unwrap();
    let live = until_turn_complete(&mut resumed, &cid2).await;
    assert!(id_key(&live[0].0) > id_key(ids[ids.len() - 1]), "{live:?}");
    assert!(
        live.iter()
            .any(|(_, e)| matches!(e, OutboundEvent::Content(c) if c.text.contains("second"))),
        "{live:?}"
    );

    // `None` starts at the end: only what comes next.
    let mut fresh = c.client.subscribe_ws(&ws, None).await.unwrap();
    let cid3 = c.client.send_text(&ws, "third turn").await.unwrap();
    let third = until_turn_complete(&mut fresh, &cid3).await;
    assert!(
        id_key(&third[0].0) > id_key(&live.last().unwrap().0),
        "{third:?}"
    );

    // Bad input is refused before touching Redis.
    assert!(c.client.subscribe_ws(&ws, Some("$")).await.is_err());
    assert!(c.client.subscribe_ws("", Some("0")).await.is_err());
    c.mq.cleanup().await;
}

async fn mq_cli(c: &Cluster, args: &[&str]) -> (i32, String, String) {
    let out = tokio::time::timeout(
        TURN,
        Command::new(binary("turnstone-mq"))
            .args(["--redis-url", &c.mq.url, "--prefix", &c.mq.prefix])
            .args(args)
            .env_remove("TURNSTONE_REDIS_URL")
            .env_remove("TURNSTONE_MQ_PREFIX")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("turnstone-mq hung")
    .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_turnstone_mq_cli_sends_waits_and_tails() {
    let mut c = Cluster::start("mqd").await;
    let ws = c.new_ws(true).await;

    // A tail started before the send (resuming after the stream's current end, so it cannot
    // miss the start of the turn whenever it connects) sees the turn live.
    let from = c.client.stream_tail(&ws).await.unwrap();
    let mut tail = Command::new(binary("turnstone-mq"))
        .args(["--redis-url", &c.mq.url, "--prefix", &c.mq.prefix])
        .args(["tail", "--ws", &ws, "--from", &from])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut tail_lines = BufReader::new(tail.stdout.take().unwrap()).lines();

    let (code, out, err) = mq_cli(&c, &["send", "--ws", &ws, "hello from the shell"]).await;
    assert_eq!(code, 0, "{err}");
    let cid = out.trim().to_string();
    assert!(turnstone_proto::ids::is_short_id(&cid), "{out:?}");

    let (code, out, err) = mq_cli(
        &c,
        &[
            "wait",
            "--ws",
            &ws,
            "--correlation",
            &cid,
            "--timeout",
            "60",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("hello from the shell"), "{out:?}");

    // The live tail printed the turn as JSON lines ending in its turn_complete.
    let mut tailed: Vec<Value> = Vec::new();
    loop {
        let line = tokio::time::timeout(TURN, tail_lines.next_line())
            .await
            .expect("tail stalled")
            .unwrap()
            .expect("tail ended");
        let v: Value = serde_json::from_str(&line).unwrap();
        let done =
            v["event"]["type"] == "turn_complete" && v["event"]["correlation_id"] == json!(cid);
        tailed.push(v);
        if done {
            break;
        }
    }
    tail.kill().await.unwrap();
    assert!(tailed.iter().all(|v| v["id"].is_string()), "{tailed:?}");

    // A replaying tail with --count prints exactly the stream, then exits.
    let stored = c.mq.stream(&ws).await;
    let n = stored.len().to_string();
    let (code, out, err) = mq_cli(&c, &["tail", "--ws", &ws, "--from", "0", "--count", &n]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.iter().map(|v| v["event"].clone()).collect::<Vec<_>>(),
        stored
    );
    let tail_events: Vec<Value> = tailed.iter().map(|v| v["event"].clone()).collect();
    // Events may follow the turn (the node's background auto-title renames the workstream):
    // the live tail's lines are the stream up to and including the turn's `turn_complete`.
    let end = stored
        .iter()
        .position(|e| e["type"] == "turn_complete" && e["correlation_id"] == json!(cid))
        .expect("turn_complete stored");
    assert!(
        stored[..=end].ends_with(&tail_events),
        "the live tail saw the stream up to the turn's end"
    );

    // A correlation id that never completes: exit 1 after the timeout.
    let (code, _, err) = mq_cli(
        &c,
        &[
            "wait",
            "--ws",
            &ws,
            "--correlation",
            "000000000000",
            "--timeout",
            "0.5",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("timed out"), "{err}");

    // Bad arguments: exit 2 and a message naming the argument.
    let w = ws.as_str();
    for (args, needle) in [
        (vec!["tail", "--ws", w, "--from", "later"], "--from"),
        (vec!["send", "--ws", "", "x"], "--ws"),
        (vec!["send", "--ws", "a b", "x"], "--ws"),
        (
            vec!["wait", "--ws", w, "--correlation", "c", "--timeout=-1"],
            "--timeout",
        ),
        (vec!["wait", "--ws", w], "--correlation"),
        (vec!["frobnicate"], "frobnicate"),
    ] {
        let (code, _, err) = mq_cli(&c, &args).await;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // An unreachable Redis is a clear failure, not a panic.
    let out = Command::new(binary("turnstone-mq"))
        .args([
            "--redis-url",
            "redis://127.0.0.1:1/0",
            "send",
            "--ws",
            &ws,
            "x",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{out:?}"
    );
    c.mq.cleanup().await;
}
