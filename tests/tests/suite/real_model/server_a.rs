//! Server A, `llama-cpp-python[server]`: it streams no usage chunk and does not tell its
//! context window, so the node estimates the usage (and says so) and takes the window from
//! its configuration.

use super::{
    ALIAS, Events, Kind, Llama, assert_streamed, content, health, last_status, new_workstream,
    node_on, turn, types,
};

#[tokio::test]
async fn server_a_model_is_detected_text_streams_and_estimated_usage_moves_the_gauge() {
    let llama = Llama::start(Kind::A).await;
    // No --model: the endpoint's first model. No /props: the configured window.
    let node = node_on(&llama, &["--context-window", "2048"]).await;
    let h = health(&node).await;
    assert_eq!(h["model"], ALIAS, "{h}");
    assert_eq!(h["status"], "ok", "{h}");

    let ws = new_workstream(&node, false).await;
    let mut events = Events::open(&node, &ws).await;
    let first = turn(&node, &mut events, &ws, "Say hello in five words.").await;
    assert_streamed(&first, &llama);
    let status = last_status(&first);
    assert_eq!(status["usage_estimated"], true, "{status}");
    assert_eq!(status["context_window"], 2048, "{status}");
    let prompt = status["prompt_tokens"].as_u64().unwrap();
    let completion = status["completion_tokens"].as_u64().unwrap();
    assert!(prompt > 5, "{status}");
    assert!(completion > 0, "{status}");
    let pct = status["pct"].as_f64().unwrap();
    let expected = ((prompt + completion) as f64 / 2048.0 * 1000.0).round() / 10.0;
    assert!(pct > 0.0 && (pct - expected).abs() < 0.05, "{status}");

    // The conversation grew: so does the gauge.
    let second = turn(&node, &mut events, &ws, "Now say goodbye.").await;
    assert_streamed(&second, &llama);
    let after = last_status(&second);
    assert!(
        after["prompt_tokens"].as_u64().unwrap() > prompt,
        "first {status}, then {after}"
    );
    assert!(
        after["pct"].as_f64().unwrap() > pct,
        "first {status}, then {after}"
    );
}

#[tokio::test]
async fn server_a_estimated_usage_lets_auto_compaction_fire() {
    let llama = Llama::start(Kind::A).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    // The original's home of the compaction keys; a small window and threshold so that one
    // short turn crosses it.
    std::fs::write(
        &config,
        "[session]\nauto_compact_pct = 0.1\ncompact_max_tokens = 32\n",
    )
    .unwrap();
    let node = node_on(
        &llama,
        &[
            "--context-window",
            "512",
            "--config",
            config.to_str().unwrap(),
        ],
    )
    .await;
    let ws = new_workstream(&node, false).await;
    let mut events = Events::open(&node, &ws).await;
    // ≈ 100 estimated tokens: past 10 % of 512.
    let message = format!("{}Name three colours.", "Red is a colour. ".repeat(22));
    let seen = turn(&node, &mut events, &ws, &message).await;
    assert!(!content(&seen).trim().is_empty(), "{}", types(&seen));
    let infos: Vec<&str> = seen
        .iter()
        .filter(|e| e["type"] == "info")
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(
        infos.iter().any(|m| m.contains("Auto-compacting")),
        "no auto-compaction: {infos:?} ({})\nserver log:\n{}",
        types(&seen),
        llama.log()
    );
    assert!(
        infos.iter().any(|m| m.starts_with("[compacted: ~")),
        "compaction did not finish: {infos:?}\nserver log:\n{}",
        llama.log()
    );
    // A second status after the compaction reports the compacted conversation (here the
    // summary plus the quoted last message), still an estimate.
    let statuses: Vec<&serde_json::Value> = seen.iter().filter(|e| e["type"] == "status").collect();
    assert_eq!(statuses.len(), 2, "{}", types(&seen));
    assert!(
        statuses.iter().all(|s| s["usage_estimated"] == true),
        "{statuses:?}"
    );
}
