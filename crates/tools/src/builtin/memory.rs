//! `memory`: structured persistent memories (save / get / search / delete / list) through a
//! [`MemoryBackend`]. Auto-approved; not available to sub-agents.
//!
//! Names are normalised as the HTTP API does it (trimmed, lower-cased, `-` and spaces become
//! `_`) and must then be snake_case-ish: letters, digits, `_` and `.`, at most 256 characters.
//! Scope resolution for an interactive session (seed 000): an explicit scope selects exactly
//! that scope (`workstream` = this workstream); without one, save/get/delete use `global` and
//! search/list cover every visible scope (`global` and this workstream's). The `user` scope
//! needs a user identity, which a tool call does not carry: it is refused with a clear error.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::backends::{
    MemoryBackend, MemoryEntry, MemoryQuery, MemoryScope, MemoryScopeRef, MemoryType, NewMemory,
};
use crate::error::RegistryError;
use crate::rerank::{RerankUse, rerank_items};
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

/// Longest accepted memory name (characters), as the HTTP API.
pub const MAX_NAME_CHARS: usize = 256;
/// Longest accepted content (characters), as the HTTP API.
pub const MAX_CONTENT_CHARS: usize = 65_536;
/// Full-text hits handed to a reranker (the pool it picks `limit` from).
const RERANK_POOL: usize = 30;
/// Results of search and list without a `limit`.
pub const DEFAULT_LIMIT: usize = 20;
/// Most results of one search or list.
pub const MAX_LIMIT: usize = 100;
/// Characters of content shown per search result.
const SEARCH_PREVIEW_CHARS: usize = 300;

const ACTIONS: [&str; 5] = ["save", "get", "search", "delete", "list"];

/// The `memory` tool.
pub struct MemoryTool {
    definition: ToolDefinition,
    backend: Arc<dyn MemoryBackend>,
}

impl std::fmt::Debug for MemoryTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTool").finish_non_exhaustive()
    }
}

impl MemoryTool {
    pub fn new(backend: Arc<dyn MemoryBackend>) -> Result<Self, RegistryError> {
        Ok(Self {
            definition: schema_definition("memory", include_str!("../../schemas/memory.json"))?,
            backend,
        })
    }
}

/// Trimmed, lower-cased, `-` and spaces become `_` (the HTTP API uses it too).
pub fn normalise_name(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .chars()
        .map(|c| if c == '-' || c == ' ' { '_' } else { c })
        .collect()
}

fn valid_name(a: &Args<'_>) -> Result<String, String> {
    let raw = a.non_blank("name")?;
    let name = normalise_name(raw);
    let ok_chars = name
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
    if !ok_chars || name.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "Error: invalid memory name '{raw}': use a short snake_case identifier \
             (letters, digits and _, at most {MAX_NAME_CHARS} characters)"
        ));
    }
    Ok(name)
}

fn parse_type(a: &Args<'_>) -> Result<Option<MemoryType>, String> {
    let Some(text) = a.opt_trimmed("type")? else {
        return Ok(None);
    };
    let lower = text.to_lowercase();
    // The seed era's name of the general-purpose type.
    if lower == "general" {
        return Ok(Some(MemoryType::Project));
    }
    MemoryType::parse(&lower).map(Some).ok_or_else(|| {
        format!("Error: invalid type '{text}'; must be one of: user, project, feedback, reference")
    })
}

fn parse_scope(a: &Args<'_>) -> Result<Option<MemoryScope>, String> {
    let Some(text) = a.opt_trimmed("scope")? else {
        return Ok(None);
    };
    let lower = text.to_lowercase();
    match MemoryScope::parse(&lower) {
        Some(MemoryScope::User) => Err(
            "Error: the user scope needs a user identity, which this session does not have; \
             use scope global or workstream"
                .into(),
        ),
        Some(scope) => Ok(Some(scope)),
        None if matches!(lower.as_str(), "coordinator" | "project") => Err(format!(
            "Error: scope '{text}' is not available to an interactive session; use global or \
             workstream"
        )),
        None => Err(format!(
            "Error: invalid scope '{text}'; must be one of: global, workstream, user"
        )),
    }
}

/// The exact scope of a save/get/delete: the given one, else `global`.
fn exact_scope(scope: Option<MemoryScope>, ctx: &ToolContext) -> Result<MemoryScopeRef, String> {
    match scope {
        None | Some(MemoryScope::Global) => Ok(MemoryScopeRef::global()),
        Some(MemoryScope::Workstream) if ctx.ws_id.is_empty() => {
            Err("Error: the workstream scope needs a workstream, and this call has none".into())
        }
        Some(MemoryScope::Workstream) => Ok(MemoryScopeRef::workstream(&*ctx.ws_id)),
        Some(MemoryScope::User) => Err(
            "Error: the user scope needs a user identity, which this session does not have".into(),
        ),
    }
}

/// The scopes a search/list covers: the given one, else every visible scope.
fn visible_scopes(
    scope: Option<MemoryScope>,
    ctx: &ToolContext,
) -> Result<Vec<MemoryScopeRef>, String> {
    if scope.is_some() {
        return exact_scope(scope, ctx).map(|s| vec![s]);
    }
    let mut scopes = vec![MemoryScopeRef::global()];
    if !ctx.ws_id.is_empty() {
        scopes.push(MemoryScopeRef::workstream(&*ctx.ws_id));
    }
    Ok(scopes)
}

fn scope_label(scope: &MemoryScopeRef) -> &'static str {
    scope.scope.as_str()
}

fn limit_of(a: &Args<'_>) -> Result<usize, String> {
    Ok(match a.opt_int("limit")? {
        None => DEFAULT_LIMIT,
        Some(n) => usize::try_from(n.max(1))
            .unwrap_or(MAX_LIMIT)
            .min(MAX_LIMIT),
    })
}

fn summary_line(m: &MemoryEntry) -> String {
    format!(
        "- {} [{}, {}]: {}",
        m.name,
        m.mem_type,
        scope_label(&m.scope),
        m.description
    )
}

fn preview(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut out: String = flat.chars().take(max).collect();
    out.push('…');
    out
}

#[async_trait]
impl Tool for MemoryTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let action_text = a.non_blank("action")?.trim().to_lowercase();
        if !ACTIONS.contains(&action_text.as_str()) {
            return Err(format!(
                "Error: invalid action '{action_text}'; must be one of: {}",
                ACTIONS.join(", ")
            ));
        }
        let mem_type = parse_type(&a)?;
        let scope = parse_scope(&a)?;
        let mut out = Map::new();
        out.insert("action".into(), json!(action_text));
        if let Some(t) = mem_type {
            out.insert("type".into(), json!(t.as_str()));
        }
        if let Some(s) = scope {
            out.insert("scope".into(), json!(s.as_str()));
        }
        let summary = match action_text.as_str() {
            "save" => {
                let name = valid_name(&a)?;
                let content = a.non_blank("content")?;
                if content.chars().count() > MAX_CONTENT_CHARS {
                    return Err(format!(
                        "Error: content exceeds {MAX_CONTENT_CHARS} character limit"
                    ));
                }
                let description = a
                    .opt_trimmed("description")?
                    .ok_or("Error: description is required on save (a non-empty one-line summary used for relevance matching)")?;
                exact_scope(scope, ctx)?;
                out.insert("content".into(), json!(content));
                out.insert("description".into(), json!(description));
                let s = format!("save {name}");
                out.insert("name".into(), json!(name));
                s
            }
            "get" | "delete" => {
                let name = valid_name(&a)?;
                exact_scope(scope, ctx)?;
                let s = format!("{action_text} {name}");
                out.insert("name".into(), json!(name));
                s
            }
            "search" => {
                let query = a.non_blank("query")?.trim();
                visible_scopes(scope, ctx)?;
                out.insert("query".into(), json!(query));
                out.insert("limit".into(), json!(limit_of(&a)?));
                format!("search {query}")
            }
            _ => {
                visible_scopes(scope, ctx)?;
                out.insert("limit".into(), json!(limit_of(&a)?));
                "list".to_string()
            }
        };
        Ok(Prepared {
            args: Value::Object(out),
            header: header("memory", &summary),
            preview: String::new(),
            needs_approval: false,
            approval_label: "memory".to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let text = |key: &str| prepared.text(key).unwrap_or("");
        let scope = MemoryScope::parse(text("scope"));
        let mem_type = MemoryType::parse(text("type"));
        let limit = prepared.count("limit").unwrap_or(DEFAULT_LIMIT);
        let failed = |what: &str, e: crate::backends::BackendError| {
            tracing::warn!(error = %e, action = what, "memory backend failed");
            ToolOutput::error(format!("Error: memory {what} failed: {e}"))
        };
        let output = match text("action") {
            "save" => {
                let target = match exact_scope(scope, ctx) {
                    Ok(s) => s,
                    Err(e) => return ToolOutput::error(e),
                };
                let memory = NewMemory {
                    name: text("name").to_owned(),
                    content: text("content").to_owned(),
                    description: text("description").to_owned(),
                    mem_type: mem_type.unwrap_or(MemoryType::Project),
                    scope: target,
                };
                match self.backend.save(memory).await {
                    Ok(m) => ToolOutput::ok(format!(
                        "Saved memory '{}' (type {}, scope {}).",
                        m.name,
                        m.mem_type,
                        scope_label(&m.scope)
                    )),
                    Err(e) => failed("save", e),
                }
            }
            action @ ("get" | "delete") => {
                let target = match exact_scope(scope, ctx) {
                    Ok(s) => s,
                    Err(e) => return ToolOutput::error(e),
                };
                let name = text("name");
                let not_found = || {
                    ToolOutput::error(format!(
                        "Memory '{name}' not found in scope {}.",
                        scope_label(&target)
                    ))
                };
                if action == "get" {
                    match self.backend.get(name, &target).await {
                        Ok(Some(m)) => ToolOutput::ok(format!(
                            "{} [{}, {}]\nDescription: {}\nUpdated: {}\n\n{}",
                            m.name,
                            m.mem_type,
                            scope_label(&m.scope),
                            m.description,
                            m.updated,
                            m.content
                        )),
                        Ok(None) => not_found(),
                        Err(e) => failed("get", e),
                    }
                } else {
                    match self.backend.delete(name, &target).await {
                        Ok(true) => ToolOutput::ok(format!(
                            "Deleted memory '{name}' (scope {}).",
                            scope_label(&target)
                        )),
                        Ok(false) => not_found(),
                        Err(e) => failed("delete", e),
                    }
                }
            }
            action @ ("search" | "list") => {
                let scopes = match visible_scopes(scope, ctx) {
                    Ok(s) => s,
                    Err(e) => return ToolOutput::error(e),
                };
                let filter = MemoryQuery { mem_type, scopes };
                let query = text("query");
                let found = if action == "search" {
                    // With a reranker: a larger full-text pool, re-ordered, then cut.
                    let reranker = ctx.reranker.as_deref();
                    let pool = if reranker.is_some_and(|r| r.active(RerankUse::Memory)) {
                        limit.max(RERANK_POOL)
                    } else {
                        limit
                    };
                    match self.backend.search(query, &filter, pool).await {
                        Ok(rows) => {
                            let mut rows =
                                rerank_items(reranker, RerankUse::Memory, query, rows, |m| {
                                    format!("{}: {}\n{}", m.name, m.description, m.content)
                                })
                                .await;
                            rows.truncate(limit);
                            Ok(rows)
                        }
                        Err(e) => Err(e),
                    }
                } else {
                    self.backend.list(&filter, limit).await
                };
                match found {
                    Err(e) => failed(action, e),
                    Ok(rows) if rows.is_empty() => ToolOutput::ok(if action == "search" {
                        format!("No memories match '{query}'.")
                    } else {
                        "No memories saved.".to_owned()
                    }),
                    Ok(rows) => {
                        let mut lines = vec![format!("{} memories:", rows.len())];
                        for m in &rows {
                            lines.push(summary_line(m));
                            if action == "search" {
                                lines.push(format!(
                                    "  {}",
                                    preview(&m.content, SEARCH_PREVIEW_CHARS)
                                ));
                            }
                        }
                        ToolOutput::ok(lines.join("\n"))
                    }
                }
            }
            other => ToolOutput::error(format!("Error: invalid action '{other}'")),
        };
        finish(output, ctx)
    }
}
