//! `web_search`: a query to the configured [`SearchBackend`] (SearxNG built in, or the node's
//! `mcp:server:tool` bridge), answered as a numbered list of title, URL and snippet. With a
//! reranker on for web search ([`crate::rerank`]) the backend is asked for a pool of
//! [`MAX_RESULTS`] hits, which the reranker re-orders before the top `max_results` are shown.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::rerank::{RerankUse, rerank_items};
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};
use crate::web::WebOptions;
use crate::web::search::{
    CATEGORIES, SearchBackend, SearchBackendSpec, SearchHit, SearchRequest, SearxngBackend,
};

const DEFAULT_RESULTS: i64 = 5;
const MAX_RESULTS: i64 = 20;
const MAX_QUERY_CHARS: usize = 1000;
/// Results asked of the backend when a reranker re-orders them (the pool it picks from).
const RERANK_POOL: usize = MAX_RESULTS as usize;

/// The `web_search` tool.
#[derive(Clone)]
pub struct WebSearchTool {
    definition: ToolDefinition,
    /// The backend, or why there is none (reported on every call).
    backend: Result<Arc<dyn SearchBackend>, String>,
}

impl std::fmt::Debug for WebSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match &self.backend {
            Ok(b) => b.describe(),
            Err(e) => format!("none: {e}"),
        };
        f.debug_struct("WebSearchTool")
            .field("backend", &backend)
            .finish_non_exhaustive()
    }
}

/// Chooses the backend the options describe.
fn backend(options: &WebOptions) -> Result<Arc<dyn SearchBackend>, String> {
    if let Some(custom) = &options.search {
        return Ok(custom.clone());
    }
    let spec = SearchBackendSpec::parse(options.search_backend.as_deref().unwrap_or(""))?;
    match spec {
        SearchBackendSpec::Mcp { server, tool } => Err(format!(
            "web_search_backend is mcp:{server}:{tool}, but no MCP search backend is connected"
        )),
        SearchBackendSpec::Searxng => match options
            .searxng_url
            .as_deref()
            .filter(|u| !u.trim().is_empty())
        {
            Some(url) => Ok(Arc::new(SearxngBackend::new(url, options.search_timeout)?)),
            None => Err(
                "no web search backend is configured: set searxng_url in [tools] of \
                         config.toml (or $TURNSTONE_SEARXNG_URL), or web_search_backend = \
                         \"mcp:server:tool\""
                    .to_owned(),
            ),
        },
    }
}

impl WebSearchTool {
    pub fn new(options: &WebOptions) -> Result<Self, RegistryError> {
        Ok(Self {
            definition: schema_definition(
                "web_search",
                include_str!("../../schemas/web_search.json"),
            )?,
            backend: backend(options),
        })
    }
}

#[async_trait]
impl Tool for WebSearchTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let query = a.non_blank("query")?.trim();
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(format!(
                "Error: query is longer than {MAX_QUERY_CHARS} characters"
            ));
        }
        let max = a.opt_int("max_results")?.unwrap_or(DEFAULT_RESULTS);
        if max < 1 {
            return Err(format!("Error: max_results must be 1 or more, got {max}"));
        }
        let max = max.min(MAX_RESULTS);
        // `categories` is accepted as a spelling of `category` (SearxNG's own parameter name).
        let category = match a.opt_string("category")? {
            Some(c) => Some(c),
            None => a.opt_string("categories")?,
        };
        let category = category
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| "general".to_owned());
        if !CATEGORIES.contains(&category.as_str()) {
            return Err(format!(
                "Error: unknown category '{category}'; use one of: {}",
                CATEGORIES.join(", ")
            ));
        }
        let summary = if category == "general" {
            query.to_owned()
        } else {
            format!("{query} [{category}]")
        };
        Ok(Prepared {
            args: json!({ "query": query, "max_results": max, "category": category }),
            header: header("web_search", &summary),
            preview: String::new(),
            needs_approval: false,
            approval_label: "web_search".to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let request = SearchRequest {
            query: prepared.text("query").unwrap_or("").to_owned(),
            category: prepared.text("category").unwrap_or("general").to_owned(),
            max_results: prepared.count("max_results").unwrap_or(5),
        };
        let backend = match &self.backend {
            Ok(b) => b,
            Err(e) => return ToolOutput::error(format!("Error: {e}")),
        };
        // With a reranker the backend is asked for a larger pool, re-ordered, then cut.
        let reranker = ctx.reranker.as_deref();
        let pool = SearchRequest {
            max_results: if reranker.is_some_and(|r| r.active(RerankUse::WebSearch)) {
                request.max_results.max(RERANK_POOL)
            } else {
                request.max_results
            },
            ..request.clone()
        };
        let output = match backend.search(&pool).await {
            Ok(hits) => {
                let hits =
                    rerank_items(reranker, RerankUse::WebSearch, &request.query, hits, |h| {
                        format!("{}\n{}", h.title, h.snippet)
                    })
                    .await;
                ToolOutput::ok(render(&request, &hits))
            }
            Err(e) => ToolOutput::error(format!("Error: web search failed: {e}")),
        };
        finish(output, ctx)
    }
}

/// The numbered result list.
fn render(request: &SearchRequest, hits: &[SearchHit]) -> String {
    if hits.is_empty() {
        return format!("No results for \"{}\".", request.query);
    }
    let mut out = format!("Results for \"{}\"", request.query);
    if request.category != "general" {
        out.push_str(&format!(" (category: {})", request.category));
    }
    out.push_str(":\n");
    for (i, hit) in hits.iter().take(request.max_results).enumerate() {
        if hit.url.is_empty() {
            // A text answer without a link (an MCP backend's plain text): shown whole.
            let head = if hit.title.is_empty() {
                String::new()
            } else {
                format!("{}\n   ", hit.title)
            };
            out.push_str(&format!("\n{}. {head}{}\n", i + 1, hit.snippet.trim()));
            continue;
        }
        let title = if hit.title.is_empty() {
            "(untitled)"
        } else {
            &hit.title
        };
        out.push_str(&format!("\n{}. {title}\n   {}\n", i + 1, hit.url));
        if !hit.snippet.is_empty() {
            let snippet: String = hit.snippet.chars().take(500).collect();
            out.push_str(&format!("   {}\n", snippet.replace('\n', " ")));
        }
    }
    out.trim_end().to_owned()
}
