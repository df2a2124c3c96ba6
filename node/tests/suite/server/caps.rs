//! Memory a client can make the node hold (issue 12 item 12): a `?from=0` reader of the
//! node-wide stream is fed from the ring as it reads, not handed a copy of the whole ring.

use turnstone_node::server::{NodeEvent, NodeEventKind};

use super::*;

/// Resident memory of this test process.
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .expect("VmRSS in /proc/self/status")
}

#[tokio::test]
async fn replaying_readers_do_not_each_copy_the_ring() {
    let t = TestNode::start().await;
    // 32 MiB retained: 8192 entries of 4 KiB.
    let name = "n".repeat(4096);
    for _ in 0..8192 {
        t.node.node_log.push_with(|seq| NodeEvent {
            seq,
            kind: NodeEventKind::Renamed {
                ws_id: "ws".into(),
                name: name.clone(),
            },
        });
    }
    let before = rss_bytes();
    // Eight readers that ask for everything and read nothing yet.
    let mut readers = Vec::new();
    for _ in 0..8 {
        let resp = t
            .http
            .get(t.url("/v1/api/events/node?from=0"))
            .bearer_auth(FULL)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        readers.push(resp);
    }
    let grown = rss_bytes().saturating_sub(before);
    assert!(
        grown < 96 * 1024 * 1024,
        "8 replaying readers grew the node by {} MiB (a copy of the 32 MiB ring each?)",
        grown / (1024 * 1024)
    );
    // They still get everything, in order.
    let mut first = readers.pop().unwrap();
    const KEY: &[u8] = b"\"name\"";
    let mut seen = 0u64;
    // The last bytes of the previous chunk, so a key split across chunks is counted once.
    let mut carry: Vec<u8> = Vec::new();
    while seen < 8192 {
        let chunk = first.chunk().await.unwrap().expect("the stream goes on");
        carry.extend_from_slice(&chunk);
        seen += carry.windows(KEY.len()).filter(|w| *w == KEY).count() as u64;
        let keep = carry.len().min(KEY.len() - 1);
        carry.drain(..carry.len() - keep);
    }
    assert_eq!(seen, 8192);
}

/// A client that starts a request and never finishes its headers is cut off after the
/// header-read timeout; an open event stream (no request in flight) is not.
#[tokio::test]
async fn slow_headers_are_cut_off_but_idle_streams_are_not() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let t = TestNode::spawn(Spec {
        options: NodeOptions {
            header_read_timeout: std::time::Duration::from_secs(1),
            ..NodeOptions::default()
        },
        ..Spec::default()
    })
    .await;
    let mut events = t
        .http
        .get(t.url("/v1/api/events/global"))
        .bearer_auth(FULL)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);

    let addr = t.base.trim_start_matches("http://").to_string();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        slow.read_to_end(&mut rest),
    )
    .await;
    assert!(
        matches!(closed, Ok(Ok(_)) | Ok(Err(_))),
        "a connection with unfinished headers stayed open"
    );
    assert!(rest.is_empty(), "no response to half a request: {rest:?}");

    // The event stream opened before is still served (its keep-alive ping arrives).
    let ping = tokio::time::timeout(std::time::Duration::from_secs(10), events.chunk())
        .await
        .expect("the idle stream was cut")
        .unwrap();
    assert!(
        ping.is_some_and(|c| c.starts_with(b": ping")),
        "expected a ping"
    );
}
