//! `tool_search`: the synthetic tool that loads deferred tools. BM25 over the deferred
//! tools' names and descriptions; the result holds the matches' full schemas (in the shape of
//! a tool-array entry) so the model can call them at once, and marks them loaded so they
//! join the tool array at the next turn boundary. It is never deferred itself, and never
//! finds aliases (they are not in its index). With a reranker on for retrieval
//! (`rerank_bm25`, [`crate::rerank`]) the BM25 candidates are re-ordered by it.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::TOOL_SEARCH;
use super::bm25::Bm25Index;
use crate::arguments::Args;
use crate::registry::FunctionSpec;
use crate::rerank::{RerankUse, Reranker, rerank_items};
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolMeta, ToolOutput};

/// BM25 candidates handed to a reranker (the pool it picks `max_results` from).
const RERANK_POOL: usize = 20;

/// Longest query accepted.
const MAX_QUERY_CHARS: usize = 500;

const DESCRIPTION: &str = "Search the deferred tools (listed by name in the system prompt) by \
name or description and load the best matches. The result contains their full schemas: you \
can call a loaded tool right away.";

/// The definition of `tool_search` (auto-approved; primary key `query`).
pub fn tool_search_definition() -> ToolDefinition {
    ToolDefinition {
        name: TOOL_SEARCH.to_owned(),
        description: DESCRIPTION.to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Words describing the tool you need, or its exact name."
                }
            },
            "required": ["query"]
        }),
        meta: ToolMeta {
            agent: false,
            task_agent: false,
            auto_approve: true,
            primary_key: Some("query".to_owned()),
        },
    }
}

/// The set of deferred tools a workstream has loaded. Shared by the workstream and its
/// `tool_search`; read once per turn when the tool array is frozen.
#[derive(Debug, Clone, Default)]
pub struct LoadedTools(Arc<Mutex<BTreeSet<String>>>);

impl LoadedTools {
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks a tool loaded; `true` when it was not yet.
    pub fn mark(&self, name: &str) -> bool {
        self.0.lock().insert(name.to_owned())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.lock().contains(name)
    }

    /// The loaded names, sorted (to persist with a session).
    pub fn names(&self) -> Vec<String> {
        self.0.lock().iter().cloned().collect()
    }

    /// Replaces the set (a resumed session).
    pub fn replace<S: Into<String>>(&self, names: impl IntoIterator<Item = S>) {
        *self.0.lock() = names.into_iter().map(Into::into).collect();
    }

    /// A copy of the set.
    pub fn snapshot(&self) -> BTreeSet<String> {
        self.0.lock().clone()
    }
}

/// One workstream's `tool_search`, bound to the deferred tools of its current turn.
pub struct ToolSearchTool {
    definition: ToolDefinition,
    tools: Vec<FunctionSpec>,
    index: Bm25Index,
    loaded: LoadedTools,
    max_results: usize,
}

impl std::fmt::Debug for ToolSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSearchTool")
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .field("max_results", &self.max_results)
            .finish()
    }
}

impl ToolSearchTool {
    /// A search over `deferred` (in the given order) that marks matches in `loaded`.
    pub fn new(deferred: Vec<FunctionSpec>, loaded: LoadedTools, max_results: usize) -> Self {
        let mut index = Bm25Index::new();
        for spec in &deferred {
            // The name counts twice: a query naming the tool should beat one that only
            // shares a word with its description.
            index.add(&format!("{} {} {}", spec.name, spec.name, spec.description));
        }
        Self {
            definition: tool_search_definition(),
            tools: deferred,
            index,
            loaded,
            max_results: max_results.max(1),
        }
    }

    /// The matching tools, best first: an exact name first, then BM25 hits.
    pub fn search(&self, query: &str) -> Vec<&FunctionSpec> {
        self.candidates(query, self.max_results)
            .into_iter()
            .map(|i| &self.tools[i])
            .collect()
    }

    /// [`search`](Self::search) with a reranker on for tool search: the BM25 hits of a
    /// larger pool re-ordered by it (an exact name stays first), then cut.
    pub async fn search_reranked(
        &self,
        query: &str,
        reranker: Option<&dyn Reranker>,
    ) -> Vec<&FunctionSpec> {
        if !reranker.is_some_and(|r| r.active(RerankUse::ToolSearch)) {
            return self.search(query);
        }
        let mut pool = self.candidates(query, self.max_results.max(RERANK_POOL));
        let exact = (pool
            .first()
            .is_some_and(|&i| self.tools[i].name == query.trim()))
        .then(|| pool.remove(0));
        let ranked = rerank_items(reranker, RerankUse::ToolSearch, query, pool, |&i| {
            format!("{}: {}", self.tools[i].name, self.tools[i].description)
        })
        .await;
        exact
            .into_iter()
            .chain(ranked)
            .take(self.max_results)
            .map(|i| &self.tools[i])
            .collect()
    }

    /// Indexes of the matches, best first (an exact name, then BM25), at most `limit`.
    fn candidates(&self, query: &str, limit: usize) -> Vec<usize> {
        let query = query.trim();
        let mut out: Vec<usize> = Vec::new();
        if let Some(i) = self.tools.iter().position(|t| t.name == query) {
            out.push(i);
        }
        for (i, _) in self.index.search(query, limit + 1) {
            if !out.contains(&i) {
                out.push(i);
            }
        }
        out.truncate(limit);
        out
    }

    /// Names of the tools this search can load.
    pub fn searchable(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.clone()).collect()
    }
}

#[async_trait]
impl Tool for ToolSearchTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let query = a.non_blank("query")?;
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(format!(
                "Error: query is longer than {MAX_QUERY_CHARS} characters"
            ));
        }
        Ok(Prepared {
            args: json!({"query": query.trim()}),
            header: format!("\u{2699} tool_search: {}", query.trim()),
            preview: String::new(),
            needs_approval: false,
            approval_label: TOOL_SEARCH.to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let query = prepared.args["query"].as_str().unwrap_or_default();
        let found = self.search_reranked(query, ctx.reranker.as_deref()).await;
        if found.is_empty() {
            return ToolOutput::ok(if self.tools.is_empty() {
                "No tools are deferred: every available tool is already in your tool list."
                    .to_owned()
            } else {
                format!("No deferred tools match '{query}'.")
            });
        }
        for spec in &found {
            self.loaded.mark(&spec.name);
        }
        let schemas: Vec<Value> = found
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "parameters": s.parameters}))
            .collect();
        let body = serde_json::to_string_pretty(&schemas).unwrap_or_else(|_| "[]".to_owned());
        ToolOutput::ok(format!(
            "Loaded {} tool(s). You can call them now with these schemas; they join your tool \
             list from the next turn.\n{body}",
            found.len()
        ))
    }
}
