//! Command-line flags and the optional TOML file of the `turnstone` client, layered with
//! [`turnstone_runtime::ConfigLoader`]: defaults, then the file (`--config`, else
//! `$TURNSTONE_CONFIG`, else `~/.config/turnstone/config.toml` when it exists), then
//! environment variables, then flags.
//!
//! ```toml
//! [api]
//! base_url = "http://127.0.0.1:8000/v1"   # omit for the built-in scripted model
//! api_key = "sk-…"
//!
//! [model]
//! name = "my-model"            # omit: the first model the endpoint lists
//! provider = "openai"          # or "anthropic" (key: --api-key, ANTHROPIC_API_KEY[_FILE])
//! temperature = 0.5
//! max_tokens = 32768
//! context_window = 0           # 0: ask the endpoint
//! reasoning_effort = "medium"
//!
//! [session]
//! instructions = "You are terse."
//!
//! [tools]
//! skip_permissions = false
//! cwd = "/path/to/project"
//! truncation = 0
//!
//! [log]
//! level = "warn"
//!
//! # The node's formats, read the same way (turnstone_node):
//! [models.fast]                # a model registry: `/model <alias>` switches
//! provider = "openai"
//! base_url = "http://127.0.0.1:8000/v1"
//! model = "small-model"
//! [mcp.servers.files]          # MCP servers (also --mcp-config mcp.json)
//! command = "mcp-server-filesystem"
//! args = ["/tmp"]
//! ```
//!
//! With `[models.*]` the registry's default alias is the model (`[model] default`,
//! `fallback` and `agent_model` as for the node) and `--base-url`/`--model` are not used.
//! The key comes from `--api-key`, else `TURNSTONE_API_KEY`, else the provider's own
//! (`OPENAI_API_KEY` or `ANTHROPIC_API_KEY`), each also as `*_FILE`, else `[api] api_key`;
//! it is never logged. With session persistence (the default) the client has the node's
//! `memory`, `recall`, `skill` and `watch` tools over its store (`TURNSTONE_WATCH_TICK_SECS`:
//! seconds between looks for due watches, default 15).
//!
//! Sections that other Turnstone programs read from a shared file (`server`, `database`,
//! `auth`, …) are accepted and ignored; any other unknown key is an error that names it.

use std::path::PathBuf;

use clap::Parser;
use serde::{Deserialize, Serialize};
use turnstone_engine::EngineConfig;
use turnstone_runtime::ConfigLoader;

use turnstone_llm::{ModelSection as RegistryModel, RegistryConfig};
use turnstone_mcp::McpServerConfig;
use turnstone_node::NodeError;
use turnstone_node::backend::{ModelTarget, check_provider, env_api_key};

/// `turnstone` command-line flags.
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "turnstone",
    version,
    about = "Turnstone terminal client: chat with a model that can use tools, in workstreams"
)]
pub struct CliArgs {
    /// OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1. Without one, the built-in
    /// scripted model is started in-process.
    #[arg(long)]
    pub base_url: Option<String>,
    /// Model name sent to the endpoint.
    #[arg(long)]
    pub model: Option<String>,
    /// API key for the endpoint (default: $TURNSTONE_API_KEY, then $OPENAI_API_KEY or, for
    /// anthropic, $ANTHROPIC_API_KEY; each also as `*_FILE`). Never logged.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Model provider: `openai` (any OpenAI-compatible endpoint) or `anthropic` (the
    /// Messages API; needs --model and a key).
    #[arg(long)]
    pub provider: Option<String>,
    /// MCP servers as a standard `{"mcpServers": {...}}` JSON file (added to the config
    /// file's `[mcp.servers.*]`).
    #[arg(long)]
    pub mcp_config: Option<PathBuf>,
    /// TOML configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Approve every tool call without asking.
    #[arg(long)]
    pub skip_permissions: bool,
    /// Working directory of the tools (default: the current directory).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Log level or filter directive (logs go to stderr; `RUST_LOG` wins).
    #[arg(long)]
    pub log_level: Option<String>,
    /// System instructions placed before the conversation.
    #[arg(long)]
    pub instructions: Option<String>,
    /// Sampling temperature.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Most tokens per reply.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Reasoning effort (low, medium, high).
    #[arg(long)]
    pub reasoning_effort: Option<String>,
    /// Context window in tokens (0: ask the endpoint).
    #[arg(long)]
    pub context_window: Option<u32>,
}

/// `[api]`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

/// `[model]`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    // The node's registry keys (used with `[models.*]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_model: Option<String>,
}

/// `[session]`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// `[tools]`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_permissions: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncation: Option<usize>,
}

/// `[log]`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
}

/// The whole file (and every layer above it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    pub api: ApiSection,
    pub model: ModelSection,
    pub session: SessionSection,
    pub tools: ToolsSection,
    pub log: LogSection,
    /// `[models.*]`: the model registry (the node's format).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<serde_json::Value>,
    /// `[mcp.servers.*]`: MCP servers (the node's format).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<serde_json::Value>,
    // Read by other Turnstone programs sharing the file; ignored here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oidc: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub console: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<serde_json::Value>,
}

/// Everything the client needs, resolved (`Debug` hides the API key).
#[derive(Clone, PartialEq)]
pub struct Settings {
    /// `None`: start the scripted model (`openai`), or Anthropic's API.
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// `None`: the first model the endpoint lists.
    pub model: Option<String>,
    pub provider: String,
    /// `[models.*]` and `[model]`: the model registry (it wins over the single endpoint).
    pub registry: Option<RegistryConfig>,
    /// `[mcp.servers.*]` plus `--mcp-config`.
    pub mcp_servers: Vec<McpServerConfig>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    pub context_window: u32,
    pub reasoning_effort: String,
    pub instructions: Option<String>,
    pub skip_permissions: bool,
    pub cwd: Option<PathBuf>,
    pub truncation: usize,
    pub log_level: String,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("provider", &self.provider)
            .field("registry", &self.registry.as_ref().map(|r| r.models.len()))
            .field("mcp_servers", &self.mcp_servers.len())
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// Model name used with the scripted model when none is configured.
pub const SCRIPTED_MODEL: &str = "fake-model";

impl Settings {
    /// Resolves flags, environment (`env`) and the config file.
    pub fn resolve(
        args: &CliArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, NodeError> {
        let (path, required) = match (&args.config, env("TURNSTONE_CONFIG")) {
            (Some(path), _) => (Some(path.clone()), true),
            (None, Some(path)) if !path.is_empty() => (Some(PathBuf::from(path)), true),
            _ => (
                env("HOME").map(|h| PathBuf::from(h).join(".config/turnstone/config.toml")),
                false,
            ),
        };
        let mut loader = ConfigLoader::new();
        if let Some(path) = path {
            loader = loader.file(path, required);
        }
        // The API key is not layered here: which variable holds it depends on the
        // provider (`env_api_key`).
        let file: FileConfig = loader
            .env_var("TURNSTONE_BASE_URL", "api.base_url")
            .env_var("TURNSTONE_MODEL", "model.name")
            .env_var("TURNSTONE_LOG_LEVEL", "log.level")
            .overrides(flag_layer(args))
            .load_from(env)?;

        let provider = file.model.provider.unwrap_or_else(|| "openai".to_string());
        check_provider(&provider)?;
        let base_url = file.api.base_url.filter(|u| !u.is_empty());
        let model = file.model.name.filter(|m| !m.is_empty()).or_else(|| {
            // The scripted model's name, without asking it.
            (base_url.is_none() && provider == "openai").then(|| SCRIPTED_MODEL.to_string())
        });
        // Flag, then the environment (`*_FILE` too), then the file.
        let api_key = match args.api_key.clone().filter(|k| !k.is_empty()) {
            Some(key) => Some(key),
            None => {
                env_api_key(&provider, env)?.or_else(|| file.api.api_key.filter(|k| !k.is_empty()))
            }
        };
        let registry = match file.models {
            None => None,
            Some(models) => Some(RegistryConfig {
                models: serde_json::from_value(models)
                    .map_err(|e| NodeError::ProviderSetup(format!("[models]: {e}")))?,
                model: RegistryModel {
                    default: file.model.default,
                    fallback: file.model.fallback.unwrap_or_default(),
                    agent_model: file.model.agent_model,
                },
            }),
        };
        let mut mcp_servers = match file.mcp.as_ref().and_then(|m| m.get("servers")) {
            Some(servers) => turnstone_mcp::parse_servers_value(servers)
                .map_err(|e| NodeError::ProviderSetup(format!("[mcp.servers]: {e}")))?,
            None => Vec::new(),
        };
        if let Some(path) = &args.mcp_config {
            mcp_servers.extend(
                turnstone_mcp::load_mcp_json(path)
                    .map_err(|e| NodeError::ProviderSetup(format!("--mcp-config: {e}")))?,
            );
        }
        Ok(Self {
            base_url,
            api_key,
            model,
            provider,
            registry,
            mcp_servers,
            temperature: file.model.temperature,
            max_tokens: file.model.max_tokens,
            context_window: file.model.context_window.unwrap_or(0),
            reasoning_effort: file
                .model
                .reasoning_effort
                .unwrap_or_else(|| "medium".to_string()),
            instructions: file.session.instructions.filter(|i| !i.is_empty()),
            skip_permissions: file.tools.skip_permissions.unwrap_or(false),
            cwd: file.tools.cwd,
            truncation: file.tools.truncation.unwrap_or(0),
            log_level: file.log.level.unwrap_or_else(|| "warn".to_string()),
        })
    }

    /// The model service the flags and file name (without a registry).
    pub fn target(&self) -> ModelTarget {
        ModelTarget {
            provider: self.provider.clone(),
            base_url: self.base_url.clone(),
            api_key: self.api_key.clone(),
            model: self.model.clone(),
            seed: None,
        }
    }

    /// The engine settings for `model` (the tools' `cwd` resolved by the caller).
    pub fn engine_config(&self, model: String, cwd: PathBuf) -> EngineConfig {
        EngineConfig {
            model,
            system_prompt: self.instructions.clone(),
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            reasoning_effort: self.reasoning_effort.clone(),
            context_window: self.context_window,
            skip_permissions: self.skip_permissions,
            truncation: self.truncation,
            cwd,
            ..EngineConfig::default()
        }
    }
}

/// The flags that were given, as the top configuration layer.
fn flag_layer(args: &CliArgs) -> FileConfig {
    FileConfig {
        api: ApiSection {
            base_url: args.base_url.clone(),
            api_key: args.api_key.clone(),
        },
        model: ModelSection {
            name: args.model.clone(),
            provider: args.provider.clone(),
            temperature: args.temperature,
            max_tokens: args.max_tokens,
            context_window: args.context_window,
            reasoning_effort: args.reasoning_effort.clone(),
            ..ModelSection::default()
        },
        session: SessionSection {
            instructions: args.instructions.clone(),
        },
        tools: ToolsSection {
            skip_permissions: args.skip_permissions.then_some(true),
            cwd: args.cwd.clone(),
            truncation: None,
        },
        log: LogSection {
            level: args.log_level.clone(),
        },
        ..FileConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn args(list: &[&str]) -> CliArgs {
        CliArgs::parse_from(std::iter::once("turnstone").chain(list.iter().copied()))
    }

    #[test]
    fn defaults_use_the_scripted_model() {
        let s = Settings::resolve(&args(&[]), &env(&[])).unwrap();
        assert_eq!(s.base_url, None);
        assert_eq!(s.model.as_deref(), Some(SCRIPTED_MODEL));
        assert_eq!(s.provider, "openai");
        assert!(!s.skip_permissions);
        assert_eq!(s.log_level, "warn");
    }

    #[test]
    fn file_then_env_then_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "[api]\nbase_url = \"http://file/v1\"\napi_key = \"file-key\"\n\
             [model]\nname = \"file-model\"\ntemperature = 0.25\n\
             [tools]\nskip_permissions = true\n[server]\nport = 9\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let s = Settings::resolve(&args(&["--config", p]), &env(&[])).unwrap();
        assert_eq!(s.base_url.as_deref(), Some("http://file/v1"));
        assert_eq!(s.model.as_deref(), Some("file-model"));
        assert_eq!(s.temperature, Some(0.25));
        assert!(s.skip_permissions);

        let s = Settings::resolve(
            &args(&["--config", p, "--model", "flag-model"]),
            &env(&[
                ("TURNSTONE_MODEL", "env-model"),
                ("TURNSTONE_API_KEY", "env-key"),
            ]),
        )
        .unwrap();
        assert_eq!(s.model.as_deref(), Some("flag-model"));
        assert_eq!(s.api_key.as_deref(), Some("env-key"));
    }

    #[test]
    fn unknown_providers_are_refused_clearly() {
        let err = Settings::resolve(&args(&["--provider", "bedrock"]), &env(&[])).unwrap_err();
        assert!(matches!(err, NodeError::UnsupportedProvider(ref p) if p == "bedrock"));
        assert!(err.to_string().contains("`anthropic`"), "{err}");
    }

    #[test]
    fn anthropic_takes_its_own_key_from_env_or_file_never_openais() {
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("key");
        std::fs::write(&key_file, "sk-ant-from-file\n").unwrap();
        let a = args(&["--provider", "anthropic", "--model", "claude-x"]);
        let s = Settings::resolve(
            &a,
            &env(&[
                ("OPENAI_API_KEY", "sk-openai"),
                ("ANTHROPIC_API_KEY_FILE", key_file.to_str().unwrap()),
            ]),
        )
        .unwrap();
        assert_eq!(s.provider, "anthropic");
        assert_eq!(s.api_key.as_deref(), Some("sk-ant-from-file"));
        assert_eq!(s.model.as_deref(), Some("claude-x"));
        assert!(!format!("{s:?}").contains("sk-ant"), "Debug hides the key");
        // Only the OpenAI key around: anthropic gets none.
        let s = Settings::resolve(&a, &env(&[("OPENAI_API_KEY", "sk-openai")])).unwrap();
        assert_eq!(s.api_key, None);
        // Both forms of one variable: refused, naming it.
        let err = Settings::resolve(
            &a,
            &env(&[
                ("ANTHROPIC_API_KEY", "inline"),
                ("ANTHROPIC_API_KEY_FILE", key_file.to_str().unwrap()),
            ]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("ANTHROPIC_API_KEY_FILE"), "{err}");
        // The openai provider reads TURNSTONE_API_KEY_FILE.
        let s = Settings::resolve(
            &args(&[]),
            &env(&[("TURNSTONE_API_KEY_FILE", key_file.to_str().unwrap())]),
        )
        .unwrap();
        assert_eq!(s.api_key.as_deref(), Some("sk-ant-from-file"));
    }

    #[test]
    fn the_nodes_models_and_mcp_tables_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "[model]\ndefault = \"small\"\n\
             [models.small]\nprovider = \"openai\"\nbase_url = \"http://a/v1\"\nmodel = \"s-1\"\n\
             [models.big]\nprovider = \"openai\"\nbase_url = \"http://b/v1\"\nmodel = \"b-1\"\n\
             [mcp.servers.files]\ncommand = \"mcp-files\"\nargs = [\"/tmp\"]\n",
        )
        .unwrap();
        let mcp_json = dir.path().join("mcp.json");
        std::fs::write(
            &mcp_json,
            r#"{"mcpServers": {"other": {"command": "mcp-other"}}}"#,
        )
        .unwrap();
        let s = Settings::resolve(
            &args(&[
                "--config",
                path.to_str().unwrap(),
                "--mcp-config",
                mcp_json.to_str().unwrap(),
            ]),
            &env(&[]),
        )
        .unwrap();
        let registry = s.registry.unwrap();
        assert_eq!(registry.model.default.as_deref(), Some("small"));
        assert_eq!(registry.models["big"].model, "b-1");
        let names: Vec<&str> = s.mcp_servers.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, vec!["files", "other"]);

        std::fs::write(&path, "[models.x]\nprovider = \"openai\"\nmodle = \"m\"\n").unwrap();
        let err =
            Settings::resolve(&args(&["--config", path.to_str().unwrap()]), &env(&[])).unwrap_err();
        assert!(err.to_string().contains("[models]"), "{err}");
        assert!(err.to_string().contains("modle"), "{err}");
    }

    #[test]
    fn unknown_keys_and_missing_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "[model]\nnmae = \"x\"\n").unwrap();
        let err =
            Settings::resolve(&args(&["--config", path.to_str().unwrap()]), &env(&[])).unwrap_err();
        assert!(err.to_string().contains("nmae"), "{err}");

        let missing = dir.path().join("absent.toml");
        let err = Settings::resolve(&args(&["--config", missing.to_str().unwrap()]), &env(&[]))
            .unwrap_err();
        assert!(err.to_string().contains("not found"), "{err}");
        // The default location is optional.
        let s = Settings::resolve(&args(&[]), &env(&[("HOME", "/nonexistent")])).unwrap();
        assert_eq!(s.model.as_deref(), Some(SCRIPTED_MODEL));
    }
}
