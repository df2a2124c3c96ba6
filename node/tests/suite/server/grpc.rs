//! The gRPC API on the node's HTTP port (`turnstone.v1.NodeService`, tonic client): the same
//! send path, event log and replay as HTTP+SSE, the same auth, and gRPC status codes for bad
//! input.

use std::time::Duration;

use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;
use turnstone_grpc::v1::event::Payload;
use turnstone_grpc::v1::node_service_client::NodeServiceClient;
use turnstone_grpc::v1::{self as pb};

use super::*;

pub(super) async fn client(t: &TestNode) -> NodeServiceClient<Channel> {
    NodeServiceClient::connect(t.base.clone()).await.unwrap()
}

/// `message` with `token` as the bearer of its `authorization` metadata.
pub(super) fn authed<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

fn send(ws_id: &str, message: &str) -> pb::SendRequest {
    pb::SendRequest {
        ws_id: ws_id.into(),
        message: message.into(),
        ..pb::SendRequest::default()
    }
}

/// The next event of a gRPC stream, within 20 s.
async fn next_event(stream: &mut tonic::Streaming<pb::StreamEventsResponse>) -> pb::Event {
    tokio::time::timeout(Duration::from_secs(20), stream.message())
        .await
        .expect("an event within 20 s")
        .expect("stream readable")
        .expect("stream still open")
        .event
        .expect("event set")
}

async fn grpc_until(
    stream: &mut tonic::Streaming<pb::StreamEventsResponse>,
    kind: &str,
) -> Vec<pb::Event> {
    let mut out = Vec::new();
    loop {
        let e = next_event(stream).await;
        let done = e.r#type == kind;
        out.push(e);
        if done {
            return out;
        }
    }
}

async fn open_stream(
    c: &mut NodeServiceClient<Channel>,
    ws_id: &str,
    after_seq: Option<u64>,
) -> tonic::Streaming<pb::StreamEventsResponse> {
    c.stream_events(authed(
        pb::StreamEventsRequest {
            ws_id: ws_id.into(),
            after_seq,
        },
        FULL,
    ))
    .await
    .unwrap()
    .into_inner()
}

/// An event's JSON without what differs between two runs of one conversation (ids made at
/// random, the workstream's id and name, clocks).
fn comparable(json: &str) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for key in [
                    "ws_id",
                    "request_id",
                    "cycle_id",
                    "call_id",
                    "correlation_id",
                    "name",
                    "title",
                    "ts",
                    "timestamp",
                    "elapsed",
                    "elapsed_ms",
                    "tokens",
                    "context_ratio",
                    "verdict_id",
                    "latency_ms",
                ] {
                    map.remove(key);
                }
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v: Value = serde_json::from_str(json).unwrap();
    strip(&mut v);
    v
}

#[tokio::test]
async fn a_conversation_over_grpc_yields_the_events_it_yields_over_http_and_sse() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    let script = ["hello parity", "TOOL: echo parity"];

    // Over HTTP + SSE, on the default workstream.
    let mut sse = t
        .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
        .await;
    assert_eq!(sse.next().await.kind(), "connected");
    let mut over_http = Vec::new();
    for message in script {
        let (status, _) = t
            .post(
                "/v1/api/send",
                json!({"ws_id": t.default_ws, "message": message}),
            )
            .await;
        assert_eq!(status, 200);
        loop {
            let e = sse.next().await;
            let kind = e.kind().to_string();
            // Preamble frames of the attach are not part of the turn.
            if matches!(kind.as_str(), "status" | "history") && over_http.is_empty() {
                continue;
            }
            over_http.push(e.data.to_string());
            if kind == "approve_request" {
                let (status, _) = t
                    .post(
                        "/v1/api/approve",
                        json!({"ws_id": t.default_ws, "approved": true}),
                    )
                    .await;
                assert_eq!(status, 200);
            }
            if kind == "turn_complete" {
                break;
            }
        }
    }

    // Over gRPC, on a workstream it creates.
    let ws = c
        .create_workstream(authed(
            pb::CreateWorkstreamRequest {
                name: "parity".into(),
                ..Default::default()
            },
            FULL,
        ))
        .await
        .unwrap()
        .into_inner()
        .ws_id;
    let mut stream = open_stream(&mut c, &ws, None).await;
    assert_eq!(next_event(&mut stream).await.r#type, "connected");
    let mut over_grpc = Vec::new();
    for message in script {
        let reply = c
            .send(authed(send(&ws, message), FULL))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(reply.status, "ok");
        loop {
            let e = next_event(&mut stream).await;
            if matches!(e.r#type.as_str(), "status" | "history") && over_grpc.is_empty() {
                continue;
            }
            over_grpc.push(e.json.clone());
            if let Some(Payload::ApproveRequest(request)) = &e.payload {
                assert!(!request.request_id.is_empty());
                c.approve(authed(
                    pb::ApproveRequest {
                        ws_id: ws.clone(),
                        approved: true,
                        request_id: request.request_id.clone(),
                        ..Default::default()
                    },
                    FULL,
                ))
                .await
                .unwrap();
            }
            if e.r#type == "turn_complete" {
                break;
            }
        }
    }
    let http: Vec<Value> = over_http.iter().map(|j| comparable(j)).collect();
    let grpc: Vec<Value> = over_grpc.iter().map(|j| comparable(j)).collect();
    assert!(
        grpc.iter().any(|e| e["type"] == "approve_request")
            && grpc.iter().any(|e| e["type"] == "tool_result"),
        "the script runs a tool: {grpc:#?}"
    );
    assert_eq!(http, grpc);
}

#[tokio::test]
async fn a_stream_resumed_from_a_sequence_number_has_no_gap_and_no_duplicate() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    // A witness that never disconnects: what a resumed client must end up with.
    let mut witness = open_stream(&mut c, &t.default_ws, None).await;
    let mut first = open_stream(&mut c, &t.default_ws, None).await;
    assert_eq!(next_event(&mut first).await.r#type, "connected");
    c.send(authed(send(&t.default_ws, "TOOL: echo resume"), FULL))
        .await
        .unwrap();
    // Read up to the approval request, then disconnect mid-turn.
    let seen = grpc_until(&mut first, "approve_request").await;
    drop(first);
    let mut seqs: Vec<u64> = seen.iter().filter_map(|e| e.seq).collect();
    let last = *seqs.last().expect("sequenced events before the approval");
    let request_id = match &seen.last().unwrap().payload {
        Some(Payload::ApproveRequest(r)) => r.request_id.clone(),
        other => panic!("approve_request typed: {other:?}"),
    };
    c.approve(authed(
        pb::ApproveRequest {
            ws_id: t.default_ws.clone(),
            approved: true,
            request_id,
            ..Default::default()
        },
        FULL,
    ))
    .await
    .unwrap();
    // The turn goes on while nobody listens; the resumed stream replays what was missed.
    let mut resumed = open_stream(&mut c, &t.default_ws, Some(last)).await;
    let rest = grpc_until(&mut resumed, "turn_complete").await;
    assert_ne!(
        rest[0].r#type, "connected",
        "a resumed stream has no preamble"
    );
    seqs.extend(rest.iter().filter_map(|e| e.seq));
    let whole: Vec<u64> = grpc_until(&mut witness, "turn_complete")
        .await
        .iter()
        .filter_map(|e| e.seq)
        .collect();
    assert_eq!(seqs, whole, "no gap, no duplicate");
    // The same replay as SSE's Last-Event-ID.
    let mut sse = t
        .sse(
            &format!("/v1/api/events?ws_id={}", t.default_ws),
            Some(last),
        )
        .await;
    let over_sse = sse.until("turn_complete").await;
    let sse_json: Vec<Value> = over_sse.iter().map(|e| e.data.clone()).collect();
    let grpc_json: Vec<Value> = rest
        .iter()
        .map(|e| serde_json::from_str(&e.json).unwrap())
        .collect();
    assert_eq!(sse_json, grpc_json);
    assert_eq!(
        over_sse.iter().map(|e| e.id).collect::<Vec<_>>(),
        rest.iter().map(|e| e.seq).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_stream_replays_from_zero_and_a_resume_point_past_the_end_replays_nothing() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    c.send(authed(send(&t.default_ws, "first turn"), FULL))
        .await
        .unwrap();
    let mut live = open_stream(&mut c, &t.default_ws, Some(0)).await;
    grpc_until(&mut live, "turn_complete").await;
    // A resume point ahead of the log is clamped to its end: nothing is replayed twice.
    let mut ahead = open_stream(&mut c, &t.default_ws, Some(u64::MAX / 2)).await;
    c.send(authed(send(&t.default_ws, "second turn"), FULL))
        .await
        .unwrap();
    let second = grpc_until(&mut ahead, "turn_complete").await;
    let text: String = second
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::Content(t)) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "second turn");
}

#[tokio::test]
async fn send_and_wait_returns_the_completed_turn_and_is_idempotent() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    let mut request = send(&t.default_ws, "wait for me");
    request.correlation_id = "grpc-corr-1".into();
    let reply = c
        .send_and_wait(authed(
            pb::SendAndWaitRequest {
                send: Some(request.clone()),
                timeout_ms: 60_000,
                ..Default::default()
            },
            FULL,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(reply.completed);
    let done = reply.turn_complete.unwrap();
    assert_eq!(done.correlation_id, "grpc-corr-1");
    assert_eq!(done.content, "wait for me");
    assert_eq!(done.state, pb::WorkstreamState::Idle as i32);
    assert_eq!(reply.events.last().unwrap().r#type, "turn_complete");
    // The same correlation id again: the first answer, no second turn.
    let again = c.send(authed(request, FULL)).await.unwrap().into_inner();
    assert!(again.idempotent_replayed);
}

#[tokio::test]
async fn a_cancelled_send_and_wait_leaves_the_turn_running_unless_asked() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    // The tool call waits for an approval: the turn cannot end by itself.
    let reply = c
        .send_and_wait(authed(
            pb::SendAndWaitRequest {
                send: Some(send(&t.default_ws, "TOOL: echo held")),
                timeout_ms: 300,
                ..Default::default()
            },
            FULL,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(!reply.completed);
    let ws = t.node.workstream(&t.default_ws).unwrap();
    eventually(|| ws.pending_approval().is_some()).await;
    assert!(ws.pending_approval().is_some(), "the turn goes on");
    // Asked to cancel on disconnect: the deadline passing cancels the turn.
    let other = c
        .create_workstream(authed(pb::CreateWorkstreamRequest::default(), FULL))
        .await
        .unwrap()
        .into_inner()
        .ws_id;
    let reply = c
        .send_and_wait(authed(
            pb::SendAndWaitRequest {
                send: Some(send(&other, "TOOL: echo cancelled")),
                timeout_ms: 300,
                cancel_on_disconnect: true,
            },
            FULL,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(!reply.completed);
    let other = t.node.workstream(&other).unwrap();
    eventually(|| {
        other.state() == turnstone_engine::WsState::Idle && other.pending_approval().is_none()
    })
    .await;
}

/// Polls `check` until it holds (20 s at most).
async fn eventually(check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn auth_and_bad_input_are_status_codes() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    let code = |r: Result<tonic::Response<pb::SendResponse>, tonic::Status>| r.unwrap_err().code();

    // No credential, a bad one, a read token on a write RPC.
    let none = c.send(tonic::Request::new(send(&t.default_ws, "x"))).await;
    assert_eq!(code(none), Code::Unauthenticated);
    assert_eq!(
        code(c.send(authed(send(&t.default_ws, "x"), "wrong")).await),
        Code::Unauthenticated
    );
    let denied = c
        .send(authed(send(&t.default_ws, "x"), READ))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert!(denied.message().contains("write"), "{}", denied.message());
    // A read token may list and stream.
    c.list_workstreams(authed(pb::ListWorkstreamsRequest {}, READ))
        .await
        .unwrap();
    // Health is public, as /health.
    let health = c
        .health(tonic::Request::new(pb::HealthRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status, "ok");
    assert_eq!(
        serde_json::from_str::<Value>(&health.json).unwrap()["node_id"],
        "node-test"
    );

    // Unknown workstream, empty message, an approval decided twice.
    assert_eq!(
        code(c.send(authed(send("no-such-ws", "x"), FULL)).await),
        Code::NotFound
    );
    assert_eq!(
        code(c.send(authed(send(&t.default_ws, "   "), FULL)).await),
        Code::InvalidArgument
    );
    let unknown_stream = c
        .stream_events(authed(
            pb::StreamEventsRequest {
                ws_id: "no-such-ws".into(),
                after_seq: None,
            },
            FULL,
        ))
        .await
        .unwrap_err();
    assert_eq!(unknown_stream.code(), Code::NotFound);
    let bad_id = c
        .create_workstream(authed(
            pb::CreateWorkstreamRequest {
                ws_id: "not a valid id!".into(),
                ..Default::default()
            },
            FULL,
        ))
        .await
        .unwrap_err();
    assert_eq!(bad_id.code(), Code::InvalidArgument);
    assert_eq!(
        c.close_workstream(authed(
            pb::CloseWorkstreamRequest {
                ws_id: "no-such-ws".into()
            },
            FULL
        ))
        .await
        .unwrap_err()
        .code(),
        Code::NotFound
    );

    // Larger than the limit: refused before it is decoded.
    let huge = send(
        &t.default_ws,
        &"x".repeat(turnstone_node::grpc::MAX_MESSAGE_BYTES + 1),
    );
    let too_big = c.send(authed(huge, FULL)).await.unwrap_err();
    assert!(
        matches!(too_big.code(), Code::OutOfRange | Code::ResourceExhausted),
        "{too_big:?}"
    );
    // The node still answers.
    c.list_workstreams(authed(pb::ListWorkstreamsRequest {}, FULL))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_approval_is_decided_once() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    let mut stream = open_stream(&mut c, &t.default_ws, None).await;
    c.send(authed(send(&t.default_ws, "TOOL: echo once"), FULL))
        .await
        .unwrap();
    let events = grpc_until(&mut stream, "approve_request").await;
    let Some(Payload::ApproveRequest(request)) = &events.last().unwrap().payload else {
        panic!("typed approve_request");
    };
    let decide = |approved: bool| {
        authed(
            pb::ApproveRequest {
                ws_id: t.default_ws.clone(),
                approved,
                request_id: request.request_id.clone(),
                ..Default::default()
            },
            FULL,
        )
    };
    // A round is named by its cycle_id, request_id or a member call_id; an id naming no
    // round is NotFound.
    let by = |cycle_id: &str, call_id: &str| {
        authed(
            pb::ApproveRequest {
                ws_id: t.default_ws.clone(),
                approved: true,
                cycle_id: cycle_id.into(),
                call_id: call_id.into(),
                ..Default::default()
            },
            FULL,
        )
    };
    let unknown = c.approve(by("ffffffffffffffff", "")).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    c.approve(by("", &request.items[0].call_id)).await.unwrap();
    grpc_until(&mut stream, "turn_complete").await;
    let again = c.approve(decide(false)).await.unwrap_err();
    assert_eq!(again.code(), Code::FailedPrecondition);
    assert!(again.message().contains("already decided"));
    let detail: Value = serde_json::from_slice(again.details()).unwrap();
    assert_eq!(detail["verdict"]["approved"], true);
}

#[tokio::test]
async fn the_node_stream_resumes_from_a_node_seq() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    let mut node = c
        .stream_node_events(authed(pb::StreamNodeEventsRequest::default(), READ))
        .await
        .unwrap()
        .into_inner();
    let hello = node.message().await.unwrap().unwrap().event.unwrap();
    assert_eq!(hello.r#type, "node_hello");
    c.send(authed(send(&t.default_ws, "node wide"), FULL))
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(20), node.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
            .event
            .unwrap();
        let done = e.r#type == "turn_complete";
        seen.push(e);
        if done {
            break;
        }
    }
    assert!(
        seen.iter()
            .all(|e| e.ws_id == t.default_ws && e.ws_seq.is_some())
    );
    let from = seen[1].seq.unwrap();
    let mut again = c
        .stream_node_events(authed(
            pb::StreamNodeEventsRequest {
                after_seq: Some(from),
                boot: None,
            },
            READ,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        again
            .message()
            .await
            .unwrap()
            .unwrap()
            .event
            .unwrap()
            .r#type,
        "node_hello"
    );
    for expected in &seen[2..] {
        let e = again.message().await.unwrap().unwrap().event.unwrap();
        assert_eq!((e.seq, &e.json), (expected.seq, &expected.json));
    }
}

#[tokio::test]
async fn health_checking_and_http_share_the_port() {
    let t = TestNode::start().await;
    let channel = Channel::from_shared(t.base.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    for service in ["", turnstone_grpc::NODE_SERVICE] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
    }
    // HTTP on the same port still answers.
    let (status, body) = t.get("/health", None).await;
    assert_eq!(status, 200);
    assert_eq!(body["node_id"], "node-test");
}

#[tokio::test]
async fn a_workstream_is_renamed_as_by_the_name_command() {
    let t = TestNode::start().await;
    let mut c = client(&t).await;
    let mut node_stream = t.sse("/v1/api/events/node", None).await;
    assert_eq!(node_stream.next().await.kind(), "node_hello");
    let reply = c
        .rename_workstream(authed(
            pb::RenameWorkstreamRequest {
                ws_id: t.default_ws.clone(),
                name: "  harbour watch ".into(),
            },
            FULL,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.status, "ok");
    assert_eq!(reply.name, "harbour watch");
    let renamed = node_stream.until("ws_rename").await;
    let event = &renamed.last().unwrap().data;
    assert_eq!(event["ws_id"], t.default_ws.as_str());
    assert_eq!(event["name"], "harbour watch");
    let list = c
        .list_workstreams(authed(pb::ListWorkstreamsRequest {}, READ))
        .await
        .unwrap()
        .into_inner();
    let row = list
        .workstreams
        .iter()
        .find(|w| w.id == t.default_ws)
        .unwrap();
    assert_eq!(row.name, "harbour watch");

    let rename = |ws_id: &str, name: &str, token: &str| {
        authed(
            pb::RenameWorkstreamRequest {
                ws_id: ws_id.into(),
                name: name.into(),
            },
            token,
        )
    };
    let empty = c
        .rename_workstream(rename(&t.default_ws, "  ", FULL))
        .await
        .unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument);
    let unknown = c
        .rename_workstream(rename("no-such-ws", "x", FULL))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    let read_only = c
        .rename_workstream(rename(&t.default_ws, "x", READ))
        .await
        .unwrap_err();
    assert_eq!(read_only.code(), Code::PermissionDenied);
}

#[tokio::test]
async fn unknown_fields_are_ignored_and_unknown_vocabulary_is_invalid_argument() {
    let t = TestNode::start().await;
    // A newer client's request: fields this version does not know (here: a `SendRequest`
    // sent as `ListWorkstreamsRequest`, which has none) are skipped, the call answered.
    let channel = Channel::from_shared(t.base.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = tonic::client::Grpc::new(channel);
    raw.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<pb::SendRequest, pb::ListWorkstreamsResponse>::default();
    let listed = raw
        .unary(
            authed(
                pb::SendRequest {
                    ws_id: t.default_ws.clone(),
                    message: "not a field of this request".into(),
                    queue: true,
                    ..Default::default()
                },
                READ,
            ),
            tonic::codegen::http::uri::PathAndQuery::from_static(
                "/turnstone.v1.NodeService/ListWorkstreams",
            ),
            codec,
        )
        .await
        .unwrap()
        .into_inner();
    assert!(listed.workstreams.iter().any(|w| w.id == t.default_ws));
    // The contract's closed vocabularies are strings, as in the JSON API: a value outside
    // one is INVALID_ARGUMENT with the route's message.
    let mut c = client(&t).await;
    let posture = c
        .create_workstream(authed(
            pb::CreateWorkstreamRequest {
                posture: "reckless".into(),
                ..Default::default()
            },
            FULL,
        ))
        .await
        .unwrap_err();
    assert_eq!(posture.code(), Code::InvalidArgument, "{posture:?}");
    assert!(
        posture.message().contains("posture"),
        "{}",
        posture.message()
    );
}
