//! Governance tables: tool policies (create, list in evaluation order, update, delete,
//! validation) and intent verdicts (record once, filter, decisions, kept after their
//! workstream).

use turnstone_store::{
    NewIntentVerdict, NewOutputAssessment, NewToolPolicy, NewWorkstream, StoreError,
    ToolPolicyUpdate, VerdictFilter,
};

use crate::support::TestDb;

both_backends!(
    policy_lifecycle,
    policies_list_in_evaluation_order,
    policy_validation,
    verdict_lifecycle,
    verdict_filters,
    verdicts_outlive_their_workstream,
    output_assessments_are_recorded_once_and_listed_newest_first,
);

fn policy(name: &str, pattern: &str, action: &str, priority: i64) -> NewToolPolicy {
    NewToolPolicy {
        policy_id: None,
        name: name.into(),
        tool_pattern: pattern.into(),
        action: action.into(),
        priority,
        org_id: String::new(),
        enabled: true,
        created_by: "admin".into(),
    }
}

fn verdict(id: &str, ws_id: &str, call_id: &str, risk: &str, tier: &str) -> NewIntentVerdict {
    NewIntentVerdict {
        verdict_id: id.into(),
        ws_id: ws_id.into(),
        call_id: call_id.into(),
        func_name: "bash".into(),
        func_args: r#"{"command":"rm -rf /"}"#.into(),
        intent_summary: "Destructive removal: rm -rf /".into(),
        risk_level: risk.into(),
        confidence: 0.9,
        recommendation: "deny".into(),
        reasoning: "Removes the root.".into(),
        evidence: vec!["rm-system-path: /".into(), "second \"quoted\" line".into()],
        tier: tier.into(),
        judge_model: if tier == "llm" {
            "judge-small".into()
        } else {
            String::new()
        },
        latency_ms: 412,
    }
}

async fn policy_lifecycle(db: TestDb) {
    let store = db.open().await;
    let created = store
        .create_tool_policy(policy(" block mcp ", " mcp__* ", "deny", 10))
        .await
        .unwrap();
    assert_eq!(created.policy_id.len(), 32);
    assert_eq!(
        (created.name.as_str(), created.tool_pattern.as_str()),
        ("block mcp", "mcp__*")
    );
    assert_eq!(
        (created.action.as_str(), created.priority, created.enabled),
        ("deny", 10, true)
    );
    assert_eq!(created.created, created.updated);
    assert_eq!(
        store.get_tool_policy(&created.policy_id).await.unwrap(),
        Some(created.clone())
    );

    // A partial update changes only what it names.
    let updated = store
        .update_tool_policy(
            &created.policy_id,
            ToolPolicyUpdate {
                action: Some("ask".into()),
                enabled: Some(false),
                ..ToolPolicyUpdate::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((updated.action.as_str(), updated.enabled), ("ask", false));
    assert_eq!((updated.name.as_str(), updated.priority), ("block mcp", 10));
    assert!(updated.updated >= created.updated);
    assert_eq!(
        store
            .update_tool_policy("missing", ToolPolicyUpdate::default())
            .await
            .unwrap(),
        None
    );

    // The same id twice is refused; delete happens once.
    let mut fixed = policy("fixed", "bash", "allow", 0);
    fixed.policy_id = Some("p-fixed".into());
    store.create_tool_policy(fixed.clone()).await.unwrap();
    assert!(matches!(
        store.create_tool_policy(fixed).await,
        Err(StoreError::InvalidInput(_))
    ));
    assert!(store.delete_tool_policy("p-fixed").await.unwrap());
    assert!(!store.delete_tool_policy("p-fixed").await.unwrap());
    assert_eq!(store.get_tool_policy("p-fixed").await.unwrap(), None);

    // Policies survive a restart.
    store.close().await;
    let reopened = db.open().await;
    assert_eq!(
        reopened.list_tool_policies(None).await.unwrap(),
        vec![updated]
    );
    reopened.close().await;
}

async fn policies_list_in_evaluation_order(db: TestDb) {
    let store = db.open().await;
    let low = store
        .create_tool_policy(policy("low", "*", "allow", 0))
        .await
        .unwrap();
    let high = store
        .create_tool_policy(policy("high", "bash", "deny", 100))
        .await
        .unwrap();
    let mid_first = store
        .create_tool_policy(policy("mid-1", "write_*", "ask", 50))
        .await
        .unwrap();
    let mid_second = store
        .create_tool_policy(policy("mid-2", "edit_*", "ask", 50))
        .await
        .unwrap();
    let mut other_org = policy("org", "web_*", "deny", 75);
    other_org.org_id = "acme".into();
    let org = store.create_tool_policy(other_org).await.unwrap();

    let names = |list: Vec<turnstone_store::ToolPolicyRecord>| {
        list.into_iter().map(|p| p.name).collect::<Vec<_>>()
    };
    assert_eq!(
        names(store.list_tool_policies(None).await.unwrap()),
        [
            high.name.clone(),
            org.name.clone(),
            mid_first.name.clone(),
            mid_second.name.clone(),
            low.name.clone()
        ]
    );
    assert_eq!(
        names(store.list_tool_policies(Some("")).await.unwrap()),
        [high.name, mid_first.name, mid_second.name, low.name]
    );
    assert_eq!(
        names(store.list_tool_policies(Some("acme")).await.unwrap()),
        [org.name]
    );
    store.close().await;
}

async fn policy_validation(db: TestDb) {
    let store = db.open().await;
    for bad in [
        policy("", "bash", "deny", 0),
        policy("n", " ", "deny", 0),
        policy("n", "bash", "block", 0),
    ] {
        assert!(
            matches!(
                store.create_tool_policy(bad.clone()).await,
                Err(StoreError::InvalidInput(_))
            ),
            "{bad:?}"
        );
    }
    let p = store
        .create_tool_policy(policy("n", "bash", "deny", 0))
        .await
        .unwrap();
    let bad_update = ToolPolicyUpdate {
        action: Some("never".into()),
        ..ToolPolicyUpdate::default()
    };
    assert!(matches!(
        store.update_tool_policy(&p.policy_id, bad_update).await,
        Err(StoreError::InvalidInput(_))
    ));
    assert_eq!(
        store
            .get_tool_policy(&p.policy_id)
            .await
            .unwrap()
            .unwrap()
            .action,
        "deny"
    );
    store.close().await;
}

async fn verdict_lifecycle(db: TestDb) {
    let store = db.open().await;
    let id = "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5";
    assert!(
        store
            .record_intent_verdict(verdict(id, "ws1", "call_1", "critical", "heuristic"))
            .await
            .unwrap()
    );
    // A re-injected approval records nothing new.
    assert!(
        !store
            .record_intent_verdict(verdict(id, "ws1", "call_1", "low", "heuristic"))
            .await
            .unwrap()
    );
    let row = store.get_intent_verdict(id).await.unwrap().unwrap();
    assert_eq!(row.risk_level, "critical");
    assert_eq!(row.confidence, 0.9);
    assert_eq!(
        row.evidence,
        vec![
            "rm-system-path: /".to_owned(),
            "second \"quoted\" line".to_owned()
        ]
    );
    assert_eq!(
        (row.tier.as_str(), row.judge_model.as_str(), row.latency_ms),
        ("heuristic", "", 412)
    );
    assert_eq!(row.user_decision, "");
    assert_eq!(row.func_args, r#"{"command":"rm -rf /"}"#);

    // The LLM verdict of the same call arrives later; the human decides the call.
    store
        .record_intent_verdict(verdict("llm-1", "ws1", "call_1", "high", "llm"))
        .await
        .unwrap();
    store
        .record_intent_verdict(verdict("other", "ws1", "call_2", "low", "heuristic"))
        .await
        .unwrap();
    assert_eq!(
        store
            .decide_call_verdicts("ws1", "call_1", "denied")
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store
            .decide_call_verdicts("ws1", "call_1", "approved")
            .await
            .unwrap(),
        0,
        "decided once"
    );
    assert_eq!(
        store
            .get_intent_verdict("llm-1")
            .await
            .unwrap()
            .unwrap()
            .user_decision,
        "denied"
    );
    assert_eq!(
        store
            .get_intent_verdict("other")
            .await
            .unwrap()
            .unwrap()
            .user_decision,
        ""
    );
    // A late verdict is stamped one by one.
    assert!(
        store
            .set_verdict_decision("other", "approved")
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_verdict_decision("missing", "approved")
            .await
            .unwrap()
    );
    assert!(matches!(
        store.set_verdict_decision("other", "maybe").await,
        Err(StoreError::InvalidInput(_))
    ));
    assert!(matches!(
        store
            .record_intent_verdict(verdict("", "ws1", "c", "low", "llm"))
            .await,
        Err(StoreError::InvalidInput(_))
    ));
    store.close().await;
}

async fn verdict_filters(db: TestDb) {
    let store = db.open().await;
    for (i, (ws, risk)) in [
        ("ws1", "low"),
        ("ws1", "high"),
        ("ws2", "high"),
        ("ws1", "critical"),
    ]
    .iter()
    .enumerate()
    {
        store
            .record_intent_verdict(verdict(
                &format!("v{i}"),
                ws,
                &format!("call_{i}"),
                risk,
                "heuristic",
            ))
            .await
            .unwrap();
        // Distinct `created` stamps (microsecond resolution).
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let ids = |rows: Vec<turnstone_store::IntentVerdictRecord>| {
        rows.into_iter().map(|r| r.verdict_id).collect::<Vec<_>>()
    };
    assert_eq!(
        ids(store
            .list_intent_verdicts(&VerdictFilter::default())
            .await
            .unwrap()),
        ["v3", "v2", "v1", "v0"]
    );
    let ws1 = VerdictFilter {
        ws_id: Some("ws1".into()),
        ..VerdictFilter::default()
    };
    assert_eq!(
        ids(store.list_intent_verdicts(&ws1).await.unwrap()),
        ["v3", "v1", "v0"]
    );
    let high = VerdictFilter {
        risk_level: Some("high".into()),
        ..VerdictFilter::default()
    };
    assert_eq!(
        ids(store.list_intent_verdicts(&high).await.unwrap()),
        ["v2", "v1"]
    );
    let page = VerdictFilter {
        limit: 2,
        offset: 1,
        ..VerdictFilter::default()
    };
    assert_eq!(
        ids(store.list_intent_verdicts(&page).await.unwrap()),
        ["v2", "v1"]
    );
    let v1 = store.get_intent_verdict("v1").await.unwrap().unwrap();
    let since = VerdictFilter {
        since: Some(v1.created.clone()),
        ..VerdictFilter::default()
    };
    assert_eq!(
        ids(store.list_intent_verdicts(&since).await.unwrap()),
        ["v3", "v2", "v1"]
    );
    let until = VerdictFilter {
        until: Some(v1.created),
        ..VerdictFilter::default()
    };
    assert_eq!(
        ids(store.list_intent_verdicts(&until).await.unwrap()),
        ["v1", "v0"]
    );
    store.close().await;
}

async fn verdicts_outlive_their_workstream(db: TestDb) {
    let store = db.open().await;
    let ws = store
        .create_workstream(NewWorkstream::default())
        .await
        .unwrap();
    store
        .record_intent_verdict(verdict("v-audit", &ws.ws_id, "call_1", "high", "heuristic"))
        .await
        .unwrap();
    assert!(store.delete_workstream(&ws.ws_id).await.unwrap());
    assert!(store.get_intent_verdict("v-audit").await.unwrap().is_some());
    store.close().await;
}

fn assessment(id: &str, ws_id: &str, call_id: &str) -> NewOutputAssessment {
    NewOutputAssessment {
        assessment_id: id.into(),
        ws_id: ws_id.into(),
        call_id: call_id.into(),
        func_name: "bash".into(),
        flags: vec!["credential_leak".into()],
        risk_level: "high".into(),
        annotations: vec!["Detected: github_token.".into(), "a \"quoted\" note".into()],
        output_length: 1234,
        redacted: true,
    }
}

async fn output_assessments_are_recorded_once_and_listed_newest_first(db: TestDb) {
    let store = db.open().await;
    let ws = store
        .create_workstream(NewWorkstream::default())
        .await
        .unwrap();
    assert!(
        store
            .record_output_assessment(assessment("a1", &ws.ws_id, "call_1"))
            .await
            .unwrap()
    );
    assert!(
        !store
            .record_output_assessment(assessment("a1", &ws.ws_id, "call_1"))
            .await
            .unwrap(),
        "recorded once"
    );
    let mut other = assessment("a2", "ws-other", "call_2");
    other.redacted = false;
    other.flags = Vec::new();
    store.record_output_assessment(other).await.unwrap();

    let mine = store
        .list_output_assessments(Some(&ws.ws_id), 10)
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    let row = &mine[0];
    assert_eq!(row.assessment_id, "a1");
    assert_eq!(row.flags, vec!["credential_leak".to_string()]);
    assert_eq!(row.annotations[1], "a \"quoted\" note");
    assert_eq!((row.output_length, row.redacted), (1234, true));
    assert_eq!(row.risk_level, "high");
    let all = store.list_output_assessments(None, 10).await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(all[0].created >= all[1].created, "newest first");
    assert_eq!(
        store.list_output_assessments(None, 1).await.unwrap().len(),
        1
    );
    let err = store
        .record_output_assessment(assessment("", &ws.ws_id, "c"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
    // An audit log: kept when the workstream goes.
    assert!(store.delete_workstream(&ws.ws_id).await.unwrap());
    assert_eq!(
        store
            .list_output_assessments(Some(&ws.ws_id), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    store.close().await;
}
