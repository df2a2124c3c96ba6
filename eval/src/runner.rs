//! Running a suite against one variant (a model and a system prompt): every case in its own
//! throwaway workspace, on its own engine with the built-in tools and `task_agent`, with a
//! null UI — nobody
//! is asked; the case's approval policy decides (see [`crate::suite::Approval`]) — bounded
//! by the case's time limit and its most model requests per turn.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;
use turnstone_engine::{
    CreateOptions, Engine, EngineConfig, Event, Item, JudgeConfig, Manager, ManagerConfig,
    SendOutcome, WorkstreamHandle, WsState,
};
use turnstone_llm::{ChatMessage, Resilient, Role};
use turnstone_tools::ToolRegistry;

use crate::checks::{self, CheckResult, Outcome, ToolCallRecord};
use crate::judge::{Evidence, JudgeModel};
use crate::suite::{Approval, Case, Check, Suite};

/// What one side of a run talks to.
#[derive(Clone)]
pub struct Variant {
    /// `A`, `B`, or a name given on the command line.
    pub label: String,
    pub provider: Resilient,
    pub model: String,
    /// `None`: the suite's system prompt (if any).
    pub system_prompt: Option<String>,
    /// Sampling temperature (`None`: the server's default).
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Sampling seed, as sent with the variant's requests (reported only).
    pub seed: Option<u64>,
}

impl std::fmt::Debug for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Variant")
            .field("label", &self.label)
            .field("model", &self.model)
            .field("system_prompt", &self.system_prompt)
            .finish()
    }
}

/// Settings of a whole run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// How many more times a case runs when its run failed (a model or engine error, not a
    /// failed check, not a timeout) — a flaky endpoint must not decide the score.
    pub retries: u32,
    /// The judge of `judge` checks; `None`: those checks fail saying no judge is set.
    pub judge: Option<JudgeModel>,
}

/// How one case went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    pub id: String,
    /// Every check passed (and the run did not fail).
    pub passed: bool,
    /// Share of checks passed (0–1).
    pub score: f64,
    /// Why the run itself failed (time limit, model error); its checks are still scored on
    /// what it produced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Runs it took (more than 1 after a retried failure).
    pub attempts: u32,
    pub duration_ms: u64,
    /// The final reply of each turn.
    pub replies: Vec<String>,
    pub tool_calls: Vec<ToolCallRecord>,
    pub checks: Vec<CheckResult>,
    /// Prompt plus completion tokens the case used.
    pub tokens: u64,
}

/// One variant's results over a suite.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantReport {
    pub label: String,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    pub passed: usize,
    pub total: usize,
    /// `passed / total`.
    pub pass_rate: f64,
    /// Mean of the cases' scores.
    pub mean_score: f64,
    pub tokens: u64,
    pub cases: Vec<CaseResult>,
}

/// Runs every case of `suite` against `variant`, one after the other.
pub async fn run_suite(suite: &Suite, variant: &Variant, options: &RunOptions) -> VariantReport {
    let system_prompt = variant
        .system_prompt
        .clone()
        .or_else(|| suite.system_prompt.clone());
    let mut cases = Vec::with_capacity(suite.cases.len());
    for case in &suite.cases {
        let result = run_case(case, variant, system_prompt.as_deref(), options).await;
        tracing::info!(
            variant = %variant.label,
            case = %result.id,
            passed = result.passed,
            "case scored"
        );
        cases.push(result);
    }
    let total = cases.len();
    let passed = cases.iter().filter(|c| c.passed).count();
    VariantReport {
        label: variant.label.clone(),
        model: variant.model.clone(),
        system_prompt,
        seed: variant.seed,
        passed,
        total,
        pass_rate: ratio(passed, total),
        mean_score: if total == 0 {
            0.0
        } else {
            cases.iter().map(|c| c.score).sum::<f64>() / total as f64
        },
        tokens: cases.iter().map(|c| c.tokens).sum(),
        cases,
    }
}

pub(crate) fn ratio(n: usize, of: usize) -> f64 {
    if of == 0 { 0.0 } else { n as f64 / of as f64 }
}

/// What one run of a case produced.
struct Transcript {
    replies: Vec<String>,
    tool_calls: Vec<ToolCallRecord>,
    tokens: u64,
    /// Why the run failed, if it did.
    error: Option<RunError>,
}

enum RunError {
    /// The time limit passed (not retried: it would most likely pass again).
    Timeout(Duration),
    /// The model or the engine failed (retried).
    Failed(String),
}

impl RunError {
    fn message(&self) -> String {
        match self {
            Self::Timeout(limit) => format!("timed out after {}s", limit.as_secs()),
            Self::Failed(message) => message.clone(),
        }
    }
}

async fn run_case(
    case: &Case,
    variant: &Variant,
    system_prompt: Option<&str>,
    options: &RunOptions,
) -> CaseResult {
    let started = Instant::now();
    let mut attempts = 0;
    let (transcript, workspace) = loop {
        attempts += 1;
        let workspace = match prepare_workspace(case).await {
            Ok(dir) => dir,
            Err(e) => {
                return failed_setup(case, attempts, started, format!("workspace: {e}"));
            }
        };
        let transcript = match attempt(case, variant, system_prompt, &workspace).await {
            Ok(t) => t,
            Err(e) => return failed_setup(case, attempts, started, e),
        };
        let retry =
            matches!(transcript.error, Some(RunError::Failed(_))) && attempts <= options.retries;
        if !retry {
            break (transcript, workspace);
        }
        tracing::warn!(
            case = %case.id,
            error = %transcript.error.as_ref().map(RunError::message).unwrap_or_default(),
            "case run failed; running it again"
        );
    };
    let reply = transcript.replies.last().cloned().unwrap_or_default();
    let checks = score_case(case, &transcript, &reply, workspace, options).await;
    let passed_checks = checks.iter().filter(|c| c.passed).count();
    let error = transcript.error.as_ref().map(RunError::message);
    CaseResult {
        id: case.id.clone(),
        passed: error.is_none() && passed_checks == checks.len(),
        score: ratio(passed_checks, checks.len()),
        error,
        attempts,
        duration_ms: started.elapsed().as_millis() as u64,
        replies: transcript.replies,
        tool_calls: transcript.tool_calls,
        checks,
        tokens: transcript.tokens,
    }
}

fn failed_setup(case: &Case, attempts: u32, started: Instant, error: String) -> CaseResult {
    CaseResult {
        id: case.id.clone(),
        passed: false,
        score: 0.0,
        error: Some(error),
        attempts,
        duration_ms: started.elapsed().as_millis() as u64,
        replies: Vec::new(),
        tool_calls: Vec::new(),
        checks: Vec::new(),
        tokens: 0,
    }
}

/// A fresh directory holding the case's fixture files.
async fn prepare_workspace(case: &Case) -> std::io::Result<tempfile::TempDir> {
    let files = case.files.clone();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::Builder::new()
            .prefix("turnstone-eval-")
            .tempdir()?;
        for (path, content) in files {
            let full = dir.path().join(path);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(full, content)?;
        }
        Ok(dir)
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Runs the case's turns on a fresh engine; `Err` when the engine could not be built.
async fn attempt(
    case: &Case,
    variant: &Variant,
    system_prompt: Option<&str>,
    workspace: &tempfile::TempDir,
) -> Result<Transcript, String> {
    let config = EngineConfig {
        model: variant.model.clone(),
        system_prompt: system_prompt.map(String::from),
        temperature: variant.temperature,
        max_tokens: variant.max_tokens,
        // `auto`: every call runs. `deny`: calls that need approval are asked about, and
        // the null UI in `run_turn` denies them.
        skip_permissions: case.approval == Approval::Auto,
        max_turn_requests: Some(case.max_turns),
        cwd: workspace.path().to_path_buf(),
        node_id: "eval".into(),
        // No extra model calls beyond the case's own (no titles, no intent verdicts).
        auto_title: false,
        judge: JudgeConfig {
            enabled: false,
            ..JudgeConfig::default()
        },
        ..EngineConfig::default()
    };
    let tools = Arc::new(ToolRegistry::with_builtins().map_err(|e| format!("tools: {e}"))?);
    let engine = Engine::new(variant.provider.clone(), tools, config).await;
    // `task_agent` as the node and the terminal client have it (its sub-agents run only
    // what needs no approval).
    turnstone_engine::register_subagent(&engine).map_err(|e| format!("tools: {e}"))?;
    let manager = Manager::new(
        engine,
        ManagerConfig {
            idle_timeout: None,
            ..ManagerConfig::default()
        },
    );
    let (ws, _) = manager
        .create(CreateOptions {
            name: Some(case.id.clone()),
            ..CreateOptions::default()
        })
        .map_err(|e| e.to_string())?;
    let mut replies = Vec::with_capacity(case.turns.len());
    let run = tokio::time::timeout(case.timeout, async {
        for turn in &case.turns {
            replies.push(String::new());
            let (reply, failure) = run_turn(&ws, turn).await;
            if let Some(slot) = replies.last_mut() {
                *slot = reply;
            }
            if let Some(failure) = failure {
                return Some(failure);
            }
        }
        None
    })
    .await;
    let error = match run {
        Ok(None) => None,
        Ok(Some(message)) => Some(RunError::Failed(message)),
        Err(_) => {
            ws.cancel();
            Some(RunError::Timeout(case.timeout))
        }
    };
    let history = ws.history();
    let tokens = ws.tokens_total();
    if let Err(e) = manager.close(ws.id()) {
        tracing::debug!(error = %e, "case workstream already closed");
    }
    Ok(Transcript {
        replies,
        tool_calls: tool_calls(&history),
        tokens,
        error,
    })
}

/// The feedback the model gets for a call denied by `approval = "deny"`.
pub const DENIAL: &str = "denied: this evaluation case approves no tool call that needs approval";

/// Sends one user message and follows the turn to its end: the turn's visible reply, and
/// why it failed when it did.
async fn run_turn(ws: &WorkstreamHandle, text: &str) -> (String, Option<String>) {
    let mut sub = ws.subscribe(None);
    match ws.send(text, None) {
        SendOutcome::Started { .. } => {}
        other => return (String::new(), Some(format!("send refused: {other:?}"))),
    }
    let mut error: Option<String> = None;
    while let Some(item) = sub.next().await {
        let Item::Event(env) = item else { continue };
        match &env.event {
            Event::Error { message } => error = Some(message.clone()),
            // The null UI: with `approval = "deny"` every call that needs approval is
            // denied at once (with blanket approval nothing is asked).
            Event::ApproveRequest { .. } => {
                ws.approve(false, Some(DENIAL.into()), false);
            }
            Event::PlanReview { .. } => {
                ws.plan_feedback("reject");
            }
            Event::TurnComplete { content, state, .. } => {
                let failed = *state == WsState::Error;
                let error = failed.then(|| error.unwrap_or_else(|| "the turn failed".into()));
                return (content.clone(), error);
            }
            _ => {}
        }
    }
    (
        String::new(),
        Some("the workstream closed mid-turn".to_string()),
    )
}

/// The calls of a conversation, each with the result that answered it.
fn tool_calls(history: &[ChatMessage]) -> Vec<ToolCallRecord> {
    let mut calls = Vec::new();
    for message in history {
        if message.role() != Role::Assistant {
            continue;
        }
        for call in &message.tool_calls {
            let output = history
                .iter()
                .find(|m| m.role() == Role::Tool && m.tool_call_id.as_deref() == Some(&call.id))
                .and_then(|m| m.content.clone());
            calls.push(ToolCallRecord {
                name: call.name.clone(),
                arguments: serde_json::from_str(&call.arguments)
                    .unwrap_or_else(|_| Value::String(call.arguments.clone())),
                output,
            });
        }
    }
    calls
}

async fn score_case(
    case: &Case,
    transcript: &Transcript,
    reply: &str,
    workspace: tempfile::TempDir,
    options: &RunOptions,
) -> Vec<CheckResult> {
    // The local checks read files: off the runtime. The workspace goes with them and is
    // removed when they are done.
    let local = {
        let checks = case.checks.clone();
        let reply = reply.to_string();
        let calls = transcript.tool_calls.clone();
        tokio::task::spawn_blocking(move || {
            let outcome = Outcome {
                reply: &reply,
                tool_calls: &calls,
                workspace: workspace.path(),
            };
            checks
                .iter()
                .map(|c| checks::score(c, &outcome))
                .collect::<Vec<_>>()
        })
        .await
    };
    let local = match local {
        Ok(local) => local,
        Err(e) => {
            return vec![CheckResult::new(
                "internal",
                false,
                format!("scoring failed: {e}"),
            )];
        }
    };
    let mut results = Vec::with_capacity(case.checks.len());
    for (check, scored) in case.checks.iter().zip(local) {
        let result = match (scored, check) {
            (Some(result), _) => result,
            (None, Check::Judge { criteria }) => match &options.judge {
                Some(judge) => {
                    crate::judge::judge(
                        judge,
                        criteria,
                        &Evidence {
                            turns: &case.turns,
                            reply,
                            tool_calls: &transcript.tool_calls,
                        },
                    )
                    .await
                }
                None => CheckResult::new("judge", false, "no judge model is configured"),
            },
            (None, other) => CheckResult::new(other.kind(), false, "this check was not scored"),
        };
        results.push(result);
    }
    results
}
