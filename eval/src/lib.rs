//! # turnstone-eval
//!
//! A headless evaluation harness: it runs a **suite** of cases — a prompt or a multi-turn
//! task, optional fixture files — through the real engine and the built-in tools, each case
//! in its own throwaway workspace with a null UI (nobody is asked: the case's approval
//! policy decides), scores every case with its **checks** (exact, contains, regex, tool-call
//! expectations, workspace files, an LLM judge) and reports JSON and a table. Given a second
//! model or system prompt it runs the suite on both and compares them case by case (A/B).
//!
//! * [`suite`] — the suite file (TOML or JSON), checked with errors that name the field;
//! * [`runner`] — running a suite against one [`runner::Variant`]: workspace, engine,
//!   turns, time limit, retries;
//! * [`checks`] — scoring the local checks; [`judge`] — the judge model's verdicts;
//! * [`report`] — the report, the A/B comparison, the table and the threshold verdict.
//!
//! It drives workstreams only through the engine's public handle, like every frontend; it
//! must not know the HTTP API, storage or Redis. The model connection is the node's
//! ([`turnstone_node::backend::connect_target`]). See `docs/eval.md`.

pub mod checks;
pub mod judge;
pub mod report;
pub mod runner;
pub mod suite;

pub use judge::JudgeModel;
pub use report::Report;
pub use runner::{RunOptions, Variant, run_suite};
pub use suite::{Suite, SuiteError};
