//! `turnstone-governance`: the governance of tool use, as pure synchronous functions.
//!
//! # What it owns
//! * [`classify`](mod@classify) — the heuristic tier of the intent judge: one gated tool call (function
//!   name, approval label, arguments, workspace) → a risk level, a recommendation, a
//!   confidence and evidence, as the `verdict` of an `approve_request` item (node spec §2.2).
//! * [`guard`] — the output guard: a tool result → the `output_warning` fields (credentials,
//!   prompt-injection markers) and, with redaction on, the text with every secret replaced
//!   by `[REDACTED:<class>]`.
//! * [`policy`] — tool policies (`allow` / `deny` / `ask` on [`fnmatch`] patterns, highest
//!   priority first, first match wins) and [`policy::decide_batch`], the approval order of a
//!   batch (node spec §4.10).
//! * [`posture`] — a workstream's approval posture (`ask`, `auto-review`, `full`) and the
//!   rule by which `auto-review` lets a heuristic verdict approve a call.
//!
//! # What it must not know
//! The engine's turn loop, storage, HTTP, Redis, the clock and the LLM judge: callers pass
//! in what is needed (the workspace root, the policies read from the store, the session's
//! auto-approve settings) and act on what comes back. Wire shapes come from
//! `turnstone-proto` ([`turnstone_proto::sse::Verdict`], `OutputWarning`, `ToolItem`).
//!
//! The engine's approval phase calls [`decide_batch`] and [`classify()`], its output guard
//! (`turnstone-engine`'s `guard.rs`) calls [`assess_output`] on every tool result; see
//! `docs/security.md`, "Governance: what exists, what is wired", for the rest.

pub mod classify;
pub mod fnmatch;
pub mod guard;
pub mod policy;
pub mod posture;
pub mod risk;

pub use classify::{Classification, GatedCall, Workspace, classify};
pub use guard::secrets::{RedactionLabel, redact_secrets};
pub use guard::{OutputAssessment, assess_output};
pub use policy::{
    ApprovalSettings, BLOCKED_BY_TOOL_POLICY, BatchDecision, BatchItem, BatchOutcome, ItemDecision,
    PolicyAction, PolicySet, ToolPolicy, decide_batch,
};
pub use posture::{Posture, qualifies_for_auto_review};
pub use risk::{Recommendation, RiskLevel};
