use std::sync::{Arc, Mutex};

use turnstone_engine::{CreateOptions, Event, Journal, Manager, ManagerConfig};
use turnstone_llm::ChatMessage;

use super::harness::*;

#[derive(Default)]
struct Recording {
    appended: Mutex<Vec<(String, ChatMessage)>>,
    replaced: Mutex<Vec<(String, usize)>>,
}

impl Journal for Recording {
    fn appended(&self, ws_id: &str, messages: &[ChatMessage]) {
        let mut a = self.appended.lock().unwrap();
        a.extend(messages.iter().map(|m| (ws_id.to_string(), m.clone())));
    }
    fn replaced(&self, ws_id: &str, messages: &[ChatMessage]) {
        self.replaced
            .lock()
            .unwrap()
            .push((ws_id.to_string(), messages.len()));
    }
}

#[tokio::test]
async fn the_journal_sees_exactly_the_conversation_including_cancelled_turns() {
    let h = Harness::start().await;
    let journal = Arc::new(Recording::default());
    let manager = Manager::new(h.manager.engine().clone(), ManagerConfig::default())
        .with_journal(journal.clone());
    let (ws, _) = manager.create(CreateOptions::default()).unwrap();

    let mut sub = send(&ws, "plain text");
    read_turn(&mut sub).await;
    let mut sub = send(&ws, "TOOL: echo journaled");
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    ws.approve(true, None, false);
    read_turn(&mut sub).await;
    let mut sub = send(&ws, "TOOL: echo never");
    read_until(&mut sub, |e| matches!(e, Event::ApproveRequest { .. })).await;
    ws.cancel();
    read_turn(&mut sub).await;

    let recorded: Vec<ChatMessage> = journal
        .appended
        .lock()
        .unwrap()
        .iter()
        .map(|(id, m)| {
            assert_eq!(id, ws.id());
            m.clone()
        })
        .collect();
    assert_eq!(
        recorded,
        ws.history(),
        "the journal saw every message, in order"
    );
    assert_provider_acceptable(&recorded);

    assert!(ws.replace_history(Vec::new()));
    assert_eq!(
        journal.replaced.lock().unwrap().as_slice(),
        [(ws.id().to_string(), 0)]
    );
}
