//! The approval gate of one tool batch: which calls run unasked, which are blocked, and
//! whether a human must be asked — the approval order of node spec §4.10
//! ([`turnstone_governance::decide_batch`]: errors → tool policies → per-tool auto-approve
//! → blanket auto-approve → ask), then the workstream's posture and the heuristic verdicts.
//!
//! * Items a `deny` policy matched get the policy's message as their `error` (so they are
//!   shown as blocked, never run, and the message is their tool result).
//! * If policies resolved every gated item and denied one, the batch is rejected: nothing
//!   that was gated runs, each gets `Blocked by tool policy` as its result.
//! * Unattended (a sub-agent, nobody to ask): gated calls of tools whose metadata says
//!   `auto_approve` (on their plain label) run, the others are denied with
//!   [`UNATTENDED_DENIAL`].
//! * Otherwise every gated item gets a heuristic `verdict`
//!   ([`turnstone_governance::classify`], workspace = the workstream's working directory);
//!   the `auto-review` posture runs the batch unasked when every verdict qualifies
//!   ([`turnstone_governance::qualifies_for_auto_review`]), else a human is asked.
//!
//! A verdict qualifies when [`qualifies_for_auto_review`] says so and its confidence
//! reaches `judge.confidence_threshold` ([`qualifies`]). With `judge.enabled` off no verdicts
//! are made (and `auto-review` asks about everything). When a human is asked and the LLM
//! tier is configured, the turn starts it (`judge.rs`) and the request says
//! `judge_pending: true`.

use std::collections::BTreeSet;
use std::path::Path;

use turnstone_governance::{
    ApprovalSettings, BatchItem, BatchOutcome, GatedCall, ItemDecision, PolicySet, Posture,
    Workspace, classify, decide_batch, qualifies_for_auto_review,
};

use turnstone_proto::sse::Verdict;

use crate::config::JudgeConfig;
use crate::event::ToolItem;

/// The tool result of a call an unattended turn (a sub-agent) could not ask about.
pub(crate) const UNATTENDED_DENIAL: &str = "Error: not run: this tool needs approval and this \
sub-agent runs unattended (tools.subagent_approvals = \"unattended\", \
subagent_auto_approve_all = false). Only tools marked auto-approve run here; finish without it, or say in your final answer what is left for the parent to do.";

/// What the gate needs to know of one call besides its display item.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GateCall<'a> {
    /// The arguments as the model sent them.
    pub arguments: &'a str,
    /// The tool's metadata marks this call safe to run unasked (see `Prep`).
    pub auto_approve_meta: bool,
}

/// One snapshot of the approval settings a batch is decided under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GateSettings<'a> {
    pub policies: &'a PolicySet,
    /// Labels approved "always".
    pub always: &'a BTreeSet<String>,
    /// Blanket auto-approve (`skip_permissions`).
    pub skip_permissions: bool,
    pub posture: Posture,
    pub unattended: bool,
    /// The workstream's working directory (the classifier's workspace root).
    pub cwd: &'a Path,
    /// The judge settings the batch is decided under.
    pub judge: &'a JudgeConfig,
}

/// Whether `verdict` lets the `auto-review` posture run its call unasked: the posture's rule
/// and a confidence of at least `threshold`.
pub(crate) fn qualifies(verdict: &Verdict, threshold: f64) -> bool {
    qualifies_for_auto_review(verdict) && verdict.confidence >= threshold
}

/// What happens to the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GateOutcome {
    /// Nobody is asked: every call without an error runs.
    Run,
    /// Nobody is asked: the calls in [`Gate::pending`] do not run and get this text as
    /// their result; the others without an error run.
    Deny(String),
    /// A human decides on the calls in [`Gate::pending`].
    Ask,
}

/// The gate's decision on a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gate {
    /// Indices of the calls the outcome's denial or question is about.
    pub pending: Vec<usize>,
    pub outcome: GateOutcome,
}

/// Decides a batch (see the module docs). Sets `error` on items a policy denied and
/// `verdict` on the items a human would be asked about.
pub(crate) fn decide(items: &mut [ToolItem], calls: &[GateCall<'_>], s: &GateSettings<'_>) -> Gate {
    let batch: Vec<BatchItem<'_>> = items.iter().map(BatchItem::from).collect();
    let decision = decide_batch(
        &batch,
        &ApprovalSettings {
            policies: s.policies,
            auto_approve_tools: s.always,
            auto_approve: s.skip_permissions || s.posture == Posture::Full,
        },
    );
    let denied: Vec<(usize, String)> = decision
        .policy_errors()
        .map(|(i, m)| (i, m.to_owned()))
        .collect();
    for (i, message) in denied {
        items[i].error = Some(message);
    }
    let indices = |f: fn(&ItemDecision) -> bool| -> Vec<usize> {
        decision
            .items
            .iter()
            .enumerate()
            .filter(|(_, d)| f(d))
            .map(|(i, _)| i)
            .collect()
    };
    match decision.outcome {
        BatchOutcome::Run => Gate {
            pending: Vec::new(),
            outcome: GateOutcome::Run,
        },
        // A denial applies to the whole batch: what a policy allowed does not run either.
        BatchOutcome::Rejected { feedback } => Gate {
            pending: indices(|d| matches!(d, ItemDecision::PolicyAllowed { .. })),
            outcome: GateOutcome::Deny(feedback),
        },
        BatchOutcome::AskHuman => {
            let mut pending = indices(|d| *d == ItemDecision::AwaitsHuman);
            if s.unattended {
                pending.retain(|&i| !calls[i].auto_approve_meta);
                let outcome = if pending.is_empty() {
                    GateOutcome::Run
                } else {
                    GateOutcome::Deny(UNATTENDED_DENIAL.to_owned())
                };
                return Gate { pending, outcome };
            }
            if s.judge.enabled {
                attach_verdicts(items, calls, &pending, s.cwd);
            }
            let threshold = s.judge.confidence_threshold;
            let all_qualify = s.posture == Posture::AutoReview
                && pending.iter().all(|&i| {
                    items[i]
                        .verdict
                        .as_ref()
                        .is_some_and(|v| qualifies(v, threshold))
                });
            let outcome = if all_qualify {
                GateOutcome::Run
            } else {
                GateOutcome::Ask
            };
            Gate { pending, outcome }
        }
    }
}

/// The heuristic tier: one verdict per gated item (the LLM tier starts after the request
/// is out, in `judge.rs`).
fn attach_verdicts(items: &mut [ToolItem], calls: &[GateCall<'_>], pending: &[usize], cwd: &Path) {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let workspace = Workspace::new(cwd, home);
    for &i in pending {
        let item = &items[i];
        let call = GatedCall {
            call_id: &item.call_id,
            func_name: &item.func_name,
            approval_label: &item.approval_label,
            arguments: calls[i].arguments,
        };
        let verdict = classify(&call, &workspace).into_verdict(&call);
        items[i].verdict = Some(verdict);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_governance::{PolicyAction, ToolPolicy};

    fn item(id: &str, func: &str) -> ToolItem {
        ToolItem {
            call_id: id.into(),
            func_name: func.into(),
            approval_label: func.into(),
            needs_approval: true,
            ..ToolItem::default()
        }
    }

    fn policy(id: &str, pattern: &str, action: PolicyAction, priority: i64) -> ToolPolicy {
        ToolPolicy {
            policy_id: id.into(),
            name: id.into(),
            tool_pattern: pattern.into(),
            action,
            priority,
            enabled: true,
        }
    }

    fn settings<'a>(
        policies: &'a PolicySet,
        always: &'a BTreeSet<String>,
        posture: Posture,
    ) -> GateSettings<'a> {
        GateSettings {
            policies,
            always,
            skip_permissions: false,
            posture,
            unattended: false,
            cwd: Path::new("/work/project"),
            judge: Box::leak(Box::new(JudgeConfig::default())),
        }
    }

    const LS: GateCall<'static> = GateCall {
        arguments: r#"{"command":"ls"}"#,
        auto_approve_meta: false,
    };
    const RM: GateCall<'static> = GateCall {
        arguments: r#"{"command":"rm -rf /"}"#,
        auto_approve_meta: false,
    };

    #[test]
    fn asked_items_carry_heuristic_verdicts() {
        let (set, always) = (PolicySet::default(), BTreeSet::new());
        let mut items = [item("a", "bash"), item("b", "bash")];
        let gate = decide(
            &mut items,
            &[RM, LS],
            &settings(&set, &always, Posture::Ask),
        );
        assert_eq!(gate.outcome, GateOutcome::Ask);
        assert_eq!(gate.pending, vec![0, 1]);
        let rm = items[0].verdict.as_ref().expect("verdict");
        assert_eq!(
            (rm.risk_level.as_str(), rm.tier.as_str()),
            ("critical", "heuristic")
        );
        assert_eq!(rm.call_id, "a");
        assert_eq!(
            items[1].verdict.as_ref().map(|v| v.risk_level.as_str()),
            Some("low")
        );
    }

    #[test]
    fn auto_review_runs_only_when_every_item_qualifies() {
        let (set, always) = (PolicySet::default(), BTreeSet::new());
        let mut items = [item("a", "bash")];
        let gate = decide(
            &mut items,
            &[LS],
            &settings(&set, &always, Posture::AutoReview),
        );
        assert_eq!(gate.outcome, GateOutcome::Run);
        let mut items = [item("a", "bash"), item("b", "bash")];
        let gate = decide(
            &mut items,
            &[LS, RM],
            &settings(&set, &always, Posture::AutoReview),
        );
        assert_eq!(gate.outcome, GateOutcome::Ask, "one unqualified item asks");

        // `ls` is low risk with confidence 0.85: a higher threshold asks.
        let strict = JudgeConfig {
            confidence_threshold: 0.9,
            ..JudgeConfig::default()
        };
        let mut s = settings(&set, &always, Posture::AutoReview);
        s.judge = &strict;
        let mut items = [item("a", "bash")];
        assert_eq!(decide(&mut items, &[LS], &s).outcome, GateOutcome::Ask);

        // Judge off: no verdicts, so auto-review asks.
        let off = JudgeConfig {
            enabled: false,
            ..JudgeConfig::default()
        };
        s.judge = &off;
        let mut items = [item("a", "bash")];
        assert_eq!(decide(&mut items, &[LS], &s).outcome, GateOutcome::Ask);
        assert!(items[0].verdict.is_none());
    }

    #[test]
    fn full_posture_approves_but_a_deny_policy_still_blocks() {
        let always = BTreeSet::new();
        let none = PolicySet::default();
        let mut items = [item("a", "bash")];
        let gate = decide(&mut items, &[RM], &settings(&none, &always, Posture::Full));
        assert_eq!(gate.outcome, GateOutcome::Run);
        assert!(items[0].verdict.is_none(), "nothing asked, nothing judged");

        let deny = PolicySet::new([policy("d", "bash", PolicyAction::Deny, 0)]);
        let mut items = [item("a", "bash")];
        let gate = decide(&mut items, &[RM], &settings(&deny, &always, Posture::Full));
        assert_eq!(
            gate.outcome,
            GateOutcome::Deny("Blocked by tool policy".into())
        );
        assert_eq!(
            items[0].error.as_deref(),
            Some("Blocked by tool policy (pattern match for 'bash')")
        );
    }

    #[test]
    fn a_rejected_batch_runs_nothing_that_was_gated() {
        let always = BTreeSet::new();
        let set = PolicySet::new([
            policy("d", "bash", PolicyAction::Deny, 1),
            policy("a", "write_file", PolicyAction::Allow, 0),
        ]);
        let mut items = [item("a", "bash"), item("b", "write_file")];
        let gate = decide(
            &mut items,
            &[RM, LS],
            &settings(&set, &always, Posture::Ask),
        );
        assert_eq!(gate.pending, vec![1]);
        assert!(matches!(gate.outcome, GateOutcome::Deny(_)));
    }

    #[test]
    fn unattended_runs_only_auto_approve_tools() {
        let (set, always) = (PolicySet::default(), BTreeSet::new());
        let mut s = settings(&set, &always, Posture::Ask);
        s.unattended = true;
        let meta = GateCall {
            arguments: "{}",
            auto_approve_meta: true,
        };
        let mut items = [item("a", "recall"), item("b", "bash")];
        let gate = decide(&mut items, &[meta, LS], &s);
        assert_eq!(gate.pending, vec![1]);
        assert_eq!(gate.outcome, GateOutcome::Deny(UNATTENDED_DENIAL.into()));
        let mut items = [item("a", "recall")];
        assert_eq!(decide(&mut items, &[meta], &s).outcome, GateOutcome::Run);
    }
}
