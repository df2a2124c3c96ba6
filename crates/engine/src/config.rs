//! Engine settings: what a node or terminal client configures once for all workstreams.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use turnstone_llm::{ModelRegistry, Resilient};
use turnstone_tools::Reranker;
use turnstone_tools::toolset::{ToolIntent, ToolsetConfig};

/// Per-engine settings shared by every workstream it runs.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Model name sent to the provider.
    pub model: String,
    /// Alias shown to frontends (`model_alias`); empty when none.
    pub model_alias: String,
    /// System prompt placed first in every request; `None` for none.
    pub system_prompt: Option<String>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Reasoning effort (`low`/`medium`/`high`), reported in `status`.
    pub reasoning_effort: String,
    /// Context window in tokens (0 = ask the provider once at start).
    pub context_window: u32,
    /// The model accepts images: `read_file` of an image sends the image to it (default
    /// off: the model gets the text description only). A workstream on another registry
    /// alias uses that alias's `vision`.
    pub vision: bool,
    /// How long an approval may stay pending before it is denied.
    pub approval_timeout: Duration,
    /// At most this many tool calls of one batch run at once.
    pub max_parallel_tools: usize,
    /// Approval labels approved without asking (besides tools that need no approval).
    pub auto_approve_labels: BTreeSet<String>,
    /// Blanket auto-approve for new workstreams (`skip_permissions`).
    pub skip_permissions: bool,
    /// Tool output limit in characters; 0 = auto (context window × 4 × 0.5).
    pub truncation: usize,
    /// Working directory of tools.
    pub cwd: PathBuf,
    /// Events retained per workstream for resumption.
    pub event_log_capacity: usize,
    /// Live events buffered per subscriber before it falls back to the ring.
    pub live_buffer: usize,
    /// Tool sets, tool search and deferral (`[tools]`: `search`, `search_threshold`,
    /// `search_max_results`, presets).
    pub toolset: ToolsetConfig,
    /// The tool intent of a workstream created without one (default: all tools, live).
    pub default_tool_intent: ToolIntent,
    /// The node's id, handed to tools (`local` for the terminal client).
    pub node_id: String,
    /// Most model requests one turn may make (`None`: no limit). Workstreams run without a
    /// limit; a `task_agent` sub-agent's engine sets it to [`EngineConfig::agent_max_turns`].
    /// A turn that reaches it ends idle with an info line, its conversation intact.
    pub max_turn_requests: Option<u32>,
    /// Nobody answers approval requests (the engine of a sub-agent that does not ask
    /// through its parent, see [`SubagentApprovals`]): calls of tools whose metadata says
    /// `auto_approve` run, every other call that would wait for a human is denied at once
    /// with a tool error saying why.
    pub unattended: bool,
    /// `task_agent`: model requests a sub-agent may make before it is stopped and returns
    /// what it has (`agent_max_turns`, default 20).
    pub agent_max_turns: u32,
    /// `task_agent`: whether a sub-agent runs every tool call of its tool set without asking
    /// (`subagent_auto_approve_all`, default `false`: a sub-agent runs under the parent's
    /// approval policy, see [`EngineConfig::subagent_approvals`]).
    pub subagent_auto_approve_all: bool,
    /// `task_agent`/`plan_agent`: how a sub-agent's gated calls are decided
    /// (`tools.subagent_approvals`, default [`SubagentApprovals::Ask`]). Tool policies
    /// and `subagent_auto_approve_all` come first either way.
    pub subagent_approvals: SubagentApprovals,
    /// After a turn that ended without tool calls, compact the conversation when its prompt
    /// exceeded this share of the context window (`session.auto_compact_pct`; 0 disables).
    pub auto_compact_pct: f64,
    /// `max_tokens` of the compaction summary request (`session.compact_max_tokens`; capped
    /// at a quarter of the context window).
    pub compact_max_tokens: u32,
    /// Ask the model for a title after the first exchange of a new workstream (off by
    /// default so embedders and tests see only the requests they make; the node turns it
    /// on).
    pub auto_title: bool,
    /// The model registry `/model <alias>` switches a workstream within; `None`: the
    /// engine's one model for every workstream.
    pub models: Option<Arc<ModelRegistry>>,
    /// The output guard (`judge.output_guard`, `judge.redact_secrets`): both on by default.
    pub output_guard: OutputGuard,
    /// The intent judge (`judge.*`): heuristic verdicts on by default, the LLM tier off
    /// until an embedder configures it (the node does, from `[judge]`).
    pub judge: JudgeConfig,
    /// Re-orders web search results and retrieval candidates (`turnstone_tools::rerank`);
    /// every workstream's tools get it in their context. `None`: native order.
    pub reranker: Option<Arc<dyn Reranker>>,
}

/// How a sub-agent's calls that need a decision are decided (`tools.subagent_approvals`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SubagentApprovals {
    /// Through the parent workstream's approvals: each sub-agent's batch is an approval
    /// round of the parent (`approve_request` with its own `cycle_id`), decided under the
    /// parent's settings (posture, "always" labels, blanket auto-approve) while the parent
    /// waits in `attention`. Several sub-agents may wait at once.
    #[default]
    Ask,
    /// Nobody is asked: tools whose metadata says `auto_approve` run, every other gated
    /// call is denied with a tool error saying why.
    Unattended,
}

impl SubagentApprovals {
    /// The setting's value (`ask`, `unattended`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Unattended => "unattended",
        }
    }

    /// Reads a setting's value; `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "ask" => Some(Self::Ask),
            "unattended" => Some(Self::Unattended),
            _ => None,
        }
    }
}

/// The intent judge of gated tool calls (node spec §7.2 `judge.*`; see `gate.rs` and
/// `judge.rs`). One snapshot of it is taken per tool batch.
#[derive(Debug, Clone)]
pub struct JudgeConfig {
    /// `judge.enabled`: every item a human would be asked about gets a heuristic verdict,
    /// and the LLM tier (when configured) runs while the prompt is pending. Off: no
    /// verdicts, so the `auto-review` posture asks about everything.
    pub enabled: bool,
    /// The LLM tier; `None`: heuristic verdicts only.
    pub llm: Option<LlmJudge>,
    /// `judge.confidence_threshold`: the least confidence of a verdict that lets the
    /// `auto-review` posture run a call unasked (both tiers).
    pub confidence_threshold: f64,
}

impl Default for JudgeConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            llm: None,
            confidence_threshold: 0.7,
        }
    }
}

/// The LLM tier of the intent judge: which model is asked, how long it may take, and how
/// much of the conversation it sees.
#[derive(Debug, Clone)]
pub struct LlmJudge {
    /// The judge's own client (`judge.provider`/`judge.base_url`/`judge.api_key`);
    /// `None`: the workstream's client.
    pub client: Option<Resilient>,
    /// `judge.model`; empty: the workstream's model.
    pub model: String,
    /// `judge.timeout`: one item's request is abandoned after this (no verdict).
    pub timeout: Duration,
    /// `judge.max_context_ratio`: the share of the model's context window the judge's
    /// request may fill with conversation (the most recent messages that fit).
    pub max_context_ratio: f64,
}

impl LlmJudge {
    /// A judge on the workstream's own client and model, with the spec's defaults
    /// (timeout 60 s, context ratio 0.5).
    pub fn session() -> Self {
        Self {
            client: None,
            model: String::new(),
            timeout: Duration::from_secs(60),
            max_context_ratio: 0.5,
        }
    }
}

/// What the output guard does with every tool result (node spec §7.2 `judge.output_guard`,
/// `judge.redact_secrets`; see `guard.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputGuard {
    /// Scan every tool result and emit `output_warning` for flagged ones.
    pub scan: bool,
    /// Replace every detected secret before the result reaches anyone (the model, the
    /// history, the journal, SSE, the bridge). Needs `scan`.
    pub redact: bool,
    /// The optional LLM tier (`judge.output_guard_llm`, ours, off by default): a result
    /// the heuristics flagged is also assessed by the intent judge's model
    /// ([`JudgeConfig::llm`]; nothing without one) within the judge's timeout, before the
    /// `output_warning` goes out (see `guard.rs`). Needs `scan`.
    pub llm: bool,
}

impl OutputGuard {
    /// Most characters a tool returns while the guard scans: the guard sees the raw output
    /// up to this size, and the engine applies the tool-output limit after it (so a secret
    /// cannot be cut in half by the limit and slip past the guard).
    pub const RAW_LIMIT: usize = 256 * 1024;

    /// The limit tools apply themselves (`ToolContext::truncation_limit`) when the engine's
    /// tool-output limit is `limit`: the raw limit while scanning (the engine cuts to `limit`
    /// after the guard), else `limit`.
    /// `text` with every secret replaced when both scanning and redaction are on (`None`:
    /// nothing to replace). For output no tool call carries (a watch's poll output).
    pub fn redact(self, text: &str) -> Option<String> {
        if !(self.scan && self.redact) {
            return None;
        }
        turnstone_governance::assess_output(text, true).redacted_text
    }

    pub fn tool_limit(self, limit: usize) -> usize {
        if self.scan && limit > 0 {
            limit.max(Self::RAW_LIMIT)
        } else {
            limit
        }
    }
}

impl Default for OutputGuard {
    fn default() -> Self {
        Self {
            scan: true,
            redact: true,
            llm: false,
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            model: "default".to_string(),
            model_alias: String::new(),
            system_prompt: None,
            temperature: None,
            max_tokens: None,
            reasoning_effort: "medium".to_string(),
            context_window: 0,
            vision: false,
            approval_timeout: Duration::from_secs(3600),
            max_parallel_tools: 4,
            auto_approve_labels: BTreeSet::new(),
            skip_permissions: false,
            truncation: 0,
            cwd: PathBuf::from("."),
            event_log_capacity: 512,
            live_buffer: 64,
            toolset: ToolsetConfig::default(),
            default_tool_intent: ToolIntent::default(),
            node_id: "local".to_string(),
            max_turn_requests: None,
            unattended: false,
            agent_max_turns: 20,
            subagent_auto_approve_all: false,
            subagent_approvals: SubagentApprovals::default(),
            auto_compact_pct: 0.8,
            compact_max_tokens: 32_768,
            auto_title: false,
            models: None,
            output_guard: OutputGuard::default(),
            judge: JudgeConfig::default(),
            reranker: None,
        }
    }
}

impl EngineConfig {
    /// The tool-output limit in characters for a context window.
    pub fn truncation_limit(&self, context_window: u32) -> usize {
        if self.truncation > 0 {
            self.truncation
        } else {
            (context_window as usize) * 4 / 2
        }
    }
}

/// Limits of the workstream manager.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// Most workstreams at once; creating one more evicts the oldest idle one.
    pub max_workstreams: usize,
    /// Idle workstreams older than this are closed by [`crate::Manager::close_idle`];
    /// `None` disables.
    pub idle_timeout: Option<Duration>,
    /// Idle workstreams older than this leave memory by [`crate::Manager::hibernate_idle`]
    /// (their state is in the store), and the oldest of them makes room when
    /// `max_workstreams` live ones exist; `None` (the default) disables hibernation. Only
    /// for a manager whose journal stores everything a workstream needs to come back.
    pub hibernate_after: Option<Duration>,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self {
            max_workstreams: 50,
            idle_timeout: Some(Duration::from_secs(120 * 60)),
            hibernate_after: None,
        }
    }
}
