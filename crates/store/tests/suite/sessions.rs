//! Round-trip, resume, resolution, listing and pruning.

use turnstone_llm::{ChatMessage, ToolCall};
use turnstone_proto::receipt;
use turnstone_store::{NewMessage, NewWorkstream, SessionConfig, StoreError, WriteOp};

use crate::support::TestDb;

both_backends!(
    messages_round_trip_across_restart,
    resume_closes_an_interrupted_batch_with_receipts_and_restores_config,
    resolve_alias_id_and_prefix,
    list_sessions_newest_first_without_empty,
    prune_rules,
    delete_workstream_removes_everything,
    open_workstreams_lists_one_nodes_rows,
    images_round_trip_inline_and_stay_out_of_search,
);

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

/// A conversation as the provider saw it: parallel calls answered out of order, a call-only
/// assistant message, and a final answer.
fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::user("list the files and read the readme"),
        ChatMessage::assistant(
            Some("Let me look.".into()),
            vec![
                call("call_1", "bash", r#"{"command":"ls"}"#),
                call("call_2", "read_file", r#"{"path":"README.md"}"#),
            ],
        ),
        ChatMessage::tool("call_2", "# Readme"),
        ChatMessage::tool("call_1", "README.md\nsrc"),
        ChatMessage::assistant(
            None,
            vec![call("call_3", "bash", r#"{"command":"wc -l README.md"}"#)],
        ),
        ChatMessage::tool("call_3", "1 README.md"),
        ChatMessage::assistant(Some("Two files; the readme has one line.".into()), vec![]),
    ]
}

fn rows(ws: &str, msgs: &[ChatMessage]) -> Vec<WriteOp> {
    msgs.iter()
        .flat_map(|m| NewMessage::from_chat(ws, m))
        .map(WriteOp::Message)
        .collect()
}

async fn messages_round_trip_across_restart(db: TestDb) {
    let store = db.open().await;
    let ws = store
        .create_workstream(NewWorkstream {
            node_id: Some("node-a".into()),
            name: "main".into(),
            ..NewWorkstream::default()
        })
        .await
        .unwrap();
    let mut ops = rows(&ws.ws_id, &conversation());
    // Provider data survives untouched.
    if let Some(WriteOp::Message(m)) = ops.first_mut() {
        m.provider_data = Some(r#"{"blocks":[1,2]}"#.into());
    }
    store.write_batch(&ops).await.unwrap();
    store.close().await;
    drop(store);

    let store = db.open().await;
    let stored = store.load_messages(&ws.ws_id).await.unwrap();
    let roles: Vec<_> = stored.iter().map(|r| r.role.as_str()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool_call",
            "tool_call",
            "tool_result",
            "tool_result",
            "tool_call",
            "tool_result",
            "assistant"
        ]
    );
    assert_eq!(
        stored[0].provider_data.as_deref(),
        Some(r#"{"blocks":[1,2]}"#)
    );
    assert_eq!(stored[2].tool_args.as_deref(), Some(r#"{"command":"ls"}"#));
    assert!(stored.windows(2).all(|w| w[0].id < w[1].id));

    let resumed = store.resume_session(&ws.ws_id).await.unwrap();
    assert_eq!(resumed.messages, conversation());
    assert_eq!(resumed.workstream.node_id.as_deref(), Some("node-a"));
    assert_eq!(resumed.config, SessionConfig::default());
    store.close().await;
}

/// An image as `read_file` attaches it: 1 MiB of bytes, base64 inline in the row.
fn big_image() -> turnstone_llm::ImagePart {
    turnstone_llm::ImagePart {
        media_type: "image/png".into(),
        data: "iVBORw0K".repeat(1024 * 1024 / 6),
    }
}

async fn images_round_trip_inline_and_stay_out_of_search(db: TestDb) {
    let store = db.open().await;
    let ws = store
        .create_workstream(NewWorkstream::default())
        .await
        .unwrap();
    let image = big_image();
    let conversation = vec![
        ChatMessage::user("what does the diagram show").with_images(vec![image.clone()]),
        ChatMessage::assistant(
            None,
            vec![call("call_1", "read_file", r#"{"path":"diagram.png"}"#)],
        ),
        ChatMessage::tool(
            "call_1",
            "[image: diagram.png, PNG, 800x600 pixels, 786432 bytes]",
        )
        .with_images(vec![image.clone()]),
        ChatMessage::assistant(Some("A pipeline of three stages.".into()), vec![]),
    ];
    store
        .write_batch(&rows(&ws.ws_id, &conversation))
        .await
        .unwrap();
    store.close().await;
    drop(store);

    let store = db.open().await;
    let resumed = store.resume_session(&ws.ws_id).await.unwrap();
    assert_eq!(
        resumed.messages, conversation,
        "images come back byte for byte"
    );
    let stored = store.load_messages(&ws.ws_id).await.unwrap();
    // One copy per image: in the row's `provider_data`, never in its searchable text.
    let result = stored.iter().find(|r| r.role == "tool_result").unwrap();
    assert!(
        !result
            .content
            .as_deref()
            .unwrap()
            .contains(&image.data[..64])
    );
    assert!(result.provider_data.as_deref().unwrap().len() < image.data.len() + 128);
    let hits = store.search("diagram", 10).await.unwrap();
    assert!(!hits.is_empty());
    for hit in hits {
        let text = format!("{}{}", hit.snippet, hit.content.unwrap_or_default());
        assert!(!text.contains("iVBORw0K"), "search returned image bytes");
    }
    store.close().await;
}

async fn resume_closes_an_interrupted_batch_with_receipts_and_restores_config(db: TestDb) {
    let store = db.open().await;
    let ws = store
        .create_workstream(NewWorkstream {
            alias: Some("project-x".into()),
            ..NewWorkstream::default()
        })
        .await
        .unwrap();
    let complete = conversation();
    let config = SessionConfig {
        temperature: Some(0.25),
        reasoning_effort: Some("high".into()),
        max_tokens: Some(2048),
        instructions: Some("Answer in French.".into()),
    };
    let mut ops = rows(&ws.ws_id, &complete);
    // A first config, later changed: the last write wins.
    ops.extend(SessionConfig::default().to_ops(&ws.ws_id));
    ops.extend(config.to_ops(&ws.ws_id));
    ops.push(WriteOp::Config {
        ws_id: ws.ws_id.clone(),
        key: "model".into(),
        value: Some("qwen".into()),
    });
    // The interrupted turn: two parallel calls, only one answered.
    ops.extend(rows(
        &ws.ws_id,
        &[
            ChatMessage::user("now delete the build dir"),
            ChatMessage::assistant(
                None,
                vec![
                    call("call_9", "bash", r#"{"command":"rm -rf build"}"#),
                    call("call_10", "bash", r#"{"command":"ls"}"#),
                ],
            ),
            ChatMessage::tool("call_10", "src"),
        ],
    ));
    // The batch's durable marker: both calls had started when the node stopped.
    ops.push(WriteOp::Config {
        ws_id: ws.ws_id.clone(),
        key: receipt::started_config_key("call_9"),
        value: Some(r#"["call_10","call_9"]"#.into()),
    });
    store.write_batch(&ops).await.unwrap();
    store.close().await;
    drop(store);

    let store = db.open().await;
    let resumed = store.resume_session("project-x").await.unwrap();
    let mut expected = complete.clone();
    // Closed, not dropped: the answered call keeps its result, the other says that it
    // started and its effect is unknown (`rm -rf` may have run).
    expected.extend([
        ChatMessage::user("now delete the build dir"),
        ChatMessage::assistant(
            None,
            vec![
                call("call_9", "bash", r#"{"command":"rm -rf build"}"#),
                call("call_10", "bash", r#"{"command":"ls"}"#),
            ],
        ),
        ChatMessage::tool("call_10", "src"),
        ChatMessage::tool(
            "call_9",
            receipt::receipt_text(
                receipt::NODE_STOPPED,
                receipt::EffectStatus::Unknown,
                receipt::Interruption::NodeStopped,
            ),
        ),
    ]);
    assert_eq!(resumed.messages, expected);
    assert_eq!(resumed.config, config);
    assert_eq!(
        resumed.raw_config.get("model").map(String::as_str),
        Some("qwen")
    );

    // Clearing a key removes it.
    store
        .set_config(&ws.ws_id, SessionConfig::INSTRUCTIONS, None)
        .await
        .unwrap();
    let resumed = store.resume_session(&ws.ws_id).await.unwrap();
    assert_eq!(resumed.config.instructions, None);
    assert_eq!(resumed.config.max_tokens, Some(2048));

    // The turn after the closed batch resumes as a normal conversation.
    store
        .write_batch(&rows(
            &ws.ws_id,
            &[ChatMessage::assistant(Some("Done.".into()), vec![])],
        ))
        .await
        .unwrap();
    let resumed = store.resume_session("project-x").await.unwrap();
    expected.push(ChatMessage::assistant(Some("Done.".into()), vec![]));
    assert_eq!(resumed.messages, expected);
    store.close().await;
}

async fn resolve_alias_id_and_prefix(db: TestDb) {
    let store = db.open().await;
    let ids = [
        "abc11111111111111111111111111111",
        "abc22222222222222222222222222222",
        "def33333333333333333333333333333",
    ];
    for id in ids {
        store
            .create_workstream(NewWorkstream {
                ws_id: Some(id.into()),
                ..NewWorkstream::default()
            })
            .await
            .unwrap();
    }
    store.set_alias(ids[2], Some("named")).await.unwrap();

    assert_eq!(store.resolve_session("abc1").await.unwrap(), ids[0]);
    assert_eq!(store.resolve_session(ids[1]).await.unwrap(), ids[1]);
    assert_eq!(store.resolve_session("named").await.unwrap(), ids[2]);
    assert_eq!(store.resolve_session("d").await.unwrap(), ids[2]);
    match store.resolve_session("abc").await {
        Err(StoreError::Ambiguous { prefix, matches }) => {
            assert_eq!(prefix, "abc");
            assert_eq!(matches, 2);
        }
        other => panic!("expected ambiguous, got {other:?}"),
    }
    assert!(matches!(
        store.resolve_session("zzz").await,
        Err(StoreError::NotFound(_))
    ));
    // LIKE wildcards are escaped, not interpreted.
    assert!(matches!(
        store.resolve_session("%").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.resolve_session("_bc").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.resolve_session("  ").await,
        Err(StoreError::InvalidInput(_))
    ));
    assert!(matches!(
        store.resume_session("abc").await,
        Err(StoreError::Ambiguous { .. })
    ));

    // Aliases are unique.
    assert!(matches!(
        store.set_alias(ids[0], Some("named")).await,
        Err(StoreError::AliasTaken(a)) if a == "named"
    ));
    assert!(matches!(
        store
            .create_workstream(NewWorkstream {
                alias: Some("named".into()),
                ..NewWorkstream::default()
            })
            .await,
        Err(StoreError::AliasTaken(_))
    ));
    assert!(matches!(
        store.set_alias("nope", Some("other")).await,
        Err(StoreError::NotFound(_))
    ));
    // Clearing frees the alias.
    store.set_alias(ids[2], None).await.unwrap();
    store.set_alias(ids[0], Some("named")).await.unwrap();
    assert_eq!(store.resolve_session("named").await.unwrap(), ids[0]);
    store.close().await;
}

async fn list_sessions_newest_first_without_empty(db: TestDb) {
    let store = db.open().await;
    let mut ids = Vec::new();
    for name in ["a", "b", "empty"] {
        let ws = store
            .create_workstream(NewWorkstream {
                name: name.into(),
                ..NewWorkstream::default()
            })
            .await
            .unwrap();
        ids.push(ws.ws_id);
    }
    let (a, b) = (&ids[0], &ids[1]);
    store
        .append_message(NewMessage::user(a, "first"))
        .await
        .unwrap();
    store
        .append_message(NewMessage::user(a, "second"))
        .await
        .unwrap();
    store
        .append_message(NewMessage::user(b, "third"))
        .await
        .unwrap();

    let listed = store.list_sessions(10).await.unwrap();
    let order: Vec<_> = listed.iter().map(|s| s.workstream.ws_id.as_str()).collect();
    assert_eq!(order, [b.as_str(), a.as_str()]);
    assert_eq!(listed[0].message_count, 1);
    assert_eq!(listed[1].message_count, 2);

    store
        .append_message(NewMessage::user(a, "fourth"))
        .await
        .unwrap();
    let listed = store.list_sessions(10).await.unwrap();
    assert_eq!(listed[0].workstream.ws_id, *a);
    assert_eq!(listed[0].message_count, 3);
    assert!(listed[0].workstream.updated >= listed[0].workstream.created);
    assert_eq!(store.list_sessions(1).await.unwrap().len(), 1);
    store.close().await;
}

fn old_message(ws: &str, text: &str) -> NewMessage {
    NewMessage {
        timestamp: "2020-01-01T00:00:00.000000+00:00".into(),
        ..NewMessage::user(ws, text)
    }
}

async fn prune_rules(db: TestDb) {
    let store = db.open().await;
    let empty_unnamed = store
        .create_workstream(NewWorkstream::default())
        .await
        .unwrap()
        .ws_id;
    // Old sessions are created by their (backdated) first message.
    store
        .write_batch(&[
            WriteOp::Message(old_message("old_unnamed", "ancient aardvark")),
            WriteOp::Message(old_message("old_named", "ancient named")),
        ])
        .await
        .unwrap();
    store.set_alias("old_named", Some("keep-me")).await.unwrap();
    store
        .append_message(NewMessage::user("recent_unnamed", "fresh"))
        .await
        .unwrap();

    // Another node's empty session may be live there (created, nothing sent yet): kept.
    let elsewhere = store
        .create_workstream(NewWorkstream {
            node_id: Some("node-b".into()),
            ..NewWorkstream::default()
        })
        .await
        .unwrap()
        .ws_id;

    // Age 0 = no age limit: only the empty session goes.
    assert_eq!(store.prune_sessions("node-a", 0).await.unwrap(), 1);
    assert!(store.get_workstream(&elsewhere).await.unwrap().is_some());
    assert!(
        store
            .get_workstream(&empty_unnamed)
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.get_workstream("old_unnamed").await.unwrap().is_some());

    assert_eq!(store.prune_sessions("node-a", 30).await.unwrap(), 1);
    assert!(store.get_workstream("old_unnamed").await.unwrap().is_none());
    assert!(store.load_messages("old_unnamed").await.unwrap().is_empty());
    assert!(store.search("aardvark", 10).await.unwrap().is_empty());
    let kept: Vec<_> = store
        .list_sessions(10)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.workstream.ws_id)
        .filter(|id| *id != elsewhere)
        .collect();
    assert_eq!(kept, ["recent_unnamed", "old_named"]);
    assert_eq!(store.prune_sessions("node-a", 30).await.unwrap(), 0);
    store.close().await;
}

async fn delete_workstream_removes_everything(db: TestDb) {
    let store = db.open().await;
    store
        .append_message(NewMessage::user("gone", "platypus"))
        .await
        .unwrap();
    store.set_config("gone", "model", Some("m")).await.unwrap();
    store
        .append_event("gone", "info", &serde_json::json!({"x": 1}))
        .await
        .unwrap();
    store
        .append_message(NewMessage::user("stays", "platypus too"))
        .await
        .unwrap();
    assert!(store.delete_workstream("gone").await.unwrap());
    assert!(!store.delete_workstream("gone").await.unwrap());
    assert!(store.load_config("gone").await.unwrap().is_empty());
    assert!(store.events_after("gone", 0, 10).await.unwrap().is_empty());
    let hits = store.search("platypus", 10).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].ws_id, "stays");
    store.close().await;
}

async fn open_workstreams_lists_one_nodes_rows(db: TestDb) {
    let store = db.open().await;
    for (ws_id, node_id, state) in [
        ("a1", "node-a", "hibernated"),
        ("a2", "node-a", "closed"),
        ("a3", "node-a", "running"),
        ("b1", "node-b", "idle"),
    ] {
        store
            .create_workstream(NewWorkstream {
                ws_id: Some(ws_id.into()),
                node_id: Some(node_id.into()),
                name: format!("name-{ws_id}"),
                ..NewWorkstream::default()
            })
            .await
            .unwrap();
        store.set_state(ws_id, state).await.unwrap();
    }
    let rows = store.open_workstreams("node-a").await.unwrap();
    let ids: Vec<&str> = rows.iter().map(|w| w.ws_id.as_str()).collect();
    assert_eq!(ids, ["a1", "a3"]);
    assert_eq!(rows[0].name, "name-a1");
    assert!(store.open_workstreams("node-c").await.unwrap().is_empty());
    // Resumed on node-b after node-a lost it: node-b's next start lists it, node-a's not.
    store.adopt_workstream("a1", "node-b").await.unwrap();
    let ids = |rows: Vec<turnstone_store::Workstream>| -> Vec<String> {
        rows.into_iter().map(|w| w.ws_id).collect()
    };
    assert_eq!(ids(store.open_workstreams("node-a").await.unwrap()), ["a3"]);
    assert_eq!(
        ids(store.open_workstreams("node-b").await.unwrap()),
        ["a1", "b1"]
    );
    assert!(matches!(
        store.adopt_workstream("nope", "node-b").await,
        Err(StoreError::NotFound(_))
    ));
    store.close().await;
}
