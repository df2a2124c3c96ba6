//! Typed, scoped memories.

use turnstone_store::{MemoryFilter, MemoryInput, MemoryScope, MemoryType, ScopeRef, StoreError};

use crate::support::TestDb;

both_backends!(memory_crud_scopes_and_upsert);

fn input(name: &str, content: &str, mem_type: MemoryType, scope: ScopeRef) -> MemoryInput {
    MemoryInput {
        name: name.into(),
        content: content.into(),
        description: format!("about {name}"),
        mem_type,
        scope,
    }
}

async fn memory_crud_scopes_and_upsert(db: TestDb) {
    let store = db.open().await;
    let ws1 = ScopeRef::new(MemoryScope::Workstream, "ws1");
    let first = store
        .save_memory(input(
            "editor",
            "user prefers vim",
            MemoryType::User,
            ScopeRef::global(),
        ))
        .await
        .unwrap();
    assert_eq!(first.mem_type, MemoryType::User);
    assert_eq!(first.scope, MemoryScope::Global);
    assert_eq!(first.access_count, 0);

    // Same (name, scope, scope_id): updated in place, same id, same created.
    let second = store
        .save_memory(input(
            "editor",
            "user prefers helix",
            MemoryType::Feedback,
            ScopeRef::global(),
        ))
        .await
        .unwrap();
    assert_eq!(second.memory_id, first.memory_id);
    assert_eq!(second.created, first.created);
    assert_eq!(second.content, "user prefers helix");
    assert_eq!(second.mem_type, MemoryType::Feedback);
    assert!(second.updated >= first.updated);

    // Same name in another scope is a different memory.
    let scoped = store
        .save_memory(input(
            "editor",
            "this project uses emacs",
            MemoryType::Project,
            ws1.clone(),
        ))
        .await
        .unwrap();
    assert_ne!(scoped.memory_id, first.memory_id);
    store
        .save_memory(input(
            "build",
            "run make ci before pushing",
            MemoryType::Reference,
            ws1.clone(),
        ))
        .await
        .unwrap();

    // get counts accesses.
    let got = store
        .get_memory("editor", &ScopeRef::global())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.content, "user prefers helix");
    assert_eq!(got.access_count, 1);
    assert!(!got.last_accessed.is_empty());
    let got = store
        .get_memory("editor", &ScopeRef::global())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.access_count, 2);
    assert!(
        store
            .get_memory("editor", &ScopeRef::new(MemoryScope::User, "u1"))
            .await
            .unwrap()
            .is_none()
    );

    // list with filters.
    assert_eq!(
        store
            .list_memories(&MemoryFilter::default(), 20)
            .await
            .unwrap()
            .len(),
        3
    );
    let in_ws1 = store
        .list_memories(
            &MemoryFilter {
                mem_type: None,
                scopes: vec![ws1.clone()],
            },
            20,
        )
        .await
        .unwrap();
    let mut names: Vec<_> = in_ws1.iter().map(|m| m.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["build", "editor"]);
    let refs = store
        .list_memories(
            &MemoryFilter {
                mem_type: Some(MemoryType::Reference),
                scopes: vec![],
            },
            20,
        )
        .await
        .unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].name, "build");
    let visible = MemoryFilter {
        mem_type: None,
        scopes: vec![
            ScopeRef::global(),
            ScopeRef::new(MemoryScope::Workstream, "other"),
        ],
    };
    assert_eq!(store.list_memories(&visible, 20).await.unwrap().len(), 1);
    assert_eq!(
        store
            .list_memories(&MemoryFilter::default(), 2)
            .await
            .unwrap()
            .len(),
        2
    );

    // search: every word, case-insensitive, over name/description/content.
    let hits = store
        .search_memories("EDITOR", &MemoryFilter::default(), 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);
    let hits = store
        .search_memories("helix editor", &MemoryFilter::default(), 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].scope, MemoryScope::Global);
    let hits = store
        .search_memories(
            "editor",
            &MemoryFilter {
                mem_type: None,
                scopes: vec![ws1.clone()],
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].content, "this project uses emacs");
    assert!(
        store
            .search_memories("nothinglikethis", &MemoryFilter::default(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store
            .search_memories(" ", &MemoryFilter::default(), 10)
            .await,
        Err(StoreError::InvalidInput(_))
    ));

    // delete.
    assert!(store.delete_memory("editor", &ws1).await.unwrap());
    assert!(!store.delete_memory("editor", &ws1).await.unwrap());
    assert!(store.get_memory("editor", &ws1).await.unwrap().is_none());
    assert!(
        store
            .get_memory("editor", &ScopeRef::global())
            .await
            .unwrap()
            .is_some()
    );

    // Bad input is an error, not a panic.
    for bad in [
        input("", "x", MemoryType::Project, ScopeRef::global()),
        input("n", "", MemoryType::Project, ScopeRef::global()),
        input(
            "n",
            "x",
            MemoryType::Project,
            ScopeRef::new(MemoryScope::Global, "id"),
        ),
        input(
            "n",
            "x",
            MemoryType::Project,
            ScopeRef::new(MemoryScope::Project, ""),
        ),
    ] {
        assert!(matches!(
            store.save_memory(bad).await,
            Err(StoreError::InvalidInput(_))
        ));
    }
    assert!("bogus".parse::<MemoryType>().is_err());
    assert_eq!(
        "coordinator".parse::<MemoryScope>().unwrap(),
        MemoryScope::Coordinator
    );
    store.close().await;
}
