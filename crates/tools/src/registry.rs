//! [`ToolRegistry`]: the tools a node offers, looked up by exact name.
//!
//! The registry is *live*: tools can be added and removed while workstreams run (MCP servers
//! connect, refresh and disconnect). Every change bumps [`ToolRegistry::generation`] and
//! publishes a new immutable [`RegistrySnapshot`] (copy on write), so a turn that took a
//! snapshot keeps a consistent view while the registry moves on, and the next turn sees the
//! change.

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::builtin::{self, BuiltinOptions};
use crate::error::{ArgumentError, RegistryError};
use crate::tool::{Tool, ToolDefinition};
use crate::toolset::aliases;

/// One entry of the function list sent to a model: the schema without Turnstone metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema object of the arguments.
    pub parameters: Value,
}

impl FunctionSpec {
    /// The spec of a definition (metadata stripped).
    pub fn of(definition: &ToolDefinition) -> Self {
        Self {
            name: definition.name.clone(),
            description: definition.description.clone(),
            parameters: definition.parameters.clone(),
        }
    }
}

/// Where a tool comes from (shown by tool-payload inspection).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Provenance {
    /// A built-in tool of this crate (or any tool registered without a server).
    Builtin,
    /// A tool of the MCP server of this name.
    Mcp(String),
    /// A tool the engine makes per workstream (`tool_search`), not held by the registry.
    Synthetic,
}

impl Provenance {
    /// The provenance a name implies: `mcp__{server}__{tool}` is MCP, anything else built-in.
    pub fn from_name(name: &str) -> Self {
        name.strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
            .filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
            .map_or(Self::Builtin, |(server, _)| Self::Mcp(server.to_owned()))
    }

    pub fn is_mcp(&self) -> bool {
        matches!(self, Self::Mcp(_))
    }
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin => f.write_str("builtin"),
            Self::Mcp(server) => write!(f, "mcp:{server}"),
            Self::Synthetic => f.write_str("synthetic"),
        }
    }
}

impl Serialize for Provenance {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A registered tool and where it came from.
#[derive(Clone)]
pub struct RegisteredTool {
    pub tool: Arc<dyn Tool>,
    pub provenance: Provenance,
}

impl RegisteredTool {
    pub fn name(&self) -> &str {
        &self.tool.definition().name
    }

    pub fn definition(&self) -> &ToolDefinition {
        self.tool.definition()
    }
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.name())
            .field("provenance", &self.provenance)
            .finish()
    }
}

/// An immutable view of the registry at one generation.
///
/// Order (stable, the order of every tool array built from it): non-MCP tools sorted by
/// name — the built-ins and the tools a node adds at run time (`memory`, `skill`, `watch`,
/// `task_agent`, …) alike, as the original sends them — then MCP tools sorted by name, so
/// neither the order of registration nor a server that reconnects or refreshes moves a
/// tool.
#[derive(Debug, Clone, Default)]
pub struct RegistrySnapshot {
    generation: u64,
    entries: Vec<RegisteredTool>,
}

impl RegistrySnapshot {
    /// The registry generation this snapshot was taken at.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// All entries in registry order.
    pub fn entries(&self) -> &[RegisteredTool] {
        &self.entries
    }

    /// The entry of exactly this name.
    pub fn entry(&self, name: &str) -> Option<&RegisteredTool> {
        self.entries.iter().find(|e| e.name() == name)
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.entry(name).map(|e| e.tool.clone())
    }

    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.name().to_owned()).collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Inserts keeping the order rule; refuses duplicates and reserved names.
    fn insert(&mut self, entry: RegisteredTool) -> Result<(), RegistryError> {
        let name = entry.name().to_owned();
        check_name(&name)?;
        if self.entry(&name).is_some() {
            return Err(RegistryError::DuplicateTool(name));
        }
        let at = if entry.provenance.is_mcp() {
            self.entries
                .iter()
                .position(|e| e.provenance.is_mcp() && e.name() > name.as_str())
                .unwrap_or(self.entries.len())
        } else {
            self.entries
                .iter()
                .position(|e| e.provenance.is_mcp() || e.name() > name.as_str())
                .unwrap_or(self.entries.len())
        };
        self.entries.insert(at, entry);
        Ok(())
    }
}

/// Names the registry refuses: the synthetic `tool_search` (made per workstream) and the
/// replay-only legacy aliases (`remember`, `forget`, `task`, `plan`).
fn check_name(name: &str) -> Result<(), RegistryError> {
    if name == crate::toolset::TOOL_SEARCH {
        return Err(RegistryError::InvalidSchema {
            name: name.to_owned(),
            reason: "the name is reserved for the synthetic tool search".into(),
        });
    }
    if let Some(alias) = aliases::alias(name) {
        return Err(RegistryError::InvalidSchema {
            name: name.to_owned(),
            reason: format!(
                "the name is a replay-only alias of '{}' and cannot be registered",
                alias.canonical
            ),
        });
    }
    Ok(())
}

/// The registered tools; see the module docs for liveness and order.
///
/// `Clone` copies the current tools into an independent registry; share one live registry
/// through an `Arc`.
#[derive(Default)]
pub struct ToolRegistry {
    current: RwLock<Arc<RegistrySnapshot>>,
}

impl Clone for ToolRegistry {
    fn clone(&self) -> Self {
        Self {
            current: RwLock::new(self.snapshot()),
        }
    }
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let snapshot = self.snapshot();
        f.debug_struct("ToolRegistry")
            .field("generation", &snapshot.generation)
            .field("tools", &snapshot.names())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in tools with default settings.
    pub fn with_builtins() -> Result<Self, RegistryError> {
        Self::with_builtin_options(&BuiltinOptions::default())
    }

    /// The built-in tools with settings from node configuration.
    pub fn with_builtin_options(options: &BuiltinOptions) -> Result<Self, RegistryError> {
        let mut registry = Self::new();
        for tool in builtin::all(options)? {
            registry.register(tool)?;
        }
        Ok(registry)
    }

    /// The current snapshot (cheap: an `Arc` clone).
    pub fn snapshot(&self) -> Arc<RegistrySnapshot> {
        self.current.read().clone()
    }

    /// Increases on every change (add, remove, replace).
    pub fn generation(&self) -> u64 {
        self.snapshot().generation
    }

    /// Applies `change` to a copy of the current snapshot and publishes it (one generation
    /// step) when it returns `Ok(Some(_))`; `Ok(None)` (nothing to do) and errors change
    /// nothing.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut RegistrySnapshot) -> Result<Option<T>, RegistryError>,
    ) -> Result<Option<T>, RegistryError> {
        let mut guard = self.current.write();
        let mut next = RegistrySnapshot::clone(&guard);
        let out = change(&mut next)?;
        if out.is_some() {
            next.generation = guard.generation + 1;
            *guard = Arc::new(next);
        }
        Ok(out)
    }

    /// Adds a tool (provenance from its name: `mcp__{server}__…` is MCP, else built-in).
    /// A second tool of the same name, `tool_search` and the legacy alias names are refused.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let provenance = Provenance::from_name(&tool.definition().name);
        self.add(tool, provenance)
    }

    /// Adds a tool at run time; old workstreams see it on their next turn.
    pub fn add(&self, tool: Arc<dyn Tool>, provenance: Provenance) -> Result<(), RegistryError> {
        self.update(|s| s.insert(RegisteredTool { tool, provenance }).map(Some))
            .map(|_| ())
    }

    /// Removes the tool of this name; `false` when there was none (no generation step).
    pub fn remove(&self, name: &str) -> bool {
        let removed = self.update(|s| {
            let before = s.entries.len();
            s.entries.retain(|e| e.name() != name);
            Ok((s.entries.len() < before).then_some(()))
        });
        matches!(removed, Ok(Some(())))
    }

    /// Replaces every tool of MCP server `server` with `tools` in one step (a discovery or
    /// refresh). All or nothing: a duplicate or reserved name changes nothing.
    pub fn replace_mcp_server(
        &self,
        server: &str,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Result<(), RegistryError> {
        let provenance = Provenance::Mcp(server.to_owned());
        self.update(|s| {
            s.entries.retain(|e| e.provenance != provenance);
            for tool in tools {
                s.insert(RegisteredTool {
                    tool,
                    provenance: provenance.clone(),
                })?;
            }
            Ok(Some(()))
        })
        .map(|_| ())
    }

    /// Removes every tool of MCP server `server`; returns how many went.
    pub fn remove_mcp_server(&self, server: &str) -> usize {
        let provenance = Provenance::Mcp(server.to_owned());
        let removed = self.update(|s| {
            let before = s.entries.len();
            s.entries.retain(|e| e.provenance != provenance);
            Ok(Some(before - s.entries.len()).filter(|n| *n > 0))
        });
        removed.ok().flatten().unwrap_or(0)
    }

    /// The tool of exactly this name (no case folding, no fuzzy matching, no aliases).
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.snapshot().get(name)
    }

    /// The provenance of the tool of this name.
    pub fn provenance(&self, name: &str) -> Option<Provenance> {
        self.snapshot().entry(name).map(|e| e.provenance.clone())
    }

    /// Tool names in registry order.
    pub fn names(&self) -> Vec<String> {
        self.snapshot().names()
    }

    /// All tools in registry order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.snapshot()
            .entries
            .iter()
            .map(|e| e.tool.clone())
            .collect()
    }

    /// All definitions (with metadata) in registry order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.snapshot()
            .entries
            .iter()
            .map(|e| e.definition().clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.snapshot().len()
    }

    pub fn is_empty(&self) -> bool {
        self.snapshot().is_empty()
    }

    /// The function list of every registered tool, metadata stripped, in registry order
    /// (a workstream's array is narrower: see [`crate::toolset::ToolSurface`]).
    pub fn specs(&self) -> Vec<FunctionSpec> {
        self.snapshot()
            .entries
            .iter()
            .map(|e| FunctionSpec::of(e.definition()))
            .collect()
    }

    fn names_where(&self, keep: impl Fn(&ToolDefinition) -> bool) -> Vec<String> {
        self.snapshot()
            .entries
            .iter()
            .filter(|e| keep(e.definition()))
            .map(|e| e.name().to_owned())
            .collect()
    }

    /// Names of tools with `auto_approve` metadata (the sub-agent auto-approve set).
    pub fn auto_approve_names(&self) -> Vec<String> {
        self.names_where(|d| d.meta.auto_approve)
    }

    /// Names of tools available to the task sub-agent.
    pub fn task_agent_names(&self) -> Vec<String> {
        self.names_where(|d| d.meta.task_agent)
    }

    /// Names of tools available to the plan sub-agent.
    pub fn agent_names(&self) -> Vec<String> {
        self.names_where(|d| d.meta.agent)
    }

    /// Turns the argument text a model sent into a JSON object (see [`parse_tool_arguments`]).
    /// An unknown tool name → [`ArgumentError::UnknownTool`].
    pub fn parse_arguments(&self, name: &str, raw: &str) -> Result<Value, ArgumentError> {
        let tool = self.get(name).ok_or_else(|| ArgumentError::UnknownTool {
            name: name.to_owned(),
            available: self.names(),
        })?;
        parse_tool_arguments(tool.definition(), raw)
    }
}

/// Turns the argument text a model sent for `definition`'s tool into a JSON object:
/// empty (or `null`) → `{}`; a JSON object → itself; a bare string — not JSON at all, or
/// a JSON string — → `{primary_key: string}` when the tool has a primary key; anything
/// else → [`ArgumentError::Json`].
pub fn parse_tool_arguments(
    definition: &ToolDefinition,
    raw: &str,
) -> Result<Value, ArgumentError> {
    let name = definition.name.as_str();
    let primary_key = definition.meta.primary_key.as_deref();
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let bare = |s: &str| -> Option<Value> {
        primary_key.map(|key| {
            let mut map = Map::new();
            map.insert(key.to_owned(), Value::String(s.to_owned()));
            Value::Object(map)
        })
    };
    match serde_json::from_str::<Value>(trimmed) {
        Ok(obj @ Value::Object(_)) => Ok(obj),
        Ok(Value::Null) => Ok(Value::Object(Map::new())),
        Ok(Value::String(s)) => bare(&s).ok_or_else(|| {
            ArgumentError::Json(format!(
                "expected a JSON object of arguments for '{name}', got a string"
            ))
        }),
        Ok(other) => Err(ArgumentError::Json(format!(
            "expected a JSON object of arguments for '{name}', got {}",
            match other {
                Value::Array(_) => "an array",
                Value::Bool(_) => "a boolean",
                _ => "a number",
            }
        ))),
        // Text that starts like JSON but does not parse is a broken call, not a bare
        // string: running `{"command": "rm` as a command would be wrong.
        Err(e) if trimmed.starts_with('{') || trimmed.starts_with('[') => {
            Err(ArgumentError::Json(e.to_string()))
        }
        Err(e) => bare(raw).ok_or_else(|| ArgumentError::Json(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtins_are_alphabetical_and_specs_have_no_metadata() {
        let reg = ToolRegistry::with_builtins().unwrap();
        assert_eq!(
            reg.names(),
            [
                "bash",
                "diff_file",
                "edit_file",
                "git",
                "man",
                "math",
                "read_file",
                "search",
                "write_file"
            ]
        );
        let specs = reg.specs();
        assert_eq!(specs.len(), 9);
        assert!(
            specs
                .iter()
                .all(|s| !s.description.is_empty() && s.parameters["type"] == "object")
        );
        assert_eq!(
            reg.auto_approve_names(),
            ["diff_file", "git", "man", "math", "read_file", "search"]
        );
        assert_eq!(
            reg.agent_names(),
            ["diff_file", "git", "man", "math", "read_file", "search"]
        );
        assert_eq!(reg.task_agent_names().len(), 9);
        assert!(
            reg.snapshot()
                .entries()
                .iter()
                .all(|e| e.provenance == Provenance::Builtin)
        );
    }

    #[test]
    fn duplicate_registration_is_refused() {
        let mut reg = ToolRegistry::with_builtins().unwrap();
        let bash = reg.get("bash").unwrap();
        let generation = reg.generation();
        assert_eq!(
            reg.register(bash),
            Err(RegistryError::DuplicateTool("bash".into()))
        );
        assert_eq!(reg.len(), 9);
        assert_eq!(
            reg.generation(),
            generation,
            "a refused change is no change"
        );
    }

    #[test]
    fn lookup_is_exact() {
        let reg = ToolRegistry::with_builtins().unwrap();
        assert!(reg.get("bash").is_some());
        assert!(reg.get("Bash").is_none());
        assert!(reg.get("bas").is_none());
        assert!(reg.get(" bash").is_none());
    }

    #[test]
    fn provenance_from_names() {
        assert_eq!(Provenance::from_name("bash"), Provenance::Builtin);
        assert_eq!(
            Provenance::from_name("mcp__github__search_repos"),
            Provenance::Mcp("github".into())
        );
        assert_eq!(Provenance::from_name("mcp____x"), Provenance::Builtin);
        assert_eq!(Provenance::from_name("mcp__x__"), Provenance::Builtin);
        assert_eq!(Provenance::Mcp("fs".into()).to_string(), "mcp:fs");
        assert_eq!(Provenance::Synthetic.to_string(), "synthetic");
    }

    #[test]
    fn argument_parsing_rules() {
        let reg = ToolRegistry::with_builtins().unwrap();
        assert_eq!(reg.parse_arguments("bash", "").unwrap(), json!({}));
        assert_eq!(reg.parse_arguments("bash", "  null ").unwrap(), json!({}));
        assert_eq!(
            reg.parse_arguments("bash", r#"{"command":"ls"}"#).unwrap(),
            json!({"command": "ls"})
        );
        assert_eq!(
            reg.parse_arguments("bash", "ls -la").unwrap(),
            json!({"command": "ls -la"})
        );
        assert_eq!(
            reg.parse_arguments("bash", r#""ls -la""#).unwrap(),
            json!({"command": "ls -la"})
        );
        assert_eq!(
            reg.parse_arguments("read_file", "src/main.rs").unwrap(),
            json!({"path": "src/main.rs"})
        );
        // A broken object is a parse error, never a bare string: `{"command": "rm` must not
        // reach bash as a command.
        assert!(matches!(
            reg.parse_arguments("bash", "{\"command\": "),
            Err(ArgumentError::Json(_))
        ));
        assert!(matches!(
            reg.parse_arguments("bash", "[1,2]"),
            Err(ArgumentError::Json(_))
        ));
        assert!(matches!(
            reg.parse_arguments("bash", "42"),
            Err(ArgumentError::Json(_))
        ));
    }

    #[test]
    fn unknown_tool_message_is_exact() {
        let reg = ToolRegistry::with_builtins().unwrap();
        let err = reg.parse_arguments("rm_everything", "{}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "Unknown tool: 'rm_everything'. tool 'rm_everything' is not registered. Available tools: \
             bash, diff_file, edit_file, git, man, math, read_file, search, write_file"
        );
    }
}
