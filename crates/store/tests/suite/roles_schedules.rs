//! Roles and user changes ([`RoleStore`]) and the scheduler's tasks and runs
//! ([`ScheduleStore`]).

use turnstone_store::auth::{ROLE_ADMIN, ROLE_VIEWER};
use turnstone_store::{
    NewRole, NewTaskRun, NewUser, RoleUpdate, ScheduledTask, StoreError, UserUpdate,
};

use crate::support::TestDb;

both_backends!(custom_roles_and_user_changes, tasks_due_fired_and_pruned);

fn user(name: &str, roles: &[&str]) -> NewUser {
    NewUser {
        username: name.into(),
        display_name: name.into(),
        password_hash: "$2b$04$notarealhashbutnonempty".into(),
        roles: roles.iter().map(|r| r.to_string()).collect(),
    }
}

async fn custom_roles_and_user_changes(db: TestDb) {
    let store = db.open().await;
    let ada = store
        .create_user(user("ada", &[ROLE_VIEWER]))
        .await
        .unwrap();
    let gen0 = store.session_generation(&ada.user_id).await.unwrap();

    let role = store
        .create_role(NewRole {
            name: " auditors ".into(),
            display_name: "Auditors".into(),
            permissions: "read, admin.audit,read".into(),
        })
        .await
        .unwrap();
    assert_eq!(role.name, "auditors");
    assert_eq!(role.permissions, "admin.audit,read");
    assert!(!role.builtin);
    let dup = NewRole {
        name: "auditors".into(),
        display_name: "x".into(),
        permissions: "read".into(),
    };
    assert!(
        matches!(store.create_role(dup).await, Err(StoreError::InvalidInput(m)) if m.contains("taken"))
    );
    let names: Vec<String> = store
        .list_roles()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["admin", "operator", "viewer", "auditors"]);

    // Built-in roles are read-only; custom ones change.
    let err = store
        .update_role(
            ROLE_ADMIN,
            RoleUpdate {
                permissions: Some("read".into()),
                ..RoleUpdate::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
    assert!(matches!(
        store.delete_role(ROLE_VIEWER).await,
        Err(StoreError::InvalidInput(_))
    ));
    let changed = store
        .update_role(
            &role.role_id,
            RoleUpdate {
                permissions: Some("admin.users,read".into()),
                ..RoleUpdate::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(changed.permissions, "admin.users,read");
    assert_eq!(changed.display_name, "Auditors");
    assert!(
        store
            .update_role("nope", RoleUpdate::default())
            .await
            .unwrap()
            .is_none()
    );

    // Assigning replaces the set, ends sessions, and refuses unknown roles whole.
    assert!(
        store
            .set_user_roles(&ada.user_id, std::slice::from_ref(&role.role_id), "admin")
            .await
            .unwrap()
    );
    assert_eq!(
        store.user_role_ids(&ada.user_id).await.unwrap(),
        std::slice::from_ref(&role.role_id)
    );
    assert_eq!(
        store.user_permissions(&ada.user_id).await.unwrap(),
        ["admin.users", "read"]
    );
    let gen1 = store.session_generation(&ada.user_id).await.unwrap();
    assert!(gen1 > gen0, "{gen1:?} > {gen0:?}");
    let bad = store
        .set_user_roles(&ada.user_id, &["nope".to_string()], "admin")
        .await
        .unwrap_err();
    assert!(matches!(bad, StoreError::InvalidInput(_)), "{bad}");
    assert_eq!(
        store.user_role_ids(&ada.user_id).await.unwrap(),
        std::slice::from_ref(&role.role_id),
        "unchanged"
    );
    assert!(!store.set_user_roles("nobody", &[], "admin").await.unwrap());

    // User changes: a new password ends sessions, a name does not.
    let renamed = store
        .update_user(
            &ada.user_id,
            UserUpdate {
                display_name: Some(" Ada L. ".into()),
                ..UserUpdate::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renamed.display_name, "Ada L.");
    assert_eq!(store.session_generation(&ada.user_id).await.unwrap(), gen1);
    store
        .update_user(
            &ada.user_id,
            UserUpdate {
                password_hash: Some("$2b$04$another".into()),
                ..UserUpdate::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert!(store.session_generation(&ada.user_id).await.unwrap() > gen1);
    assert_eq!(
        store
            .user_credentials("ada")
            .await
            .unwrap()
            .unwrap()
            .password_hash,
        "$2b$04$another"
    );
    assert!(
        store
            .update_user("nobody", UserUpdate::default())
            .await
            .unwrap()
            .is_none()
    );

    // Deleting the role takes it from the user.
    assert!(store.delete_role(&role.role_id).await.unwrap());
    assert!(!store.delete_role(&role.role_id).await.unwrap());
    assert!(store.user_role_ids(&ada.user_id).await.unwrap().is_empty());
    store.close().await;
}

fn task(name: &str, next_run: Option<&str>) -> ScheduledTask {
    ScheduledTask {
        task_id: String::new(),
        name: name.into(),
        description: String::new(),
        schedule_type: "cron".into(),
        cron_expr: "* * * * *".into(),
        at_time: String::new(),
        target_mode: "pool".into(),
        model: String::new(),
        initial_message: "hi".into(),
        auto_approve: true,
        auto_approve_tools: "bash".into(),
        skill: String::new(),
        enabled: true,
        created_by: "ada".into(),
        last_run: None,
        next_run: next_run.map(str::to_string),
        created: String::new(),
        updated: String::new(),
    }
}

async fn tasks_due_fired_and_pruned(db: TestDb) {
    let store = db.open().await;
    let early = store
        .create_task(task("early", Some("2030-01-01T00:00:00.000000+00:00")))
        .await
        .unwrap();
    assert_eq!(early.task_id.len(), 32);
    assert!(early.auto_approve);
    let late = store
        .create_task(task("late", Some("2030-01-02T00:00:00.000000+00:00")))
        .await
        .unwrap();
    store.create_task(task("never", None)).await.unwrap();
    let mut off = task("off", Some("2029-01-01T00:00:00.000000+00:00"));
    off.enabled = false;
    store.create_task(off).await.unwrap();
    assert_eq!(store.list_tasks().await.unwrap().len(), 4);

    let due = |now: &'static str| {
        let store = store.clone();
        async move {
            store
                .due_tasks(now)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
        }
    };
    assert!(due("2029-12-31T00:00:00.000000+00:00").await.is_empty());
    assert_eq!(due("2030-01-01T00:00:00.000000+00:00").await, ["early"]);
    assert_eq!(
        due("2031-01-01T00:00:00.000000+00:00").await,
        ["early", "late"]
    );

    // Fired: last_run set, next_run moved, an at task disabled.
    store
        .task_fired(
            &early.task_id,
            "2030-01-01T00:00:01.000000+00:00",
            Some("2030-01-03T00:00:00.000000+00:00"),
            true,
        )
        .await
        .unwrap();
    store
        .task_fired(
            &late.task_id,
            "2030-01-02T00:00:01.000000+00:00",
            None,
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        due("2030-01-02T12:00:00.000000+00:00").await,
        Vec::<String>::new()
    );
    assert_eq!(due("2031-01-01T00:00:00.000000+00:00").await, ["early"]);
    let got = store.get_task(&late.task_id).await.unwrap().unwrap();
    assert!(!got.enabled);
    assert_eq!(got.next_run, None);
    assert_eq!(
        got.last_run.as_deref(),
        Some("2030-01-02T00:00:01.000000+00:00")
    );

    // Save: every changeable column.
    let mut changed = got.clone();
    changed.name = "later".into();
    changed.enabled = true;
    changed.next_run = Some("2030-02-01T00:00:00.000000+00:00".into());
    let saved = store.save_task(&changed).await.unwrap().unwrap();
    assert_eq!((saved.name.as_str(), saved.enabled), ("later", true));
    assert_eq!(saved.created, got.created);
    let mut ghost = changed.clone();
    ghost.task_id = "nope".into();
    assert!(store.save_task(&ghost).await.unwrap().is_none());

    // Runs: newest first, pruned per task, deleted with the task.
    for i in 0..5 {
        store
            .record_run(NewTaskRun {
                task_id: early.task_id.clone(),
                node_id: "n1".into(),
                correlation_id: format!("c{i}"),
                status: if i == 4 {
                    "failed".into()
                } else {
                    "dispatched".into()
                },
                error: if i == 4 {
                    "No reachable nodes available".into()
                } else {
                    String::new()
                },
                ..NewTaskRun::default()
            })
            .await
            .unwrap();
    }
    store
        .record_run(NewTaskRun {
            task_id: late.task_id.clone(),
            status: "dispatched".into(),
            ..NewTaskRun::default()
        })
        .await
        .unwrap();
    let runs = store.list_runs(&early.task_id, 10).await.unwrap();
    assert_eq!(runs.len(), 5);
    assert_eq!(runs[0].correlation_id, "c4");
    assert_eq!(runs[0].status, "failed");
    assert_eq!(store.list_runs(&early.task_id, 2).await.unwrap().len(), 2);
    assert_eq!(store.prune_runs(2).await.unwrap(), 3);
    let kept: Vec<String> = store
        .list_runs(&early.task_id, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.correlation_id)
        .collect();
    assert_eq!(kept, ["c4", "c3"]);
    assert_eq!(store.list_runs(&late.task_id, 10).await.unwrap().len(), 1);
    assert!(store.delete_task(&early.task_id).await.unwrap());
    assert!(!store.delete_task(&early.task_id).await.unwrap());
    assert!(
        store
            .list_runs(&early.task_id, 10)
            .await
            .unwrap()
            .is_empty()
    );
    store.close().await;
}
