//! A small Okapi BM25 index (k1 = 1.2, b = 0.75) over short documents, used by
//! `tool_search` (names + descriptions). Deterministic: equal scores rank by document order.

use std::collections::HashMap;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Lowercase alphanumeric runs: `mcp__github__search_repos` → `mcp`, `github`, `search`,
/// `repos`.
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// An index over documents numbered in insertion order.
#[derive(Debug, Clone, Default)]
pub struct Bm25Index {
    /// Term frequencies per document.
    docs: Vec<HashMap<String, u32>>,
    lengths: Vec<usize>,
    /// Documents containing each term.
    doc_freq: HashMap<String, u32>,
    total_len: usize,
}

impl Bm25Index {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a document (its text already tokenized or not: it is tokenized here); returns
    /// its number.
    pub fn add(&mut self, text: &str) -> usize {
        let tokens = tokenize(text);
        let mut tf: HashMap<String, u32> = HashMap::new();
        for t in &tokens {
            *tf.entry(t.clone()).or_default() += 1;
        }
        for term in tf.keys() {
            *self.doc_freq.entry(term.clone()).or_default() += 1;
        }
        self.total_len += tokens.len();
        self.lengths.push(tokens.len());
        self.docs.push(tf);
        self.docs.len() - 1
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The BM25 score of document `doc` for the query terms.
    fn score(&self, doc: usize, terms: &[String]) -> f64 {
        let n = self.docs.len() as f64;
        let avg = if self.docs.is_empty() {
            1.0
        } else {
            (self.total_len as f64 / n).max(1.0)
        };
        let len = self.lengths[doc] as f64;
        terms
            .iter()
            .map(|term| {
                let tf = f64::from(self.docs[doc].get(term).copied().unwrap_or(0));
                if tf == 0.0 {
                    return 0.0;
                }
                let df = f64::from(self.doc_freq.get(term).copied().unwrap_or(0));
                let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg))
            })
            .sum()
    }

    /// Documents with a positive score, best first (ties by document number), at most
    /// `limit`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<(usize, f64)> {
        let mut terms = tokenize(query);
        terms.sort();
        terms.dedup();
        let mut hits: Vec<(usize, f64)> = (0..self.docs.len())
            .map(|d| (d, self.score(d, &terms)))
            .filter(|(_, s)| *s > 0.0)
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(limit);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_names_and_fold_case() {
        assert_eq!(
            tokenize("mcp__GitHub__search_repos: Find repos!"),
            ["mcp", "github", "search", "repos", "find", "repos"]
        );
        assert!(tokenize(" -- ").is_empty());
    }

    #[test]
    fn ranks_by_relevance_and_breaks_ties_by_order() {
        let mut idx = Bm25Index::new();
        idx.add("weather forecast for a city");
        idx.add("query a postgres database with sql");
        idx.add("run sql against sqlite database files");
        idx.add("weather forecast for a city");
        let hits = idx.search("postgres SQL", 10);
        assert_eq!(hits[0].0, 1, "{hits:?}");
        assert_eq!(hits[1].0, 2, "{hits:?}");
        assert_eq!(hits.len(), 2);
        let ties = idx.search("weather", 10);
        assert_eq!(
            ties.iter().map(|h| h.0).collect::<Vec<_>>(),
            [0, 3],
            "equal scores keep document order"
        );
        assert_eq!(idx.search("weather", 1).len(), 1);
        assert!(idx.search("nothing-matches-this", 5).is_empty());
        assert!(Bm25Index::new().search("x", 5).is_empty());
    }
}
