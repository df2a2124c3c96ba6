#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]
//! Engine turn overhead with the zero-latency in-process scripted provider.
//!
//! `cargo bench -p turnstone-engine --bench turns` runs the full measurement; under
//! `cargo test` (no `--bench` argument) it runs a tiny smoke version so the bench never rots.
//!
//! Measures, in one run:
//! * baseline: draining the provider's stream directly (no engine) — turns/s;
//! * one workstream, sequential text turns — turns/s and ratio to the baseline;
//! * N concurrent workstreams, each doing text turns — aggregate turns/s;
//! * memory per idle workstream: RSS growth over M freshly created workstreams / M.
//!
//! Results and method are recorded in `docs/benchmarks.md`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use turnstone_engine::{
    CreateOptions, Engine, EngineConfig, Event, Item, Manager, ManagerConfig, SendOutcome,
    WorkstreamHandle,
};
use turnstone_llm::{ChatMessage, ChatRequest, CircuitBreaker, Provider, Resilient, RetryPolicy};
use turnstone_testkit::ScriptedProvider;
use turnstone_tools::ToolRegistry;

struct Sizes {
    baseline_turns: usize,
    sequential_turns: usize,
    concurrent_workstreams: usize,
    turns_per_workstream: usize,
    idle_workstreams: usize,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let sizes = if full {
        Sizes {
            baseline_turns: 20_000,
            sequential_turns: 20_000,
            concurrent_workstreams: 1_000,
            turns_per_workstream: 20,
            idle_workstreams: 10_000,
        }
    } else {
        Sizes {
            baseline_turns: 50,
            sequential_turns: 50,
            concurrent_workstreams: 20,
            turns_per_workstream: 2,
            idle_workstreams: 100,
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot build runtime: {e}");
            std::process::exit(1);
        }
    };
    rt.block_on(run(sizes, full));
}

async fn engine(max_workstreams: usize) -> (Arc<ScriptedProvider>, Manager) {
    let provider = Arc::new(ScriptedProvider::new().without_recording());
    let resilient = Resilient::new(
        provider.clone(),
        RetryPolicy::none(),
        Arc::new(CircuitBreaker::default()),
    );
    let config = EngineConfig {
        context_window: 32_768,
        ..EngineConfig::default()
    };
    let engine = Engine::new(
        resilient,
        Arc::new(ToolRegistry::with_builtins().expect("builtins")),
        config,
    )
    .await;
    let manager = Manager::new(
        engine,
        ManagerConfig {
            max_workstreams,
            idle_timeout: None,
            hibernate_after: None,
        },
    );
    (provider, manager)
}

/// One text turn; returns once the workstream is idle again.
async fn turn(ws: &WorkstreamHandle, text: &str) {
    let mut sub = ws.subscribe(None);
    match ws.send(text, None) {
        SendOutcome::Started { .. } => {}
        other => panic!("send refused: {other:?}"),
    }
    while let Some(item) = sub.next().await {
        if let Item::Event(env) = item
            && matches!(env.event, Event::TurnComplete { .. })
        {
            break;
        }
    }
}

fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

async fn run(sizes: Sizes, full: bool) {
    // Baseline: the provider alone, no engine.
    let provider = ScriptedProvider::new().without_recording();
    let request = ChatRequest {
        model: "fake".into(),
        messages: vec![ChatMessage::user("hello from the benchmark")].into(),
        ..ChatRequest::default()
    };
    let started = Instant::now();
    for _ in 0..sizes.baseline_turns {
        let mut stream = provider.stream(&request).await.expect("scripted stream");
        while stream.next().await.is_some() {}
    }
    let baseline = sizes.baseline_turns as f64 / started.elapsed().as_secs_f64();

    // One workstream, sequential turns. History is reset every 50 turns so the request
    // size stays that of a short conversation.
    let (_p, manager) = engine(10).await;
    let (ws, _) = manager.create(CreateOptions::default()).expect("create");
    let started = Instant::now();
    for n in 0..sizes.sequential_turns {
        if n % 50 == 0 {
            ws.replace_history(Vec::new());
        }
        turn(&ws, "hello from the benchmark").await;
    }
    let sequential = sizes.sequential_turns as f64 / started.elapsed().as_secs_f64();

    // Many workstreams at once.
    let (_p, manager) = engine(sizes.concurrent_workstreams + 1).await;
    let handles: Vec<WorkstreamHandle> = (0..sizes.concurrent_workstreams)
        .map(|_| manager.create(CreateOptions::default()).expect("create").0)
        .collect();
    let started = Instant::now();
    let tasks: Vec<_> = handles
        .iter()
        .cloned()
        .map(|ws| {
            let k = sizes.turns_per_workstream;
            tokio::spawn(async move {
                for _ in 0..k {
                    turn(&ws, "hello from the benchmark").await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("turn task");
    }
    let total = sizes.concurrent_workstreams * sizes.turns_per_workstream;
    let concurrent = total as f64 / started.elapsed().as_secs_f64();
    drop(handles);
    drop(manager);

    // Memory per idle workstream.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (_p, manager) = engine(sizes.idle_workstreams + 1).await;
    let before = rss_bytes().unwrap_or(0);
    let idle: Vec<WorkstreamHandle> = (0..sizes.idle_workstreams)
        .map(|_| manager.create(CreateOptions::default()).expect("create").0)
        .collect();
    tokio::task::yield_now().await;
    let after = rss_bytes().unwrap_or(0);
    let per_idle = after.saturating_sub(before) as f64 / sizes.idle_workstreams as f64;
    assert_eq!(idle.len(), sizes.idle_workstreams);
    // The same workstreams after one short turn each: history and retained events included.
    for ws in &idle {
        turn(ws, "hello from the benchmark").await;
    }
    let after_turn = rss_bytes().unwrap_or(0);
    let per_used = after_turn.saturating_sub(before) as f64 / sizes.idle_workstreams as f64;

    println!(
        "turnstone-engine turn benchmark ({})",
        if full { "full" } else { "smoke" }
    );
    println!("  baseline (provider stream only):        {baseline:>10.0} turns/s");
    println!(
        "  one workstream, sequential:             {sequential:>10.0} turns/s  ({:.1}% of baseline)",
        sequential / baseline * 100.0
    );
    println!(
        "  {} workstreams x {} turns, concurrent: {concurrent:>10.0} turns/s aggregate  ({:.1}% of baseline)",
        sizes.concurrent_workstreams,
        sizes.turns_per_workstream,
        concurrent / baseline * 100.0
    );
    println!(
        "  memory per idle workstream:             {:>10.1} KiB  (RSS growth over {} workstreams)",
        per_idle / 1024.0,
        sizes.idle_workstreams
    );
    println!(
        "  memory per idle workstream, one turn done: {:>8.1} KiB  (history and retained events included)",
        per_used / 1024.0
    );
}
