//! Rebuilding provider messages from conversation rows.
//!
//! Rows are the seed-era model: `user`, `assistant`, one `tool_call` row per call and one
//! `tool_result` row per output. Rebuilding:
//! * consecutive `tool_call` rows (optionally right after an `assistant` text row of the same
//!   response) become ONE assistant message with `tool_calls`;
//! * the following `tool_result` rows are paired to those calls by `tool_call_id`, in stored
//!   order; a result that answers no open call is dropped (providers reject orphans);
//! * a group whose calls did not all get a result is an interrupted turn: the assistant message
//!   and its partial results are removed, so the model regenerates from the user message;
//! * a row whose `provider_data` carries [`CONTEXT_RESET_KEY`] starts the conversation afresh
//!   (a compaction replaced the context): everything rebuilt before it is dropped;
//! * an assistant's provider blocks (`provider_data` of its first row) come back as
//!   [`ChatMessage::provider_data`].

use std::collections::HashSet;

use turnstone_llm::{ChatMessage, ProviderData, Role, ToolCall};

use crate::model::{CONTEXT_RESET_KEY, MessageRole, StoredMessage};

struct OpenGroup {
    /// Index in the output of the assistant message holding the calls.
    msg_index: usize,
    expected: Vec<String>,
    answered: HashSet<String>,
}

impl OpenGroup {
    fn complete(&self) -> bool {
        self.expected.iter().all(|id| self.answered.contains(id))
    }
}

fn close(group: Option<OpenGroup>, out: &mut Vec<ChatMessage>) {
    if let Some(g) = group
        && !g.complete()
    {
        tracing::debug!(
            calls = g.expected.len(),
            answered = g.answered.len(),
            "stripping interrupted tool-call turn"
        );
        out.truncate(g.msg_index);
    }
}

/// The parsed `provider_data` column: the context-reset mark and provider blocks.
fn row_data(row: &StoredMessage) -> (bool, Option<ProviderData>) {
    let Some(value) = row
        .provider_data
        .as_deref()
        .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
    else {
        return (false, None);
    };
    let reset = value[CONTEXT_RESET_KEY] == serde_json::Value::Bool(true);
    let data = value
        .get("provider")
        .is_some()
        .then(|| serde_json::from_value::<ProviderData>(value).ok())
        .flatten();
    (reset, data)
}

/// Rebuilds provider messages from rows in stored order (see the module docs).
pub fn rebuild_messages(rows: &[StoredMessage]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(rows.len());
    let mut group: Option<OpenGroup> = None;
    let mut prev: Option<MessageRole> = None;

    for row in rows {
        let Some(role) = MessageRole::parse(&row.role) else {
            tracing::warn!(id = row.id, role = %row.role, "skipping row with unknown role");
            continue;
        };
        let (reset, data) = row_data(row);
        if reset {
            out.clear();
            group = None;
            prev = None;
        }
        match role {
            MessageRole::User => {
                close(group.take(), &mut out);
                out.push(ChatMessage {
                    role: Some(Role::User),
                    content: row.content.clone(),
                    ..ChatMessage::default()
                });
            }
            MessageRole::Assistant => {
                close(group.take(), &mut out);
                let mut message = ChatMessage::assistant(row.content.clone(), Vec::new());
                message.provider_data = data;
                out.push(message);
            }
            MessageRole::ToolCall => {
                let call = ToolCall {
                    id: row.tool_call_id.clone().unwrap_or_default(),
                    name: row.tool_name.clone().unwrap_or_default(),
                    arguments: row.tool_args.clone().unwrap_or_default(),
                };
                let extends_previous =
                    matches!(prev, Some(MessageRole::Assistant | MessageRole::ToolCall))
                        && out.last().is_some_and(|m| m.role() == Role::Assistant);
                if extends_previous {
                    let msg_index = out.len() - 1;
                    let g = group.get_or_insert_with(|| OpenGroup {
                        msg_index,
                        expected: Vec::new(),
                        answered: HashSet::new(),
                    });
                    g.expected.push(call.id.clone());
                    if let Some(last) = out.last_mut() {
                        last.tool_calls.push(call);
                    }
                } else {
                    close(group.take(), &mut out);
                    group = Some(OpenGroup {
                        msg_index: out.len(),
                        expected: vec![call.id.clone()],
                        answered: HashSet::new(),
                    });
                    let mut message = ChatMessage::assistant(None, vec![call]);
                    message.provider_data = data;
                    out.push(message);
                }
            }
            MessageRole::ToolResult => {
                let id = row.tool_call_id.clone().unwrap_or_default();
                let accepted = match group.as_mut() {
                    Some(g) if g.expected.contains(&id) && !g.answered.contains(&id) => {
                        g.answered.insert(id.clone());
                        true
                    }
                    _ => false,
                };
                if accepted {
                    out.push(ChatMessage {
                        role: Some(Role::Tool),
                        content: row.content.clone(),
                        tool_call_id: Some(id),
                        ..ChatMessage::default()
                    });
                } else {
                    tracing::warn!(id = row.id, tool_call_id = %id, "dropping tool result without an open call");
                }
            }
        }
        prev = Some(role);
    }
    close(group.take(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        id: i64,
        role: &str,
        content: Option<&str>,
        call: Option<(&str, &str)>,
    ) -> StoredMessage {
        StoredMessage {
            id,
            ws_id: "w".into(),
            timestamp: String::new(),
            role: role.into(),
            content: content.map(str::to_string),
            tool_name: call.map(|(_, n)| n.to_string()),
            tool_args: call.map(|_| "{}".to_string()),
            tool_call_id: call.map(|(c, _)| c.to_string()),
            provider_data: None,
        }
    }

    #[test]
    fn groups_parallel_calls_and_pairs_results_in_stored_order() {
        let rows = vec![
            row(1, "user", Some("go"), None),
            row(2, "assistant", Some("checking"), None),
            row(3, "tool_call", None, Some(("a", "bash"))),
            row(4, "tool_call", None, Some(("b", "read"))),
            row(5, "tool_result", Some("B"), Some(("b", "read"))),
            row(6, "tool_result", Some("A"), Some(("a", "bash"))),
            row(7, "assistant", Some("done"), None),
        ];
        let msgs = rebuild_messages(&rows);
        assert_eq!(msgs.len(), 5);
        assert_eq!(msgs[1].content.as_deref(), Some("checking"));
        let ids: Vec<_> = msgs[1].tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(msgs[2].tool_call_id.as_deref(), Some("b"));
        assert_eq!(msgs[3].tool_call_id.as_deref(), Some("a"));
    }

    #[test]
    fn strips_incomplete_group_but_keeps_later_turns() {
        let rows = vec![
            row(1, "user", Some("one"), None),
            row(2, "tool_call", None, Some(("a", "bash"))),
            row(3, "tool_call", None, Some(("b", "bash"))),
            row(4, "tool_result", Some("A"), Some(("a", "bash"))),
            row(5, "user", Some("two"), None),
            row(6, "assistant", Some("ok"), None),
            row(7, "tool_result", Some("stray"), Some(("zz", "bash"))),
            row(8, "user", Some("three"), None),
            row(9, "tool_call", None, Some(("c", "bash"))),
        ];
        let msgs = rebuild_messages(&rows);
        let texts: Vec<_> = msgs
            .iter()
            .map(|m| m.content.clone().unwrap_or_default())
            .collect();
        assert_eq!(texts, ["one", "two", "ok", "three"]);
        assert!(msgs.iter().all(|m| m.tool_calls.is_empty()));
    }

    #[test]
    fn provider_blocks_and_context_resets_survive_rows() {
        let data = turnstone_llm::ProviderData {
            provider: "anthropic".into(),
            blocks: vec![
                serde_json::json!({"type": "thinking", "thinking": "t", "signature": "s"}),
            ],
        };
        let mut calling = ChatMessage::assistant(
            None,
            vec![ToolCall {
                id: "a".into(),
                name: "bash".into(),
                arguments: "{}".into(),
            }],
        );
        calling.provider_data = Some(data.clone());
        let old = [
            ChatMessage::user("old"),
            ChatMessage::assistant(Some("x".into()), Vec::new()),
        ];
        let new = [
            ChatMessage::user("[Conversation summary]"),
            ChatMessage::assistant(Some("summary".into()), Vec::new()),
        ];
        let later = [
            ChatMessage::user("next"),
            calling,
            ChatMessage::tool("a", "out"),
        ];
        let mut written = Vec::new();
        for m in &old {
            written.extend(crate::NewMessage::from_chat("w", m));
        }
        written.extend(crate::NewMessage::replacement("w", &new));
        for m in &later {
            written.extend(crate::NewMessage::from_chat("w", m));
        }
        let rows: Vec<StoredMessage> = written
            .into_iter()
            .enumerate()
            .map(|(i, n)| StoredMessage {
                id: i as i64,
                ws_id: n.ws_id,
                timestamp: n.timestamp,
                role: n.role.as_str().into(),
                content: n.content,
                tool_name: n.tool_name,
                tool_args: n.tool_args,
                tool_call_id: n.tool_call_id,
                provider_data: n.provider_data,
            })
            .collect();
        let msgs = rebuild_messages(&rows);
        let texts: Vec<_> = msgs.iter().map(|m| m.content.clone()).collect();
        assert_eq!(
            texts,
            [
                Some("[Conversation summary]".to_string()),
                Some("summary".into()),
                Some("next".into()),
                None,
                Some("out".into())
            ]
        );
        assert_eq!(msgs[3].provider_data.as_ref(), Some(&data));
        assert_eq!(
            msgs[3].provider_data.as_ref().unwrap().thinking(),
            [("t", "s")]
        );
        assert!(msgs[0].provider_data.is_none());
    }

    #[test]
    fn unknown_roles_are_skipped() {
        let rows = vec![
            row(1, "weird", Some("x"), None),
            row(2, "user", Some("u"), None),
        ];
        assert_eq!(rebuild_messages(&rows).len(), 1);
    }
}
