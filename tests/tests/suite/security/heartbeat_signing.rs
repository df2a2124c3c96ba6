//! Item 10: heartbeats are signed by the bridge; the console sends no credentials to a node
//! whose heartbeat is unsigned, badly signed or stale (shown as untrusted), and
//! `--node-url-allow` restricts node URLs further.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turnstone_runtime::auth::{JwtSecret, heartbeat};

use super::super::cluster::harness::*;
use super::console_proc::ConsoleProc;

/// A plain HTTP listener standing in for a node an attacker announces: it counts the
/// requests that carried an `Authorization` header, and answers `{}`.
async fn credential_trap() -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let with_credentials = Arc::new(AtomicUsize::new(0));
    let (r, w) = (requests.clone(), with_credentials.clone());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (r, w) = (r.clone(), w.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
                r.fetch_add(1, Ordering::SeqCst);
                if head.contains("\r\nauthorization:") {
                    w.fetch_add(1, Ordering::SeqCst);
                }
                let _ = sock
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                    .await;
            });
        }
    });
    (url, requests, with_credentials)
}

async fn write_heartbeat(mq: &mut Mq, node_id: &str, value: Value) {
    let _: () = mq
        .conn
        .set_ex(mq.key(&format!("node:{node_id}")), value.to_string(), 60)
        .await
        .unwrap();
}

async fn listed_untrusted(console: &ConsoleProc, node_id: &str) -> Option<String> {
    let n = console.node(node_id).await?;
    (n["trusted"] == false).then(|| n["untrusted_reason"].as_str().unwrap_or("").to_string())
}

#[tokio::test]
async fn the_console_sends_credentials_only_to_signed_fresh_heartbeats() {
    let node = NodeProc::start("sec-hb-real").await;
    let mut mq = Mq::shared("sechb").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let console = ConsoleProc::start(&mq.url, &mq.prefix, &[]).await;

    // The console trusts and proxies to the real node (its bridge signs the heartbeat).
    eventually("the bridge's heartbeat", Duration::from_secs(20), || {
        let mut c = mq.conn.clone();
        let key = mq.key("node:sec-hb-real");
        async move { c.exists::<_, bool>(key).await.unwrap() }
    })
    .await;
    eventually("the real node proxied", Duration::from_secs(20), || async {
        console
            .get("/node/sec-hb-real/v1/api/workstreams")
            .await
            .status()
            == 200
    })
    .await;

    // Three forged heartbeats pointing at a listener that records credentials.
    let (trap, requests, with_credentials) = credential_trap().await;
    let now = turnstone_runtime::auth::jwt::unix_seconds(std::time::SystemTime::now());
    let wrong = JwtSecret::new("not-the-cluster-secret-0123456789abcdef");
    let right = JwtSecret::new(SECRET);
    let forged = [
        (
            "evil-unsigned",
            json!({"server_url": trap, "started": 1.0, "max_ws": 10}),
        ),
        (
            "evil-badsig",
            json!({"server_url": trap, "started": 1.0, "max_ws": 10, "signed_at": now,
                   "sig": heartbeat::sign(&wrong, "evil-badsig", &trap, now)}),
        ),
        (
            "evil-stale",
            json!({"server_url": trap, "started": 1.0, "max_ws": 10, "signed_at": now - 3600,
                   "sig": heartbeat::sign(&right, "evil-stale", &trap, now - 3600)}),
        ),
    ];
    for (id, value) in &forged {
        write_heartbeat(&mut mq, id, value.clone()).await;
    }
    for (id, _) in &forged {
        eventually(&format!("{id} listed"), Duration::from_secs(20), || async {
            console.node(id).await.is_some()
        })
        .await;
    }
    // Several discovery and poll rounds (0.2 s each) pass: the trap sees no credentials.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        with_credentials.load(Ordering::SeqCst),
        0,
        "forged heartbeats got credentials ({} requests reached the trap)",
        requests.load(Ordering::SeqCst)
    );
    for (id, _) in &forged {
        eventually(
            &format!("{id} listed as untrusted"),
            Duration::from_secs(20),
            || async { listed_untrusted(&console, id).await.is_some() },
        )
        .await;
        let reason = listed_untrusted(&console, id).await.unwrap();
        assert!(!reason.is_empty(), "{id}: a reason is shown");
        let proxied = console.get(&format!("/node/{id}/v1/api/workstreams")).await;
        assert_eq!(proxied.status(), 403, "{id} is not proxied to");
        let body: Value = proxied.json().await.unwrap();
        assert!(
            body["error"].as_str().unwrap().contains("not trusted"),
            "{body}"
        );
    }
    assert_eq!(with_credentials.load(Ordering::SeqCst), 0);

    // What the bridge writes: the signature and its time, beside the original fields; the
    // real node is trusted.
    assert_eq!(console.node("sec-hb-real").await.unwrap()["trusted"], true);
    let hb: String = mq.conn.get(mq.key("node:sec-hb-real")).await.unwrap();
    let hb: Value = serde_json::from_str(&hb).unwrap();
    assert!(hb["sig"].is_string() && hb["signed_at"].is_i64(), "{hb}");
    mq.cleanup().await;
}

#[tokio::test]
async fn node_url_allow_restricts_where_credentials_go() {
    let node = NodeProc::start("sec-hb-allow").await;
    let mq = Mq::shared("sechba").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let console = ConsoleProc::start(
        &mq.url,
        &mq.prefix,
        &["--node-url-allow", "10.0.0.0/8,nodes.internal"],
    )
    .await;
    eventually(
        "the node listed as untrusted",
        Duration::from_secs(20),
        || async { listed_untrusted(&console, "sec-hb-allow").await.is_some() },
    )
    .await;
    let reason = listed_untrusted(&console, "sec-hb-allow").await.unwrap();
    assert!(reason.contains("node-url-allow"), "{reason}");
    let proxied = console.get("/node/sec-hb-allow/v1/api/workstreams").await;
    assert_eq!(proxied.status(), 403);

    // Allowed by CIDR: the same node is trusted and proxied to.
    let allowing =
        ConsoleProc::start(&mq.url, &mq.prefix, &["--node-url-allow", "127.0.0.0/8"]).await;
    eventually("the node proxied", Duration::from_secs(20), || async {
        allowing
            .get("/node/sec-hb-allow/v1/api/workstreams")
            .await
            .status()
            == 200
    })
    .await;
    let mut mq = mq;
    mq.cleanup().await;
}
