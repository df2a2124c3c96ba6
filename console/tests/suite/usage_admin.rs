//! The usage report `GET /v1/api/admin/usage` on the console's store, on both backends:
//! totals and groups of the stored calls, the time range, bad parameters answered 400 naming
//! the parameter, the `admin.usage` permission, and the scheduler's retention prune.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use turnstone_store::timestamp::days_ago;
use turnstone_store::{NewUsageEvent, UsageGroup, UsageQuery};

use super::db::{Db, both_backends};
use super::*;

both_backends!(
    report_totals_groups_and_range,
    bad_parameters_are_400,
    permission_admin_usage,
    the_scheduler_prunes_past_retention
);

fn call(timestamp: &str, user: &str, model: &str, prompt: i64, tools: i64) -> NewUsageEvent {
    NewUsageEvent {
        timestamp: timestamp.into(),
        user_id: user.into(),
        ws_id: format!("ws-{user}"),
        node_id: "node-a".into(),
        model: model.into(),
        prompt_tokens: prompt,
        completion_tokens: prompt / 10,
        tool_calls_count: tools,
        ..NewUsageEvent::default()
    }
}

async fn seed(db: &Db, calls: Vec<NewUsageEvent>) {
    for c in calls {
        db.store.record_usage(c).await.unwrap();
    }
}

async fn report_totals_groups_and_range(db: Db) {
    seed(
        &db,
        vec![
            call("2026-11-01T08:00:00.000000+00:00", "ada", "big", 1000, 2),
            call("2026-11-01T09:00:00.000000+00:00", "bob", "small", 100, 0),
            call("2026-11-02T10:00:00.000000+00:00", "ada", "small", 300, 1),
        ],
    )
    .await;
    let c = TestConsole::start_with_store(&prefix(), db.store.clone()).await;
    let (code, body) = c.get("/v1/api/admin/usage").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["group_by"], "day");
    assert_eq!(
        body["totals"],
        json!({"prompt_tokens": 1400, "completion_tokens": 140, "tool_calls": 3,
               "cache_creation_tokens": 0, "cache_read_tokens": 0, "calls": 3})
    );
    let keys = |b: &Value| -> Vec<String> {
        b["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(keys(&body), ["2026-11-02", "2026-11-01"]);
    assert_eq!(body["rows"][1]["prompt_tokens"], 1100);
    assert_eq!(body["rows"][1]["calls"], 2);

    let (code, body) = c.get("/v1/api/admin/usage?group_by=user").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(keys(&body), ["ada", "bob"]);
    assert_eq!(body["rows"][0]["tool_calls"], 3);
    assert_eq!(body["rows"][0]["completion_tokens"], 130);

    // A date alone as `until` includes that day; `since` with an offset is converted.
    let (code, body) = c
        .get(
            "/v1/api/admin/usage?group_by=model&since=2026-11-01T10:00:00%2B01:00&until=2026-11-01",
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(keys(&body), ["small"]);
    assert_eq!(body["totals"]["calls"], 1);
    assert_eq!(body["since"], "2026-11-01T09:00:00.000000+00:00");
    assert_eq!(body["until"], "2026-11-02T00:00:00.000000+00:00");

    let (code, body) = c.get("/v1/api/admin/usage?group_by=ws&limit=1").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(keys(&body), ["ws-ada"]);
    assert_eq!(
        body["totals"]["calls"], 3,
        "the limit cuts rows, not totals"
    );
}

async fn bad_parameters_are_400(db: Db) {
    let c = TestConsole::start_with_store(&prefix(), db.store.clone()).await;
    for (query, needle) in [
        ("group_by=week", "group_by"),
        ("limit=0", "limit"),
        ("limit=abc", "limit"),
        ("since=last-tuesday", "since"),
        ("until=2026-02-30T25:00:00", "until"),
        (
            "since=2026-11-02&until=2026-11-01T00:00:00Z",
            "since must be before until",
        ),
    ] {
        assert_error(
            c.get(&format!("/v1/api/admin/usage?{query}")).await,
            400,
            needle,
        );
    }
}

async fn permission_admin_usage(db: Db) {
    let c = TestConsole::start_with_store(&prefix(), db.store.clone()).await;
    let role = |name: &'static str, permissions: &'static str| {
        let c = &c;
        async move {
            let (code, role) = c
                .call(
                    Method::POST,
                    "/v1/api/admin/roles",
                    Some(json!({"name": name, "permissions": permissions})),
                    Some(TOKEN),
                )
                .await;
            assert_eq!(code, 201, "{role}");
            role["role_id"].as_str().unwrap().to_string()
        }
    };
    let accountants = role("accountants", "read,admin.usage").await;
    let auditors = role("auditors", "read,admin.audit").await;
    let ann = &c.user_jwt("ann", &accountants).await;
    let aud = &c.user_jwt("aud", &auditors).await;
    let vic = &c.user_jwt("vic", "viewer").await;
    let path = "/v1/api/admin/usage";
    assert_eq!(c.get_as(path, Some(ann)).await.0, 200);
    assert_eq!(
        c.get_as(path, Some(aud)).await.0,
        403,
        "admin.audit does not open usage"
    );
    assert_eq!(c.get_as(path, Some(vic)).await.0, 403);
    assert_eq!(c.get_as(path, None).await.0, 401);
    // The route is documented with what it needs.
    let (_, doc) = c.get("/openapi.json").await;
    let op = &doc["paths"]["/v1/api/admin/usage"]["get"];
    assert!(
        op["parameters"].as_array().is_some_and(|p| p.len() == 4),
        "{op}"
    );
}

async fn the_scheduler_prunes_past_retention(db: Db) {
    seed(
        &db,
        vec![
            call(&days_ago(40), "old", "m", 1, 0),
            call(&days_ago(10), "recent", "m", 1, 0),
        ],
    )
    .await;
    let users = || async {
        let report = db
            .store
            .usage_report(UsageQuery {
                group_by: UsageGroup::User,
                limit: 10,
                ..UsageQuery::default()
            })
            .await
            .unwrap();
        report.rows.into_iter().map(|r| r.key).collect::<Vec<_>>()
    };
    let _c = TestConsole::start_full(
        &prefix(),
        |c| {
            c.scheduler_tick = Duration::from_millis(100);
            c.usage_retention_days = 30;
        },
        Some(db.store.clone()),
    )
    .await;
    turnstone_testkit::assert_eventually!(
        users().await == ["recent"],
        "usage rows older than 30 days are pruned on the first tick: {:?}",
        users().await
    );
}
