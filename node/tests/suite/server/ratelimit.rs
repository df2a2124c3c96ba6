//! Per-IP rate limiting through the real server (`server::run`, so the peer address is
//! known): burst then 429 with the original body, exempt paths, auth first, and
//! `X-Forwarded-For` believed only from trusted proxies. Refill rates are tiny so that no
//! token comes back while a test runs.

use turnstone_node::server::ratelimit::{Cidr, RateLimitConfig};

use super::metrics::{sample, scrape};
use super::*;

/// Practically no refill: one token per 1000 s.
const TINY_RPS: f64 = 0.001;

/// A node with this rate-limit configuration, served by `server::run` on 127.0.0.1:0.
async fn limited(ratelimit: RateLimitConfig) -> TestNode {
    custom_node(
        NodeOptions {
            ratelimit,
            ..NodeOptions::default()
        },
        ManagerConfig::default(),
    )
    .await
}

/// A node with these options (`node_id` and `model` are set by the harness) and manager
/// settings, on the zero-latency scripted model, served by `server::run` on 127.0.0.1:0.
pub async fn custom_node(options: NodeOptions, manager: ManagerConfig) -> TestNode {
    TestNode::spawn(Spec {
        options,
        manager,
        scripted: true,
        ..Spec::default()
    })
    .await
}

fn config(burst: u32, trusted: &str) -> RateLimitConfig {
    RateLimitConfig {
        enabled: true,
        requests_per_second: TINY_RPS,
        burst,
        trusted_proxies: Cidr::parse_list(trusted).unwrap(),
    }
}

/// `GET /v1/api/workstreams` with the full token and an optional `X-Forwarded-For`.
async fn list(t: &TestNode, xff: Option<&str>) -> reqwest::Response {
    let mut req = t.http.get(t.url("/v1/api/workstreams")).bearer_auth(FULL);
    if let Some(xff) = xff {
        req = req.header("x-forwarded-for", xff);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn a_burst_passes_then_429_with_the_original_body_and_retry_after() {
    let t = limited(config(3, "")).await;
    for i in 0..3 {
        assert_eq!(
            list(&t, None).await.status(),
            200,
            "request {i} of the burst"
        );
    }
    let resp = list(&t, None).await;
    assert_eq!(resp.status(), 429);
    let retry_header: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "Rate limit exceeded");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    // One token per 1000 s: about 1000 s to wait, one decimal in the body, int + 1 in
    // the header.
    let retry = body["retry_after"].as_f64().unwrap();
    assert!(retry > 900.0 && retry <= 1000.0, "{retry}");
    assert_eq!((retry * 10.0).round(), retry * 10.0, "one decimal: {retry}");
    assert!(
        retry_header == retry.trunc() as u64 + 1 || retry_header == retry.trunc() as u64,
        "Retry-After {retry_header} vs body {retry}"
    );
    // Rejections are counted, and /metrics itself is never limited.
    let text = scrape(&t).await;
    assert_eq!(
        sample(&text, "turnstone_ratelimit_rejected_total"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "turnstone_http_requests_total{method=\"GET\",endpoint=\"/v1/api/workstreams\",status_code=\"429\"}"
        ),
        Some(1.0)
    );
}

#[tokio::test]
async fn exempt_paths_options_and_unauthenticated_requests_are_never_429() {
    let t = limited(config(1, "")).await;
    assert_eq!(list(&t, None).await.status(), 200);
    assert_eq!(list(&t, None).await.status(), 429);
    for _ in 0..5 {
        for path in ["/health", "/metrics"] {
            let resp = t.http.get(t.url(path)).send().await.unwrap();
            assert_eq!(resp.status(), 200, "{path}");
        }
        let resp = t
            .http
            .request(reqwest::Method::OPTIONS, t.url("/v1/api/workstreams"))
            .send()
            .await
            .unwrap();
        assert_ne!(resp.status(), 429, "OPTIONS");
        // Auth runs first: a request without a token is refused as such, not limited.
        let (status, _) = t.get("/v1/api/workstreams", None).await;
        assert_eq!(status, 401);
    }
    assert_eq!(list(&t, None).await.status(), 429);
}

#[tokio::test]
async fn forwarded_for_is_ignored_from_an_untrusted_peer() {
    // The test client (127.0.0.1) is not a trusted proxy here.
    let t = limited(config(2, "10.0.0.0/8")).await;
    assert_eq!(list(&t, Some("1.1.1.1")).await.status(), 200);
    assert_eq!(list(&t, Some("2.2.2.2")).await.status(), 200);
    // A third "client" is still the same peer: its bucket is empty.
    assert_eq!(list(&t, Some("3.3.3.3")).await.status(), 429);
    assert_eq!(list(&t, None).await.status(), 429);
}

#[tokio::test]
async fn a_trusted_proxy_gets_one_bucket_per_forwarded_client() {
    let t = limited(config(2, "127.0.0.1/32, 10.0.0.0/8")).await;
    for _ in 0..2 {
        assert_eq!(list(&t, Some("9.9.9.1")).await.status(), 200);
    }
    assert_eq!(list(&t, Some("9.9.9.1")).await.status(), 429);
    // Another client behind the proxy has its own bucket.
    assert_eq!(list(&t, Some("9.9.9.2")).await.status(), 200);
    // The right-most untrusted hop is the client: a spoofed left-most entry does not
    // escape, and trusted hops after the client are skipped.
    assert_eq!(
        list(&t, Some("7.7.7.7, 9.9.9.1, 10.1.2.3")).await.status(),
        429
    );
    // IPv4-mapped IPv6 is the same client.
    assert_eq!(list(&t, Some("::ffff:9.9.9.2")).await.status(), 200);
    assert_eq!(list(&t, Some("9.9.9.2")).await.status(), 429);
    // The proxy's own requests (no header) are limited as the proxy.
    assert_eq!(list(&t, None).await.status(), 200);
}

#[tokio::test]
async fn rate_limiting_is_off_by_default() {
    let t = TestNode::start().await;
    assert!(!t.node.options.ratelimit.enabled);
    for _ in 0..30 {
        let (status, _) = t.get("/v1/api/workstreams", Some(FULL)).await;
        assert_eq!(status, 200);
    }
    let text = scrape(&t).await;
    assert_eq!(
        sample(&text, "turnstone_ratelimit_rejected_total"),
        Some(0.0)
    );
}
