//! The heuristic tier of the intent judge: a synchronous, pure classification of one gated
//! tool call into a risk level, a recommendation, a confidence and the evidence behind them
//! — the `verdict` of an `approve_request` item (node spec §2.2, tier `heuristic`).
//!
//! Every call gets a verdict: a rule that recognises the call decides it; a call no rule
//! recognises is `medium` / `review` with confidence 0.5. When several rules fire (a command
//! line with many commands), the most severe one wins and every finding of that severity is
//! listed as evidence. Confidence by level: critical 0.90, high 0.80, medium 0.70, low 0.85
//! (the original's calibration); the recommendation follows the level: critical → `deny`,
//! high and medium → `review`, low → `approve`.
//!
//! What is judged, by tool:
//! * `bash` and `watch` commands: every simple command of the line (see `command`);
//! * file writes (`write_file`, `overwrite_file`, `append_file`, `edit_file`): where they
//!   write — system paths and SSH keys critical, login/autostart and secrets files high,
//!   outside the workspace medium, inside low;
//! * reads (`read_file`, `search`, `diff_file`, `open_preview`, `git`, and their `_outside`
//!   labels): credentials high, `.env` and outside the workspace medium, inside low;
//! * `web_fetch`: cloud metadata endpoints high, loopback and private hosts medium;
//! * MCP tools (`mcp__*`) medium, or high when the name says they delete; skills and
//!   sub-agents medium; read-only built-ins low.
//!
//! The classifier never touches the file system or the network and never panics: any text
//! is a valid input (a property test holds it to that).

mod command;
mod paths;
mod shell;

use serde_json::Value;
use turnstone_proto::sse::Verdict;

pub use paths::Workspace;

use crate::risk::{Recommendation, RiskLevel};

/// One rule of the classifier: what it is called in the evidence, how severe a match is, a
/// title for the intent summary and the reasoning shown to the human.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    pub name: &'static str,
    pub level: RiskLevel,
    pub title: &'static str,
    pub reasoning: &'static str,
}

impl Rule {
    pub(crate) const fn new(
        name: &'static str,
        level: RiskLevel,
        title: &'static str,
        reasoning: &'static str,
    ) -> Self {
        Self {
            name,
            level,
            title,
            reasoning,
        }
    }
}

/// A rule that fired, and on what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub rule: Rule,
    pub evidence: String,
}

/// A tool call waiting for approval, as the classifier sees it.
#[derive(Debug, Clone, Copy)]
pub struct GatedCall<'a> {
    pub call_id: &'a str,
    pub func_name: &'a str,
    /// The name approvals are remembered under (`read_file_outside`, `overwrite_file`, …);
    /// empty means the function name.
    pub approval_label: &'a str,
    /// The arguments exactly as the model sent them (normally a JSON object; anything else
    /// is taken as the tool's primary argument, e.g. a bare command for `bash`).
    pub arguments: &'a str,
}

/// The classifier's judgement of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    pub risk_level: RiskLevel,
    pub recommendation: Recommendation,
    pub confidence: f64,
    /// The name of the deciding rule (`rm-system-path`, `unrecognised-tool`, …).
    pub rule: &'static str,
    pub intent_summary: String,
    pub reasoning: String,
    /// `"<rule>: <what matched>"`, one line per finding of the deciding severity.
    pub evidence: Vec<String>,
    /// The arguments as a compact JSON string (the verdict's `func_args`).
    pub func_args: String,
}

impl Classification {
    /// The wire verdict (node spec §2.2): tier `heuristic`, a fresh 32-hex `verdict_id`,
    /// no judge model; `latency_ms` 0 (the heuristic runs in microseconds; a caller that
    /// wants it measured sets it).
    pub fn into_verdict(self, call: &GatedCall<'_>) -> Verdict {
        Verdict {
            verdict_id: turnstone_proto::ids::random_hex(32),
            call_id: call.call_id.to_owned(),
            func_name: call.func_name.to_owned(),
            func_args: self.func_args,
            intent_summary: self.intent_summary,
            risk_level: self.risk_level.as_str().to_owned(),
            confidence: self.confidence,
            recommendation: self.recommendation.as_str().to_owned(),
            reasoning: self.reasoning,
            evidence: self.evidence,
            tier: "heuristic".to_owned(),
            judge_model: String::new(),
            latency_ms: 0,
            extra: serde_json::Map::new(),
        }
    }
}

/// Confidence of a verdict decided by a rule of `level`.
fn confidence(level: RiskLevel) -> f64 {
    match level {
        RiskLevel::Critical => 0.90,
        RiskLevel::High => 0.80,
        RiskLevel::Medium => 0.70,
        RiskLevel::Low | RiskLevel::None => 0.85,
    }
}

fn recommendation(level: RiskLevel) -> Recommendation {
    match level {
        RiskLevel::Critical => Recommendation::Deny,
        RiskLevel::High | RiskLevel::Medium => Recommendation::Review,
        RiskLevel::Low | RiskLevel::None => Recommendation::Approve,
    }
}

const UNRECOGNISED_TOOL: Rule = Rule::new(
    "unrecognised-tool",
    RiskLevel::Medium,
    "Unknown tool operation",
    "No heuristic rule matched this tool call.",
);
const READ_ONLY_TOOL: Rule = Rule::new(
    "read-only-tool",
    RiskLevel::Low,
    "Read-only operation",
    "The tool only looks things up.",
);
const MCP_TOOL: Rule = Rule::new(
    "mcp-tool",
    RiskLevel::Medium,
    "External MCP tool call",
    "An MCP server's tool may act on systems outside this node.",
);
const MCP_DESTRUCTIVE: Rule = Rule::new(
    "mcp-destructive-tool",
    RiskLevel::High,
    "Destructive MCP tool call",
    "The MCP tool's name says it deletes, drops or revokes.",
);
const SKILL: Rule = Rule::new(
    "skill",
    RiskLevel::Medium,
    "Skill invocation",
    "A skill brings its own instructions into the conversation.",
);
const SUB_AGENT: Rule = Rule::new(
    "sub-agent",
    RiskLevel::Medium,
    "Starts a sub-agent",
    "A sub-agent works autonomously; its own tool calls are gated separately.",
);
const BUDGET_OVERRIDE: Rule = Rule::new(
    "budget-override",
    RiskLevel::Medium,
    "Token budget override",
    "Continuing spends more than the budget allowed.",
);
const NOTIFY: Rule = Rule::new(
    "notify",
    RiskLevel::Medium,
    "Sends a notification",
    "Posts a message to an external channel.",
);
const MISSING_ARGUMENT: Rule = Rule::new(
    "missing-argument",
    RiskLevel::Medium,
    "Call without its main argument",
    "The arguments could not be read, so the target is unknown.",
);
const FETCH: Rule = Rule::new(
    "web-fetch",
    RiskLevel::Low,
    "Fetches a public web page",
    "A read-only fetch; the page passes the output guard.",
);
const FETCH_INTERNAL: Rule = Rule::new(
    "web-fetch-internal",
    RiskLevel::Medium,
    "Fetches from a local or private address",
    "Reaches services on the node's network.",
);
const FETCH_METADATA: Rule = Rule::new(
    "web-fetch-metadata",
    RiskLevel::High,
    "Fetches a cloud metadata endpoint",
    "The metadata service hands out the machine's cloud credentials.",
);

/// Classifies one gated call (see the module docs).
pub fn classify(call: &GatedCall<'_>, workspace: &Workspace) -> Classification {
    let parsed: Option<Value> = serde_json::from_str(call.arguments).ok();
    let args = parsed.as_ref().and_then(Value::as_object);
    let func_args = match &parsed {
        Some(value) => serde_json::to_string(value).unwrap_or_else(|_| call.arguments.to_owned()),
        None => call.arguments.to_owned(),
    };
    let arg = |key: &str| string_arg(args, parsed.as_ref(), call.arguments, key);
    let label = if call.approval_label.is_empty() {
        call.func_name
    } else {
        call.approval_label
    };
    let name = call.func_name;
    let (findings, subject) = match name {
        "bash" => match arg("command") {
            Some(command) => (
                command::analyze_command_line(command, workspace),
                command.to_owned(),
            ),
            None => (vec![missing()], String::new()),
        },
        "watch" => match arg("command") {
            Some(command) => (
                command::analyze_command_line(command, workspace),
                command.to_owned(),
            ),
            None => (
                vec![found(READ_ONLY_TOOL, "watch management")],
                String::new(),
            ),
        },
        "write_file" | "overwrite_file" | "append_file" | "edit_file" => match arg("path") {
            Some(path) => {
                let facts = workspace.facts(path);
                let rule = paths::write_risk(&facts).unwrap_or(READ_ONLY_TOOL);
                (vec![found(rule, path)], path.to_owned())
            }
            None => (vec![missing()], String::new()),
        },
        "read_file" | "search" | "diff_file" | "open_preview" | "list_directory" | "git" => {
            let targets: Vec<&str> = ["path", "path_a", "path_b", "target"]
                .iter()
                .filter_map(|k| arg(k))
                .filter(|t| !t.contains("://"))
                .collect();
            let mut findings: Vec<Finding> = targets
                .iter()
                .map(|t| found(paths::read_risk(&workspace.facts(t)), t))
                .collect();
            if label.ends_with("_outside") {
                findings.push(found(
                    Rule::new(
                        "outside-workspace-read",
                        RiskLevel::Medium,
                        "Read outside the workspace",
                        "The tool resolved its target outside the workspace (symlinks followed).",
                    ),
                    label,
                ));
            }
            if findings.is_empty() {
                findings.push(found(READ_ONLY_TOOL, label));
            }
            let subject = targets.join(", ");
            (findings, subject)
        }
        "web_fetch" => match arg("url") {
            Some(url) => (vec![found(fetch_rule(url), url)], url.to_owned()),
            None => (vec![missing()], String::new()),
        },
        "web_search" | "recall" | "memory" | "man" | "math" | "tool_search" | "read_resource"
        | "use_prompt" | "skill" => (
            vec![found(READ_ONLY_TOOL, label)],
            arg("query")
                .or_else(|| arg("name"))
                .unwrap_or_default()
                .to_owned(),
        ),
        "notify" => (
            vec![found(NOTIFY, label)],
            arg("message").unwrap_or_default().to_owned(),
        ),
        "task_agent" | "plan_agent" => (
            vec![found(SUB_AGENT, label)],
            arg("prompt")
                .or_else(|| arg("goal"))
                .unwrap_or_default()
                .to_owned(),
        ),
        turnstone_proto::sse::BUDGET_OVERRIDE_TOOL => {
            (vec![found(BUDGET_OVERRIDE, label)], String::new())
        }
        _ if name.starts_with("mcp_resource__") || label.starts_with("mcp_resource__") => {
            (vec![found(READ_ONLY_TOOL, label)], String::new())
        }
        _ if name.starts_with("mcp__") || label.starts_with("mcp__") => {
            let tool = name
                .rsplit("__")
                .next()
                .unwrap_or(name)
                .to_ascii_lowercase();
            let destructive = [
                "delete",
                "remove",
                "drop",
                "destroy",
                "purge",
                "revoke",
                "truncate",
                "wipe",
                "force_push",
                "terminate",
            ]
            .iter()
            .any(|w| tool.contains(w));
            (
                vec![found(
                    if destructive {
                        MCP_DESTRUCTIVE
                    } else {
                        MCP_TOOL
                    },
                    name,
                )],
                compact(&func_args),
            )
        }
        _ if name.starts_with("skill__") || label.starts_with("skill__") => {
            (vec![found(SKILL, label)], String::new())
        }
        _ => (vec![found(UNRECOGNISED_TOOL, name)], compact(&func_args)),
    };
    decide(findings, name, &subject, func_args)
}

/// A string argument of the call; a bare string (not a JSON object) stands for the tool's
/// primary argument, whatever the key.
fn string_arg<'a>(
    args: Option<&'a serde_json::Map<String, Value>>,
    parsed: Option<&'a Value>,
    raw: &'a str,
    key: &str,
) -> Option<&'a str> {
    match args {
        Some(map) => map.get(key).and_then(Value::as_str),
        None => parsed
            .and_then(Value::as_str)
            .or_else(|| (!raw.trim().is_empty()).then_some(raw)),
    }
}

fn found(rule: Rule, evidence: &str) -> Finding {
    Finding {
        rule,
        evidence: command::snippet(evidence),
    }
}

fn missing() -> Finding {
    found(MISSING_ARGUMENT, "no readable arguments")
}

fn compact(func_args: &str) -> String {
    command::snippet(func_args)
}

fn fetch_rule(url: &str) -> Rule {
    let host = url
        .split("://")
        .nth(1)
        .unwrap_or(url)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = host
        .trim_start_matches('[')
        .split(']')
        .next()
        .unwrap_or(host);
    let host_only = if host.matches(':').count() == 1 {
        host.split(':').next().unwrap_or(host)
    } else {
        host
    };
    let host_only = host_only.to_ascii_lowercase();
    if [
        "169.254.169.254",
        "metadata.google.internal",
        "100.100.100.200",
        "fd00:ec2::254",
        "169.254.170.2",
        "metadata",
    ]
    .contains(&host_only.as_str())
    {
        return FETCH_METADATA;
    }
    let private = host_only == "localhost"
        || host_only.ends_with(".localhost")
        || host_only.ends_with(".internal")
        || host_only.ends_with(".local")
        || host_only == "::1"
        || host_only.starts_with("127.")
        || host_only.starts_with("10.")
        || host_only.starts_with("192.168.")
        || host_only.starts_with("169.254.")
        || host_only == "0.0.0.0"
        || host_only.starts_with("172.")
            && host_only
                .split('.')
                .nth(1)
                .and_then(|o| o.parse::<u8>().ok())
                .is_some_and(|o| (16..=31).contains(&o))
        || host_only.contains(':') && (host_only.starts_with("fc") || host_only.starts_with("fd"));
    if private { FETCH_INTERNAL } else { FETCH }
}

/// The most severe finding decides; its peers are the evidence.
fn decide(
    findings: Vec<Finding>,
    func_name: &str,
    subject: &str,
    func_args: String,
) -> Classification {
    let findings = if findings.is_empty() {
        vec![found(UNRECOGNISED_TOOL, func_name)]
    } else {
        findings
    };
    let level = findings
        .iter()
        .map(|f| f.rule.level)
        .max()
        .unwrap_or(RiskLevel::Medium);
    let top: Vec<&Finding> = findings.iter().filter(|f| f.rule.level == level).collect();
    // An "I don't know" decides only when nothing more specific has the same severity.
    let decider = top
        .iter()
        .find(|f| !matches!(f.rule.name, "unrecognised-command" | "unrecognised-tool"))
        .or(top.first())
        .map(|f| f.rule)
        .unwrap_or(UNRECOGNISED_TOOL);
    let mut evidence: Vec<String> = Vec::new();
    for finding in &top {
        let line = format!("{}: {}", finding.rule.name, finding.evidence);
        if !evidence.contains(&line) && evidence.len() < 8 {
            evidence.push(line);
        }
    }
    let unsure = matches!(decider.name, "unrecognised-command" | "unrecognised-tool");
    let subject = command::snippet(subject);
    Classification {
        risk_level: level,
        recommendation: recommendation(level),
        confidence: if unsure { 0.5 } else { confidence(level) },
        rule: decider.name,
        intent_summary: if subject.is_empty() {
            format!("{}: {func_name}", decider.title)
        } else {
            format!("{}: {subject}", decider.title)
        },
        reasoning: decider.reasoning.to_owned(),
        evidence,
        func_args,
    }
}
