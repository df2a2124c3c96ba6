mod harness;

mod approvals;
mod bad_input;
mod cancel;
mod ctx;
mod journal;
mod manager;
mod resilience;
mod toolset;
mod turns;
