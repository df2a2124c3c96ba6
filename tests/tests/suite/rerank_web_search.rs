//! The reranker on a real node: `web_search` results from the SearxNG stand-in re-ordered by
//! the fake rerank server — from `[rerank]` of config.toml, and from a stored model
//! definition selected as the Reranker role (`model.reranker`, on SQLite and PostgreSQL);
//! a failing reranker leaves the backend's order and is counted in `/metrics`.

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
    let metrics = node.metrics().await;
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

/// A stored definition for the Reranker role, as the console pushes it.
fn reranker_definition(base_url: &str) -> serde_json::Value {
    json!({
        "definition_id": "def-rr", "alias": "stored-rr", "model": "stored-reranker",
        "provider": "openai", "base_url": base_url, "api_key": "rk-stored",
        "context_window": 512, "enabled": true,
        "capabilities": r#"{"supports_rerank": true, "rerank_timeout": 5}"#,
    })
}

/// The role as a pushed setting row.
fn role(alias: &str) -> serde_json::Value {
    json!([{"key": "model.reranker", "value": alias, "node_id": ""}])
}

/// A node without `[rerank]`, on `db_args` (its SQLite file unless PostgreSQL is named):
/// the definition and the Reranker role stored (the console's model-reload push) re-order
/// web_search; a reranker definition is no chat alias; the role cleared by a config-reload
/// gives the native order; an endpoint that is down gives the native order silently.
async fn the_stored_role_reranks(name: &str, db_args: Vec<String>) {
    let (searxng, _seen) = fake_searxng().await;
    let reranker = FakeRerank::start(RerankShape::Cohere).await;
    let mut args = vec!["--skip-permissions".to_string()];
    args.extend(db_args);
    let node =
        NodeProc::start_full(name, vec![("TURNSTONE_SEARXNG_URL".into(), searxng)], args).await;
    let native = ["Turnstone from the fake SearxNG", "Second hit"];
    let reranked = ["Second hit", "Turnstone from the fake SearxNG"];
    assert_eq!(
        search_titles(&node, "before", "second hit more").await,
        native
    );
    assert_eq!(reranker.request_count(), 0, "no role: no reranker");

    let (status, body) = node
        .post(
            "/v1/api/_internal/model-reload",
            json!({
                "definitions": [reranker_definition(&format!("{}/rerank", reranker.base_url()))],
                "settings": role("stored-rr"),
            }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !body["aliases"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "stored-rr"),
        "a reranker is no chat alias: {body}"
    );
    assert_eq!(
        search_titles(&node, "selected", "second hit more").await,
        reranked
    );
    let sent = reranker.requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["model"], "stored-reranker");
    assert_eq!(
        reranker.authorizations()[0].as_deref(),
        Some("Bearer rk-stored")
    );

    // A chat role cannot name it: the reload is refused, the registry and reranker stay.
    let (status, body) = node
        .post(
            "/v1/api/_internal/model-reload",
            json!({"settings": [
                {"key": "model.reranker", "value": "stored-rr", "node_id": ""},
                {"key": "model.default", "value": "stored-rr", "node_id": ""},
            ]}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .contains("not a chat model"),
        "{body}"
    );

    // Cleared (the console's config push without the row): the native order, no request.
    let (status, body) = node
        .post("/v1/api/_internal/config-reload", json!({"settings": []}))
        .await;
    assert_eq!(status, 200, "{body}");
    let before = reranker.request_count();
    assert_eq!(
        search_titles(&node, "cleared", "second hit more").await,
        native
    );
    assert_eq!(reranker.request_count(), before);

    // Selected again, then the endpoint goes down: the native order, the search succeeds.
    let (status, body) = node
        .post(
            "/v1/api/_internal/config-reload",
            json!({"settings": role("stored-rr")}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        search_titles(&node, "again", "second hit more").await,
        reranked
    );
    drop(reranker);
    assert_eq!(
        search_titles(&node, "down", "second hit more").await,
        native
    );
    let metrics = node.metrics().await;
    assert!(
        metrics.contains("turnstone_rerank_fallbacks_total{use=\"web_search\""),
        "the failure is counted: {metrics}"
    );
    assert!(!metrics.contains("rk-stored"));
}

#[tokio::test]
async fn the_stored_reranker_role_reranks_web_search_on_sqlite() {
    the_stored_role_reranks("rerank-role-sqlite", Vec::new()).await;
}

#[tokio::test]
async fn the_stored_reranker_role_reranks_web_search_on_postgresql() {
    let db = turnstone_testkit::db::PgDatabase::create().await;
    the_stored_role_reranks(
        "rerank-role-pg",
        vec![
            "--db-backend".into(),
            "postgresql".into(),
            "--db-url".into(),
            db.url.clone(),
        ],
    )
    .await;
}
