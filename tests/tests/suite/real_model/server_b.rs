//! Server B, llama.cpp's `llama-server` (`-c 8192 -np 2`): real usage, the context window
//! from `/props`, cancellation, a restart mid-turn and two parallel slots.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    ALIAS, Events, Kind, Llama, TURN_DEADLINE, assert_streamed, content, health, last_status,
    new_workstream, node_on, send, turn, types,
};

/// The per-request window `/props` reports (what the node must use).
async fn props_window(llama: &Llama) -> u64 {
    let props: Value = reqwest::get(format!("{}/props", llama.root_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    props["default_generation_settings"]["n_ctx"]
        .as_u64()
        .or(props["n_ctx"].as_u64())
        .unwrap_or_else(|| panic!("no n_ctx in /props: {props}"))
}

#[tokio::test]
async fn server_b_model_is_detected_usage_is_real_and_the_window_comes_from_props() {
    let llama = Llama::start(Kind::B).await;
    let node = node_on(&llama, &[]).await;
    let h = health(&node).await;
    assert_eq!(h["model"], ALIAS, "{h}");

    // With the node's tools (the GGUF's own chat template leaves them out of the prompt).
    let ws = new_workstream(&node, true).await;
    let mut events = Events::open(&node, &ws).await;
    let seen = turn(&node, &mut events, &ws, "Say hello in five words.").await;
    assert_streamed(&seen, &llama);
    let status = last_status(&seen);
    // The server's own counts: no estimate marker.
    assert!(status.get("usage_estimated").is_none(), "{status}");
    assert!(status["prompt_tokens"].as_u64().unwrap() > 10, "{status}");
    assert!(
        status["completion_tokens"].as_u64().unwrap() > 0,
        "{status}"
    );
    let window = props_window(&llama).await;
    assert!(window > 0 && window <= 8192, "{window}");
    assert_eq!(status["context_window"], window, "{status}");
    assert!(status["pct"].as_f64().unwrap() > 0.0, "{status}");
}

#[tokio::test]
async fn server_b_cancel_mid_stream_stops_the_turn_and_the_node_goes_on() {
    let llama = Llama::start(Kind::B).await;
    // Room for a long answer: the cancel must cut it, not its end.
    let node = node_on(&llama, &["--max-tokens", "300"]).await;
    let ws = new_workstream(&node, false).await;
    let mut events = Events::open(&node, &ws).await;
    send(
        &node,
        &ws,
        "Write a very long story about a dragon who learns to bake bread.",
    )
    .await;
    // Wait for streamed text, then cancel while it is still streaming.
    let mut before = Vec::new();
    loop {
        let e = events.next().await;
        let streaming = e["type"] == "content";
        assert_ne!(
            e["type"], "turn_complete",
            "ended before the cancel: {before:?}"
        );
        before.push(e);
        if streaming {
            break;
        }
    }
    let cancelled_at = Instant::now();
    let (status, body) = node.post("/v1/api/cancel", json!({"ws_id": ws})).await;
    assert_eq!(status, 200, "{body}");
    let rest = events.until("turn_complete").await;
    let took = cancelled_at.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "the turn took {took:?} to end after the cancel"
    );
    assert!(
        rest.iter()
            .any(|e| e["type"] == "info" && e["message"] == "[Generation cancelled]"),
        "{}",
        types(&rest)
    );
    assert!(
        !rest.iter().any(|e| e["type"] == "error"),
        "the stream ran to its limit instead: {}",
        types(&rest)
    );
    assert!(!content(&before).is_empty());

    // The server stops generating for the closed connection: its slots go idle.
    let http = reqwest::Client::new();
    let deadline = Instant::now() + TURN_DEADLINE;
    loop {
        let slots: Value = http
            .get(format!("{}/slots", llama.root_url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let busy = slots
            .as_array()
            .map(|s| s.iter().filter(|s| s["is_processing"] == true).count())
            .unwrap_or_else(|| panic!("unexpected /slots answer: {slots}"));
        if busy == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server kept generating after the cancel: {slots}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The workstream takes the next message.
    let next = turn(&node, &mut events, &ws, "Say hi.").await;
    assert_streamed(&next, &llama);
}

#[tokio::test]
async fn server_b_restarting_before_the_first_byte_is_retried_and_the_turn_completes() {
    let mut llama = Llama::start(Kind::B).await;
    let node = node_on(&llama, &[]).await;
    let ws = new_workstream(&node, false).await;
    let mut events = Events::open(&node, &ws).await;
    // The server goes away; the request meets a closed port.
    llama.stop().await;
    send(&node, &ws, "Say hello in five words.").await;
    let mut seen = Vec::new();
    loop {
        let e = events.next().await;
        let retrying = e["type"] == "info"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains("Retrying"));
        assert_ne!(e["type"], "turn_complete", "no retry: {}", types(&seen));
        seen.push(e);
        if retrying {
            break;
        }
    }
    // Back on the same port while the node waits to retry (1 s, 2 s, 4 s).
    llama.spawn().await;
    let rest = events.until("turn_complete").await;
    assert_streamed(&rest, &llama);
    let end = rest.last().unwrap();
    assert_eq!(end["state"], "idle", "{end}");
    assert_eq!(health(&node).await["status"], "ok");
}

#[tokio::test]
async fn server_b_two_workstreams_stream_in_parallel_slots() {
    let llama = Llama::start(Kind::B).await;
    let node = node_on(&llama, &["--max-tokens", "64"]).await;
    let (a, b) = (
        new_workstream(&node, false).await,
        new_workstream(&node, false).await,
    );
    let mut ea = Events::open(&node, &a).await;
    let mut eb = Events::open(&node, &b).await;
    send(&node, &a, "Count slowly from one to twenty in words.").await;
    send(&node, &b, "List the days of the week, one per line.").await;

    // When each stream's first and last content delta arrived.
    async fn span(events: &mut Events) -> (Instant, Instant, Vec<Value>) {
        let mut seen = Vec::new();
        let (mut first, mut last) = (None, None);
        loop {
            let (at, e) = events.next_timed().await;
            if e["type"] == "content" {
                first.get_or_insert(at);
                last = Some(at);
            }
            let done = e["type"] == "turn_complete";
            seen.push(e);
            if done {
                let first = first.unwrap_or_else(|| panic!("no text: {}", types(&seen)));
                return (first, last.unwrap_or(first), seen);
            }
        }
    }
    let ((a_first, a_last, a_seen), (b_first, b_last, b_seen)) =
        tokio::join!(span(&mut ea), span(&mut eb));
    assert_streamed(&a_seen, &llama);
    assert_streamed(&b_seen, &llama);
    // Both streams were producing text at the same time: each began before the other ended.
    assert!(
        a_first < b_last && b_first < a_last,
        "the streams did not overlap: a {a_first:?}..{a_last:?}, b {b_first:?}..{b_last:?}"
    );
}
