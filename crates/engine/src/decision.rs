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
    /// Nothing was pending; the last recorded verdict, if any, is returned.
    NotPending(Option<Verdict>),
}

/// How a plan review was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanDecision {
    /// Empty feedback: the plan stands.
    Accept,
    /// `n`, `no` or `reject` (any case), a cancel or the timeout.
    Reject,
    /// Any other feedback: the planner runs again with it.
    Refine,
}

impl PlanDecision {
    /// The wire name (`accept`, `reject`, `refine`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Reject => "reject",
            Self::Refine => "refine",
        }
    }

    /// What a reply means: `""` accepts, `n`/`no`/`reject` (any case, surrounding blanks
    /// ignored) rejects, anything else refines.
    pub fn classify(feedback: &str) -> Self {
        let reply = feedback.trim();
        if reply.is_empty() {
            Self::Accept
        } else if ["n", "no", "reject"]
            .iter()
            .any(|w| reply.eq_ignore_ascii_case(w))
        {
            Self::Reject
        } else {
            Self::Refine
        }
    }
}

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
