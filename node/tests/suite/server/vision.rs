//! `read_file` on an image, end to end: the node, its SQLite store and the HTTP fake model
//! that records every request body. A model with `vision` receives the image as an
//! OpenAI `image_url` part (after the tool message, in a user message), also after a restart
//! and resume; a model without it receives the description and no image bytes. Clients see
//! a marker, never the bytes.

use serde_json::{Value, json};

use super::*;

/// A valid 2x1 RGB PNG (70 bytes), and its base64.
const PNG_2X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x7b, 0x40, 0xe8,
    0xdd, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0x00, 0x04,
    0xff, 0x01, 0x07, 0x00, 0x01, 0xff, 0xe2, 0x23, 0x9e, 0x59, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
const PNG_2X1_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4zwAE/wEHAAH/4iOeWQAAAABJRU5ErkJggg==";
const DESCRIPTION: &str = "[image: diagram.png, PNG, 2x1 pixels, 70 bytes]";
const MARKER: &str = "[image attached: image/png, 70 bytes]";

async fn node(db: &std::path::Path, vision: bool) -> TestNode {
    TestNode::spawn(Spec {
        db: Some(db.to_path_buf()),
        engine: Some(Box::new(move |config, _| config.vision = vision)),
        ..Spec::default()
    })
    .await
}

/// Sends `message` to the default workstream and returns the turn's events.
async fn turn(t: &TestNode, ws_id: &str, message: &str) -> Vec<SseEvent> {
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    let (status, body) = t
        .post("/v1/api/send", json!({"ws_id": ws_id, "message": message}))
        .await;
    assert_eq!(status, 200, "{body}");
    events.until("turn_complete").await
}

/// The `image_url` URLs of a recorded request body.
fn image_urls(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|part| part["type"] == "image_url")
        .map(|part| part["image_url"]["url"].as_str().unwrap().to_string())
        .collect()
}

const READ: &str = r#"CALL:read_file {"path": "diagram.png"}"#;

#[tokio::test]
async fn a_vision_model_receives_the_image_also_after_a_restart_and_clients_see_a_marker() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node.db");
    let ws_id = {
        let t = node(&db, true).await;
        std::fs::write(t.cwd().join("diagram.png"), PNG_2X1).unwrap();
        let events = turn(&t, &t.default_ws, READ).await;
        let result = events
            .iter()
            .find(|e| e.kind() == "tool_result")
            .expect("a tool_result event");
        assert_eq!(
            result.data["output"],
            format!("{DESCRIPTION}\n{MARKER}"),
            "clients see the description and a marker"
        );

        // The request after the tool call: the tool message is text, and a user message
        // right after it carries the image as an `image_url` data URL.
        let requests = t.llm.requests();
        assert_eq!(requests.len(), 2, "the call, then the answer");
        let messages = requests[1]["messages"].as_array().unwrap();
        let at = messages
            .iter()
            .position(|m| m["role"] == "tool")
            .expect("the tool result");
        assert_eq!(messages[at]["content"], DESCRIPTION);
        assert_eq!(messages[at + 1]["role"], "user");
        assert_eq!(
            image_urls(&requests[1]),
            [format!("data:image/png;base64,{PNG_2X1_BASE64}")]
        );

        // The attach preamble's history shows the marker, not the bytes.
        let mut attach = t
            .sse(&format!("/v1/api/events?ws_id={}", t.default_ws), None)
            .await;
        let history = attach.until("history").await.pop().unwrap();
        let text = history.data.to_string();
        assert!(text.contains(MARKER), "{text}");
        assert!(!text.contains(PNG_2X1_BASE64), "{text}");

        t.node
            .persistence
            .as_ref()
            .unwrap()
            .writer
            .flush()
            .await
            .unwrap();
        t.default_ws.clone()
    };

    // Second life: the resumed conversation still holds the image, and the next request
    // sends it again.
    let t = node(&db, true).await;
    let (status, body) = t
        .post("/v1/api/workstreams/new", json!({"resume_ws": ws_id}))
        .await;
    assert_eq!(status, 200, "{body}");
    let history = t.node.workstream(&ws_id).unwrap().history();
    let tool = history
        .iter()
        .find(|m| m.role() == turnstone_llm::Role::Tool)
        .unwrap();
    assert_eq!(tool.images.len(), 1);
    assert_eq!(tool.images[0].data, PNG_2X1_BASE64);
    turn(&t, &ws_id, "and what colour is it?").await;
    let request = t.llm.last_request().unwrap();
    assert_eq!(
        image_urls(&request),
        [format!("data:image/png;base64,{PNG_2X1_BASE64}")]
    );
}

#[tokio::test]
async fn a_model_without_vision_gets_the_description_and_no_image_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let t = node(&dir.path().join("node.db"), false).await;
    std::fs::write(t.cwd().join("diagram.png"), PNG_2X1).unwrap();
    turn(&t, &t.default_ws, READ).await;
    let requests = t.llm.requests();
    assert_eq!(requests.len(), 2);
    let body = requests[1].to_string();
    assert!(!body.contains("image_url"), "{body}");
    assert!(!body.contains(PNG_2X1_BASE64), "{body}");
    let tool = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(
        tool["content"],
        format!(
            "{DESCRIPTION}\nThe model cannot see images here: only this description is available."
        )
    );
    // Nothing to keep: the conversation holds no image.
    let history = t.node.workstream(&t.default_ws).unwrap().history();
    assert!(history.iter().all(|m| m.images.is_empty()));
}

#[tokio::test]
async fn bad_images_are_tool_errors_the_model_reads() {
    let dir = tempfile::tempdir().unwrap();
    let t = node(&dir.path().join("node.db"), true).await;
    std::fs::write(t.cwd().join("diagram.png"), &PNG_2X1[..40]).unwrap();
    let events = turn(&t, &t.default_ws, READ).await;
    let result = events.iter().find(|e| e.kind() == "tool_result").unwrap();
    assert_eq!(result.data["is_error"], true);
    assert!(
        result.data["output"]
            .as_str()
            .unwrap()
            .contains("truncated or corrupt PNG image"),
        "{}",
        result.data
    );
    assert!(image_urls(&t.llm.last_request().unwrap()).is_empty());
}
