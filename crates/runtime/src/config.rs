//! Layered configuration: typed defaults, then a TOML file, then `TURNSTONE_*` environment
//! variables, then command-line flags. Later layers win. Unknown keys are rejected when the
//! target type says `#[serde(deny_unknown_fields)]`, and every error names the offending key.

use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A configuration that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path} not found")]
    MissingFile { path: PathBuf },
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("environment variable {var}: {message}")]
    Env { var: String, message: String },
}

/// Builds a configuration of type `T` from its layers.
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// #[derive(Debug, Default, Serialize, Deserialize)]
/// #[serde(default, deny_unknown_fields)]
/// struct Cfg { server: Server }
/// #[derive(Debug, Serialize, Deserialize)]
/// #[serde(default, deny_unknown_fields)]
/// struct Server { port: u16 }
/// impl Default for Server { fn default() -> Self { Self { port: 8080 } } }
///
/// let cfg: Cfg = turnstone_runtime::ConfigLoader::new()
///     .env_var("TURNSTONE_DOC_EXAMPLE_PORT", "server.port")
///     .load()
///     .unwrap();
/// assert_eq!(cfg.server.port, 8080);
/// ```
#[derive(Debug)]
pub struct ConfigLoader {
    figment: Figment,
    env: Vec<(String, String)>,
    file: Option<(PathBuf, bool)>,
    overrides: Vec<Figment>,
}

impl Default for ConfigLoader {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigLoader {
    pub fn new() -> Self {
        Self {
            figment: Figment::new(),
            env: Vec::new(),
            file: None,
            overrides: Vec::new(),
        }
    }

    /// Reads a TOML file. `required = false` skips a missing file silently (the default
    /// `config.toml` location); `true` makes a missing file an error (an explicit `--config`).
    pub fn file(mut self, path: impl AsRef<Path>, required: bool) -> Self {
        self.file = Some((path.as_ref().to_path_buf(), required));
        self
    }

    /// Maps one environment variable onto a dotted key (`"server.port"`). Values are parsed
    /// as TOML scalars when they look like one (numbers, booleans), else taken as strings.
    pub fn env_var(mut self, var: &str, key: &str) -> Self {
        self.env.push((var.to_string(), key.to_string()));
        self
    }

    /// Adds a layer of overrides (typically the command-line flags that were given:
    /// serialise a struct whose absent flags are `None` with `skip_serializing_if`).
    pub fn overrides(mut self, layer: impl Serialize) -> Self {
        self.overrides
            .push(Figment::from(Serialized::defaults(layer)));
        self
    }

    /// Loads `T`, starting from `T::default()`.
    pub fn load<T: DeserializeOwned + Serialize + Default>(self) -> Result<T, ConfigError> {
        self.load_from(&|var| std::env::var(var).ok())
    }

    /// Like [`load`](Self::load) with an explicit environment (tests use this).
    pub fn load_from<T: DeserializeOwned + Serialize + Default>(
        self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<T, ConfigError> {
        let mut figment = self.figment.merge(Serialized::defaults(T::default()));
        if let Some((path, required)) = self.file {
            if path.exists() {
                figment = figment.merge(Toml::file_exact(&path));
            } else if required {
                return Err(ConfigError::MissingFile { path });
            }
        }
        for (var, key) in &self.env {
            if let Some(raw) = env(var) {
                figment = figment.merge(Serialized::default(key, env_value(&raw)));
            }
        }
        for layer in self.overrides {
            figment = figment.merge(layer);
        }
        figment
            .extract::<T>()
            .map_err(|e| ConfigError::Invalid(describe(&e)))
    }
}

fn env_value(raw: &str) -> serde_json::Value {
    let trimmed = raw.trim();
    if let Ok(b) = trimmed.parse::<bool>() {
        return serde_json::Value::Bool(b);
    }
    if let Ok(i) = trimmed.parse::<i64>() {
        return serde_json::Value::from(i);
    }
    if let Ok(f) = trimmed.parse::<f64>()
        && trimmed.contains('.')
    {
        return serde_json::Value::from(f);
    }
    serde_json::Value::String(raw.to_string())
}

fn describe(e: &figment::Error) -> String {
    let mut parts = Vec::new();
    for err in e.clone() {
        let key = err.path.join(".");
        let source = err
            .metadata
            .as_ref()
            .map(|m| m.name.to_string())
            .unwrap_or_else(|| "configuration".to_string());
        if key.is_empty() {
            parts.push(format!("{} (from {source})", err.kind));
        } else {
            parts.push(format!("key `{key}`: {} (from {source})", err.kind));
        }
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::HashMap;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Server {
        host: String,
        port: u16,
        verbose: bool,
    }
    impl Default for Server {
        fn default() -> Self {
            Self {
                host: "127.0.0.1".into(),
                port: 8080,
                verbose: false,
            }
        }
    }
    #[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Cfg {
        server: Server,
    }

    #[derive(Serialize)]
    struct Cli {
        #[serde(skip_serializing_if = "Option::is_none")]
        server: Option<CliServer>,
    }
    #[derive(Serialize)]
    struct CliServer {
        #[serde(skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
    }

    fn env(map: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = map
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn layers_apply_in_order_file_env_cli() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[server]\nhost = \"0.0.0.0\"\nport = 9000\n").unwrap();

        let only_file: Cfg = ConfigLoader::new()
            .file(&path, true)
            .load_from(&env(&[]))
            .unwrap();
        assert_eq!(only_file.server.port, 9000);
        assert_eq!(only_file.server.host, "0.0.0.0");

        let with_env: Cfg = ConfigLoader::new()
            .file(&path, true)
            .env_var("TURNSTONE_PORT", "server.port")
            .env_var("TURNSTONE_VERBOSE", "server.verbose")
            .load_from(&env(&[
                ("TURNSTONE_PORT", "9100"),
                ("TURNSTONE_VERBOSE", "true"),
            ]))
            .unwrap();
        assert_eq!(with_env.server.port, 9100);
        assert!(with_env.server.verbose);

        let with_cli: Cfg = ConfigLoader::new()
            .file(&path, true)
            .env_var("TURNSTONE_PORT", "server.port")
            .overrides(Cli {
                server: Some(CliServer { port: Some(9200) }),
            })
            .load_from(&env(&[("TURNSTONE_PORT", "9100")]))
            .unwrap();
        assert_eq!(with_cli.server.port, 9200);
        assert_eq!(
            with_cli.server.host, "0.0.0.0",
            "absent CLI flags keep lower layers"
        );
    }

    #[test]
    fn unknown_key_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[server]\nprot = 1\n").unwrap();
        let err = ConfigLoader::new()
            .file(&path, true)
            .load_from::<Cfg>(&env(&[]))
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("prot"), "{msg}");
    }

    #[test]
    fn bad_type_names_key_and_missing_required_file_is_an_error() {
        let err = ConfigLoader::new()
            .env_var("TURNSTONE_PORT", "server.port")
            .load_from::<Cfg>(&env(&[("TURNSTONE_PORT", "not-a-port")]))
            .unwrap_err();
        assert!(err.to_string().contains("server.port"), "{err}");

        let err = ConfigLoader::new()
            .file("/nonexistent/turnstone.toml", true)
            .load_from::<Cfg>(&env(&[]))
            .unwrap_err();
        assert!(matches!(err, ConfigError::MissingFile { .. }));
        let ok: Cfg = ConfigLoader::new()
            .file("/nonexistent/turnstone.toml", false)
            .load_from(&env(&[]))
            .unwrap();
        assert_eq!(ok, Cfg::default());
    }
}
