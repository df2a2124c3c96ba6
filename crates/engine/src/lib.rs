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

mod compact;
pub mod config;
pub mod event;
pub mod log;
pub mod manager;
mod models;
pub mod plan;
pub mod subagent;
mod title;
mod turn;
pub mod workstream;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

pub use compact::SUMMARY_MARKER;
pub use config::{EngineConfig, ManagerConfig};
pub use event::{Envelope, Event, StatusInfo, ToolItem, WsState};
pub use log::{EventLog, Item, Sequenced, Subscription};
pub use manager::{Closed, CreateOptions, Manager, ManagerError};
pub use models::{MODEL_CONFIG_KEY, ModelChoice, ModelError};
pub use plan::{
    MAX_REFINEMENTS, PLAN_AGENT, PlanAgentTool, PlanDecision, PlanOutcome, PlanVerdict,
    register_plan_agent,
};
pub use subagent::{AgentModel, TaskAgentTool, register_subagent, register_subagent_with};
pub use title::TitleHook;

pub use workstream::{
    ActiveSkill, ApproveOutcome, Decision, EventHook, Journal, PreparedTools, RequestOverrides,
    SendOutcome, TOOL_LOADED_CONFIG_KEY, Verdict, WorkstreamHandle,
};

use turnstone_llm::{Resilient, ToolSpec};
use turnstone_tools::ToolRegistry;
use turnstone_tools::toolset::{LoadedTools, ToolIntent, ToolSurface};

/// What every workstream of a node shares: the model client, the (live) tool registry,
/// settings.
pub struct Engine {
    provider: Resilient,
    tools: Arc<ToolRegistry>,
    config: EngineConfig,
    context_window: AtomicU32,
    /// Clients of registry aliases workstreams switched to (see `models.rs`).
    routes: std::sync::Mutex<std::collections::HashMap<String, Resilient>>,
    /// Sections the embedder adds to every workstream's system prompt.
    sections: std::sync::RwLock<Vec<Arc<dyn SystemSection>>>,
}

/// A section the embedder adds to every workstream's system prompt, after the engine's
/// prompt and the active skill (e.g. the node's catalog of MCP prompts). It is read once at
/// the start of each turn and frozen for the turn, like the tool array, so the prompt stays
/// byte-identical within a turn.
pub trait SystemSection: Send + Sync {
    /// The text, or `None` for nothing now.
    fn section(&self) -> Option<String>;
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("model", &self.config.model)
            .finish()
    }
}

impl Engine {
    /// Builds an engine. When `config.context_window` is 0 the provider is asked once for
    /// the model's capabilities (falling back to the default window if it cannot answer).
    pub async fn new(
        provider: Resilient,
        tools: Arc<ToolRegistry>,
        config: EngineConfig,
    ) -> Arc<Self> {
        let window = if config.context_window > 0 {
            config.context_window
        } else {
            match provider.inner.capabilities(&config.model).await {
                Ok(c) => c.context_window,
                Err(e) => {
                    tracing::warn!(error = %e, "model capabilities unavailable; using the default context window");
                    turnstone_llm::ModelCapabilities::default().context_window
                }
            }
        };
        if let Err(e) = config.toolset.check() {
            tracing::warn!(error = %e, "tool set configuration");
        }
        Arc::new(Self {
            provider,
            tools,
            config,
            context_window: AtomicU32::new(window),
            routes: std::sync::Mutex::default(),
            sections: std::sync::RwLock::default(),
        })
    }

    /// Adds a section to every workstream's system prompt from the next turn on.
    pub fn add_system_section(&self, section: Arc<dyn SystemSection>) {
        self.sections
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(section);
    }

    /// The embedder's sections as of now, joined by blank lines (`None` when all are empty).
    pub(crate) fn system_sections(&self) -> Option<String> {
        let sections = self.sections.read().unwrap_or_else(|e| e.into_inner());
        let texts: Vec<String> = sections
            .iter()
            .filter_map(|s| s.section())
            .filter(|t| !t.trim().is_empty())
            .collect();
        (!texts.is_empty()).then(|| texts.join("\n\n"))
    }

    pub fn provider(&self) -> &Resilient {
        &self.provider
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The shared live registry: tools added or removed here reach every workstream at its
    /// next turn.
    pub fn registry(&self) -> &Arc<ToolRegistry> {
        &self.tools
    }

    /// Every registered tool's spec (metadata stripped), in registry order, as of now. A
    /// workstream's request carries its own narrower array: see [`Engine::tool_surface`].
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools.specs().into_iter().map(to_tool_spec).collect()
    }

    /// The tools a workstream with this intent and loaded set gets now: the array, the
    /// deferred catalog and dispatch (one turn's frozen view).
    pub fn tool_surface(&self, intent: &ToolIntent, loaded: &LoadedTools) -> ToolSurface {
        ToolSurface::build(intent, self.tools.snapshot(), &self.config.toolset, loaded)
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn context_window(&self) -> u32 {
        self.context_window.load(Ordering::Relaxed)
    }
}

pub(crate) fn to_tool_spec(s: turnstone_tools::FunctionSpec) -> ToolSpec {
    ToolSpec {
        name: s.name,
        description: s.description,
        parameters: s.parameters,
    }
}

// Ids come from the wire contract's one id module (lengths documented there).
pub use turnstone_proto::ids::{new_correlation_id, new_request_id, new_ws_id};
