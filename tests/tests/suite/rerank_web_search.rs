//! `[rerank]` on a real node: `web_search` results from the SearxNG stand-in re-ordered by
//! the fake rerank server; a failing reranker leaves the backend's order and is counted in
//! `/metrics`.

use serde_json::json;
use turnstone_testkit::{FakeRerank, RerankFault, RerankShape};

use super::cluster::harness::NodeProc;
use super::searxng_env::fake_searxng;
use super::security::node_events::call_output;

/// The titles of `web_search`'s numbered result lines, in order.
async fn search_titles(node: &NodeProc, ws_name: &str, query: &str) -> Vec<String> {
    call_output(
        node,
        ws_name,
        "web_search",
        &json!({"query": query, "max_results": 2}),
    )
    .await
    .lines()
    .filter_map(|l| l.split_once(". ").filter(|(n, _)| n.parse::<u32>().is_ok()))
    .map(|(_, title)| title.to_string())
    .collect()
}

#[tokio::test]
async fn web_search_results_are_reranked_and_fall_back_when_the_reranker_fails() {
    let (searxng, _seen) = fake_searxng().await;
    let reranker = FakeRerank::start(RerankShape::Jina).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[rerank]\nbase_url = \"{}/v1\"\nmodel = \"fake-reranker\"\ntimeout = 5.0\n",
            reranker.base_url()
        ),
    )
    .unwrap();
    let node = NodeProc::start_full(
        "rerank-web",
        vec![
            ("TURNSTONE_SEARXNG_URL".into(), searxng),
            ("TURNSTONE_RERANK_API_KEY".into(), "rk-e2e".into()),
        ],
        vec![
            "--skip-permissions".into(),
            "--config".into(),
            config.display().to_string(),
        ],
    )
    .await;
    // The backend answers "Turnstone from the fake SearxNG" first; the query matches the
    // second hit's words only.
    let titles = search_titles(&node, "reranked", "second hit more").await;
    assert_eq!(titles, ["Second hit", "Turnstone from the fake SearxNG"]);
    let sent = reranker.requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["query"], "second hit more");
    assert_eq!(sent[0]["model"], "fake-reranker");
    assert_eq!(
        reranker.authorizations()[0].as_deref(),
        Some("Bearer rk-e2e")
    );

    reranker.set_fault(RerankFault::Status(503));
    let titles = search_titles(&node, "fallback", "second hit more").await;
    assert_eq!(titles, ["Turnstone from the fake SearxNG", "Second hit"]);
    let metrics = reqwest::get(format!("{}/metrics", node.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .contains("turnstone_rerank_fallbacks_total{use=\"web_search\",reason=\"status\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("turnstone_rerank_requests_total{use=\"web_search\"} 1"),
        "{metrics}"
    );
    assert!(!metrics.contains("rk-e2e"));
}
