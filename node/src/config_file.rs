//! The node's `config.toml` (`--config`, `$TURNSTONE_CONFIG`, else
//! `~/.config/turnstone/config.toml` when it exists).
//!
//! One file may serve several services (the original shares it between the server, the
//! bridge and the console), so unknown *tables* are ignored; inside the tables the node reads,
//! an unknown key is an error that names it. What it reads:
//!
//! ```toml
//! [server]                      # what flags and env do not say
//! node_id = "node-a"
//! max_workstreams = 50
//! cwd = "/srv/work"
//!
//! [models.local]                # the model registry (turnstone-llm): aliases, fallback
//! provider = "openai"
//! base_url = "http://127.0.0.1:8000/v1"
//! model = "qwen"
//! [models.claude]
//! provider = "anthropic"
//! model = "claude-sonnet-4-5"
//! api_key_env = "ANTHROPIC_API_KEY"
//! [model]
//! default = "local"
//! fallback = ["claude"]
//!
//! [mcp.servers.fs]              # MCP servers (turnstone-mcp)
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/work"]
//!
//! [tools]                       # web tools
//! allow_private_network = false
//! searxng_url = "http://127.0.0.1:8888"
//! [tools.notify.ops]
//! url = "https://hooks.example/notify"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use turnstone_llm::{ModelEntry, ModelSection, RegistryConfig};

/// What the node takes from its config file.
#[derive(Debug, Clone, Default)]
pub struct ServerFile {
    pub path: Option<PathBuf>,
    pub server: ServerSection,
    pub registry: Option<RegistryConfig>,
    pub mcp_servers: Vec<turnstone_mcp::McpServerConfig>,
    pub tools: ToolsSection,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub node_id: Option<String>,
    pub max_workstreams: Option<usize>,
    pub cwd: Option<PathBuf>,
    pub approval_timeout: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    #[serde(default)]
    pub allow_private_network: bool,
    pub searxng_url: Option<String>,
    /// `mcp:<server>:<tool>` or absent (SearxNG when `searxng_url` is set).
    pub search_backend: Option<String>,
    #[serde(default)]
    pub notify: BTreeMap<String, NotifyTargetEntry>,
    /// Turn the web tools off entirely (on by default).
    #[serde(default)]
    pub disable_web: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyTargetEntry {
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// A config file problem; the message names the file and the key.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigFileError {
    pub path: String,
    pub message: String,
}

impl ServerFile {
    /// The file to read: an explicit path (must exist), else the default when present.
    pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(p) = explicit {
            return Some(p.to_path_buf());
        }
        let home = std::env::var_os("HOME")?;
        let default = PathBuf::from(home).join(".config/turnstone/config.toml");
        default.is_file().then_some(default)
    }

    pub fn load(path: Option<&Path>) -> Result<Self, ConfigFileError> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path).map_err(|e| ConfigFileError {
            path: path.display().to_string(),
            message: format!("cannot read: {e}"),
        })?;
        let mut file = Self::parse(&text).map_err(|message| ConfigFileError {
            path: path.display().to_string(),
            message,
        })?;
        file.path = Some(path.to_path_buf());
        Ok(file)
    }

    /// Parses the text of a config file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let doc: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let section =
            |name: &str| -> Result<Option<toml::Value>, String> { Ok(doc.get(name).cloned()) };
        let server = match section("server")? {
            Some(v) => v.try_into().map_err(|e| format!("[server]: {e}"))?,
            None => ServerSection::default(),
        };
        let tools = match section("tools")? {
            Some(v) => v.try_into().map_err(|e| format!("[tools]: {e}"))?,
            None => ToolsSection::default(),
        };
        let models: Option<BTreeMap<String, ModelEntry>> = match section("models")? {
            Some(v) => Some(v.try_into().map_err(|e| format!("[models]: {e}"))?),
            None => None,
        };
        let model: ModelSection = match section("model")? {
            Some(v) => v.try_into().map_err(|e| format!("[model]: {e}"))?,
            None => ModelSection::default(),
        };
        let registry = models.map(|models| RegistryConfig { models, model });
        let mcp_servers = if doc.contains_key("mcp") {
            turnstone_mcp::parse_toml_config(text).map_err(|e| e.to_string())?
        } else {
            Vec::new()
        };
        Ok(Self {
            path: None,
            server,
            registry,
            mcp_servers,
            tools,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_tables_and_ignores_other_services_tables() {
        let f = ServerFile::parse(
            r#"
[bridge]
server_url = "http://x"
[redis]
host = "r"
[server]
node_id = "n1"
max_workstreams = 7
[models.local]
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
[model]
default = "local"
[mcp.servers.fs]
command = "echo"
[tools]
allow_private_network = true
[tools.notify.ops]
url = "http://127.0.0.1:9/hook"
"#,
        )
        .unwrap();
        assert_eq!(f.server.node_id.as_deref(), Some("n1"));
        assert_eq!(f.server.max_workstreams, Some(7));
        let reg = f.registry.unwrap();
        assert_eq!(reg.model.default.as_deref(), Some("local"));
        assert_eq!(f.mcp_servers.len(), 1);
        assert!(f.tools.allow_private_network);
        assert_eq!(f.tools.notify["ops"].url, "http://127.0.0.1:9/hook");
    }

    #[test]
    fn an_unknown_key_is_named() {
        let err = ServerFile::parse("[server]\nnode_idd = \"x\"\n").unwrap_err();
        assert!(
            err.contains("[server]") && err.contains("node_idd"),
            "{err}"
        );
        let err = ServerFile::parse("[tools]\nallow_private = true\n").unwrap_err();
        assert!(err.contains("allow_private"), "{err}");
        let err = ServerFile::parse("[mcp.servers.\"a__b\"]\ncommand = \"x\"\n").unwrap_err();
        assert!(err.contains("a__b"), "{err}");
        assert!(ServerFile::parse("not toml [").is_err());
    }
}
