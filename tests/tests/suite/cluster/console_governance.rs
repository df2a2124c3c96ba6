//! Tool policies and skills made in the console reach every node (issue 15): real Redis, two
//! `turnstone-server` nodes on their own SQLite with their bridges, and a
//! `turnstone-console` on its own SQLite — so the console pushes them. Observed through what
//! the nodes do: a `deny` made in the console blocks `bash` on each node (queue-driven
//! turns), the console's skill is listed by each node, both survive a node restart, and a
//! delete in the console removes both everywhere.

use std::time::Duration;

use serde_json::json;

use super::super::security::console_proc::ConsoleProc;
use super::cluster_settings::wait_reachable;
use super::harness::*;
use super::policies::{outputs, queued_turn};

const BLOCKED: &str = "Blocked by tool policy (pattern match for 'bash')";

/// The names of the enabled skills `node` lists.
async fn skill_names(node: &NodeProc) -> Vec<String> {
    node.get("/v1/api/skills").await["skills"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The output of a `bash` call on a new workstream of `node_id`, through the queue (with no
/// policy it would ask: `queued_turn` fails on an approval request).
async fn bash_output(mq: &mut Mq, node_id: &str, cid: &str) -> Vec<String> {
    // A create directed at a node its bridge has not announced yet (just started or
    // restarted) is refused as "not alive" until it has.
    let ws = mq
        .create_ws_when_alive(node_id, json!({"auto_approve": false}))
        .await;
    outputs(&queued_turn(mq, &ws, "TOOL: echo governed", cid).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_policies_and_skills_are_in_force_on_every_node_and_survive_restarts() {
    let mut mq = Mq::shared("cgov").await;
    let a = NodeProc::start("cgov-a").await;
    let mut b = NodeProc::start("cgov-b").await;
    let _bridge_a = BridgeProc::start(&a, &mq.url, &mq.prefix).await;
    let _bridge_b = BridgeProc::start(&b, &mq.url, &mq.prefix).await;
    let console = ConsoleProc::start(&mq.url, &mq.prefix, &[]).await;
    wait_reachable(&console, "cgov-a").await;
    wait_reachable(&console, "cgov-b").await;

    // Before: no policy on either node.
    for node in [&a, &b] {
        assert_eq!(
            node.get("/v1/api/admin/policies").await["policies"],
            json!([])
        );
    }

    // Bad input never reaches a node.
    let (status, body) = console
        .send(
            reqwest::Method::POST,
            "/v1/api/admin/policies",
            Some(json!({"name": "x", "tool_pattern": "bash", "action": "block"})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("action must be"));

    // 1. A deny and a skill made once in the console are in force on both nodes.
    let (status, body) = console
        .send(
            reqwest::Method::POST,
            "/v1/api/admin/policies",
            Some(json!({"name": "no-bash", "tool_pattern": "bash", "action": "deny", "priority": 10})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let policy_id = body["policy"]["policy_id"].as_str().unwrap().to_string();
    for id in ["cgov-a", "cgov-b"] {
        assert_eq!(
            body["reload"]["results"][id]["status"], "ok",
            "{id}: {body}"
        );
    }
    let (status, body) = console
        .send(
            reqwest::Method::POST,
            "/v1/api/admin/skills",
            Some(json!({"name": "console-skill", "content": "Answer tersely.", "description": "from the console"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    for (node, cid) in [(&a, "c90000000003"), (&b, "c90000000004")] {
        assert_eq!(
            bash_output(&mut mq, &node.node_id, cid).await,
            [BLOCKED],
            "{}",
            node.node_id
        );
        assert!(
            skill_names(node)
                .await
                .contains(&"console-skill".to_string()),
            "{}",
            node.node_id
        );
        let policies = node.get("/v1/api/admin/policies").await;
        assert_eq!(
            policies["policies"][0]["policy_id"],
            policy_id.as_str(),
            "{policies}"
        );
    }

    // 2. A node restarted afterwards still has both (its own store holds them).
    b.kill9();
    b.spawn().await;
    wait_reachable(&console, "cgov-b").await;
    assert_eq!(
        bash_output(&mut mq, "cgov-b", "c90000000005").await,
        [BLOCKED],
        "after a restart"
    );
    assert!(skill_names(&b).await.contains(&"console-skill".to_string()));

    // 3. Deleted in the console: lifted on both nodes; the skill goes too.
    let (status, body) = console
        .send(
            reqwest::Method::DELETE,
            &format!("/v1/api/admin/policies/{policy_id}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = console
        .send(
            reqwest::Method::DELETE,
            "/v1/api/admin/skills/console-skill",
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for node in [&a, &b] {
        assert_eq!(
            node.get("/v1/api/admin/policies").await["policies"],
            json!([]),
            "{}",
            node.node_id
        );
        assert!(
            !skill_names(node)
                .await
                .contains(&"console-skill".to_string())
        );
    }

    // 4. Every change is in the console's audit log.
    let (status, log) = console
        .send(reqwest::Method::GET, "/v1/api/admin/audit?limit=10", None)
        .await;
    assert_eq!(status, 200, "{log}");
    let actions: Vec<&str> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "skill.delete",
            "policy.delete",
            "skill.create",
            "policy.create"
        ]
    );
    mq.cleanup().await;
}

/// The LLM judge's model, endpoint and key set as stored settings in the console reach the
/// node's judge at the next config-reload: an auto-review call is judged by the console's
/// judge endpoint with the console's judge model, and the key is never shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_judge_settings_reach_the_nodes_judge() {
    let mut mq = Mq::shared("cjdg").await;
    let a = NodeProc::start("cjdg-a").await;
    let _bridge = BridgeProc::start(&a, &mq.url, &mq.prefix).await;
    let console = ConsoleProc::start(&mq.url, &mq.prefix, &[]).await;
    wait_reachable(&console, "cjdg-a").await;
    let judge = turnstone_testkit::FakeLlm::start().await;
    for (key, value) in [
        ("judge.base_url", json!(judge.base_url())),
        ("judge.model", json!("console-judge-model")),
        ("judge.api_key", json!("sk-judge-never-shown")),
        ("judge.timeout", json!(20.0)),
    ] {
        let (status, body) = console
            .send(
                reqwest::Method::PUT,
                &format!("/v1/api/admin/settings/{key}"),
                Some(json!({"value": value})),
            )
            .await;
        assert_eq!(status, 200, "{key}: {body}");
        assert_eq!(
            body["reload"]["results"]["cjdg-a"]["status"], "ok",
            "{key}: {body}"
        );
        assert!(!body.to_string().contains("sk-judge-never-shown"), "{body}");
    }
    let (_, listed) = console
        .send(reqwest::Method::GET, "/v1/api/admin/settings", None)
        .await;
    assert!(!listed.to_string().contains("sk-judge-never-shown"));

    let (status, body) = a
        .post(
            "/v1/api/workstreams/new",
            json!({"name": "judged", "posture": "auto-review"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let ws = body["ws_id"].as_str().unwrap().to_string();
    let (status, body) = a
        .post(
            "/v1/api/send",
            json!({"ws_id": ws, "message": "TOOL: echo judged-ran; judge-probe-cmd"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    turnstone_testkit::assert_eventually!(
        judge
            .requests()
            .iter()
            .any(|r| r["model"] == "console-judge-model"),
        timeout = Duration::from_secs(60),
        "the console's judge endpoint was never asked with the console's judge model"
    );
    mq.cleanup().await;
}
