mod harness;

mod approvals;
mod bad_input;
mod cancel;
mod ctx;
mod journal;
mod judge;
mod manager;
mod output_guard;
mod plan;
mod policies;
mod receipts;
mod resilience;
mod skills;
mod subagent;
mod toolset;
mod turns;
