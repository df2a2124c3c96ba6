//! Compaction (node spec §4.5): the conversation is replaced by a model-written summary so
//! a long session fits its context window again.
//!
//! * **Auto**: after a turn that ended without tool calls, when the prompt of its requests
//!   exceeded `context window × auto_compact_pct` ([`crate::EngineConfig::auto_compact_pct`],
//!   0.8; 0 disables). Runs inside the turn, before it goes idle.
//! * **Manual**: `/compact` ([`crate::WorkstreamHandle::compact`]); needs at least two
//!   messages, else info `Not enough messages to compact.`
//!
//! The summary request is a non-streaming completion on the workstream's model
//! (`max_tokens` = [`crate::EngineConfig::compact_max_tokens`], at most a quarter of the
//! window; temperature 0.3; reasoning effort low; the usual retry policy). Its input is a
//! transcript of as many of the newest messages as fit in `window × pct − max_tokens −
//! system prompt` (long messages abbreviated to their first 1000 and last 500 characters);
//! the prompt asks for a sectioned summary (decisions, files, exact identifiers and paths,
//! key code, tool results, open tasks, user preferences, memories to save).
//!
//! On success the history becomes two messages — user `[Conversation summary]` and the
//! assistant summary (auto mode adds a "Continue" section quoting the last user message) —
//! handed to the journal as a replacement; the read-before-edit guard is reset; events:
//! `thinking_start`/`thinking_stop` around the request, `info [compacted: ~B -> ~A tokens]`,
//! the summary between 60-character `─` rules, and in auto mode a fresh `status`. On failure:
//! `error Compaction failed: <reason>`, and the history is untouched.

use tokio_util::sync::CancellationToken;
use turnstone_llm::{ChatMessage, ChatRequest, FinishReason, Role};

use crate::engine::Engine;
use crate::event::Event;
use crate::shared::Shared;

/// The user message that opens a compacted conversation.
pub const SUMMARY_MARKER: &str = "[Conversation summary]";

const TEMPERATURE: f32 = 0.3;
const HEAD_CHARS: usize = 1000;
const TAIL_CHARS: usize = 500;
const RULE_WIDTH: usize = 60;
/// How much of the last user message the "Continue" section quotes.
const QUOTE_LIMIT: usize = 500;
const QUOTE_CUT: usize = 400;
/// The smallest summary budget, whatever the window.
const MIN_SUMMARY_TOKENS: u32 = 256;

const INSTRUCTIONS: &str = "\
You compact a conversation between a user and an AI assistant that uses tools, so that the \
work can continue in a fresh context from your summary alone. Write a structured summary in \
markdown with these sections (leave out a section with nothing to say):

## Decisions
Decisions made (architecture, libraries, approaches) and why.
## Files
Every file read, created or modified, with its exact path and what changed.
## Identifiers and key code
Exact names of functions, types, variables, commands, URLs and configuration keys, and short \
code snippets that matter, verbatim.
## Tool results
Important results of tool calls: errors, test outcomes, findings.
## Open tasks
What remains to be done, in order, including anything in progress.
## User preferences
Instructions, constraints and preferences the user stated.
## Memories to save
Facts worth keeping beyond this conversation.

Be precise and complete: never paraphrase identifiers or paths. Reply with the summary only.";

/// Who asked for the compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The prompt grew past the threshold at the end of a turn.
    Auto,
    /// `/compact`.
    Manual,
}

/// Compacts when the turn that just ended without tool calls used more than the
/// configured share of the context window.
pub(crate) async fn after_turn(engine: &Engine, shared: &Shared, token: &CancellationToken) {
    let pct = engine.config().auto_compact_pct;
    if pct.is_nan() || pct <= 0.0 {
        return;
    }
    let window = shared.settings().context_window(engine);
    let prompt = shared.read(|v| v.usage.prompt_tokens);
    if window == 0 || (prompt as f64) <= f64::from(window) * pct {
        return;
    }
    tracing::info!(prompt, window, pct, "auto-compacting");
    shared.emit(Event::info(format!(
        "\n[Auto-compacting: prompt exceeds {}% of context window]",
        (pct * 100.0).round()
    )));
    run(engine, shared, Mode::Auto, token).await;
}

/// Compacts the conversation now; `true` when it was replaced.
pub(crate) async fn run(
    engine: &Engine,
    shared: &Shared,
    mode: Mode,
    token: &CancellationToken,
) -> bool {
    let messages = shared.messages();
    if messages.len() < 2 {
        if mode == Mode::Manual {
            shared.emit(Event::info("Not enough messages to compact."));
        }
        return false;
    }
    shared.emit(Event::ThinkingStart);
    let outcome = tokio::select! {
        biased;
        _ = token.cancelled() => None,
        r = summarize(engine, shared, &messages) => Some(r),
    };
    shared.emit(Event::ThinkingStop);
    let summary = match outcome {
        None => {
            shared.emit(Event::info("[Compaction cancelled]"));
            return false;
        }
        Some(Err(reason)) => {
            tracing::warn!(%reason, "compaction failed");
            shared.emit(Event::error(format!("Compaction failed: {reason}")));
            return false;
        }
        Some(Ok(summary)) => summary,
    };
    let mut text = summary.clone();
    if mode == Mode::Auto
        && let Some(last) = messages
            .iter()
            .rev()
            .find(|m| m.role() == Role::User)
            .and_then(|m| m.content.as_deref())
    {
        text.push_str("\n\n## Continue\nThe conversation was compacted automatically. The user's last message was:\n");
        for line in quote(last).lines() {
            text.push_str("> ");
            text.push_str(line);
            text.push('\n');
        }
    }
    let replaced = vec![
        ChatMessage::user(SUMMARY_MARKER),
        ChatMessage::assistant(Some(text), Vec::new()),
    ];
    let before = estimate_tokens(&messages);
    let after = estimate_tokens(&replaced);
    shared.replace_messages(replaced);
    shared.tool_ctx.forget_reads();
    shared.publish(|v| {
        v.usage.prompt_tokens = after;
        v.usage.total_tokens = after + v.usage.completion_tokens;
    });
    tracing::info!(before, after, "conversation compacted");
    shared.emit(Event::info(format!(
        "[compacted: ~{before} -> ~{after} tokens]"
    )));
    let rule = "\u{2500}".repeat(RULE_WIDTH);
    shared.emit(Event::info(format!("{rule}\n{summary}\n{rule}")));
    if mode == Mode::Auto {
        let status = shared.status(engine);
        shared.publish(|v| v.tokens_total += status.total_tokens);
        shared.emit(Event::Status(status));
    }
    true
}

/// Asks the model for the summary.
async fn summarize(
    engine: &Engine,
    shared: &Shared,
    messages: &[ChatMessage],
) -> Result<String, String> {
    let config = engine.config();
    // One snapshot: the summary goes to the model the window is measured for.
    let settings = shared.settings();
    let window = settings.context_window(engine);
    let max_tokens = config
        .compact_max_tokens
        .min((window / 4).max(MIN_SUMMARY_TOKENS))
        .max(1);
    let pct = if config.auto_compact_pct > 0.0 && config.auto_compact_pct <= 1.0 {
        config.auto_compact_pct
    } else {
        0.8
    };
    let system_tokens = config
        .system_prompt
        .as_deref()
        .map_or(0, |s| tokens_for_chars(s.chars().count()));
    let budget = (f64::from(window) * pct) as u64;
    let budget = budget
        .saturating_sub(u64::from(max_tokens))
        .saturating_sub(system_tokens)
        .max(u64::from(window) / 4);
    let transcript = transcript(messages, budget.saturating_mul(4) as usize);
    let request = ChatRequest {
        model: settings.model_name(engine),
        messages: vec![
            ChatMessage::system(INSTRUCTIONS),
            ChatMessage::user(format!("The conversation to summarise:\n\n{transcript}")),
        ]
        .into(),
        tools: Default::default(),
        temperature: Some(TEMPERATURE),
        max_tokens: Some(max_tokens),
        reasoning_effort: Some("low".to_string()),
    };
    let mut on_retry = |notice: &turnstone_llm::RetryNotice| {
        shared.emit(Event::info(format!(
            "[Retrying in {}s: {}]",
            notice.delay.as_secs_f64().round() as u64,
            notice.error_class
        )));
    };
    let completion = settings
        .provider(engine)
        .complete_with_notices(&request, &mut on_retry)
        .await
        .map_err(|e| e.to_string())?;
    if completion.finish_reason == Some(FinishReason::Length) {
        shared.emit(Event::error(format!(
            "Warning: compaction summary truncated (hit {max_tokens} token limit)."
        )));
    }
    let summary = completion.content.trim();
    if summary.is_empty() {
        return Err("the model returned an empty summary".to_string());
    }
    Ok(summary.to_string())
}

/// The newest messages that fit in `budget_chars`, oldest first, one block each.
fn transcript(messages: &[ChatMessage], budget_chars: usize) -> String {
    let mut blocks: Vec<String> = Vec::new();
    let mut used = 0;
    for message in messages.iter().rev() {
        let block = render(message);
        let len = block.chars().count();
        if !blocks.is_empty() && used + len > budget_chars {
            break;
        }
        used += len;
        blocks.push(block);
    }
    let omitted = messages.len() - blocks.len();
    blocks.reverse();
    let mut out = String::new();
    if omitted > 0 {
        out.push_str(&format!("[{omitted} earlier messages omitted]\n\n"));
    }
    out.push_str(&blocks.join("\n\n"));
    out
}

fn render(message: &ChatMessage) -> String {
    let role = match message.role() {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool result",
    };
    let mut out = format!("[{role}]");
    if let Some(text) = message.content.as_deref().filter(|t| !t.is_empty()) {
        out.push_str(": ");
        out.push_str(&abbreviate(text));
    }
    for image in &message.images {
        out.push('\n');
        out.push_str(&image.marker());
    }
    for call in &message.tool_calls {
        out.push_str(&format!(
            "\n[tool call {}]: {}",
            call.name,
            abbreviate(&call.arguments)
        ));
    }
    out
}

/// Long text as its first 1000 and last 500 characters.
fn abbreviate(text: &str) -> String {
    let count = text.chars().count();
    if count <= HEAD_CHARS + TAIL_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(HEAD_CHARS).collect();
    let tail: String = text.chars().skip(count - TAIL_CHARS).collect();
    format!(
        "{head}\n[\u{2026} {} characters omitted \u{2026}]\n{tail}",
        count - HEAD_CHARS - TAIL_CHARS
    )
}

/// The last user message as quoted: whole up to 500 characters, else its first 400 and `...`.
fn quote(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() > QUOTE_LIMIT {
        let cut: String = text.chars().take(QUOTE_CUT).collect();
        format!("{cut}...")
    } else {
        text.to_string()
    }
}

/// The token estimate of a conversation (≈ characters / 4).
pub(crate) fn estimate_tokens(messages: &[ChatMessage]) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|m| {
            m.content.as_deref().map_or(0, |c| c.chars().count())
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.chars().count())
                    .sum::<usize>()
        })
        .sum();
    tokens_for_chars(chars)
}

fn tokens_for_chars(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_keep_head_and_tail() {
        let text = format!("{}{}{}", "h".repeat(1000), "Q".repeat(100), "t".repeat(500));
        let short = abbreviate(&text);
        assert!(short.starts_with(&"h".repeat(1000)));
        assert!(short.ends_with(&"t".repeat(500)));
        assert!(short.contains("100 characters omitted"));
        assert!(!short.contains('Q'));
        assert_eq!(abbreviate("short"), "short");
    }

    #[test]
    fn the_transcript_keeps_the_newest_messages_that_fit() {
        let messages: Vec<ChatMessage> = (0..10)
            .map(|i| ChatMessage::user(format!("message {i} {}", "x".repeat(90))))
            .collect();
        let t = transcript(&messages, 350);
        assert!(t.starts_with("[7 earlier messages omitted]"), "{t}");
        assert!(t.contains("message 7") && t.contains("message 9"));
        assert!(!t.contains("message 6"));
        // The newest message is always there, even over budget.
        assert!(transcript(&messages, 1).contains("message 9"));
    }

    #[test]
    fn quotes_are_cut_only_past_500_characters() {
        assert_eq!(quote(&"q".repeat(500)).len(), 500);
        let long = quote(&"q".repeat(501));
        assert_eq!(long, format!("{}...", "q".repeat(400)));
    }
}
