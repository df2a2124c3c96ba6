//! The scheduler (cluster spec §6.8) and its admin routes, with the console's store on both
//! backends: CRUD with bad input and permissions; an `at` task fires once and creates a
//! workstream on a live node (real node, bridge and Redis); a cron task fires on schedule;
//! two consoles on one store and one Redis never both fire a task; a firing that finds no
//! node is recorded as failed, retried, and dispatched once a node is there.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use reqwest::Method;
use serde_json::json;

use super::db::{Db, both_backends};
use super::fake_node::FakeNode;
use super::*;

both_backends!(schedules_crud, a_failure_is_recorded_and_retried);

const TICK: Duration = Duration::from_millis(200);

async fn console_with(prefix: &str, db: &Db, tick: Duration) -> TestConsole {
    TestConsole::start_full(prefix, |c| c.scheduler_tick = tick, Some(db.store.clone())).await
}

/// An ISO-8601 instant `offset` away from now (negative: in the past).
fn iso_in(offset_secs: i64) -> String {
    let now = SystemTime::now();
    let t = if offset_secs >= 0 {
        now + Duration::from_secs(offset_secs.unsigned_abs())
    } else {
        now - Duration::from_secs(offset_secs.unsigned_abs())
    };
    turnstone_store::timestamp::format_system_time(t)
}

async fn create(c: &TestConsole, body: Value) -> Value {
    let (code, task) = c
        .call(
            Method::POST,
            "/v1/api/admin/schedules",
            Some(body),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 201, "{task}");
    task
}

async fn runs(c: &TestConsole, task_id: &str) -> Vec<Value> {
    let (code, body) = c
        .get(&format!(
            "/v1/api/admin/schedules/{task_id}/runs?limit=1000"
        ))
        .await;
    assert_eq!(code, 200, "{body}");
    body["runs"].as_array().cloned().unwrap_or_default()
}

async fn schedules_crud(db: Db) {
    let c = console_with(&prefix(), &db, Duration::from_secs(3600)).await;
    let task = create(
        &c,
        json!({"name": "nightly", "schedule_type": "cron", "cron_expr": "0 3 * * *",
               "initial_message": "write the report", "target_mode": "pool", "model": "m1"}),
    )
    .await;
    let id = task["task_id"].as_str().unwrap().to_string();
    assert_eq!(task["enabled"], true);
    assert_eq!(task["target_mode"], "pool");
    let next = task["next_run"].as_str().unwrap();
    assert!(next.contains("T03:00:00"), "{next}");
    assert!(next > iso_in(0).as_str(), "{next} is in the future");
    assert_eq!(task["last_status"], Value::Null);

    let at = create(
        &c,
        json!({"name": "once", "schedule_type": "at", "at_time": "2031-05-06T07:08:09+02:00",
               "initial_message": "hello"}),
    )
    .await;
    assert_eq!(at["at_time"], "2031-05-06T05:08:09.000000+00:00");
    assert_eq!(at["next_run"], at["at_time"]);
    assert_eq!(at["target_mode"], "auto");

    let (code, list) = c.get("/v1/api/admin/schedules").await;
    assert_eq!(code, 200);
    let names: Vec<&str> = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nightly", "once"]);

    // Update: a new expression moves next_run; disabling keeps the row.
    let path = format!("/v1/api/admin/schedules/{id}");
    let (code, updated) = c
        .call(
            Method::PUT,
            &path,
            Some(json!({"cron_expr": "30 4 * * *", "enabled": false})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["enabled"], false);
    assert!(updated["next_run"].as_str().unwrap().contains("T04:30:00"));
    let (code, got) = c.get(&path).await;
    assert_eq!((code, &got["cron_expr"]), (200, &json!("30 4 * * *")));
    assert_eq!(runs(&c, &id).await, Vec::<Value>::new());

    // Bad input: 4xx with the reason.
    let bad = |extra: Value| {
        let mut body = json!({"name": "x", "schedule_type": "cron", "cron_expr": "* * * * *",
                              "initial_message": "m"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    for (body, needle) in [
        (bad(json!({"cron_expr": "61 * * * *"})), "Invalid cron_expr"),
        (bad(json!({"cron_expr": ""})), "cron_expr is required"),
        (
            bad(json!({"schedule_type": "weekly"})),
            "Invalid schedule_type",
        ),
        (
            bad(json!({"schedule_type": "at", "at_time": "soon"})),
            "Invalid at_time",
        ),
        (bad(json!({"target_mode": "a/b"})), "Invalid target_mode"),
        (
            bad(json!({"initial_message": ""})),
            "initial_message is required",
        ),
        (bad(json!({"name": " "})), "name is required"),
        (bad(json!({"surprise": 1})), "surprise"),
        (bad(json!({"enabled": "yes"})), "Invalid"),
    ] {
        let (code, err) = c
            .call(
                Method::POST,
                "/v1/api/admin/schedules",
                Some(body.clone()),
                Some(TOKEN),
            )
            .await;
        assert_eq!(code, 400, "{body} -> {err}");
        let message = err["error"].as_str().unwrap_or_default();
        assert!(
            message.contains(needle),
            "{body}: {message:?} lacks {needle:?}"
        );
    }
    let (code, err) = c
        .call(
            Method::PUT,
            &path,
            Some(json!({"cron_expr": "nope"})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 400, "{err}");
    let (code, _) = c
        .call(
            Method::PUT,
            "/v1/api/admin/schedules/nope",
            Some(json!({"enabled": true})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 404);
    let (code, _) = c.get("/v1/api/admin/schedules/nope/runs").await;
    assert_eq!(code, 404);
    let (code, _) = c.get(&format!("{path}/runs?limit=0")).await;
    assert_eq!(code, 400);

    // Permissions: admin.schedules (scope approve); switching approvals off also needs
    // tools.approve.
    let (_, role) = c
        .call(
            Method::POST,
            "/v1/api/admin/roles",
            Some(json!({"name": "planners", "permissions": "read,admin.schedules"})),
            Some(TOKEN),
        )
        .await;
    let user_body = |name: &str| json!({"username": name, "display_name": name, "password": "correct horse battery"});
    for name in ["pat", "vic"] {
        let (code, _) = c
            .call(
                Method::POST,
                "/v1/api/admin/users",
                Some(user_body(name)),
                Some(TOKEN),
            )
            .await;
        assert_eq!(code, 201);
    }
    let (_, users) = c.get("/v1/api/admin/users").await;
    let pat_id = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "pat")
        .unwrap()["user_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _) = c
        .call(
            Method::PUT,
            &format!("/v1/api/admin/users/{pat_id}/roles"),
            Some(json!({"roles": [role["role_id"]]})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 200);
    let jwt = |name: &'static str| {
        let c = &c;
        async move {
            let (_, r) = c
                .call(
                    Method::POST,
                    "/v1/api/auth/login",
                    Some(json!({"username": name, "password": "correct horse battery"})),
                    None,
                )
                .await;
            r["jwt"].as_str().unwrap().to_string()
        }
    };
    let (pat, vic) = (jwt("pat").await, jwt("vic").await);
    assert_eq!(c.get_as("/v1/api/admin/schedules", Some(&pat)).await.0, 200);
    assert_eq!(c.get_as("/v1/api/admin/schedules", Some(&vic)).await.0, 403);
    assert_eq!(
        c.get_as("/v1/api/admin/schedules", Some(READ_TOKEN))
            .await
            .0,
        403
    );
    assert_eq!(c.get_as("/v1/api/admin/schedules", None).await.0, 401);
    let mine = bad(json!({"name": "pat's"}));
    let (code, _) = c
        .call(
            Method::POST,
            "/v1/api/admin/schedules",
            Some(mine),
            Some(&pat),
        )
        .await;
    assert_eq!(code, 201);
    let sneaky = bad(json!({"name": "sneaky", "auto_approve": true}));
    let (code, err) = c
        .call(
            Method::POST,
            "/v1/api/admin/schedules",
            Some(sneaky.clone()),
            Some(&pat),
        )
        .await;
    assert_eq!(code, 403, "{err}");
    assert!(
        err["error"].as_str().unwrap().contains("tools.approve"),
        "{err}"
    );
    let (code, created) = c
        .call(
            Method::POST,
            "/v1/api/admin/schedules",
            Some(sneaky),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 201, "the full-access token may: {created}");
    assert_eq!(created["auto_approve"], true);

    // Delete: once, then 404.
    let (code, _) = c.call(Method::DELETE, &path, None, Some(TOKEN)).await;
    assert_eq!(code, 200);
    let (code, _) = c.call(Method::DELETE, &path, None, Some(TOKEN)).await;
    assert_eq!(code, 404);
}

async fn a_failure_is_recorded_and_retried(db: Db) {
    let p = prefix();
    let c = console_with(&p, &db, TICK).await;
    // No node: the firing fails, is recorded, and is tried again at the next ticks; the task
    // stays enabled with its next_run.
    let task = create(
        &c,
        json!({"name": "retry-me", "schedule_type": "at", "at_time": iso_in(-1),
               "initial_message": "hi"}),
    )
    .await;
    let id = task["task_id"].as_str().unwrap().to_string();
    turnstone_testkit::assert_eventually!(
        runs(&c, &id).await.len() >= 2,
        timeout = Duration::from_secs(20),
        "two failed attempts recorded: {:?}",
        runs(&c, &id).await
    );
    for run in runs(&c, &id).await {
        assert_eq!(run["status"], "failed", "{run}");
        assert_eq!(run["error"], "No reachable nodes available", "{run}");
    }
    let (_, now) = c.get(&format!("/v1/api/admin/schedules/{id}")).await;
    assert_eq!(now["enabled"], true);
    assert_eq!(
        now["next_run"], task["next_run"],
        "a failure does not advance next_run"
    );
    assert_eq!(now["last_status"], "failed");

    // A node appears: the next attempt is dispatched to it, once, and the task disables.
    let node = FakeNode::start("node-s", turnstone_console::model::CONSOLE_VERSION).await;
    heartbeat(&p, "node-s", &node.url, 10).await;
    turnstone_testkit::assert_eventually!(
        c.get(&format!("/v1/api/admin/schedules/{id}")).await.1["enabled"] == false,
        timeout = Duration::from_secs(20),
        "dispatched once the node is there"
    );
    let all = runs(&c, &id).await;
    let dispatched: Vec<&Value> = all.iter().filter(|r| r["status"] == "dispatched").collect();
    assert_eq!(dispatched.len(), 1, "{all:?}");
    assert_eq!(dispatched[0]["node_id"], "node-s");
    let queued = drain(&format!("{p}:inbound:node-s")).await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0]["type"], "create_workstream");
    assert_eq!(queued[0]["name"], "retry-me");
    assert_eq!(queued[0]["correlation_id"], dispatched[0]["correlation_id"]);
    let (_, now) = c.get(&format!("/v1/api/admin/schedules/{id}")).await;
    assert_eq!(now["next_run"], Value::Null);
    assert!(now["last_run"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_task_fires_on_schedule() {
    let db = super::db::sqlite().await;
    let p = prefix();
    let c = console_with(&p, &db, TICK).await;
    let task = create(
        &c,
        json!({"name": "every-second", "schedule_type": "cron", "cron_expr": "* * * * * *",
               "target_mode": "pool", "initial_message": "tick"}),
    )
    .await;
    let id = task["task_id"].as_str().unwrap().to_string();
    turnstone_testkit::assert_eventually!(
        runs(&c, &id).await.len() >= 3,
        timeout = Duration::from_secs(30),
        "three firings"
    );
    // Stop it, then compare the runs with what was queued.
    let (code, _) = c
        .call(
            Method::PUT,
            &format!("/v1/api/admin/schedules/{id}"),
            Some(json!({"enabled": false})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 200);
    tokio::time::sleep(TICK * 3).await; // a tick in flight finishes
    let all = runs(&c, &id).await;
    assert!(all.iter().all(|r| r["status"] == "dispatched"), "{all:?}");
    // One firing per cron second at most: every run started in another second.
    let seconds: BTreeSet<String> = all
        .iter()
        .map(|r| r["started"].as_str().unwrap()[..19].to_string())
        .collect();
    assert_eq!(seconds.len(), all.len(), "{all:?}");
    let queued = drain(&format!("{p}:inbound")).await;
    let queued_ids: BTreeSet<&str> = queued
        .iter()
        .map(|m| m["correlation_id"].as_str().unwrap())
        .collect();
    let run_ids: BTreeSet<&str> = all
        .iter()
        .map(|r| r["correlation_id"].as_str().unwrap())
        .collect();
    assert_eq!(queued_ids, run_ids, "every run's message, and no other");
    let (_, now) = c.get(&format!("/v1/api/admin/schedules/{id}")).await;
    assert!(now["last_run"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consoles_never_both_fire_one_task() {
    let db = super::db::sqlite().await;
    let p = prefix();
    let fast = Duration::from_millis(20);
    let a = console_with(&p, &db, fast).await;
    let b = console_with(&p, &db, fast).await;
    let mut ids = Vec::new();
    for i in 0..30 {
        let task = create(
            if i % 2 == 0 { &a } else { &b },
            json!({"name": format!("once-{i:02}"), "schedule_type": "at", "at_time": iso_in(-1),
                   "target_mode": "pool", "initial_message": "hi"}),
        )
        .await;
        ids.push(task["task_id"].as_str().unwrap().to_string());
    }
    turnstone_testkit::assert_eventually!(
        {
            let (_, list) = a.get("/v1/api/admin/schedules").await;
            list["tasks"]
                .as_array()
                .is_some_and(|t| t.len() == 30 && t.iter().all(|t| t["enabled"] == false))
        },
        timeout = Duration::from_secs(30),
        "every task fired"
    );
    tokio::time::sleep(fast * 10).await; // any duplicate firing would have happened by now
    for id in &ids {
        let r = runs(&a, id).await;
        assert_eq!(r.len(), 1, "task {id} fired {} times: {r:?}", r.len());
    }
    let queued = drain(&format!("{p}:inbound")).await;
    assert_eq!(queued.len(), 30, "one message per task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_at_task_fires_once_and_creates_a_workstream_on_a_live_node() {
    let db = super::db::sqlite().await;
    let p = prefix();
    let dir = tempfile::tempdir().unwrap();
    let (_llm, llm_url) = super::cluster::start_llm(dir.path()).await;
    let node = super::cluster::start_node(dir.path(), &p, "node-at", &llm_url, None, 10).await;
    let c = console_with(&p, &db, TICK).await;
    c.wait_for_nodes(&["node-at"]).await;
    let task = create(
        &c,
        json!({"name": "scheduled-ws", "schedule_type": "at", "at_time": iso_in(1),
               "initial_message": "hello from the scheduler"}),
    )
    .await;
    let id = task["task_id"].as_str().unwrap().to_string();
    // The bridge creates it on the node; the node lists it.
    turnstone_testkit::assert_eventually!(
        workstream_named_at(&node.url, "scheduled-ws")
            .await
            .is_some(),
        timeout = Duration::from_secs(30),
        "the scheduled workstream exists on the node"
    );
    let all = runs(&c, &id).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["status"], "dispatched");
    assert_eq!(all[0]["node_id"], "node-at");
    let (_, now) = c.get(&format!("/v1/api/admin/schedules/{id}")).await;
    assert_eq!(now["enabled"], false, "an at task disables itself");
    assert_eq!(now["next_run"], Value::Null);
    // Later ticks do not fire it again.
    tokio::time::sleep(TICK * 5).await;
    assert_eq!(runs(&c, &id).await.len(), 1);
    drop(node);
}
