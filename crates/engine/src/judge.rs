//! The LLM tier of the intent judge (node spec §2.2 `intent_verdict`, §7.2 `judge.*`).
//!
//! While an approval request is pending, one background task asks a model about each gated
//! call of the batch, in order, and emits every verdict it gets as an `intent_verdict` event
//! (tier `llm`). The request went out with `judge_pending: true`.
//!
//! * The task works from one snapshot taken when the batch was gated ([`JudgeJob`]): the
//!   judge settings, the client and model, the posture and the conversation excerpt. A
//!   change of settings applies from the next batch.
//! * An answer that is not the JSON verdict asked for (or names an unknown risk level or
//!   recommendation, or a confidence outside 0–1), a failed request and a request slower
//!   than `judge.timeout` give no verdict: the item keeps its heuristic one, and an `info`
//!   event (`[Intent judge: no verdict for <func> (<call_id>): <why>]`) says so.
//! * `auto-review`: once every item has been judged, the batch is approved for the human
//!   (`approval_resolved {approved: true, feedback:` [`JUDGE_APPROVAL`]`}`) when every
//!   item's verdict qualifies (see [`crate::gate::qualifies`]) — its LLM verdict when it got
//!   one (a model that read the conversation overrules the pattern rules, both ways), else
//!   its heuristic one. One item that does not qualify leaves the decision to the human.
//! * A human decision always wins: whoever ends the wait (a client, a cancel, the approval
//!   timeout) stops the task ([`JudgeJob::stop`]). It judges no further item and decides
//!   nothing; a request already in flight is still answered, and its verdict is still
//!   emitted (a late verdict).

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use turnstone_governance::{Recommendation, RiskLevel};
use turnstone_llm::{ChatMessage, ChatRequest, Resilient, Role};
use turnstone_proto::sse::Verdict as IntentVerdict;

use crate::event::Event;
use crate::rounds::RoundRef;
use crate::shared::Shared;
use crate::state::{Decision, Verdict};

/// The `approval_resolved` feedback of a batch the judge approved under `auto-review`
/// (`decided_by` `judge` in the approval's record).
pub const JUDGE_APPROVAL: &str = "auto-review: every call qualified (intent judge)";

/// Most tokens the judge may answer with.
const MAX_TOKENS: u32 = 1024;

/// Characters per token when the context budget is turned into text.
const CHARS_PER_TOKEN: usize = 4;

/// Most characters of one call's arguments shown to the judge.
const ARGS_CHARS: usize = 8 * 1024;

const INSTRUCTIONS: &str = "You review tool calls an AI assistant wants to run, before a \
human approves them. Judge what the call will do and how risky it is in the context of the \
conversation. Answer with one JSON object and nothing else:\n\
{\"intent_summary\": \"<what the call does, one sentence>\", \
\"risk_level\": \"none|low|medium|high|critical\", \
\"confidence\": <0.0 to 1.0>, \
\"recommendation\": \"approve|review|deny\", \
\"reasoning\": \"<why, briefly>\", \
\"evidence\": [\"<the parts of the call or conversation that decided it>\"]}\n\
Recommend approve only for calls that are clearly safe and match what the user asked for; \
review when a human should look; deny for destructive, exfiltrating or unrequested actions.";

/// One gated call to judge.
#[derive(Debug, Clone)]
pub(crate) struct JudgeItem {
    pub call_id: String,
    pub func_name: String,
    /// The arguments as the model sent them.
    pub arguments: String,
    /// Its heuristic verdict (the item's verdict until the judge gives one).
    pub heuristic: Option<IntentVerdict>,
}

/// Everything the task needs, snapshotted when the batch was gated.
pub(crate) struct JudgeJob {
    /// The approval request it may resolve (under `auto-review`).
    pub request_id: String,
    pub items: Vec<JudgeItem>,
    pub client: Resilient,
    pub model: String,
    pub timeout: Duration,
    pub threshold: f64,
    /// The workstream's posture was `auto-review` when the batch was gated.
    pub auto_review: bool,
    /// The conversation excerpt, within the context budget.
    pub context: String,
    /// The workstream's working directory.
    pub cwd: String,
    /// Cancelled when the wait ends (decision, cancel, timeout): the task stops.
    pub stop: CancellationToken,
}

/// The conversation as the judge sees it: the most recent user and assistant texts that fit
/// in `budget_chars` (oldest first), each cut to the budget.
pub(crate) fn context_excerpt(messages: &[ChatMessage], budget_chars: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut used = 0;
    for m in messages.iter().rev() {
        let who = match m.role() {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool result",
            _ => continue,
        };
        let Some(text) = m.content.as_deref().filter(|t| !t.trim().is_empty()) else {
            continue;
        };
        let line = format!("[{who}] {}", text.trim());
        let room = budget_chars.saturating_sub(used);
        if room == 0 {
            break;
        }
        let line: String = if line.chars().count() > room {
            line.chars().take(room).collect()
        } else {
            line
        };
        used += line.chars().count();
        parts.push(line);
    }
    parts.reverse();
    parts.join("\n")
}

/// The context budget in characters: `ratio` of the context window.
pub(crate) fn budget_chars(context_window: u32, ratio: f64) -> usize {
    let ratio = if ratio.is_finite() {
        ratio.clamp(0.0, 1.0)
    } else {
        0.0
    };
    ((context_window as f64) * ratio) as usize * CHARS_PER_TOKEN
}

/// Starts the task (see the module docs).
pub(crate) fn spawn(shared: Arc<Shared>, job: JudgeJob) {
    let span =
        tracing::info_span!("intent_judge", ws_id = %shared.id, request_id = %job.request_id);
    tokio::spawn(tracing::Instrument::instrument(run(shared, job), span));
}

async fn run(shared: Arc<Shared>, job: JudgeJob) {
    let mut verdicts: Vec<Option<IntentVerdict>> =
        job.items.iter().map(|i| i.heuristic.clone()).collect();
    let mut judged_all = true;
    for (i, item) in job.items.iter().enumerate() {
        if job.stop.is_cancelled() {
            judged_all = false;
            break;
        }
        let started = Instant::now();
        let request = request_for(&job, item);
        let answer = tokio::time::timeout(job.timeout, job.client.complete(&request)).await;
        let latency_ms = started.elapsed().as_millis() as u64;
        let content = match answer {
            Err(_) => {
                no_verdict(
                    &shared,
                    item,
                    &format!("no answer within {}", human(job.timeout)),
                );
                continue;
            }
            Ok(Err(e)) => {
                no_verdict(&shared, item, &format!("the request failed: {e}"));
                continue;
            }
            Ok(Ok(c)) => c.content,
        };
        let Some(answer) = parse_answer(&content) else {
            no_verdict(&shared, item, "the answer was not a JSON verdict");
            continue;
        };
        let verdict = answer.into_verdict(item, &job.model, latency_ms);
        // Forwarded even after the decision: a late verdict is still news.
        shared.emit(Event::IntentVerdict(Box::new(verdict.clone())));
        verdicts[i] = Some(verdict);
    }
    if !job.auto_review || !judged_all || job.stop.is_cancelled() {
        return;
    }
    let qualifies = verdicts.iter().all(|v| {
        v.as_ref()
            .is_some_and(|v| crate::gate::qualifies(v, job.threshold))
    });
    if !qualifies {
        return;
    }
    let decided = shared
        .approvals
        .decide(RoundRef::Request(&job.request_id), |p| Verdict {
            request_id: p.request_id.clone(),
            cycle_id: p.cycle_id.clone(),
            approved: true,
            feedback: JUDGE_APPROVAL.to_string(),
            decided_by: "judge",
        });
    if let Ok((pending, verdict)) = decided {
        tracing::info!("auto-review: the judge approved the batch");
        shared.approval_resolved(&verdict);
        // The feedback is not the user's: nothing is appended to the conversation.
        let _ = pending.reply.send(Decision {
            approved: true,
            feedback: String::new(),
            always: false,
        });
    }
}

/// Says (as an `info` event) that `item` got no LLM verdict and why: it keeps its heuristic
/// verdict, and a client showing "judge pending" learns the judge is done with it.
fn no_verdict(shared: &Shared, item: &JudgeItem, why: &str) {
    tracing::warn!(call_id = %item.call_id, why, "intent judge: no verdict");
    shared.emit(Event::info(format!(
        "[Intent judge: no verdict for {} ({}): {why}]",
        item.func_name, item.call_id
    )));
}

fn human(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn request_for(job: &JudgeJob, item: &JudgeItem) -> ChatRequest {
    let args: String = item.arguments.chars().take(ARGS_CHARS).collect();
    let heuristic = item
        .heuristic
        .as_ref()
        .map(|v| {
            format!(
                "\nA pattern-based pre-check said: risk {}, recommendation {} ({}).",
                v.risk_level, v.recommendation, v.reasoning
            )
        })
        .unwrap_or_default();
    let context = if job.context.is_empty() {
        "(none)".to_string()
    } else {
        job.context.clone()
    };
    ChatRequest {
        model: job.model.clone(),
        messages: vec![
            ChatMessage::system(INSTRUCTIONS),
            ChatMessage::user(format!(
                "Conversation so far (most recent last):\n{context}\n\n\
                 The tool call to judge:\nfunction: {}\narguments: {args}\n\
                 working directory: {}{heuristic}\n\nAnswer with the JSON object only.",
                item.func_name, job.cwd
            )),
        ]
        .into(),
        tools: Default::default(),
        temperature: Some(0.0),
        max_tokens: Some(MAX_TOKENS),
        reasoning_effort: Some("low".to_string()),
    }
}

/// The judge's answer as asked for.
#[derive(Debug, Deserialize)]
struct Answer {
    #[serde(default)]
    intent_summary: String,
    risk_level: String,
    confidence: f64,
    recommendation: String,
    #[serde(default)]
    reasoning: String,
    #[serde(default)]
    evidence: Vec<String>,
}

/// The verdict in a judge's answer: the JSON object (possibly inside a code fence or
/// prose), with a known risk level and recommendation and a confidence within 0–1.
fn parse_answer(content: &str) -> Option<Answer> {
    let start = content.find('{')?;
    let end = content.rfind('}')?;
    if end < start {
        return None;
    }
    let mut answer: Answer = serde_json::from_str(&content[start..=end]).ok()?;
    let risk = RiskLevel::parse(&answer.risk_level.trim().to_ascii_lowercase())?;
    let recommendation = [
        Recommendation::Approve,
        Recommendation::Review,
        Recommendation::Deny,
    ]
    .into_iter()
    .find(|r| {
        r.as_str()
            .eq_ignore_ascii_case(answer.recommendation.trim())
    })?;
    if !(answer.confidence.is_finite() && (0.0..=1.0).contains(&answer.confidence)) {
        return None;
    }
    answer.risk_level = risk.as_str().to_string();
    answer.recommendation = recommendation.as_str().to_string();
    Some(answer)
}

impl Answer {
    fn into_verdict(self, item: &JudgeItem, model: &str, latency_ms: u64) -> IntentVerdict {
        let func_args = item
            .heuristic
            .as_ref()
            .map(|v| v.func_args.clone())
            .unwrap_or_else(|| item.arguments.clone());
        IntentVerdict {
            verdict_id: turnstone_proto::ids::random_hex(32),
            call_id: item.call_id.clone(),
            func_name: item.func_name.clone(),
            func_args,
            intent_summary: self.intent_summary,
            risk_level: self.risk_level,
            confidence: self.confidence,
            recommendation: self.recommendation,
            reasoning: self.reasoning,
            evidence: self.evidence,
            tier: "llm".to_string(),
            judge_model: model.to_string(),
            latency_ms,
            extra: serde_json::Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_parsed_strictly() {
        let ok = parse_answer(
            "```json\n{\"intent_summary\":\"lists\",\"risk_level\":\"LOW\",\"confidence\":0.9,\
             \"recommendation\":\"Approve\",\"reasoning\":\"r\",\"evidence\":[\"ls\"]}\n```",
        )
        .expect("a verdict");
        assert_eq!(
            (ok.risk_level.as_str(), ok.recommendation.as_str()),
            ("low", "approve")
        );
        for bad in [
            "looks fine to me",
            "{\"risk_level\":\"low\"}",
            "{\"risk_level\":\"tiny\",\"confidence\":0.9,\"recommendation\":\"approve\"}",
            "{\"risk_level\":\"low\",\"confidence\":1.5,\"recommendation\":\"approve\"}",
            "{\"risk_level\":\"low\",\"confidence\":0.9,\"recommendation\":\"maybe\"}",
            "} {",
        ] {
            assert!(parse_answer(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_excerpt_keeps_the_most_recent_messages_within_budget() {
        let messages = vec![
            ChatMessage::system("sys"),
            ChatMessage::user("first question"),
            ChatMessage::assistant(Some("an answer".into()), Vec::new()),
            ChatMessage::user("delete the build directory"),
        ];
        let all = context_excerpt(&messages, 10_000);
        assert_eq!(
            all,
            "[user] first question\n[assistant] an answer\n[user] delete the build directory"
        );
        let recent = context_excerpt(&messages, 33);
        assert_eq!(recent, "[user] delete the build directory");
        assert_eq!(context_excerpt(&messages, 0), "");
        assert_eq!(budget_chars(1000, 0.5), 2000);
        assert_eq!(budget_chars(1000, f64::NAN), 0);
    }
}
