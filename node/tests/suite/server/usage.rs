//! Usage accounting on a node: every model call of a turn is recorded as a `usage_events`
//! row (through the batching writer) with the node, the workstream, its owner, the model and
//! the call's token and tool-call counts; `GET /v1/api/admin/usage` reports the node's rows.

use serde_json::json;
use turnstone_store::{UsageGroup, UsageQuery};

use super::*;

#[tokio::test]
async fn each_model_call_of_a_turn_records_a_usage_row() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestNode::spawn(Spec {
        scripted: true,
        db: Some(dir.path().join("node.db")),
        ..Spec::default()
    })
    .await;
    // Created for a user (as the console and the bridges do), approvals off so the tool
    // call runs without a decision.
    let (status, created) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "billing", "user_id": "ada", "auto_approve": true}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let ws_id = created["ws_id"].as_str().unwrap().to_string();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    // Two model calls: one asking for a tool, one answering after its result.
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws_id, "message": "TOOL: echo counted"}),
    )
    .await;
    let turn = events.until("turn_complete").await;
    let status_event = turn
        .iter()
        .find(|e| e.kind() == "status")
        .expect("the turn reports its usage");

    let p = t.node.persistence.clone().unwrap();
    p.writer.flush().await.unwrap();
    let by_ws = p
        .store
        .usage_report(UsageQuery {
            group_by: UsageGroup::Ws,
            limit: 10,
            ..UsageQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(by_ws.rows.len(), 1, "{by_ws:?}");
    assert_eq!(by_ws.rows[0].key, ws_id);
    let calls = by_ws.rows[0].totals;
    assert_eq!(calls.calls, 2, "one row per model call");
    assert_eq!(calls.tool_calls, 1, "the first call asked for one tool");
    assert!(
        calls.prompt_tokens > 0 && calls.completion_tokens > 0,
        "{calls:?}"
    );
    // The rows are the calls' own counts, summed here: more than the high-water mark the
    // `status` event reports.
    let reported = status_event.data["prompt_tokens"].as_i64().unwrap();
    assert!(
        calls.prompt_tokens > reported,
        "{calls:?} vs status {reported}"
    );

    for (group, key) in [
        (UsageGroup::User, "ada"),
        (UsageGroup::Node, "node-test"),
        (UsageGroup::Model, "fake-model"),
    ] {
        let report = p
            .store
            .usage_report(UsageQuery {
                group_by: group,
                limit: 10,
                ..UsageQuery::default()
            })
            .await
            .unwrap();
        let keys: Vec<&str> = report.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, [key], "{group:?}");
    }

    // The node serves its own rows (approve scope; a read token is refused).
    let (status, body) = t.get("/v1/api/admin/usage?group_by=user", Some(FULL)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rows"][0]["key"], "ada");
    assert_eq!(body["totals"]["calls"], 2);
    assert_eq!(body["totals"]["tool_calls"], 1);
    let (status, _) = t.get("/v1/api/admin/usage", Some(READ)).await;
    assert_eq!(status, 403);
    let (status, body) = t.get("/v1/api/admin/usage?group_by=hour", Some(FULL)).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("group_by"),
        "{body}"
    );
}
