//! Queued user turns (issue 20): a send that arrives while its workstream is busy waits in
//! a per-workstream FIFO and becomes its own turn, with its own `turn_complete` and
//! `correlation_id`, when the turns before it have ended.
//!
//! One owner: [`SendQueues`] holds every workstream's FIFO; only [`submit`], [`pump`],
//! [`remove`], [`clear`] and [`recover`] change it. With persistence every admitted send is
//! inserted into `queued_sends` through the batching writer and answered only once that row
//! is committed (group commit: one transaction for what arrived meanwhile); its turn's user
//! message and the row's `started` mark are committed together
//! (`StoreJournal::turn_started`), so a node restart runs every accepted message exactly
//! once ([`recover`]).
//!
//! HTTP compatibility: a send that does not opt in (`"queue": true`) is answered `busy`,
//! as the original, whenever it would have to wait. The bridge and the console opt in.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::json;
use turnstone_engine::{Event, Item, SendOutcome, WorkstreamHandle};
use turnstone_proto::api::SendReply;
use turnstone_store::{QueuedSend, QueuedState, WriteOp};

use crate::server::error::ApiError;
use crate::server::state::{Node, NodeEventKind};

/// Default bound of one workstream's queue (`--max-queued-sends`).
pub const DEFAULT_MAX_QUEUED_SENDS: usize = 1000;
/// How often every non-empty queue is looked at even without a `turn_complete` (a
/// compaction or a watch turn ended, the node log was truncated).
const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// The status of a send that was neither started nor queued (refused, or its row could not
/// be handed to the writer): never remembered, so a retry is a new attempt.
pub(crate) const NOT_ADMITTED: &str = "busy";

/// What a send asks for besides its text; applied when its turn starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SendOptions {
    /// `true` turns blanket auto-approval on (sticky).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_approve: Option<bool>,
    /// Non-empty: replaces the workstream's per-tool auto-approve set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto_approve_tools: Vec<String>,
    /// The W3C trace context of the request that sent it: its turn joins that trace, also
    /// when it starts later from the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

impl SendOptions {
    fn apply(&self, ws: &WorkstreamHandle) {
        if self.auto_approve == Some(true) {
            ws.set_skip_permissions(true);
        }
        if !self.auto_approve_tools.is_empty() {
            ws.set_always_approved(self.auto_approve_tools.iter().cloned().collect());
        }
    }
}

/// One waiting message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueuedMessage {
    pub correlation_id: String,
    pub message: String,
    /// ISO timestamp of its arrival.
    pub queued_at: String,
    #[serde(skip)]
    pub options: SendOptions,
}

impl QueuedMessage {
    /// Its wire form (`GET …/queue`, the dashboard's `queue`).
    pub fn wire(&self) -> turnstone_proto::api::QueuedSend {
        turnstone_proto::api::QueuedSend {
            correlation_id: self.correlation_id.clone(),
            message: self.message.clone(),
            queued_at: self.queued_at.clone(),
        }
    }
}

/// A send as the handler decoded it.
#[derive(Debug, Clone)]
pub struct SendRequest {
    pub message: String,
    /// `correlation_id` or `Idempotency-Key`; one is made when absent.
    pub key: Option<String>,
    pub options: SendOptions,
    /// `"queue": true`: wait in the queue when busy instead of being refused.
    pub queue: bool,
}

/// The answer to a send.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// Its turn started.
    Started,
    /// It waits; `position` 1 is next.
    Queued {
        position: usize,
    },
    /// Refused; nothing was stored.
    Busy {
        reason: String,
    },
    /// The key was seen before: the first answer (the current position when it still waits).
    Replayed {
        ws_id: String,
        status: SendReply,
    },
    Closed,
}

impl Submitted {
    /// The reply body.
    pub fn body(&self) -> SendReply {
        match self {
            Self::Started => SendReply::ok(),
            Self::Queued { position } => SendReply::queued(*position as u64),
            Self::Busy { reason } => SendReply::busy(reason.clone()),
            Self::Replayed { status, .. } => status.clone(),
            Self::Closed => SendReply::closed(),
        }
    }
}

/// Every workstream's queue. See the module docs.
pub struct SendQueues {
    max_per_ws: usize,
    queues: Mutex<HashMap<String, VecDeque<QueuedMessage>>>,
    dispatcher: OnceLock<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for SendQueues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendQueues")
            .field("max_per_ws", &self.max_per_ws)
            .finish()
    }
}

impl Drop for SendQueues {
    fn drop(&mut self) {
        if let Some(task) = self.dispatcher.get() {
            task.abort();
        }
    }
}

impl SendQueues {
    pub fn new(max_per_ws: usize) -> Self {
        Self {
            max_per_ws: max_per_ws.max(1),
            queues: Mutex::default(),
            dispatcher: OnceLock::new(),
        }
    }

    /// The messages waiting in `ws_id`'s queue, next first.
    pub fn snapshot(&self, ws_id: &str) -> Vec<QueuedMessage> {
        self.queues
            .lock()
            .get(ws_id)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many wait in `ws_id`'s queue.
    pub fn len(&self, ws_id: &str) -> usize {
        self.queues.lock().get(ws_id).map_or(0, VecDeque::len)
    }

    /// 1-based position of `correlation_id` in `ws_id`'s queue.
    fn position(&self, ws_id: &str, correlation_id: &str) -> Option<usize> {
        self.queues
            .lock()
            .get(ws_id)?
            .iter()
            .position(|m| m.correlation_id == correlation_id)
            .map(|i| i + 1)
    }

    fn take(&self, ws_id: &str, correlation_id: &str) -> Option<QueuedMessage> {
        let mut queues = self.queues.lock();
        let q = queues.get_mut(ws_id)?;
        let i = q.iter().position(|m| m.correlation_id == correlation_id)?;
        q.remove(i)
    }

    /// Starts the task that starts the next queued turn when a turn of its workstream ends
    /// (and sweeps every queue now and then). Owned by the queues: aborted when they drop.
    pub(crate) fn start_dispatcher(node: &Arc<Node>) {
        let weak: Weak<Node> = Arc::downgrade(node);
        let mut sub = node.node_log.subscribe(None);
        let task = tokio::spawn(async move {
            let mut sweep = tokio::time::interval(SWEEP_EVERY);
            loop {
                let item = tokio::select! {
                    item = sub.next() => item,
                    _ = sweep.tick() => {
                        let Some(node) = weak.upgrade() else { return };
                        let waiting: Vec<String> = node.queues.queues.lock()
                            .iter()
                            .filter(|(_, q)| !q.is_empty())
                            .map(|(ws, _)| ws.clone())
                            .collect();
                        for ws_id in waiting {
                            pump(&node, &ws_id);
                        }
                        continue;
                    }
                };
                let Some(item) = item else { return };
                let Some(node) = weak.upgrade() else { return };
                let Item::Event(entry) = item else {
                    // Fell behind the log: the sweep catches up.
                    continue;
                };
                match &entry.kind {
                    NodeEventKind::Ws(env) if matches!(env.event, Event::TurnComplete { .. }) => {
                        pump(&node, &env.ws_id);
                    }
                    NodeEventKind::Closed { ws_id, .. } => discard(&node, ws_id),
                    _ => {}
                }
            }
        });
        if node.queues.dispatcher.set(task).is_err() {
            tracing::error!("send queue dispatcher started twice");
        }
    }
}

/// Admits a send: starts its turn when the workstream is idle and nothing waits, else queues
/// it (when the request opts in and the bound allows) or refuses it. With persistence the
/// answer comes only after the send's row is committed.
pub async fn submit(
    node: &Arc<Node>,
    ws: &WorkstreamHandle,
    request: SendRequest,
) -> Result<Submitted, ApiError> {
    let ws_id = ws.id().to_string();
    let key = request
        .key
        .clone()
        .filter(|k| !k.is_empty())
        .unwrap_or_else(turnstone_engine::new_correlation_id);
    let entry = QueuedMessage {
        correlation_id: key.clone(),
        message: request.message.clone(),
        queued_at: turnstone_store::timestamp::now(),
        options: request.options.clone(),
    };
    // With persistence the row is handed to the writer inside the admission, before the
    // message is visible to `pump` or its key to a repeat: the writer commits in order, so
    // the turn's `started` mark never precedes the row, and a repeat that waits for the
    // commit waits for the row.
    let row = node.persistence.as_ref().map(|_| QueuedSend {
        ws_id: ws_id.clone(),
        correlation_id: key.clone(),
        message: entry.message.clone(),
        options: serde_json::to_string(&entry.options).unwrap_or_else(|_| "{}".into()),
        state: QueuedState::Queued,
        created: entry.queued_at.clone(),
        updated: entry.queued_at.clone(),
        outcome: String::new(),
    });
    let mut refusal = None;
    let mut not_stored = None;
    let (first, replayed) = node.send_once(Some(&key), &ws_id, || {
        let mut queues = node.queues.queues.lock();
        let q = queues.entry(ws_id.clone()).or_default();
        let waits = !q.is_empty() || ws.is_busy();
        if waits && !request.queue {
            refusal = Some(
                "the workstream is busy; send with \"queue\": true to wait in its queue".into(),
            );
            return NOT_ADMITTED;
        }
        if q.len() >= node.queues.max_per_ws {
            refusal = Some(format!(
                "queue full: {} messages already wait for this workstream (max_queued_sends)",
                q.len()
            ));
            return NOT_ADMITTED;
        }
        if let (Some(p), Some(row)) = (&node.persistence, row)
            && let Err(e) = p.writer.try_write(WriteOp::QueueSend(row))
        {
            not_stored = Some(e);
            return NOT_ADMITTED;
        }
        q.push_back(entry.clone());
        "queued"
    });
    if replayed {
        if first.ws_id != ws_id {
            return Err(ApiError::Conflict {
                message: "correlation_id was already used for another workstream".into(),
                detail: json!({"ws_id": first.ws_id}),
            });
        }
        // The first attempt may still wait for its commit: a repeat is answered only once
        // the message is durable too.
        if let Some(p) = &node.persistence {
            p.writer
                .committed()
                .await
                .map_err(|e| ApiError::Unavailable(format!("message not stored: {e}")))?;
        }
        let status = match node.queues.position(&ws_id, &key) {
            Some(position) => SendReply::queued(position as u64),
            None => SendReply::ok(),
        };
        return Ok(Submitted::Replayed { ws_id, status });
    }
    if let Some(e) = not_stored {
        return Err(ApiError::Unavailable(format!("message not stored: {e}")));
    }
    if let Some(reason) = refusal {
        // As the original: the refusal is also a `busy_error` on the workstream's stream.
        ws.emit_busy_error(format!("Already processing a request: {reason}."));
        return Ok(Submitted::Busy { reason });
    }
    pump(node, &ws_id);
    // The answer waits for the row's commit.
    let stored = match &node.persistence {
        Some(p) => p.writer.committed().await,
        None => Ok(()),
    };
    if let Err(e) = stored {
        // Not durable: not accepted. A message that has not started is withdrawn and its key
        // forgotten (a retry is a new attempt); one that started keeps its key, so a retry
        // is answered, not run again.
        if node.queues.take(&ws_id, &key).is_some() {
            node.forget_send(&key);
        }
        return Err(ApiError::Unavailable(format!("message not stored: {e}")));
    }
    Ok(match node.queues.position(&ws_id, &key) {
        Some(position) => Submitted::Queued { position },
        None if ws.is_closed() => Submitted::Closed,
        None => Submitted::Started,
    })
}

/// Starts the next queued turn of `ws_id` when the workstream is idle. Not while the node
/// drains: a queued message is not in flight, it stays in the store and runs after the
/// restart (the drain waits only for turns already running).
pub fn pump(node: &Node, ws_id: &str) {
    let Some(ws) = node.workstream(ws_id) else {
        discard(node, ws_id);
        return;
    };
    if node.drain.is_draining() {
        return;
    }
    let mut queues = node.queues.queues.lock();
    let Some(q) = queues.get_mut(ws_id) else {
        return;
    };
    let Some(next) = q.front() else {
        queues.remove(ws_id);
        return;
    };
    if ws.is_busy() {
        return;
    }
    next.options.apply(&ws);
    // The turn's span is a child of the current one: this, in the sender's trace.
    let span = tracing::info_span!(
        "start_turn",
        ws_id,
        correlation_id = %next.correlation_id,
        trace_id = tracing::field::Empty
    );
    if let Some(tp) = &next.options.traceparent {
        turnstone_runtime::trace_context::set_parent_from_traceparent(&span, tp);
    }
    turnstone_runtime::trace_context::record_trace_id(&span);
    let sent = span.in_scope(|| ws.send(next.message.clone(), Some(next.correlation_id.clone())));
    match sent {
        SendOutcome::Started { .. } => {
            q.pop_front();
        }
        // Something else (a watch, a compaction) took the turn first: the next
        // `turn_complete` or sweep tries again.
        SendOutcome::Busy => {}
        SendOutcome::Closed if ws.is_closed() => {
            drop(queues);
            discard(node, ws_id);
        }
        // The inbox is full for a moment: try again at the next turn end or sweep.
        SendOutcome::Closed => {}
    }
}

/// Removes one waiting message (`DELETE …/queue/{correlation_id}`). `false` when it does
/// not wait (unknown, or already started).
pub async fn remove(node: &Node, ws_id: &str, correlation_id: &str) -> Result<bool, ApiError> {
    let Some(_removed) = node.queues.take(ws_id, correlation_id) else {
        return Ok(false);
    };
    mark_removed(node, vec![correlation_id.to_string()]).await?;
    Ok(true)
}

/// Empties `ws_id`'s queue (`cancel {"all": true}`); returns how many were removed.
pub async fn clear(node: &Node, ws_id: &str) -> Result<usize, ApiError> {
    let removed = take_queue(node, ws_id);
    let n = removed.len();
    mark_removed(node, removed).await?;
    Ok(n)
}

/// A closed workstream's queue is dropped (its rows marked removed in the background).
fn discard(node: &Node, ws_id: &str) {
    let removed = take_queue(node, ws_id);
    if removed.is_empty() {
        return;
    }
    tracing::warn!(
        ws_id,
        dropped = removed.len(),
        "workstream closed with queued messages; they will not run"
    );
    if let Some(p) = &node.persistence {
        let ops = removed_ops(removed);
        if let Err(e) = p.writer.try_write_all(ops) {
            tracing::error!(error = %e, ws_id, "removal of queued messages not recorded");
        }
    }
}

/// Takes `ws_id`'s whole queue out of memory: the correlation ids it held, next first.
fn take_queue(node: &Node, ws_id: &str) -> Vec<String> {
    node.queues
        .queues
        .lock()
        .remove(ws_id)
        .map(|q| q.into_iter().map(|m| m.correlation_id).collect())
        .unwrap_or_default()
}

fn removed_ops(correlation_ids: Vec<String>) -> Vec<WriteOp> {
    correlation_ids
        .into_iter()
        .map(|correlation_id| WriteOp::QueueState {
            correlation_id,
            state: QueuedState::Removed,
        })
        .collect()
}

async fn mark_removed(node: &Node, correlation_ids: Vec<String>) -> Result<(), ApiError> {
    let Some(p) = &node.persistence else {
        return Ok(());
    };
    if correlation_ids.is_empty() {
        return Ok(());
    }
    let stored = match p.writer.try_write_all(removed_ops(correlation_ids)) {
        Ok(()) => p.writer.committed().await,
        Err(e) => Err(e),
    };
    stored.map_err(|e| ApiError::Unavailable(format!("removal not stored: {e}")))
}

/// The approval rounds and plan reviews an interrupted turn left pending can no longer be
/// decided: each is recorded as denied by `interrupted`, so a reply that arrives later (an
/// approver that saw the request before the node died) is answered `409` with that verdict —
/// settled, not an unknown request.
async fn close_abandoned_rounds(p: &crate::persist::Persistence, ws_id: &str) {
    let pending = match p.store.pending_approvals(ws_id).await {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(%ws_id, error = %e, "pending approvals of an interrupted turn not read");
            return;
        }
    };
    for row in pending {
        let decision = turnstone_store::ApprovalDecision {
            state: turnstone_store::ApprovalState::Denied,
            verdict: String::new(),
            feedback: "The turn was interrupted: its node stopped before this was decided.".into(),
            decided_by: "interrupted".into(),
        };
        if let Err(e) = p.store.decide_approval(&row.request_id, decision).await {
            tracing::warn!(%ws_id, request_id = %row.request_id, error = %e, "abandoned approval not closed");
        }
    }
}

/// After a restart: every stored message that still waits is queued again (its workstream
/// reopened from the store when it is not live) and runs, in order; the correlation ids of
/// recent ones that started or were removed are remembered, so a redelivery runs nothing
/// twice. Rows older than a day that no longer wait are pruned.
pub async fn recover(node: &Arc<Node>) -> Result<usize, ApiError> {
    let Some(p) = &node.persistence else {
        return Ok(0);
    };
    let failed = |e: turnstone_store::StoreError| ApiError::Internal(e.to_string());
    let window = node.options.idempotency_window;
    let since = turnstone_store::timestamp::format_system_time(
        std::time::SystemTime::now()
            .checked_sub(window)
            .unwrap_or(std::time::UNIX_EPOCH),
    );
    match p
        .store
        .prune_queued_sends(&turnstone_store::timestamp::days_ago(1))
        .await
    {
        Ok(n) if n > 0 => tracing::info!(pruned = n, "old queued-send records pruned"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "queued-send pruning failed"),
    }
    let rows = p.store.queued_sends(&since).await.map_err(failed)?;
    let mut waiting = 0;
    let mut interrupted = Vec::new();
    for row in rows {
        if row.state != QueuedState::Queued {
            node.remember_send(&row.correlation_id, &row.ws_id, "ok");
            if row.state == QueuedState::Started {
                interrupted.push(row);
            }
            continue;
        }
        if node.workstream(&row.ws_id).is_none()
            && let Err(e) = crate::server::workstreams::reopen(node, &row.ws_id).await
        {
            // Left stored as `queued`: the next start tries again.
            tracing::error!(ws_id = %row.ws_id, error = ?e, "workstream with queued messages not reopened; they wait in the store");
            continue;
        }
        // A row whose options no longer parse runs with none (approvals stay on) and says so.
        let options = serde_json::from_str(&row.options).unwrap_or_else(|e| {
            tracing::warn!(correlation_id = %row.correlation_id, error = %e, "queued message's options unreadable; it runs without them");
            SendOptions::default()
        });
        node.queues
            .queues
            .lock()
            .entry(row.ws_id.clone())
            .or_default()
            .push_back(QueuedMessage {
                correlation_id: row.correlation_id.clone(),
                message: row.message,
                queued_at: row.created,
                options,
            });
        node.remember_send(&row.correlation_id, &row.ws_id, "queued");
        waiting += 1;
    }
    // A turn the previous run started and never finished ends now, once, as interrupted:
    // it is not run again (its tool calls may have had effects).
    for row in interrupted {
        let ws = match node.workstream(&row.ws_id) {
            Some(ws) => ws,
            None => match crate::server::workstreams::reopen(node, &row.ws_id).await {
                Ok(ws) => ws,
                Err(e) => {
                    tracing::error!(ws_id = %row.ws_id, correlation_id = %row.correlation_id, error = ?e, "interrupted turn not reported: its workstream did not reopen");
                    continue;
                }
            },
        };
        tracing::warn!(ws_id = %row.ws_id, correlation_id = %row.correlation_id, "a turn was interrupted by the node stopping; reported as ended");
        ws.end_interrupted_turn(
            &row.correlation_id,
            "This turn was interrupted: the node stopped before it ended. It was not run again; the workstream's history shows what its tool calls did.",
        )
        .await;
        close_abandoned_rounds(p, &row.ws_id).await;
    }
    let ws_ids: Vec<String> = node.queues.queues.lock().keys().cloned().collect();
    for ws_id in ws_ids {
        pump(node, &ws_id);
    }
    if waiting > 0 {
        tracing::info!(waiting, "queued messages recovered from the store");
    }
    Ok(waiting)
}
