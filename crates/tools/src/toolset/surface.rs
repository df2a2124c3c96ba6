//! [`ToolSurface`]: one workstream's tools for one turn — the tool array (resident tools,
//! loaded deferred tools, `tool_search`), the catalog of deferred names for the system
//! prompt, and dispatch by exact name against everything available. Built once at the start
//! of a turn and kept for the whole turn (seed 002 §7.4): a `tool_search` inside the turn
//! marks tools loaded, and the next surface puts them in the array.

use std::sync::Arc;

use serde_json::{Value, json};

use super::aliases::{self, AliasTool};
use super::expand::{ToolsetConfig, expand};
use super::intent::ToolIntent;
use super::payload::{self, ToolBudget, ToolPayload};
use super::search_tool::{LoadedTools, ToolSearchTool};
use super::{SearchMode, TOOL_SEARCH};
use crate::registry::{FunctionSpec, Provenance, RegisteredTool, RegistrySnapshot};
use crate::tool::Tool;

/// How a tool ships in a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Residency {
    /// Full schema in the tool array every turn.
    Resident,
    /// A deferred tool loaded by `tool_search`: in the array from the turn after loading.
    Loaded,
    /// Name only, in the system prompt's catalog.
    Deferred,
}

/// One tool of a surface.
#[derive(Clone)]
pub struct SurfaceTool {
    pub tool: Arc<dyn Tool>,
    pub provenance: Provenance,
    pub residency: Residency,
}

impl SurfaceTool {
    pub fn name(&self) -> &str {
        &self.tool.definition().name
    }

    pub fn spec(&self) -> FunctionSpec {
        FunctionSpec::of(self.tool.definition())
    }
}

impl std::fmt::Debug for SurfaceTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SurfaceTool")
            .field("name", &self.name())
            .field("provenance", &self.provenance)
            .field("residency", &self.residency)
            .finish()
    }
}

/// Why a name cannot be dispatched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// No tool (and no replay alias of an available tool) has this exact name.
    #[error("tool '{0}' is not registered")]
    NotRegistered(String),
    /// The tool exists but this workstream's tool intent leaves it out.
    #[error("tool '{0}' is not enabled for this workstream")]
    NotEnabled(String),
    /// The tool exists but the workstream is in plan mode, which keeps only read-only tools.
    #[error(
        "tool '{0}' is not available in plan mode: only read-only tools can be used until \
         the user leaves plan mode (/plan off)"
    )]
    PlanMode(String),
}

/// The system prompt block of a workstream in plan mode.
pub const PLAN_MODE_PROMPT: &str = "Plan mode is on: you can only use read-only tools \
(reading and searching files, git history, manuals, the web, calculation) and tool_search. \
Investigate and propose a plan; do not try to change files or run commands. The user leaves \
plan mode with /plan off.";

/// Text that starts the deferred catalog in the system prompt.
pub const CATALOG_HEADER: &str = "Deferred tools (not in your tool list yet: call tool_search \
with a name or a description to load one, then call it):\n";

/// A workstream's tools for one turn.
#[derive(Clone)]
pub struct ToolSurface {
    generation: u64,
    registry: Arc<RegistrySnapshot>,
    array: Vec<SurfaceTool>,
    catalog: Vec<SurfaceTool>,
    search: Option<Arc<ToolSearchTool>>,
    warnings: Vec<String>,
    plan_mode: bool,
}

impl std::fmt::Debug for ToolSurface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSurface")
            .field("generation", &self.generation)
            .field("array", &self.array_names())
            .field("catalog", &self.deferred_names())
            .finish()
    }
}

impl ToolSurface {
    /// Expands `intent` against `registry` and splits the result into array and catalog,
    /// reading `loaded` once.
    ///
    /// Tool search is on when the intent allows it (not hand-picked, `tool_search` not
    /// disabled), the mode is `on` — or `auto` with at least `search_threshold` available
    /// tools — and some available tool is deferrable: every MCP tool and every tool matching
    /// `config.deferred`, except tools matching `config.resident`. `tool_search` itself is
    /// never deferred. An exact persona overrides both: tool search is on whatever the mode,
    /// and every available tool its set does not show is deferrable.
    pub fn build(
        intent: &ToolIntent,
        registry: Arc<RegistrySnapshot>,
        config: &ToolsetConfig,
        loaded: &LoadedTools,
    ) -> Self {
        let expansion = expand(intent, &registry, config);
        let deferrable = |e: &RegisteredTool| {
            if e.name() == TOOL_SEARCH {
                return false;
            }
            // An exact persona: what it does not show is deferred.
            if let Some(visible) = &expansion.visible {
                return !visible.iter().any(|p| super::expand::matches(p, e));
            }
            !config.resident.iter().any(|p| super::expand::matches(p, e))
                && (e.provenance.is_mcp()
                    || config.deferred.iter().any(|p| super::expand::matches(p, e)))
        };
        let wanted = match config.search {
            // An exact persona forces client-side tool search, whatever the mode (seed 000).
            _ if expansion.visible.is_some() => true,
            SearchMode::Off => false,
            SearchMode::On => true,
            SearchMode::Auto => expansion.tools.len() >= config.search_threshold,
        };
        let active = expansion.search_allowed && wanted && expansion.tools.iter().any(deferrable);
        let loaded_now = loaded.snapshot();
        let mut array = Vec::new();
        let mut catalog = Vec::new();
        let mut searchable = Vec::new();
        for e in &expansion.tools {
            let surface = |residency| SurfaceTool {
                tool: e.tool.clone(),
                provenance: e.provenance.clone(),
                residency,
            };
            if active && deferrable(e) {
                searchable.push(FunctionSpec::of(e.definition()));
                if loaded_now.contains(e.name()) {
                    array.push(surface(Residency::Loaded));
                } else {
                    catalog.push(surface(Residency::Deferred));
                }
            } else {
                array.push(surface(Residency::Resident));
            }
        }
        let search = active.then(|| {
            Arc::new(ToolSearchTool::new(
                searchable,
                loaded.clone(),
                config.search_max_results,
            ))
        });
        if let Some(search) = &search {
            array.push(SurfaceTool {
                tool: search.clone(),
                provenance: Provenance::Synthetic,
                residency: Residency::Resident,
            });
        }
        Self {
            generation: registry.generation(),
            registry,
            array,
            catalog,
            search,
            warnings: expansion.warnings,
            plan_mode: expansion.plan_mode,
        }
    }

    /// Whether this surface offers the model exactly what `other` does: built from the same
    /// registry generation (a tool's definition changes only with a new one), with the same
    /// array (names and residency, in order), the same catalog and the same plan mode. Then
    /// [`ToolSurface::specs`] and [`ToolSurface::payload`] of the two are equal, and a caller
    /// that kept the other's may reuse them.
    pub fn offers_same_tools(&self, other: &ToolSurface) -> bool {
        fn same(a: &[SurfaceTool], b: &[SurfaceTool]) -> bool {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| x.residency == y.residency && x.name() == y.name())
        }
        self.generation == other.generation
            && self.plan_mode == other.plan_mode
            && same(&self.array, &other.array)
            && same(&self.catalog, &other.catalog)
    }

    /// The registry generation this surface was built from.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The tools of the array, in order.
    pub fn array(&self) -> &[SurfaceTool] {
        &self.array
    }

    /// Deferred tools not loaded (the catalog), in registry order.
    pub fn deferred(&self) -> &[SurfaceTool] {
        &self.catalog
    }

    pub fn array_names(&self) -> Vec<String> {
        self.array.iter().map(|t| t.name().to_owned()).collect()
    }

    pub fn deferred_names(&self) -> Vec<String> {
        self.catalog.iter().map(|t| t.name().to_owned()).collect()
    }

    /// Whether the workstream is in plan mode (read-only tools only).
    pub fn plan_mode(&self) -> bool {
        self.plan_mode
    }

    /// Whether `tool_search` is in the array.
    pub fn search_active(&self) -> bool {
        self.search.is_some()
    }

    /// Problems met while expanding the intent (an unknown preset).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The function specs of the array, in order (what the request's `tools` carries).
    pub fn specs(&self) -> Vec<FunctionSpec> {
        self.array.iter().map(SurfaceTool::spec).collect()
    }

    /// The array as a model client sends it (OpenAI function format).
    pub fn wire_json(&self) -> Value {
        Value::Array(self.array.iter().map(|t| wire_entry(&t.spec())).collect())
    }

    /// The catalog block for the system prompt; `None` when nothing is deferred.
    pub fn catalog_text(&self) -> Option<String> {
        if self.catalog.is_empty() {
            return None;
        }
        let mut text = CATALOG_HEADER.to_owned();
        for t in &self.catalog {
            text.push_str(t.name());
            text.push('\n');
        }
        Some(text)
    }

    /// The system prompt with the plan-mode block (in plan mode) and the catalog appended,
    /// separated by blank lines; `None` when there is none of them.
    pub fn system_prompt(&self, base: Option<&str>) -> Option<String> {
        let parts: Vec<String> = [
            base.filter(|b| !b.is_empty()).map(str::to_owned),
            self.plan_mode.then(|| PLAN_MODE_PROMPT.to_owned()),
            self.catalog_text(),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// The tool to dispatch a call named `name` to: any available tool (in the array or
    /// deferred, loaded or not), `tool_search`, or a replay-only alias of an available tool.
    /// No case folding, no fuzzy matching.
    pub fn resolve(&self, name: &str) -> Result<Arc<dyn Tool>, ResolveError> {
        if let Some(t) = self
            .array
            .iter()
            .chain(self.catalog.iter())
            .find(|t| t.name() == name)
        {
            return Ok(t.tool.clone());
        }
        if let Some(alias) = aliases::alias(name) {
            let canonical = self
                .array
                .iter()
                .chain(self.catalog.iter())
                .find(|t| t.name() == alias.canonical);
            return match canonical {
                Some(t) => Ok(Arc::new(AliasTool::new(alias, t.tool.clone()))),
                None if self.registry.entry(alias.canonical).is_some() && self.plan_mode => {
                    Err(ResolveError::PlanMode(name.to_owned()))
                }
                None if self.registry.entry(alias.canonical).is_some() => {
                    Err(ResolveError::NotEnabled(name.to_owned()))
                }
                None => Err(ResolveError::NotRegistered(name.to_owned())),
            };
        }
        if self.plan_mode && self.registry.entry(name).is_some() {
            return Err(ResolveError::PlanMode(name.to_owned()));
        }
        if name == TOOL_SEARCH || self.registry.entry(name).is_some() {
            return Err(ResolveError::NotEnabled(name.to_owned()));
        }
        Err(ResolveError::NotRegistered(name.to_owned()))
    }

    /// Token accounting: resident tools priced by their array entry (schema + description +
    /// wrapper), deferred tools by their catalog line.
    pub fn budget(&self) -> ToolBudget {
        let resident_tokens = self
            .array
            .iter()
            .map(|t| payload::resident_cost(&t.spec()))
            .sum();
        let deferred_tokens = self
            .catalog
            .iter()
            .map(|t| payload::deferred_cost(t.name()))
            .sum();
        let catalog_overhead_tokens = if self.catalog.is_empty() {
            0
        } else {
            payload::estimate_tokens(CATALOG_HEADER.len())
        };
        ToolBudget {
            resident_tokens,
            deferred_tokens,
            catalog_overhead_tokens,
            total_tokens: resident_tokens + deferred_tokens + catalog_overhead_tokens,
        }
    }

    /// The inspection record of this surface's array (see [`ToolPayload`]).
    pub fn payload(&self) -> ToolPayload {
        ToolPayload::of(self)
    }
}

/// One array entry in OpenAI function format: `{"type":"function","function":{name,
/// description, parameters}}` (keys in this order).
pub fn wire_entry(spec: &FunctionSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
    })
}
