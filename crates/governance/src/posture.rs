//! Approval postures of a workstream and the auto-review rule.
//!
//! * `ask` (the default): what the approval order (node spec §4.10) leaves undecided goes to
//!   a human.
//! * `auto-review`: the heuristic verdicts decide what they can, conservatively: a batch runs
//!   unasked only when **every** item that would go to a human has a verdict that
//!   [`qualifies_for_auto_review`] (recommendation `approve` *and* risk `low`/`none`, and not
//!   a budget override). One item that does not qualify sends the whole batch to the human
//!   prompt, as in the original's smart approvals (partial or mixed qualification falls
//!   back to the prompt).
//! * `full`: everything is approved, like blanket auto-approve (`skip_permissions`); tool
//!   policies still apply first (a `deny` still blocks). Setting it is an operator's
//!   decision: the node requires the approve scope.

use turnstone_proto::sse::{BUDGET_OVERRIDE_TOOL, Verdict};

use crate::risk::{Recommendation, RiskLevel};

/// How a workstream's gated tool calls are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Posture {
    #[default]
    Ask,
    AutoReview,
    Full,
}

impl Posture {
    pub const ALL: [Self; 3] = [Self::Ask, Self::AutoReview, Self::Full];

    /// The wire spelling: `ask`, `auto-review`, `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::AutoReview => "auto-review",
            Self::Full => "full",
        }
    }

    /// The wire spelling; `None` for anything else (surrounding blanks are ignored).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s.trim())
    }
}

impl std::fmt::Display for Posture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a verdict lets the `auto-review` posture run its call unasked: recommendation
/// `approve` and risk `low` (or `none`); a budget override never qualifies.
pub fn qualifies_for_auto_review(verdict: &Verdict) -> bool {
    let risk_ok = matches!(
        RiskLevel::parse(&verdict.risk_level),
        Some(RiskLevel::Low | RiskLevel::None)
    );
    let approve = verdict.recommendation == Recommendation::Approve.as_str();
    risk_ok && approve && verdict.func_name != BUDGET_OVERRIDE_TOOL
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(risk: &str, rec: &str, func: &str) -> Verdict {
        Verdict {
            func_name: func.into(),
            risk_level: risk.into(),
            recommendation: rec.into(),
            ..Verdict::default()
        }
    }

    #[test]
    fn postures_round_trip_and_unknown_spellings_are_refused() {
        for p in Posture::ALL {
            assert_eq!(Posture::parse(p.as_str()), Some(p));
        }
        assert_eq!(Posture::parse(" full "), Some(Posture::Full));
        assert_eq!(Posture::parse("auto_review"), None);
        assert_eq!(Posture::parse(""), None);
        assert_eq!(Posture::default(), Posture::Ask);
    }

    #[test]
    fn only_low_risk_approvals_qualify() {
        assert!(qualifies_for_auto_review(&verdict(
            "low", "approve", "bash"
        )));
        assert!(qualifies_for_auto_review(&verdict(
            "none", "approve", "bash"
        )));
        assert!(!qualifies_for_auto_review(&verdict(
            "medium", "approve", "bash"
        )));
        assert!(!qualifies_for_auto_review(&verdict(
            "low", "review", "bash"
        )));
        assert!(!qualifies_for_auto_review(&verdict(
            "critical", "deny", "bash"
        )));
        assert!(!qualifies_for_auto_review(&verdict(
            "bogus", "approve", "bash"
        )));
        assert!(!qualifies_for_auto_review(&verdict(
            "low",
            "approve",
            BUDGET_OVERRIDE_TOOL
        )));
    }
}
