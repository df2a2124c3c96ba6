//! Webhook delivery of `notify` and its per-turn limit.
//!
//! Targets are operator configuration (`[tools.notify.targets.<name>]`), so their URLs are
//! not SSRF-screened; redirects from a webhook are not followed.
//!
//! ## The per-turn limit
//! The limiter keys its counters by the identity of the workstream's shared `read_files` set
//! (held weakly: a dropped workstream frees its entry and its address cannot be reused while
//! the entry lives) and resets a workstream's count when a new turn begins:
//! - inside an engine workstream, [`ToolContext::current_turn`] names the turn (the engine
//!   advances it at each turn start): a call in a later turn than the counted one starts
//!   from 0, so the limit is exactly "per turn";
//! - [`NotifyLimiter::start_turn`] resets a count explicitly (callers without the engine);
//! - without either (turn 0, never started), the counter resets at each new tool-call
//!   **batch**: the engine prepares every call of a batch before executing any, so a
//!   `prepare` after an `execute` of the same workstream starts a new batch.

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;

use crate::tool::ToolContext;

/// A named webhook: `notify` POSTs its JSON payload to `url` with these extra headers.
#[derive(Clone, PartialEq, Eq)]
pub struct NotifyTarget {
    pub name: String,
    pub url: String,
    /// Extra request headers (e.g. `Authorization`); values are never logged.
    pub headers: Vec<(String, String)>,
}

impl NotifyTarget {
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
            headers: Vec::new(),
        }
    }

    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

impl fmt::Debug for NotifyTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("NotifyTarget")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("headers", &names)
            .finish()
    }
}

type ReadSet = Mutex<HashSet<PathBuf>>;

struct Entry {
    key: Weak<ReadSet>,
    sent: usize,
    in_flight: usize,
    executed_since_prepare: bool,
    /// The context's turn the count belongs to (0: no engine turns seen).
    turn: u64,
}

#[derive(Default)]
struct LimiterState {
    turn_driven: bool,
    entries: Vec<Entry>,
}

impl LimiterState {
    fn entry(&mut self, ctx: &ToolContext) -> &mut Entry {
        self.entries.retain(|e| e.key.strong_count() > 0);
        let key = Arc::downgrade(&ctx.read_files);
        let at = match self.entries.iter().position(|e| Weak::ptr_eq(&e.key, &key)) {
            Some(at) => at,
            None => {
                self.entries.push(Entry {
                    key,
                    sent: 0,
                    in_flight: 0,
                    executed_since_prepare: false,
                    turn: 0,
                });
                self.entries.len() - 1
            }
        };
        let entry = &mut self.entries[at];
        let turn = ctx.current_turn();
        if turn != 0 && entry.turn != turn {
            entry.turn = turn;
            entry.sent = 0;
            entry.executed_since_prepare = false;
        }
        entry
    }
}

/// Counts successful notifications per workstream and turn (see the module docs).
#[derive(Clone, Default)]
pub struct NotifyLimiter {
    state: Arc<Mutex<LimiterState>>,
}

impl fmt::Debug for NotifyLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("NotifyLimiter")
            .field("turn_driven", &state.turn_driven)
            .field("workstreams", &state.entries.len())
            .finish()
    }
}

impl NotifyLimiter {
    /// A new turn of the workstream owning `ctx` begins: its count restarts at 0. Once this
    /// has been called, counts reset only here (exact per-turn semantics).
    pub fn start_turn(&self, ctx: &ToolContext) {
        let mut state = self.state.lock();
        state.turn_driven = true;
        let entry = state.entry(ctx);
        entry.sent = 0;
        entry.executed_since_prepare = false;
    }

    /// Successful notifications counted for `ctx`'s workstream in the current turn (batch).
    pub fn sent(&self, ctx: &ToolContext) -> usize {
        self.state.lock().entry(ctx).sent
    }

    /// Called from `notify`'s prepare: without turn signals, a prepare after an execute
    /// starts a new batch.
    pub(crate) fn on_prepare(&self, ctx: &ToolContext) {
        let mut state = self.state.lock();
        if state.turn_driven || ctx.current_turn() != 0 {
            state.entry(ctx);
            return;
        }
        let entry = state.entry(ctx);
        if entry.executed_since_prepare && entry.in_flight == 0 {
            entry.sent = 0;
        }
        entry.executed_since_prepare = false;
    }

    /// Takes one of `limit` slots, or says how many were already used (sent, or being sent
    /// by a parallel call of the same turn).
    pub(crate) fn reserve(&self, ctx: &ToolContext, limit: usize) -> Result<Slot, usize> {
        let mut state = self.state.lock();
        let entry = state.entry(ctx);
        entry.executed_since_prepare = true;
        if entry.sent + entry.in_flight >= limit {
            return Err(entry.sent + entry.in_flight);
        }
        entry.in_flight += 1;
        Ok(Slot {
            limiter: self.clone(),
            key: Arc::downgrade(&ctx.read_files),
            done: false,
        })
    }

    fn settle(&self, key: &Weak<ReadSet>, success: bool) {
        let mut state = self.state.lock();
        if let Some(entry) = state.entries.iter_mut().find(|e| Weak::ptr_eq(&e.key, key)) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            if success {
                entry.sent += 1;
            }
        }
    }
}

/// A reserved notification: counted when [`Slot::succeeded`] is called, released when
/// dropped otherwise (failure or cancellation).
pub(crate) struct Slot {
    limiter: NotifyLimiter,
    key: Weak<ReadSet>,
    done: bool,
}

impl Slot {
    pub(crate) fn succeeded(mut self) {
        self.done = true;
        self.limiter.settle(&self.key, true);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.done {
            self.limiter.settle(&self.key, false);
        }
    }
}

/// Delivers `payload` to the first target that accepts it, retrying each target after the
/// `backoff` waits. `Ok` names the target that accepted; `Err` lists every failure.
pub(crate) async fn deliver(
    targets: &[&NotifyTarget],
    payload: &Value,
    backoff: &[Duration],
    timeout: Duration,
) -> Result<String, Vec<String>> {
    let http = match turnstone_http::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
    {
        Ok(http) => http,
        Err(e) => {
            return Err(vec![format!(
                "cannot build HTTP client: {}",
                turnstone_http::describe(&e)
            )]);
        }
    };
    let mut failures = Vec::new();
    for target in targets {
        match deliver_one(&http, target, payload, backoff).await {
            Ok(()) => return Ok(target.name.clone()),
            Err(e) => failures.push(format!("{}: {e}", target.name)),
        }
    }
    Err(failures)
}

async fn deliver_one(
    http: &reqwest::Client,
    target: &NotifyTarget,
    payload: &Value,
    backoff: &[Duration],
) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..=backoff.len() {
        if attempt > 0 {
            tokio::time::sleep(backoff[attempt - 1]).await;
        }
        let mut request = http.post(&target.url).json(payload);
        for (name, value) in &target.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        match request.send().await {
            Ok(resp) if resp.status().is_success() => return Ok(()),
            Ok(resp) => {
                let status = resp.status();
                let body: String = resp
                    .text()
                    .await
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect();
                last = format!("HTTP {status} {}", body.trim());
                // A client error will not improve with retries (bad URL, auth, payload).
                if status.is_client_error() && !matches!(status.as_u16(), 408 | 429) {
                    return Err(last);
                }
            }
            Err(e) if e.is_builder() => return Err(format!("invalid request: {e}")),
            Err(e) => {
                last = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    last.push_str(": ");
                    last.push_str(&s.to_string());
                    source = s.source();
                }
            }
        }
    }
    Err(format!("{last} (after {} attempts)", backoff.len() + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_turn_resets_the_count_and_only_successes_count() {
        let limiter = NotifyLimiter::default();
        let ctx = ToolContext::new("/");
        assert_eq!(ctx.begin_turn(), 1);
        for _ in 0..4 {
            limiter.reserve(&ctx, 5).ok().unwrap().succeeded();
        }
        // A failed delivery frees its slot.
        drop(limiter.reserve(&ctx, 5).ok().unwrap());
        let held = limiter.reserve(&ctx, 5).ok().unwrap();
        assert_eq!(limiter.reserve(&ctx, 5).err(), Some(5), "sent + in flight");
        held.succeeded();
        assert_eq!(limiter.sent(&ctx), 5);
        // A prepare within the same turn does not reset (unlike the batch fallback).
        limiter.on_prepare(&ctx);
        assert_eq!(limiter.sent(&ctx), 5);
        ctx.begin_turn();
        assert_eq!(limiter.sent(&ctx), 0);
        assert!(limiter.reserve(&ctx, 5).is_ok());
    }
}
