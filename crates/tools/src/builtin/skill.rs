//! `skill`: find skills (`search`, BM25 over name, description, tags and category, the same
//! index `tool_search` uses) and activate one on the calling workstream (`load`, through
//! [`SkillBackend::activate`]). `load` needs approval (it changes how the session behaves);
//! `search` does not. Not available to sub-agents.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::backends::{SkillBackend, SkillSummary};
use crate::error::RegistryError;
use crate::rerank::{RerankUse, rerank_items};
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};
use crate::toolset::bm25::Bm25Index;

/// Most results of one search.
pub const MAX_RESULTS: usize = 10;
/// BM25 hits handed to a reranker (the pool it picks [`MAX_RESULTS`] from).
const RERANK_POOL: usize = 30;
/// How many candidates the backend is asked for before ranking.
const CANDIDATES: usize = 500;

/// The `skill` tool.
pub struct SkillTool {
    definition: ToolDefinition,
    backend: Arc<dyn SkillBackend>,
}

impl std::fmt::Debug for SkillTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillTool").finish_non_exhaustive()
    }
}

impl SkillTool {
    pub fn new(backend: Arc<dyn SkillBackend>) -> Result<Self, RegistryError> {
        Ok(Self {
            definition: schema_definition("skill", include_str!("../../schemas/skill.json"))?,
            backend,
        })
    }
}

/// The candidates ranked for `query` by BM25 over name, description, tags and category
/// (ties keep the backend's order), at most `MAX_RESULTS`. Without query words: the
/// first `MAX_RESULTS` candidates.
pub fn rank_skills(query: &str, candidates: Vec<SkillSummary>) -> Vec<SkillSummary> {
    rank_skills_top(query, candidates, MAX_RESULTS)
}

/// [`rank_skills`] keeping at most `limit`.
fn rank_skills_top(query: &str, candidates: Vec<SkillSummary>, limit: usize) -> Vec<SkillSummary> {
    if crate::toolset::bm25::tokenize(query).is_empty() {
        return candidates.into_iter().take(limit).collect();
    }
    let mut index = Bm25Index::new();
    for s in &candidates {
        index.add(&format!(
            "{} {} {} {}",
            s.name,
            s.description,
            s.tags.join(" "),
            s.category
        ));
    }
    let mut slots: Vec<Option<SkillSummary>> = candidates.into_iter().map(Some).collect();
    index
        .search(query, limit)
        .into_iter()
        .filter_map(|(doc, _)| slots.get_mut(doc).and_then(Option::take))
        .collect()
}

/// [`rank_skills`], or with a reranker on for retrieval: a larger BM25 pool re-ordered by
/// it, then cut to [`MAX_RESULTS`].
async fn rerank_skills(
    query: &str,
    candidates: Vec<SkillSummary>,
    ctx: &ToolContext,
) -> Vec<SkillSummary> {
    let reranker = ctx.reranker.as_deref();
    if !reranker.is_some_and(|r| r.active(RerankUse::Skill)) {
        return rank_skills(query, candidates);
    }
    let pool = rank_skills_top(query, candidates, RERANK_POOL);
    let mut ranked = rerank_items(reranker, RerankUse::Skill, query, pool, |s| {
        format!("{}: {} ({})", s.name, s.description, s.tags.join(", "))
    })
    .await;
    ranked.truncate(MAX_RESULTS);
    ranked
}

fn result_line(s: &SkillSummary) -> String {
    let category = if s.category.is_empty() {
        String::new()
    } else {
        format!(" ({})", s.category)
    };
    format!(
        "- {}{category}: {} [risk: {}, activation: {}]",
        s.name,
        s.description,
        s.risk(),
        s.activation
    )
}

#[async_trait]
impl Tool for SkillTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let action = a.non_blank("action")?.trim().to_lowercase();
        match action.as_str() {
            "load" => {
                let name = a.non_blank("name")?.trim();
                if ctx.ws_id.is_empty() {
                    return Err(
                        "Error: a skill can only be loaded in a workstream, and this call has none"
                            .into(),
                    );
                }
                Ok(Prepared {
                    args: json!({"action": "load", "name": name}),
                    header: header("skill", &format!("load {name}")),
                    preview: format!("Activate skill '{name}' (replaces the active skill)"),
                    needs_approval: true,
                    approval_label: "skill".to_owned(),
                })
            }
            "search" => {
                let query = a.opt_string("query")?.map(str::trim).unwrap_or("");
                Ok(Prepared {
                    args: json!({"action": "search", "query": query}),
                    header: header("skill", &format!("search {query}")),
                    preview: String::new(),
                    needs_approval: false,
                    approval_label: "skill".to_owned(),
                })
            }
            other => Err(format!(
                "Error: invalid action '{other}'; must be one of: load, search"
            )),
        }
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let text = |key: &str| prepared.text(key).unwrap_or("");
        let output = match text("action") {
            "load" => match self.backend.activate(&ctx.ws_id, text("name")).await {
                Ok(skill) => {
                    let mut out = format!(
                        "Skill '{}' loaded: {}\nRisk level: {}",
                        skill.name,
                        if skill.description.is_empty() {
                            "(no description)"
                        } else {
                            &skill.description
                        },
                        skill.risk()
                    );
                    if skill.is_risky() {
                        out.push_str(&format!(
                            "\nWarning: the security scan rated this skill {} risk; check what \
                             its instructions ask before acting on them.",
                            skill.risk_level.to_lowercase()
                        ));
                    }
                    ToolOutput::ok(out)
                }
                Err(e) => ToolOutput::error(format!("Error: {e}")),
            },
            "search" => {
                let query = text("query");
                match self.backend.candidates(query, CANDIDATES).await {
                    Err(e) => {
                        tracing::warn!(error = %e, "skill search failed");
                        ToolOutput::error(format!("Error: skill search failed: {e}"))
                    }
                    Ok(candidates) => {
                        let ranked = rerank_skills(query, candidates, ctx).await;
                        if ranked.is_empty() {
                            ToolOutput::ok(if query.is_empty() {
                                "No skills are available.".to_owned()
                            } else {
                                format!("No skills match '{query}'.")
                            })
                        } else {
                            let mut lines = vec![format!("{} skills:", ranked.len())];
                            lines.extend(ranked.iter().map(result_line));
                            ToolOutput::ok(lines.join("\n"))
                        }
                    }
                }
            }
            other => ToolOutput::error(format!("Error: invalid action '{other}'")),
        };
        finish(output, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, description: &str, tags: &[&str], category: &str) -> SkillSummary {
        SkillSummary {
            name: name.into(),
            description: description.into(),
            category: category.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            activation: "named".into(),
            risk_level: String::new(),
        }
    }

    #[test]
    fn ranks_by_bm25_over_name_description_tags_and_category() {
        let candidates = vec![
            skill("deploy", "Ship a release", &["ops"], "ops"),
            skill(
                "sql-expert",
                "Write SQL queries",
                &["database", "sql"],
                "data",
            ),
            skill("reviewer", "Review SQL migrations", &["review"], "code"),
        ];
        let names = |v: Vec<SkillSummary>| v.into_iter().map(|s| s.name).collect::<Vec<_>>();
        // `sql` appears three times in sql-expert's document, once in reviewer's.
        assert_eq!(
            names(rank_skills("sql", candidates.clone())),
            ["sql-expert", "reviewer"]
        );
        assert_eq!(names(rank_skills("ops", candidates.clone())), ["deploy"]);
        assert!(rank_skills("kubernetes", candidates.clone()).is_empty());
        // No words: the candidates in the backend's order.
        assert_eq!(
            names(rank_skills(" ", candidates)),
            ["deploy", "sql-expert", "reviewer"]
        );
        let many: Vec<SkillSummary> = (0..25)
            .map(|i| skill(&format!("s{i}"), "common", &[], ""))
            .collect();
        assert_eq!(rank_skills("common", many).len(), MAX_RESULTS);
    }
}
