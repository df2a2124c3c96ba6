//! One configuration story for every service: the command line and the contract's
//! `TURNSTONE_*` environment (through `clap`), then what `clap` cannot say by itself, done
//! once here for the node, the bridge and the console:
//!
//! * **aliases** — the original's environment names (`REDIS_HOST`, `TURNSTONE_MQ_PREFIX`,
//!   `OPENAI_API_KEY`, …) still set their setting, with a warning naming the new one;
//! * **secrets from files** — every secret `X` may be given as `X_FILE` (the file's
//!   contents, one trailing newline removed), so no secret need sit in the process
//!   environment; giving both is an error, an unreadable file an error naming it;
//! * **the service's table of `config.toml`** (`[bridge]`, `[console]`): each key is a flag's
//!   name (`server_url`, `redis_url`, …); flags and environment win over the file, the file
//!   wins over defaults; an unknown key is an error naming it; other tables are ignored;
//! * **unknown `TURNSTONE_*` variables** — a warning at start, an error with
//!   `--check-config`;
//! * **`--check-config`** — the effective configuration with secrets redacted
//!   ([`Settings::report`]), printed by the binary, which then exits 0 (or 2 on an error).
//!
//! Precedence: flag > environment (contract name) > alias > config file > default.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};

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
    /// Its table of `config.toml` (`bridge`, `console`); `None`: the service reads the file
    /// itself (the node's `[server]`, `[models]`, …).
    pub table: Option<&'static str>,
    pub aliases: &'static [EnvAlias],
    /// Environment names of the secrets it reads, each also accepted as `<NAME>_FILE`. A
    /// secret that is an argument's environment name reaches that argument; the others
    /// are read with [`Settings::secret`].
    pub secrets: &'static [&'static str],
    /// `TURNSTONE_*` names it reads outside its arguments (besides the secrets).
    pub extra_env: &'static [&'static str],
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
    /// Where a value came from when it is not plain flag / env / default.
    origins: BTreeMap<String, String>,
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
        let mut given: BTreeSet<String> = command
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .filter(|id| explicit(&first, id))
            .collect();
        let mut extra: Vec<OsString> = Vec::new();
        let mut origins = BTreeMap::new();
        let mut warnings = Vec::new();
        let mut env_secrets = BTreeMap::new();

        for alias in spec.aliases {
            let Some(value) = env(alias.old) else {
                continue;
            };
            if given.contains(alias.arg) {
                warnings.push(format!(
                    "{} is deprecated and ignored here (the setting is given otherwise); use {}",
                    alias.old, alias.instead
                ));
                continue;
            }
            warnings.push(format!(
                "{} is deprecated; use {}",
                alias.old, alias.instead
            ));
            push_value(&command, alias.arg, &value, &mut extra)?;
            given.insert(alias.arg.to_string());
            origins.insert(
                alias.arg.to_string(),
                format!("env {} (deprecated alias)", alias.old),
            );
        }

        for name in spec.secrets {
            let file_var = format!("{name}_FILE");
            let arg = arg_with_env(&command, name);
            let Some(path) = env(&file_var).filter(|p| !p.trim().is_empty()) else {
                if arg.is_none()
                    && let Some(value) = env(name).filter(|v| !v.is_empty())
                {
                    env_secrets.insert(name.to_string(), value);
                    origins.insert(name.to_string(), format!("env {name}"));
                }
                continue;
            };
            let both = match &arg {
                Some(id) => given.contains(id.as_str()),
                None => env(name).is_some(),
            };
            if both {
                return Err(ConfigError::Env {
                    var: file_var.clone(),
                    message: format!("{name} is given too; give the secret one way only"),
                });
            }
            let value = read_secret_file(&file_var, Path::new(&path))?;
            match arg {
                Some(id) => {
                    push_value(&command, &id, &value, &mut extra)?;
                    given.insert(id.clone());
                    origins.insert(id, format!("file {path} ({file_var})"));
                }
                None => {
                    env_secrets.insert(name.to_string(), value);
                    origins.insert(name.to_string(), format!("file {path} ({file_var})"));
                }
            }
        }

        if let Some(table) = spec.table
            && let Some(path) = first.get_raw("config").and_then(|mut v| v.next())
        {
            let path = PathBuf::from(path);
            for (key, value) in file_table(&path, table)? {
                let known = command
                    .get_arguments()
                    .any(|a| a.get_id() == key.as_str() && !NOT_FROM_FILE.contains(&key.as_str()));
                if !known {
                    return Err(ConfigError::Invalid(format!(
                        "{}: unknown key `{key}` in [{table}]",
                        path.display()
                    )));
                }
                if given.contains(&key) {
                    continue;
                }
                let rendered = toml_scalar(&value).ok_or_else(|| {
                    ConfigError::Invalid(format!(
                        "{}: key `{table}.{key}`: expected a string, number, boolean or list of them",
                        path.display()
                    ))
                })?;
                push_value(&command, &key, &rendered, &mut extra)?;
                origins.insert(key.clone(), format!("{} [{table}]", path.display()));
            }
        }

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
            origins,
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
                    .is_some_and(|e| self.spec.secrets.contains(&e));
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
            let source = match self.origins.get(id) {
                Some(o) => o.clone(),
                None => match self.matches.value_source(id) {
                    Some(ValueSource::CommandLine) => "flag".into(),
                    Some(ValueSource::EnvVariable) => {
                        format!("env {}", env_name.unwrap_or_default())
                    }
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
            .filter(|s| arg_with_env(&self.command, s).is_none())
            .collect();
        if !env_only.is_empty() {
            out.push_str("[secrets]\n");
            for name in env_only {
                let (value, source) = match self.env_secrets.get(*name) {
                    Some(_) => (
                        "\"<redacted>\"",
                        self.origins.get(*name).cloned().unwrap_or_default(),
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

fn explicit(matches: &ArgMatches, id: &str) -> bool {
    matches!(
        matches.value_source(id),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    )
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
        match value.trim() {
            "true" | "1" | "yes" => out.push(format!("--{long}").into()),
            "false" | "0" | "no" | "" => {}
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

/// The `[table]` of a config file (empty when the file has none).
fn file_table(path: &Path, table: &str) -> Result<toml::Table, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ConfigError::MissingFile {
                path: path.to_path_buf(),
            }
        } else {
            ConfigError::Invalid(format!("cannot read {}: {e}", path.display()))
        }
    })?;
    let doc: toml::Table = text
        .parse()
        .map_err(|e| ConfigError::Invalid(format!("{}: {e}", path.display())))?;
    match doc.get(table) {
        None => Ok(toml::Table::new()),
        Some(toml::Value::Table(t)) => Ok(t.clone()),
        Some(_) => Err(ConfigError::Invalid(format!(
            "{}: `{table}` must be a table",
            path.display()
        ))),
    }
}

/// A TOML value as a flag value: scalars as text, lists joined with commas.
fn toml_scalar(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        toml::Value::Array(items) => items
            .iter()
            .map(|v| match v {
                toml::Value::Array(_) | toml::Value::Table(_) => None,
                v => toml_scalar(v),
            })
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(",")),
        toml::Value::Datetime(_) | toml::Value::Table(_) => None,
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
    for name in spec.secrets {
        known.insert(name.to_string());
        known.insert(format!("{name}_FILE"));
    }
    known.extend(spec.aliases.iter().map(|a| a.old.to_string()));
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
        #[arg(long)]
        redis_host: Option<String>,
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        check_config: bool,
    }

    const SPEC: ServiceSpec = ServiceSpec {
        binary: "demo",
        table: Some("demo"),
        aliases: &[EnvAlias {
            old: "DEMO_OLD_HOST",
            arg: "redis_host",
            instead: "--redis-host",
        }],
        secrets: &["DEMO_SECRET"],
        extra_env: &[],
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
}
