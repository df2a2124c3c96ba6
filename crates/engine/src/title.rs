//! Auto-title (node spec §4.6): after the first completed exchange of a workstream that did
//! not start from a saved conversation, a background task asks the workstream's model for a
//! 3–8 word title (non-streaming, `max_tokens` 200, temperature 0.3, reasoning effort low)
//! from the first user message (≤300 characters) and the first reply (≤200 characters).
//! The first line of the answer, stripped of quotes and cut to 80 characters, becomes the
//! workstream's title and is handed to the [`crate::TitleHook`] (the node stores it and announces
//! `ws_rename`). A failed attempt is retried after the next turn; `/new` and `/clear`
//! ([`crate::WorkstreamHandle::replace_history`] with no messages) enable titling again.
//!
//! The task never holds up a turn: it starts after the turn has ended (idle and
//! `turn_complete` already emitted) and runs beside the next one.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use turnstone_llm::{ChatMessage, ChatRequest, Role};

use crate::engine::Engine;
use crate::event::WsState;
use crate::shared::Shared;

const MAX_TOKENS: u32 = 200;
const TEMPERATURE: f32 = 0.3;
const USER_CHARS: usize = 300;
const REPLY_CHARS: usize = 200;
const TITLE_CHARS: usize = 80;

const INSTRUCTIONS: &str = "You name conversations. Reply with a title of 3 to 8 words that \
says what the conversation is about: the title only, on one line, without quotes or a \
trailing period.";

/// Starts the title task when a turn ended well and the workstream still wants a title.
pub(crate) fn after_turn(engine: &Arc<Engine>, shared: &Arc<Shared>) {
    let state = &shared.title;
    if !engine.config().auto_title
        || !state.pending.load(Ordering::Acquire)
        || shared.state() != WsState::Idle
    {
        return;
    }
    let Some((user, reply)) = first_exchange(&shared.messages()) else {
        return;
    };
    if state.running.swap(true, Ordering::AcqRel) {
        return;
    }
    let generation = state.generation.load(Ordering::Acquire);
    let (engine, shared) = (engine.clone(), shared.clone());
    let span = tracing::info_span!("auto_title", ws_id = %shared.id);
    tokio::spawn(tracing::Instrument::instrument(
        async move {
            let result = generate(&engine, &shared, &user, &reply).await;
            let state = &shared.title;
            match result {
                Ok(title) if state.generation.load(Ordering::Acquire) == generation => {
                    state.pending.store(false, Ordering::Release);
                    *state.title.lock() = Some(title.clone());
                    tracing::info!(%title, "workstream titled");
                    let hook = state.hook.lock().clone();
                    if let Some(hook) = hook {
                        hook(&shared.id, &title);
                    }
                }
                Ok(_) => tracing::debug!("title of a conversation that started over dropped"),
                Err(e) => {
                    tracing::warn!(error = %e, "auto-title failed; retrying after the next turn")
                }
            }
            state.running.store(false, Ordering::Release);
        },
        span,
    ));
}

/// The first user message and the first assistant reply with text, clipped.
fn first_exchange(messages: &[ChatMessage]) -> Option<(String, String)> {
    let user = messages
        .iter()
        .find(|m| m.role() == Role::User)
        .and_then(|m| m.content.as_deref())
        .filter(|c| !c.trim().is_empty())?;
    let reply = messages
        .iter()
        .find(|m| {
            m.role() == Role::Assistant
                && m.content.as_deref().is_some_and(|c| !c.trim().is_empty())
        })
        .and_then(|m| m.content.as_deref())?;
    Some((
        clip(user.trim(), USER_CHARS),
        clip(reply.trim(), REPLY_CHARS),
    ))
}

async fn generate(
    engine: &Engine,
    shared: &Shared,
    user: &str,
    reply: &str,
) -> Result<String, String> {
    let settings = shared.settings();
    let request = ChatRequest {
        model: settings.model_name(engine),
        messages: vec![
            ChatMessage::system(INSTRUCTIONS),
            ChatMessage::user(format!(
                "Title this conversation.\n\nUser: {user}\n\nAssistant: {reply}"
            )),
        ]
        .into(),
        tools: Default::default(),
        temperature: Some(TEMPERATURE),
        max_tokens: Some(MAX_TOKENS),
        reasoning_effort: Some("low".to_string()),
    };
    let completion = settings
        .provider(engine)
        .complete(&request)
        .await
        .map_err(|e| e.to_string())?;
    clean_title(&completion.content).ok_or_else(|| "the model gave no title".to_string())
}

/// The first non-empty line, without surrounding quotes, at most 80 characters.
pub(crate) fn clean_title(text: &str) -> Option<String> {
    const QUOTES: &[char] = &[
        '"', '\'', '`', '\u{201c}', '\u{201d}', '\u{2018}', '\u{2019}', '*',
    ];
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let title = line.trim_matches(QUOTES).trim();
    let title: String = title.chars().take(TITLE_CHARS).collect();
    let title = title.trim().to_string();
    (!title.is_empty()).then_some(title)
}

fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_first_lines_without_quotes_and_capped() {
        assert_eq!(
            clean_title("\n  \"Fixing the Parser Bug\"  \nmore").as_deref(),
            Some("Fixing the Parser Bug")
        );
        assert_eq!(clean_title("'x'").as_deref(), Some("x"));
        assert_eq!(clean_title("  \n\"\"\n").as_deref(), None);
        assert_eq!(
            clean_title(&"w".repeat(200)).map(|t| t.chars().count()),
            Some(80)
        );
    }

    #[test]
    fn the_first_exchange_is_clipped() {
        let long = "u".repeat(400);
        let messages = vec![
            ChatMessage::user(long),
            ChatMessage::assistant(None, Vec::new()),
            ChatMessage::assistant(Some("r".repeat(300)), Vec::new()),
        ];
        let (user, reply) = first_exchange(&messages).unwrap();
        assert_eq!((user.len(), reply.len()), (300, 200));
        assert!(first_exchange(&messages[..2]).is_none());
    }
}
