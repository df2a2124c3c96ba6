//! Server configuration: `[mcp.servers.<name>]` tables in config.toml and the standard
//! `{"mcpServers": {...}}` JSON file (`--mcp-config`). Both shapes are the same per server:
//!
//! * stdio: `command`, `args` (list), `env` (table of strings), `cwd`;
//! * HTTP: `type = "http"` (or `"streamable-http"`/`"streamableHttp"`), `url`, `headers`;
//!   any entry with a `url` and no `command` is HTTP;
//! * optional for both: `auto_approve` (bool; MCP tools need approval unless true),
//!   `startup_timeout_secs`, `tool_timeout_secs` (numbers), `disabled` / `enabled` (bools;
//!   a disabled server is skipped).
//!
//! Server names must be non-empty, only `[A-Za-z0-9_-]`, without `__` (the delimiter of
//! `mcp__{server}__{tool}`) and not ending in `_` (which would make that name ambiguous).

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::McpConfigError;

/// Connect + initialize + first discovery must finish within this, unless configured.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// A `tools/call`, `resources/read` or `prompts/get` must finish within this, unless configured.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Headers the MCP transport sets itself; configuring them is refused.
const RESERVED_HEADERS: &[&str] = &["accept", "mcp-session-id", "last-event-id", "content-type"];

/// One configured MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerConfig {
    /// The validated name (the `{server}` in `mcp__{server}__{tool}`).
    pub name: String,
    /// How to reach it.
    pub transport: McpTransportConfig,
    /// When true, this server's tools are marked as not needing approval.
    pub auto_approve: bool,
    /// Bound on connect + initialize + discovery (also on each refresh).
    pub startup_timeout: Duration,
    /// Bound on each call.
    pub call_timeout: Duration,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum McpTransportConfig {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment, set on top of the allowed part of the node's environment
        /// (`turnstone_tools::ChildEnv`: `PATH`, `HOME`, `LANG`, … and `[tools] env_passthrough`).
        env: BTreeMap<String, String>,
        /// Working directory (the node's when absent).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint (`http://host:port/mcp`).
        url: String,
        /// Extra headers sent with every request (e.g. `Authorization`).
        headers: BTreeMap<String, String>,
    },
}

impl McpServerConfig {
    /// A stdio server with default options.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, McpConfigError> {
        let name = name.into();
        validate_server_name(&name)?;
        Ok(Self {
            name,
            transport: McpTransportConfig::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: BTreeMap::new(),
                cwd: None,
            },
            auto_approve: false,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        })
    }

    /// A streamable-HTTP server with default options.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Result<Self, McpConfigError> {
        let name = name.into();
        validate_server_name(&name)?;
        let url = url.into();
        validate_url(&name, &url)?;
        Ok(Self {
            name,
            transport: McpTransportConfig::Http {
                url,
                headers: BTreeMap::new(),
            },
            auto_approve: false,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        })
    }

    /// Parses one server's table (TOML converted to JSON, or the JSON file's entry).
    /// `Ok(None)` when the entry is disabled.
    pub fn from_value(name: &str, value: &Value) -> Result<Option<Self>, McpConfigError> {
        validate_server_name(name)?;
        let invalid = |reason: String| McpConfigError::InvalidServer {
            server: name.to_owned(),
            reason,
        };
        if !value.is_object() {
            return Err(invalid(format!(
                "expected a table with `command` or `url`, got {}",
                json_kind(value)
            )));
        }
        let raw: RawServer =
            serde_json::from_value(value.clone()).map_err(|e| invalid(e.to_string()))?;
        if raw.disabled == Some(true) || raw.enabled == Some(false) {
            return Ok(None);
        }
        let kind = raw.kind.as_deref().map(str::to_ascii_lowercase);
        let is_http = match kind.as_deref() {
            Some("http" | "streamable-http" | "streamable_http" | "streamablehttp") => true,
            Some("stdio") => false,
            Some("sse") => {
                return Err(invalid(
                    "type \"sse\" (the legacy HTTP+SSE transport) is not supported; use a streamable HTTP endpoint (type = \"http\")".into(),
                ));
            }
            Some(other) => {
                return Err(invalid(format!(
                    "unknown type {other:?} (expected \"stdio\" or \"http\")"
                )));
            }
            None => raw.command.is_none() && raw.url.is_some(),
        };
        let transport = if is_http {
            let url = raw
                .url
                .ok_or_else(|| invalid("an HTTP server needs a `url`".into()))?;
            validate_url(name, &url)?;
            let headers = raw.headers.unwrap_or_default();
            for (key, val) in &headers {
                validate_header(name, key, val)?;
            }
            McpTransportConfig::Http { url, headers }
        } else {
            let command = raw.command.ok_or_else(|| {
                invalid("needs a `command` (stdio) or a `url` (type = \"http\")".into())
            })?;
            if command.trim().is_empty() {
                return Err(invalid("`command` is empty".into()));
            }
            McpTransportConfig::Stdio {
                command,
                args: raw.args.unwrap_or_default(),
                env: raw.env.unwrap_or_default(),
                cwd: raw.cwd.map(PathBuf::from),
            }
        };
        Ok(Some(Self {
            name: name.to_owned(),
            transport,
            auto_approve: raw.auto_approve.unwrap_or(false),
            startup_timeout: seconds(name, "startup_timeout_secs", raw.startup_timeout_secs)?
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT),
            call_timeout: seconds(name, "tool_timeout_secs", raw.tool_timeout_secs)?
                .unwrap_or(DEFAULT_CALL_TIMEOUT),
        }))
    }

    /// `"stdio"` or `"http"`.
    pub fn transport_name(&self) -> &'static str {
        match self.transport {
            McpTransportConfig::Stdio { .. } => "stdio",
            McpTransportConfig::Http { .. } => "http",
        }
    }
}

/// Checks a server name: non-empty, `[A-Za-z0-9_-]` only, no `__`, not ending in `_`.
pub fn validate_server_name(name: &str) -> Result<(), McpConfigError> {
    let refuse = |reason: &str| {
        Err(McpConfigError::InvalidName {
            server: name.to_owned(),
            reason: reason.to_owned(),
        })
    };
    if name.is_empty() {
        return refuse("the name is empty");
    }
    if name.contains("__") {
        return refuse(
            "it contains '__', which is reserved as the delimiter in mcp__{server}__{tool}",
        );
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return refuse(&format!(
            "it contains {bad:?}; only letters, digits, '_' and '-' are allowed"
        ));
    }
    if name.ends_with('_') {
        return refuse("it ends with '_', which would make mcp__{server}__{tool} ambiguous");
    }
    Ok(())
}

/// Parses the servers of a config.toml document: its `[mcp.servers.<name>]` tables (no
/// `[mcp]` section → no servers). Sorted by name.
pub fn parse_toml_config(text: &str) -> Result<Vec<McpServerConfig>, McpConfigError> {
    let doc: toml::Table =
        toml::from_str(text).map_err(|e| McpConfigError::Parse(format!("config.toml: {e}")))?;
    let Some(mcp) = doc.get("mcp") else {
        return Ok(Vec::new());
    };
    let mcp = serde_json::to_value(mcp).map_err(|e| McpConfigError::Parse(e.to_string()))?;
    match mcp.get("servers") {
        None => Ok(Vec::new()),
        Some(servers) => parse_servers_value(servers),
    }
}

/// Parses a map of server name → server table (the value of `mcp.servers` in config.toml,
/// as a JSON value, or the `mcpServers` object of the JSON file). Sorted by name.
pub fn parse_servers_value(servers: &Value) -> Result<Vec<McpServerConfig>, McpConfigError> {
    let Some(map) = servers.as_object() else {
        return Err(McpConfigError::Parse(format!(
            "the MCP servers must be a table of name → server, got {}",
            json_kind(servers)
        )));
    };
    let mut out = Vec::with_capacity(map.len());
    for (name, value) in map {
        if let Some(config) = McpServerConfig::from_value(name, value)? {
            out.push(config);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Parses the standard `{"mcpServers": {...}}` JSON document (`"servers"` is accepted too).
pub fn parse_mcp_json(text: &str) -> Result<Vec<McpServerConfig>, McpConfigError> {
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| McpConfigError::Parse(format!("invalid JSON: {e}")))?;
    let Some(obj) = doc.as_object() else {
        return Err(McpConfigError::Parse(
            "expected a JSON object with \"mcpServers\"".into(),
        ));
    };
    match obj.get("mcpServers").or_else(|| obj.get("servers")) {
        Some(servers) => parse_servers_value(servers),
        None => Err(McpConfigError::Parse(
            "the JSON document has no \"mcpServers\" object".into(),
        )),
    }
}

/// Reads and parses an `--mcp-config` file.
pub fn load_mcp_json(path: impl Into<PathBuf>) -> Result<Vec<McpServerConfig>, McpConfigError> {
    let path = path.into();
    let text = std::fs::read_to_string(&path).map_err(|e| McpConfigError::Io {
        path: path.clone(),
        error: e.to_string(),
    })?;
    parse_mcp_json(&text).map_err(|e| match e {
        McpConfigError::Parse(m) => McpConfigError::Parse(format!("{}: {m}", path.display())),
        other => other,
    })
}

#[derive(Deserialize)]
struct RawServer {
    #[serde(rename = "type", alias = "transport", default)]
    kind: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    disabled: Option<bool>,
    enabled: Option<bool>,
    auto_approve: Option<bool>,
    startup_timeout_secs: Option<f64>,
    #[serde(alias = "timeout")]
    tool_timeout_secs: Option<f64>,
}

fn seconds(server: &str, field: &str, v: Option<f64>) -> Result<Option<Duration>, McpConfigError> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => Err(McpConfigError::InvalidServer {
            server: server.to_owned(),
            reason: format!("`{field}` must be between 0 and 86400 seconds, got {s}"),
        }),
    }
}

fn validate_url(server: &str, url: &str) -> Result<(), McpConfigError> {
    let ok = (url.starts_with("http://") || url.starts_with("https://"))
        && url.len() > "https://".len()
        && reqwest::Url::parse(url).is_ok();
    if ok {
        Ok(())
    } else {
        Err(McpConfigError::InvalidServer {
            server: server.to_owned(),
            reason: format!("`url` must be an http:// or https:// URL, got {url:?}"),
        })
    }
}

fn validate_header(server: &str, key: &str, value: &str) -> Result<(), McpConfigError> {
    let invalid = |reason: String| McpConfigError::InvalidServer {
        server: server.to_owned(),
        reason,
    };
    let name = reqwest::header::HeaderName::from_bytes(key.as_bytes()).map_err(|_| {
        invalid(format!(
            "header name {key:?} is not a valid HTTP header name"
        ))
    })?;
    if RESERVED_HEADERS.contains(&name.as_str()) {
        return Err(invalid(format!(
            "header {key:?} is set by the MCP transport and cannot be configured"
        )));
    }
    reqwest::header::HeaderValue::from_str(value).map_err(|_| {
        invalid(format!(
            "header {key:?} has a value that is not valid in HTTP"
        ))
    })?;
    Ok(())
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}
