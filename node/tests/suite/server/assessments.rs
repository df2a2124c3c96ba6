//! `output_assessments` rows: what the output guard found in a tool result, recorded by the
//! node (never the output itself).

use serde_json::json;
use turnstone_testkit::secrets::{ALNUM, fake};

use super::*;

#[tokio::test]
async fn a_flagged_tool_result_is_recorded_without_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestNode::start_persistent(&dir.path().join("a.db")).await;
    let ws = t.default_ws.clone();
    let secret = format!("ghp_{}", fake(ALNUM, 36, 41));
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let (status, _) = t
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": format!("TOOL: echo token={secret}")}),
        )
        .await;
    assert_eq!(status, 200);
    events.until("approve_request").await;
    t.post("/v1/api/approve", json!({"ws_id": ws, "approved": true}))
        .await;
    let seen = events.until("turn_complete").await;
    let warning = seen
        .iter()
        .find(|e| e.kind() == "output_warning")
        .expect("the guard flagged the result")
        .data
        .clone();

    let store = t.node.persistence.as_ref().unwrap().store.clone();
    turnstone_testkit::assert_eventually!(
        store
            .list_output_assessments(Some(&ws), 10)
            .await
            .unwrap()
            .len()
            == 1,
        "no output_assessments row"
    );
    let row = store
        .list_output_assessments(Some(&ws), 10)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(row.call_id, warning["call_id"].as_str().unwrap());
    assert_eq!(row.func_name, "bash");
    assert_eq!(json!(row.flags), warning["flags"]);
    assert_eq!(row.risk_level, warning["risk_level"].as_str().unwrap());
    assert_eq!(
        row.output_length,
        warning["output_length"].as_i64().unwrap()
    );
    assert!(row.redacted);
    assert!(
        !serde_json::to_string(&row).unwrap().contains(&secret[4..]),
        "the row never holds the secret: {row:?}"
    );
}
