//! A workstream: one tokio task with an inbox that runs turns (`actor`), and the
//! [`WorkstreamHandle`] every frontend uses to drive it (send, approve, cancel, subscribe).
//!
//! Who changes what: the actor task (its turns and compactions) is the one writer of the
//! turn state and of the read model clients see as snapshots; the handle queues commands
//! (`send`, `compact`, `cancel`) to it, sets the client-owned settings, and takes decisions
//! (`approve`, `plan_feedback`) through the decision registers, where the first one wins
//! (see `state.rs`).

mod actor;
mod handle;

pub use crate::state::{
    ActiveSkill, ApproveOutcome, Decision, EventHook, Journal, PreparedTools, RequestOverrides,
    SendOutcome, TOOL_LOADED_CONFIG_KEY, Verdict,
};
pub use handle::WorkstreamHandle;
