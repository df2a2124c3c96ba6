//! [`ToolRegistry`]: the tools a node offers, looked up by exact name.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::builtin::{self, BuiltinOptions};
use crate::error::{ArgumentError, RegistryError};
use crate::tool::{Tool, ToolDefinition};

/// One entry of the function list sent to a model: the schema without Turnstone metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema object of the arguments.
    pub parameters: Value,
}

/// The registered tools in a stable order: built-ins alphabetically, then registered tools
/// in registration order (MCP tools come after the built-ins, as in the original).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
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

    /// Adds a tool after the existing ones. A second tool of the same name is refused.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = &tool.definition().name;
        if self.get(name).is_some() {
            return Err(RegistryError::DuplicateTool(name.clone()));
        }
        self.tools.push(tool);
        Ok(())
    }

    /// The tool of exactly this name (no case folding, no fuzzy matching).
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools
            .iter()
            .find(|t| t.definition().name == name)
            .cloned()
    }

    /// Tool names in registry order.
    pub fn names(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|t| t.definition().name.clone())
            .collect()
    }

    /// All tools in registry order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// All definitions (with metadata) in registry order.
    pub fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.tools.iter().map(|t| t.definition())
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The function list for a model, metadata stripped, in registry order.
    pub fn specs(&self) -> Vec<FunctionSpec> {
        self.definitions()
            .map(|d| FunctionSpec {
                name: d.name.clone(),
                description: d.description.clone(),
                parameters: d.parameters.clone(),
            })
            .collect()
    }

    /// Names of tools with `auto_approve` metadata (the sub-agent auto-approve set).
    pub fn auto_approve_names(&self) -> Vec<String> {
        self.definitions()
            .filter(|d| d.meta.auto_approve)
            .map(|d| d.name.clone())
            .collect()
    }

    /// Names of tools available to the task sub-agent.
    pub fn task_agent_names(&self) -> Vec<String> {
        self.definitions()
            .filter(|d| d.meta.task_agent)
            .map(|d| d.name.clone())
            .collect()
    }

    /// Names of tools available to the plan sub-agent.
    pub fn agent_names(&self) -> Vec<String> {
        self.definitions()
            .filter(|d| d.meta.agent)
            .map(|d| d.name.clone())
            .collect()
    }

    /// Turns the argument text a model sent into a JSON object:
    /// empty (or `null`) → `{}`; a JSON object → itself; a bare string — not JSON at all, or
    /// a JSON string — → `{primary_key: string}` when the tool has a primary key; anything
    /// else → [`ArgumentError::Json`]. An unknown tool name → [`ArgumentError::UnknownTool`].
    pub fn parse_arguments(&self, name: &str, raw: &str) -> Result<Value, ArgumentError> {
        let tool = self.get(name).ok_or_else(|| ArgumentError::UnknownTool {
            name: name.to_owned(),
            available: self.names(),
        })?;
        let primary_key = tool.definition().meta.primary_key.as_deref();
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
                "read_file",
                "search",
                "write_file"
            ]
        );
        let specs = reg.specs();
        assert_eq!(specs.len(), 6);
        assert!(
            specs
                .iter()
                .all(|s| !s.description.is_empty() && s.parameters["type"] == "object")
        );
        assert_eq!(
            reg.auto_approve_names(),
            ["diff_file", "read_file", "search"]
        );
        assert_eq!(reg.agent_names(), ["diff_file", "read_file", "search"]);
        assert_eq!(reg.task_agent_names().len(), 6);
    }

    #[test]
    fn duplicate_registration_is_refused() {
        let mut reg = ToolRegistry::with_builtins().unwrap();
        let bash = reg.get("bash").unwrap();
        assert_eq!(
            reg.register(bash),
            Err(RegistryError::DuplicateTool("bash".into()))
        );
        assert_eq!(reg.len(), 6);
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
             bash, diff_file, edit_file, read_file, search, write_file"
        );
    }
}
