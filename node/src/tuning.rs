//! The node's model, tool and workstream settings (node spec §7.2/§7.5: `model.*`,
//! `session.instructions`, `tools.*`, `server.workstream_idle_timeout`, `health.circuit_*`).
//!
//! Each is a flag with a `TURNSTONE_*` environment name and, like every flag of the node, a
//! key of `[server]` in `config.toml` (its name with underscores): *flag > env > file >
//! default*, and `--check-config` names the source of each. Values are checked here, so a bad
//! one stops the start (exit 2) with a message naming the setting.

use std::time::Duration;

use turnstone_engine::{EngineConfig, ManagerConfig};
use turnstone_tools::toolset::SearchMode;

/// The reasoning efforts a request may carry (`model.reasoning_effort`).
pub const REASONING_EFFORTS: &[&str] = &[
    "", "none", "minimal", "low", "medium", "high", "xhigh", "max",
];

#[derive(Debug, Clone, clap::Args)]
pub struct TuningArgs {
    /// Text added to every workstream's system prompt (`session.instructions`).
    #[arg(long, env = "TURNSTONE_INSTRUCTIONS")]
    pub instructions: Option<String>,
    /// Sampling temperature, 0–2 (`model.temperature`). Default: not sent (the server's).
    #[arg(long, env = "TURNSTONE_TEMPERATURE")]
    pub temperature: Option<f32>,
    /// Most tokens one response may have (`model.max_tokens`, sent as
    /// `max_completion_tokens`). Default: not sent (the server's limit).
    #[arg(long, env = "TURNSTONE_MAX_TOKENS")]
    pub max_tokens: Option<u32>,
    /// Reasoning effort: none, minimal, low, medium, high, xhigh or max
    /// (`model.reasoning_effort`).
    #[arg(long, env = "TURNSTONE_REASONING_EFFORT", default_value = "medium")]
    pub reasoning_effort: String,
    /// Context window in tokens (`model.context_window`). 0: what the model server tells
    /// (llama.cpp `/props`, a context field of `/models`), else 32768.
    #[arg(long, env = "TURNSTONE_CONTEXT_WINDOW", default_value_t = 0)]
    pub context_window: u32,
    /// The node's model accepts images (`model.vision`): `read_file` of a PNG, JPEG, GIF or
    /// WebP image sends the image to it. Off by default: the model gets a text description
    /// and no image bytes. A `[models.<alias>]` entry says it with `vision = true`.
    #[arg(long, env = "TURNSTONE_MODEL_VISION")]
    pub model_vision: bool,
    /// Seconds a `bash` call may run when it gives no timeout, 1–3600 (`tools.timeout`;
    /// a call's own `timeout` is at most 600).
    #[arg(long, env = "TURNSTONE_TOOL_TIMEOUT", default_value_t = 120)]
    pub tool_timeout: u64,
    /// Most characters of one tool result the model sees (`tools.truncation`); 0: half the
    /// context window (at four characters a token).
    #[arg(long, env = "TURNSTONE_TOOL_TRUNCATION", default_value_t = 0)]
    pub tool_truncation: usize,
    /// Minutes an idle workstream stays open before it is closed
    /// (`server.workstream_idle_timeout`); 0: never.
    #[arg(long, env = "TURNSTONE_WORKSTREAM_IDLE_TIMEOUT", default_value_t = 120)]
    pub workstream_idle_timeout: u64,
    /// Tool search (deferred tools behind `tool_search`): auto, on or off (`tools.search`).
    #[arg(long, env = "TURNSTONE_TOOL_SEARCH", default_value = "auto")]
    pub tool_search: String,
    /// With `--tool-search auto`: the number of tools that turns it on
    /// (`tools.search_threshold`).
    #[arg(long, env = "TURNSTONE_TOOL_SEARCH_THRESHOLD", default_value_t = 20)]
    pub tool_search_threshold: usize,
    /// Most tools one `tool_search` call returns, 1–50 (`tools.search_max_results`).
    #[arg(long, env = "TURNSTONE_TOOL_SEARCH_MAX_RESULTS", default_value_t = 5)]
    pub tool_search_max_results: usize,
    /// Consecutive failed model requests that open the circuit breaker
    /// (`health.circuit_breaker_threshold`, 1 or more); `/health` then says `degraded`.
    #[arg(long, env = "TURNSTONE_CIRCUIT_BREAKER_THRESHOLD", default_value_t = 5)]
    pub circuit_breaker_threshold: u32,
    /// Seconds an open circuit breaker waits before it lets one probe request through
    /// (`health.circuit_breaker_cooldown`).
    #[arg(
        long,
        env = "TURNSTONE_CIRCUIT_BREAKER_COOLDOWN",
        default_value_t = 60.0
    )]
    pub circuit_breaker_cooldown: f64,
}

/// What the tuning flags set beyond the engine and manager configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuned {
    /// `bash`'s default timeout.
    pub tool_timeout: Duration,
    /// The circuit breaker's threshold and cooldown.
    pub breaker_threshold: u32,
    pub breaker_cooldown: Duration,
}

impl TuningArgs {
    /// Checks every value; the error names the setting (flag, env and `[server]` key share
    /// the name).
    pub fn check(&self) -> Result<Tuned, String> {
        if let Some(t) = self.temperature
            && !(t.is_finite() && (0.0..=2.0).contains(&t))
        {
            return Err(format!("temperature must be between 0 and 2, got {t}"));
        }
        if self.max_tokens == Some(0) {
            return Err("max_tokens must be 1 or more".into());
        }
        let effort = self.reasoning_effort.trim().to_ascii_lowercase();
        if !REASONING_EFFORTS.contains(&effort.as_str()) {
            return Err(format!(
                "reasoning_effort {:?}: expected one of none, minimal, low, medium, high, xhigh, max",
                self.reasoning_effort
            ));
        }
        if !(1..=3600).contains(&self.tool_timeout) {
            return Err(format!(
                "tool_timeout must be between 1 and 3600 seconds, got {}",
                self.tool_timeout
            ));
        }
        self.tool_search
            .parse::<SearchMode>()
            .map_err(|e| format!("tool_search: {e}"))?;
        if !(1..=50).contains(&self.tool_search_max_results) {
            return Err(format!(
                "tool_search_max_results must be between 1 and 50, got {}",
                self.tool_search_max_results
            ));
        }
        if self.circuit_breaker_threshold == 0 {
            return Err("circuit_breaker_threshold must be 1 or more".into());
        }
        let cooldown = self.circuit_breaker_cooldown;
        if !(cooldown.is_finite() && (0.0..=86_400.0).contains(&cooldown)) {
            return Err(format!(
                "circuit_breaker_cooldown must be between 0 and 86400 seconds, got {cooldown}"
            ));
        }
        Ok(Tuned {
            tool_timeout: Duration::from_secs(self.tool_timeout),
            breaker_threshold: self.circuit_breaker_threshold,
            breaker_cooldown: Duration::from_secs_f64(cooldown),
        })
    }

    /// Puts the model and tool settings into the engine configuration (checked first by
    /// [`TuningArgs::check`]).
    pub fn apply_engine(&self, config: &mut EngineConfig) -> Result<(), String> {
        self.check()?;
        config.system_prompt = self
            .instructions
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        config.temperature = self.temperature;
        config.max_tokens = self.max_tokens;
        config.reasoning_effort = self.reasoning_effort.trim().to_ascii_lowercase();
        config.context_window = self.context_window;
        config.vision = self.model_vision;
        config.truncation = self.tool_truncation;
        config.toolset.search = self
            .tool_search
            .parse()
            .map_err(|e| format!("tool_search: {e}"))?;
        config.toolset.search_threshold = self.tool_search_threshold;
        config.toolset.search_max_results = self.tool_search_max_results;
        Ok(())
    }

    /// Puts the workstream settings into the manager configuration.
    pub fn apply_manager(&self, config: &mut ManagerConfig) {
        config.idle_timeout = match self.workstream_idle_timeout {
            0 => None,
            minutes => Some(Duration::from_secs(minutes.saturating_mul(60))),
        };
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        tuning: TuningArgs,
    }

    fn parse(args: &[&str]) -> TuningArgs {
        let mut argv = vec!["node"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().tuning
    }

    #[test]
    fn defaults_leave_the_engine_as_it_was_but_for_the_effort() {
        let t = parse(&[]);
        let mut config = EngineConfig::default();
        t.apply_engine(&mut config).unwrap();
        let d = EngineConfig::default();
        assert_eq!(config.system_prompt, None);
        assert_eq!(config.temperature, None);
        assert_eq!(config.max_tokens, None);
        assert_eq!(config.reasoning_effort, "medium");
        assert_eq!(config.context_window, 0);
        assert!(!config.vision);
        assert_eq!(config.truncation, d.truncation);
        assert_eq!(config.toolset.search, d.toolset.search);
        let mut manager = ManagerConfig::default();
        t.apply_manager(&mut manager);
        assert_eq!(manager.idle_timeout, Some(Duration::from_secs(120 * 60)));
        let tuned = t.check().unwrap();
        assert_eq!(tuned.tool_timeout, Duration::from_secs(120));
        assert_eq!(tuned.breaker_threshold, 5);
        assert_eq!(tuned.breaker_cooldown, Duration::from_secs(60));
    }

    #[test]
    fn every_flag_reaches_its_setting() {
        let t = parse(&[
            "--instructions",
            "  Answer in French.  ",
            "--temperature",
            "0.2",
            "--max-tokens",
            "64",
            "--reasoning-effort",
            "HIGH",
            "--context-window",
            "4096",
            "--model-vision",
            "--tool-timeout",
            "30",
            "--tool-truncation",
            "5000",
            "--workstream-idle-timeout",
            "0",
            "--tool-search",
            "on",
            "--tool-search-threshold",
            "7",
            "--tool-search-max-results",
            "9",
            "--circuit-breaker-threshold",
            "2",
            "--circuit-breaker-cooldown",
            "1.5",
        ]);
        let mut config = EngineConfig::default();
        t.apply_engine(&mut config).unwrap();
        assert_eq!(config.system_prompt.as_deref(), Some("Answer in French."));
        assert_eq!(config.temperature, Some(0.2));
        assert_eq!(config.max_tokens, Some(64));
        assert_eq!(config.reasoning_effort, "high");
        assert_eq!(config.context_window, 4096);
        assert!(config.vision);
        assert_eq!(config.truncation, 5000);
        assert_eq!(config.toolset.search, SearchMode::On);
        assert_eq!(config.toolset.search_threshold, 7);
        assert_eq!(config.toolset.search_max_results, 9);
        let mut manager = ManagerConfig::default();
        t.apply_manager(&mut manager);
        assert_eq!(manager.idle_timeout, None);
        let tuned = t.check().unwrap();
        assert_eq!(tuned.tool_timeout, Duration::from_secs(30));
        assert_eq!(tuned.breaker_threshold, 2);
        assert_eq!(tuned.breaker_cooldown, Duration::from_millis(1500));
    }

    #[test]
    fn bad_values_are_refused_naming_the_setting() {
        for (args, names) in [
            (&["--temperature", "2.5"][..], "temperature"),
            (&["--max-tokens", "0"][..], "max_tokens"),
            (&["--reasoning-effort", "extreme"][..], "reasoning_effort"),
            (&["--tool-timeout", "0"][..], "tool_timeout"),
            (&["--tool-timeout", "3601"][..], "tool_timeout"),
            (&["--tool-search", "sometimes"][..], "tool_search"),
            (
                &["--tool-search-max-results", "51"][..],
                "tool_search_max_results",
            ),
            (
                &["--circuit-breaker-threshold", "0"][..],
                "circuit_breaker_threshold",
            ),
            (
                &["--circuit-breaker-cooldown=-1"][..],
                "circuit_breaker_cooldown",
            ),
        ] {
            let err = parse(args).check().unwrap_err();
            assert!(err.starts_with(names), "{args:?}: {err}");
            let err = parse(args)
                .apply_engine(&mut EngineConfig::default())
                .unwrap_err();
            assert!(err.starts_with(names), "{args:?}: {err}");
        }
    }
}
