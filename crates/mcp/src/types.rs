//! Plain data the manager hands out: discovered tools/resources/prompts, call results,
//! status and counts. Built from the wire JSON, so they do not depend on `rmcp`'s types.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

/// `mcp__{server}__{tool}`, with characters outside `[A-Za-z0-9_-]` in the tool name
/// replaced by `_` (function names must match that set in OpenAI-compatible APIs).
pub fn qualified_name(server: &str, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("mcp__{server}__{clean}")
}

/// The behaviour hints a server gave for a tool (hints only: never trusted for approval).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct McpToolAnnotations {
    /// A human-readable title.
    pub title: Option<String>,
    /// The tool does not modify its environment.
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates.
    pub destructive_hint: Option<bool>,
    /// Repeating a call with the same arguments has no further effect.
    pub idempotent_hint: Option<bool>,
    /// The tool talks to an open world (the internet …).
    pub open_world_hint: Option<bool>,
}

/// A tool discovered on a server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpTool {
    /// `mcp__{server}__{name}` (see [`qualified_name`]).
    pub qualified_name: String,
    /// The server's configured name.
    pub server: String,
    /// The tool's own name on that server (what `tools/call` sends).
    pub name: String,
    /// The server's description (may be empty).
    pub description: String,
    /// The JSON schema of the arguments (`{"type":"object","properties":{}}` when absent).
    pub input_schema: Arc<Value>,
    /// The server's hints.
    pub annotations: McpToolAnnotations,
    /// False unless the server is configured with `auto_approve = true`.
    pub auto_approve: bool,
}

impl McpTool {
    /// The description as sent to the model: `[MCP: {server}] {description}`.
    pub fn prefixed_description(&self) -> String {
        if self.description.is_empty() {
            format!("[MCP: {}]", self.server)
        } else {
            format!("[MCP: {}] {}", self.server, self.description)
        }
    }

    /// Whether a call needs human approval (true unless the server is auto-approved).
    pub fn needs_approval(&self) -> bool {
        !self.auto_approve
    }

    pub(crate) fn from_wire(server: &str, auto_approve: bool, tool: &Value) -> Option<Self> {
        let name = tool.get("name")?.as_str()?.to_owned();
        let description = str_field(tool, "description").unwrap_or_default();
        let schema = match tool.get("inputSchema") {
            Some(Value::Object(o)) => Value::Object(o.clone()),
            _ => empty_schema(),
        };
        let a = tool.get("annotations");
        let hint = |k: &str| a.and_then(|a| a.get(k)).and_then(Value::as_bool);
        Some(Self {
            qualified_name: qualified_name(server, &name),
            server: server.to_owned(),
            description,
            input_schema: Arc::new(schema),
            annotations: McpToolAnnotations {
                title: a
                    .and_then(|a| str_field(a, "title"))
                    .or_else(|| str_field(tool, "title")),
                read_only_hint: hint("readOnlyHint"),
                destructive_hint: hint("destructiveHint"),
                idempotent_hint: hint("idempotentHint"),
                open_world_hint: hint("openWorldHint"),
            },
            name,
            auto_approve,
        })
    }
}

/// A concrete resource a server lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpResource {
    /// The server.
    pub server: String,
    /// The URI (what `resources/read` takes).
    pub uri: String,
    /// Its name.
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
    /// Its MIME type, when given.
    pub mime_type: Option<String>,
}

impl McpResource {
    pub(crate) fn from_wire(server: &str, v: &Value) -> Option<Self> {
        let uri = str_field(v, "uri")?;
        Some(Self {
            server: server.to_owned(),
            name: str_field(v, "name").unwrap_or_else(|| uri.clone()),
            uri,
            description: str_field(v, "description").unwrap_or_default(),
            mime_type: str_field(v, "mimeType"),
        })
    }
}

/// A resource template (`uriTemplate` like `file:///{path}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpResourceTemplate {
    /// The server.
    pub server: String,
    /// The RFC 6570 template.
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
    /// Its MIME type, when given.
    pub mime_type: Option<String>,
}

impl McpResourceTemplate {
    pub(crate) fn from_wire(server: &str, v: &Value) -> Option<Self> {
        let uri_template = str_field(v, "uriTemplate")?;
        Some(Self {
            server: server.to_owned(),
            name: str_field(v, "name").unwrap_or_else(|| uri_template.clone()),
            uri_template,
            description: str_field(v, "description").unwrap_or_default(),
            mime_type: str_field(v, "mimeType"),
        })
    }

    /// The part before the first `{`: URIs starting with it may belong to this template.
    pub fn static_prefix(&self) -> &str {
        self.uri_template
            .split('{')
            .next()
            .unwrap_or(self.uri_template.as_str())
    }
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpPromptArgument {
    /// Its name.
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
    /// Whether it must be given.
    pub required: bool,
}

/// A prompt a server offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpPrompt {
    /// `mcp__{server}__{name}`.
    pub qualified_name: String,
    /// The server.
    pub server: String,
    /// The prompt's own name.
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
    /// Its arguments.
    pub arguments: Vec<McpPromptArgument>,
}

impl McpPrompt {
    pub(crate) fn from_wire(server: &str, v: &Value) -> Option<Self> {
        let name = str_field(v, "name")?;
        let arguments = v
            .get("arguments")
            .and_then(Value::as_array)
            .map(|args| {
                args.iter()
                    .filter_map(|a| {
                        Some(McpPromptArgument {
                            name: str_field(a, "name")?,
                            description: str_field(a, "description").unwrap_or_default(),
                            required: a.get("required").and_then(Value::as_bool).unwrap_or(false),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            qualified_name: qualified_name(server, &name),
            server: server.to_owned(),
            description: str_field(v, "description").unwrap_or_default(),
            name,
            arguments,
        })
    }
}

/// The result of `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpToolResult {
    /// The text for the model: text items joined by newlines, binary items as
    /// `[<mime> data, <n> bytes]`, `(no output)` when empty.
    pub text: String,
    /// The server flagged the result as an error (`isError`).
    pub is_error: bool,
    /// The raw content items.
    pub content: Vec<Value>,
    /// `structuredContent`, when the server sent it.
    pub structured_content: Option<Value>,
}

impl McpToolResult {
    pub(crate) fn from_wire(v: &Value) -> Self {
        let content: Vec<Value> = v
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let structured_content = v.get("structuredContent").filter(|s| !s.is_null()).cloned();
        let mut parts: Vec<String> = content.iter().filter_map(render_content).collect();
        if parts.is_empty()
            && let Some(s) = &structured_content
        {
            parts.push(s.to_string());
        }
        let text = if parts.is_empty() {
            "(no output)".to_owned()
        } else {
            parts.join("\n")
        };
        Self {
            text,
            is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
            content,
            structured_content,
        }
    }
}

/// The result of `resources/read`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpResourceContents {
    /// Text contents joined by newlines, blobs as their base64 string,
    /// `(empty resource)` when there is nothing.
    pub text: String,
    /// The raw contents.
    pub contents: Vec<Value>,
}

impl McpResourceContents {
    pub(crate) fn from_wire(v: &Value) -> Self {
        let contents: Vec<Value> = v
            .get("contents")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let parts: Vec<String> = contents
            .iter()
            .filter_map(|c| str_field(c, "text").or_else(|| str_field(c, "blob")))
            .collect();
        Self {
            text: if parts.is_empty() {
                "(empty resource)".to_owned()
            } else {
                parts.join("\n")
            },
            contents,
        }
    }
}

/// One message of a rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpPromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// Its text (non-text content rendered as for tool results).
    pub text: String,
}

/// The result of `prompts/get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpPromptResult {
    /// The prompt's description, when given.
    pub description: Option<String>,
    /// The messages.
    pub messages: Vec<McpPromptMessage>,
    /// The messages rendered as `[<role>]: <text>`, separated by blank lines.
    pub text: String,
}

impl McpPromptResult {
    pub(crate) fn from_wire(v: &Value) -> Self {
        let messages: Vec<McpPromptMessage> = v
            .get("messages")
            .and_then(Value::as_array)
            .map(|ms| {
                ms.iter()
                    .map(|m| McpPromptMessage {
                        role: str_field(m, "role").unwrap_or_else(|| "user".into()),
                        text: m
                            .get("content")
                            .map(|c| match c {
                                Value::Array(items) => items
                                    .iter()
                                    .filter_map(render_content)
                                    .collect::<Vec<_>>()
                                    .join("\n"),
                                one => render_content(one).unwrap_or_default(),
                            })
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let text = messages
            .iter()
            .map(|m| format!("[{}]: {}", m.role, m.text))
            .collect::<Vec<_>>()
            .join("\n\n");
        Self {
            description: str_field(v, "description"),
            messages,
            text,
        }
    }
}

/// How a server is doing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServerState {
    /// The first connection attempt is under way.
    Connecting,
    /// Connected and discovered.
    Ready,
    /// Not connected; retried in the background with a bounded backoff. Its tools are not
    /// offered.
    Failed {
        /// Why (the last attempt's error).
        reason: String,
    },
    /// The connection was lost and is being re-established; its last known tools are
    /// still offered (a call waits for the reconnect, bounded).
    Reconnecting {
        /// Consecutive failed attempts so far.
        attempt: u32,
    },
}

impl ServerState {
    /// `connecting`, `ready`, `failed: …` or `reconnecting (attempt n)`.
    pub fn describe(&self) -> String {
        match self {
            Self::Connecting => "connecting".into(),
            Self::Ready => "ready".into(),
            Self::Failed { reason } => format!("failed: {reason}"),
            Self::Reconnecting { attempt } => format!("reconnecting (attempt {attempt})"),
        }
    }
}

/// Per-server status, as `/v1/api/_internal/mcp-status` shows it. Serializes with the
/// v0.9.6 keys (`connected`, `tools`, `resources`, `prompts`, `error`, `transport`,
/// `command`, `url`) plus `state` (and `reason`/`attempt`), `resource_templates`,
/// `reconnects` and `server_info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerStatus {
    /// The state.
    #[serde(flatten)]
    pub state: ServerState,
    /// `state == Ready`.
    pub connected: bool,
    /// Tools offered.
    pub tools: usize,
    /// Concrete resources.
    pub resources: usize,
    /// Resource templates.
    pub resource_templates: usize,
    /// Prompts.
    pub prompts: usize,
    /// The last error (connection or discovery), at most 256 characters; empty if none.
    pub error: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// The command line (stdio), else empty.
    pub command: String,
    /// The URL (http), else empty.
    pub url: String,
    /// How many times the connection was re-established after being lost.
    pub reconnects: u64,
    /// `name version` the server reported, when connected once.
    pub server_info: Option<String>,
}

/// Totals for `/health` (`mcp: {servers, resources, prompts}`) and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct McpCounts {
    /// Configured servers.
    pub servers: usize,
    /// Servers currently ready.
    pub connected: usize,
    /// Servers with a recorded error.
    pub errors: usize,
    /// Concrete resources plus templates over all offered servers.
    pub resources: usize,
    /// Prompts over all offered servers.
    pub prompts: usize,
    /// Tools over all offered servers.
    pub tools: usize,
}

pub(crate) fn empty_schema() -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::String("object".into()));
    m.insert("properties".into(), Value::Object(Map::new()));
    Value::Object(m)
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// One content item as text: `text`; binary as `[<mime> data, <n> bytes]`; embedded
/// resources by their text; links by their URI.
fn render_content(item: &Value) -> Option<String> {
    match item.get("type").and_then(Value::as_str) {
        Some("text") => str_field(item, "text"),
        Some("image" | "audio") => {
            let mime = str_field(item, "mimeType").unwrap_or_else(|| "binary".into());
            let n = item
                .get("data")
                .and_then(Value::as_str)
                .map(base64_decoded_len)
                .unwrap_or(0);
            Some(format!("[{mime} data, {n} bytes]"))
        }
        Some("resource") => {
            let r = item.get("resource")?;
            str_field(r, "text").or_else(|| {
                let mime = str_field(r, "mimeType").unwrap_or_else(|| "binary".into());
                let n = r
                    .get("blob")
                    .and_then(Value::as_str)
                    .map(base64_decoded_len)
                    .unwrap_or(0);
                Some(format!("[{mime} data, {n} bytes]"))
            })
        }
        Some("resource_link") => {
            let uri = str_field(item, "uri")?;
            Some(match str_field(item, "name") {
                Some(name) => format!("[resource: {name} {uri}]"),
                None => format!("[resource: {uri}]"),
            })
        }
        _ => str_field(item, "text"),
    }
}

fn base64_decoded_len(s: &str) -> usize {
    let s = s.trim_end_matches('=');
    s.len() * 3 / 4
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn tool_results_become_text() {
        let r = McpToolResult::from_wire(&json!({
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "mimeType": "image/png", "data": "AAAA"},
                {"type": "text", "text": "b"}
            ],
            "isError": true
        }));
        assert_eq!(r.text, "a\n[image/png data, 3 bytes]\nb");
        assert!(r.is_error);
        let empty = McpToolResult::from_wire(&json!({"content": []}));
        assert_eq!(empty.text, "(no output)");
        assert!(!empty.is_error);
        let structured =
            McpToolResult::from_wire(&json!({"content": [], "structuredContent": {"x": 1}}));
        assert_eq!(structured.text, r#"{"x":1}"#);
    }

    #[test]
    fn qualified_names_replace_characters_functions_cannot_have() {
        assert_eq!(qualified_name("fs", "read_file"), "mcp__fs__read_file");
        assert_eq!(
            qualified_name("gh", "repo.search/v2"),
            "mcp__gh__repo_search_v2"
        );
    }

    #[test]
    fn prompts_render_role_and_text() {
        let r = McpPromptResult::from_wire(&json!({
            "description": "d",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "hi"}},
                {"role": "assistant", "content": {"type": "text", "text": "yo"}}
            ]
        }));
        assert_eq!(r.text, "[user]: hi\n\n[assistant]: yo");
        assert_eq!(r.description.as_deref(), Some("d"));
    }

    #[test]
    fn missing_schema_becomes_an_empty_object_schema() {
        let t = McpTool::from_wire("s", false, &json!({"name": "t"})).unwrap();
        assert_eq!(*t.input_schema, json!({"type": "object", "properties": {}}));
        assert!(t.needs_approval());
        assert_eq!(t.prefixed_description(), "[MCP: s]");
    }
}
