//! Effect receipts of interrupted tool batches (`turnstone_proto::receipt`).
//!
//! A turn's tool batch is tracked from its start: [`Batch`] records which calls started and
//! which printed output, and (through the journal) keeps a durable "started" marker, so the
//! fold can tell every call of a cancelled, denied or timed-out batch what it did — `none`,
//! `unknown`, `partial` or `completed` — and a resume after a crash can tell `none` from
//! `unknown` ([`turnstone_proto::receipt::started_config_key`]).
//!
//! The marker is the session setting `tools_started:{first call id}`: a JSON list of the
//! call ids that started, written as `[]` when the batch opens, rewritten (and committed
//! before the tool runs) when a call starts, and removed when the batch is folded. A batch
//! the node stopped in keeps its marker; the resume reads it.

use std::collections::HashSet;

use parking_lot::Mutex;
use turnstone_proto::receipt::{EffectStatus, Interruption, Receipt, receipt_text};

/// What the open batch's calls did so far (one batch per workstream at a time).
#[derive(Default)]
pub(crate) struct Batch {
    inner: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    /// The marker's key; `None` when no batch is open.
    key: Option<String>,
    started: Vec<String>,
    printed: HashSet<String>,
}

impl Batch {
    /// Opens a batch of `call_ids`; returns the marker key and its first value (`[]`).
    pub fn open(&self, call_ids: &[&str]) -> Option<(String, String)> {
        let key = turnstone_proto::receipt::started_config_key(call_ids.first()?);
        *self.inner.lock() = Open {
            key: Some(key.clone()),
            ..Open::default()
        };
        Some((key, "[]".to_string()))
    }

    /// Records that `call_id` starts; returns the marker's new value to persist.
    pub fn start(&self, call_id: &str) -> Option<(String, String)> {
        let mut open = self.inner.lock();
        open.started.push(call_id.to_string());
        let value = serde_json::to_string(&open.started).unwrap_or_else(|_| "[]".into());
        open.key.clone().map(|key| (key, value))
    }

    /// Records that `call_id` printed output.
    pub fn printed(&self, call_id: &str) {
        let mut open = self.inner.lock();
        if !open.printed.contains(call_id) {
            open.printed.insert(call_id.to_string());
        }
    }

    /// Closes the batch: what it saw, and the marker key to remove.
    pub fn close(&self) -> (Seen, Option<String>) {
        let open = std::mem::take(&mut *self.inner.lock());
        (
            Seen {
                started: open.started.into_iter().collect(),
                printed: open.printed,
            },
            open.key,
        )
    }
}

/// The calls of a closed batch that started, and those that printed output.
#[derive(Default)]
pub(crate) struct Seen {
    started: HashSet<String>,
    printed: HashSet<String>,
}

impl Seen {
    /// The status of a call without a result: `partial` when it started and printed,
    /// `unknown` when it started silently, `none` when it never started.
    pub fn status(&self, call_id: &str) -> EffectStatus {
        match (
            self.started.contains(call_id),
            self.printed.contains(call_id),
        ) {
            (true, true) => EffectStatus::Partial,
            (true, false) => EffectStatus::Unknown,
            (false, _) => EffectStatus::None,
        }
    }
}

/// One call of a folded batch, as the fold decides it.
pub(crate) enum Outcome {
    /// It finished: its real result.
    Finished(String),
    /// It failed before running (a prepare-time error): the error, effect `none`.
    NotRun(String),
    /// It has no result: the reason (a denial, a cancel).
    Missing(String),
}

/// The tool results of a batch and, when any call lacks a real result (the batch was
/// interrupted), one receipt per call. `calls` are `(call id, function name, outcome)` in
/// call order.
pub(crate) fn settle(
    calls: Vec<(String, String, Outcome)>,
    seen: &Seen,
) -> (Vec<(String, String)>, Vec<Receipt>) {
    let interrupted = calls
        .iter()
        .any(|(_, _, o)| matches!(o, Outcome::Missing(_)));
    let mut results = Vec::with_capacity(calls.len());
    let mut receipts = Vec::new();
    for (call_id, func_name, outcome) in calls {
        let (content, status) = match outcome {
            Outcome::Finished(content) => (content, EffectStatus::Completed),
            Outcome::NotRun(error) => (error, EffectStatus::None),
            Outcome::Missing(reason) => {
                let status = seen.status(&call_id);
                // A call stopped while it ran was cancelled, whatever stopped its batch.
                let reason = if status == EffectStatus::None {
                    reason
                } else {
                    CANCELLED.to_string()
                };
                (receipt_text(&reason, status, Interruption::Stopped), status)
            }
        };
        if interrupted {
            receipts.push(Receipt {
                call_id: call_id.clone(),
                func_name,
                status,
            });
        }
        results.push((call_id, content));
    }
    (results, receipts)
}

/// The reason of a call cancelled while it ran (or before it ran, when the turn was).
pub(crate) const CANCELLED: &str = "Cancelled by user.";
