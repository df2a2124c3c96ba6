use turnstone_engine::{CreateOptions, Event, ManagerError, SendOutcome};

use super::harness::*;

#[tokio::test]
async fn creating_beyond_the_maximum_evicts_the_oldest_idle_workstream() {
    let h = Harness::with(|o| o.manager.max_workstreams = 2).await;
    let (first, _) = h.manager.create(CreateOptions::default()).unwrap();
    let (second, _) = h.manager.create(CreateOptions::default()).unwrap();
    assert!(first.name().starts_with("ws-") && first.name().len() == 7);
    assert_eq!(first.id().len(), 32);
    // Make `first` the most recently active one.
    let mut sub = send(&first, "touch");
    read_turn(&mut sub).await;
    let (_third, evicted) = h.manager.create(CreateOptions::default()).unwrap();
    let evicted = evicted.unwrap();
    assert_eq!(evicted.ws_id, second.id());
    assert_eq!(evicted.reason, "evicted");
    assert!(h.manager.get(second.id()).is_none());
    assert!(h.manager.get(first.id()).is_some());
    assert_eq!(h.manager.len(), 2);
    assert_eq!(second.send("gone", None), SendOutcome::Closed);
}

#[tokio::test]
async fn when_all_are_busy_creation_is_refused() {
    let h = Harness::with(|o| {
        o.manager.max_workstreams = 1;
    })
    .await;
    let (only, _) = h.manager.create(CreateOptions::default()).unwrap();
    let mut sub = send(&only, "TOOL: echo waiting");
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    assert_eq!(
        h.manager.create(CreateOptions::default()).unwrap_err(),
        ManagerError::AllActive(1)
    );
    only.cancel();
    read_turn(&mut sub).await;
}

#[tokio::test]
async fn the_last_workstream_cannot_be_closed_and_unknown_ids_are_reported() {
    let h = Harness::start().await;
    let (a, _) = h
        .manager
        .create(CreateOptions {
            name: Some("alpha".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(a.name(), "alpha");
    let (b, _) = h.manager.create(CreateOptions::default()).unwrap();
    assert_eq!(h.manager.close("nope"), Err(ManagerError::NotFound));
    assert_eq!(h.manager.close(a.id()), Ok(()));
    assert_eq!(h.manager.close(b.id()), Err(ManagerError::LastOne));
    let ids: Vec<String> = h
        .manager
        .list()
        .iter()
        .map(|w| w.id().to_string())
        .collect();
    assert_eq!(ids, [b.id().to_string()]);
}

#[tokio::test]
async fn closing_a_workstream_cancels_its_pending_approval() {
    let h = Harness::start().await;
    let (keep, _) = h.manager.create(CreateOptions::default()).unwrap();
    let (ws, _) = h.manager.create(CreateOptions::default()).unwrap();
    let mut sub = send(&ws, "TOOL: echo never");
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    h.manager.close(ws.id()).unwrap();
    let events = read_turn(&mut sub).await;
    assert!(types(&events).contains(&"approval_resolved"));
    assert_provider_acceptable(&ws.history());
    assert!(h.manager.get(keep.id()).is_some());
}

#[tokio::test]
async fn idle_cleanup_closes_old_idle_workstreams_but_never_the_last() {
    let h =
        Harness::with(|o| o.manager.idle_timeout = Some(std::time::Duration::from_millis(1))).await;
    let (a, _) = h.manager.create(CreateOptions::default()).unwrap();
    let (b, _) = h.manager.create(CreateOptions::default()).unwrap();
    let (busy, _) = h.manager.create(CreateOptions::default()).unwrap();
    let mut sub = send(&busy, "TOOL: echo hold");
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let closed = h.manager.close_idle();
    let mut ids: Vec<String> = closed.iter().map(|c| c.ws_id.clone()).collect();
    ids.sort();
    let mut expected = vec![a.id().to_string(), b.id().to_string()];
    expected.sort();
    assert_eq!(ids, expected, "both idle ones closed, the busy one kept");
    assert!(closed.iter().all(|c| c.reason == "idle"));
    assert!(h.manager.get(busy.id()).is_some());
    busy.cancel();
    read_turn(&mut sub).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(
        h.manager.close_idle().is_empty(),
        "the last workstream is never closed"
    );
    assert_eq!(h.manager.len(), 1);
}

#[tokio::test]
async fn only_idle_unheld_workstreams_hibernate_and_they_come_back_numbered_on() {
    let h = Harness::with(|o| {
        o.manager.hibernate_after = Some(std::time::Duration::from_millis(1));
    })
    .await;
    let (held, _) = h.manager.create(CreateOptions::default()).unwrap();
    let (free, _) = h.manager.create(CreateOptions::default()).unwrap();
    let (waiting, _) = h.manager.create(CreateOptions::default()).unwrap();
    let mut sub = send(&free, "touch");
    read_turn(&mut sub).await;
    drop(sub);
    let last_seq = free.log().last_seq();
    let free_id = free.id().to_string();
    drop(free);
    let mut waits = send(&waiting, "TOOL: echo hold");
    read_until(&mut waits, |e| matches!(e, Event::ApproveRequest { .. })).await;
    let waiting_id = waiting.id().to_string();
    drop(waiting);
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;

    // `held` is held by this test, `waiting` has an approval pending: only `free` sleeps.
    let slept = h.manager.hibernate_idle(|_| false);
    let ids: Vec<&str> = slept.iter().map(|s| &*s.ws_id).collect();
    assert_eq!(ids, [free_id.as_str()]);
    assert_eq!(slept[0].last_seq, last_seq);
    assert!(h.manager.get(&free_id).is_none());
    assert!(h.manager.get(held.id()).is_some());
    assert!(h.manager.get(&waiting_id).is_some());
    assert_eq!((h.manager.len(), h.manager.hibernated_len()), (2, 1));
    // Listed in creation order, live or not.
    let order: Vec<String> = h
        .manager
        .list_all()
        .iter()
        .map(|l| l.id().to_string())
        .collect();
    assert_eq!(order, [held.id(), free_id.as_str(), waiting_id.as_str()]);
    // `keep` holds one back (the node's queued sends).
    assert!(h.manager.hibernate_idle(|_| true).is_empty());

    // Created again under its id: out of the index, its log continues.
    let (back, _) = h
        .manager
        .create(CreateOptions {
            id: Some(free_id.clone()),
            ..CreateOptions::default()
        })
        .unwrap();
    assert!(h.manager.hibernated(&free_id).is_none());
    let mut sub = send(&back, "again");
    let events = read_turn(&mut sub).await;
    assert!(!events.is_empty());
    assert!(back.log().last_seq() > last_seq);
    assert_eq!(
        back.subscribe(Some(last_seq)).backlog().len() as u64,
        back.log().last_seq() - last_seq
    );
    h.manager.get(&waiting_id).unwrap().cancel();
    read_turn(&mut waits).await;
}

#[tokio::test]
async fn with_hibernation_a_full_manager_hibernates_instead_of_evicting() {
    let h = Harness::with(|o| {
        o.manager.max_workstreams = 2;
        o.manager.hibernate_after = Some(std::time::Duration::from_secs(3600));
    })
    .await;
    let first = h
        .manager
        .create(CreateOptions::default())
        .unwrap()
        .0
        .id()
        .to_string();
    let second = h
        .manager
        .create(CreateOptions::default())
        .unwrap()
        .0
        .id()
        .to_string();
    let (_third, evicted) = h.manager.create(CreateOptions::default()).unwrap();
    assert!(evicted.is_none(), "nothing closed");
    assert_eq!((h.manager.len(), h.manager.hibernated_len()), (2, 1));
    assert!(h.manager.hibernated(&first).is_some());
    assert!(h.manager.get(&second).is_some());
    // A hibernated one can be closed without waking it; the last one never.
    assert_eq!(h.manager.close(&first), Ok(()));
    assert_eq!(h.manager.hibernated_len(), 0);
}

#[tokio::test]
async fn a_released_workstream_leaves_without_closing_unless_it_is_busy() {
    let h = Harness::with(|o| {
        o.manager.hibernate_after = Some(std::time::Duration::from_millis(1));
    })
    .await;
    let (held, _) = h.manager.create(CreateOptions::default()).unwrap();
    let (free, _) = h.manager.create(CreateOptions::default()).unwrap();
    let (sleeper, _) = h.manager.create(CreateOptions::default()).unwrap();
    let (free_id, sleeper_id) = (free.id().to_string(), sleeper.id().to_string());
    drop((free, sleeper));
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    // Hibernate only `sleeper`: `free` is held back by `keep` for now.
    let slept = h.manager.hibernate_idle(|w| w.id() == free_id);
    assert_eq!(slept.len(), 1);

    // Held by someone (a request, an open stream), or held back by `keep`: busy.
    assert_eq!(h.manager.release(held.id(), |_| false), Ok(false));
    assert_eq!(h.manager.release(&free_id, |_| true), Ok(false));
    assert!(h.manager.get(&free_id).is_some());
    // Idle and unheld: gone from the manager, live or hibernated; not closed (no event).
    assert_eq!(h.manager.release(&free_id, |_| false), Ok(true));
    assert_eq!(h.manager.release(&sleeper_id, |_| false), Ok(true));
    assert!(h.manager.get(&free_id).is_none());
    assert!(h.manager.hibernated(&sleeper_id).is_none());
    let listed: Vec<String> = h
        .manager
        .list_all()
        .iter()
        .map(|l| l.id().to_string())
        .collect();
    assert_eq!(listed, [held.id()]);
    assert_eq!(
        h.manager.release(&free_id, |_| false),
        Err(ManagerError::NotFound)
    );
    // The last one may go too (the node serves nothing then).
    let held_id = held.id().to_string();
    drop(held);
    assert_eq!(h.manager.release(&held_id, |_| false), Ok(true));
    assert_eq!(h.manager.len(), 0);
}
