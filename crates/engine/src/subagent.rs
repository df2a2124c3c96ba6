//! `task_agent`: a sub-agent that runs a task to completion and hands its final answer back
//! as the tool result (seed 000 "task_agent").
//!
//! The sub-agent is a fresh, non-persisted conversation run by the *same* turn loop as a
//! workstream (`turn.rs`): the tool builds a private engine view ([`Engine`] with the
//! sub-agent's model, system prompt, request limit and unattended approval policy, over the
//! parent's live tool registry) and a detached workstream state (no actor, no journal, no
//! node-wide hook), then runs one turn on it. What differs from a workstream is carried by
//! configuration, not by a second loop:
//!
//! - tools: the task-agent subset, every registered tool whose metadata says `task_agent`
//!   (a hand-picked [`ToolIntent`], so no `tool_search`), read at every call so MCP tools that
//!   arrive later are included; `task_agent` itself never is;
//! - turn limit: [`EngineConfig::agent_max_turns`] model requests
//!   ([`EngineConfig::max_turn_requests`] of the sub-agent's engine); when reached, the tool
//!   returns what the sub-agent has plus a note;
//! - approvals: every call runs unasked when [`EngineConfig::subagent_auto_approve_all`]
//!   is on. Otherwise, with [`EngineConfig::subagent_approvals`] `ask` (the default), the
//!   sub-agent asks through its parent workstream: each gated batch is an approval round
//!   of the parent (`rounds.rs`), shown on the parent's stream with its own `cycle_id`
//!   and decided under the parent's settings, so several sub-agents running in parallel
//!   may each wait for a decision. With `unattended` (or with no workstream to ask, a
//!   tool called outside a turn) nobody is asked ([`EngineConfig::unattended`]): tools
//!   with `auto_approve` metadata run, the rest are denied with a tool error;
//! - model: the `agent_model`'s provider when one is configured ([`AgentModel`]), else the
//!   parent's.
//!
//! Cancellation cascades by drop: when the parent's turn is cancelled it drops this tool's
//! `execute` future, which drops the sub-agent's turn — its provider stream and its running
//! tools (bash children are killed on drop).
//!
//! Progress: the sub-agent's events are read from its own log and forwarded to the parent's
//! [`OutputSink`] as short lines (`→ bash: ls`), so the parent's frontends see them as the
//! `task_agent` call's streamed output.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use turnstone_llm::{ChatMessage, Resilient, Role};
use turnstone_tools::toolset::ToolIntent;
use turnstone_tools::{
    OutputSink, Prepared, Provenance, RegistryError, Tool, ToolContext, ToolDefinition, ToolOutput,
    parse_definition, truncate_output,
};

use crate::config::{EngineConfig, SubagentApprovals};
use crate::engine::Engine;
use crate::event::Event;
use crate::log::Item;
use crate::shared::Shared;
use crate::state::TurnEnd;
use crate::turn;

/// The tool's name.
pub const TASK_AGENT: &str = "task_agent";

/// The schema (OpenAI function plus Turnstone metadata): top-level only, needs approval.
const SCHEMA: &str = r#"{
  "name": "task_agent",
  "description": "Delegate a self-contained task to an autonomous sub-agent. The sub-agent starts with a fresh conversation (it does not see this one), has the read, write, edit, search, bash and web tools, works in the same directory, runs to completion without asking, and its final message is returned to you as this tool's result. Use it for multi-step work that needs file changes or commands; give it everything it needs to know in the prompt.",
  "parameters": {
    "type": "object",
    "properties": {
      "prompt": {
        "type": "string",
        "description": "The complete task description for the sub-agent: goal, relevant paths and facts, and what its final answer should contain."
      }
    },
    "required": ["prompt"]
  },
  "agent": false,
  "task_agent": false,
  "auto_approve": false,
  "primary_key": "prompt"
}"#;

/// The sub-agent's system prompt (`{cwd}` is replaced by the working directory).
const SYSTEM_PROMPT: &str = "You are a task sub-agent of Turnstone, started by another \
assistant (your parent) to carry out one task on its behalf. You work autonomously: nobody \
answers questions while you run, so do not ask any; use your tools to do the work, checking \
results as you go. Your working directory is {cwd}. When the task is done (or cannot be \
done), reply with a final message and no tool calls: that message, and only that message, is \
returned to your parent, so make it a complete, self-contained report of what you did, what \
you found and anything left undone.";

/// The model a sub-agent runs on when it is not the parent's (`[model] agent_model`).
#[derive(Clone)]
pub struct AgentModel {
    /// The provider (typically the registry's `agent_chain()`, made resilient).
    pub provider: Resilient,
    /// The model name its requests carry.
    pub model: String,
}

impl std::fmt::Debug for AgentModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentModel")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// What makes a sub-agent tool (`task_agent`, `plan_agent`) what it is; the rest —
/// building its engine view, numbering and naming its runs, running its turn — is
/// [`AgentTool`]'s, the same for every kind.
pub(crate) struct AgentKind {
    /// The tool's name (also the sub-agent conversation's name).
    pub name: &'static str,
    /// The schema (OpenAI function plus Turnstone metadata).
    pub schema: &'static str,
    /// The middle of a sub-agent's id: `{parent ws_id}/{id_kind}-{run}`.
    pub id_kind: &'static str,
    /// The sub-agent's system prompt (`{cwd}` is replaced by the working directory).
    pub system_prompt: &'static str,
    /// The tools the sub-agent gets, read from the parent's live registry at every call (so
    /// MCP tools that arrive later are included); never a sub-agent tool of its own kind.
    pub tools: fn(&Engine) -> Vec<String>,
}

/// `task_agent`'s kind: the task-agent tool subset and the task prompt.
pub(crate) const TASK: AgentKind = AgentKind {
    name: TASK_AGENT,
    schema: SCHEMA,
    id_kind: "agent",
    system_prompt: SYSTEM_PROMPT,
    tools: |parent| {
        parent
            .registry()
            .task_agent_names()
            .into_iter()
            .filter(|n| n != TASK_AGENT)
            .collect()
    },
};

/// A sub-agent tool of one [`AgentKind`]. Holds its engine weakly: the engine's registry
/// holds the tool.
pub(crate) struct AgentTool {
    kind: &'static AgentKind,
    definition: ToolDefinition,
    engine: Weak<Engine>,
    model: Option<AgentModel>,
    runs: AtomicU64,
}

impl std::fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.kind.name)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// The span of one sub-agent run, named after the tool (`$name`); [`AgentTool::run`] records
/// the sub-agent's id, model and request limit in it. `$extra` fields are the kind's own.
macro_rules! sub_agent_span {
    ($name:literal, $ctx:expr $(, $($extra:tt)+)?) => {
        tracing::info_span!(
            $name,
            parent_ws = %$ctx.ws_id,
            agent = tracing::field::Empty,
            model = tracing::field::Empty,
            max_requests = tracing::field::Empty
            $(, $($extra)+)?
        )
    };
}
pub(crate) use sub_agent_span;

impl AgentTool {
    /// The tool of `kind` for `engine` (not registered).
    pub(crate) fn new(
        kind: &'static AgentKind,
        engine: &Arc<Engine>,
        model: Option<AgentModel>,
    ) -> Result<Self, RegistryError> {
        Ok(Self {
            kind,
            definition: parse_definition(kind.schema)?,
            engine: Arc::downgrade(engine),
            model,
            runs: AtomicU64::new(0),
        })
    }

    pub(crate) fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    /// Runs one sub-agent turn with `prompt` as its first user message (see [`sub_engine`]
    /// and [`run_sub_turn`]) inside `span` (made with `sub_agent_span!`); returns how it
    /// ended and the sub-agent's conversation, or the tool's error when the engine is
    /// shutting down.
    pub(crate) async fn run(
        &self,
        prompt: String,
        ctx: &ToolContext,
        out: &dyn OutputSink,
        span: tracing::Span,
    ) -> Result<(TurnEnd, Arc<Vec<ChatMessage>>), ToolOutput> {
        let Some(parent) = self.engine.upgrade() else {
            return Err(ToolOutput::error("Error: the engine is shutting down"));
        };
        let kind = self.kind;
        let run = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        let system_prompt = kind
            .system_prompt
            .replace("{cwd}", &ctx.cwd.display().to_string());
        let pc = parent.config();
        // Who decides the sub-agent's gated calls: the parent workstream of the running
        // call, unless the settings say nobody (or no turn runs this call).
        let host = (pc.subagent_approvals == SubagentApprovals::Ask
            && !pc.subagent_auto_approve_all)
            .then(|| crate::shared::CALLER.try_with(Arc::clone).ok())
            .flatten();
        let engine = sub_engine(
            &parent,
            self.model.as_ref(),
            (kind.tools)(&parent),
            system_prompt,
            host.is_some(),
        );
        let id = format!("{}/{}-{run}", ctx.ws_id, kind.id_kind);
        span.record("agent", tracing::field::display(&id));
        span.record("model", tracing::field::display(&engine.config().model));
        span.record(
            "max_requests",
            engine.config().max_turn_requests.unwrap_or(0),
        );
        Ok(run_sub_turn(&engine, host, id, kind.name, prompt, ctx, out, span).await)
    }
}

/// The `task_agent` tool.
#[derive(Debug)]
pub struct TaskAgentTool(AgentTool);

/// Registers `task_agent` in `engine`'s live registry (provenance built-in); sub-agents run
/// on the parent's model.
pub fn register_subagent(engine: &Arc<Engine>) -> Result<(), RegistryError> {
    register_subagent_with(engine, None)
}

/// [`register_subagent`] with the sub-agents' own model (`agent_model`) when configured.
pub fn register_subagent_with(
    engine: &Arc<Engine>,
    model: Option<AgentModel>,
) -> Result<(), RegistryError> {
    let tool = TaskAgentTool::new(engine, model)?;
    engine.registry().add(Arc::new(tool), Provenance::Builtin)
}

impl TaskAgentTool {
    /// The tool for `engine` (not registered; see [`register_subagent`]).
    pub fn new(engine: &Arc<Engine>, model: Option<AgentModel>) -> Result<Self, RegistryError> {
        AgentTool::new(&TASK, engine, model).map(Self)
    }
}

/// The engine view a sub-agent runs on: the parent's registry and settings, with the
/// sub-agent's model (`model`, else the parent's), system prompt, tool set (`tools`, a
/// hand-picked intent), request limit (`agent_max_turns`) and approval policy (it `asks`
/// through its parent workstream, or runs unattended).
fn sub_engine(
    parent: &Engine,
    model: Option<&AgentModel>,
    tools: Vec<String>,
    system_prompt: String,
    asks: bool,
) -> Engine {
    let pc = parent.config();
    let parents_model = model.is_none();
    let (provider, model) = match model {
        Some(m) => (m.provider.clone(), m.model.clone()),
        None => (parent.provider().clone(), pc.model.clone()),
    };
    let config = EngineConfig {
        model,
        model_alias: String::new(),
        system_prompt: Some(system_prompt),
        default_tool_intent: ToolIntent::only(tools),
        skip_permissions: pc.subagent_auto_approve_all,
        max_turn_requests: Some(pc.agent_max_turns.max(1)),
        unattended: !asks,
        // A sub-agent's conversation is short-lived and never shown in a list.
        auto_title: false,
        // Another model (`agent_model`) is not known to see images: it gets descriptions.
        vision: pc.vision && parents_model,
        ..EngineConfig::clone(&pc)
    };
    Engine {
        provider,
        tools: parent.registry().clone(),
        config: parking_lot::RwLock::new(std::sync::Arc::new(config)),
        context_window: AtomicU32::new(parent.context_window()),
        routes: Default::default(),
        // Sub-agents get their own prompt only.
        sections: Default::default(),
        // What the guard finds inside a sub-agent counts as the node's.
        guard_stats: parent.guard_stats.clone(),
        // The parent's tool policies bind its sub-agents too.
        policies: parking_lot::RwLock::new(parent.policies()),
        // Its own: a sub-agent's surfaces differ from its parent's.
        frozen_tools: Default::default(),
    }
}

/// Runs one sub-agent turn with `prompt` as its first user message on `engine` (see
/// [`sub_engine`]), in a detached conversation named `name` with id `id`, forwarding its
/// progress to `out`; returns how the turn ended and the sub-agent's conversation. The
/// conversation shares the parent's working directory and ids but has its own
/// read-before-edit set; with a `host` its gated calls are approval rounds of that
/// workstream. Dropping the future cancels the sub-agent (and withdraws a pending round).
#[allow(clippy::too_many_arguments)]
async fn run_sub_turn(
    engine: &Engine,
    host: Option<Arc<Shared>>,
    id: String,
    name: &str,
    prompt: String,
    ctx: &ToolContext,
    out: &dyn OutputSink,
    span: tracing::Span,
) -> (TurnEnd, Arc<Vec<ChatMessage>>) {
    let mut shared = Shared::new(
        engine,
        id.as_str().into(),
        name.into(),
        None,
        None,
        Vec::new(),
    );
    // The parent's working directory and ids, but its own read-before-edit set: what
    // the parent read is not known to this conversation.
    shared.tool_ctx = ToolContext {
        read_files: Arc::default(),
        ..ctx.clone()
    };
    shared.host = host;
    shared.publish(|v| v.turn_count = 1);
    let shared = Arc::new(shared);
    let mut events = shared.log.subscribe(None);
    let end = {
        let turn = turn::run(
            engine,
            &shared,
            prompt,
            crate::new_correlation_id(),
            CancellationToken::new(),
        )
        .instrument(span);
        tokio::pin!(turn);
        loop {
            tokio::select! {
                biased;
                item = events.next() => match item {
                    Some(Item::Event(env)) => progress(&env.event, out),
                    Some(Item::Truncated { .. }) => {}
                    None => break (&mut turn).await,
                },
                end = &mut turn => break end,
            }
        }
    };
    for item in events.backlog() {
        if let Item::Event(env) = item {
            progress(&env.event, out);
        }
    }
    let history = shared.messages();
    tracing::debug!(?end, messages = history.len(), "sub-agent finished");
    (end, history)
}

#[async_trait]
impl Tool for TaskAgentTool {
    fn definition(&self) -> &ToolDefinition {
        self.0.definition()
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        prepare_agent_call(&args, TASK_AGENT, "prompt")
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        out: &dyn OutputSink,
    ) -> ToolOutput {
        let prompt = prepared
            .args
            .get("prompt")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let span = sub_agent_span!("task_agent", ctx);
        match self.0.run(prompt, ctx, out, span).await {
            Ok((end, history)) => finish(end, &history, ctx),
            Err(shutting_down) => shutting_down,
        }
    }
}

/// The tool result for how the sub-agent's turn ended.
fn finish(end: TurnEnd, history: &[ChatMessage], ctx: &ToolContext) -> ToolOutput {
    let last = last_text(history);
    let output = match end {
        TurnEnd::Done => match last {
            Some(text) => ToolOutput::ok(text),
            None => ToolOutput::ok("(the sub-agent finished without a final message)"),
        },
        TurnEnd::Limit(requests) => ToolOutput::ok(format!(
            "{}\n\n[task_agent: the sub-agent was stopped after {requests} model requests \
             (agent_max_turns) before it finished; the task may be incomplete]",
            last.unwrap_or_else(|| "(the sub-agent had no answer yet)".to_string())
        )),
        TurnEnd::Failed(message) => ToolOutput::error(match last {
            Some(text) => {
                format!("Error: the sub-agent failed: {message}\nIts last message:\n{text}")
            }
            None => format!("Error: the sub-agent failed: {message}"),
        }),
        TurnEnd::Cancelled => ToolOutput::error("Error: the sub-agent was cancelled"),
    };
    ToolOutput {
        content: truncate_output(&output.content, ctx.truncation_limit),
        ..output
    }
}

/// The `prepare` of a sub-agent tool (`task_agent`, `plan_agent`): its one text argument
/// `key`, required and non-empty, a one-line header and the whole text as preview; always
/// needs approval (label = the tool's name). The prepared args hold only that argument.
pub(crate) fn prepare_agent_call(args: &Value, tool: &str, key: &str) -> Result<Prepared, String> {
    let Some(map) = args.as_object() else {
        return Err("Error: arguments must be a JSON object".into());
    };
    let text = match map.get(key) {
        Some(Value::String(t)) if !t.trim().is_empty() => t.trim().to_string(),
        Some(Value::String(_)) => {
            return Err(format!("Error: argument '{key}' must not be empty"));
        }
        None | Some(Value::Null) => {
            return Err(format!("Error: missing required argument '{key}'"));
        }
        Some(_) => return Err(format!("Error: argument '{key}' must be a string")),
    };
    let first = text.lines().next().unwrap_or_default();
    let mut summary: String = first.chars().take(120).collect();
    if first.chars().count() > 120 || text.lines().nth(1).is_some() {
        summary.push_str(" \u{2026}");
    }
    Ok(Prepared {
        header: format!("\u{2699} {tool}: {summary}"),
        preview: text.clone(),
        needs_approval: true,
        approval_label: tool.to_string(),
        args: json!({ key: text }),
    })
}

/// The text of the last assistant message that has some.
pub(crate) fn last_text(history: &[ChatMessage]) -> Option<String> {
    history
        .iter()
        .rev()
        .filter(|m| m.role() == Role::Assistant)
        .find_map(|m| m.content.clone().filter(|c| !c.trim().is_empty()))
}

/// Turns one of the sub-agent's events into short progress lines for the parent.
fn progress(event: &Event, out: &dyn OutputSink) {
    {
        let emit = |line: String| out.chunk(&format!("{line}\n"));
        match event {
            Event::ToolInfo { items } | Event::ApproveRequest { items, .. } => {
                for item in items {
                    match &item.error {
                        Some(error) => emit(format!(
                            "\u{2192} \u{2717} {}: {}",
                            item.func_name,
                            first_line(error, 160)
                        )),
                        None => {
                            let header = item.header.trim_start_matches('\u{2699}').trim_start();
                            emit(format!("\u{2192} {}", first_line(header, 160)));
                        }
                    }
                }
            }
            Event::ToolResult {
                name,
                output,
                is_error: true,
                ..
            } => emit(format!("  \u{2717} {name}: {}", first_line(output, 160))),
            Event::OutputWarning(w) => emit(format!(
                "  \u{26a0} output guard: {} in {} ({})",
                w.flags.join(", "),
                w.func_name,
                if w.redacted {
                    "redacted"
                } else {
                    "not redacted"
                }
            )),
            Event::Error { message } => emit(format!("  ! {}", first_line(message, 160))),
            Event::Info { message } => emit(format!("  {}", first_line(message, 160))),
            _ => {}
        }
    }
}

fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max {
        out.push('\u{2026}');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_is_the_last_assistant_text() {
        let history = vec![
            ChatMessage::user("do it"),
            ChatMessage::assistant(Some("working".into()), Vec::new()),
            ChatMessage::assistant(Some("  ".into()), Vec::new()),
        ];
        assert_eq!(last_text(&history).as_deref(), Some("working"));
        let ctx = ToolContext::new("/tmp");
        let out = finish(TurnEnd::Limit(3), &history, &ctx);
        assert!(!out.is_error);
        assert!(
            out.content.starts_with("working\n\n[task_agent: "),
            "{}",
            out.content
        );
        assert!(out.content.contains("after 3 model requests"));
        let out = finish(TurnEnd::Failed("boom".into()), &[], &ctx);
        assert!(out.is_error && out.content.contains("boom"));
    }
}
