//! `recall`: full-text search of conversation history across sessions through a
//! [`HistoryBackend`]. Auto-approved; not available to sub-agents.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::backends::{HistoryBackend, HistoryHit};
use crate::error::RegistryError;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

/// Results without a `limit`.
pub const DEFAULT_LIMIT: usize = 20;
/// Most results of one call.
pub const MAX_LIMIT: usize = 50;
/// Characters of one excerpt.
const SNIPPET_CHARS: usize = 400;

/// The `recall` tool.
pub struct RecallTool {
    definition: ToolDefinition,
    backend: Arc<dyn HistoryBackend>,
}

impl std::fmt::Debug for RecallTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallTool").finish_non_exhaustive()
    }
}

impl RecallTool {
    pub fn new(backend: Arc<dyn HistoryBackend>) -> Result<Self, RegistryError> {
        Ok(Self {
            definition: schema_definition("recall", include_str!("../../schemas/recall.json"))?,
            backend,
        })
    }
}

/// One result line: `[timestamp] ws <id> <role>(<tool>): <excerpt>`.
fn hit_line(hit: &HistoryHit) -> String {
    let role = match &hit.tool_name {
        Some(tool) if !tool.is_empty() => format!("{} ({tool})", hit.role),
        _ => hit.role.clone(),
    };
    let flat = hit.snippet.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut excerpt: String = flat.chars().take(SNIPPET_CHARS).collect();
    if flat.chars().count() > SNIPPET_CHARS {
        excerpt.push('…');
    }
    format!("[{}] ws {} {role}: {excerpt}", hit.timestamp, hit.ws_id)
}

#[async_trait]
impl Tool for RecallTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let query = a.non_blank("query")?.trim();
        if !query.chars().any(char::is_alphanumeric) {
            return Err(format!(
                "Error: query '{query}' contains no words to search for"
            ));
        }
        let limit = match a.opt_int("limit")? {
            None => DEFAULT_LIMIT,
            Some(n) => usize::try_from(n.max(1))
                .unwrap_or(MAX_LIMIT)
                .min(MAX_LIMIT),
        };
        Ok(Prepared {
            args: json!({"query": query, "limit": limit}),
            header: header("recall", query),
            preview: String::new(),
            needs_approval: false,
            approval_label: "recall".to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let query = prepared.text("query").unwrap_or("");
        let limit = prepared.count("limit").unwrap_or(DEFAULT_LIMIT);
        let output = match self.backend.search(query, limit).await {
            Ok(hits) if hits.is_empty() => {
                ToolOutput::ok(format!("No matches for '{query}' in conversation history."))
            }
            Ok(hits) => {
                let mut lines = vec![format!("{} matches for '{query}':", hits.len())];
                lines.extend(hits.iter().map(hit_line));
                ToolOutput::ok(lines.join("\n"))
            }
            Err(e) => {
                tracing::warn!(error = %e, "history search failed");
                ToolOutput::error(format!("Error: history search failed: {e}"))
            }
        };
        finish(output, ctx)
    }
}
