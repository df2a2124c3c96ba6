//! Tool policies and the approval order of a batch (node spec §4.10).
//!
//! A policy is an admin rule `tool_pattern → allow | deny | ask` with a priority. Policies
//! are tried highest priority first (ties keep the order given, which the store makes
//! creation order) and the first enabled one that matches decides. Patterns are
//! [`crate::fnmatch`] patterns, matched against the approval label or the function name:
//! `deny` and `ask` match either (a deny on `read_file` also covers the `read_file_outside`
//! label), while `allow` matches the approval label only, so an allow rule never widens
//! past the exact approval it names (`allow read_file` does not allow reads outside the
//! workspace; `allow read_file*` does).
//!
//! [`decide_batch`] applies the spec's order to one batch of tool calls:
//! 1. items with an `error` never run and never need approval;
//! 2. policies, on the items that need approval: `deny` blocks the item (its error becomes
//!    `Blocked by tool policy (pattern match for '<label>')`), `allow` lets it run
//!    unasked, `ask` or no match go on; if policies resolved every such item and any was
//!    denied, the batch is rejected (`Blocked by tool policy`);
//! 3. if every remaining label is in the per-tool auto-approve set, the batch runs;
//! 4. blanket auto-approve runs it, unless a `__budget_override__` item remains;
//! 5. otherwise a human is asked (the denied items still never run).
//!
//! Everything here is pure: no storage, no clock, no I/O.

use std::collections::BTreeSet;

use turnstone_proto::sse::{BUDGET_OVERRIDE_TOOL, ToolItem};

use crate::fnmatch::Pattern;

/// The feedback of a batch rejected because policies denied items and resolved the rest
/// (node spec §4.10).
pub const BLOCKED_BY_TOOL_POLICY: &str = "Blocked by tool policy";

/// What a policy does with a matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyAction {
    /// Runs without asking.
    Allow,
    /// Never runs.
    Deny,
    /// Goes on to the normal approval flow.
    Ask,
}

impl PolicyAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Ask => "ask",
        }
    }

    /// The stored spelling; anything unknown reads as `ask` (as in the original), the only
    /// action that changes nothing.
    pub fn parse_lenient(s: &str) -> Self {
        match s {
            "allow" => Self::Allow,
            "deny" => Self::Deny,
            _ => Self::Ask,
        }
    }

    /// The stored spelling; `None` for anything else (for validating input).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Self::Allow),
            "deny" => Some(Self::Deny),
            "ask" => Some(Self::Ask),
            _ => None,
        }
    }
}

/// One policy, as the decision needs it (a `tool_policies` row without its bookkeeping).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPolicy {
    pub policy_id: String,
    pub name: String,
    pub tool_pattern: String,
    pub action: PolicyAction,
    pub priority: i64,
    pub enabled: bool,
}

/// Policies compiled and ordered for evaluation.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    rules: Vec<(ToolPolicy, Pattern)>,
}

impl PolicySet {
    /// Orders `policies` by priority, highest first (stable: equal priorities keep their
    /// order) and compiles their patterns. Disabled policies are kept but never match.
    pub fn new(policies: impl IntoIterator<Item = ToolPolicy>) -> Self {
        let mut rules: Vec<(ToolPolicy, Pattern)> = policies
            .into_iter()
            .map(|p| {
                let pattern = Pattern::new(&p.tool_pattern);
                (p, pattern)
            })
            .collect();
        rules.sort_by_key(|(p, _)| std::cmp::Reverse(p.priority));
        Self { rules }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The policy that decides a call with this approval label and function name, if any
    /// (see the module docs for what each action matches).
    pub fn evaluate(&self, approval_label: &str, func_name: &str) -> Option<&ToolPolicy> {
        let label = if approval_label.is_empty() {
            func_name
        } else {
            approval_label
        };
        self.rules
            .iter()
            .filter(|(p, _)| p.enabled)
            .find(|(p, pattern)| match p.action {
                PolicyAction::Allow => pattern.matches(label),
                PolicyAction::Deny | PolicyAction::Ask => {
                    pattern.matches(label) || pattern.matches(func_name)
                }
            })
            .map(|(p, _)| p)
    }
}

/// One call of a batch, as the approval order sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchItem<'a> {
    pub call_id: &'a str,
    pub func_name: &'a str,
    /// Empty means the function name.
    pub approval_label: &'a str,
    pub needs_approval: bool,
    /// Set when the call is malformed, unknown or blocked at prepare time.
    pub error: Option<&'a str>,
}

impl<'a> BatchItem<'a> {
    /// `approval_label`, or `func_name` when the label is empty.
    pub fn label(&self) -> &'a str {
        if self.approval_label.is_empty() {
            self.func_name
        } else {
            self.approval_label
        }
    }

    /// Needs a decision: needs approval, names a function, carries no error.
    fn awaits_decision(&self) -> bool {
        self.needs_approval && !self.func_name.is_empty() && self.error.is_none_or(str::is_empty)
    }
}

impl<'a> From<&'a ToolItem> for BatchItem<'a> {
    fn from(item: &'a ToolItem) -> Self {
        Self {
            call_id: &item.call_id,
            func_name: &item.func_name,
            approval_label: &item.approval_label,
            needs_approval: item.needs_approval,
            error: item.error.as_deref(),
        }
    }
}

/// The approval settings of the workstream the batch belongs to.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalSettings<'a> {
    pub policies: &'a PolicySet,
    /// Labels approved "always" (per-tool auto-approve).
    pub auto_approve_tools: &'a BTreeSet<String>,
    /// Blanket auto-approve (`auto_approve`, `--skip-permissions`).
    pub auto_approve: bool,
}

/// What happens to one item of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemDecision {
    /// Rejected at prepare time; never runs, never asked about.
    Errored,
    /// Runs unasked (a read-only tool, or a tool that needs no approval).
    NoApprovalNeeded,
    /// Runs: an `allow` policy matched.
    PolicyAllowed { policy_id: String },
    /// Never runs: a `deny` policy matched. `message` is the item's error and the tool
    /// result the model gets.
    PolicyDenied { policy_id: String, message: String },
    /// Runs: its label is in the per-tool auto-approve set.
    AutoApprovedTool,
    /// Runs: blanket auto-approve.
    AutoApproved,
    /// Runs only if the human approves.
    AwaitsHuman,
}

impl ItemDecision {
    /// The item runs without asking anyone.
    pub fn runs_unasked(&self) -> bool {
        matches!(
            self,
            Self::NoApprovalNeeded
                | Self::PolicyAllowed { .. }
                | Self::AutoApprovedTool
                | Self::AutoApproved
        )
    }
}

/// What happens to the batch as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// No one is asked: send `tool_info`; the items that may run, run.
    Run,
    /// Policies denied items and resolved the rest: send `tool_info`, run nothing that was
    /// denied, resolve the approval with this feedback.
    Rejected { feedback: String },
    /// Send `approve_request` and wait for a human.
    AskHuman,
}

/// The decision on one batch: one [`ItemDecision`] per item, in order, and the outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchDecision {
    pub items: Vec<ItemDecision>,
    pub outcome: BatchOutcome,
}

impl BatchDecision {
    /// The error text of each item denied by a policy: `(index, message)`.
    pub fn policy_errors(&self) -> impl Iterator<Item = (usize, &str)> {
        self.items.iter().enumerate().filter_map(|(i, d)| match d {
            ItemDecision::PolicyDenied { message, .. } => Some((i, message.as_str())),
            _ => None,
        })
    }

    /// The feedback a relay sends when policies deny items of a batch it answers for:
    /// `Blocked by tool policy: a, b` (cluster spec §3.7), each denied label once, in batch
    /// order. `None` when no item was denied.
    pub fn relay_feedback(&self, items: &[BatchItem<'_>]) -> Option<String> {
        let mut denied: Vec<&str> = Vec::new();
        for (i, _) in self.policy_errors() {
            if let Some(item) = items.get(i)
                && !denied.contains(&item.label())
            {
                denied.push(item.label());
            }
        }
        (!denied.is_empty()).then(|| format!("{BLOCKED_BY_TOOL_POLICY}: {}", denied.join(", ")))
    }
}

/// The item error of a call denied by a policy (the original's wording).
pub fn policy_denial_message(label: &str) -> String {
    format!("{BLOCKED_BY_TOOL_POLICY} (pattern match for '{label}')")
}

/// Applies the approval order of node spec §4.10 to a batch (see the module docs).
pub fn decide_batch(items: &[BatchItem<'_>], settings: &ApprovalSettings<'_>) -> BatchDecision {
    // 1. Errors; and what needs no decision at all.
    let mut decisions: Vec<ItemDecision> = items
        .iter()
        .map(|item| {
            if item.error.is_some_and(|e| !e.is_empty()) {
                ItemDecision::Errored
            } else if item.awaits_decision() {
                ItemDecision::AwaitsHuman
            } else {
                ItemDecision::NoApprovalNeeded
            }
        })
        .collect();

    // 2. Policies on the items that await a decision.
    let mut any_denied = false;
    for (item, decision) in items.iter().zip(decisions.iter_mut()) {
        if *decision != ItemDecision::AwaitsHuman {
            continue;
        }
        match settings
            .policies
            .evaluate(item.approval_label, item.func_name)
        {
            Some(policy) if policy.action == PolicyAction::Deny => {
                any_denied = true;
                *decision = ItemDecision::PolicyDenied {
                    policy_id: policy.policy_id.clone(),
                    message: policy_denial_message(item.label()),
                };
            }
            Some(policy) if policy.action == PolicyAction::Allow => {
                *decision = ItemDecision::PolicyAllowed {
                    policy_id: policy.policy_id.clone(),
                };
            }
            _ => {}
        }
    }
    let pending: Vec<usize> = decisions
        .iter()
        .enumerate()
        .filter(|(_, d)| **d == ItemDecision::AwaitsHuman)
        .map(|(i, _)| i)
        .collect();
    if pending.is_empty() {
        let outcome = if any_denied {
            BatchOutcome::Rejected {
                feedback: BLOCKED_BY_TOOL_POLICY.to_owned(),
            }
        } else {
            BatchOutcome::Run
        };
        return BatchDecision {
            items: decisions,
            outcome,
        };
    }

    // 3. Per-tool auto-approve: only when it covers every remaining label.
    let covered = pending
        .iter()
        .all(|&i| settings.auto_approve_tools.contains(items[i].label()));
    if covered {
        for &i in &pending {
            decisions[i] = ItemDecision::AutoApprovedTool;
        }
        return BatchDecision {
            items: decisions,
            outcome: BatchOutcome::Run,
        };
    }

    // 4. Blanket auto-approve, which never covers a budget override.
    let budget_override = pending
        .iter()
        .any(|&i| items[i].func_name == BUDGET_OVERRIDE_TOOL);
    if settings.auto_approve && !budget_override {
        for &i in &pending {
            decisions[i] = ItemDecision::AutoApproved;
        }
        return BatchDecision {
            items: decisions,
            outcome: BatchOutcome::Run,
        };
    }

    // 5. A human decides.
    BatchDecision {
        items: decisions,
        outcome: BatchOutcome::AskHuman,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn item<'a>(call_id: &'a str, func: &'a str, label: &'a str) -> BatchItem<'a> {
        BatchItem {
            call_id,
            func_name: func,
            approval_label: label,
            needs_approval: true,
            error: None,
        }
    }

    fn settings<'a>(
        policies: &'a PolicySet,
        tools: &'a BTreeSet<String>,
        auto: bool,
    ) -> ApprovalSettings<'a> {
        ApprovalSettings {
            policies,
            auto_approve_tools: tools,
            auto_approve: auto,
        }
    }

    #[test]
    fn highest_priority_first_match_wins() {
        let set = PolicySet::new([
            policy("low-allow", "*", PolicyAction::Allow, 0),
            policy("deny-mcp", "mcp__*", PolicyAction::Deny, 10),
            policy(
                "allow-gh-read",
                "mcp__github__get_*",
                PolicyAction::Allow,
                20,
            ),
        ]);
        assert_eq!(
            set.evaluate("mcp__github__get_issue", "mcp__github__get_issue")
                .map(|p| p.policy_id.as_str()),
            Some("allow-gh-read")
        );
        assert_eq!(
            set.evaluate("mcp__github__delete_repo", "mcp__github__delete_repo")
                .map(|p| p.policy_id.as_str()),
            Some("deny-mcp")
        );
        assert_eq!(
            set.evaluate("bash", "bash").map(|p| p.policy_id.as_str()),
            Some("low-allow")
        );
    }

    #[test]
    fn equal_priorities_keep_their_order_and_disabled_policies_never_match() {
        let mut disabled = policy("off", "bash", PolicyAction::Deny, 5);
        disabled.enabled = false;
        let set = PolicySet::new([
            disabled,
            policy("first", "ba*", PolicyAction::Ask, 1),
            policy("second", "bash", PolicyAction::Deny, 1),
        ]);
        assert_eq!(
            set.evaluate("bash", "bash").map(|p| p.policy_id.as_str()),
            Some("first")
        );
    }

    #[test]
    fn deny_matches_the_function_name_but_allow_needs_the_label() {
        let deny = PolicySet::new([policy("d", "read_file", PolicyAction::Deny, 0)]);
        assert!(deny.evaluate("read_file_outside", "read_file").is_some());
        let allow = PolicySet::new([policy("a", "read_file", PolicyAction::Allow, 0)]);
        assert!(allow.evaluate("read_file_outside", "read_file").is_none());
        assert!(
            allow.evaluate("", "read_file").is_some(),
            "an empty label is the function name"
        );
        let wide = PolicySet::new([policy("w", "read_file*", PolicyAction::Allow, 0)]);
        assert!(wide.evaluate("read_file_outside", "read_file").is_some());
    }

    #[test]
    fn unknown_actions_read_as_ask() {
        assert_eq!(PolicyAction::parse_lenient("block"), PolicyAction::Ask);
        assert_eq!(PolicyAction::parse("block"), None);
        for a in [PolicyAction::Allow, PolicyAction::Deny, PolicyAction::Ask] {
            assert_eq!(PolicyAction::parse(a.as_str()), Some(a));
        }
    }

    #[test]
    fn errors_come_first_and_are_never_asked_about() {
        let set = PolicySet::new([policy("d", "*", PolicyAction::Deny, 0)]);
        let tools = BTreeSet::new();
        let mut broken = item("c1", "bash", "bash");
        broken.error = Some("JSON parse error: x");
        let d = decide_batch(&[broken], &settings(&set, &tools, false));
        assert_eq!(d.items, vec![ItemDecision::Errored]);
        assert_eq!(d.outcome, BatchOutcome::Run);
    }

    #[test]
    fn items_without_approval_are_not_subject_to_policies() {
        let set = PolicySet::new([policy("d", "*", PolicyAction::Deny, 0)]);
        let tools = BTreeSet::new();
        let mut read = item("c1", "read_file", "read_file");
        read.needs_approval = false;
        let d = decide_batch(&[read], &settings(&set, &tools, false));
        assert_eq!(d.items, vec![ItemDecision::NoApprovalNeeded]);
        assert_eq!(d.outcome, BatchOutcome::Run);
    }

    #[test]
    fn all_resolved_by_policy_with_a_denial_rejects_the_batch() {
        let set = PolicySet::new([
            policy("d", "bash", PolicyAction::Deny, 1),
            policy("a", "write_file", PolicyAction::Allow, 0),
        ]);
        let tools = BTreeSet::new();
        let items = [
            item("c1", "bash", "bash"),
            item("c2", "write_file", "write_file"),
            item("c3", "bash", "bash"),
        ];
        let d = decide_batch(&items, &settings(&set, &tools, true));
        assert_eq!(
            d.items,
            vec![
                ItemDecision::PolicyDenied {
                    policy_id: "d".into(),
                    message: "Blocked by tool policy (pattern match for 'bash')".into()
                },
                ItemDecision::PolicyAllowed {
                    policy_id: "a".into()
                },
                ItemDecision::PolicyDenied {
                    policy_id: "d".into(),
                    message: "Blocked by tool policy (pattern match for 'bash')".into()
                },
            ]
        );
        assert_eq!(
            d.outcome,
            BatchOutcome::Rejected {
                feedback: "Blocked by tool policy".into()
            }
        );
        assert_eq!(
            d.relay_feedback(&items).as_deref(),
            Some("Blocked by tool policy: bash")
        );
        assert_eq!(
            d.policy_errors().map(|(i, _)| i).collect::<Vec<_>>(),
            vec![0, 2]
        );
    }

    #[test]
    fn a_denial_beside_pending_items_still_asks_for_the_rest() {
        let set = PolicySet::new([policy("d", "mcp__*", PolicyAction::Deny, 0)]);
        let tools = BTreeSet::new();
        let items = [
            item("c1", "mcp__gh__delete", "mcp__gh__delete"),
            item("c2", "bash", "bash"),
        ];
        let d = decide_batch(&items, &settings(&set, &tools, false));
        assert!(matches!(d.items[0], ItemDecision::PolicyDenied { .. }));
        assert_eq!(d.items[1], ItemDecision::AwaitsHuman);
        assert_eq!(d.outcome, BatchOutcome::AskHuman);
        assert_eq!(
            d.relay_feedback(&items).as_deref(),
            Some("Blocked by tool policy: mcp__gh__delete")
        );
    }

    #[test]
    fn policies_come_before_auto_approve() {
        // Blanket auto-approve does not override a deny.
        let set = PolicySet::new([policy("d", "bash", PolicyAction::Deny, 0)]);
        let tools: BTreeSet<String> = ["bash".to_owned()].into();
        let d = decide_batch(&[item("c1", "bash", "bash")], &settings(&set, &tools, true));
        assert!(matches!(d.outcome, BatchOutcome::Rejected { .. }));
        // `ask` changes nothing: the per-tool set still approves.
        let ask = PolicySet::new([policy("q", "bash", PolicyAction::Ask, 0)]);
        let d = decide_batch(
            &[item("c1", "bash", "bash")],
            &settings(&ask, &tools, false),
        );
        assert_eq!(d.items, vec![ItemDecision::AutoApprovedTool]);
        assert_eq!(d.outcome, BatchOutcome::Run);
    }

    #[test]
    fn per_tool_auto_approve_needs_every_remaining_label() {
        let set = PolicySet::default();
        let tools: BTreeSet<String> = ["bash".to_owned()].into();
        let items = [
            item("c1", "bash", "bash"),
            item("c2", "write_file", "overwrite_file"),
        ];
        let d = decide_batch(&items, &settings(&set, &tools, false));
        assert_eq!(
            d.items,
            vec![ItemDecision::AwaitsHuman, ItemDecision::AwaitsHuman]
        );
        assert_eq!(d.outcome, BatchOutcome::AskHuman);
        // The label, not the function name, is what the set holds.
        let tools: BTreeSet<String> = ["bash".to_owned(), "write_file".to_owned()].into();
        let d = decide_batch(&items, &settings(&set, &tools, false));
        assert_eq!(d.outcome, BatchOutcome::AskHuman);
        let tools: BTreeSet<String> = ["bash".to_owned(), "overwrite_file".to_owned()].into();
        let d = decide_batch(&items, &settings(&set, &tools, false));
        assert_eq!(
            d.items,
            vec![
                ItemDecision::AutoApprovedTool,
                ItemDecision::AutoApprovedTool
            ]
        );
    }

    #[test]
    fn blanket_auto_approve_never_covers_a_budget_override() {
        let set = PolicySet::default();
        let tools = BTreeSet::new();
        let items = [
            item("c1", "bash", "bash"),
            item("c2", BUDGET_OVERRIDE_TOOL, BUDGET_OVERRIDE_TOOL),
        ];
        let d = decide_batch(&items, &settings(&set, &tools, true));
        assert_eq!(d.outcome, BatchOutcome::AskHuman);
        let d = decide_batch(&items[..1], &settings(&set, &tools, true));
        assert_eq!(d.items, vec![ItemDecision::AutoApproved]);
        assert!(d.items[0].runs_unasked());
        // A policy may still allow the override explicitly.
        let allow = PolicySet::new([policy("a", BUDGET_OVERRIDE_TOOL, PolicyAction::Allow, 0)]);
        let d = decide_batch(&items, &settings(&allow, &tools, true));
        assert_eq!(d.outcome, BatchOutcome::Run);
    }

    #[test]
    fn nothing_to_decide_runs() {
        let set = PolicySet::default();
        let tools = BTreeSet::new();
        let d = decide_batch(&[], &settings(&set, &tools, false));
        assert_eq!(d.outcome, BatchOutcome::Run);
        let proto_item = ToolItem {
            call_id: "c".into(),
            func_name: "bash".into(),
            needs_approval: true,
            ..ToolItem::default()
        };
        let d = decide_batch(
            &[BatchItem::from(&proto_item)],
            &settings(&set, &tools, false),
        );
        assert_eq!(d.outcome, BatchOutcome::AskHuman);
    }
}
