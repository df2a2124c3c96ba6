//! The scripted "model": pure rules deciding a reply from a conversation (no I/O).
//!
//! Both the HTTP [`FakeLlm`](crate::FakeLlm) and the in-process
//! [`ScriptedProvider`](crate::ScriptedProvider) answer with [`reply_for`]; the rules are
//! listed in the crate documentation.

/// One message of a conversation, reduced to what the rules look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text content (empty when the message had none).
    pub content: String,
}

impl ScriptMessage {
    /// A message with the given role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A `user` message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }

    /// A `tool` result message.
    pub fn tool(content: impl Into<String>) -> Self {
        Self::new("tool", content)
    }
}

/// What the scripted model answers: optional reasoning, text, tool calls, finish reason.
///
/// Tool calls are `(name, arguments)` pairs; `arguments` is sent exactly as given (it may be
/// invalid JSON on purpose). Ids are assigned when the reply is served: `call_0`, `call_1`, …
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScriptReply {
    pub reasoning: Option<String>,
    pub text: String,
    pub tool_calls: Vec<(String, String)>,
    /// Wire finish reason: `stop`, `tool_calls`, `length`, `content_filter`, …
    pub finish_reason: String,
}

impl ScriptReply {
    /// A plain text reply finishing with `stop`.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            reasoning: None,
            text: text.into(),
            tool_calls: Vec::new(),
            finish_reason: STOP.into(),
        }
    }

    /// A reply calling the given `(name, arguments)` tools, finishing with `tool_calls`.
    pub fn tool_calls<N, A>(calls: impl IntoIterator<Item = (N, A)>) -> Self
    where
        N: Into<String>,
        A: Into<String>,
    {
        Self {
            reasoning: None,
            text: String::new(),
            tool_calls: calls
                .into_iter()
                .map(|(n, a)| (n.into(), a.into()))
                .collect(),
            finish_reason: TOOL_CALLS.into(),
        }
    }

    /// Adds reasoning text, streamed before the reply.
    #[must_use]
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Replaces the text.
    #[must_use]
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    /// Replaces the finish reason (e.g. `length` to simulate truncation).
    #[must_use]
    pub fn with_finish_reason(mut self, finish_reason: impl Into<String>) -> Self {
        self.finish_reason = finish_reason.into();
        self
    }

    /// Estimated completion tokens of this reply (≈ characters / 4, at least 1).
    pub fn completion_tokens(&self) -> u64 {
        let chars = self.reasoning.as_deref().map_or(0, char_count)
            + char_count(&self.text)
            + self
                .tool_calls
                .iter()
                .map(|(n, a)| char_count(n) + char_count(a))
                .sum::<usize>();
        tokens_for_chars(chars)
    }
}

const STOP: &str = "stop";
const TOOL_CALLS: &str = "tool_calls";

/// How many characters of a tool result the `done:` reply repeats.
pub const DONE_PREFIX_CHARS: usize = 200;

/// The reply the rules give for a whole conversation (only the last message matters).
pub fn reply_for(messages: &[ScriptMessage]) -> ScriptReply {
    match messages.last() {
        Some(last) => reply_to(&last.role, &last.content),
        None => ScriptReply::text(""),
    }
}

/// The reply the rules give when the last message has this role and content.
pub fn reply_to(role: &str, content: &str) -> ScriptReply {
    if role == "tool" {
        let head: String = content.chars().take(DONE_PREFIX_CHARS).collect();
        return ScriptReply::text(format!("done: {head}"));
    }
    let mut reasoning: Vec<&str> = Vec::new();
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut plain: Vec<&str> = Vec::new();
    for line in content.lines() {
        match parse_directive(line) {
            Some(Directive::Think(text)) => reasoning.push(text),
            Some(Directive::Tool(command)) => {
                calls.push((
                    "bash".into(),
                    serde_json::json!({ "command": command }).to_string(),
                ));
            }
            Some(Directive::Call { name, arguments }) => {
                let arguments = if arguments.is_empty() {
                    "{}"
                } else {
                    arguments
                };
                calls.push((name.into(), arguments.into()));
            }
            None => plain.push(line),
        }
    }
    let mut reply = if calls.is_empty() {
        if reasoning.is_empty() {
            ScriptReply::text(content)
        } else {
            ScriptReply::text(plain.join("\n"))
        }
    } else {
        ScriptReply::tool_calls(calls)
    };
    if !reasoning.is_empty() {
        reply.reasoning = Some(reasoning.join("\n"));
    }
    reply
}

enum Directive<'a> {
    Think(&'a str),
    Tool(&'a str),
    Call { name: &'a str, arguments: &'a str },
}

fn parse_directive(line: &str) -> Option<Directive<'_>> {
    let line = line.trim_start();
    if let Some(rest) = line.strip_prefix("THINK:") {
        return Some(Directive::Think(rest.trim()));
    }
    if let Some(rest) = line.strip_prefix("TOOL:") {
        return Some(Directive::Tool(rest.trim()));
    }
    if let Some(rest) = line.strip_prefix("CALL:") {
        let rest = rest.trim_start();
        let (name, arguments) = match rest.find(char::is_whitespace) {
            Some(at) => (&rest[..at], rest[at..].trim()),
            None => (rest.trim_end(), ""),
        };
        if !name.is_empty() {
            return Some(Directive::Call { name, arguments });
        }
    }
    None
}

/// Characters (not bytes) of `s`.
pub(crate) fn char_count(s: &str) -> usize {
    s.chars().count()
}

/// The token estimate used everywhere in this crate: ⌈chars / 4⌉, at least 1.
pub fn tokens_for_chars(chars: usize) -> u64 {
    (chars.div_ceil(4) as u64).max(1)
}

/// Estimated prompt tokens of a conversation (≈ characters of all contents / 4, at least 1).
pub fn prompt_tokens<'a>(contents: impl IntoIterator<Item = &'a str>) -> u64 {
    tokens_for_chars(contents.into_iter().map(char_count).sum())
}

/// Splits `text` into pieces of at most `chunk_chars` characters (at least one per piece),
/// never splitting inside a UTF-8 character. Empty text gives no pieces.
pub fn split_chunks(text: &str, chunk_chars: usize) -> Vec<&str> {
    let chunk_chars = chunk_chars.max(1);
    let mut pieces = Vec::with_capacity(text.len() / chunk_chars + 1);
    let mut start = 0;
    let mut count = 0;
    for (at, _) in text.char_indices() {
        if count == chunk_chars {
            pieces.push(&text[start..at]);
            start = at;
            count = 0;
        }
        count += 1;
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_plain_text() {
        let r = reply_for(&[
            ScriptMessage::new("system", "sys"),
            ScriptMessage::user("hi there"),
        ]);
        assert_eq!(r, ScriptReply::text("hi there"));
    }

    #[test]
    fn tool_and_call_lines_combine_in_order() {
        let r = reply_to(
            "user",
            "please\nTOOL: ls -la\nCALL:read_file {\"path\": \"a\"\nCALL:noargs",
        );
        assert_eq!(
            r.tool_calls,
            vec![
                ("bash".to_string(), r#"{"command":"ls -la"}"#.to_string()),
                ("read_file".to_string(), r#"{"path": "a""#.to_string()),
                ("noargs".to_string(), "{}".to_string()),
            ]
        );
        assert_eq!(r.finish_reason, "tool_calls");
        assert_eq!(r.text, "");
    }

    #[test]
    fn think_adds_reasoning_and_echoes_the_rest() {
        let r = reply_to("user", "THINK: ponder\nanswer me");
        assert_eq!(r.reasoning.as_deref(), Some("ponder"));
        assert_eq!(r.text, "answer me");
    }

    #[test]
    fn tool_result_gives_done_with_prefix() {
        let long = "x".repeat(500);
        let r = reply_to("tool", &long);
        assert_eq!(r.text, format!("done: {}", "x".repeat(200)));
        assert_eq!(r.finish_reason, "stop");
    }

    #[test]
    fn split_respects_chars() {
        assert_eq!(split_chunks("héllo wörld", 4), vec!["héll", "o wö", "rld"]);
        assert!(split_chunks("", 4).is_empty());
        assert_eq!(split_chunks("ab", 0), vec!["a", "b"]);
    }

    #[test]
    fn token_estimates() {
        assert_eq!(tokens_for_chars(0), 1);
        assert_eq!(tokens_for_chars(9), 3);
        assert_eq!(prompt_tokens(["abcd", "efgh"]), 2);
    }
}
