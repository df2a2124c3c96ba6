//! MCP prompts as skills: every prompt an MCP server offers is mirrored into the store's
//! skills (`prompt_templates`) as a governed, read-only skill, kept in step with the MCP
//! manager like [`crate::mcp_tools`] keeps the tool registry (only with persistence).
//!
//! # The rows
//! * **Name**: the prompt's qualified name `mcp__{server}__{prompt}` — the name `use_prompt`
//!   takes and the tools use — so two servers offering a prompt of the same name never clash.
//! * `origin = "mcp"`, `mcp_server = {server}`, `readonly = 1` (the admin API answers 403 to
//!   a change or a delete), `activation = "named"`, `category = "mcp"`, tags `mcp` and the
//!   server, `author` the server; the description is the prompt's (or says where it is from).
//! * **Content** ([`render_content`]): a prompt without required arguments is fetched with
//!   `prompts/get` and its messages become the skill text; a prompt that needs arguments
//!   cannot be expanded in advance, so the skill describes it and its arguments and tells the
//!   model to call `use_prompt`. When the fetch fails the description is used too (and the
//!   fetch is tried again at the next change).
//!
//! # The lifecycle
//! [`spawn_sync`] runs [`McpSkillSync::sync_once`] at start and after every change of the
//! manager's offer (discovery on connect, a `listChanged` notification, `/mcp refresh`, a
//! reconnect that ends in a different list):
//! * a server that is ready (or reconnecting, offering its last known list) is
//!   authoritative: each of its prompts is inserted or updated (only when something
//!   changed), and its `mcp` rows whose prompt it no longer offers are deleted;
//! * a server still connecting or failed keeps its rows (it has not said its prompts are
//!   gone); the rows of a server that is no longer configured at all are deleted;
//! * only rows with origin `mcp` of that server are ever written or deleted
//!   ([`SkillStore::upsert_mcp_skill`](turnstone_store::SkillStore::upsert_mcp_skill) and
//!   `delete_mcp_skill` check it in the same statement). A manual skill of the same name
//!   wins: the prompt is skipped with a warning (logged once per name). An operator who
//!   creates a manual skill over an existing MCP row replaces it (see
//!   [`crate::server::skills`]).
//!
//! An expanded prompt is cached by its listing (name, description, arguments): it is fetched
//! again when the listing changes and after a restart, not on every change of another
//! server.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;
use turnstone_mcp::{McpManager, McpPrompt, McpPromptResult, ServerState};
use turnstone_store::{Skill, SkillSpec, Store};

/// The `origin` of MCP-synced skills.
pub const MCP_ORIGIN: &str = "mcp";
/// The `category` of MCP-synced skills.
pub const MCP_CATEGORY: &str = "mcp";

/// The skill name of a prompt: its qualified name `mcp__{server}__{prompt}`.
pub fn skill_name(prompt: &McpPrompt) -> String {
    prompt.qualified_name.clone()
}

fn needs_arguments(prompt: &McpPrompt) -> bool {
    prompt.arguments.iter().any(|a| a.required)
}

fn argument_lines(prompt: &McpPrompt) -> String {
    prompt
        .arguments
        .iter()
        .map(|a| {
            let kind = if a.required { "required" } else { "optional" };
            if a.description.trim().is_empty() {
                format!("- `{}` ({kind})", a.name)
            } else {
                format!("- `{}` ({kind}): {}", a.name, a.description.trim())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn use_prompt_hint(prompt: &McpPrompt) -> String {
    format!(
        "call the `use_prompt` tool with {{\"name\": \"{}\", \"arguments\": {{...}}}} (argument \
         values are strings) and follow the messages it returns.",
        prompt.qualified_name
    )
}

/// The text of the skill of `prompt`. `expanded` is the prompt's `prompts/get` result (for a
/// prompt without required arguments); its messages are the text — one user message as it
/// is, several as `[role]: text` blocks — with a note on any optional arguments. Without a
/// usable expansion the text describes the prompt and its arguments and tells the model to
/// call `use_prompt`. Never empty.
pub fn render_content(prompt: &McpPrompt, expanded: Option<&McpPromptResult>) -> String {
    let expanded_text = expanded.and_then(|r| {
        let text = if r.messages.iter().all(|m| m.role == "user") {
            r.messages
                .iter()
                .map(|m| m.text.as_str())
                .collect::<Vec<_>>()
                .join("\n\n")
        } else {
            r.text.clone()
        };
        (!text.trim().is_empty()).then_some(text)
    });
    if let Some(mut text) = expanded_text {
        if !prompt.arguments.is_empty() {
            text.push_str(&format!(
                "\n\n(This is MCP prompt `{}` without its optional arguments:\n{}\nTo set them, {})",
                prompt.qualified_name,
                argument_lines(prompt),
                use_prompt_hint(prompt)
            ));
        }
        return text;
    }
    let mut text = format!(
        "MCP prompt `{}` from server `{}`",
        prompt.qualified_name, prompt.server
    );
    if prompt.description.trim().is_empty() {
        text.push('.');
    } else {
        text.push_str(&format!(": {}", prompt.description.trim()));
    }
    if prompt.arguments.is_empty() {
        text.push_str("\n\nIts text could not be fetched in advance. To use it, ");
    } else {
        text.push_str(&format!(
            "\n\nIt takes arguments, so it is not expanded here:\n{}\n\nTo use it, ",
            argument_lines(prompt)
        ));
    }
    text.push_str(&use_prompt_hint(prompt));
    text
}

/// The skill row of `prompt` with this content.
pub fn skill_spec(prompt: &McpPrompt, content: String) -> SkillSpec {
    let description = if prompt.description.trim().is_empty() {
        format!("MCP prompt {} from server {}", prompt.name, prompt.server)
    } else {
        prompt.description.trim().to_string()
    };
    SkillSpec {
        category: MCP_CATEGORY.into(),
        description,
        tags: vec![MCP_ORIGIN.into(), prompt.server.clone()],
        origin: MCP_ORIGIN.into(),
        mcp_server: prompt.server.clone(),
        readonly: true,
        author: prompt.server.clone(),
        activation: "named".into(),
        token_estimate: i64::try_from(content.chars().count().div_ceil(4)).unwrap_or(i64::MAX),
        ..SkillSpec::new(skill_name(prompt), content)
    }
}

/// What one [`McpSkillSync::sync_once`] did (skill names).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// Rows inserted or changed.
    pub upserted: Vec<String>,
    /// Rows deleted (the prompt or its server is gone).
    pub removed: Vec<String>,
    /// Prompts not synced: a manual skill (or another server's row) holds the name, or the
    /// name is not a valid skill name.
    pub skipped: Vec<String>,
}

/// Mirrors one manager's prompts into one store (see the module docs).
pub struct McpSkillSync {
    manager: Arc<McpManager>,
    store: Arc<dyn Store>,
    /// Qualified name → the listing the content was made from, and the content.
    contents: HashMap<String, (McpPrompt, String)>,
    /// Names whose clash was already logged.
    warned: HashSet<String>,
}

impl std::fmt::Debug for McpSkillSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSkillSync")
            .field("cached", &self.contents.len())
            .finish_non_exhaustive()
    }
}

fn offers_its_list(state: Option<ServerState>) -> bool {
    matches!(
        state,
        Some(ServerState::Ready | ServerState::Reconnecting { .. })
    )
}

impl McpSkillSync {
    pub fn new(manager: Arc<McpManager>, store: Arc<dyn Store>) -> Self {
        Self {
            manager,
            store,
            contents: HashMap::new(),
            warned: HashSet::new(),
        }
    }

    /// Brings the store's MCP skills in line with what the manager offers now.
    pub async fn sync_once(&mut self) -> SyncReport {
        let mut report = SyncReport::default();
        let configured: BTreeSet<String> = self.manager.server_names().into_iter().collect();
        let mut offered: BTreeMap<String, Vec<McpPrompt>> = configured
            .iter()
            .filter(|s| offers_its_list(self.manager.server_state(s)))
            .map(|s| (s.clone(), Vec::new()))
            .collect();
        for prompt in self.manager.prompts() {
            if let Some(list) = offered.get_mut(&prompt.server) {
                list.push(prompt);
            }
        }
        let rows = match self.store.list_skills(false).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "MCP skills not synced: skills not read");
                return report;
            }
        };
        let by_name: HashMap<&str, &Skill> =
            rows.iter().map(|r| (r.spec.name.as_str(), r)).collect();

        // Rows whose prompt (or server) is gone.
        for row in rows.iter().filter(|r| r.spec.origin == MCP_ORIGIN) {
            let server = row.spec.mcp_server.as_str();
            let gone = if !configured.contains(server) {
                true
            } else if let Some(prompts) = offered.get(server) {
                !prompts.iter().any(|p| skill_name(p) == row.spec.name)
            } else {
                false
            };
            if !gone {
                continue;
            }
            match self.store.delete_mcp_skill(&row.spec.name, server).await {
                Ok(true) => {
                    tracing::info!(skill = %row.spec.name, server, "MCP skill removed: the prompt is no longer offered");
                    report.removed.push(row.spec.name.clone());
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(skill = %row.spec.name, server, error = %e, "MCP skill not removed");
                }
            }
        }

        // Every offered prompt.
        for (server, prompts) in &offered {
            let ready = self.manager.server_state(server) == Some(ServerState::Ready);
            for prompt in prompts {
                let name = skill_name(prompt);
                if let Some(row) = by_name.get(name.as_str())
                    && !(row.spec.origin == MCP_ORIGIN && &row.spec.mcp_server == server)
                {
                    self.clash(&name, server, &row.spec.origin, &row.spec.mcp_server);
                    report.skipped.push(name);
                    continue;
                }
                let content = self.content_for(prompt, ready).await;
                let spec = skill_spec(prompt, content);
                if let Err(e) = spec.validate() {
                    if self.warned.insert(name.clone()) {
                        tracing::warn!(skill = %name, server, error = %e, "MCP prompt not synced as a skill");
                    }
                    report.skipped.push(name);
                    continue;
                }
                if by_name
                    .get(name.as_str())
                    .is_some_and(|row| row.spec == spec)
                {
                    continue;
                }
                match self.store.upsert_mcp_skill(spec).await {
                    Ok(Some(_)) => {
                        self.warned.remove(&name);
                        tracing::info!(skill = %name, server, "MCP prompt synced as a skill");
                        report.upserted.push(name);
                    }
                    Ok(None) => {
                        // Taken by a manual skill since the rows were read.
                        self.clash(&name, server, "manual", "");
                        report.skipped.push(name);
                    }
                    Err(e) => {
                        tracing::warn!(skill = %name, server, error = %e, "MCP skill not written");
                    }
                }
            }
        }
        let listed: HashSet<String> = offered.values().flatten().map(skill_name).collect();
        self.contents.retain(|name, _| listed.contains(name));
        report
    }

    fn clash(&mut self, name: &str, server: &str, origin: &str, holder: &str) {
        if self.warned.insert(name.to_string()) {
            tracing::warn!(
                skill = name,
                server,
                held_by_origin = origin,
                held_by_server = holder,
                "MCP prompt skipped: a skill of the same name exists and wins"
            );
        }
    }

    /// The skill text of `prompt`: cached while its listing is unchanged; fetched from a
    /// ready server when it needs no arguments.
    async fn content_for(&mut self, prompt: &McpPrompt, ready: bool) -> String {
        if let Some((listing, content)) = self.contents.get(&prompt.qualified_name)
            && listing == prompt
        {
            return content.clone();
        }
        if needs_arguments(prompt) {
            let content = render_content(prompt, None);
            self.contents.insert(
                prompt.qualified_name.clone(),
                (prompt.clone(), content.clone()),
            );
            return content;
        }
        if !ready {
            return render_content(prompt, None);
        }
        match self
            .manager
            .get_prompt(&prompt.server, &prompt.name, Value::Null)
            .await
        {
            Ok(result) => {
                let content = render_content(prompt, Some(&result));
                self.contents.insert(
                    prompt.qualified_name.clone(),
                    (prompt.clone(), content.clone()),
                );
                content
            }
            Err(e) => {
                tracing::warn!(prompt = %prompt.qualified_name, error = %e, "MCP prompt not fetched; its skill describes it instead");
                render_content(prompt, None)
            }
        }
    }
}

/// Syncs now and after every change of the manager's offer, until the task is aborted.
pub fn spawn_sync(manager: Arc<McpManager>, store: Arc<dyn Store>) -> tokio::task::JoinHandle<()> {
    let mut changes = manager.subscribe();
    let mut sync = McpSkillSync::new(manager, store);
    tokio::spawn(
        async move {
            loop {
                let generation = *changes.borrow_and_update();
                let report = sync.sync_once().await;
                tracing::debug!(
                    generation,
                    upserted = report.upserted.len(),
                    removed = report.removed.len(),
                    skipped = report.skipped.len(),
                    "MCP skills synced"
                );
                if changes.changed().await.is_err() {
                    return;
                }
            }
        }
        .instrument(tracing::info_span!("mcp_skill_sync")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_mcp::{McpPromptArgument, McpPromptMessage};

    fn prompt(args: &[(&str, bool)]) -> McpPrompt {
        McpPrompt {
            qualified_name: "mcp__docs__greet".into(),
            server: "docs".into(),
            name: "greet".into(),
            description: "Greets someone.".into(),
            arguments: args
                .iter()
                .map(|(n, required)| McpPromptArgument {
                    name: (*n).into(),
                    description: format!("the {n}"),
                    required: *required,
                })
                .collect(),
        }
    }

    fn result(messages: &[(&str, &str)]) -> McpPromptResult {
        let messages: Vec<McpPromptMessage> = messages
            .iter()
            .map(|(role, text)| McpPromptMessage {
                role: (*role).into(),
                text: (*text).into(),
            })
            .collect();
        let text = messages
            .iter()
            .map(|m| format!("[{}]: {}", m.role, m.text))
            .collect::<Vec<_>>()
            .join("\n\n");
        McpPromptResult {
            description: None,
            messages,
            text,
        }
    }

    #[test]
    fn an_expanded_prompt_is_its_text() {
        let p = prompt(&[]);
        assert_eq!(
            render_content(&p, Some(&result(&[("user", "Say hello.")]))),
            "Say hello."
        );
        assert_eq!(
            render_content(&p, Some(&result(&[("user", "Q?"), ("assistant", "A.")]))),
            "[user]: Q?\n\n[assistant]: A."
        );
        // Optional arguments are named, with how to set them.
        let text = render_content(
            &prompt(&[("tone", false)]),
            Some(&result(&[("user", "Say hello.")])),
        );
        assert!(text.starts_with("Say hello.\n\n(This is MCP prompt `mcp__docs__greet`"));
        assert!(text.contains("- `tone` (optional): the tone"), "{text}");
        assert!(text.contains("`use_prompt`"), "{text}");
    }

    #[test]
    fn a_prompt_with_arguments_is_described() {
        let text = render_content(&prompt(&[("name", true), ("tone", false)]), None);
        assert!(
            text.starts_with("MCP prompt `mcp__docs__greet` from server `docs`: Greets someone."),
            "{text}"
        );
        assert!(text.contains("- `name` (required): the name\n- `tone` (optional): the tone"));
        assert!(
            text.contains(r#"{"name": "mcp__docs__greet", "arguments": {...}}"#),
            "{text}"
        );
        // An empty expansion falls back to the description.
        let text = render_content(&prompt(&[]), Some(&result(&[("user", " ")])));
        assert!(text.contains("could not be fetched in advance"), "{text}");
    }

    #[test]
    fn the_row_is_read_only_mcp_and_named() {
        let spec = skill_spec(&prompt(&[]), "Say hello.".into());
        assert_eq!(spec.name, "mcp__docs__greet");
        assert_eq!(spec.origin, "mcp");
        assert_eq!(spec.mcp_server, "docs");
        assert!(spec.readonly && spec.enabled);
        assert_eq!(spec.activation, "named");
        assert_eq!(spec.description, "Greets someone.");
        assert_eq!(spec.tags, ["mcp", "docs"]);
        assert_eq!(spec.token_estimate, 3);
        assert!(spec.validate().is_ok());
        let mut bare = prompt(&[]);
        bare.description.clear();
        assert_eq!(
            skill_spec(&bare, "x".into()).description,
            "MCP prompt greet from server docs"
        );
    }
}
