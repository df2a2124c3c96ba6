//! Plan mode (seed 004): `/plan on|off` (and the tool intent's `plan` key) enter and leave
//! it visibly (`info` + a `status` carrying `plan_mode`); in it only read-only tools reach
//! the model and a call of another tool is a clear tool error.

use serde_json::{Value, json};

use super::{FULL, SseEvent, TestNode};

fn tool_names(reply: &Value) -> Vec<String> {
    reply["prepared"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn first<'a>(events: &'a [SseEvent], kind: &str) -> &'a Value {
    &events
        .iter()
        .find(|e| e.kind() == kind)
        .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
        .data
}

#[tokio::test]
async fn plan_mode_offers_only_read_only_tools_and_refuses_the_rest() {
    let t = TestNode::start().await;
    let ws = t.default_ws.clone();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let command = |text: &str| json!({"ws_id": ws, "command": text});

    let (status, _) = t.post("/v1/api/command", command("/plan on")).await;
    assert_eq!(status, 200);
    let entered = events.until("status").await;
    assert!(
        first(&entered, "info")["message"]
            .as_str()
            .unwrap()
            .starts_with("Plan mode on"),
        "{entered:?}"
    );
    assert_eq!(first(&entered, "status")["plan_mode"], true);

    // The model asks for write_file: refused as a tool error, nothing written.
    let call = json!({"path": "planned.txt", "content": "x"});
    t.post(
        "/v1/api/send",
        json!({"ws_id": ws, "message": format!("CALL:write_file {call}")}),
    )
    .await;
    let turn = events.until("turn_complete").await;
    let result = first(&turn, "tool_result");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("tool 'write_file' is not available in plan mode"),
        "{result}"
    );
    assert!(!turn.iter().any(|e| e.kind() == "approve_request"));
    assert!(!t.cwd().join("planned.txt").exists());
    let (_, tools) = t
        .get(&format!("/v1/api/tools?ws_id={ws}"), Some(FULL))
        .await;
    let names = tool_names(&tools);
    assert!(names.contains(&"read_file".to_string()) && names.contains(&"git".to_string()));
    for refused in ["bash", "write_file", "edit_file"] {
        assert!(
            !names.contains(&refused.to_string()),
            "{refused} in {names:?}"
        );
    }
    // Its status events keep saying so.
    assert!(
        turn.iter()
            .any(|e| e.kind() == "status" && e.data["plan_mode"] == true)
    );

    // Asking again changes nothing; a bad argument is an error event.
    t.post("/v1/api/command", command("/plan on")).await;
    let again = events.until("info").await;
    assert_eq!(
        again.last().unwrap().data["message"],
        "Plan mode is already on."
    );
    t.post("/v1/api/command", command("/plan maybe")).await;
    let bad = events.until("error").await;
    assert_eq!(
        bad.last().unwrap().data["message"],
        "Usage: /plan [on|off] (not 'maybe')"
    );

    // Leaving it: announced, and the next request offers every tool again.
    t.post("/v1/api/command", command("/plan off")).await;
    let left = events.until("status").await;
    assert!(
        first(&left, "info")["message"]
            .as_str()
            .unwrap()
            .starts_with("Plan mode off")
    );
    assert!(first(&left, "status").get("plan_mode").is_none());
    t.post("/v1/api/send", json!({"ws_id": ws, "message": "hello"}))
        .await;
    events.until("turn_complete").await;
    let (_, tools) = t
        .get(&format!("/v1/api/tools?ws_id={ws}"), Some(FULL))
        .await;
    assert!(tool_names(&tools).contains(&"bash".to_string()));

    // The tool-intent route sets it too, announced the same way.
    let (status, reply) = t
        .post(
            "/v1/api/tools",
            json!({"ws_id": ws, "intent": {"plan": true}}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["intent"]["plan"], true);
    let via_route = events.until("status").await;
    assert_eq!(first(&via_route, "status")["plan_mode"], true);
}
