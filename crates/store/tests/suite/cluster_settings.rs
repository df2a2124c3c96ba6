//! Cluster settings and model definitions ([`SettingsStore`]) and the audit log
//! ([`AuditStore`]).

use turnstone_store::{
    AuditQuery, ModelDefinitionUpdate, NewAuditEvent, NewModelDefinition, SettingRow, StoreError,
};

use crate::support::TestDb;

both_backends!(
    settings_rows_put_replace_delete,
    model_definitions_crud,
    audit_log
);

fn row(key: &str, value: &str, node_id: &str) -> SettingRow {
    SettingRow {
        key: key.into(),
        value: value.into(),
        node_id: node_id.into(),
        is_secret: false,
        changed_by: "u1".into(),
        created: String::new(),
        updated: String::new(),
    }
}

async fn settings_rows_put_replace_delete(db: TestDb) {
    let store = db.open().await;
    assert!(store.list_settings().await.unwrap().is_empty());
    let first = store
        .put_setting(row("tools.search", "\"on\"", ""))
        .await
        .unwrap();
    store
        .put_setting(row("tools.search", "\"off\"", "node-b"))
        .await
        .unwrap();
    let again = store
        .put_setting(row("tools.search", "\"off\"", ""))
        .await
        .unwrap();
    assert_eq!(again.value, "\"off\"");
    assert_eq!(again.created, first.created, "a replace keeps created");
    let keys: Vec<(String, String)> = store
        .list_settings()
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.node_id, r.value))
        .collect();
    assert_eq!(
        keys,
        [
            ("".into(), "\"off\"".into()),
            ("node-b".into(), "\"off\"".into())
        ]
    );

    // A node given the console's rows: global and its own replaced, other nodes' kept.
    store
        .put_setting(row("tools.search", "\"on\"", "node-c"))
        .await
        .unwrap();
    store
        .replace_settings(
            "node-b",
            &[
                row("server.approval_timeout", "5", ""),
                row("tools.search", "\"auto\"", "node-c"),
            ],
        )
        .await
        .unwrap();
    let rows = store.list_settings().await.unwrap();
    let got: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r.key.as_str(), r.node_id.as_str(), r.value.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("server.approval_timeout", "", "5"),
            ("tools.search", "node-c", "\"on\"")
        ],
        "another node's row given to node-b is not stored"
    );
    assert!(
        store
            .delete_setting("server.approval_timeout", "")
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_setting("server.approval_timeout", "")
            .await
            .unwrap()
    );
}

fn model(alias: &str) -> NewModelDefinition {
    NewModelDefinition {
        alias: alias.into(),
        model: "m-1".into(),
        provider: "openai".into(),
        base_url: "http://127.0.0.1:1/v1".into(),
        api_key: "sk-secret".into(),
        context_window: 8192,
        capabilities: String::new(),
        enabled: true,
        created_by: "u1".into(),
        definition_id: None,
    }
}

async fn model_definitions_crud(db: TestDb) {
    let store = db.open().await;
    let fast = store.create_model_definition(model("fast")).await.unwrap();
    assert_eq!(fast.capabilities, "{}");
    assert!(
        !format!("{fast:?}").contains("sk-secret"),
        "Debug redacts the key"
    );
    let err = store
        .create_model_definition(model("fast"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidInput(m) if m.contains("taken")),
        "{err}"
    );
    let slow = store.create_model_definition(model("slow")).await.unwrap();
    let changed = store
        .update_model_definition(
            &fast.definition_id,
            ModelDefinitionUpdate {
                model: Some("m-2".into()),
                enabled: Some(false),
                ..ModelDefinitionUpdate::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((changed.model.as_str(), changed.enabled), ("m-2", false));
    assert_eq!(
        changed.api_key, "sk-secret",
        "an update without a key keeps it"
    );
    let taken = store
        .update_model_definition(
            &slow.definition_id,
            ModelDefinitionUpdate {
                alias: Some("fast".into()),
                ..ModelDefinitionUpdate::default()
            },
        )
        .await;
    assert!(matches!(taken, Err(StoreError::InvalidInput(_))));
    assert!(
        store
            .update_model_definition("nope", ModelDefinitionUpdate::default())
            .await
            .unwrap()
            .is_none()
    );
    let aliases: Vec<String> = store
        .list_model_definitions()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.alias)
        .collect();
    assert_eq!(aliases, ["fast", "slow"]);

    // Replaced whole (a node given the console's definitions).
    let mut pushed = store
        .get_model_definition(&slow.definition_id)
        .await
        .unwrap()
        .unwrap();
    pushed.model = "m-3".into();
    store
        .replace_model_definitions(&[pushed.clone()])
        .await
        .unwrap();
    assert_eq!(store.list_model_definitions().await.unwrap(), [pushed]);
    assert!(
        store
            .delete_model_definition(&slow.definition_id)
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_model_definition(&slow.definition_id)
            .await
            .unwrap()
    );
}

async fn audit_log(db: TestDb) {
    let store = db.open().await;
    for (user, action) in [
        ("u1", "setting.update"),
        ("u2", "model.create"),
        ("u1", "model.delete"),
    ] {
        store
            .record_audit(NewAuditEvent {
                user_id: user.into(),
                action: action.into(),
                resource_type: "x".into(),
                resource_id: "r".into(),
                detail: String::new(),
                ip_address: "127.0.0.1".into(),
            })
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let all = store
        .list_audit(AuditQuery {
            limit: 10,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    let actions: Vec<&str> = all.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["model.delete", "model.create", "setting.update"]);
    assert_eq!(all[0].detail, "{}");
    assert_eq!(all[0].ip_address, "127.0.0.1");
    let mine = store
        .list_audit(AuditQuery {
            user_id: Some("u1".into()),
            limit: 10,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(mine.len(), 2);
    assert_eq!(store.prune_audit(1).await.unwrap(), 2);
    let left = store
        .list_audit(AuditQuery {
            limit: 10,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(left[0].action, "model.delete");
}
