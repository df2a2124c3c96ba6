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
//! auto_compact_pct = 0.8        # compact after a turn above this share of the context (0: never)
//! compact_max_tokens = 32768    # max_tokens of the compaction summary
//! auto_title = true             # title new workstreams after their first exchange
//! watch_tick_secs = 15          # seconds between looks for due watches
//! max_queued_sends = 1000       # messages one workstream's queue holds (then `busy`)
//! hibernate_after_secs = 600    # idle workstreams leave memory after this (0: never)
//! grpc_port = 50051             # also serve the gRPC API alone here (the HTTP port serves it)
//!
//! [models.local]                # the model registry (turnstone-llm): aliases, fallback
//! provider = "openai"
//! base_url = "http://127.0.0.1:8000/v1"
//! model = "qwen"
//! vision = true                 # read_file sends images to it (default: a description only)
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
//! [tools]                       # web tools, sub-agents
//! allow_private_network = false
//! searxng_url = "http://127.0.0.1:8888"
//! search_backend = "mcp:brave:brave_web_search"   # or web_search_backend; default SearxNG
//! agent_max_turns = 20          # model requests of one task_agent sub-agent
//! subagent_auto_approve_all = false
//! subagent_approvals = "ask"    # sub-agents ask through the parent's approvals; "unattended"
//! env_passthrough = ["GOPATH"]  # node env vars children get beyond PATH, HOME, LANG, …
//! max_image_bytes = 5242880     # read_file refuses larger images (vision models get images)
//! [tools.personas]              # named tool-visibility sets (`persona` at creation, /persona)
//! reviewer = ["read_file", "search", "git", "tool_search"]  # exact: the rest via tool_search
//! calculator = ["math"]         # hard (no tool_search): only these, no tool search
//! [tools.notify.ops]
//! url = "https://hooks.example/notify"
//!
//! [judge]                       # governance (node spec §7.2 `judge.*`; see `judge.rs`)
//! enabled = true                # heuristic verdicts + the async LLM judge
//! model = ""                    # judge model; "" = the workstream's
//! base_url = ""                 # its own endpoint (with provider, api_key); "" = the workstream's
//! confidence_threshold = 0.7    # auto-review runs only calls judged at least this sure
//! max_context_ratio = 0.5       # share of the context window the judge reads
//! timeout = 60.0                # seconds per judged call
//! output_guard = true           # scan every tool result; flagged ones emit output_warning
//! redact_secrets = true         # replace detected secrets before anyone sees the result
//! output_guard_llm = false      # ours: the judge's model also assesses flagged results
//!
//! [rerank]                      # node-local reranker (see `rerank.rs`): POST {base_url}/rerank;
//!                               # wins over the stored Reranker role (model.reranker)
//! base_url = "http://127.0.0.1:8000"
//! model = "qwen3-reranker"
//! api_key_env = "RERANK_API_KEY" # or its _FILE; default TURNSTONE_RERANK_API_KEY(_FILE)
//! timeout = 5.0                 # seconds; a slower reply keeps the native order
//! web_search = true             # re-order web_search results
//! bm25 = false                  # re-order memory / tool_search / skill candidates
//! bm25_threshold = 0.0          # drop retrieval candidates scored below (0: no filter)
//! instruction = ""              # Qwen3-style query instruction (not with a chat template)
//!
//! [[policies]]                  # read-only tool policies (the admin API adds stored ones)
//! name = "no-mcp-deletes"
//! tool_pattern = "mcp__*__delete*"
//! action = "deny"               # allow | deny | ask
//! priority = 100                # highest first; default 0
//! enabled = true                # default true
//! ```
//!
//! The keys of `[server]` that are flags' names (`node_id`, `max_workstreams`, `cwd`,
//! `approval_timeout`, `watch_tick_secs`, `max_queued_sends`, `hibernate_after_secs`,
//! `grpc_port`) are one layer of the binary's settings (`turnstone_runtime::Settings`):
//! *flag > env > file > default*, and `--check-config` names the source of each. They are
//! also parsed here, so an unknown key or an out-of-range value is an error naming it. The
//! engine keys of `[tools]` that also exist as flags (`agent_max_turns`,
//! `subagent_auto_approve_all`) follow the same order ([`ServerFile::apply_engine_settings`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use turnstone_engine::{EngineConfig, SubagentApprovals};
use turnstone_llm::{ModelEntry, ModelSection, RegistryConfig};

/// The config file read when none is given, under `$HOME` (if it exists).
pub const HOME_CONFIG: &str = ".config/turnstone/config.toml";

/// The keys of `[server]` that are no flag: the engine settings read here. Every other key
/// of `[server]` is a flag's name, layered with the flags, environment and defaults by the
/// binary's settings (defaults < file < environment < flags).
pub const SERVER_OWN_KEYS: &[&str] = &["auto_compact_pct", "compact_max_tokens", "auto_title"];

/// The keys of `[tools]` read here ([`ToolsSection`]); its other keys are flags' (see
/// [`NODE_TABLES`]).
const TOOLS_OWN_KEYS: &[&str] = &[
    "allow_private_network",
    "searxng_url",
    "search_backend",
    "web_search_backend",
    "notify",
    "disable_web",
    "agent_max_turns",
    "subagent_auto_approve_all",
    "subagent_approvals",
    "env_passthrough",
    "personas",
    "max_image_bytes",
];

/// The original's other tables the node reads (node spec §7.2/§7.3): each key sets the flag
/// named beside it (one layer with `[server]`: *flag > env > file > default*, and
/// `--check-config` names `<file> [table]` as the source), is read here, or is refused with
/// the reason. Any other key of these tables is an error naming it. `[judge]`, `[models.*]`,
/// `[model]`, `[mcp]` and `[[policies]]` are typed documents read by [`ServerFile::parse`],
/// which refuses unknown keys the same way.
pub const NODE_TABLES: &[turnstone_runtime::TableSpec] = &[
    turnstone_runtime::TableSpec {
        table: "database",
        keys: &[
            ("backend", "db_backend"),
            ("url", "db_url"),
            ("path", "db_path"),
            ("pool_size", "db_pool_size"),
        ],
        own_keys: &[],
        refused: &[
            ("sslmode", PG_TLS_IN_URL),
            ("sslrootcert", PG_TLS_IN_URL),
            ("sslcert", PG_TLS_IN_URL),
            ("sslkey", PG_TLS_IN_URL),
        ],
    },
    turnstone_runtime::TableSpec {
        table: "auth",
        keys: &[],
        // `enabled`, `jwt_secret`, `[[auth.tokens]]`; `token` is the terminal client's.
        own_keys: &["enabled", "jwt_secret", "tokens", "token"],
        refused: &[],
    },
    turnstone_runtime::TableSpec {
        table: "ratelimit",
        keys: &[
            ("enabled", "ratelimit_enabled"),
            ("requests_per_second", "ratelimit_rps"),
            ("burst", "ratelimit_burst"),
            ("trusted_proxies", "trusted_proxy"),
        ],
        own_keys: &[],
        refused: &[],
    },
    turnstone_runtime::TableSpec {
        table: "health",
        keys: &[
            ("circuit_breaker_threshold", "circuit_breaker_threshold"),
            ("circuit_breaker_cooldown", "circuit_breaker_cooldown"),
        ],
        own_keys: &[],
        refused: &[
            ("backend_probe_interval", NO_BACKEND_PROBE),
            ("backend_probe_timeout", NO_BACKEND_PROBE),
        ],
    },
    turnstone_runtime::TableSpec {
        table: "session",
        keys: &[
            ("instructions", "instructions"),
            ("retention_days", "session_retention_days"),
        ],
        own_keys: &["compact_max_tokens", "auto_compact_pct"],
        refused: &[],
    },
    turnstone_runtime::TableSpec {
        table: "tools",
        keys: &[
            ("timeout", "tool_timeout"),
            ("truncation", "tool_truncation"),
            ("search", "tool_search"),
            ("search_threshold", "tool_search_threshold"),
            ("search_max_results", "tool_search_max_results"),
            ("skip_permissions", "skip_permissions"),
        ],
        own_keys: TOOLS_OWN_KEYS,
        refused: &[],
    },
];

const PG_TLS_IN_URL: &str = "give PostgreSQL TLS settings as parameters of `url` \
     (postgresql://host/db?sslmode=verify-full&sslrootcert=/path/ca.pem&sslcert=…&sslkey=…)";
const NO_BACKEND_PROBE: &str = "the node runs no background probe of the model backend: its \
     circuit breaker (circuit_breaker_threshold, circuit_breaker_cooldown) watches the real \
     requests and /health reports its state";

/// What the node takes from its config file.
#[derive(Debug, Clone, Default)]
pub struct ServerFile {
    pub path: Option<PathBuf>,
    pub server: ServerSection,
    pub registry: Option<RegistryConfig>,
    pub mcp_servers: Vec<turnstone_mcp::McpServerConfig>,
    pub tools: ToolsSection,
    pub judge: JudgeSection,
    /// `[rerank]`, checked; `None`: no reranker.
    pub rerank: Option<crate::rerank::RerankSection>,
    /// `[[policies]]`: read-only tool policies (see `server::policies`).
    pub policies: Vec<crate::server::policies::ConfigPolicy>,
    /// `[auth]`: `enabled`, `jwt_secret`, `[[auth.tokens]]` (the environment wins), when the
    /// file has the table.
    pub auth: Option<turnstone_runtime::auth::AuthConfig>,
}

pub use crate::judge::JudgeSection;

/// The keys of `[server]` read here. Its other keys are the binary's flags, layered (and an
/// unknown one refused by name) by `turnstone_runtime::Settings` before this file is read, so
/// they are no error here.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServerSection {
    pub node_id: Option<String>,
    pub max_workstreams: Option<usize>,
    pub cwd: Option<PathBuf>,
    pub approval_timeout: Option<u64>,
    /// Compact after a turn whose prompt exceeded this share of the context window (0–1;
    /// 0 disables). Default 0.8.
    pub auto_compact_pct: Option<f64>,
    /// `max_tokens` of the compaction summary request (1 or more). Default 32768.
    pub compact_max_tokens: Option<u32>,
    /// Title new workstreams after their first exchange. Default `true`.
    pub auto_title: Option<bool>,
    /// Seconds between two looks for due watches (1 or more). Default 15.
    pub watch_tick_secs: Option<u64>,
    /// Messages one workstream's queue holds (1 or more); `--max-queued-sends` wins.
    /// Default 1000.
    pub max_queued_sends: Option<usize>,
    /// Seconds a workstream stays idle before it hibernates (leaves memory; its state is in
    /// the store); `--hibernate-after-secs` wins. Default 0: never.
    pub hibernate_after_secs: Option<u64>,
    /// A port that serves the gRPC API alone (the HTTP port serves it too); `--grpc-port`
    /// wins. Default: none.
    pub grpc_port: Option<u16>,
}

/// The compaction keys of `[session]` (its other keys are flags': see [`NODE_TABLES`]).
#[derive(Debug, Clone, Default, Deserialize)]
struct SessionSection {
    auto_compact_pct: Option<f64>,
    compact_max_tokens: Option<u32>,
}

impl ServerSection {
    /// Takes `[session]`'s compaction keys; the same key in `[server]` too is an error.
    fn take_session(&mut self, session: SessionSection) -> Result<(), String> {
        if let Some(pct) = session.auto_compact_pct {
            if self.auto_compact_pct.is_some() {
                return Err(TWICE.replace("{}", "auto_compact_pct"));
            }
            self.auto_compact_pct = Some(pct);
        }
        if let Some(n) = session.compact_max_tokens {
            if self.compact_max_tokens.is_some() {
                return Err(TWICE.replace("{}", "compact_max_tokens"));
            }
            self.compact_max_tokens = Some(n);
        }
        Ok(())
    }
}

const TWICE: &str = "[session] {} and [server] {} set the same setting; keep one";

/// The environment variable that sets the SearxNG endpoint of `web_search`.
pub const SEARXNG_URL_ENV: &str = "TURNSTONE_SEARXNG_URL";

impl ToolsSection {
    /// The SearxNG endpoint: `$TURNSTONE_SEARXNG_URL` (`env`, when not blank) over
    /// `[tools] searxng_url` — the environment layers over the file, as for every setting.
    pub fn searxng_url(&self, env: Option<String>) -> Option<String> {
        env.map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .or_else(|| self.searxng_url.clone())
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    #[serde(default)]
    pub allow_private_network: bool,
    pub searxng_url: Option<String>,
    /// `mcp:<server>:<tool>`, `searxng` or absent (SearxNG when `searxng_url` is set). Also
    /// read as `web_search_backend` (the original's name).
    #[serde(alias = "web_search_backend")]
    pub search_backend: Option<String>,
    #[serde(default)]
    pub notify: BTreeMap<String, NotifyTargetEntry>,
    /// Turn the web tools off entirely (on by default).
    #[serde(default)]
    pub disable_web: bool,
    /// `task_agent`: model requests one sub-agent may make (1 or more). Default 20.
    pub agent_max_turns: Option<u32>,
    /// `task_agent`: sub-agents run every tool of their set without asking. Default `false`
    /// (they run unattended under the parent's approval policy: only auto-approve tools).
    pub subagent_auto_approve_all: Option<bool>,
    /// `task_agent`/`plan_agent`: `ask` (default: a sub-agent's gated calls are approval
    /// rounds of its parent workstream) or `unattended` (nobody is asked: only auto-approve
    /// tools run).
    pub subagent_approvals: Option<String>,
    /// Names of the node's environment variables that child processes (bash, watch polls,
    /// MCP stdio servers) get beyond the base allow-list (`PATH`, `HOME`, `LANG`, `LC_*`, …);
    /// `NAME_*` passes a prefix. `TURNSTONE_*` is never passed.
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    /// Personas (`[tools.personas]`): name → the tools (names or patterns) it shows. With
    /// `tool_search` in the list the set is exact (the other tools stay reachable through
    /// tool search), without it hard (nothing else, no tool search). A workstream picks
    /// one at creation (`persona`) or with `/persona <name>`.
    #[serde(default)]
    pub personas: BTreeMap<String, Vec<String>>,
    /// `read_file` refuses images larger than this many bytes (default 5 MiB, 5242880).
    pub max_image_bytes: Option<u64>,
    /// Keys of `[tools]` that are flags (`timeout` is `--tool-timeout`, …: see
    /// [`NODE_TABLES`]); they reach the flags' layer, not this struct.
    #[serde(default, rename = "timeout")]
    _timeout: Option<toml::Value>,
    #[serde(default, rename = "truncation")]
    _truncation: Option<toml::Value>,
    #[serde(default, rename = "search")]
    _search: Option<toml::Value>,
    #[serde(default, rename = "search_threshold")]
    _search_threshold: Option<toml::Value>,
    #[serde(default, rename = "search_max_results")]
    _search_max_results: Option<toml::Value>,
    #[serde(default, rename = "skip_permissions")]
    _skip_permissions: Option<toml::Value>,
}

/// The engine settings given as flags (or their env vars); `None`: not given, so the file's
/// value (or the default) applies.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineFlags {
    pub agent_max_turns: Option<u32>,
    pub subagent_auto_approve_all: Option<bool>,
    pub watch_tick_secs: Option<u64>,
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
        let default = PathBuf::from(home).join(HOME_CONFIG);
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
        let mut server: ServerSection = match section("server")? {
            Some(v) => v.try_into().map_err(|e| format!("[server]: {e}"))?,
            None => ServerSection::default(),
        };
        if let Some(session) = section("session")? {
            // The original's home of the compaction keys (its other keys are flags').
            let session: SessionSection =
                session.try_into().map_err(|e| format!("[session]: {e}"))?;
            server.take_session(session)?;
        }
        let auth = match section("auth")? {
            Some(v) => Some(v.try_into().map_err(|e| format!("[auth]: {e}"))?),
            None => None,
        };
        let tools = match section("tools")? {
            Some(v) => v.try_into().map_err(|e| format!("[tools]: {e}"))?,
            None => ToolsSection::default(),
        };
        let judge = match section("judge")? {
            Some(v) => v.try_into().map_err(|e| format!("[judge]: {e}"))?,
            None => JudgeSection::default(),
        };
        let rerank: Option<crate::rerank::RerankSection> = match section("rerank")? {
            Some(v) => Some(v.try_into().map_err(|e| format!("[rerank]: {e}"))?),
            None => None,
        };
        if let Some(r) = &rerank {
            r.check()?;
        }
        let models: Option<BTreeMap<String, ModelEntry>> = match section("models")? {
            Some(v) => Some(v.try_into().map_err(|e| format!("[models]: {e}"))?),
            None => None,
        };
        let model: ModelSection = match section("model")? {
            Some(v) => v.try_into().map_err(|e| format!("[model]: {e}"))?,
            None => ModelSection::default(),
        };
        let policies: Vec<crate::server::policies::ConfigPolicy> = match section("policies")? {
            Some(v) => v.try_into().map_err(|e| format!("[[policies]]: {e}"))?,
            None => Vec::new(),
        };
        for (i, p) in policies.iter().enumerate() {
            p.check()
                .map_err(|e| format!("[[policies]] entry {} ({:?}): {e}", i + 1, p.name))?;
        }
        let mut names = std::collections::BTreeSet::new();
        if let Some(dup) = policies.iter().find(|p| !names.insert(p.name.trim())) {
            return Err(format!(
                "[[policies]]: the name {:?} is used twice",
                dup.name
            ));
        }
        check_server(&server)?;
        check_tools(&tools)?;
        judge.check()?;
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
            judge,
            rerank,
            policies,
            auth,
        })
    }

    /// Puts the engine keys into `config` (whose values are the defaults): a flag wins,
    /// then the file, else `config` keeps its value. A flag out of range is an error.
    pub fn apply_engine_settings(
        &self,
        flags: &EngineFlags,
        config: &mut EngineConfig,
    ) -> Result<(), String> {
        let (s, t) = (&self.server, &self.tools);
        if let Some(n) = flags.agent_max_turns.or(t.agent_max_turns) {
            if n == 0 {
                return Err("agent_max_turns must be 1 or more".into());
            }
            config.agent_max_turns = n;
        }
        if let Some(on) = flags
            .subagent_auto_approve_all
            .or(t.subagent_auto_approve_all)
        {
            config.subagent_auto_approve_all = on;
        }
        if let Some(v) = &t.subagent_approvals {
            config.subagent_approvals =
                SubagentApprovals::parse(v).ok_or_else(|| subagent_approvals_error(v))?;
        }
        if !t.personas.is_empty() {
            config.toolset.personas = t.personas.clone();
            config.toolset.check()?;
        }
        if let Some(pct) = s.auto_compact_pct {
            config.auto_compact_pct = pct;
        }
        if let Some(n) = s.compact_max_tokens {
            config.compact_max_tokens = n;
        }
        if let Some(on) = s.auto_title {
            config.auto_title = on;
        }
        if let Some(on) = self.judge.output_guard {
            config.output_guard.scan = on;
        }
        if let Some(on) = self.judge.redact_secrets {
            config.output_guard.redact = on;
        }
        if let Some(on) = self.judge.output_guard_llm {
            config.output_guard.llm = on;
        }
        config.judge = self.judge.engine_judge()?;
        Ok(())
    }

    /// The watch runner's tick: the flag, else the file, else 15 s. Zero is an error.
    pub fn watch_tick(&self, flags: &EngineFlags) -> Result<Duration, String> {
        match flags.watch_tick_secs.or(self.server.watch_tick_secs) {
            Some(0) => Err("watch_tick_secs must be 1 or more".into()),
            Some(secs) => Ok(Duration::from_secs(secs)),
            None => Ok(Duration::from_secs(15)),
        }
    }
}

/// Range checks of `[server]`.
fn check_server(s: &ServerSection) -> Result<(), String> {
    if let Some(pct) = s.auto_compact_pct
        && !(pct.is_finite() && (0.0..=1.0).contains(&pct))
    {
        return Err(format!(
            "[server]: auto_compact_pct must be between 0 and 1 (0 disables), got {pct}"
        ));
    }
    if s.compact_max_tokens == Some(0) {
        return Err("[server]: compact_max_tokens must be 1 or more".into());
    }
    if s.watch_tick_secs == Some(0) {
        return Err("[server]: watch_tick_secs must be 1 or more".into());
    }
    if s.max_queued_sends == Some(0) {
        return Err("[server]: max_queued_sends must be 1 or more".into());
    }
    Ok(())
}

/// Range checks of `[tools]`.
fn check_tools(t: &ToolsSection) -> Result<(), String> {
    if t.agent_max_turns == Some(0) {
        return Err("[tools]: agent_max_turns must be 1 or more".into());
    }
    if let Some(spec) = &t.search_backend {
        turnstone_tools::web::SearchBackendSpec::parse(spec)
            .map_err(|e| format!("[tools]: {e}"))?;
    }
    if let Some(v) = &t.subagent_approvals
        && SubagentApprovals::parse(v).is_none()
    {
        return Err(format!("[tools]: {}", subagent_approvals_error(v)));
    }
    Ok(())
}

fn subagent_approvals_error(value: &str) -> String {
    format!("subagent_approvals must be \"ask\" or \"unattended\", not {value:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personas_reach_the_engine_and_empty_ones_are_refused() {
        let f = ServerFile::parse(
            "[tools.personas]\nreviewer = [\"read_file\", \"tool_search\"]\ncalc = [\"math\"]\n",
        )
        .unwrap();
        let mut config = EngineConfig::default();
        f.apply_engine_settings(&EngineFlags::default(), &mut config)
            .unwrap();
        assert_eq!(
            config.toolset.persona("reviewer").unwrap(),
            ["read_file", "tool_search"]
        );
        assert_eq!(config.toolset.persona("calc").unwrap(), ["math"]);
        let empty = ServerFile::parse("[tools.personas]\nnone = []\n").unwrap();
        let err = empty
            .apply_engine_settings(&EngineFlags::default(), &mut EngineConfig::default())
            .unwrap_err();
        assert!(err.contains("tools.personas.none"), "{err}");
    }

    #[test]
    fn the_rerank_section_is_read_and_checked_naming_the_key() {
        let f = ServerFile::parse(
            "[rerank]\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"r\"\nbm25 = true\n",
        )
        .unwrap();
        let r = f.rerank.unwrap();
        assert_eq!((r.model.as_str(), r.bm25), ("r", Some(true)));
        assert!(ServerFile::parse("").unwrap().rerank.is_none());
        for (text, says) in [
            (
                "[rerank]\nbase_url = \"http://h\"\nmodel = \"r\"\nurl = 1\n",
                "url",
            ),
            ("[rerank]\nmodel = \"r\"\n", "base_url"),
            (
                "[rerank]\nbase_url = \"http://h\"\nmodel = \"r\"\nbm25_threshold = 2.0\n",
                "bm25_threshold",
            ),
        ] {
            let err = ServerFile::parse(text).unwrap_err();
            assert!(err.contains("[rerank]") && err.contains(says), "{err}");
        }
    }

    #[test]
    fn the_searxng_url_environment_variable_wins_over_the_file() {
        let file = ServerFile::parse("[tools]\nsearxng_url = \"http://file:8888\"\n").unwrap();
        let env = |v: &str| Some(v.to_string());
        assert_eq!(
            file.tools.searxng_url(env("http://env:8888")).as_deref(),
            Some("http://env:8888")
        );
        assert_eq!(
            file.tools.searxng_url(env("  ")).as_deref(),
            Some("http://file:8888")
        );
        assert_eq!(
            file.tools.searxng_url(None).as_deref(),
            Some("http://file:8888")
        );
        assert_eq!(ToolsSection::default().searxng_url(None), None);
    }

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
    fn engine_keys_reach_the_engine_config_and_flags_win() {
        let f = ServerFile::parse(
            r#"
[server]
auto_compact_pct = 0.5
compact_max_tokens = 4096
auto_title = false
watch_tick_secs = 3
[tools]
agent_max_turns = 7
subagent_auto_approve_all = false
subagent_approvals = "unattended"
web_search_backend = "mcp:brave:brave_web_search"
"#,
        )
        .unwrap();
        assert_eq!(
            f.tools.search_backend.as_deref(),
            Some("mcp:brave:brave_web_search")
        );
        let mut config = EngineConfig {
            auto_title: true,
            ..EngineConfig::default()
        };
        f.apply_engine_settings(&EngineFlags::default(), &mut config)
            .unwrap();
        assert_eq!(config.auto_compact_pct, 0.5);
        assert_eq!(config.compact_max_tokens, 4096);
        assert!(!config.auto_title);
        assert_eq!(config.agent_max_turns, 7);
        assert!(!config.subagent_auto_approve_all);
        assert_eq!(config.subagent_approvals, SubagentApprovals::Unattended);
        assert_eq!(
            f.watch_tick(&EngineFlags::default()),
            Ok(Duration::from_secs(3))
        );

        // Flags (or their env vars) win over the file.
        let flags = EngineFlags {
            agent_max_turns: Some(30),
            subagent_auto_approve_all: Some(true),
            watch_tick_secs: Some(9),
        };
        f.apply_engine_settings(&flags, &mut config).unwrap();
        assert_eq!(config.agent_max_turns, 30);
        assert!(config.subagent_auto_approve_all);
        assert_eq!(f.watch_tick(&flags), Ok(Duration::from_secs(9)));
        let zero = EngineFlags {
            agent_max_turns: Some(0),
            watch_tick_secs: Some(0),
            ..EngineFlags::default()
        };
        assert!(f.apply_engine_settings(&zero, &mut config).is_err());
        assert!(f.watch_tick(&zero).is_err());

        // Without the keys the defaults stay.
        let empty = ServerFile::parse("").unwrap();
        let mut config = EngineConfig::default();
        empty
            .apply_engine_settings(&EngineFlags::default(), &mut config)
            .unwrap();
        let defaults = EngineConfig::default();
        assert_eq!(config.auto_compact_pct, defaults.auto_compact_pct);
        assert_eq!(config.compact_max_tokens, defaults.compact_max_tokens);
        assert_eq!(config.agent_max_turns, defaults.agent_max_turns);
        assert_eq!(
            empty.watch_tick(&EngineFlags::default()),
            Ok(Duration::from_secs(15))
        );
    }

    #[test]
    fn the_judge_table_sets_the_output_guard() {
        let mut config = EngineConfig::default();
        assert!(config.output_guard.scan && config.output_guard.redact);
        let f = ServerFile::parse("[judge]\nredact_secrets = false\n").unwrap();
        f.apply_engine_settings(&EngineFlags::default(), &mut config)
            .unwrap();
        assert!(config.output_guard.scan && !config.output_guard.redact);
        let f = ServerFile::parse("[judge]\noutput_guard = false\n").unwrap();
        f.apply_engine_settings(&EngineFlags::default(), &mut config)
            .unwrap();
        assert!(!config.output_guard.scan);
        assert!(!config.output_guard.llm, "the LLM tier is off by default");
        let f = ServerFile::parse("[judge]\noutput_guard_llm = true\n").unwrap();
        f.apply_engine_settings(&EngineFlags::default(), &mut config)
            .unwrap();
        assert!(config.output_guard.llm);
        let err = ServerFile::parse("[judge]\nredact = true\n").unwrap_err();
        assert!(err.contains("[judge]") && err.contains("redact"), "{err}");
    }

    #[test]
    fn engine_keys_out_of_range_are_named() {
        for (text, needle) in [
            ("[server]\nauto_compact_pct = 1.5\n", "auto_compact_pct"),
            ("[server]\nauto_compact_pct = -0.1\n", "auto_compact_pct"),
            ("[server]\ncompact_max_tokens = 0\n", "compact_max_tokens"),
            ("[server]\nwatch_tick_secs = 0\n", "watch_tick_secs"),
            ("[server]\nmax_queued_sends = 0\n", "max_queued_sends"),
            ("[server]\nauto_title = \"yes\"\n", "auto_title"),
            ("[tools]\nagent_max_turns = 0\n", "agent_max_turns"),
            ("[tools]\nagent_max_turns = -1\n", "agent_max_turns"),
            (
                "[tools]\nsubagent_approvals = \"never\"\n",
                "subagent_approvals",
            ),
            ("[tools]\nsearch_backend = \"bing\"\n", "bing"),
            (
                "[tools]\nweb_search_backend = \"mcp:x\"\n",
                "mcp:<server>:<tool>",
            ),
        ] {
            let err = ServerFile::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn an_unknown_key_is_named() {
        // `[server]` keys are flags' names: the binary's settings refuse unknown ones (see
        // tests/tests/suite/config_contract.rs); the flags' keys are no error here.
        ServerFile::parse("[server]\ntemperature = 0.2\nport = 8081\n").unwrap();
        let err = ServerFile::parse("[server]\nauto_compact_pct = \"high\"\n").unwrap_err();
        assert!(err.contains("[server]"), "{err}");
        let err = ServerFile::parse("[tools]\nallow_private = true\n").unwrap_err();
        assert!(err.contains("allow_private"), "{err}");
        let err = ServerFile::parse("[mcp.servers.\"a__b\"]\ncommand = \"x\"\n").unwrap_err();
        assert!(err.contains("a__b"), "{err}");
        assert!(ServerFile::parse("not toml [").is_err());
    }

    #[test]
    fn policies_are_read_and_bad_entries_are_named() {
        let file = ServerFile::parse(
            "[[policies]]\nname = \"no-mcp\"\ntool_pattern = \"mcp__*\"\naction = \"deny\"\npriority = 7\n\
             [[policies]]\nname = \"reads\"\ntool_pattern = \"read_file\"\naction = \"allow\"\nenabled = false\n",
        )
        .unwrap();
        assert_eq!(file.policies.len(), 2);
        assert_eq!(
            (file.policies[0].priority, file.policies[0].enabled),
            (7, true)
        );
        assert!(!file.policies[1].enabled);
        assert!(ServerFile::parse("").unwrap().policies.is_empty());

        let err = ServerFile::parse(
            "[[policies]]\nname = \"x\"\ntool_pattern = \"bash\"\naction = \"block\"\n",
        )
        .unwrap_err();
        assert!(
            err.contains("entry 1") && err.contains("action must be"),
            "{err}"
        );
        let err =
            ServerFile::parse("[[policies]]\nname = \"x\"\ntool_pattern = \"bash\"\n").unwrap_err();
        assert!(err.contains("action"), "{err}");
        let twice = "[[policies]]\nname = \"x\"\ntool_pattern = \"a\"\naction = \"ask\"\n";
        let err = ServerFile::parse(&format!("{twice}{twice}")).unwrap_err();
        assert!(err.contains("used twice"), "{err}");
        let err = ServerFile::parse(
            "[[policies]]\nname = \"x\"\ntool_pattern = \"a\"\naction = \"ask\"\ncolour = 1\n",
        )
        .unwrap_err();
        assert!(err.contains("colour"), "{err}");
    }
}
