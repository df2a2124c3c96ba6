//! One configuration story for every service: defaults < the service's table of
//! `config.toml` < environment (`TURNSTONE_*`, old names below it) < flags, layered with
//! `figment` and typed by `clap`, done once here for the node, the bridge and the console.
//!
//! Each source is a named figment layer of settings (keyed by the `clap` argument id); the
//! layer that wins a setting is what `--check-config` reports as its source, and every value
//! that did not come from a flag is handed to `clap` as one, so values from every source are
//! parsed and validated the same way (`clap` also supplies the defaults). The rules:
//!
//! * **the service's table of `config.toml`** (`[bridge]`, `[console]`, the node's `[server]`):
//!   each key is a flag's name (`server_url`, `redis_url`, `approval_timeout`, …); an unknown
//!   key is an error naming it, except the keys the service reads itself from the same table
//!   ([`ServiceSpec::own_keys`]); other tables are ignored;
//! * **aliases** — the original's environment names (`REDIS_HOST`, `TURNSTONE_MQ_PREFIX`,
//!   `OPENAI_API_KEY`, …) still set their setting, above the file and below the contract
//!   names, with a warning naming the new one;
//! * **secrets from files** — every secret `X` may be given as `X_FILE` (the file's
//!   contents, one trailing newline removed), so no secret need sit in the process
//!   environment; giving both is an error, an unreadable file an error naming it;
//! * **unknown `TURNSTONE_*` variables** — a warning at start, an error with
//!   `--check-config`;
//! * **`--check-config`** — the effective configuration with secrets redacted
//!   ([`Settings::report`]), printed by the binary, which then exits 0 (or 2 on an error).
//!
//! What figment cannot say is done around it: `*_FILE` indirection and "both given" (read
//! before layering, then a layer of their own), unknown keys of the table (checked against
//! the service's arguments, which are no serde type) and unknown `TURNSTONE_*` variables
//! (figment ignores what no provider asks for).
//!
//! The node's other tables (`[models]`, `[tools]`, …) and the engine keys of `[server]` are a
//! typed document it reads itself (`turnstone_node::config_file`).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};
use figment::providers::{Format, Toml};
use figment::value::{Dict, Value};
use figment::{Figment, Metadata, Profile, Provider};

use crate::config::ConfigError;

/// An old environment name that still sets a setting, with a warning.
#[derive(Debug, Clone, Copy)]
pub struct EnvAlias {
    /// The old name (`REDIS_HOST`).
    pub old: &'static str,
    /// The id of the argument it sets (`redis_host`).
    pub arg: &'static str,
    /// What to use instead (named in the warning).
    pub instead: &'static str,
}

/// What one service reads beyond its `clap` arguments.
#[derive(Debug, Clone, Copy)]
pub struct ServiceSpec {
    /// The binary's name (messages, the report's title).
    pub binary: &'static str,
    /// Its table of `config.toml` (`bridge`, `console`, `server`), whose keys are flags'
    /// names and sit between the defaults and the environment; `None`: none.
    pub table: Option<&'static str>,
    /// Keys of `table` that are no flag: the service reads (and checks) them itself, so they
    /// are no error here (the node's engine keys of `[server]`, e.g. `auto_title`).
    pub own_keys: &'static [&'static str],
    /// The config file read when neither `--config` nor its environment name gives one, as a
    /// path under `$HOME`, if it exists (the node's `.config/turnstone/config.toml`).
    pub home_config: Option<&'static str>,
    /// Groups of old names (e.g. the Redis ones shared by the bridge and the console).
    pub aliases: &'static [&'static [EnvAlias]],
    /// Environment names of the secrets it reads (in groups), each also accepted as
    /// `<NAME>_FILE`. A
    /// secret that is an argument's environment name reaches that argument; the others
    /// are read with [`Settings::secret`].
    pub secrets: &'static [&'static [&'static str]],
    /// `TURNSTONE_*` names it reads outside its arguments (besides the secrets).
    pub extra_env: &'static [&'static str],
    /// Other tables of `config.toml` it reads (the original's `[database]`, `[ratelimit]`,
    /// …): their keys set arguments in the same layer as `table`; a key of such a table that
    /// is neither mapped, read by the service itself, nor refused with a reason is an error
    /// naming it. Tables listed nowhere are ignored (another service's).
    pub tables: &'static [TableSpec],
}

/// A table of `config.toml` besides the service's own ([`ServiceSpec::tables`]).
#[derive(Debug, Clone, Copy)]
pub struct TableSpec {
    /// Its name (`database`).
    pub table: &'static str,
    /// `(key, argument id)`: the key sets that argument (`("pool_size", "db_pool_size")`).
    pub keys: &'static [(&'static str, &'static str)],
    /// Keys the service reads itself from this table (no error here).
    pub own_keys: &'static [&'static str],
    /// `(key, why)`: keys the original reads that this service does not support; each is an
    /// error saying why, never silently ignored.
    pub refused: &'static [(&'static str, &'static str)],
}

/// `TURNSTONE_*` names every service reads outside its arguments (auth, telemetry).
pub const COMMON_ENV: &[&str] = &["TURNSTONE_AUTH_ENABLED", "TURNSTONE_OTEL_FILTER"];

/// Arguments never taken from the config file.
const NOT_FROM_FILE: &[&str] = &["config", "check_config", "help", "version"];

/// The loaded configuration of a service.
#[derive(Debug)]
pub struct Settings<T> {
    pub args: T,
    /// Warnings to log once logging is set up (aliases used, unknown variables).
    pub warnings: Vec<String>,
    /// `--check-config` was given.
    pub check: bool,
    matches: ArgMatches,
    command: Command,
    spec: ServiceSpec,
    /// Secrets that are no argument: name → value.
    env_secrets: BTreeMap<String, String>,
    /// Where each value given by a layer came from (`flag`, `env NAME`, a file, …); the
    /// others are clap's defaults.
    sources: BTreeMap<String, String>,
}

impl<T: clap::Parser> Settings<T> {
    /// Reads the process's command line, environment and config file. `--help`,
    /// `--version` and malformed flags end the process as `clap` does (exit 2 on error).
    pub fn load(spec: &ServiceSpec) -> Result<Self, ConfigError> {
        let vars: BTreeMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        Self::load_from(spec, std::env::args_os().collect(), &vars)
    }

    /// [`load`](Self::load) with an explicit command line and environment (the environment
    /// `clap` reads for the arguments is always the process's; `vars` is the one consulted
    /// for aliases, secrets and unknown names).
    pub fn load_from(
        spec: &ServiceSpec,
        argv: Vec<OsString>,
        vars: &BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        let env = |name: &str| vars.get(name).cloned();
        let command = T::command();
        let first = command
            .clone()
            .try_get_matches_from(&argv)
            .unwrap_or_else(|e| e.exit());
        let mut warnings = Vec::new();
        let mut env_secrets = BTreeMap::new();
        let mut secret_origins = BTreeMap::new();

        // The layers, lowest first: config file < old names < environment (and `*_FILE`
        // secrets) < flags. Clap supplies the defaults.
        let mut layers = Figment::new();
        if let Some(table) = spec.table {
            let explicit = first
                .get_raw("config")
                .and_then(|mut v| v.next())
                .map(PathBuf::from);
            let at_home = || {
                let path = PathBuf::from(env("HOME")?).join(spec.home_config?);
                path.is_file().then_some(path)
            };
            if let Some(path) = explicit.or_else(at_home) {
                let own = file_layer(&command, &path, table, spec.own_keys)?;
                for mapped in mapped_layers(&path, spec.tables, &own)? {
                    layers = layers.merge(mapped);
                }
                layers = layers.merge(own);
            }
        }
        let aliased: BTreeSet<&str> = spec
            .aliases
            .iter()
            .copied()
            .flatten()
            .filter(|alias| env(alias.old).is_some())
            .map(|alias| alias.arg)
            .collect();
        // Reversed, so that of two old names for one setting the first listed wins.
        for alias in spec.aliases.iter().copied().flatten().rev() {
            if let Some(value) = env(alias.old) {
                layers = layers.merge(Layer::one(
                    format!("env {} (deprecated alias)", alias.old),
                    alias.arg,
                    value,
                ));
            }
        }
        for arg in command.get_arguments() {
            if let Some(name) = arg.get_env().and_then(|e| e.to_str())
                && let Some(value) = env(name)
            {
                layers = layers.merge(Layer::one(
                    format!("env {name}"),
                    arg.get_id().as_str(),
                    value,
                ));
            }
        }
        for name in spec.secrets.iter().copied().flatten() {
            let file_var = format!("{name}_FILE");
            let arg = arg_with_env(&command, name);
            let Some(path) = env(&file_var).filter(|p| !p.trim().is_empty()) else {
                if arg.is_none()
                    && let Some(value) = env(name).filter(|v| !v.is_empty())
                {
                    env_secrets.insert(name.to_string(), value);
                    secret_origins.insert(name.to_string(), format!("env {name}"));
                }
                continue;
            };
            let both = match &arg {
                Some(id) => {
                    env(name).is_some()
                        || aliased.contains(id.as_str())
                        || first.value_source(id) == Some(ValueSource::CommandLine)
                }
                None => env(name).is_some(),
            };
            if both {
                return Err(ConfigError::Env {
                    var: file_var.clone(),
                    message: format!("{name} is given too; give the secret one way only"),
                });
            }
            let value = read_secret_file(&file_var, Path::new(&path))?;
            let origin = format!("file {path} ({file_var})");
            match arg {
                Some(id) => layers = layers.merge(Layer::one(origin, &id, value)),
                None => {
                    env_secrets.insert(name.to_string(), value);
                    secret_origins.insert(name.to_string(), origin);
                }
            }
        }
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if first.value_source(id) == Some(ValueSource::CommandLine) {
                let raw: Vec<String> = first
                    .get_raw(id)
                    .map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect())
                    .unwrap_or_default();
                layers = layers.merge(Layer::one(FLAG.into(), id, raw));
            }
        }

        // What won, per setting: flags are already on the command line; every other winner
        // is appended to it as a flag, so clap parses and validates every value one way.
        let mut extra: Vec<OsString> = Vec::new();
        let mut sources = BTreeMap::new();
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            let (Ok(value), Some(source)) = (layers.find_value(id), layers.find_metadata(id))
            else {
                continue;
            };
            let source = source.name.to_string();
            if source != FLAG {
                let rendered = flag_value(&value).ok_or_else(|| {
                    ConfigError::Invalid(format!(
                        "{source}: `{id}`: expected a string, number, boolean or list of them"
                    ))
                })?;
                push_value(&command, id, &rendered, &mut extra)?;
            }
            sources.insert(id.to_string(), source);
        }
        for alias in spec.aliases.iter().copied().flatten() {
            if env(alias.old).is_none() {
                continue;
            }
            let alias_source = format!("env {} (deprecated alias)", alias.old);
            if sources.get(alias.arg) == Some(&alias_source) {
                warnings.push(format!(
                    "{} is deprecated; use {}",
                    alias.old, alias.instead
                ));
            } else {
                warnings.push(format!(
                    "{} is deprecated and ignored here (the setting is given otherwise); use {}",
                    alias.old, alias.instead
                ));
            }
        }
        sources.extend(secret_origins);

        let mut full = argv;
        full.extend(extra);
        let matches = command
            .clone()
            .try_get_matches_from(&full)
            .map_err(|e| ConfigError::Invalid(clap_message(&e)))?;
        let args =
            T::from_arg_matches(&matches).map_err(|e| ConfigError::Invalid(clap_message(&e)))?;
        let check = matches
            .try_get_one::<bool>("check_config")
            .ok()
            .flatten()
            .copied()
            .unwrap_or(false);

        let known = known_env(&command, spec);
        let unknown: Vec<&String> = vars
            .keys()
            .filter(|k| k.starts_with("TURNSTONE_") && !known.contains(*k))
            .collect();
        if let Some(first_unknown) = unknown.first() {
            if check {
                return Err(ConfigError::Env {
                    var: first_unknown.to_string(),
                    message: format!("{} does not read this variable", spec.binary),
                });
            }
            for name in &unknown {
                warnings.push(format!(
                    "{name} is set but {} does not read it (misspelt?)",
                    spec.binary
                ));
            }
        }

        Ok(Self {
            args,
            warnings,
            check,
            matches,
            command,
            spec: *spec,
            env_secrets,
            sources,
        })
    }

    /// A secret that is no argument (e.g. `TURNSTONE_JWT_SECRET`), from `X` or `X_FILE`.
    pub fn secret(&self, name: &str) -> Option<String> {
        self.env_secrets.get(name).cloned()
    }

    /// Logs the warnings collected while loading (call once logging is set up).
    pub fn log_warnings(&self) {
        for w in &self.warnings {
            tracing::warn!("{w}");
        }
    }

    /// `--check-config`: the report on stdout, the warnings on stderr.
    pub fn print_check(&self, extra: &[(&str, String)]) {
        for w in &self.warnings {
            eprintln!("{}: warning: {w}", self.spec.binary);
        }
        print!("{}", self.report(extra));
    }

    /// The effective configuration, one `key = value  # source` line per setting, secrets
    /// redacted; `extra` lines (derived settings) follow under `[derived]`.
    pub fn report(&self, extra: &[(&str, String)]) -> String {
        let mut out = format!(
            "# {} --check-config: the effective configuration (secrets redacted)\n",
            self.spec.binary
        );
        for arg in self.command.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version" | "check_config") {
                continue;
            }
            let env_name = arg.get_env().and_then(|e| e.to_str()).map(str::to_string);
            let secret = arg.is_hide_env_values_set()
                || env_name
                    .as_deref()
                    .is_some_and(|e| self.spec.secrets.iter().any(|g| g.contains(&e)));
            let values: Vec<String> = self
                .matches
                .get_raw(id)
                .map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            let value = if values.is_empty() {
                "(unset)".to_string()
            } else if secret {
                "\"<redacted>\"".to_string()
            } else {
                format!("{:?}", values.join(","))
            };
            let source = match self.sources.get(id) {
                Some(source) => source.clone(),
                None => match self.matches.value_source(id) {
                    Some(ValueSource::DefaultValue) => "default".into(),
                    _ => "unset".into(),
                },
            };
            let _ = writeln!(out, "{id} = {value}  # {source}");
        }
        let env_only: Vec<&&str> = self
            .spec
            .secrets
            .iter()
            .copied()
            .flatten()
            .filter(|s| arg_with_env(&self.command, s).is_none())
            .collect();
        if !env_only.is_empty() {
            out.push_str("[secrets]\n");
            for name in env_only {
                let (value, source) = match self.env_secrets.get(*name) {
                    Some(_) => (
                        "\"<redacted>\"",
                        self.sources.get(*name).cloned().unwrap_or_default(),
                    ),
                    None => ("(unset)", "unset".to_string()),
                };
                let _ = writeln!(out, "{name} = {value}  # {source}");
            }
        }
        if !extra.is_empty() {
            out.push_str("[derived]\n");
            for (k, v) in extra {
                let _ = writeln!(out, "{k} = {v:?}");
            }
        }
        out
    }
}

/// Ends the process for a configuration error: one line naming the problem on stderr,
/// exit status 2.
pub fn exit_config_error(binary: &str, error: &dyn std::fmt::Display) -> ! {
    eprintln!("{binary}: {error}");
    std::process::exit(2)
}

/// Reads a secret from a file: its contents minus one trailing newline (`\n` or `\r\n`).
pub fn read_secret_file(var: &str, path: &Path) -> Result<String, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Env {
        var: var.to_string(),
        message: format!("cannot read {}: {e}", path.display()),
    })?;
    let value = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    if value.is_empty() {
        return Err(ConfigError::Env {
            var: var.to_string(),
            message: format!("{} is empty", path.display()),
        });
    }
    Ok(value.to_string())
}

/// The hostname (the default node id): stable across restarts in a StatefulSet.
pub fn hostname() -> Option<String> {
    ::hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

fn arg_with_env(command: &Command, env: &str) -> Option<String> {
    command
        .get_arguments()
        .find(|a| a.get_env().is_some_and(|e| e == env))
        .map(|a| a.get_id().to_string())
}

/// Appends `--<long>=<value>` (or `--<long>` for a switch that is on) for argument `id`.
fn push_value(
    command: &Command,
    id: &str,
    value: &str,
    out: &mut Vec<OsString>,
) -> Result<(), ConfigError> {
    let arg = command
        .get_arguments()
        .find(|a| a.get_id() == id)
        .ok_or_else(|| ConfigError::Invalid(format!("no setting `{id}`")))?;
    let long = arg
        .get_long()
        .ok_or_else(|| ConfigError::Invalid(format!("setting `{id}` has no flag")))?;
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "y" | "t" | "on" => out.push(format!("--{long}").into()),
            "false" | "0" | "no" | "n" | "f" | "off" | "" => {}
            other => {
                return Err(ConfigError::Invalid(format!(
                    "`{id}`: expected true or false, got '{other}'"
                )));
            }
        }
        return Ok(());
    }
    out.push(format!("--{long}={value}").into());
    Ok(())
}

/// The source name of values given on the command line.
const FLAG: &str = "flag";

/// One named layer of settings (argument id → value) for the figment: the name is what
/// `--check-config` reports as the value's source.
struct Layer {
    name: String,
    values: Dict,
}

impl Layer {
    fn one(name: String, id: &str, value: impl Into<Value>) -> Self {
        Self {
            name,
            values: Dict::from([(id.to_string(), value.into())]),
        }
    }
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.name.clone())
    }

    fn data(&self) -> Result<figment::value::Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.values.clone()))
    }
}

/// The service's `[table]` of a config file as a layer (empty when the file has none); a key
/// that is no setting of the service is an error naming it, unless it is one of `own_keys`
/// (left out of the layer: the service reads those itself).
fn file_layer(
    command: &Command,
    path: &Path,
    table: &str,
    own_keys: &[&str],
) -> Result<Layer, ConfigError> {
    if !path.exists() {
        return Err(ConfigError::MissingFile {
            path: path.to_path_buf(),
        });
    }
    let doc: Dict = Figment::from(Toml::file_exact(path))
        .extract()
        .map_err(|e| ConfigError::Invalid(format!("{}: {e}", path.display())))?;
    let mut values = match doc.get(table) {
        None => Dict::new(),
        // Re-made untagged, so that the values are this layer's, not the file provider's.
        Some(Value::Dict(_, values)) => match Value::serialize(values) {
            Ok(Value::Dict(_, values)) => values,
            _ => Dict::new(),
        },
        Some(_) => {
            return Err(ConfigError::Invalid(format!(
                "{}: `{table}` must be a table",
                path.display()
            )));
        }
    };
    values.retain(|key, _| !own_keys.contains(&key.as_str()));
    for key in values.keys() {
        let known = command
            .get_arguments()
            .any(|a| a.get_id() == key.as_str() && !NOT_FROM_FILE.contains(&key.as_str()));
        if !known {
            return Err(ConfigError::Invalid(format!(
                "{}: unknown key `{key}` in [{table}]",
                path.display()
            )));
        }
    }
    Ok(Layer {
        name: format!("{} [{table}]", path.display()),
        values,
    })
}

/// The layers of the other tables a service reads ([`ServiceSpec::tables`]), one per table
/// present in the file. A key setting an argument the service's own table (`own`) sets too
/// is an error naming both.
fn mapped_layers(
    path: &Path,
    tables: &[TableSpec],
    own: &Layer,
) -> Result<Vec<Layer>, ConfigError> {
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    let doc: Dict = Figment::from(Toml::file_exact(path))
        .extract()
        .map_err(|e| ConfigError::Invalid(format!("{}: {e}", path.display())))?;
    let mut layers = Vec::new();
    for spec in tables {
        let values = match doc.get(spec.table) {
            None => continue,
            Some(Value::Dict(_, values)) => match Value::serialize(values) {
                Ok(Value::Dict(_, values)) => values,
                _ => Dict::new(),
            },
            Some(_) => {
                return Err(ConfigError::Invalid(format!(
                    "{}: `{}` must be a table",
                    path.display(),
                    spec.table
                )));
            }
        };
        let mut layer = Dict::new();
        for (key, value) in values {
            if let Some((_, arg)) = spec.keys.iter().find(|(k, _)| *k == key) {
                if own.values.contains_key(*arg) {
                    return Err(ConfigError::Invalid(format!(
                        "{}: [{}] {key} and `{arg}` of the service's own table set the same \
                         setting; keep one",
                        path.display(),
                        spec.table
                    )));
                }
                layer.insert((*arg).to_string(), value);
            } else if spec.own_keys.contains(&key.as_str()) {
                continue;
            } else if let Some((_, why)) = spec.refused.iter().find(|(k, _)| *k == key) {
                return Err(ConfigError::Invalid(format!(
                    "{}: [{}] {key} is not supported: {why}",
                    path.display(),
                    spec.table
                )));
            } else {
                return Err(ConfigError::Invalid(format!(
                    "{}: unknown key `{key}` in [{}]",
                    path.display(),
                    spec.table
                )));
            }
        }
        layers.push(Layer {
            name: format!("{} [{}]", path.display(), spec.table),
            values: layer,
        });
    }
    Ok(layers)
}

/// A layer's value as a flag value: scalars as text, lists joined with commas.
fn flag_value(value: &Value) -> Option<String> {
    match value {
        Value::String(_, s) => Some(s.clone()),
        Value::Char(_, c) => Some(c.to_string()),
        Value::Bool(_, b) => Some(b.to_string()),
        Value::Num(_, n) => n
            .to_u128()
            .map(|u| u.to_string())
            .or_else(|| n.to_i128().map(|i| i.to_string()))
            .or_else(|| n.to_f64().map(|f| f.to_string())),
        Value::Array(_, items) => items
            .iter()
            .map(|v| match v {
                Value::Array(..) | Value::Dict(..) => None,
                v => flag_value(v),
            })
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(",")),
        Value::Dict(..) | Value::Empty(..) => None,
    }
}

/// Every `TURNSTONE_*` name the service reads.
fn known_env(command: &Command, spec: &ServiceSpec) -> BTreeSet<String> {
    let mut known: BTreeSet<String> = command
        .get_arguments()
        .filter_map(|a| a.get_env())
        .filter_map(|e| e.to_str())
        .map(str::to_string)
        .collect();
    for name in spec.secrets.iter().copied().flatten() {
        known.insert(name.to_string());
        known.insert(format!("{name}_FILE"));
    }
    known.extend(
        spec.aliases
            .iter()
            .copied()
            .flatten()
            .map(|a| a.old.to_string()),
    );
    known.extend(spec.extra_env.iter().map(|n| n.to_string()));
    known.extend(COMMON_ENV.iter().map(|n| n.to_string()));
    known
}

fn clap_message(e: &clap::Error) -> String {
    e.to_string()
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Demo {
        #[arg(long, default_value = "http://localhost:8080")]
        server_url: String,
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        #[arg(long)]
        verbose: bool,
        #[arg(long)]
        token: Option<String>,
        #[arg(long, env = "DEMO_REDIS_HOST")]
        redis_host: Option<String>,
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        check_config: bool,
    }

    const SPEC: ServiceSpec = ServiceSpec {
        binary: "demo",
        table: Some("demo"),
        own_keys: &["engine_knob"],
        home_config: Some(".config/demo.toml"),
        aliases: &[&[EnvAlias {
            old: "DEMO_OLD_HOST",
            arg: "redis_host",
            instead: "--redis-host",
        }]],
        secrets: &[&["DEMO_SECRET"]],
        extra_env: &[],
        tables: &[TableSpec {
            table: "tuning",
            keys: &[("workers", "concurrency"), ("host", "redis_host")],
            own_keys: &["read_by_the_service"],
            refused: &[("legacy", "use workers")],
        }],
    };

    fn argv(args: &[&str]) -> Vec<OsString> {
        std::iter::once("demo")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn env(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn the_file_fills_what_flags_do_not_say_and_unknown_keys_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "[demo]\nserver_url = \"http://node:9\"\nconcurrency = 8\nverbose = true\n[other]\nwhatever = 1\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let s = Settings::<Demo>::load_from(
            &SPEC,
            argv(&["--config", p, "--concurrency", "3"]),
            &env(&[]),
        )
        .unwrap();
        assert_eq!(s.args.server_url, "http://node:9");
        assert_eq!(s.args.concurrency, 3, "the flag wins over the file");
        assert!(s.args.verbose);
        let report = s.report(&[]);
        assert!(
            report.contains("server_url = \"http://node:9\""),
            "{report}"
        );
        assert!(report.contains("concurrency = \"3\"  # flag"), "{report}");

        std::fs::write(&path, "[demo]\nconcurency = 8\n").unwrap();
        let err = Settings::<Demo>::load_from(&SPEC, argv(&["--config", p]), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown key `concurency` in [demo]"), "{err}");
    }

    #[test]
    fn layers_win_in_order_file_alias_env_flag_and_report_their_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "[demo]\nredis_host = \"from-file\"\nconcurrency = 8\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let host = |args: &[&str], vars: &[(&str, String)]| {
            let mut argv = vec!["--config", p];
            argv.extend(args);
            let s = Settings::<Demo>::load_from(&SPEC, self::argv(&argv), &env(vars)).unwrap();
            let source = s
                .report(&[])
                .lines()
                .find(|l| l.starts_with("redis_host = "))
                .unwrap()
                .to_string();
            (s.args.redis_host.unwrap(), source, s.warnings)
        };
        let (value, source, _) = host(&[], &[]);
        assert_eq!(value, "from-file");
        assert!(source.ends_with(&format!("# {p} [demo]")), "{source}");
        let alias = ("DEMO_OLD_HOST", "from-alias".to_string());
        let (value, source, warnings) = host(&[], std::slice::from_ref(&alias));
        assert_eq!(value, "from-alias");
        assert!(
            source.ends_with("# env DEMO_OLD_HOST (deprecated alias)"),
            "{source}"
        );
        assert!(warnings[0].contains("DEMO_OLD_HOST is deprecated; use --redis-host"));
        let contract = ("DEMO_REDIS_HOST", "from-env".to_string());
        let (value, source, warnings) = host(&[], &[alias.clone(), contract.clone()]);
        assert_eq!(value, "from-env");
        assert!(source.ends_with("# env DEMO_REDIS_HOST"), "{source}");
        assert!(warnings[0].contains("ignored here"), "{warnings:?}");
        let (value, source, _) = host(&["--redis-host", "from-flag"], &[alias, contract]);
        assert_eq!(value, "from-flag");
        assert!(source.ends_with("# flag"), "{source}");
    }

    #[test]
    fn own_keys_are_left_to_the_service_and_the_home_file_is_read_without_config() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".config")).unwrap();
        std::fs::write(
            home.path().join(".config/demo.toml"),
            "[demo]\nconcurrency = 8\nengine_knob = 0.5\n",
        )
        .unwrap();
        let vars = env(&[("HOME", home.path().to_str().unwrap().to_string())]);
        let s = Settings::<Demo>::load_from(&SPEC, argv(&[]), &vars).unwrap();
        assert_eq!(s.args.concurrency, 8, "the file under $HOME is read");
        let s = Settings::<Demo>::load_from(&SPEC, argv(&["--concurrency", "2"]), &vars).unwrap();
        assert_eq!(s.args.concurrency, 2, "the flag wins over it");
        // No home file: the defaults.
        let s = Settings::<Demo>::load_from(&SPEC, argv(&[]), &env(&[])).unwrap();
        assert_eq!(s.args.concurrency, 64);
    }

    #[test]
    fn unknown_turnstone_variables_warn_and_fail_a_check() {
        let vars = env(&[("TURNSTONE_REDIS_PERFIX", "x".into())]);
        let s = Settings::<Demo>::load_from(&SPEC, argv(&[]), &vars).unwrap();
        assert!(s.warnings[0].contains("TURNSTONE_REDIS_PERFIX is set but demo does not read it"));
        let err = Settings::<Demo>::load_from(&SPEC, argv(&["--check-config"]), &vars)
            .unwrap_err()
            .to_string();
        assert!(err.contains("TURNSTONE_REDIS_PERFIX"), "{err}");
    }

    #[test]
    fn aliases_set_the_setting_with_a_warning() {
        let s = Settings::<Demo>::load_from(
            &SPEC,
            argv(&[]),
            &env(&[("DEMO_OLD_HOST", "redis.internal".into())]),
        )
        .unwrap();
        assert_eq!(s.args.redis_host.as_deref(), Some("redis.internal"));
        assert!(s.warnings[0].contains("DEMO_OLD_HOST is deprecated; use --redis-host"));
    }

    #[test]
    fn secrets_from_files_lose_one_newline_and_both_ways_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        std::fs::write(&file, "s3cr3t value\n").unwrap();
        let path = file.to_str().unwrap().to_string();
        let s = Settings::<Demo>::load_from(
            &SPEC,
            argv(&[]),
            &env(&[("DEMO_SECRET_FILE", path.clone())]),
        )
        .unwrap();
        assert_eq!(s.secret("DEMO_SECRET").as_deref(), Some("s3cr3t value"));
        let report = s.report(&[]);
        assert!(!report.contains("s3cr3t"), "{report}");
        assert!(report.contains("DEMO_SECRET = \"<redacted>\""), "{report}");

        let err = Settings::<Demo>::load_from(
            &SPEC,
            argv(&[]),
            &env(&[("DEMO_SECRET_FILE", path), ("DEMO_SECRET", "inline".into())]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("DEMO_SECRET_FILE") && err.contains("one way only"),
            "{err}"
        );

        let missing = dir.path().join("nope");
        let err = Settings::<Demo>::load_from(
            &SPEC,
            argv(&[]),
            &env(&[("DEMO_SECRET_FILE", missing.to_str().unwrap().into())]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn other_tables_set_their_mapped_arguments_and_name_every_other_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let load = |text: &str, args: &[&str]| {
            std::fs::write(&path, text).unwrap();
            let mut all = vec!["--config", path.to_str().unwrap()];
            all.extend_from_slice(args);
            Settings::<Demo>::load_from(&SPEC, argv(&all), &env(&[]))
        };
        let s = load(
            "[tuning]\nworkers = 11\nhost = \"r\"\nread_by_the_service = 1\n[unrelated]\nx = 1\n",
            &[],
        )
        .unwrap();
        assert_eq!(s.args.concurrency, 11);
        assert_eq!(s.args.redis_host.as_deref(), Some("r"));
        assert!(
            s.report(&[]).contains("concurrency = \"11\"  # ")
                && s.report(&[]).contains("[tuning]"),
            "{}",
            s.report(&[])
        );
        // A flag still wins.
        let s = load("[tuning]\nworkers = 11\n", &["--concurrency", "2"]).unwrap();
        assert_eq!(s.args.concurrency, 2);

        let err = load("[tuning]\nlegacy = 1\n", &[]).unwrap_err().to_string();
        assert!(
            err.contains("[tuning] legacy is not supported: use workers"),
            "{err}"
        );
        let err = load("[tuning]\nmystery = 1\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown key `mystery` in [tuning]"), "{err}");
        let err = load("[demo]\nconcurrency = 1\n[tuning]\nworkers = 2\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("[tuning] workers") && err.contains("concurrency"),
            "{err}"
        );
        let err = load("tuning = 3\n", &[]).unwrap_err().to_string();
        assert!(err.contains("`tuning` must be a table"), "{err}");
    }
}
