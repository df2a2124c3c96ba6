//! The workstream manager: create, look up, list and close workstreams, with a maximum
//! count (the oldest idle one is evicted to make room) and idle cleanup.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use turnstone_llm::ChatMessage;

use crate::config::ManagerConfig;
use crate::engine::Engine;
use crate::event::WsState;
use crate::state::{EventHook, Journal, TitleHook};
use crate::workstream::WorkstreamHandle;

/// Why the manager refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManagerError {
    /// Full, and no workstream is idle to evict.
    #[error("All {0} workstreams are active")]
    AllActive(usize),
    #[error("Unknown workstream")]
    NotFound,
    #[error("Cannot close last workstream")]
    LastOne,
}

/// Options of [`Manager::create`].
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    /// Display name; default `ws-` + the first 4 hex digits of the id.
    pub name: Option<String>,
    /// A fixed id (tests, resumption); default a fresh 32-hex id.
    pub id: Option<String>,
    /// Blanket auto-approve; default from the engine config.
    pub skip_permissions: Option<bool>,
    /// Conversation to start from (a resumed session).
    pub history: Vec<ChatMessage>,
}

/// A workstream the manager closed by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    pub ws_id: String,
    pub name: String,
    /// `evicted` or `idle`.
    pub reason: &'static str,
}

struct Entry {
    order: u64,
    handle: WorkstreamHandle,
}

/// Owns every live workstream of one engine.
pub struct Manager {
    engine: Arc<Engine>,
    config: ManagerConfig,
    hook: Option<EventHook>,
    journal: Option<Arc<dyn Journal>>,
    title_hook: Option<TitleHook>,
    entries: Mutex<(u64, HashMap<Arc<str>, Entry>)>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("count", &self.len())
            .finish()
    }
}

impl Manager {
    pub fn new(engine: Arc<Engine>, config: ManagerConfig) -> Self {
        Self {
            engine,
            config,
            hook: None,
            journal: None,
            title_hook: None,
            entries: Mutex::new((0, HashMap::new())),
        }
    }

    /// Calls `hook` with every event of every workstream created afterwards.
    pub fn with_event_hook(mut self, hook: EventHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// Hands every conversation change of workstreams created afterwards to `journal`.
    pub fn with_journal(mut self, journal: Arc<dyn Journal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Calls `hook` with `(ws_id, title)` when a workstream created afterwards gets its
    /// auto-title ([`crate::EngineConfig::auto_title`]).
    pub fn with_title_hook(mut self, hook: TitleHook) -> Self {
        self.title_hook = Some(hook);
        self
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    pub fn len(&self) -> usize {
        self.entries.lock().1.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Creates a workstream, evicting the oldest idle one when at the maximum.
    pub fn create(
        &self,
        options: CreateOptions,
    ) -> Result<(WorkstreamHandle, Option<Closed>), ManagerError> {
        let mut entries = self.entries.lock();
        let mut evicted = None;
        if entries.1.len() >= self.config.max_workstreams.max(1) {
            let victim = oldest_idle(&entries.1).ok_or(ManagerError::AllActive(entries.1.len()))?;
            if let Some(entry) = entries.1.remove(victim.as_str()) {
                entry.handle.shutdown();
                evicted = Some(Closed {
                    ws_id: victim,
                    name: entry.handle.name(),
                    reason: "evicted",
                });
            }
        }
        let id = options.id.unwrap_or_else(crate::new_ws_id);
        let name = options
            .name
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("ws-{}", id.chars().take(4).collect::<String>()));
        let fresh = options.history.is_empty();
        let handle = WorkstreamHandle::spawn(
            self.engine.clone(),
            id.clone(),
            name,
            self.hook.clone(),
            self.journal.clone(),
            options.history,
        );
        if let Some(skip) = options.skip_permissions {
            handle.set_skip_permissions(skip);
        }
        handle.shared.title.init(self.title_hook.clone(), fresh);
        entries.0 += 1;
        let order = entries.0;
        entries.1.insert(
            id.into(),
            Entry {
                order,
                handle: handle.clone(),
            },
        );
        Ok((handle, evicted))
    }

    pub fn get(&self, ws_id: &str) -> Option<WorkstreamHandle> {
        self.entries.lock().1.get(ws_id).map(|e| e.handle.clone())
    }

    /// Live workstreams in creation order.
    pub fn list(&self) -> Vec<WorkstreamHandle> {
        let entries = self.entries.lock();
        let mut all: Vec<&Entry> = entries.1.values().collect();
        all.sort_by_key(|e| e.order);
        all.into_iter().map(|e| e.handle.clone()).collect()
    }

    /// Closes a workstream: cancels its turn, unblocks waits, ends its task. The last
    /// remaining workstream cannot be closed.
    pub fn close(&self, ws_id: &str) -> Result<(), ManagerError> {
        let mut entries = self.entries.lock();
        if !entries.1.contains_key(ws_id) {
            return Err(ManagerError::NotFound);
        }
        if entries.1.len() <= 1 {
            return Err(ManagerError::LastOne);
        }
        if let Some(entry) = entries.1.remove(ws_id) {
            entry.handle.shutdown();
        }
        Ok(())
    }

    /// Closes idle workstreams inactive for longer than the idle timeout, oldest first,
    /// never the last one.
    pub fn close_idle(&self) -> Vec<Closed> {
        let Some(timeout) = self.config.idle_timeout else {
            return Vec::new();
        };
        self.close_idle_older_than(timeout)
    }

    pub(crate) fn close_idle_older_than(&self, timeout: Duration) -> Vec<Closed> {
        let now = Instant::now();
        let mut entries = self.entries.lock();
        let mut idle: Vec<(Instant, Arc<str>)> = entries
            .1
            .iter()
            .filter(|(_, e)| {
                is_idle(&e.handle) && now.duration_since(e.handle.last_active()) >= timeout
            })
            .map(|(id, e)| (e.handle.last_active(), id.clone()))
            .collect();
        idle.sort();
        let mut closed = Vec::new();
        for (_, id) in idle {
            if entries.1.len() <= 1 {
                break;
            }
            if let Some(entry) = entries.1.remove(&id) {
                entry.handle.shutdown();
                closed.push(Closed {
                    ws_id: id.to_string(),
                    name: entry.handle.name(),
                    reason: "idle",
                });
            }
        }
        closed
    }
}

fn is_idle(handle: &WorkstreamHandle) -> bool {
    !handle.is_busy() && matches!(handle.state(), WsState::Idle | WsState::Error)
}

fn oldest_idle(entries: &HashMap<Arc<str>, Entry>) -> Option<String> {
    entries
        .iter()
        .filter(|(_, e)| is_idle(&e.handle))
        .min_by_key(|(_, e)| (e.handle.last_active(), e.order))
        .map(|(id, _)| id.to_string())
}
