//! Hibernation on the node (`--hibernate-after` / `[server] hibernate_after_secs`): an idle
//! workstream leaves memory — its conversation and settings are in the store — and the
//! engine's manager keeps a small index entry ([`turnstone_engine::Hibernated`]) so that
//! listings still show it. The next request that names it ([`Node::resolve`]: send, attach,
//! approve, any per-workstream route, an event-stream resume) rehydrates it through the
//! same path that reopens a workstream after a restart (`workstreams::reopen`).
//!
//! - What may hibernate is the manager's rule (idle, nothing pending, nobody holding its
//!   handle — a request in flight or an open event stream holds one); the node adds
//!   "no queued sends" ([`sweep`]).
//! - Rehydration is single-flight per workstream: concurrent requests wait for one load.
//! - A hibernation racing a send loses nothing: hibernating checks, under the manager's
//!   lock, that nobody holds the handle, and taking the handle needs that lock; a send that
//!   arrives later finds the workstream hibernated and rehydrates it.
//! - The event numbering continues across a hibernation, so `Last-Event-ID` from before
//!   means the same event: a client that saw the last event gets exactly what follows; one
//!   that missed some gets the `events_truncated` frame (the events of the earlier
//!   incarnation are not kept).
//! - The store's `state` column says `hibernated`; a restarted node lists them again, and
//!   with them whatever its earlier run left open ([`restore_index`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use turnstone_engine::WorkstreamHandle;

use super::error::ApiError;
use super::state::Node;

/// The store `state` of a hibernated workstream.
pub const HIBERNATED_STATE: &str = "hibernated";

/// The node's hibernation bookkeeping: rehydrations in flight and counters for `/metrics`.
#[derive(Debug, Default)]
pub struct Hibernation {
    /// One gate per workstream being rehydrated (single flight).
    waking: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Workstreams that went to hibernation since start.
    pub hibernations: AtomicU64,
    /// Workstreams brought back from hibernation since start.
    pub rehydrations: AtomicU64,
}

impl Hibernation {
    pub fn hibernations(&self) -> u64 {
        self.hibernations.load(Ordering::Relaxed)
    }

    pub fn rehydrations(&self) -> u64 {
        self.rehydrations.load(Ordering::Relaxed)
    }
}

impl Node {
    /// The workstream `ws_id`, rehydrated from the store when it is hibernated; `404` when
    /// it is unknown. What every per-workstream route uses.
    pub async fn resolve(&self, ws_id: &str) -> Result<WorkstreamHandle, ApiError> {
        if let Some(ws) = self.workstream(ws_id) {
            return Ok(ws);
        }
        if self.manager.hibernated(ws_id).is_none() {
            return Err(ApiError::unknown_workstream());
        }
        rehydrate(self, ws_id)
            .await?
            .ok_or_else(ApiError::unknown_workstream)
    }
}

/// Brings a hibernated workstream (or one an earlier run left open, indexed as hibernated
/// at start: [`restore_index`]) back (once, however many ask at the
/// same time). `None` when it is neither live nor hibernated (closed meanwhile).
async fn rehydrate(node: &Node, ws_id: &str) -> Result<Option<WorkstreamHandle>, ApiError> {
    let gate = node
        .hibernation
        .waking
        .lock()
        .entry(ws_id.to_string())
        .or_default()
        .clone();
    let result = {
        let _one = gate.lock().await;
        wake(node, ws_id).await
    };
    // Later callers find it live (or gone); a waiter still holding this gate finds the same.
    let mut waking = node.hibernation.waking.lock();
    if waking.get(ws_id).is_some_and(|g| Arc::ptr_eq(g, &gate)) {
        waking.remove(ws_id);
    }
    result
}

async fn wake(node: &Node, ws_id: &str) -> Result<Option<WorkstreamHandle>, ApiError> {
    if let Some(ws) = node.workstream(ws_id) {
        return Ok(Some(ws));
    }
    if node.manager.hibernated(ws_id).is_none() {
        return Ok(None);
    }
    let Some(p) = &node.persistence else {
        return Err(ApiError::Internal(
            "a hibernated workstream without persistence".into(),
        ));
    };
    // What the workstream wrote last may still wait in the writer's batch.
    p.writer
        .flush()
        .await
        .map_err(|e| ApiError::Unavailable(format!("Storage unavailable: {e}")))?;
    let ws = super::workstreams::reopen(node, ws_id)
        .await
        .map_err(|e| match e {
            ApiError::BadRequest(m) => ApiError::Unavailable(format!(
                "Workstream {ws_id} is hibernated and cannot be rehydrated now: {m}"
            )),
            other => other,
        })?;
    p.record_state(ws_id, "idle");
    node.hibernation
        .rehydrations
        .fetch_add(1, Ordering::Relaxed);
    tracing::debug!(%ws_id, "workstream rehydrated");
    Ok(Some(ws))
}

/// Hibernates what is due (the manager's rule, and no queued sends). Returns how many.
pub fn sweep(node: &Node) -> usize {
    node.manager
        .hibernate_idle(|ws| node.queues.len(ws.id()) > 0)
        .len()
}

/// How often the sweeper (`start_sweeper`) looks: a quarter of the idle time, between
/// 100 ms and 30 s.
pub fn sweep_period(after: Duration) -> Duration {
    (after / 4).clamp(Duration::from_millis(100), Duration::from_secs(30))
}

/// Runs [`sweep`] periodically for as long as the node exists (only when hibernation is
/// on and the node persists: a workstream's state must be in the store to leave memory).
pub(crate) fn start_sweeper(node: &Arc<Node>) {
    let Some(after) = node.manager.config().hibernate_after else {
        return;
    };
    if node.persistence.is_none() {
        tracing::warn!("hibernation needs persistence; workstreams stay in memory");
        return;
    }
    node.every(sweep_period(after), |node| async move {
        let n = sweep(&node);
        if n > 0 {
            tracing::debug!(hibernated = n, "idle workstreams hibernated");
        }
    });
}

/// At start: the workstreams an earlier run of this node left open (store `state` not
/// `closed`: hibernated ones, and idle or busy ones of a run that stopped or crashed) are
/// indexed as hibernated, so they are listed — and the bridge keeps their ownership leases,
/// so a message for one still finds this node however long it stays idle — and rehydrate
/// on use. Returns how many.
pub async fn restore_index(node: &Node) -> Result<usize, ApiError> {
    let Some(p) = &node.persistence else {
        return Ok(0);
    };
    let rows = p
        .store
        .open_workstreams(&p.node_id)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(node.manager.restore_hibernated(
        rows.into_iter()
            .map(|w| (w.ws_id.clone(), super::workstreams::stored_name(&w))),
    ))
}
