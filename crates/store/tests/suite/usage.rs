//! Usage accounting ([`UsageStore`]): rows written directly and through the writer, reports
//! over a time range in total and by each group, the row limit, and the age prune.

use turnstone_store::{
    NewUsageEvent, UsageGroup, UsageQuery, UsageRow, UsageTotals, WriteOp, Writer, WriterConfig,
};

use crate::support::TestDb;

both_backends!(
    report_totals_and_groups,
    report_time_range_and_limit,
    writer_records_usage,
    prune_drops_old_rows
);

fn call(
    timestamp: &str,
    user: &str,
    model: &str,
    prompt: i64,
    completion: i64,
    tools: i64,
) -> NewUsageEvent {
    NewUsageEvent {
        timestamp: timestamp.into(),
        user_id: user.into(),
        ws_id: format!("ws-{user}"),
        node_id: if user == "bob" { "node-b" } else { "node-a" }.into(),
        model: model.into(),
        prompt_tokens: prompt,
        completion_tokens: completion,
        tool_calls_count: tools,
        cache_creation_tokens: 1,
        cache_read_tokens: 2,
    }
}

/// Four calls over two days: alice twice on day 1 (gpt, claude), bob on days 1 and 2.
async fn seed(store: &dyn turnstone_store::Store) {
    for event in [
        call(
            "2026-11-01T08:00:00.000000+00:00",
            "alice",
            "gpt",
            100,
            10,
            1,
        ),
        call(
            "2026-11-01T09:00:00.000000+00:00",
            "alice",
            "claude",
            200,
            20,
            0,
        ),
        call(
            "2026-11-01T23:59:59.999999+00:00",
            "bob",
            "gpt",
            1000,
            100,
            3,
        ),
        call("2026-11-02T00:00:00.000000+00:00", "bob", "gpt", 50, 5, 2),
    ] {
        store.record_usage(event).await.unwrap();
    }
}

fn query(group_by: UsageGroup) -> UsageQuery {
    UsageQuery {
        group_by,
        limit: 100,
        ..UsageQuery::default()
    }
}

fn keys(rows: &[UsageRow]) -> Vec<&str> {
    rows.iter().map(|r| r.key.as_str()).collect()
}

async fn report_totals_and_groups(db: TestDb) {
    let store = db.open().await;
    let empty = store.usage_report(query(UsageGroup::Day)).await.unwrap();
    assert_eq!(empty.totals, UsageTotals::default());
    assert!(empty.rows.is_empty());

    seed(&*store).await;
    let by_day = store.usage_report(query(UsageGroup::Day)).await.unwrap();
    assert_eq!(
        by_day.totals,
        UsageTotals {
            prompt_tokens: 1350,
            completion_tokens: 135,
            tool_calls: 6,
            cache_creation_tokens: 4,
            cache_read_tokens: 8,
            calls: 4,
        }
    );
    // Days newest first; the last microsecond of a day belongs to it.
    assert_eq!(keys(&by_day.rows), ["2026-11-02", "2026-11-01"]);
    assert_eq!(by_day.rows[1].totals.prompt_tokens, 1300);
    assert_eq!(by_day.rows[1].totals.calls, 3);
    assert_eq!(by_day.rows[0].totals.tool_calls, 2);

    // Every other group: most tokens first.
    let by_user = store.usage_report(query(UsageGroup::User)).await.unwrap();
    assert_eq!(keys(&by_user.rows), ["bob", "alice"]);
    assert_eq!(by_user.rows[0].totals.completion_tokens, 105);
    assert_eq!(by_user.rows[1].totals.tool_calls, 1);
    assert_eq!(by_user.totals, by_day.totals);

    let by_model = store.usage_report(query(UsageGroup::Model)).await.unwrap();
    assert_eq!(keys(&by_model.rows), ["gpt", "claude"]);
    assert_eq!(by_model.rows[0].totals.calls, 3);
    assert_eq!(by_model.rows[1].totals.prompt_tokens, 200);

    let by_node = store.usage_report(query(UsageGroup::Node)).await.unwrap();
    assert_eq!(keys(&by_node.rows), ["node-b", "node-a"]);
    let by_ws = store.usage_report(query(UsageGroup::Ws)).await.unwrap();
    assert_eq!(keys(&by_ws.rows), ["ws-bob", "ws-alice"]);
    assert_eq!(by_ws.rows[1].totals.prompt_tokens, 300);
}

async fn report_time_range_and_limit(db: TestDb) {
    let store = db.open().await;
    seed(&*store).await;
    // `since` is inclusive, `until` exclusive.
    let day_one = store
        .usage_report(UsageQuery {
            since: Some("2026-11-01T09:00:00.000000+00:00".into()),
            until: Some("2026-11-02T00:00:00.000000+00:00".into()),
            ..query(UsageGroup::User)
        })
        .await
        .unwrap();
    assert_eq!(day_one.totals.calls, 2);
    assert_eq!(day_one.totals.prompt_tokens, 1200);
    assert_eq!(keys(&day_one.rows), ["bob", "alice"]);

    let later = store
        .usage_report(UsageQuery {
            since: Some("2026-11-02T00:00:00.000000+00:00".into()),
            ..query(UsageGroup::Model)
        })
        .await
        .unwrap();
    assert_eq!(later.totals.calls, 1);
    assert_eq!(keys(&later.rows), ["gpt"]);

    let none = store
        .usage_report(UsageQuery {
            until: Some("2026-01-01T00:00:00.000000+00:00".into()),
            ..query(UsageGroup::Day)
        })
        .await
        .unwrap();
    assert_eq!(none.totals.calls, 0);
    assert!(none.rows.is_empty());

    // The limit cuts the groups, never the totals.
    let top = store
        .usage_report(UsageQuery {
            limit: 1,
            ..query(UsageGroup::Model)
        })
        .await
        .unwrap();
    assert_eq!(keys(&top.rows), ["gpt"]);
    assert_eq!(top.totals.calls, 4);
}

async fn writer_records_usage(db: TestDb) {
    let store = db.open().await;
    let writer = Writer::spawn(store.clone(), WriterConfig::default());
    writer
        .try_write(WriteOp::Usage(NewUsageEvent {
            model: "fast".into(),
            prompt_tokens: 7,
            completion_tokens: 3,
            ..NewUsageEvent::default()
        }))
        .unwrap();
    writer.flush().await.unwrap();
    let report = store.usage_report(query(UsageGroup::Model)).await.unwrap();
    assert_eq!(report.totals.calls, 1);
    assert_eq!(report.rows[0].key, "fast");
    assert_eq!(report.rows[0].totals.prompt_tokens, 7);
    // No timestamp given: now, so today's group.
    let today = &turnstone_store::timestamp::now()[..10];
    let by_day = store.usage_report(query(UsageGroup::Day)).await.unwrap();
    assert_eq!(keys(&by_day.rows), [today]);
    writer.shutdown().await;
}

async fn prune_drops_old_rows(db: TestDb) {
    let store = db.open().await;
    store
        .record_usage(call(
            &turnstone_store::timestamp::days_ago(100),
            "alice",
            "gpt",
            1,
            1,
            0,
        ))
        .await
        .unwrap();
    store
        .record_usage(call(
            &turnstone_store::timestamp::days_ago(10),
            "bob",
            "gpt",
            2,
            2,
            0,
        ))
        .await
        .unwrap();
    assert_eq!(store.prune_usage(90).await.unwrap(), 1);
    assert_eq!(store.prune_usage(90).await.unwrap(), 0);
    let left = store.usage_report(query(UsageGroup::User)).await.unwrap();
    assert_eq!(keys(&left.rows), ["bob"]);
}
