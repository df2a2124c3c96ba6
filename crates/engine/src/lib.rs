//! # turnstone-engine
//!
//! Owns workstreams and the turn loop. A workstream is a tokio task with an inbox
//! ([`WorkstreamHandle`]); its turn goes *build messages → stream → prepare → approve →
//! execute → fold → loop* (see `turn.rs`), emitting [`Event`]s with a monotonic `seq` into a
//! bounded, resumable [`EventLog`]. Frontends — the terminal client, the HTTP server, tests —
//! are all the same thing to the engine: they subscribe to the log and call the handle
//! (`send`, `approve`, `cancel`). The [`Manager`] creates, lists, evicts and closes
//! workstreams.
//!
//! It talks to models through `turnstone-llm` ([`turnstone_llm::Resilient`]) and to tools
//! through `turnstone-tools` ([`turnstone_tools::ToolRegistry`]). It must not know axum,
//! Redis or the HTTP API.
//!
//! Tools: each workstream stores a tool *intent* ([`turnstone_tools::toolset::ToolIntent`]),
//! never a list. At the start of every turn it is expanded against the live registry into a
//! [`turnstone_tools::toolset::ToolSurface`] that stays frozen for the turn: the request's
//! tool array (resident tools, tools loaded by `tool_search`, `tool_search` itself), the
//! deferred catalog appended to the system prompt, and dispatch by exact name against every
//! available tool (deferred ones and replay-only aliases included). The latest request's
//! array is kept for inspection ([`WorkstreamHandle::prepared_tools`]).
//!
//! Skills: a workstream may have an active skill ([`ActiveSkill`], set with
//! [`WorkstreamHandle::set_skill`]); its rendered content joins the system prompt of every
//! request after the engine's prompt, and its request settings ([`RequestOverrides`]: model,
//! temperature, `max_tokens`, reasoning effort; [`WorkstreamHandle::set_skill_with`]) win
//! over the engine's while it is active. Where skills are stored, and persisting the
//! choice, is the node's business.
//!
//! States: `idle → thinking → running → attention → running → … → idle | error`.

// Modules from the bottom up (docs/architecture.md, "Module layers"): a module imports only
// modules declared above it. The types first (wire events, the log, settings, decisions,
// the workstream's state types), then the engine, a workstream's shared context, the turn
// and what runs turns, and the workstream (its actor and handle) and the manager on top.
pub mod config;
mod decision;
pub mod event;
pub mod guard_stats;
pub mod log;

mod receipt;
mod rounds;
mod state;

mod engine;

mod models;
mod shared;

mod guard;

mod compact;
mod review;

mod gate;
mod judge;
mod turn;
mod vision;

pub mod subagent;

pub mod plan;

mod title;

pub mod workstream;

pub mod manager;

pub use compact::SUMMARY_MARKER;
pub use config::{
    EngineConfig, JudgeConfig, LlmJudge, ManagerConfig, OutputGuard, SubagentApprovals,
};
pub use engine::{Engine, SystemSection};
pub use event::{Envelope, Event, StatusInfo, ToolItem, WsState};
pub use guard_stats::{GUARD_FLAGS, OTHER_FLAG, OutputGuardCounts};
pub use judge::JUDGE_APPROVAL;
pub use log::{EventLog, Item, Sequenced, Subscription};
pub use manager::{
    Closed, CreateOptions, HibernateHook, Hibernated, Listed, Manager, ManagerError,
};
pub use models::{MODEL_CONFIG_KEY, ModelError};
pub use plan::{MAX_REFINEMENTS, PLAN_AGENT, PlanAgentTool, register_plan_agent};
pub use rounds::RoundRef;
pub use state::{
    ActiveSkill, ApproveOutcome, Decision, EventHook, Journal, ModelCall, ModelChoice,
    POSTURE_CONFIG_KEY, PlanDecision, PlanOutcome, PlanVerdict, PreparedTools, RequestOverrides,
    SendOutcome, TOOL_LOADED_CONFIG_KEY, TitleHook, Verdict,
};
pub use subagent::{AgentModel, TaskAgentTool, register_subagent, register_subagent_with};
pub use turnstone_proto::receipt::{EffectStatus, Receipt};
pub use workstream::WorkstreamHandle;

// Ids come from the wire contract's one id module (lengths documented there).
pub use turnstone_proto::ids::{new_correlation_id, new_cycle_id, new_request_id, new_ws_id};
