//! MCP prompts synced as read-only skills on a persistent node, against two real MCP
//! servers over stdio: `@modelcontextprotocol/server-everything` and the Python
//! `prompts_server.py` fixture, whose prompt list the test rewrites and announces with
//! `notifications/prompts/list_changed` (both installed by the MCP crate's
//! `tests/fixtures/setup.sh`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use turnstone_mcp::{McpManager, McpServerConfig, McpTransportConfig, ServerState};
use turnstone_node::mcp_skills;
use turnstone_store::{SkillSpec, Store};
use turnstone_testkit::assert_eventually;

use super::*;

fn fixtures() -> std::path::PathBuf {
    turnstone_testkit::mcp_fixtures::dir()
}

fn ensure_fixtures() {
    turnstone_testkit::mcp_fixtures::ensure()
}

fn python() -> String {
    turnstone_testkit::mcp_fixtures::python()
}

fn timeouts(mut config: McpServerConfig) -> McpServerConfig {
    config.startup_timeout = Duration::from_secs(90);
    config.call_timeout = Duration::from_secs(60);
    config
}

fn everything() -> McpServerConfig {
    let script =
        fixtures().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    timeouts(McpServerConfig::stdio("every", "node", [script.to_str().unwrap(), "stdio"]).unwrap())
}

/// `prompts_server.py` as server `pr`, its prompts read from `list`.
fn prompts_server(list: &Path) -> McpServerConfig {
    let script = fixtures().join("prompts_server.py");
    let mut config =
        timeouts(McpServerConfig::stdio("pr", python(), [script.to_str().unwrap()]).unwrap());
    if let McpTransportConfig::Stdio { env, .. } = &mut config.transport {
        env.insert("FIXTURE_PROMPTS".into(), list.to_str().unwrap().into());
    }
    config
}

fn write_prompts(path: &Path, prompts: Value) {
    std::fs::write(path, prompts.to_string()).unwrap();
}

async fn admin(
    t: &TestNode,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = t.http.request(method, t.url(path)).bearer_auth(FULL);
    if let Some(body) = body {
        req = req
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The admin list's rows by name.
async fn admin_rows(t: &TestNode) -> std::collections::BTreeMap<String, Value> {
    let (status, body) = admin(t, reqwest::Method::GET, "/v1/api/admin/skills", None).await;
    assert_eq!(status, 200, "{body}");
    body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r.clone()))
        .collect()
}

/// Makes the fixture announce a new prompt list (it re-reads its file on every request).
async fn announce(mcp: &McpManager) {
    let r = mcp.call_tool("mcp__pr__announce", json!({})).await.unwrap();
    assert_eq!(r.text, "announced");
}

#[tokio::test]
async fn mcp_prompts_become_read_only_skills_that_follow_the_servers_lists() {
    ensure_fixtures();
    let dir = tempfile::tempdir().unwrap();
    let t = TestNode::start_persistent(&dir.path().join("node.db")).await;
    let store: Arc<dyn Store> = t.node.persistence.as_ref().unwrap().store.clone();
    // A manual skill already holds the name of one of the prompts: it wins.
    store
        .create_skill(SkillSpec::new("mcp__pr__taken", "Manual wins."))
        .await
        .unwrap();
    let list = dir.path().join("prompts.json");
    write_prompts(
        &list,
        json!([
            {"name": "greet", "description": "Greets the team.", "text": "Say hello to the team."},
            {"name": "review", "description": "Reviews code.", "text": "Review {code}",
             "arguments": [{"name": "code", "description": "The code", "required": true}]},
            {"name": "taken", "description": "Clashes.", "text": "From MCP."}
        ]),
    );
    let mcp = McpManager::start(vec![everything(), prompts_server(&list)]);
    t.node.set_mcp(mcp.clone());
    let sync = mcp_skills::spawn_sync(mcp.clone(), store.clone());
    for server in ["every", "pr"] {
        assert_eventually!(
            mcp.server_state(server) == Some(ServerState::Ready),
            timeout = Duration::from_secs(90),
            "{server} never became ready: {:?}",
            mcp.status().get(server)
        );
    }

    // Every offered prompt becomes a row (but the one a manual skill holds).
    let every_prompts: Vec<String> = mcp
        .prompts()
        .iter()
        .filter(|p| p.server == "every")
        .map(|p| p.qualified_name.clone())
        .collect();
    assert!(
        every_prompts.contains(&"mcp__every__simple-prompt".to_string()),
        "{every_prompts:?}"
    );
    assert_eventually!(
        {
            let rows = admin_rows(&t).await;
            every_prompts.iter().all(|n| rows.contains_key(n))
                && rows.contains_key("mcp__pr__greet")
                && rows.contains_key("mcp__pr__review")
        },
        timeout = Duration::from_secs(60),
        "prompts never synced: {:?}",
        admin_rows(&t).await.keys().collect::<Vec<_>>()
    );
    let rows = admin_rows(&t).await;
    let simple = &rows["mcp__every__simple-prompt"];
    assert_eq!(simple["origin"], "mcp");
    assert_eq!(simple["mcp_server"], "every");
    assert_eq!(simple["readonly"], true);
    assert_eq!(simple["activation"], "named");
    assert_eq!(simple["description"], "A prompt with no arguments");
    // Fetched with prompts/get: the prompt's own text.
    assert_eq!(
        simple["content"],
        "This is a simple prompt without arguments."
    );
    // Needs arguments: described, with how to call use_prompt.
    let args = rows["mcp__every__args-prompt"]["content"].as_str().unwrap();
    assert!(
        args.contains("- `city` (required): Name of the city")
            && args.contains("- `state` (optional)")
            && args
                .contains(r#"call the `use_prompt` tool with {"name": "mcp__every__args-prompt""#),
        "{args}"
    );
    assert_eq!(rows["mcp__pr__greet"]["content"], "Say hello to the team.");
    assert!(
        rows["mcp__pr__review"]["content"]
            .as_str()
            .unwrap()
            .contains("- `code` (required): The code")
    );
    let taken = &rows["mcp__pr__taken"];
    assert_eq!(taken["origin"], "manual");
    assert_eq!(taken["content"], "Manual wins.");
    assert_eq!(taken["readonly"], false);

    // The public list shows them with their origin.
    let (status, body) = t.get("/v1/api/skills", Some(READ)).await;
    assert_eq!(status, 200, "{body}");
    let listed = body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "mcp__pr__greet")
        .cloned()
        .expect("listed");
    assert_eq!(listed["origin"], "mcp");
    assert_eq!(listed["category"], "mcp");
    assert_eq!(listed["description"], "Greets the team.");

    // Read-only over the admin API.
    let (status, reply) = admin(
        &t,
        reqwest::Method::PUT,
        "/v1/api/admin/skills/mcp__pr__greet",
        Some(json!({"content": "changed"})),
    )
    .await;
    assert_eq!(status, 403, "{reply}");
    assert!(
        reply["error"].as_str().unwrap().contains("read-only"),
        "{reply}"
    );
    let (status, _) = admin(
        &t,
        reqwest::Method::DELETE,
        "/v1/api/admin/skills/mcp__pr__greet",
        None,
    )
    .await;
    assert_eq!(status, 403);

    // A synced skill is usable: a workstream created with it sends it to the model.
    let (status, created) = t
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "greeter", "skill": "mcp__pr__greet"}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let ws_id = created["ws_id"].as_str().unwrap().to_string();
    let mut events = t.sse(&format!("/v1/api/events?ws_id={ws_id}"), None).await;
    t.post("/v1/api/send", json!({"ws_id": ws_id, "message": "hi"}))
        .await;
    events.until("turn_complete").await;
    let request = t.llm.last_request().unwrap();
    assert!(
        request["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Say hello to the team."),
        "{request}"
    );

    // The list changes (review and taken gone, greet changed, farewell new) and is
    // announced: the rows follow; the manual skill and the other server's rows stay.
    write_prompts(
        &list,
        json!([
            {"name": "greet", "description": "Greets the team warmly.", "text": "Say hello warmly."},
            {"name": "farewell", "text": "Say goodbye."}
        ]),
    );
    announce(&mcp).await;
    assert_eventually!(
        {
            let rows = admin_rows(&t).await;
            !rows.contains_key("mcp__pr__review")
                && rows.contains_key("mcp__pr__farewell")
                && rows
                    .get("mcp__pr__greet")
                    .is_some_and(|r| r["content"] == "Say hello warmly.")
        },
        timeout = Duration::from_secs(60),
        "the changed list was not synced: {:?}",
        admin_rows(&t).await
    );
    let rows = admin_rows(&t).await;
    assert_eq!(
        rows["mcp__pr__greet"]["description"],
        "Greets the team warmly."
    );
    assert_eq!(
        rows["mcp__pr__farewell"]["description"],
        "MCP prompt farewell from server pr"
    );
    assert_eq!(rows["mcp__pr__farewell"]["content"], "Say goodbye.");
    assert_eq!(rows["mcp__pr__taken"]["content"], "Manual wins.");
    assert!(every_prompts.iter().all(|n| rows.contains_key(n)));

    // An operator's manual skill takes the name of a synced one; later syncs leave it.
    let (status, reply) = admin(
        &t,
        reqwest::Method::POST,
        "/v1/api/admin/skills",
        Some(json!({"name": "mcp__pr__greet", "content": "Our own greeting."})),
    )
    .await;
    assert_eq!(status, 201, "{reply}");
    assert_eq!(reply["origin"], "manual");
    assert_eq!(reply["readonly"], false);
    write_prompts(
        &list,
        json!([
            {"name": "greet", "description": "Greets again.", "text": "Say hello again."},
            {"name": "later", "text": "Added last."}
        ]),
    );
    announce(&mcp).await;
    assert_eventually!(
        {
            let rows = admin_rows(&t).await;
            rows.contains_key("mcp__pr__later") && !rows.contains_key("mcp__pr__farewell")
        },
        timeout = Duration::from_secs(60),
        "the last list was not synced: {:?}",
        admin_rows(&t).await.keys().collect::<Vec<_>>()
    );
    let rows = admin_rows(&t).await;
    assert_eq!(rows["mcp__pr__greet"]["origin"], "manual");
    assert_eq!(rows["mcp__pr__greet"]["content"], "Our own greeting.");

    sync.abort();
    mcp.shutdown().await;
}
