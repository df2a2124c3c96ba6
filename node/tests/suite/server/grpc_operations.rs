//! What runs around every gRPC call, as around every HTTP request: the node's rate limiter
//! (the same buckets), the call metrics in `/metrics` (bounded labels, promtool-clean), and
//! the drain (health `NOT_SERVING`, work refused, streams ended).

use std::time::Duration;

use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use turnstone_grpc::v1 as pb;
use turnstone_node::server::ratelimit::{Cidr, RateLimitConfig};

use super::grpc::{authed, client};
use super::metrics::{promtool_check, sample, scrape, wait_for};
use super::ratelimit::custom_node;
use super::*;

/// `message` from the client address `ip` (as a trusted proxy forwards it).
fn from_ip<T>(message: T, ip: &str) -> tonic::Request<T> {
    let mut request = authed(message, FULL);
    request
        .metadata_mut()
        .insert("x-forwarded-for", ip.parse().unwrap());
    request
}

async fn http_list_from(t: &TestNode, ip: &str) -> u16 {
    t.http
        .get(t.url("/v1/api/workstreams"))
        .bearer_auth(FULL)
        .header("x-forwarded-for", ip)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn grpc_calls_take_their_tokens_from_the_http_buckets() {
    // Burst 3, practically no refill; 127.0.0.1 is a trusted proxy, so each test client
    // address has its own bucket, keyed as HTTP keys it.
    let t = custom_node(
        NodeOptions {
            ratelimit: RateLimitConfig {
                enabled: true,
                requests_per_second: 0.001,
                burst: 3,
                trusted_proxies: Cidr::parse_list("127.0.0.1").unwrap(),
            },
            ..NodeOptions::default()
        },
        ManagerConfig::default(),
    )
    .await;
    let mut c = client(&t).await;
    let list = |ip: &str| from_ip(pb::ListWorkstreamsRequest {}, ip);

    // Unauthenticated calls are refused before the limiter (no token taken), and health
    // is exempt, as /health is.
    for _ in 0..5 {
        let anonymous = c
            .list_workstreams(tonic::Request::new(pb::ListWorkstreamsRequest {}))
            .await
            .unwrap_err();
        assert_eq!(anonymous.code(), Code::Unauthenticated);
        c.health(from_ip(pb::HealthRequest {}, "1.1.1.1"))
            .await
            .unwrap();
    }
    // One HTTP request and two calls empty the bucket of 1.1.1.1 ...
    assert_eq!(http_list_from(&t, "1.1.1.1").await, 200);
    c.list_workstreams(list("1.1.1.1")).await.unwrap();
    c.list_workstreams(list("1.1.1.1")).await.unwrap();
    // ... so the next call is refused with the wait in its metadata ...
    let refused = c.list_workstreams(list("1.1.1.1")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(refused.message(), "Rate limit exceeded");
    let retry_after: u64 = refused
        .metadata()
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((900..=1001).contains(&retry_after), "{retry_after}");
    let pushback: u64 = refused
        .metadata()
        .get("grpc-retry-pushback-ms")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((900_000..=1_000_000).contains(&pushback), "{pushback}");
    // ... and so is the next HTTP request from that address: one bucket.
    assert_eq!(http_list_from(&t, "1.1.1.1").await, 429);
    // Streams and writes count too, refused the same way.
    let stream = c
        .stream_events(from_ip(
            pb::StreamEventsRequest {
                ws_id: t.default_ws.clone(),
                after_seq: None,
            },
            "1.1.1.1",
        ))
        .await
        .unwrap_err();
    assert_eq!(stream.code(), Code::ResourceExhausted);
    // Another address has its own bucket.
    c.list_workstreams(list("2.2.2.2")).await.unwrap();
    assert_eq!(http_list_from(&t, "2.2.2.2").await, 200);

    let text = scrape(&t).await;
    assert_eq!(
        sample(&text, "turnstone_ratelimit_rejected_total"),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &text,
            "turnstone_grpc_requests_total{method=\"turnstone.v1.NodeService/ListWorkstreams\",code=\"RESOURCE_EXHAUSTED\"}"
        ),
        Some(1.0)
    );
}

#[tokio::test]
async fn grpc_calls_are_counted_by_rpc_and_status_code() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    for _ in 0..2 {
        c.list_workstreams(authed(pb::ListWorkstreamsRequest {}, READ))
            .await
            .unwrap();
    }
    let empty = pb::SendRequest {
        ws_id: t.default_ws.clone(),
        message: " ".into(),
        ..Default::default()
    };
    let bad = c.send(authed(empty.clone(), FULL)).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    let anonymous = c.send(tonic::Request::new(empty)).await.unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated);
    // A stream the client drops is a cancelled call.
    let mut stream = c
        .stream_events(authed(
            pb::StreamEventsRequest {
                ws_id: t.default_ws.clone(),
                after_seq: None,
            },
            READ,
        ))
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap().event.unwrap();
    assert_eq!(first.r#type, "connected");
    drop(stream);
    // The standard services are counted under their own names.
    let channel = Channel::from_shared(t.base.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    // A method of no service: one label for all of them, whatever the path.
    for path in ["/turnstone.v1.NodeService/Nope", "/made.up.Service/X"] {
        let resp = reqwest::Client::builder()
            .http2_prior_knowledge()
            .build()
            .unwrap()
            .post(t.url(path))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(vec![0u8, 0, 0, 0, 0])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()["grpc-status"], "12", "{path}: UNIMPLEMENTED");
    }

    let text = wait_for(
        &t,
        "turnstone_grpc_requests_total{method=\"turnstone.v1.NodeService/StreamEvents\",code=\"CANCELLED\"}",
        1.0,
    )
    .await;
    for (method, code, n) in [
        ("turnstone.v1.NodeService/ListWorkstreams", "OK", 2.0),
        ("turnstone.v1.NodeService/Send", "INVALID_ARGUMENT", 1.0),
        ("turnstone.v1.NodeService/Send", "UNAUTHENTICATED", 1.0),
        ("grpc.health.v1.Health/Check", "OK", 1.0),
        ("__other__", "UNIMPLEMENTED", 2.0),
    ] {
        let series =
            format!("turnstone_grpc_requests_total{{method=\"{method}\",code=\"{code}\"}}");
        assert_eq!(sample(&text, &series), Some(n), "{series}\n{text}");
    }
    assert_eq!(
        sample(
            &text,
            "turnstone_grpc_request_duration_seconds_count{method=\"turnstone.v1.NodeService/ListWorkstreams\"}"
        ),
        Some(2.0)
    );
    // gRPC calls are not HTTP requests.
    assert!(
        !text.contains("endpoint=\"/turnstone.v1"),
        "gRPC calls in the HTTP series: {text}"
    );
    promtool_check(&text);
}

async fn health_status(health: &mut HealthClient<Channel>, service: &str) -> i32 {
    health
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status
}

async fn next_watch(watch: &mut tonic::Streaming<HealthCheckResponse>) -> Option<i32> {
    tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("a health update within 10 s")
        .expect("the watch ends cleanly")
        .map(|r| r.status)
}

#[tokio::test]
async fn a_draining_node_is_not_serving_and_its_grpc_streams_end_cleanly() {
    let t = TestNode::start().await;
    let channel = Channel::from_shared(t.base.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    let mut watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        next_watch(&mut watch).await,
        Some(ServingStatus::Serving as i32)
    );
    let mut c = client(&t).await;
    let mut events = c
        .stream_events(authed(
            pb::StreamEventsRequest {
                ws_id: t.default_ws.clone(),
                after_seq: None,
            },
            READ,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        events
            .message()
            .await
            .unwrap()
            .unwrap()
            .event
            .unwrap()
            .r#type,
        "connected"
    );

    t.node.drain.begin();
    for service in ["", turnstone_grpc::NODE_SERVICE] {
        assert_eq!(
            health_status(&mut health, service).await,
            ServingStatus::NotServing as i32,
            "{service:?}"
        );
    }
    assert_eq!(
        next_watch(&mut watch).await,
        Some(ServingStatus::NotServing as i32)
    );
    // Work is refused; reads go on.
    let refused = c
        .send(authed(
            pb::SendRequest {
                ws_id: t.default_ws.clone(),
                message: "late".into(),
                ..Default::default()
            },
            FULL,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable);
    c.list_workstreams(authed(pb::ListWorkstreamsRequest {}, READ))
        .await
        .unwrap();

    // Streams close: the event stream's last event is `stream_closing`, then it ends with
    // OK; the health watch ends with OK too.
    t.node.drain.close_streams();
    let mut last = String::new();
    loop {
        let item = tokio::time::timeout(Duration::from_secs(10), events.message())
            .await
            .expect("the event stream ends within 10 s")
            .expect("the event stream ends cleanly");
        match item {
            Some(item) => last = item.event.unwrap().r#type,
            None => break,
        }
    }
    assert_eq!(last, "stream_closing");
    assert_eq!(next_watch(&mut watch).await, None);
    let text = scrape(&t).await;
    assert_eq!(
        sample(
            &text,
            "turnstone_grpc_requests_total{method=\"grpc.health.v1.Health/Watch\",code=\"OK\"}"
        ),
        Some(1.0)
    );
}
