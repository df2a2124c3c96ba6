//! Expanding a [`ToolIntent`] against a registry snapshot: deterministic (registry order,
//! each tool once), live (whatever the registry holds now), never stored.
//!
//! Tool lists in intents and presets hold *patterns*: an exact name; `prefix*`; `*`
//! (everything); `@builtin`, `@mcp`, `@mcp:<server>`; `@auto_approve`, `@task_agent`,
//! `@agent` (tools with that metadata).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::intent::{IntentError, ToolIntent};
use crate::registry::{Provenance, RegisteredTool, RegistrySnapshot};

/// The name of the search backend tool layered by [`ToolIntent::web_search`].
pub const WEB_SEARCH: &str = "web_search";

/// Whether tool search (deferred loading) is used (`tools.search`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// On when a workstream's available tools number at least the threshold.
    #[default]
    Auto,
    On,
    Off,
}

impl FromStr for SearchMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "on" | "true" => Ok(Self::On),
            "off" | "false" => Ok(Self::Off),
            other => Err(format!(
                "invalid tool search mode '{other}' (expected auto, on or off)"
            )),
        }
    }
}

impl fmt::Display for SearchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        })
    }
}

/// Tool-set settings of a node (`[tools]` in config.toml: `search`, `search_threshold`,
/// `search_max_results`, plus presets and deferral lists).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolsetConfig {
    /// `auto` (default), `on` or `off`.
    pub search: SearchMode,
    /// With `auto`: the least number of available tools that turns tool search on (20).
    pub search_threshold: usize,
    /// Most tools one `tool_search` call returns (5).
    pub search_max_results: usize,
    /// Named presets: name → patterns. They replace built-in presets of the same name
    /// (`full` = `*`, `readonly` = `@auto_approve`, `task_agent` = `@task_agent`).
    pub presets: BTreeMap<String, Vec<String>>,
    /// Patterns of tools deferred when tool search is on, besides every MCP tool.
    pub deferred: Vec<String>,
    /// Patterns of tools never deferred (wins over `deferred` and over MCP).
    pub resident: Vec<String>,
    /// Patterns of tools left out of the default set: available only through a preset,
    /// `only`, or (for `web_search`) the `web_search` toggle.
    pub opt_in: Vec<String>,
    /// Patterns of the read-only tools plan mode keeps ([`DEFAULT_PLAN_TOOLS`]).
    pub plan_tools: Vec<String>,
    /// Personas: name → the patterns of its visible tools (`[tools.personas]`). With
    /// `tool_search` among them the set is *exact* (the rest is deferred behind
    /// `tool_search`), without it *hard* (nothing else, no tool search).
    pub personas: BTreeMap<String, Vec<String>>,
}

/// The tools plan mode keeps by default: they read files, history, manuals and the web, or
/// compute in the `math` sandbox, and change nothing.
pub const DEFAULT_PLAN_TOOLS: &[&str] = &[
    "read_file",
    "search",
    "diff_file",
    "git",
    "man",
    "math",
    "recall",
    "web_fetch",
    "web_search",
];

impl Default for ToolsetConfig {
    fn default() -> Self {
        Self {
            search: SearchMode::Auto,
            search_threshold: 20,
            search_max_results: 5,
            presets: BTreeMap::new(),
            deferred: Vec::new(),
            resident: Vec::new(),
            opt_in: Vec::new(),
            plan_tools: DEFAULT_PLAN_TOOLS.iter().map(|s| (*s).to_owned()).collect(),
            personas: BTreeMap::new(),
        }
    }
}

const BUILTIN_PRESETS: &[(&str, &[&str])] = &[
    ("full", &["*"]),
    ("readonly", &["@auto_approve"]),
    ("task_agent", &["@task_agent"]),
];

impl ToolsetConfig {
    /// The patterns of preset `name`, configured presets first.
    pub fn preset(&self, name: &str) -> Option<Vec<String>> {
        if let Some(p) = self.presets.get(name) {
            return Some(p.clone());
        }
        BUILTIN_PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p.iter().map(|s| (*s).to_owned()).collect())
    }

    /// Every preset name, sorted.
    pub fn preset_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.presets.keys().cloned().collect();
        for (n, _) in BUILTIN_PRESETS {
            if !self.presets.contains_key(*n) {
                names.push((*n).to_owned());
            }
        }
        names.sort();
        names
    }

    /// The visible-tool patterns of persona `name`.
    pub fn persona(&self, name: &str) -> Option<&[String]> {
        self.personas.get(name).map(Vec::as_slice)
    }

    /// Checks an intent a client wants to store: its shape, and that a preset or persona
    /// it names exists. Tool names are not checked against the registry (a tool may come
    /// later).
    pub fn validate(&self, intent: &ToolIntent) -> Result<(), IntentError> {
        intent.check_shape()?;
        if let Some(name) = &intent.persona
            && self.persona(name).is_none()
        {
            return Err(IntentError::UnknownPersona {
                name: name.clone(),
                known: self.personas.keys().cloned().collect(),
            });
        }
        if let Some(name) = &intent.toolset
            && self.preset(name).is_none()
        {
            return Err(IntentError::UnknownToolset {
                name: name.clone(),
                known: self.preset_names(),
            });
        }
        Ok(())
    }

    /// Checks the configuration itself (start-up): sensible numbers, non-empty personas.
    pub fn check(&self) -> Result<(), String> {
        for (name, tools) in &self.personas {
            if name.trim().is_empty() || tools.is_empty() {
                return Err(format!(
                    "tools.personas.{name} must name at least one tool (a hard set), or \
                     tool_search and the tools to show (an exact set)"
                ));
            }
        }
        if self.search_max_results == 0 || self.search_max_results > 50 {
            return Err(format!(
                "tools.search_max_results must be between 1 and 50, got {}",
                self.search_max_results
            ));
        }
        Ok(())
    }
}

/// Whether `pattern` selects `entry`.
pub fn matches(pattern: &str, entry: &RegisteredTool) -> bool {
    let name = entry.name();
    let meta = &entry.definition().meta;
    match pattern {
        "*" => true,
        "@builtin" => entry.provenance == Provenance::Builtin,
        "@mcp" => entry.provenance.is_mcp(),
        "@auto_approve" => meta.auto_approve,
        "@task_agent" => meta.task_agent,
        "@agent" => meta.agent,
        p => {
            if let Some(server) = p.strip_prefix("@mcp:") {
                entry.provenance == Provenance::Mcp(server.to_owned())
            } else if let Some(prefix) = p.strip_suffix('*') {
                name.starts_with(prefix)
            } else {
                name == p
            }
        }
    }
}

fn any_match(patterns: &[String], entry: &RegisteredTool) -> bool {
    patterns.iter().any(|p| matches(p, entry))
}

/// The available tools of one intent.
#[derive(Debug, Clone, Default)]
pub struct Expansion {
    /// Available tools in registry order, each once.
    pub tools: Vec<RegisteredTool>,
    /// The intent hand-picked its tools (`only`): no deferral, no tool search.
    pub hand_picked: bool,
    /// Tool search may be used (not hand-picked, not all off, `tool_search` not disabled).
    pub search_allowed: bool,
    /// Things the expansion could not honour (an unknown preset).
    pub warnings: Vec<String>,
    /// Plan mode narrowed the tools to `ToolsetConfig::plan_tools`.
    pub plan_mode: bool,
    /// An exact persona: the patterns of the tools kept visible; every other available tool
    /// is deferred behind `tool_search`, which is on whatever the search mode.
    pub visible: Option<Vec<String>>,
}

impl Expansion {
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_owned()).collect()
    }
}

/// Expands `intent` against `snapshot`.
///
/// Rules: all off → nothing. A hard persona (its set lacks `tool_search`) → exactly the
/// tools it selects, like `only`; an exact persona leaves the set alone and only marks which
/// tools stay visible. `only` → exactly the tools it selects. Otherwise the base set
/// is the preset (`toolset`) or every tool not `opt_in`; `allowed` narrows it. Then
/// `disabled` removes, and `web_search` layers `web_search` in (`true`) or out (`false`).
/// Last, plan mode keeps only the tools matching `config.plan_tools`.
/// The result keeps registry order, so the same intent against the same registry always
/// gives the same list.
pub fn expand(
    intent: &ToolIntent,
    snapshot: &RegistrySnapshot,
    config: &ToolsetConfig,
) -> Expansion {
    if intent.is_off() {
        return Expansion::default();
    }
    let mut warnings = Vec::new();
    let entries = snapshot.entries();
    let persona = intent.persona.as_deref().and_then(|name| {
        let p = config.persona(name);
        if p.is_none() {
            warnings.push(format!("unknown persona '{name}': no persona applied"));
        }
        p
    });
    let exact = persona.filter(|p| p.iter().any(|t| t == super::TOOL_SEARCH));
    let hard = persona.filter(|_| exact.is_none());
    let hand_picked = intent.only.is_some() || hard.is_some();
    let mut keep: Vec<bool> = if let Some(only) = hard.or(intent.only.as_deref()) {
        entries.iter().map(|e| any_match(only, e)).collect()
    } else {
        let preset = intent.toolset.as_deref().and_then(|name| {
            let p = config.preset(name);
            if p.is_none() {
                warnings.push(format!(
                    "unknown toolset '{name}': using the default tool set"
                ));
            }
            p
        });
        let base: Vec<bool> = match &preset {
            Some(patterns) => entries.iter().map(|e| any_match(patterns, e)).collect(),
            None => entries
                .iter()
                .map(|e| !any_match(&config.opt_in, e))
                .collect(),
        };
        match &intent.allowed {
            Some(allowed) => base
                .into_iter()
                .zip(entries)
                .map(|(k, e)| k && any_match(allowed, e))
                .collect(),
            None => base,
        }
    };
    for (k, e) in keep.iter_mut().zip(entries) {
        if any_match(&intent.disabled, e) {
            *k = false;
        }
        if let Some(on) = intent.web_search
            && e.name() == WEB_SEARCH
        {
            *k = on;
        }
        if intent.is_plan() && !any_match(&config.plan_tools, e) {
            *k = false;
        }
    }
    let search_disabled = intent
        .disabled
        .iter()
        .any(|p| p == super::TOOL_SEARCH || p == "*");
    Expansion {
        tools: entries
            .iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(e, _)| e.clone())
            .collect(),
        hand_picked,
        search_allowed: !hand_picked && !search_disabled,
        warnings,
        plan_mode: intent.is_plan(),
        visible: exact.map(<[String]>::to_vec),
    }
}
