//! `read_resource` and `use_prompt`: the model's way to MCP resources and prompts (seed 000
//! "MCP Resources", "MCP Prompts"), node-side tools over the [`McpManager`], registered in
//! the live registry only when MCP servers are configured.
//!
//! Both need approval (they reach external servers) and are in the task-agent set. Their
//! approval labels carry the resource URI or the prompt name, so an "always" decision covers
//! that one resource or prompt, not every read.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use turnstone_mcp::{McpManager, McpPrompt};
use turnstone_tools::{
    OutputSink, Prepared, Provenance, RegistryError, Tool, ToolContext, ToolDefinition, ToolOutput,
    ToolRegistry, parse_definition, truncate_output,
};

const READ_RESOURCE_SCHEMA: &str = r#"{
  "name": "read_resource",
  "description": "Read a resource (a file, a database row, an API response) from a connected MCP server by its URI. The resources listed by the servers, and URIs matching their templates, can be read. Text comes back as text; binary contents are described, not dumped.",
  "parameters": {
    "type": "object",
    "properties": {
      "uri": { "type": "string", "description": "The resource URI to read." }
    },
    "required": ["uri"]
  },
  "agent": false,
  "task_agent": true,
  "auto_approve": false,
  "primary_key": "uri"
}"#;

const USE_PROMPT_SCHEMA: &str = r#"{
  "name": "use_prompt",
  "description": "Invoke a prompt template of a connected MCP server by name (e.g. mcp__server__prompt_name) with its arguments, and get the expanded messages back as [role]: content blocks.",
  "parameters": {
    "type": "object",
    "properties": {
      "name": { "type": "string", "description": "The prompt name (e.g. mcp__server__prompt_name)." },
      "arguments": {
        "type": "object",
        "description": "Key-value argument pairs for the prompt. Values must be strings.",
        "additionalProperties": { "type": "string" }
      }
    },
    "required": ["name"]
  },
  "agent": false,
  "task_agent": true,
  "auto_approve": false,
  "primary_key": "name"
}"#;

/// How many known names an "unknown" error lists.
const LISTED: usize = 8;

/// Registers `read_resource` and `use_prompt` over `manager` in `registry` (provenance
/// built-in: they are not tools of one server).
pub fn register(manager: &Arc<McpManager>, registry: &ToolRegistry) -> Result<(), RegistryError> {
    registry.add(
        Arc::new(ReadResourceTool::new(manager.clone())?),
        Provenance::Builtin,
    )?;
    registry.add(
        Arc::new(UsePromptTool::new(manager.clone())?),
        Provenance::Builtin,
    )
}

/// `read_resource(uri)`.
pub struct ReadResourceTool {
    definition: ToolDefinition,
    manager: Arc<McpManager>,
}

impl std::fmt::Debug for ReadResourceTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadResourceTool").finish_non_exhaustive()
    }
}

impl ReadResourceTool {
    pub fn new(manager: Arc<McpManager>) -> Result<Self, RegistryError> {
        Ok(Self {
            definition: parse_definition(READ_RESOURCE_SCHEMA)?,
            manager,
        })
    }

    /// The error for a URI no server offers: how to find one.
    fn unknown(&self, uri: &str) -> String {
        let resources = self.manager.resources();
        let templates = self.manager.resource_templates();
        if resources.is_empty() && templates.is_empty() {
            return format!(
                "Error: unknown resource URI '{uri}': no connected MCP server offers resources"
            );
        }
        let mut text = format!(
            "Error: unknown resource URI '{uri}': no MCP server lists it or has a template it \
             matches."
        );
        if !resources.is_empty() {
            let shown: Vec<&str> = resources
                .iter()
                .take(LISTED)
                .map(|r| r.uri.as_str())
                .collect();
            text.push_str(&format!(" known resources: {}", shown.join(", ")));
            if resources.len() > LISTED {
                text.push_str(&format!(" … ({} in all)", resources.len()));
            }
            text.push('.');
        }
        if !templates.is_empty() {
            let shown: Vec<&str> = templates
                .iter()
                .take(LISTED)
                .map(|t| t.uri_template.as_str())
                .collect();
            text.push_str(&format!(" URI templates: {}.", shown.join(", ")));
        }
        text
    }
}

#[async_trait]
impl Tool for ReadResourceTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        let uri = required_string(&args, "uri")?;
        let server = self
            .manager
            .resource_server(&uri)
            .ok_or_else(|| self.unknown(&uri))?;
        Ok(Prepared {
            header: format!("\u{2699} read_resource: {uri} ({server})"),
            preview: String::new(),
            needs_approval: true,
            approval_label: format!("read_resource:{uri}"),
            args: json!({ "uri": uri, "server": server }),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let field = |k: &str| prepared.text(k).unwrap_or("");
        let (uri, server) = (field("uri"), field("server"));
        match self.manager.read_resource(server, uri).await {
            Ok(contents) => {
                let text = render_contents(&contents.contents);
                ToolOutput::ok(truncate_output(&text, ctx.truncation_limit))
            }
            Err(e) => ToolOutput::error(format!("Error: reading {uri} from {server}: {e}")),
        }
    }
}

/// Text items as they are, binary items as `[binary <mime>, N bytes]`.
fn render_contents(contents: &[Value]) -> String {
    let parts: Vec<String> = contents
        .iter()
        .filter_map(|c| {
            if let Some(text) = c.get("text").and_then(Value::as_str) {
                return Some(text.to_string());
            }
            let blob = c.get("blob").and_then(Value::as_str)?;
            let mime = c
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream");
            Some(format!("[binary {mime}, {} bytes]", base64_len(blob)))
        })
        .collect();
    if parts.is_empty() {
        "(empty resource)".to_string()
    } else {
        parts.join("\n")
    }
}

/// Decoded length of base64 text (padding and whitespace ignored).
fn base64_len(b64: &str) -> usize {
    let n = b64
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    n * 3 / 4
}

/// `use_prompt(name, arguments)`.
pub struct UsePromptTool {
    definition: ToolDefinition,
    manager: Arc<McpManager>,
}

impl std::fmt::Debug for UsePromptTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsePromptTool").finish_non_exhaustive()
    }
}

impl UsePromptTool {
    pub fn new(manager: Arc<McpManager>) -> Result<Self, RegistryError> {
        Ok(Self {
            definition: parse_definition(USE_PROMPT_SCHEMA)?,
            manager,
        })
    }

    /// The prompt of a qualified name, or of a bare name one server alone offers.
    fn find(&self, name: &str) -> Result<McpPrompt, String> {
        if let Some(p) = self.manager.prompt(name) {
            return Ok(p);
        }
        let prompts = self.manager.prompts();
        let bare: Vec<&McpPrompt> = prompts.iter().filter(|p| p.name == name).collect();
        if let [only] = bare.as_slice() {
            return Ok((*only).clone());
        }
        if prompts.is_empty() {
            return Err(format!(
                "Error: unknown prompt '{name}': no connected MCP server offers prompts"
            ));
        }
        let shown: Vec<&str> = prompts
            .iter()
            .take(LISTED)
            .map(|p| p.qualified_name.as_str())
            .collect();
        let more = if prompts.len() > LISTED {
            format!(" … ({} in all)", prompts.len())
        } else {
            String::new()
        };
        Err(format!(
            "Error: unknown prompt '{name}'. known prompts: {}{more}",
            shown.join(", ")
        ))
    }
}

#[async_trait]
impl Tool for UsePromptTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        let name = required_string(&args, "name")?;
        let arguments = match args.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err("Error: argument 'arguments' must be a JSON object".into()),
        };
        if let Some((key, _)) = arguments
            .iter()
            .find(|(_, v)| matches!(v, Value::Object(_) | Value::Array(_)))
        {
            return Err(format!(
                "Error: prompt argument '{key}' must be a string, not an object or array"
            ));
        }
        let prompt = self.find(&name)?;
        let missing: Vec<String> = prompt
            .arguments
            .iter()
            .filter(|a| a.required)
            .filter(|a| {
                arguments
                    .get(&a.name)
                    .is_none_or(|v| v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty()))
            })
            .map(|a| {
                if a.description.is_empty() {
                    format!("'{}'", a.name)
                } else {
                    format!("'{}' ({})", a.name, a.description)
                }
            })
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "Error: prompt '{}' needs the argument{} {}",
                prompt.qualified_name,
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            ));
        }
        let shown = Value::Object(arguments.clone()).to_string();
        Ok(Prepared {
            header: format!("\u{2699} use_prompt: {} {shown}", prompt.qualified_name),
            preview: String::new(),
            needs_approval: true,
            approval_label: format!("use_prompt:{}", prompt.qualified_name),
            args: json!({
                "name": prompt.qualified_name,
                "server": prompt.server,
                "prompt": prompt.name,
                "arguments": arguments,
            }),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let field = |k: &str| prepared.text(k).unwrap_or("");
        let arguments = prepared
            .args
            .get("arguments")
            .cloned()
            .unwrap_or(Value::Null);
        match self
            .manager
            .get_prompt(field("server"), field("prompt"), arguments)
            .await
        {
            Ok(result) if result.messages.is_empty() => {
                ToolOutput::ok("(the prompt expanded to no messages)")
            }
            Ok(result) => ToolOutput::ok(truncate_output(&result.text, ctx.truncation_limit)),
            Err(e) => ToolOutput::error(format!("Error: prompt {}: {e}", field("name"))),
        }
    }
}

/// A required, non-blank string argument (trimmed).
fn required_string(args: &Value, key: &str) -> Result<String, String> {
    let Some(map) = args.as_object() else {
        return Err("Error: arguments must be a JSON object".into());
    };
    match map.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::String(_)) => Err(format!("Error: argument '{key}' must not be empty")),
        None | Some(Value::Null) => Err(format!("Error: missing required argument '{key}'")),
        Some(_) => Err(format!("Error: argument '{key}' must be a string")),
    }
}

/// Prompts listed in the system prompt's MCP catalog at most.
pub const PROMPT_CATALOG_MAX: usize = 30;

/// The `<mcp-prompts>` section of every workstream's system prompt: up to
/// [`PROMPT_CATALOG_MAX`] prompts the MCP servers offer now (qualified name, description,
/// arguments, `*` = required), so the model can find them for `use_prompt`. Read at each turn
/// start (the engine freezes it for the turn).
pub struct PromptCatalog(pub Arc<McpManager>);

impl turnstone_engine::SystemSection for PromptCatalog {
    fn section(&self) -> Option<String> {
        let mut prompts = self.0.prompts();
        if prompts.is_empty() {
            return None;
        }
        prompts.sort_by(|a, b| a.qualified_name.cmp(&b.qualified_name));
        let total = prompts.len();
        let mut out = String::from(
            "<mcp-prompts>\nPrompt templates from MCP servers; run one with the use_prompt tool \
             (name, arguments).\n",
        );
        for p in prompts.iter().take(PROMPT_CATALOG_MAX) {
            let args: Vec<String> = p
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        format!("{}*", a.name)
                    } else {
                        a.name.clone()
                    }
                })
                .collect();
            out.push_str("- ");
            out.push_str(&p.qualified_name);
            if !p.description.trim().is_empty() {
                out.push_str(": ");
                out.push_str(p.description.trim());
            }
            if !args.is_empty() {
                out.push_str(&format!(" (arguments: {})", args.join(", ")));
            }
            out.push('\n');
        }
        if total > PROMPT_CATALOG_MAX {
            out.push_str(&format!("(and {} more)\n", total - PROMPT_CATALOG_MAX));
        }
        out.push_str("</mcp-prompts>");
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_parse_with_task_agent_metadata() {
        for schema in [READ_RESOURCE_SCHEMA, USE_PROMPT_SCHEMA] {
            let def = parse_definition(schema).unwrap_or_else(|e| panic!("{e}"));
            assert!(def.meta.task_agent && !def.meta.auto_approve && !def.meta.agent);
        }
    }

    #[test]
    fn binary_contents_are_described() {
        let contents = vec![
            json!({"uri": "a", "text": "hello"}),
            json!({"uri": "b", "mimeType": "image/png", "blob": "aGVsbG8="}),
            json!({"uri": "c", "blob": "AAAA"}),
        ];
        assert_eq!(
            render_contents(&contents),
            "hello\n[binary image/png, 5 bytes]\n[binary application/octet-stream, 3 bytes]"
        );
        assert_eq!(render_contents(&[]), "(empty resource)");
    }
}
