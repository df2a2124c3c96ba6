//! Rebuilding provider messages from conversation rows.
//!
//! Rows are the seed-era model: `user`, `assistant`, one `tool_call` row per call and one
//! `tool_result` row per output. Rebuilding:
//! * consecutive `tool_call` rows (optionally right after an `assistant` text row of the same
//!   response) become ONE assistant message with `tool_calls`;
//! * the following `tool_result` rows are paired to those calls by `tool_call_id`, in stored
//!   order; a result that answers no open call is dropped (providers reject orphans);
//! * a group whose calls did not all get a result is a tool batch the node stopped in (a crash,
//!   a kill): it is closed with effect receipts (`turnstone_proto::receipt`), never dropped —
//!   its calls may have had effects, and a model that regenerated it could repeat them. A call
//!   with a stored result keeps it (`completed`); a call without one is answered
//!   `Interrupted: the node stopped during this tool batch. Effect: …` — `unknown` when the
//!   batch's durable marker (the session setting `tools_started:{first call id}`) says it
//!   started, `none` when the marker says it did not, and `unknown` when there is no readable
//!   marker (rows written before markers existed);
//! * a row whose `provider_data` carries [`CONTEXT_RESET_KEY`] starts the conversation afresh
//!   (a compaction replaced the context): everything rebuilt before it is dropped;
//! * an assistant's provider blocks (`provider_data` of its first row) come back as
//!   [`ChatMessage::provider_data`];
//! * a user or tool result row's images (`provider_data` key [`IMAGES_KEY`]) come back as
//!   [`ChatMessage::images`].

use std::collections::{BTreeMap, HashSet};

use turnstone_llm::{ChatMessage, ImagePart, ProviderData, Role, ToolCall};
use turnstone_proto::receipt::{
    EffectStatus, Interruption, NODE_STOPPED, STARTED_CONFIG_PREFIX, parse_started, receipt_text,
};

use crate::model::{CONTEXT_RESET_KEY, IMAGES_KEY, MessageRole, StoredMessage};

struct OpenGroup {
    expected: Vec<String>,
    answered: HashSet<String>,
}

impl OpenGroup {
    fn complete(&self) -> bool {
        self.expected.iter().all(|id| self.answered.contains(id))
    }
}

/// The `started` markers of tool batches the node stopped in, by the batch's first call id.
struct Markers(BTreeMap<String, HashSet<String>>);

impl Markers {
    fn from_config(config: &BTreeMap<String, String>) -> Self {
        Self(
            config
                .iter()
                .filter_map(|(key, value)| {
                    let first = key.strip_prefix(STARTED_CONFIG_PREFIX)?;
                    Some((first.to_string(), parse_started(value)?))
                })
                .collect(),
        )
    }

    /// What a call of the batch whose first call is `first` did, having no stored result.
    fn status(&self, first: &str, call_id: &str) -> EffectStatus {
        match self.0.get(first) {
            Some(started) if !started.contains(call_id) => EffectStatus::None,
            _ => EffectStatus::Unknown,
        }
    }
}

/// Closes an open group: every call without a stored result is answered with its receipt
/// (see the module docs), after the results it has.
fn close(group: Option<OpenGroup>, out: &mut Vec<ChatMessage>, markers: &Markers) {
    let Some(g) = group else { return };
    if g.complete() {
        return;
    }
    let first = g.expected.first().cloned().unwrap_or_default();
    tracing::debug!(
        calls = g.expected.len(),
        answered = g.answered.len(),
        "closing a tool batch the node stopped in with effect receipts"
    );
    for id in g.expected.iter().filter(|id| !g.answered.contains(*id)) {
        let status = markers.status(&first, id);
        out.push(ChatMessage::tool(
            id.clone(),
            receipt_text(NODE_STOPPED, status, Interruption::NodeStopped),
        ));
    }
}

/// The parsed `provider_data` column: the context-reset mark, provider blocks and images.
fn row_data(row: &StoredMessage) -> (bool, Option<ProviderData>, Vec<ImagePart>) {
    let Some(mut value) = row
        .provider_data
        .as_deref()
        .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
    else {
        return (false, None, Vec::new());
    };
    let reset = value[CONTEXT_RESET_KEY] == serde_json::Value::Bool(true);
    let images = match value.get_mut(IMAGES_KEY).map(serde_json::Value::take) {
        None => Vec::new(),
        Some(images) => serde_json::from_value(images).unwrap_or_else(|e| {
            tracing::warn!(id = row.id, error = %e, "dropping unreadable stored images");
            Vec::new()
        }),
    };
    let data = value
        .get("provider")
        .is_some()
        .then(|| serde_json::from_value::<ProviderData>(value).ok())
        .flatten();
    (reset, data, images)
}

/// Rebuilds provider messages from rows in stored order; `config` is the session's stored
/// settings, where the `started` markers of interrupted tool batches are (see the module docs).
pub fn rebuild_messages(
    rows: &[StoredMessage],
    config: &BTreeMap<String, String>,
) -> Vec<ChatMessage> {
    let markers = Markers::from_config(config);
    let mut out: Vec<ChatMessage> = Vec::with_capacity(rows.len());
    let mut group: Option<OpenGroup> = None;
    let mut prev: Option<MessageRole> = None;

    for row in rows {
        let Some(role) = MessageRole::parse(&row.role) else {
            tracing::warn!(id = row.id, role = %row.role, "skipping row with unknown role");
            continue;
        };
        let (reset, data, images) = row_data(row);
        if reset {
            out.clear();
            group = None;
            prev = None;
        }
        match role {
            MessageRole::User => {
                close(group.take(), &mut out, &markers);
                out.push(ChatMessage {
                    role: Some(Role::User),
                    content: row.content.clone(),
                    images,
                    ..ChatMessage::default()
                });
            }
            MessageRole::Assistant => {
                close(group.take(), &mut out, &markers);
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
                    let g = group.get_or_insert_with(|| OpenGroup {
                        expected: Vec::new(),
                        answered: HashSet::new(),
                    });
                    g.expected.push(call.id.clone());
                    if let Some(last) = out.last_mut() {
                        last.tool_calls.push(call);
                    }
                } else {
                    close(group.take(), &mut out, &markers);
                    group = Some(OpenGroup {
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
                        images,
                        ..ChatMessage::default()
                    });
                } else {
                    tracing::warn!(id = row.id, tool_call_id = %id, "dropping tool result without an open call");
                }
            }
        }
        prev = Some(role);
    }
    close(group.take(), &mut out, &markers);
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
        let msgs = rebuild_messages(&rows, &BTreeMap::new());
        assert_eq!(msgs.len(), 5);
        assert_eq!(msgs[1].content.as_deref(), Some("checking"));
        let ids: Vec<_> = msgs[1].tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(msgs[2].tool_call_id.as_deref(), Some("b"));
        assert_eq!(msgs[3].tool_call_id.as_deref(), Some("a"));
    }

    #[test]
    fn closes_an_interrupted_group_with_receipts_and_keeps_later_turns() {
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
            row(10, "tool_call", None, Some(("d", "bash"))),
        ];
        // The last batch's marker: `c` started, `d` never did. The first batch has none
        // (written before markers existed, or lost): its unanswered call reads `unknown`.
        let config =
            BTreeMap::from([(format!("{STARTED_CONFIG_PREFIX}c"), r#"["c"]"#.to_string())]);
        let msgs = rebuild_messages(&rows, &config);
        let texts: Vec<_> = msgs
            .iter()
            .map(|m| m.content.clone().unwrap_or_default())
            .collect();
        assert_eq!(texts[0], "one");
        assert_eq!(msgs[1].tool_calls.len(), 2);
        assert_eq!(texts[2], "A");
        assert_eq!(msgs[3].tool_call_id.as_deref(), Some("b"));
        assert!(
            texts[3].starts_with(NODE_STOPPED) && texts[3].contains("Effect: unknown"),
            "{}",
            texts[3]
        );
        assert_eq!(texts[4..7], ["two", "ok", "three"]);
        assert_eq!(msgs[7].tool_calls.len(), 2);
        assert_eq!(msgs[8].tool_call_id.as_deref(), Some("c"));
        assert!(texts[8].contains("Effect: unknown"), "{}", texts[8]);
        assert_eq!(msgs[9].tool_call_id.as_deref(), Some("d"));
        assert!(texts[9].contains("Effect: none"), "{}", texts[9]);
        assert_eq!(msgs.len(), 10);
    }

    #[test]
    fn an_unreadable_marker_reads_as_unknown() {
        let rows = vec![
            row(1, "user", Some("go"), None),
            row(2, "tool_call", None, Some(("a", "bash"))),
        ];
        let config = BTreeMap::from([(format!("{STARTED_CONFIG_PREFIX}a"), "{".to_string())]);
        let msgs = rebuild_messages(&rows, &config);
        assert_eq!(msgs.len(), 3);
        assert!(
            msgs[2]
                .content
                .as_deref()
                .is_some_and(|c| c.contains("Effect: unknown")),
            "{msgs:?}"
        );
        let config = BTreeMap::from([(format!("{STARTED_CONFIG_PREFIX}a"), "[]".to_string())]);
        let msgs = rebuild_messages(&rows, &config);
        assert!(
            msgs[2]
                .content
                .as_deref()
                .is_some_and(|c| c.contains("Effect: none")),
            "{msgs:?}"
        );
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
        let msgs = rebuild_messages(&rows, &BTreeMap::new());
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
        assert_eq!(rebuild_messages(&rows, &BTreeMap::new()).len(), 1);
    }
}
