//! The [`Engine`]: what every workstream of a node shares (the model client, the live tool
//! registry, the settings). Below every workstream module: it knows no workstream.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::{Mutex, RwLock};
use turnstone_governance::PolicySet;
use turnstone_llm::{Resilient, ToolSpec};
use turnstone_tools::ToolRegistry;
use turnstone_tools::toolset::{LoadedTools, ToolIntent, ToolSurface};

use crate::config::EngineConfig;
use crate::guard_stats::{GuardStats, OutputGuardCounts};

/// What every workstream of a node shares: the model client, the (live) tool registry,
/// settings.
pub struct Engine {
    pub(crate) provider: Resilient,
    pub(crate) tools: Arc<ToolRegistry>,
    /// The settings: an immutable snapshot, replaced whole by [`Engine::reconfigure`] (a
    /// node's settings reload); each use reads the one current then.
    pub(crate) config: RwLock<Arc<EngineConfig>>,
    pub(crate) context_window: AtomicU32,
    /// Clients of registry aliases workstreams switched to (see `models.rs`).
    pub(crate) routes: Mutex<HashMap<String, Resilient>>,
    /// Sections the embedder adds to every workstream's system prompt.
    pub(crate) sections: RwLock<Vec<Arc<dyn SystemSection>>>,
    /// The output guard's counters, shared with the engines of sub-agents.
    pub(crate) guard_stats: Arc<GuardStats>,
    /// The embedder's tool policies (an immutable snapshot, replaced whole on every change;
    /// each tool batch reads the one current at its start).
    pub(crate) policies: RwLock<Arc<PolicySet>>,
    /// What the last distinct tool surfaces froze, shared by every workstream (`turn.rs`).
    pub(crate) frozen_tools: crate::turn::FrozenToolsCache,
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
            .field("model", &self.config.read().model)
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
            tracing::info!(
                context_window = config.context_window,
                "context window from the configuration"
            );
            config.context_window
        } else {
            // The provider's answer: a configured window, else what the server says (llama.cpp
            // `/props`, a model list's context field), else the default.
            match provider.inner.capabilities(&config.model).await {
                Ok(c) => {
                    tracing::info!(context_window = c.context_window, model = %config.model, "context window from the model backend");
                    c.context_window
                }
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
            config: RwLock::new(Arc::new(config)),
            context_window: AtomicU32::new(window),
            routes: Mutex::default(),
            sections: RwLock::default(),
            guard_stats: Arc::default(),
            policies: RwLock::default(),
            frozen_tools: Default::default(),
        })
    }

    /// Adds a section to every workstream's system prompt from the next turn on.
    pub fn add_system_section(&self, section: Arc<dyn SystemSection>) {
        self.sections.write().push(section);
    }

    /// Replaces the tool policies every workstream (and sub-agent) applies from its next
    /// tool batch on. The engine never reads storage: the embedder calls this whenever its
    /// policies change.
    pub fn set_policies(&self, policies: Arc<PolicySet>) {
        *self.policies.write() = policies;
    }

    /// The tool policies as of now.
    pub fn policies(&self) -> Arc<PolicySet> {
        self.policies.read().clone()
    }

    /// The embedder's sections as of now, joined by blank lines (`None` when all are empty).
    pub(crate) fn system_sections(&self) -> Option<String> {
        let sections = self.sections.read();
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
        ToolSurface::build(
            intent,
            self.tools.snapshot(),
            &self.config().toolset,
            loaded,
        )
    }

    /// The settings as of now (a snapshot: a reload replaces it, never changes it).
    pub fn config(&self) -> Arc<EngineConfig> {
        self.config.read().clone()
    }

    /// Changes the settings every workstream (and sub-agent built from now on) reads from
    /// its next use: the next approval's timeout, the next turn's tool array, compaction and
    /// judge settings, the model registry of the next `/model` or new workstream. A changed
    /// registry drops the clients built for its aliases. The engine's own model and
    /// provider stay as built.
    pub fn reconfigure(&self, change: impl FnOnce(&mut EngineConfig)) {
        let mut current = self.config.write();
        let mut next = EngineConfig::clone(&current);
        change(&mut next);
        let models_changed = match (&current.models, &next.models) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            (None, None) => false,
            _ => true,
        };
        *current = Arc::new(next);
        drop(current);
        if models_changed {
            self.routes.lock().clear();
        }
    }

    /// What the output guard has flagged and redacted so far (this engine's workstreams and
    /// their sub-agents).
    pub fn output_guard_counts(&self) -> OutputGuardCounts {
        self.guard_stats.snapshot()
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
