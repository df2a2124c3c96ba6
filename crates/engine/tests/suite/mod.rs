mod harness;

mod approvals;
mod bad_input;
mod cancel;
mod ctx;
mod journal;
mod manager;
mod plan;
mod policies;
mod resilience;
mod skills;
mod subagent;
mod toolset;
mod turns;
