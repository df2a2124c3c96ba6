//! What a decision is: a user's answer to an approval request or a plan review and the
//! verdicts recorded for them. The lowest engine module (the `plan_resolved` event carries a
//! [`PlanDecision`]); it imports none of the others.

/// A user's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub approved: bool,
    pub feedback: String,
    /// With `approved`: add the batch's approval labels to this workstream's auto-approve set.
    pub always: bool,
}

/// The recorded verdict of an approval request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub request_id: String,
    /// The round's `cycle_id`.
    pub cycle_id: String,
    pub approved: bool,
    pub feedback: String,
    /// `user`, `timeout` or `cancel`.
    pub decided_by: &'static str,
}

/// Result of [`crate::WorkstreamHandle::approve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApproveOutcome {
    /// This decision resolved the pending request.
    Resolved(Verdict),
    /// The round named was decided already (or, naming none, nothing was pending): its
    /// recorded verdict (the last one, naming none), if any.
    NotPending(Option<Verdict>),
    /// The `cycle_id`, `request_id` or `call_id` names no round of this workstream (pending
    /// or among the last decided ones).
    Unknown,
}

/// How a plan review was decided (a wire type: `plan_resolved.decision`).
pub use turnstone_proto::event::PlanDecision;

/// The recorded verdict of one plan review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanVerdict {
    pub request_id: String,
    pub decision: PlanDecision,
    /// The reply as given (trimmed); for a cancel or a timeout, the reason.
    pub feedback: String,
    /// `user`, `timeout` or `cancel`.
    pub decided_by: &'static str,
}

/// Result of [`crate::WorkstreamHandle::plan_feedback`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanOutcome {
    /// This reply decided the pending review.
    Resolved(PlanVerdict),
    /// No review was pending; the last recorded verdict, if any, is returned.
    NotPending(Option<PlanVerdict>),
}
