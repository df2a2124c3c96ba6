//! Ordered, resumable logs: a bounded ring of recent entries plus a broadcast to live
//! subscribers. Each workstream has one ([`EventLog`]); a node keeps one more over all its
//! workstreams (any `T` that knows its own [`Sequenced::seq`]).
//!
//! A subscriber resumes from any `seq` still in the ring, and is told explicitly when events it asked for are gone ([`Item::Truncated`]) — never a silent gap.
//! Slow subscribers never slow the writer: the broadcast drops for them, and they recover
//! from the ring on their next read (or learn of the truncation).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use tokio::sync::broadcast;

use crate::event::Envelope;

/// An entry that carries its position in a log.
pub trait Sequenced: Send + Sync + 'static {
    fn seq(&self) -> u64;
}

impl Sequenced for Envelope {
    fn seq(&self) -> u64 {
        self.seq
    }
}

struct Ring<T> {
    next_seq: u64,
    events: VecDeque<Arc<T>>,
}

/// A bounded, ordered, resumable log of `T` (by default workstream events).
pub struct EventLog<T: Sequenced = Envelope> {
    capacity: usize,
    ring: Mutex<Ring<T>>,
    live: broadcast::Sender<Arc<T>>,
    truncations: AtomicU64,
}

impl<T: Sequenced> std::fmt::Debug for EventLog<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("capacity", &self.capacity)
            .field("last_seq", &self.last_seq())
            .finish()
    }
}

/// What a subscriber reads next.
#[derive(Debug, Clone, PartialEq)]
pub enum Item<T = Envelope> {
    Event(Arc<T>),
    /// Entries `from..=to` are no longer retained; the next item follows `to`.
    Truncated {
        from: u64,
        to: u64,
    },
}

impl<T: Sequenced> EventLog<T> {
    /// `capacity` entries are retained for resumption; the live channel holds `live_capacity`
    /// entries per subscriber before it lags (and then recovers from the ring).
    pub fn new(capacity: usize, live_capacity: usize) -> Self {
        let (live, _) = broadcast::channel(live_capacity.max(1));
        Self {
            capacity: capacity.max(1),
            ring: Mutex::new(Ring {
                next_seq: 1,
                events: VecDeque::new(),
            }),
            live,
            truncations: AtomicU64::new(0),
        }
    }

    /// Makes an empty log continue a numbering that ended at `last_seq` (a workstream
    /// rehydrated from hibernation keeps its `seq`s, so a client's `Last-Event-ID` from
    /// before still means what it meant). A no-op once an entry was pushed.
    pub fn continue_after(&self, last_seq: u64) {
        let mut ring = self.ring();
        if ring.events.is_empty() && ring.next_seq == 1 {
            ring.next_seq = last_seq + 1;
        }
    }

    fn ring(&self) -> MutexGuard<'_, Ring<T>> {
        self.ring.lock()
    }

    /// Appends the entry `make` builds from the next `seq`. Never blocks on subscribers.
    pub fn push_with(&self, make: impl FnOnce(u64) -> T) -> Arc<T> {
        self.push_then(make, |_| {})
    }

    /// Like [`push_with`](Self::push_with), and runs `then` with the new entry before the
    /// next entry can be pushed: hooks that forward entries elsewhere (a node-wide log) see
    /// them in `seq` order.
    pub fn push_then(&self, make: impl FnOnce(u64) -> T, then: impl FnOnce(&Arc<T>)) -> Arc<T> {
        let mut ring = self.ring();
        let env = Arc::new(make(ring.next_seq));
        debug_assert_eq!(
            env.seq(),
            ring.next_seq,
            "an entry must carry the seq it was given"
        );
        ring.next_seq += 1;
        if ring.events.len() == self.capacity {
            ring.events.pop_front();
        }
        ring.events.push_back(env.clone());
        // Sent under the lock so that subscribe() sees either the ring or the channel copy.
        let _ = self.live.send(env.clone());
        then(&env);
        env
    }

    /// The `seq` of the newest event (0 when empty).
    pub fn last_seq(&self) -> u64 {
        self.ring().next_seq - 1
    }

    /// How many times a subscriber was told that events it wanted are gone (it fell further
    /// behind than the ring holds, or resumed from a `seq` too old).
    pub fn truncation_count(&self) -> u64 {
        self.truncations.load(Ordering::Relaxed)
    }

    /// Subscribes to events after `after` (`None` = only new events; `Some(0)` = everything
    /// retained).
    pub fn subscribe(self: &Arc<Self>, after: Option<u64>) -> Subscription<T> {
        let ring = self.ring();
        let last = ring.next_seq - 1;
        let rx = self.live.subscribe();
        let position = after.unwrap_or(last).min(last);
        drop(ring);
        Subscription {
            log: self.clone(),
            rx,
            position,
        }
    }

    /// Retained entries with `seq > after` (at most `limit`), and the truncation gap if
    /// some are missing. Bounded by `limit`, so a reader catching up one entry at a time
    /// costs O(1) per entry, not O(backlog).
    fn read_after(&self, after: u64, limit: usize) -> (Option<(u64, u64)>, Vec<Arc<T>>) {
        let ring = self.ring();
        let first = ring
            .events
            .front()
            .map(|e| e.seq())
            .unwrap_or(ring.next_seq);
        let gap = (after + 1 < first).then(|| (after + 1, first - 1));
        if gap.is_some() {
            self.truncations.fetch_add(1, Ordering::Relaxed);
        }
        let start = (after + 1).max(first);
        let skip = (start - first) as usize;
        let entries = if skip < ring.events.len() {
            ring.events.range(skip..).take(limit).cloned().collect()
        } else {
            Vec::new()
        };
        (gap, entries)
    }
}

/// A position in an [`EventLog`]. Reads are in `seq` order with no duplicates.
pub struct Subscription<T: Sequenced = Envelope> {
    log: Arc<EventLog<T>>,
    rx: broadcast::Receiver<Arc<T>>,
    position: u64,
}

impl<T: Sequenced> std::fmt::Debug for Subscription<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("position", &self.position)
            .finish()
    }
}

impl<T: Sequenced> Subscription<T> {
    /// The `seq` of the last item handed out.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Everything already available, without waiting (a resuming client's backlog).
    pub fn backlog(&mut self) -> Vec<Item<T>> {
        let (gap, events) = self.log.read_after(self.position, usize::MAX);
        let mut out = Vec::with_capacity(events.len() + 1);
        if let Some((from, to)) = gap {
            out.push(Item::Truncated { from, to });
            self.position = to;
        }
        for e in events {
            self.position = e.seq();
            out.push(Item::Event(e));
        }
        out
    }

    /// The next item; waits for a new event. Returns `None` when the log is gone.
    pub async fn next(&mut self) -> Option<Item<T>> {
        loop {
            // Anything retained beyond our position (after a lag, or events published
            // between subscribe and the first recv) comes from the ring first.
            if self.log.last_seq() > self.position {
                let (gap, events) = self.log.read_after(self.position, 1);
                if let Some((from, to)) = gap {
                    self.position = to;
                    return Some(Item::Truncated { from, to });
                }
                if let Some(e) = events.into_iter().next() {
                    self.position = e.seq();
                    return Some(Item::Event(e));
                }
            }
            match self.rx.recv().await {
                Ok(env) => {
                    if env.seq() == self.position + 1 {
                        self.position = env.seq();
                        return Some(Item::Event(env));
                    }
                    // Older than our position: already delivered from the ring; newer:
                    // the loop re-reads the ring.
                }
                // Fell behind the live channel: the loop re-reads the ring.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;

    fn info(n: u64) -> Event {
        Event::Info {
            message: n.to_string(),
        }
    }

    fn log(capacity: usize, live: usize) -> Arc<EventLog> {
        Arc::new(EventLog::new(capacity, live))
    }

    impl EventLog {
        fn push(&self, event: Event) -> Arc<Envelope> {
            self.push_with(|seq| Envelope {
                seq,
                ws_id: "ws".into(),
                event,
            })
        }
    }

    fn seqs(items: &[Item]) -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                Item::Event(e) => e.seq.to_string(),
                Item::Truncated { from, to } => format!("gap{from}-{to}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn resume_returns_exactly_the_missed_events() {
        let log = log(100, 16);
        for n in 1..=5 {
            log.push(info(n));
        }
        let mut sub = log.subscribe(Some(2));
        assert_eq!(seqs(&sub.backlog()), ["3", "4", "5"]);
        log.push(info(6));
        match sub.next().await {
            Some(Item::Event(e)) => assert_eq!(e.seq, 6),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_continued_log_resumes_exactly_or_reports_the_gap() {
        let log = log(100, 16);
        log.continue_after(7);
        log.push(info(8));
        assert_eq!(log.last_seq(), 8);
        // A client that saw everything up to 7 gets exactly what followed.
        assert_eq!(seqs(&log.subscribe(Some(7)).backlog()), ["8"]);
        // One that saw less is told what is gone (it was in the earlier incarnation).
        assert_eq!(seqs(&log.subscribe(Some(5)).backlog()), ["gap6-7", "8"]);
        log.continue_after(100);
        assert_eq!(log.last_seq(), 8, "ignored once entries exist");
    }

    #[tokio::test]
    async fn resume_beyond_the_ring_reports_truncation() {
        let log = log(3, 16);
        for n in 1..=10 {
            log.push(info(n));
        }
        let mut sub = log.subscribe(Some(2));
        assert_eq!(seqs(&sub.backlog()), ["gap3-7", "8", "9", "10"]);
    }

    #[tokio::test]
    async fn a_lagging_subscriber_recovers_from_the_ring_without_gaps() {
        let log = log(1000, 2);
        let mut sub = log.subscribe(None);
        for n in 1..=50 {
            log.push(info(n));
        }
        let mut got = Vec::new();
        for _ in 0..50 {
            match sub.next().await {
                Some(Item::Event(e)) => got.push(e.seq),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(got, (1..=50).collect::<Vec<_>>());
        log.push(info(51));
        match sub.next().await {
            Some(Item::Event(e)) => assert_eq!(e.seq, 51),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(log.truncation_count(), 0, "nothing was lost");
    }

    #[tokio::test]
    async fn a_subscriber_too_slow_for_the_ring_is_told_what_it_lost() {
        let log = log(4, 2);
        let mut sub = log.subscribe(None);
        for n in 1..=20 {
            log.push(info(n));
        }
        let first = sub.next().await.unwrap();
        assert_eq!(first, Item::Truncated { from: 1, to: 16 });
        assert_eq!(log.truncation_count(), 1);
        match sub.next().await {
            Some(Item::Event(e)) => assert_eq!(e.seq, 17),
            other => panic!("unexpected {other:?}"),
        }
    }
}
