//! The reranker seam: `web_search`, `memory` (search), `tool_search` and `skill` (search)
//! hand their candidates' texts to the optional [`Reranker`] of their [`ToolContext`] and
//! take the order it gives; when there is none, or it declines, they keep their native
//! order (the backend's for web search, BM25's or full-text search's for the others).
//!
//! The node implements the trait over a Cohere/Jina-compatible `/rerank` endpoint: it decides
//! per [`RerankUse`] whether reranking is on (`rerank_web_search`, `rerank_bm25`), applies
//! the relevance threshold, and turns every failure into "declined" (logged at debug and
//! counted), so a reranker never makes a tool fail.
//!
//! [`ToolContext`]: crate::ToolContext

use async_trait::async_trait;

/// What is being ranked: which setting applies, and a bounded label for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RerankUse {
    /// `web_search` results (`rerank_web_search`).
    WebSearch,
    /// `memory` search results (`rerank_bm25`).
    Memory,
    /// `tool_search` BM25 candidates (`rerank_bm25`).
    ToolSearch,
    /// `skill` search BM25 candidates (`rerank_bm25`).
    Skill,
}

impl RerankUse {
    pub const ALL: [Self; 4] = [Self::WebSearch, Self::Memory, Self::ToolSearch, Self::Skill];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::WebSearch => "web_search",
            Self::Memory => "memory",
            Self::ToolSearch => "tool_search",
            Self::Skill => "skill",
        }
    }

    /// Whether this is BM25/full-text retrieval (governed by `rerank_bm25`).
    pub fn is_retrieval(self) -> bool {
        !matches!(self, Self::WebSearch)
    }
}

/// Re-orders candidate texts by relevance to a query.
#[async_trait]
pub trait Reranker: std::fmt::Debug + Send + Sync {
    /// Whether reranking is on for `purpose` now (a caller may then fetch a larger pool).
    fn active(&self, purpose: RerankUse) -> bool;

    /// The indexes of `documents`, most relevant first, without those below the threshold
    /// of `purpose`; `None`: keep the native order (off for this use, or the endpoint failed).
    async fn rank(
        &self,
        purpose: RerankUse,
        query: &str,
        documents: &[String],
    ) -> Option<Vec<usize>>;
}

/// `items` in the reranker's order (see [`Reranker::rank`]), unchanged without a reranker or
/// when it declines. `text` is what the reranker reads of an item.
pub async fn rerank_items<T>(
    reranker: Option<&dyn Reranker>,
    purpose: RerankUse,
    query: &str,
    items: Vec<T>,
    text: impl Fn(&T) -> String,
) -> Vec<T> {
    let Some(reranker) = reranker.filter(|r| r.active(purpose)) else {
        return items;
    };
    if items.is_empty() || query.trim().is_empty() {
        return items;
    }
    let documents: Vec<String> = items.iter().map(text).collect();
    let Some(order) = reranker.rank(purpose, query, &documents).await else {
        return items;
    };
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|i| slots.get_mut(i).and_then(Option::take))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Reverse(Option<Vec<usize>>);

    #[async_trait]
    impl Reranker for Reverse {
        fn active(&self, purpose: RerankUse) -> bool {
            purpose != RerankUse::Skill
        }
        async fn rank(&self, _: RerankUse, _: &str, _: &[String]) -> Option<Vec<usize>> {
            self.0.clone()
        }
    }

    #[tokio::test]
    async fn items_follow_the_ranking_or_stay() {
        let items = vec!["a", "b", "c"];
        let text = |s: &&str| s.to_string();
        let r = Reverse(Some(vec![2, 0, 7, 0]));
        let use_ = RerankUse::Memory;
        assert_eq!(
            rerank_items(Some(&r), use_, "q", items.clone(), text).await,
            ["c", "a"]
        );
        let declines = Reverse(None);
        assert_eq!(
            rerank_items(Some(&declines), use_, "q", items.clone(), text).await,
            items
        );
        assert_eq!(
            rerank_items(Some(&r), RerankUse::Skill, "q", items.clone(), text).await,
            items
        );
        assert_eq!(
            rerank_items(None, use_, "q", items.clone(), text).await,
            items
        );
    }
}
