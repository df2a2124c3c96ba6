//! `plan_agent`: a read-only planning sub-agent, and the review of its plan by the user
//! (node spec §4.7).
//!
//! The tool runs a sub-agent on the shared turn loop exactly as `task_agent` does
//! (`subagent.rs`: same engine view, request limit and unattended approval policy), with
//! its own system prompt asking for a concrete step-by-step plan and only the tools whose
//! metadata says `agent` (read-only: `read_file`, `search`, `diff_file`, `web_search`, …;
//! never `plan_agent` or `task_agent`). Its final text is the plan.
//!
//! Review: the user reviews the plan before it becomes the tool result (`review.rs`, which
//! the turn loop calls; this module only makes plans).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use turnstone_tools::{
    OutputSink, Prepared, Provenance, RegistryError, Tool, ToolContext, ToolDefinition, ToolOutput,
};

use crate::engine::Engine;
use crate::state::TurnEnd;
use crate::subagent::{AgentKind, AgentModel, AgentTool, TASK_AGENT, last_text, sub_agent_span};

pub use crate::review::{MAX_REFINEMENTS, PLAN_AGENT};
pub use crate::state::{PlanDecision, PlanOutcome, PlanVerdict};

/// The schema (OpenAI function plus Turnstone metadata): top-level only, needs approval.
const SCHEMA: &str = r#"{
  "name": "plan_agent",
  "description": "Plan before acting: delegate the investigation of a goal to a read-only planning sub-agent. It starts with a fresh conversation (it does not see this one), may read and search files and the web in the same directory but changes nothing, and returns a concrete step-by-step plan. The user reviews the plan (accept, reject or ask for changes) before it is returned to you as this tool's result; an accepted plan is also saved to a file whose path the result names. Use it for multi-step changes where the user should agree on the approach first; give the goal and every fact the planner needs.",
  "parameters": {
    "type": "object",
    "properties": {
      "goal": {
        "type": "string",
        "description": "What the plan must achieve: the goal, constraints, relevant paths and facts."
      }
    },
    "required": ["goal"]
  },
  "agent": false,
  "task_agent": false,
  "auto_approve": false,
  "primary_key": "goal"
}"#;

/// The planner's system prompt (`{cwd}` is replaced by the working directory).
const SYSTEM_PROMPT: &str = "You are a planning sub-agent of Turnstone, started by another \
assistant (your parent) to plan one goal on its behalf. You are read-only: investigate with \
your tools (read and search files, look things up) as much as the plan needs, but change \
nothing. Nobody answers questions while you run, so do not ask any. Your working directory \
is {cwd}. When you know enough, reply with a final message and no tool calls: a concrete, \
step-by-step plan in Markdown — numbered steps naming the files, functions and commands \
involved, what each step changes, how to verify the result, and the risks or open \
questions. That message, and only that message, is the plan: the user reviews it and your \
parent carries it out, so make it complete and self-contained.";

/// `plan_agent`'s kind: the `agent` tool subset (never a sub-agent tool) and the planning
/// prompt.
const PLAN: AgentKind = AgentKind {
    name: PLAN_AGENT,
    schema: SCHEMA,
    id_kind: "plan",
    system_prompt: SYSTEM_PROMPT,
    tools: |parent| {
        parent
            .registry()
            .agent_names()
            .into_iter()
            .filter(|n| n != PLAN_AGENT && n != TASK_AGENT)
            .collect()
    },
};

/// The `plan_agent` tool.
#[derive(Debug)]
pub struct PlanAgentTool(AgentTool);

/// Registers `plan_agent` in `engine`'s live registry (provenance built-in); the planner
/// runs on the sub-agents' model (`agent_model`) when one is given, else the parent's.
/// Only for frontends that answer plan reviews (the node's API): a review blocks the turn
/// until it is answered, cancelled or timed out.
pub fn register_plan_agent(
    engine: &Arc<Engine>,
    model: Option<AgentModel>,
) -> Result<(), RegistryError> {
    let tool = PlanAgentTool::new(engine, model)?;
    engine.registry().add(Arc::new(tool), Provenance::Builtin)
}

impl PlanAgentTool {
    /// The tool for `engine` (not registered; see [`register_plan_agent`]).
    pub fn new(engine: &Arc<Engine>, model: Option<AgentModel>) -> Result<Self, RegistryError> {
        AgentTool::new(&PLAN, engine, model).map(Self)
    }
}

/// The planner's first message: the goal, or for a refinement the goal, the plan under
/// review and the user's feedback.
fn planner_prompt(goal: &str, previous: Option<&str>, feedback: Option<&str>) -> String {
    match (previous, feedback) {
        (Some(previous), Some(feedback)) => format!(
            "{goal}\n\n---\nA previous plan for this goal was reviewed by the user:\n\n\
             {previous}\n\n---\nThe user asks for these changes:\n\n{feedback}\n\n\
             Write the complete revised plan (not only the changes)."
        ),
        _ => goal.to_string(),
    }
}

#[async_trait]
impl Tool for PlanAgentTool {
    fn definition(&self) -> &ToolDefinition {
        self.0.definition()
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        // Only the goal: what a refinement adds is set by `review`, never by the model.
        crate::subagent::prepare_agent_call(&args, PLAN_AGENT, "goal")
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        out: &dyn OutputSink,
    ) -> ToolOutput {
        let arg = |key: &str| prepared.args.get(key).and_then(Value::as_str);
        let goal = arg("goal").unwrap_or_default();
        let prompt = planner_prompt(goal, arg("previous_plan"), arg("feedback"));
        let span = sub_agent_span!("plan_agent", ctx, refinement = arg("feedback").is_some());
        match self.0.run(prompt, ctx, out, span).await {
            Ok((end, history)) => planned(end, last_text(&history)),
            Err(shutting_down) => shutting_down,
        }
    }
}

/// The tool output for how the planner's turn ended: the plan (uncut: it is written to the
/// plan file; [`review`] truncates the final result), or an error.
fn planned(end: TurnEnd, last: Option<String>) -> ToolOutput {
    match (end, last) {
        (TurnEnd::Done, Some(plan)) => ToolOutput::ok(plan),
        (TurnEnd::Done, None) => {
            ToolOutput::error("Error: the plan agent finished without writing a plan")
        }
        (TurnEnd::Limit(requests), Some(plan)) => ToolOutput::ok(format!(
            "{plan}\n\n[plan_agent: the planner was stopped after {requests} model requests \
             (agent_max_turns) before it finished; the plan may be incomplete]"
        )),
        (TurnEnd::Limit(requests), None) => ToolOutput::error(format!(
            "Error: the plan agent was stopped after {requests} model requests \
             (agent_max_turns) before it wrote a plan"
        )),
        (TurnEnd::Failed(message), _) => {
            ToolOutput::error(format!("Error: the plan agent failed: {message}"))
        }
        (TurnEnd::Cancelled, _) => ToolOutput::error("Error: the plan agent was cancelled"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schemas_are_top_level_only_and_need_approval() {
        for (kind, key) in [(&crate::subagent::TASK, "prompt"), (&PLAN, "goal")] {
            let def =
                turnstone_tools::parse_definition(kind.schema).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(def.name, kind.name);
            assert!(!def.meta.task_agent && !def.meta.agent && !def.meta.auto_approve);
            assert_eq!(def.meta.primary_key.as_deref(), Some(key));
        }
    }

    #[test]
    fn replies_are_classified() {
        for accept in ["", "  ", "\n"] {
            assert_eq!(PlanDecision::classify(accept), PlanDecision::Accept);
        }
        for reject in ["n", "N", "no", " No ", "REJECT", "reject"] {
            assert_eq!(
                PlanDecision::classify(reject),
                PlanDecision::Reject,
                "{reject}"
            );
        }
        for refine in ["nope", "no tests", "rejected", "add a test step"] {
            assert_eq!(
                PlanDecision::classify(refine),
                PlanDecision::Refine,
                "{refine}"
            );
        }
    }

    #[test]
    fn a_refinement_prompt_carries_the_goal_the_plan_and_the_feedback() {
        assert_eq!(planner_prompt("fix it", None, None), "fix it");
        let p = planner_prompt("fix it", Some("1. look"), Some("add tests"));
        assert!(p.starts_with("fix it\n"));
        assert!(p.contains("1. look") && p.contains("add tests"));
    }

    #[test]
    fn a_planner_without_a_plan_is_an_error() {
        assert!(planned(TurnEnd::Done, None).is_error);
        assert!(planned(TurnEnd::Cancelled, Some("x".into())).is_error);
        let limited = planned(TurnEnd::Limit(2), Some("1. a".into()));
        assert!(!limited.is_error && limited.content.starts_with("1. a\n\n[plan_agent:"));
    }
}
