//! The workstream manager: create, look up, list and close workstreams, with a maximum
//! count of live ones (the oldest idle one is evicted, or hibernated, to make room), idle
//! cleanup and hibernation.
//!
//! Hibernation ([`ManagerConfig::hibernate_after`]): a workstream idle for that long whose
//! state is all in the store (nobody holds its handle, no approval or plan review pending)
//! leaves memory; the manager keeps a small [`Hibernated`] index entry for listing. Creating
//! a workstream under a hibernated id (the node's rehydration, from the store) takes the
//! entry back: the workstream keeps its place in the listing and its event numbering.

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

/// What the manager keeps of a hibernated workstream: what listings show, and where its
/// event numbering continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hibernated {
    pub ws_id: Arc<str>,
    pub name: String,
    pub title: Option<String>,
    /// The `seq` of its last event; the rehydrated workstream's log continues after it.
    pub last_seq: u64,
    /// Token and tool-call totals when it hibernated (what the dashboard shows).
    pub tokens: u64,
    pub tool_calls: u64,
    /// Blanket auto-approve, kept for the rehydrated workstream.
    pub skip_permissions: bool,
    /// Position in the listing (creation order).
    order: u64,
}

/// A row of [`Manager::list_all`].
#[derive(Debug, Clone)]
pub enum Listed {
    Live(WorkstreamHandle),
    Hibernated(Hibernated),
}

impl Listed {
    pub fn id(&self) -> &str {
        match self {
            Self::Live(w) => w.id(),
            Self::Hibernated(h) => &h.ws_id,
        }
    }
}

struct Entry {
    order: u64,
    handle: WorkstreamHandle,
}

#[derive(Default)]
struct Entries {
    /// The last `order` handed out.
    counter: u64,
    live: HashMap<Arc<str>, Entry>,
    hibernated: HashMap<Arc<str>, Hibernated>,
}

/// Owns every workstream of one engine: the live ones, and the index of hibernated ones.
pub struct Manager {
    engine: Arc<Engine>,
    config: ManagerConfig,
    hook: Option<EventHook>,
    journal: Option<Arc<dyn Journal>>,
    title_hook: Option<TitleHook>,
    hibernate_hook: Option<HibernateHook>,
    entries: Mutex<Entries>,
}

/// Called with the index entry of each workstream that hibernates (under the manager's
/// lock: it must not block or call the manager).
pub type HibernateHook = Arc<dyn Fn(&Hibernated) + Send + Sync>;

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
            hibernate_hook: None,
            entries: Mutex::new(Entries::default()),
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

    /// Calls `hook` with every workstream that hibernates.
    pub fn with_hibernate_hook(mut self, hook: HibernateHook) -> Self {
        self.hibernate_hook = Some(hook);
        self
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    /// Live workstreams (what `max_workstreams` bounds).
    pub fn len(&self) -> usize {
        self.entries.lock().live.len()
    }

    /// Hibernated workstreams.
    pub fn hibernated_len(&self) -> usize {
        self.entries.lock().hibernated.len()
    }

    /// The index entry of a hibernated workstream.
    pub fn hibernated(&self, ws_id: &str) -> Option<Hibernated> {
        self.entries.lock().hibernated.get(ws_id).cloned()
    }

    /// Adds index entries for workstreams hibernated by an earlier run (the node reads them
    /// from the store at start). Ids that are live or indexed already are skipped. Returns
    /// how many were indexed.
    pub fn restore_hibernated(&self, rows: impl IntoIterator<Item = (String, String)>) -> usize {
        let mut entries = self.entries.lock();
        let mut indexed = 0;
        for (ws_id, name) in rows {
            if entries.live.contains_key(ws_id.as_str())
                || entries.hibernated.contains_key(ws_id.as_str())
            {
                continue;
            }
            entries.counter += 1;
            let ws_id: Arc<str> = ws_id.into();
            let entry = Hibernated {
                ws_id: ws_id.clone(),
                name,
                title: None,
                last_seq: 0,
                tokens: 0,
                tool_calls: 0,
                skip_permissions: self.engine.config().skip_permissions,
                order: entries.counter,
            };
            entries.hibernated.insert(ws_id, entry);
            indexed += 1;
        }
        indexed
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Creates a workstream, making room when `max_workstreams` are live: with hibernation
    /// on by hibernating the oldest that may, else by evicting the oldest idle one.
    pub fn create(
        &self,
        options: CreateOptions,
    ) -> Result<(WorkstreamHandle, Option<Closed>), ManagerError> {
        let mut entries = self.entries.lock();
        let mut evicted = None;
        let id = options.id.unwrap_or_else(crate::new_ws_id);
        // A hibernated workstream coming back takes its index entry with it.
        let woken = entries.hibernated.remove(id.as_str());
        if entries.live.len() >= self.config.max_workstreams.max(1) {
            // With hibernation on, the oldest workstream that may hibernate makes room and
            // stays listed, and none is ever closed for room (one that cannot hibernate is
            // busy, waits for a decision, or is held by a request or an event stream);
            // without, the oldest idle one is closed.
            let (sleeper, victim) = match self.config.hibernate_after {
                Some(_) => (oldest(&entries.live, can_hibernate), None),
                None => (None, oldest(&entries.live, is_idle)),
            };
            match sleeper {
                Some(victim) => {
                    self.hibernate_entry(&mut entries, &victim);
                }
                None => match victim {
                    Some(victim) => {
                        if let Some(entry) = entries.live.remove(victim.as_str()) {
                            entry.handle.shutdown();
                            evicted = Some(Closed {
                                ws_id: victim,
                                name: entry.handle.name(),
                                reason: "evicted",
                            });
                        }
                    }
                    None => {
                        let full = ManagerError::AllActive(entries.live.len());
                        if let Some(woken) = woken {
                            entries.hibernated.insert(woken.ws_id.clone(), woken);
                        }
                        return Err(full);
                    }
                },
            }
        }
        let name = options
            .name
            .filter(|n| !n.is_empty())
            .or_else(|| woken.as_ref().map(|w| w.name.clone()))
            .unwrap_or_else(|| format!("ws-{}", id.chars().take(4).collect::<String>()));
        let fresh = options.history.is_empty() && woken.is_none();
        let handle = WorkstreamHandle::spawn(
            self.engine.clone(),
            id.clone(),
            name,
            self.hook.clone(),
            self.journal.clone(),
            options.history,
            woken.as_ref().map_or(0, |w| w.last_seq),
        );
        if let Some(skip) = options
            .skip_permissions
            .or(woken.as_ref().map(|w| w.skip_permissions))
        {
            handle.set_skip_permissions(skip);
        }
        handle.shared.title.init(self.title_hook.clone(), fresh);
        let order = match &woken {
            Some(w) => w.order,
            None => {
                entries.counter += 1;
                entries.counter
            }
        };
        entries.live.insert(
            id.into(),
            Entry {
                order,
                handle: handle.clone(),
            },
        );
        Ok((handle, evicted))
    }

    /// A live workstream (a hibernated one is not live: see [`Manager::hibernated`]).
    pub fn get(&self, ws_id: &str) -> Option<WorkstreamHandle> {
        self.entries
            .lock()
            .live
            .get(ws_id)
            .map(|e| e.handle.clone())
    }

    /// Live workstreams in creation order.
    pub fn list(&self) -> Vec<WorkstreamHandle> {
        let entries = self.entries.lock();
        let mut all: Vec<&Entry> = entries.live.values().collect();
        all.sort_by_key(|e| e.order);
        all.into_iter().map(|e| e.handle.clone()).collect()
    }

    /// Live and hibernated workstreams in creation order.
    pub fn list_all(&self) -> Vec<Listed> {
        let entries = self.entries.lock();
        let mut all: Vec<(u64, Listed)> = entries
            .live
            .values()
            .map(|e| (e.order, Listed::Live(e.handle.clone())))
            .chain(
                entries
                    .hibernated
                    .values()
                    .map(|h| (h.order, Listed::Hibernated(h.clone()))),
            )
            .collect();
        all.sort_by_key(|(order, _)| *order);
        all.into_iter().map(|(_, l)| l).collect()
    }

    /// Closes a workstream: cancels its turn, unblocks waits, ends its task (a hibernated
    /// one leaves the index). The last remaining workstream cannot be closed.
    pub fn close(&self, ws_id: &str) -> Result<(), ManagerError> {
        let mut entries = self.entries.lock();
        if !entries.live.contains_key(ws_id) && !entries.hibernated.contains_key(ws_id) {
            return Err(ManagerError::NotFound);
        }
        if entries.live.len() + entries.hibernated.len() <= 1 {
            return Err(ManagerError::LastOne);
        }
        if let Some(entry) = entries.live.remove(ws_id) {
            entry.handle.shutdown();
        }
        entries.hibernated.remove(ws_id);
        Ok(())
    }

    /// Lets a workstream go without closing it: another node serves it now (its owner
    /// moved while this one was down or cut off). A hibernated one leaves the index; a live
    /// one must be able to hibernate (idle, nothing pending, nobody holding its handle) and
    /// not be held back by `keep` (the node's queued sends). `Ok(false)`: busy now — ask
    /// again later. Unlike [`Manager::close`], it may leave the manager empty.
    pub fn release(
        &self,
        ws_id: &str,
        keep: impl Fn(&WorkstreamHandle) -> bool,
    ) -> Result<bool, ManagerError> {
        let mut entries = self.entries.lock();
        if entries.hibernated.remove(ws_id).is_some() {
            return Ok(true);
        }
        let Some(entry) = entries.live.get(ws_id) else {
            return Err(ManagerError::NotFound);
        };
        if !can_hibernate(&entry.handle) || keep(&entry.handle) {
            return Ok(false);
        }
        if let Some(entry) = entries.live.remove(ws_id) {
            entry.handle.shutdown();
        }
        Ok(true)
    }

    /// Hibernates every workstream idle for [`ManagerConfig::hibernate_after`] that may
    /// hibernate (see [`Manager`]) and that `keep` does not hold back (the node's queued
    /// sends). Returns their index entries.
    pub fn hibernate_idle(&self, keep: impl Fn(&WorkstreamHandle) -> bool) -> Vec<Hibernated> {
        let Some(after) = self.config.hibernate_after else {
            return Vec::new();
        };
        let now = Instant::now();
        let mut entries = self.entries.lock();
        let due: Vec<Arc<str>> = entries
            .live
            .iter()
            .filter(|(_, e)| {
                now.duration_since(e.handle.last_active()) >= after
                    && can_hibernate(&e.handle)
                    && !keep(&e.handle)
            })
            .map(|(id, _)| id.clone())
            .collect();
        due.iter()
            .filter_map(|id| self.hibernate_entry(&mut entries, id))
            .collect()
    }

    /// Moves a live workstream to the hibernated index and ends its task. Runs under the
    /// entries' lock, after [`can_hibernate`] was checked under it: nobody can have taken
    /// the handle in between (taking it needs the lock), so nothing sent to it is lost.
    fn hibernate_entry(&self, entries: &mut Entries, ws_id: &str) -> Option<Hibernated> {
        let entry = entries.live.remove(ws_id)?;
        let w = &entry.handle;
        let sleeper = Hibernated {
            ws_id: w.shared.id.clone(),
            name: w.name(),
            title: w.title(),
            last_seq: w.log().last_seq(),
            tokens: w.tokens_total(),
            tool_calls: w.tool_calls_total(),
            skip_permissions: w.skip_permissions(),
            order: entry.order,
        };
        w.shutdown();
        if let Some(hook) = &self.hibernate_hook {
            hook(&sleeper);
        }
        entries
            .hibernated
            .insert(sleeper.ws_id.clone(), sleeper.clone());
        Some(sleeper)
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
            .live
            .iter()
            .filter(|(_, e)| {
                is_idle(&e.handle) && now.duration_since(e.handle.last_active()) >= timeout
            })
            .map(|(id, e)| (e.handle.last_active(), id.clone()))
            .collect();
        idle.sort();
        let mut closed = Vec::new();
        for (_, id) in idle {
            if entries.live.len() + entries.hibernated.len() <= 1 {
                break;
            }
            if let Some(entry) = entries.live.remove(&id) {
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

/// Whether a live workstream may leave memory: idle, nothing pending that only memory
/// holds (an approval, a plan review), and nobody holding its handle (a request in flight,
/// an open event stream).
fn can_hibernate(handle: &WorkstreamHandle) -> bool {
    is_idle(handle)
        && !handle.is_held_elsewhere()
        && !handle.is_closed()
        && handle.pending_approval().is_none()
        && handle.pending_plan_review().is_none()
}

fn oldest(
    entries: &HashMap<Arc<str>, Entry>,
    eligible: fn(&WorkstreamHandle) -> bool,
) -> Option<String> {
    entries
        .iter()
        .filter(|(_, e)| eligible(&e.handle))
        .min_by_key(|(_, e)| (e.handle.last_active(), e.order))
        .map(|(id, _)| id.to_string())
}
