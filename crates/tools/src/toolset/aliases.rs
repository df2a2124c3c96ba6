//! Replay-only aliases (seed 004): legacy spellings of the older tool set that saved
//! transcripts may still call. Each executes its canonical tool with translated arguments;
//! none is ever advertised (tool array, catalog) or searchable (`tool_search`), and the
//! registry refuses to register a tool under one of these names. Any other unknown name fails
//! with `tool 'X' is not registered` — there is no fuzzy step.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolMeta, ToolOutput};

/// A legacy name and how its arguments become the canonical tool's.
#[derive(Debug)]
pub struct Alias {
    /// The legacy name (`remember`).
    pub legacy: &'static str,
    /// The canonical tool it executes (`memory`).
    pub canonical: &'static str,
    /// The legacy argument taken from a bare string.
    pub primary_key: &'static str,
    translate: fn(&Map<String, Value>) -> Result<Value, String>,
}

/// Every replay-only alias (node spec §5.3: `task`→`task_agent`, `plan`→`plan_agent`,
/// `remember`/`forget` folded into `memory`).
pub const LEGACY_ALIASES: &[Alias] = &[
    Alias {
        legacy: "forget",
        canonical: "memory",
        primary_key: "key",
        translate: forget,
    },
    Alias {
        legacy: "plan",
        canonical: "plan_agent",
        primary_key: "prompt",
        translate: plan,
    },
    Alias {
        legacy: "remember",
        canonical: "memory",
        primary_key: "key",
        translate: remember,
    },
    Alias {
        legacy: "task",
        canonical: "task_agent",
        primary_key: "prompt",
        translate: task,
    },
];

/// The alias of this exact legacy name.
pub fn alias(name: &str) -> Option<&'static Alias> {
    LEGACY_ALIASES.iter().find(|a| a.legacy == name)
}

fn string<'a>(args: &'a Map<String, Value>, alias: &str, key: &str) -> Result<&'a str, String> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(Value::String(_)) => Err(format!("Error: {alias}: '{key}' must not be empty")),
        Some(Value::Null) | None => {
            Err(format!("Error: {alias}: missing required argument '{key}'"))
        }
        Some(_) => Err(format!("Error: {alias}: '{key}' must be a string")),
    }
}

/// `remember {key, value}` → `memory {action: save, name, content, description}`.
fn remember(args: &Map<String, Value>) -> Result<Value, String> {
    let key = string(args, "remember", "key")?;
    let value = string(args, "remember", "value")?;
    let description: String = value.chars().take(200).collect();
    Ok(json!({
        "action": "save",
        "name": key,
        "content": value,
        "description": description,
    }))
}

/// `forget {key}` → `memory {action: delete, name}`.
fn forget(args: &Map<String, Value>) -> Result<Value, String> {
    let key = string(args, "forget", "key")?;
    Ok(json!({"action": "delete", "name": key}))
}

/// `task {prompt}` → `task_agent {prompt}`.
fn task(args: &Map<String, Value>) -> Result<Value, String> {
    let prompt = string(args, "task", "prompt")?;
    Ok(json!({"prompt": prompt}))
}

/// `plan {prompt}` (or `goal`) → `plan_agent {goal}`.
fn plan(args: &Map<String, Value>) -> Result<Value, String> {
    let goal = if args.contains_key("goal") {
        string(args, "plan", "goal")?
    } else {
        string(args, "plan", "prompt")?
    };
    Ok(json!({"goal": goal}))
}

impl Alias {
    /// The canonical tool's arguments for legacy `args`.
    pub fn translate(&self, args: &Value) -> Result<Value, String> {
        match args {
            Value::Object(map) => (self.translate)(map),
            _ => Err(format!(
                "Error: {}: arguments must be a JSON object",
                self.legacy
            )),
        }
    }
}

/// A legacy name bound to its canonical tool: prepares by translating the arguments and
/// delegating, executes the canonical tool. Made by dispatch only; never in a registry.
pub struct AliasTool {
    alias: &'static Alias,
    canonical: Arc<dyn Tool>,
    definition: ToolDefinition,
}

impl std::fmt::Debug for AliasTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AliasTool")
            .field("legacy", &self.alias.legacy)
            .field("canonical", &self.alias.canonical)
            .finish()
    }
}

impl AliasTool {
    /// Binds `alias` to `canonical` (which must be the tool named `alias.canonical`).
    pub fn new(alias: &'static Alias, canonical: Arc<dyn Tool>) -> Self {
        let definition = ToolDefinition {
            name: alias.legacy.to_owned(),
            description: format!(
                "Replay-only alias of '{}'; never advertised.",
                alias.canonical
            ),
            parameters: json!({"type": "object", "properties": {}}),
            meta: ToolMeta {
                primary_key: Some(alias.primary_key.to_owned()),
                ..canonical.definition().meta.clone()
            },
        };
        Self {
            alias,
            canonical,
            definition,
        }
    }

    pub fn alias(&self) -> &'static Alias {
        self.alias
    }
}

#[async_trait]
impl Tool for AliasTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let translated = self.alias.translate(&args)?;
        self.canonical.prepare(translated, ctx)
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        out: &dyn OutputSink,
    ) -> ToolOutput {
        self.canonical.execute(prepared, ctx, out).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translations_match_the_renames() {
        let t = |name: &str, args: Value| alias(name).unwrap().translate(&args);
        assert_eq!(
            t("remember", json!({"key": "editor", "value": "uses vim"})).unwrap(),
            json!({"action": "save", "name": "editor", "content": "uses vim", "description": "uses vim"})
        );
        assert_eq!(
            t("forget", json!({"key": "editor"})).unwrap(),
            json!({"action": "delete", "name": "editor"})
        );
        assert_eq!(
            t("task", json!({"prompt": "count files"})).unwrap(),
            json!({"prompt": "count files"})
        );
        assert_eq!(
            t("plan", json!({"prompt": "ship it"})).unwrap(),
            json!({"goal": "ship it"})
        );
        assert_eq!(
            t("remember", json!({"key": "k"})).unwrap_err(),
            "Error: remember: missing required argument 'value'"
        );
        assert_eq!(
            t("forget", json!({"key": 3})).unwrap_err(),
            "Error: forget: 'key' must be a string"
        );
        assert!(t("task", json!("x")).is_err());
        assert!(alias("Remember").is_none());
        assert!(alias("memory").is_none());
    }
}
