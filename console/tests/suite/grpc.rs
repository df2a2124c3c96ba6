//! The cluster API over gRPC (`turnstone.v1.ConsoleService` on the console's port, tonic
//! client): the same overview, pages and placement as the HTTP routes, the cluster stream
//! with its snapshot first, and the same auth.

use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;
use turnstone_console::model::CONSOLE_VERSION;
use turnstone_grpc::v1::console_service_client::ConsoleServiceClient;
use turnstone_grpc::v1::{self as pb};

use super::*;

fn authed<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

#[tokio::test]
async fn the_cluster_api_over_grpc_matches_http() {
    let p = prefix();
    let a = NodeServer::start("node-a", CONSOLE_VERSION, 10).await;
    let b = NodeServer::start("node-b", CONSOLE_VERSION, 10).await;
    a.add_workstreams(2).await; // a: 3, b: 1
    heartbeat(&p, "node-a", &a.url, 10).await;
    heartbeat(&p, "node-b", &b.url, 10).await;
    let console = TestConsole::start(&p).await;
    console.wait_for_nodes(&["node-a", "node-b"]).await;
    turnstone_testkit::assert_eventually!(
        console.get("/v1/api/cluster/overview").await.1["workstreams"] == 4,
        "four workstreams in the overview"
    );
    let channel = Channel::from_shared(console.url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = ConsoleServiceClient::new(channel);

    let o = c
        .get_overview(authed(pb::GetOverviewRequest {}, READ_TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((o.nodes, o.workstreams), (2, 4));
    assert_eq!(o.states["idle"], 4);
    let (_, http) = console.get("/v1/api/cluster/overview").await;
    let grpc: Value = serde_json::from_str(&o.json).unwrap();
    assert_eq!(grpc["capacity"], http["capacity"]);

    let nodes = c
        .list_nodes(authed(
            pb::ListNodesRequest {
                sort: "name".into(),
                ..Default::default()
            },
            READ_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(nodes.total, 2);
    let ids: Vec<&str> = nodes.nodes.iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(ids, ["node-a", "node-b"]);
    assert_eq!(nodes.nodes[0].server_url, a.url);
    assert!(nodes.nodes[0].reachable);

    let page = c
        .list_cluster_workstreams(authed(
            pb::ListClusterWorkstreamsRequest {
                node: "node-a".into(),
                per_page: 2,
                ..Default::default()
            },
            READ_TOKEN,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((page.total, page.pages, page.per_page), (3, 2, 2));
    assert_eq!(page.workstreams.len(), 2);
    assert!(page.workstreams.iter().all(|w| w.node == "node-a"));

    // Bad input, missing credentials and scope.
    let bad = c
        .list_nodes(authed(
            pb::ListNodesRequest {
                sort: "nonsense".into(),
                ..Default::default()
            },
            READ_TOKEN,
        ))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("sort must be one of"));
    let anonymous = c
        .get_overview(tonic::Request::new(pb::GetOverviewRequest {}))
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated);
    let create = |node_id: &str, token: &str| {
        authed(
            pb::CreateClusterWorkstreamRequest {
                node_id: node_id.into(),
                name: "over-grpc".into(),
                ..Default::default()
            },
            token,
        )
    };
    let denied = c
        .create_cluster_workstream(create("node-a", READ_TOKEN))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    let unknown = c
        .create_cluster_workstream(create("no-such-node", TOKEN))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);

    // Placement: on the named node's queue, or the emptier node with `auto`.
    let placed = c
        .create_cluster_workstream(create("node-a", TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (placed.status.as_str(), placed.target_node.as_str()),
        ("ok", "node-a")
    );
    assert!(!placed.correlation_id.is_empty());
    let auto = c
        .create_cluster_workstream(create("", TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(auto.target_node, "node-b");
}

/// The next item of a cluster stream, within 20 s.
async fn next(s: &mut tonic::Streaming<pb::WatchClusterResponse>) -> pb::WatchClusterResponse {
    tokio::time::timeout(std::time::Duration::from_secs(20), s.message())
        .await
        .expect("an event within 20 s")
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn watch_cluster_sends_the_snapshot_then_the_events() {
    let p = prefix();
    let a = NodeServer::start("node-a", CONSOLE_VERSION, 10).await;
    heartbeat(&p, "node-a", &a.url, 10).await;
    let console = TestConsole::start_with(&p, |c| {
        c.poll_interval = std::time::Duration::from_secs(3600);
    })
    .await;
    console.wait_for_nodes(&["node-a"]).await;
    let channel = Channel::from_shared(console.url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = ConsoleServiceClient::new(channel);
    let mut stream = c
        .watch_cluster(authed(pb::WatchClusterRequest {}, READ_TOKEN))
        .await
        .unwrap()
        .into_inner();
    let first = next(&mut stream).await;
    assert_eq!(first.r#type, "snapshot");
    let snapshot: Value = serde_json::from_str(&first.json).unwrap();
    assert_eq!(snapshot["nodes"][0]["node_id"], "node-a");

    let created = json!({"type": "ws_created", "ws_id": "wsg", "correlation_id": "", "timestamp": 1.5,
        "name": "via-bridge", "node_id": "node-a", "resumed": false, "message_count": 0});
    publish(&p, &created).await;
    loop {
        let e = next(&mut stream).await;
        if e.r#type == "ws_created" {
            assert_eq!(serde_json::from_str::<Value>(&e.json).unwrap(), created);
            break;
        }
    }
}

#[tokio::test]
async fn a_stopping_console_is_not_serving_and_its_streams_end_cleanly() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let p = prefix();
    let console = TestConsole::start(&p).await;
    let channel = Channel::from_shared(console.url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel.clone());
    let mut watch = health
        .watch(HealthCheckRequest {
            service: turnstone_grpc::CONSOLE_SERVICE.into(),
        })
        .await
        .unwrap()
        .into_inner();
    let status = |r: Option<tonic_health::pb::HealthCheckResponse>| r.map(|r| r.status);
    assert_eq!(
        status(watch.message().await.unwrap()),
        Some(ServingStatus::Serving as i32)
    );
    let mut c = ConsoleServiceClient::new(channel);
    let mut cluster = c
        .watch_cluster(authed(pb::WatchClusterRequest {}, READ_TOKEN))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(next(&mut cluster).await.r#type, "snapshot");
    // Calls are counted by RPC and code, in the console's metrics (promtool-clean).
    let denied = c
        .get_overview(tonic::Request::new(pb::GetOverviewRequest {}))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::Unauthenticated);
    c.get_overview(authed(pb::GetOverviewRequest {}, READ_TOKEN))
        .await
        .unwrap();
    let metrics = console
        .http
        .get(console.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for (code, n) in [("OK", 1), ("UNAUTHENTICATED", 1)] {
        let line = format!(
            "turnstone_console_grpc_requests_total{{method=\"turnstone.v1.ConsoleService/GetOverview\",code=\"{code}\"}} {n}\n"
        );
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }
    assert!(metrics.contains("turnstone_console_grpc_request_duration_seconds_count{method=\"turnstone.v1.ConsoleService/GetOverview\"} 2\n"));
    turnstone_testkit::promtool::check_metrics(&metrics, &[]);

    // The console stops: health turns NOT_SERVING, then both streams end with OK.
    console._running.stop_token().cancel();
    let within = std::time::Duration::from_secs(10);
    let flipped = tokio::time::timeout(within, watch.message())
        .await
        .expect("a health update")
        .expect("the watch ends cleanly");
    assert_eq!(status(flipped), Some(ServingStatus::NotServing as i32));
    let ended = tokio::time::timeout(within, watch.message())
        .await
        .expect("the watch ends")
        .expect("the watch ends cleanly");
    assert!(ended.is_none(), "{ended:?}");
    let mut last = String::new();
    while let Some(item) = tokio::time::timeout(within, cluster.message())
        .await
        .expect("the cluster stream ends")
        .expect("the cluster stream ends cleanly")
    {
        last = item.r#type;
    }
    assert_eq!(last, "stream_closing");
}
