//! A workstream's pending approval rounds (seed 000 "Phase 2": parallel approval cycles).
//!
//! A round is one `approve_request`: the batch of one turn — the workstream's own, or that
//! of a sub-agent asking through its parent workstream (`subagent.rs`) — waiting for one
//! decision. Several sub-agents may each wait at once, so several rounds may be pending on
//! one workstream. Each owns a `cycle_id` (on its `approve_request` and on the
//! `approval_resolved` that ends it), its `request_id` (the bridge's reply list) and its
//! items' `call_id`s; a decision names the round by any of them ([`RoundRef`]), or names
//! none (the original's clients) and takes the oldest pending round.
//!
//! Taking a pending round and recording its verdict happen under one lock, so the first
//! decision wins; a later one is told the recorded verdict (the last [`REMEMBERED`] are
//! kept), and an id that names no round of this workstream is [`Undecided::Unknown`].

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::decision::{Decision, Verdict};
use crate::event::Envelope;

/// How many decided rounds a workstream remembers, to answer a repeated decision with its
/// verdict (older ones: the node's durable record).
pub(crate) const REMEMBERED: usize = 64;

/// Which round a decision is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundRef<'a> {
    /// The oldest pending round (a decision naming none, as the original's clients send).
    Oldest,
    /// The round with this `cycle_id`.
    Cycle(&'a str),
    /// The round with this `request_id`.
    Request(&'a str),
    /// The round one of whose items has this `call_id` (the oldest, if several do).
    Call(&'a str),
}

impl<'a> RoundRef<'a> {
    /// The reference a client's ids make: the first non-empty of `cycle_id`, `request_id`
    /// and `call_id`, else [`RoundRef::Oldest`].
    pub fn from_ids(cycle_id: &'a str, request_id: &'a str, call_id: &'a str) -> Self {
        if !cycle_id.is_empty() {
            Self::Cycle(cycle_id)
        } else if !request_id.is_empty() {
            Self::Request(request_id)
        } else if !call_id.is_empty() {
            Self::Call(call_id)
        } else {
            Self::Oldest
        }
    }

    fn names(&self, cycle_id: &str, request_id: &str, call_ids: &[String]) -> bool {
        match *self {
            Self::Oldest => true,
            Self::Cycle(id) => id == cycle_id,
            Self::Request(id) => id == request_id,
            Self::Call(id) => call_ids.iter().any(|c| c == id),
        }
    }
}

/// One pending round: its ids, its event (re-sent to clients that attach) and where the
/// decision goes.
pub(crate) struct PendingRound {
    pub cycle_id: String,
    pub request_id: String,
    /// The `call_id`s of the round's items, as its event shows them.
    pub call_ids: Vec<String>,
    pub event: Arc<Envelope>,
    pub reply: oneshot::Sender<Decision>,
}

/// Why a decision decided nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undecided {
    /// The round was decided already (or, for [`RoundRef::Oldest`], nothing is pending):
    /// its recorded verdict (`None`: nothing was ever decided).
    Decided(Option<Verdict>),
    /// The id names no round this workstream remembers.
    Unknown,
}

#[derive(Default)]
struct Inner {
    /// In the order they were opened.
    pending: Vec<PendingRound>,
    /// Verdicts of the last decided rounds with their call ids, newest last.
    decided: VecDeque<(Vec<String>, Verdict)>,
}

/// The pending rounds of a workstream and the verdicts of the last decided ones.
#[derive(Default)]
pub(crate) struct Rounds {
    inner: Mutex<Inner>,
}

impl Rounds {
    /// Adds `make`'s round; `make` runs under the lock (it emits the round's event, so no
    /// decision can see the event before the round).
    pub fn open(&self, make: impl FnOnce() -> PendingRound) {
        let mut inner = self.inner.lock();
        let round = make();
        inner.pending.push(round);
    }

    /// Decides the round `which` names: `verdict` builds the verdict, which is recorded;
    /// returns the round and its verdict.
    pub fn decide(
        &self,
        which: RoundRef<'_>,
        verdict: impl FnOnce(&PendingRound) -> Verdict,
    ) -> Result<(PendingRound, Verdict), Undecided> {
        let mut inner = self.inner.lock();
        let found = inner
            .pending
            .iter()
            .position(|r| which.names(&r.cycle_id, &r.request_id, &r.call_ids));
        let Some(index) = found else {
            return Err(inner.recorded(which));
        };
        let round = inner.pending.remove(index);
        let verdict = verdict(&round);
        inner.record(round.call_ids.clone(), verdict.clone());
        Ok((round, verdict))
    }

    /// Decides every pending round (a cancel), oldest first.
    pub fn decide_all(
        &self,
        verdict: impl Fn(&PendingRound) -> Verdict,
    ) -> Vec<(PendingRound, Verdict)> {
        let mut inner = self.inner.lock();
        let rounds = std::mem::take(&mut inner.pending);
        rounds
            .into_iter()
            .map(|round| {
                let v = verdict(&round);
                inner.record(round.call_ids.clone(), v.clone());
                (round, v)
            })
            .collect()
    }

    /// The pending rounds' events, oldest first.
    pub fn pending_events(&self) -> Vec<Arc<Envelope>> {
        let inner = self.inner.lock();
        inner.pending.iter().map(|r| r.event.clone()).collect()
    }

    /// Whether no round is pending.
    pub fn is_empty(&self) -> bool {
        self.inner.lock().pending.is_empty()
    }

    /// The last recorded verdict.
    pub fn last(&self) -> Option<Verdict> {
        self.inner.lock().decided.back().map(|(_, v)| v.clone())
    }
}

impl Inner {
    fn record(&mut self, call_ids: Vec<String>, verdict: Verdict) {
        if self.decided.len() >= REMEMBERED {
            self.decided.pop_front();
        }
        self.decided.push_back((call_ids, verdict));
    }

    /// What a decision of `which` finds when no pending round matches.
    fn recorded(&self, which: RoundRef<'_>) -> Undecided {
        if which == RoundRef::Oldest {
            return Undecided::Decided(self.decided.back().map(|(_, v)| v.clone()));
        }
        self.decided
            .iter()
            .rev()
            .find(|(calls, v)| which.names(&v.cycle_id, &v.request_id, calls))
            .map_or(Undecided::Unknown, |(_, v)| {
                Undecided::Decided(Some(v.clone()))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;

    fn round(
        cycle: &str,
        request: &str,
        calls: &[&str],
    ) -> (PendingRound, oneshot::Receiver<Decision>) {
        let (reply, rx) = oneshot::channel();
        let round = PendingRound {
            cycle_id: cycle.into(),
            request_id: request.into(),
            call_ids: calls.iter().map(|c| c.to_string()).collect(),
            event: Arc::new(Envelope {
                seq: 1,
                ws_id: Arc::from("w"),
                event: Event::Cancelled,
            }),
            reply,
        };
        (round, rx)
    }

    fn verdict(approved: bool) -> impl FnOnce(&PendingRound) -> Verdict {
        move |r| Verdict {
            request_id: r.request_id.clone(),
            cycle_id: r.cycle_id.clone(),
            approved,
            feedback: String::new(),
            decided_by: "user",
        }
    }

    #[test]
    fn each_round_is_decided_by_its_own_ids_once() {
        let rounds = Rounds::default();
        let (a, _ra) = round("ca", "ra", &["x/call_0", "x/call_1"]);
        let (b, _rb) = round("cb", "rb", &["y/call_0"]);
        let (c, _rc) = round("cc", "rc", &["z/call_0"]);
        rounds.open(|| a);
        rounds.open(|| b);
        rounds.open(|| c);
        assert_eq!(rounds.pending_events().len(), 3);

        let (r, v) = rounds
            .decide(RoundRef::Call("y/call_0"), verdict(true))
            .unwrap();
        assert_eq!((r.cycle_id.as_str(), v.approved), ("cb", true));
        let (r, _) = rounds
            .decide(RoundRef::Cycle("cc"), verdict(false))
            .unwrap();
        assert_eq!(r.request_id, "rc");
        // A second decision of a round gets its recorded verdict, by any of its ids.
        for which in [
            RoundRef::Cycle("cb"),
            RoundRef::Request("rb"),
            RoundRef::Call("y/call_0"),
        ] {
            match rounds.decide(which, verdict(false)) {
                Err(Undecided::Decided(Some(v))) => assert!(v.approved && v.cycle_id == "cb"),
                Err(other) => panic!("{which:?}: {other:?}"),
                Ok(_) => panic!("{which:?} decided twice"),
            }
        }
        assert_eq!(
            rounds.decide(RoundRef::Cycle("nope"), verdict(true)).err(),
            Some(Undecided::Unknown)
        );
        // No id: the oldest pending round.
        let (r, _) = rounds.decide(RoundRef::Oldest, verdict(true)).unwrap();
        assert_eq!(r.cycle_id, "ca");
        assert!(rounds.is_empty());
        // Nothing pending: the last verdict.
        match rounds.decide(RoundRef::Oldest, verdict(true)) {
            Err(Undecided::Decided(Some(v))) => assert_eq!(v.cycle_id, "ca"),
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn a_cancel_decides_every_round_and_memory_is_bounded() {
        let rounds = Rounds::default();
        assert_eq!(
            rounds.decide(RoundRef::Oldest, verdict(true)).err(),
            Some(Undecided::Decided(None))
        );
        let mut receivers = Vec::new();
        for i in 0..REMEMBERED + 2 {
            let (r, rx) = round(&format!("c{i}"), &format!("r{i}"), &[]);
            receivers.push(rx);
            rounds.open(|| r);
        }
        let all = rounds.decide_all(|r| verdict(false)(r));
        assert_eq!(all.len(), REMEMBERED + 2);
        assert_eq!(all[0].0.cycle_id, "c0", "oldest first");
        assert!(rounds.is_empty());
        assert_eq!(
            rounds.decide(RoundRef::Cycle("c0"), verdict(true)).err(),
            Some(Undecided::Unknown),
            "forgotten"
        );
        assert!(matches!(
            rounds.decide(RoundRef::Cycle("c5"), verdict(true)),
            Err(Undecided::Decided(Some(_)))
        ));
    }

    #[test]
    fn the_first_non_empty_id_names_the_round() {
        assert_eq!(RoundRef::from_ids("", "", ""), RoundRef::Oldest);
        assert_eq!(RoundRef::from_ids("c", "r", "x"), RoundRef::Cycle("c"));
        assert_eq!(RoundRef::from_ids("", "r", "x"), RoundRef::Request("r"));
        assert_eq!(RoundRef::from_ids("", "", "x"), RoundRef::Call("x"));
    }
}
