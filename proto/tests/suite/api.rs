//! HTTP bodies of node spec §1.3.

use turnstone_proto::ProtoError;
use turnstone_proto::api::{
    self, ApproveBody, CreateWorkstreamBody, CreateWorkstreamReply, Dashboard, Health, StatusReply,
    WorkstreamList,
};
use turnstone_proto::mq::NodeHeartbeat;
use turnstone_proto::sse::WorkstreamState;

const HEALTH: &str = r#"{"status": "ok", "version": "0.9.6", "node_id": "myhost_a1b2", "uptime_seconds": 5.62, "model": "fake-model", "max_ws": 50, "workstreams": {"total": 1, "idle": 1, "thinking": 0, "running": 0, "attention": 0, "error": 0}, "backend": {"status": "up", "circuit_state": "closed"}, "mcp": {"servers": 2, "resources": 5, "prompts": 1}}"#;

const DASHBOARD: &str = r#"{"workstreams": [{"id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "name": "cap", "state": "idle", "title": "Fake Title Here", "tokens": 170, "context_ratio": 0.005, "activity": "", "activity_state": "", "tool_calls": 1, "node": "local", "model": "fake-model", "model_alias": "default"}], "aggregate": {"total_tokens": 325, "total_tool_calls": 1, "active_count": 0, "total_count": 4, "uptime_seconds": 57, "node": "local"}}"#;

fn compact(json: &str) -> String {
    serde_json::to_string(&serde_json::from_str::<serde_json::Value>(json).unwrap()).unwrap()
}

#[test]
fn health_and_dashboard_round_trip_exactly() {
    let h: Health = api::decode("health", HEALTH.as_bytes()).unwrap();
    assert_eq!(h.max_ws, 50);
    assert_eq!(h.mcp.as_ref().map(|m| m.servers), Some(2));
    assert_eq!(serde_json::to_string(&h).unwrap(), compact(HEALTH));

    let without_mcp: Health =
        api::decode("health", br#"{"status": "degraded", "node_id": "n"}"#).unwrap();
    assert_eq!(without_mcp.max_ws, 10, "missing max_ws reads as 10");
    assert!(!serde_json::to_string(&without_mcp).unwrap().contains("mcp"));

    let d: Dashboard = api::decode("dashboard", DASHBOARD.as_bytes()).unwrap();
    assert_eq!(d.workstreams[0].state, WorkstreamState::Idle);
    assert_eq!(serde_json::to_string(&d).unwrap(), compact(DASHBOARD));
}

#[test]
fn request_bodies_as_the_bridge_sends_them() {
    let create = CreateWorkstreamBody {
        name: "n".into(),
        ..CreateWorkstreamBody::default()
    };
    assert_eq!(
        serde_json::to_string(&create).unwrap(),
        r#"{"name":"n","auto_approve":false}"#
    );
    let create = CreateWorkstreamBody {
        skill: "s".into(),
        user_id: "u".into(),
        ..create
    };
    assert_eq!(
        serde_json::to_string(&create).unwrap(),
        r#"{"name":"n","auto_approve":false,"skill":"s","user_id":"u"}"#
    );
    let approve = ApproveBody {
        ws_id: "w".into(),
        approved: true,
        ..ApproveBody::default()
    };
    assert_eq!(
        serde_json::to_string(&approve).unwrap(),
        r#"{"ws_id":"w","approved":true,"always":false}"#
    );
    // The node reads `approved` as false when absent (node spec §1.3.7).
    let parsed: ApproveBody = api::decode("approve", br#"{"ws_id": "w"}"#).unwrap();
    assert!(!parsed.approved);
}

#[test]
fn replies() {
    let r: CreateWorkstreamReply = api::decode(
        "create",
        br#"{"ws_id": "abcd", "name": "ws-abcd", "resumed": false, "message_count": 0}"#,
    )
    .unwrap();
    assert_eq!(r.name, "ws-abcd");
    let busy: StatusReply = api::decode("send", br#"{"status": "busy"}"#).unwrap();
    assert_eq!(busy.status, api::STATUS_BUSY);
    let list: WorkstreamList = api::decode(
        "list",
        br#"{"workstreams": [{"id": "a", "name": "default", "state": "idle"}]}"#,
    )
    .unwrap();
    assert_eq!(list.workstreams[0].name, "default");
    assert!(matches!(
        api::decode::<StatusReply>("send", b"<html>"),
        Err(ProtoError::Malformed(_))
    ));
}

#[test]
fn heartbeat_and_node_list_items() {
    let hb = NodeHeartbeat::decode(
        br#"{"server_url": "http://127.0.0.1:8781", "started": 1795948600.123, "max_ws": 50}"#,
    )
    .unwrap();
    assert_eq!(
        hb.encode(),
        r#"{"server_url":"http://127.0.0.1:8781","started":1795948600.123,"max_ws":50}"#
    );
    let item = hb.to_node_list_item("node-a");
    assert_eq!(
        serde_json::to_string(&item).unwrap(),
        r#"{"server_url":"http://127.0.0.1:8781","started":1795948600.123,"max_ws":50,"node_id":"node-a"}"#
    );
    assert_eq!(
        NodeHeartbeat::from_node_list_item(&item).unwrap(),
        ("node-a".to_owned(), hb)
    );

    let sim = NodeHeartbeat::decode(br#"{"server_url": "sim://n1", "started": 1.0, "max_ws": 50, "sim": true, "workstreams": 3}"#).unwrap();
    assert_eq!((sim.sim, sim.workstreams), (Some(true), Some(3)));
    assert_eq!(NodeHeartbeat::decode(b"{}").unwrap().max_ws, 10);
}
