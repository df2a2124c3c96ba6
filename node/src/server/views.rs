//! How engine state looks on the wire: history entries, `ws_state` payloads, the attach
//! preamble of a per-workstream stream.

use serde_json::{Value, json};
use turnstone_engine::{Event, WorkstreamHandle, WsState};
use turnstone_llm::{ChatMessage, Role};
use turnstone_proto::image::with_markers;
use turnstone_proto::sse;

use super::state::Node;

/// Tool-result prefixes that mark a history entry as an error (node spec §2.2).
const ERROR_PREFIXES: &[&str] = &[
    "Error",
    "Command timed out",
    "Search timed out",
    "Unknown tool:",
    "tool '",
    "JSON parse error:",
    "MCP prompt timed out",
    "MCP prompt error",
];

/// The `history` entries of a conversation (node spec §2.2 `HistoryEntry`).
pub fn history_entries(messages: &[ChatMessage], pending: bool) -> Vec<Value> {
    let mut entries: Vec<Value> = Vec::with_capacity(messages.len());
    let mut last_call_entry = None;
    for m in messages {
        match m.role() {
            Role::System => continue,
            Role::User if !m.images.is_empty() => entries.push(json!({
                "role": "user",
                "content": with_markers(m.content.as_deref().unwrap_or(""), &m.images),
            })),
            Role::User => entries.push(json!({"role": "user", "content": m.content})),
            Role::Assistant => {
                let mut entry = json!({"role": "assistant", "content": m.content});
                if !m.tool_calls.is_empty() {
                    entry["tool_calls"] = m
                        .tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
                        .collect();
                    last_call_entry = Some(entries.len());
                }
                entries.push(entry);
            }
            Role::Tool => {
                let content = m.content.clone().unwrap_or_default();
                // Images appear as their markers, never as their bytes.
                let mut entry = json!({
                    "role": "tool",
                    "content": with_markers(&content, &m.images),
                });
                if content.starts_with("Denied by user") || content.starts_with("Blocked") {
                    entry["denied"] = json!(true);
                    if let Some(i) = last_call_entry {
                        entries[i]["denied"] = json!(true);
                    }
                }
                if ERROR_PREFIXES.iter().any(|p| content.starts_with(p)) {
                    entry["is_error"] = json!(true);
                }
                // A call of an interrupted batch: its effect receipt, for the badge.
                if let Some(status) = turnstone_proto::receipt::status_of(&content) {
                    entry["receipt"] = json!(status);
                }
                entries.push(entry);
            }
        }
    }
    if pending && let Some(i) = last_call_entry {
        entries[i]["pending"] = json!(true);
    }
    entries
}

/// Share of the context window the workstream's last request used.
pub fn context_ratio(node: &Node, ws: &WorkstreamHandle) -> f64 {
    let usage = ws.usage();
    let window = f64::from(node.manager.engine().context_window());
    if window == 0.0 {
        0.0
    } else {
        (usage.prompt_tokens + usage.completion_tokens) as f64 / window
    }
}

/// A `ws_state` payload (global stream; also per-workstream at turn end, so the original
/// SDK's `send_and_wait` completes — node spec §2.7). `content` only when idle.
pub fn ws_state(
    node: &Node,
    ws: &WorkstreamHandle,
    state: WsState,
    content: Option<&str>,
) -> sse::WsState {
    let (activity, activity_state) = ws.activity();
    sse::WsState {
        ws_id: ws.id().to_string(),
        state,
        tokens: ws.tokens_total(),
        context_ratio: context_ratio(node, ws),
        activity,
        activity_state,
        content: (state == WsState::Idle).then(|| content.unwrap_or("").to_string()),
    }
}

/// The frames a client gets when it attaches without `Last-Event-ID`: `connected`, `status`
/// (if there is usage), `history` (if there are messages), and the pending approval.
pub fn attach_preamble(node: &Node, ws: &WorkstreamHandle) -> Vec<Value> {
    // The workstream's own model (it may have switched with `/model`).
    let (model, model_alias) = model_of(node, ws);
    let mut out = vec![json!({
        "type": "connected",
        "model": model,
        "model_alias": model_alias,
        "skip_permissions": ws.skip_permissions(),
        "posture": ws.posture().as_str(),
    })];
    let status = ws.status();
    if status.total_tokens > 0 {
        let mut v = serde_json::to_value(&status).unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), json!("status"));
        }
        out.push(v);
    }
    // Every pending approval round (several sub-agents may each wait), oldest first.
    let pending = ws.pending_approvals();
    let messages = ws.history();
    if !messages.is_empty() {
        // The last calls await a decision only when a round holds one of them (a
        // sub-agent's round is about its own calls: the parent's are running).
        let last_calls: Vec<&str> = messages
            .iter()
            .rev()
            .find(|m| !m.tool_calls.is_empty())
            .map(|m| m.tool_calls.iter().map(|c| c.id.as_str()).collect())
            .unwrap_or_default();
        let own_round = pending.iter().any(|env| {
            matches!(&env.event, turnstone_engine::Event::ApproveRequest { items, .. }
                if items.iter().any(|i| last_calls.contains(&i.call_id.as_str())))
        });
        out.push(json!({"type": "history", "messages": history_entries(&messages, own_round)}));
    }
    for env in pending {
        out.push(serde_json::to_value(&env.event).unwrap_or(Value::Null));
    }
    out
}

/// The model a workstream uses and its alias: its `/model` choice, else the node's.
pub fn model_of(node: &Node, ws: &WorkstreamHandle) -> (String, String) {
    let (model, alias) = ws.model();
    if alias.is_empty() && model == node.manager.engine().config().model {
        (node.options.model.clone(), node.options.model_alias.clone())
    } else {
        (model, alias)
    }
}

/// The wire JSON of an engine event.
pub fn event_json(event: &Event) -> Value {
    serde_json::to_value(event).unwrap_or(Value::Null)
}
