//! Personas (`[tools.personas]`, seed 000): chosen at creation (`persona`) or with
//! `/persona`; an exact set shows its tools and defers the rest behind tool_search, a hard
//! set (no tool_search) is all the workstream gets.

use serde_json::{Value, json};

use super::{FULL, Spec, TestNode};

async fn node() -> TestNode {
    TestNode::spawn(Spec {
        engine: Some(Box::new(|config, _| {
            config.toolset.personas = [
                (
                    "reviewer".to_string(),
                    vec!["read_file".into(), "git".into(), "tool_search".into()],
                ),
                ("calculator".to_string(), vec!["math".into()]),
            ]
            .into_iter()
            .collect();
        })),
        ..Spec::default()
    })
    .await
}

async fn tools_of_next_request(t: &TestNode, ws: &str) -> (Vec<String>, Value) {
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    t.post("/v1/api/send", json!({"ws_id": ws, "message": "hi"}))
        .await;
    events.until("turn_complete").await;
    let (_, reply) = t
        .get(&format!("/v1/api/tools?ws_id={ws}"), Some(FULL))
        .await;
    let names = reply["prepared"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    (names, reply["prepared"].clone())
}

#[tokio::test]
async fn a_persona_chosen_at_creation_sets_the_visible_tools() {
    let t = node().await;
    let (status, created) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "rev", "persona": "reviewer"}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let ws = created["ws_id"].as_str().unwrap();
    let (names, prepared) = tools_of_next_request(&t, ws).await;
    assert_eq!(names, ["git", "read_file", "tool_search"]);
    // Exact: everything else is deferred, reachable through tool_search.
    let deferred: Vec<&str> = prepared["deferred"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().or_else(|| d["name"].as_str()).unwrap())
        .collect();
    assert!(deferred.contains(&"bash"), "{prepared}");

    let (status, err) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "x", "persona": "nobody"}),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        err["error"],
        "unknown persona 'nobody' (configured: calculator, reviewer)"
    );
}

#[tokio::test]
async fn persona_command_selects_a_hard_set_without_tool_search() {
    let t = node().await;
    let ws = t.default_ws.clone();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    let command = |text: &str| json!({"ws_id": ws, "command": text});
    t.post("/v1/api/command", command("/persona calculator"))
        .await;
    let set = events.until("info").await;
    assert_eq!(
        set.last().unwrap().data["message"],
        "Persona set: calculator; it applies from the next turn."
    );
    drop(events);
    let (names, prepared) = tools_of_next_request(&t, &ws).await;
    assert_eq!(names, ["math"]);
    assert_eq!(prepared["search_active"], false);
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws}"), None).await;
    t.post("/v1/api/command", command("/persona nobody")).await;
    let bad = events.until("error").await;
    assert!(
        bad.last().unwrap().data["message"]
            .as_str()
            .unwrap()
            .contains("unknown persona 'nobody'"),
        "{bad:?}"
    );
    t.post("/v1/api/command", command("/persona")).await;
    let shown = events.until("info").await;
    assert_eq!(
        shown.last().unwrap().data["message"],
        "Persona: calculator. Configured: calculator, reviewer."
    );
    t.post("/v1/api/command", command("/persona clear")).await;
    events.until("info").await;
    drop(events);
    let (names, _) = tools_of_next_request(&t, &ws).await;
    assert!(names.contains(&"bash".to_string()), "{names:?}");
}
