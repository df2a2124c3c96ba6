mod harness;

mod approvals;
mod bad_input;
mod cancel;
mod manager;
mod resilience;
mod turns;
