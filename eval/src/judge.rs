//! The `judge` check: a judge model reads the task, the outcome and the criteria and
//! answers `PASS: <reason>` or `FAIL: <reason>` (a JSON `{"pass": …, "reason": …}` is
//! understood too). An answer that is neither, an error or a timeout fails the check with
//! a detail saying so: the judge never passes a case by default.

use std::time::Duration;

use turnstone_llm::{ChatMessage, ChatRequest, Resilient};

use crate::checks::{CheckResult, ToolCallRecord, excerpt};

/// The judge model of `judge` checks.
#[derive(Clone)]
pub struct JudgeModel {
    pub provider: Resilient,
    pub model: String,
    /// One verdict's time limit.
    pub timeout: Duration,
}

impl std::fmt::Debug for JudgeModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JudgeModel")
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .finish()
    }
}

const INSTRUCTIONS: &str = "You grade the work of an AI assistant. You are given the task \
it was set, the tool calls it made, its final reply and the criteria. Decide whether the \
work meets the criteria. Answer with one line: `PASS: <short reason>` or `FAIL: <short \
reason>`, nothing else.";

/// What the judge is shown of a case.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    pub turns: &'a [String],
    pub reply: &'a str,
    pub tool_calls: &'a [ToolCallRecord],
}

/// Most characters of the reply and of each tool result the judge sees.
const SHOWN_CHARS: usize = 8000;

fn clip(text: &str) -> String {
    text.chars().take(SHOWN_CHARS).collect()
}

/// The judge's request for one check.
pub fn request(model: &str, criteria: &str, evidence: &Evidence<'_>) -> ChatRequest {
    let mut task = String::new();
    for (i, turn) in evidence.turns.iter().enumerate() {
        task.push_str(&format!("User message {}:\n{turn}\n\n", i + 1));
    }
    let mut calls = String::new();
    for call in evidence.tool_calls {
        calls.push_str(&format!("- {}({})", call.name, call.arguments));
        if let Some(output) = &call.output {
            calls.push_str(&format!(" -> {}", clip(output)));
        }
        calls.push('\n');
    }
    if calls.is_empty() {
        calls.push_str("(none)\n");
    }
    ChatRequest {
        model: model.to_string(),
        messages: vec![
            ChatMessage::system(INSTRUCTIONS),
            ChatMessage::user(format!(
                "Criteria:\n{criteria}\n\nTask:\n{task}Tool calls:\n{calls}\nFinal reply:\n{}\n\n\
                 Your verdict (PASS or FAIL, then the reason):",
                clip(evidence.reply)
            )),
        ]
        .into(),
        tools: Default::default(),
        temperature: Some(0.0),
        max_tokens: Some(512),
        reasoning_effort: None,
    }
}

/// The verdict in a judge's answer: `Some((pass, reason))`, `None` when it gave none.
pub fn parse_verdict(answer: &str) -> Option<(bool, String)> {
    let trimmed = answer.trim();
    if let Some(start) = trimmed.find('{')
        && let Some(end) = trimmed.rfind('}')
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&trimmed[start..=end])
        && let Some(pass) = v.get("pass").and_then(serde_json::Value::as_bool)
    {
        let reason = v
            .get("reason")
            .and_then(|r| r.as_str())
            .unwrap_or_default()
            .to_string();
        return Some((pass, reason));
    }
    let line = trimmed.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.trim_start_matches(['*', '#', '`', ' ']);
    let upper = line.to_ascii_uppercase();
    let pass = if upper.starts_with("PASS") {
        true
    } else if upper.starts_with("FAIL") {
        false
    } else {
        return None;
    };
    let reason = line[4..]
        .trim_start_matches(['*', '`', ':', '-', ' ', '.'])
        .trim()
        .to_string();
    Some((pass, reason))
}

/// Asks `judge` about `criteria`; the check's result.
pub async fn judge(judge: &JudgeModel, criteria: &str, evidence: &Evidence<'_>) -> CheckResult {
    const KIND: &str = "judge";
    let request = request(&judge.model, criteria, evidence);
    let answer = match tokio::time::timeout(judge.timeout, judge.provider.complete(&request)).await
    {
        Err(_) => {
            return CheckResult::new(
                KIND,
                false,
                format!(
                    "the judge gave no verdict within {}s",
                    judge.timeout.as_secs()
                ),
            );
        }
        Ok(Err(e)) => return CheckResult::new(KIND, false, format!("the judge failed: {e}")),
        Ok(Ok(completion)) => completion.content,
    };
    match parse_verdict(&answer) {
        Some((pass, reason)) => CheckResult::new(
            KIND,
            pass,
            if reason.is_empty() {
                format!("judge: {}", if pass { "PASS" } else { "FAIL" })
            } else {
                reason
            },
        ),
        None => CheckResult::new(
            KIND,
            false,
            format!("the judge's answer has no verdict: {}", excerpt(&answer)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_lines_and_json() {
        assert_eq!(
            parse_verdict("PASS: names Paris"),
            Some((true, "names Paris".into()))
        );
        assert_eq!(
            parse_verdict("\n**FAIL** - no capital given\nmore"),
            Some((false, "no capital given".into()))
        );
        assert_eq!(parse_verdict("pass"), Some((true, String::new())));
        assert_eq!(
            parse_verdict(r#"Sure. {"pass": false, "reason": "rude"}"#),
            Some((false, "rude".into()))
        );
        assert_eq!(parse_verdict("I think it is fine"), None);
        assert_eq!(parse_verdict(""), None);
    }

    #[test]
    fn the_request_shows_task_calls_reply_and_criteria() {
        let turns = vec!["List the files".to_string()];
        let calls = vec![ToolCallRecord {
            name: "bash".into(),
            arguments: serde_json::json!({"command": "ls"}),
            output: Some("a.txt".into()),
        }];
        let r = request(
            "judge-m",
            "mentions a.txt",
            &Evidence {
                turns: &turns,
                reply: "There is a.txt",
                tool_calls: &calls,
            },
        );
        assert_eq!(r.model, "judge-m");
        let user = r.messages[1].content.clone().unwrap();
        // The criteria come first: a model echoing the prompt gives no verdict.
        assert!(user.starts_with("Criteria:\nmentions a.txt"), "{user}");
        assert!(user.contains("User message 1:\nList the files"));
        assert!(
            user.contains(r#"- bash({"command":"ls"}) -> a.txt"#),
            "{user}"
        );
        assert!(user.contains("Final reply:\nThere is a.txt"));
        assert!(r.tools.is_empty());
    }
}
