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
//! name = "my-model"
//! provider = "openai"          # the only one supported so far
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
//! ```
//!
//! Sections that other Turnstone programs read from a shared file (`server`, `database`,
//! `auth`, …) are accepted and ignored; any other unknown key is an error that names it.

use std::path::PathBuf;

use clap::Parser;
use serde::{Deserialize, Serialize};
use turnstone_engine::EngineConfig;
use turnstone_runtime::ConfigLoader;

use turnstone_node::NodeError;

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
    /// API key for the endpoint (default: $TURNSTONE_API_KEY, then $OPENAI_API_KEY).
    #[arg(long)]
    pub api_key: Option<String>,
    /// Model provider; only `openai` (any OpenAI-compatible endpoint) for now.
    #[arg(long)]
    pub provider: Option<String>,
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
    pub models: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub console: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<serde_json::Value>,
}

/// Everything the client needs, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `None`: start the scripted model.
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub model: String,
    pub provider: String,
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
        let file: FileConfig = loader
            .env_var("TURNSTONE_BASE_URL", "api.base_url")
            .env_var("OPENAI_API_KEY", "api.api_key")
            .env_var("TURNSTONE_API_KEY", "api.api_key")
            .env_var("TURNSTONE_MODEL", "model.name")
            .env_var("TURNSTONE_LOG_LEVEL", "log.level")
            .overrides(flag_layer(args))
            .load_from(env)?;

        let provider = file.model.provider.unwrap_or_else(|| "openai".to_string());
        if provider != "openai" {
            return Err(NodeError::UnsupportedProvider(provider));
        }
        let base_url = file.api.base_url.filter(|u| !u.is_empty());
        let model = file
            .model
            .name
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| {
                if base_url.is_some() {
                    "default".to_string()
                } else {
                    SCRIPTED_MODEL.to_string()
                }
            });
        Ok(Self {
            base_url,
            api_key: file.api.api_key.filter(|k| !k.is_empty()),
            model,
            provider,
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

    /// The engine settings (the tools' `cwd` resolved by the caller).
    pub fn engine_config(&self, cwd: PathBuf) -> EngineConfig {
        EngineConfig {
            model: self.model.clone(),
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
        assert_eq!(s.model, SCRIPTED_MODEL);
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
        assert_eq!(s.model, "file-model");
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
        assert_eq!(s.model, "flag-model");
        assert_eq!(s.api_key.as_deref(), Some("env-key"));
    }

    #[test]
    fn other_providers_are_refused_clearly() {
        let err = Settings::resolve(&args(&["--provider", "anthropic"]), &env(&[])).unwrap_err();
        assert!(matches!(err, NodeError::UnsupportedProvider(ref p) if p == "anthropic"));
        assert!(err.to_string().contains("only `openai`"), "{err}");
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
        assert_eq!(s.model, SCRIPTED_MODEL);
    }
}
