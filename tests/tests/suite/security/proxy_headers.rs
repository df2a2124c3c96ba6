//! Item 11: the console's reverse proxy relays the node's security headers, so a preview
//! viewed through `/node/{id}/` keeps `Content-Security-Policy: sandbox` and `nosniff`.

use std::time::Duration;

use serde_json::Value;

use super::super::cluster::harness::*;
use super::console_proc::ConsoleProc;
use super::node_events::{count, create_ws, send_until};

#[tokio::test]
async fn a_proxied_preview_keeps_its_sandbox_and_nosniff() {
    let node = NodeProc::start("sec-proxy").await;
    let mut mq = Mq::shared("secpx").await;
    let _bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let console = ConsoleProc::start(&mq.url, &mq.prefix, &[]).await;
    std::fs::write(
        node.dir.path().join("page.html"),
        "<html><body><script>alert(document.cookie)</script>page</body></html>",
    )
    .unwrap();
    let ws = create_ws(&node, "preview").await;
    let events = send_until(
        &node,
        &ws,
        r#"CALL:open_preview {"target": "page.html"}"#,
        "a preview event",
        |events| count(events, "preview") >= 1,
    )
    .await;
    let url = events
        .iter()
        .find(|e| e["type"] == "preview")
        .and_then(|e| e["url"].as_str())
        .unwrap()
        .to_string();
    // Directly from the node: the headers the proxy must keep.
    let direct = node
        .http
        .get(format!("{}{url}", node.url))
        .bearer_auth(mint_token())
        .send()
        .await
        .unwrap();
    let csp = direct.headers()["content-security-policy"].clone();
    assert!(csp.to_str().unwrap().starts_with("sandbox"), "{csp:?}");

    let path = format!("/node/sec-proxy{url}");
    eventually(
        "the console proxies to the node",
        Duration::from_secs(20),
        || async { console.get(&path).await.status() == 200 },
    )
    .await;
    let proxied = console.get(&path).await;
    let headers = proxied.headers().clone();
    assert_eq!(
        headers.get("content-security-policy"),
        Some(&csp),
        "{headers:?}"
    );
    assert_eq!(
        headers
            .get("x-content-type-options")
            .map(|v| v.to_str().unwrap()),
        Some("nosniff")
    );
    assert_eq!(
        headers.get("referrer-policy").map(|v| v.to_str().unwrap()),
        direct
            .headers()
            .get("referrer-policy")
            .map(|v| v.to_str().unwrap())
    );
    assert!(headers.get("set-cookie").is_none());
    let body: Value = Value::String(proxied.text().await.unwrap());
    assert!(body.as_str().unwrap().contains("page"));
    mq.cleanup().await;
}
