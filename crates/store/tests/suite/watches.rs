//! Watches: create, list, due, record polls, deactivate; unique active names; deletion with
//! the workstream; defaults of the columns the store does not write.

use std::time::{Duration, SystemTime};

use turnstone_store::{NewWatch, NewWorkstream, StoreError, WatchPoll};

use crate::support::TestDb;

both_backends!(
    watch_lifecycle,
    due_watches_by_node_and_time,
    names_are_unique_among_active_watches,
    watches_go_with_their_workstream,
);

fn new_watch(ws_id: &str, node_id: &str, name: &str, first_poll: SystemTime) -> NewWatch {
    NewWatch {
        watch_id: None,
        ws_id: ws_id.into(),
        node_id: node_id.into(),
        name: name.into(),
        command: "cat status.txt".into(),
        interval_secs: 30.0,
        stop_on: Some("\"done\" in output".into()),
        max_polls: 100,
        created_by: "model".into(),
        first_poll,
    }
}

async fn watch_lifecycle(db: TestDb) {
    let store = db.open().await;
    let now = SystemTime::now();
    let w = store
        .create_watch(new_watch("ws1", "node-a", " ci ", now))
        .await
        .unwrap();
    assert_eq!(w.watch_id.len(), 32);
    assert_eq!(w.name, "ci");
    assert!(w.active);
    assert_eq!((w.poll_count, w.max_polls), (0, 100));
    assert_eq!(w.interval_secs, 30.0);
    assert_eq!(
        (w.last_output.clone(), w.last_exit_code, w.last_poll.clone()),
        (None, None, None)
    );
    assert!(w.next_poll.is_some());
    assert_eq!(w.created, w.updated);
    assert_eq!(store.get_watch(&w.watch_id).await.unwrap(), Some(w.clone()));
    assert_eq!(store.count_active_watches("ws1").await.unwrap(), 1);

    // A poll is recorded with its output, count and next poll.
    let later = now + Duration::from_secs(30);
    let poll = WatchPoll {
        output: "pending\n".into(),
        exit_code: 0,
        poll_count: 1,
        next_poll: Some(later),
    };
    assert!(store.record_watch_poll(&w.watch_id, &poll).await.unwrap());
    let polled = store.get_watch(&w.watch_id).await.unwrap().unwrap();
    assert_eq!(polled.last_output.as_deref(), Some("pending\n"));
    assert_eq!(polled.last_exit_code, Some(0));
    assert_eq!(polled.poll_count, 1);
    assert!(polled.last_poll.is_some());
    assert!(
        polled.next_poll > w.next_poll,
        "{:?} !> {:?}",
        polled.next_poll,
        w.next_poll
    );

    // Deactivation happens once; afterwards polls are not recorded and it is not listed.
    assert!(store.deactivate_watch(&w.watch_id).await.unwrap());
    assert!(!store.deactivate_watch(&w.watch_id).await.unwrap());
    assert!(!store.record_watch_poll(&w.watch_id, &poll).await.unwrap());
    let ended = store.get_watch(&w.watch_id).await.unwrap().unwrap();
    assert!(!ended.active);
    assert_eq!(ended.next_poll, None);
    assert_eq!(ended.poll_count, 1);
    assert_eq!(store.count_active_watches("ws1").await.unwrap(), 0);
    assert!(
        store
            .list_active_watches(Some("ws1"), None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.get_watch("nope").await.unwrap(), None);

    // Bad input is an error, not a row.
    let mut bad = new_watch("ws1", "", "x", now);
    bad.interval_secs = 0.0;
    assert!(matches!(
        store.create_watch(bad).await,
        Err(StoreError::InvalidInput(_))
    ));
    assert!(matches!(
        store.create_watch(new_watch("", "", "x", now)).await,
        Err(StoreError::InvalidInput(_))
    ));
    store.close().await;
}

async fn due_watches_by_node_and_time(db: TestDb) {
    let store = db.open().await;
    let now = SystemTime::now();
    let past = now - Duration::from_secs(3600);
    let future = now + Duration::from_secs(3600);
    let overdue = store
        .create_watch(new_watch("ws1", "node-a", "overdue", past))
        .await
        .unwrap();
    let due = store
        .create_watch(new_watch("ws1", "node-a", "due", now))
        .await
        .unwrap();
    let _later = store
        .create_watch(new_watch("ws1", "node-a", "later", future))
        .await
        .unwrap();
    let _other_node = store
        .create_watch(new_watch("ws2", "node-b", "elsewhere", past))
        .await
        .unwrap();
    let any_node = store
        .create_watch(new_watch(
            "ws3",
            "",
            "anywhere",
            past - Duration::from_secs(1),
        ))
        .await
        .unwrap();

    let ids =
        |v: Vec<turnstone_store::Watch>| v.into_iter().map(|w| w.watch_id).collect::<Vec<_>>();
    let at = now + Duration::from_millis(1);
    assert_eq!(
        ids(store.due_watches("node-a", at, 10).await.unwrap()),
        [
            any_node.watch_id.clone(),
            overdue.watch_id.clone(),
            due.watch_id.clone()
        ],
        "most overdue first; this node's and unassigned ones only"
    );
    assert_eq!(store.due_watches("node-a", at, 1).await.unwrap().len(), 1);
    assert_eq!(
        store
            .due_watches("node-a", future + Duration::from_secs(1), 10)
            .await
            .unwrap()
            .len(),
        4
    );

    // A poll with a next time in the future takes it off the due list; a final poll (no
    // next time) too.
    let poll = WatchPoll {
        output: String::new(),
        exit_code: 0,
        poll_count: 1,
        next_poll: Some(future),
    };
    store
        .record_watch_poll(&overdue.watch_id, &poll)
        .await
        .unwrap();
    let last = WatchPoll {
        next_poll: None,
        ..poll
    };
    store.record_watch_poll(&due.watch_id, &last).await.unwrap();
    assert_eq!(
        ids(store.due_watches("node-a", at, 10).await.unwrap()),
        std::slice::from_ref(&any_node.watch_id)
    );

    // Listing: by workstream, by node, or all.
    assert_eq!(
        store
            .list_active_watches(Some("ws1"), None)
            .await
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        store
            .list_active_watches(None, Some("node-b"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store.list_active_watches(None, None).await.unwrap().len(),
        5
    );
    let names: Vec<String> = store
        .list_active_watches(Some("ws1"), Some("node-a"))
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.name)
        .collect();
    assert_eq!(names.len(), 3);
    store.close().await;
}

async fn names_are_unique_among_active_watches(db: TestDb) {
    let store = db.open().await;
    let now = SystemTime::now();
    let first = store
        .create_watch(new_watch("ws1", "n", "ci", now))
        .await
        .unwrap();
    match store.create_watch(new_watch("ws1", "n", "ci", now)).await {
        Err(StoreError::InvalidInput(m)) => assert!(m.contains("'ci' is already active"), "{m}"),
        other => panic!("duplicate active name accepted: {other:?}"),
    }
    // Another workstream may use the name; after a cancel the name is free again.
    store
        .create_watch(new_watch("ws2", "n", "ci", now))
        .await
        .unwrap();
    store.deactivate_watch(&first.watch_id).await.unwrap();
    let again = store
        .create_watch(new_watch("ws1", "n", "ci", now))
        .await
        .unwrap();
    assert_ne!(again.watch_id, first.watch_id);
    assert_eq!(store.count_active_watches("ws1").await.unwrap(), 1);
    store.close().await;
}

async fn watches_go_with_their_workstream(db: TestDb) {
    let store = db.open().await;
    let ws = store
        .create_workstream(NewWorkstream::default())
        .await
        .unwrap();
    let w = store
        .create_watch(new_watch(&ws.ws_id, "n", "ci", SystemTime::now()))
        .await
        .unwrap();
    let kept = store
        .create_watch(new_watch("other", "n", "ci", SystemTime::now()))
        .await
        .unwrap();
    assert!(store.delete_workstream(&ws.ws_id).await.unwrap());
    assert_eq!(store.get_watch(&w.watch_id).await.unwrap(), None);
    assert!(store.get_watch(&kept.watch_id).await.unwrap().is_some());
    store.close().await;
}
