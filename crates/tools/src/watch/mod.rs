//! Watches: periodic polling of a shell command on behalf of a workstream, whose result is
//! fed back into the conversation when a stop condition holds.
//!
//! This module owns everything about a watch that is not storage, scheduling or delivery:
//! * [`expr`] — the `stop_on` expression language (grammar in its docs);
//! * [`Condition`] — a parsed `stop_on` or change detection, and the [`Trigger`] of a poll;
//! * [`run_poll`] — one poll of the command (timeout, process-group kill, output cap);
//! * [`parse_duration`] — `poll_every` strings;
//! * [`WatchBackend`] — the storage seam the `watch` tool ([`crate::builtin::WatchTool`])
//!   talks to;
//! * [`notice`] — the text injected into the workstream when a watch fires.
//!
//! The node's watch runner schedules polls and delivers notices; the node implements
//! [`WatchBackend`] over its store.

mod backend;
mod condition;
mod duration;
pub mod expr;
mod poll;

pub use backend::{WatchBackend, WatchEntry, WatchRequest};
pub use condition::{Condition, Trigger};
pub use duration::{format_interval, parse_duration};
pub use expr::{EvalError, Expression, ParseError, Value, Vars};
pub use poll::{MAX_OUTPUT_CHARS, PollResult, bound_output, check_command, run_poll};

/// Most active watches per workstream.
pub const MAX_ACTIVE_PER_WORKSTREAM: usize = 5;
/// Shortest poll interval, in seconds.
pub const MIN_INTERVAL_SECS: f64 = 10.0;
/// Longest poll interval, in seconds (24 hours).
pub const MAX_INTERVAL_SECS: f64 = 86_400.0;
/// Poll interval when `poll_every` is not given.
pub const DEFAULT_POLL_EVERY: &str = "5m";
/// Poll budget when `max_polls` is not given.
pub const DEFAULT_MAX_POLLS: i64 = 100;

/// What a fired watch tells its workstream (a synthetic user message):
///
/// ```text
/// [watch 'ci' triggered: condition met]
/// command: gh pr checks 12
/// exit code: 0
/// polls: 3/100
/// condition: "pass" in output
///
/// <output>
/// ```
///
/// The watch is cancelled once this is delivered.
pub fn notice(
    name: &str,
    command: &str,
    stop_on: Option<&str>,
    trigger: &Trigger,
    poll: &PollResult,
    poll_count: i64,
    max_polls: i64,
) -> String {
    let mut text = format!(
        "[watch '{name}' triggered: {}]\ncommand: {command}\nexit code: {}\npolls: {poll_count}/{max_polls}\n",
        trigger.describe(),
        poll.exit_code,
    );
    match stop_on {
        Some(expr) => text.push_str(&format!("condition: {expr}\n")),
        None => text.push_str("mode: fire on output change\n"),
    }
    if *trigger == Trigger::MaxPolls {
        text.push_str("(the watch ran out of polls and is cancelled)\n");
    } else {
        text.push_str("(the watch is cancelled; create a new one to keep watching)\n");
    }
    text.push('\n');
    if poll.output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str(&poll.output);
    }
    text
}
