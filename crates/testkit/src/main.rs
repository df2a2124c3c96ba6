//! `turnstone-fake-llm`: the scripted OpenAI-compatible fake model as a process, for demos and
//! benchmarks. Prints `turnstone-fake-llm listening on http://HOST:PORT/v1` on stdout once
//! ready, then serves until SIGINT/SIGTERM. Rules: see the `turnstone-testkit` crate docs.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use turnstone_testkit::{FakeLlm, FakeLlmConfig};

/// Scripted OpenAI-compatible fake LLM server.
#[derive(Debug, Parser)]
#[command(name = "turnstone-fake-llm", version, about)]
struct Args {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to bind (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Model id served by /v1/models.
    #[arg(long, default_value = "fake-model")]
    model: String,
    /// Context window reported as max_model_len.
    #[arg(long, default_value_t = 32_768)]
    context_window: u32,
    /// Delay before each chat-completion response head, in milliseconds.
    #[arg(long, default_value_t = 0)]
    first_byte_delay_ms: u64,
    /// Streaming pace in chunks (≈ tokens) per second; unlimited when absent.
    #[arg(long)]
    tokens_per_sec: Option<f64>,
    /// Characters per streamed chunk.
    #[arg(long, default_value_t = 4)]
    chunk_chars: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if let Some(t) = args.tokens_per_sec {
        anyhow::ensure!(
            t.is_finite() && t > 0.0,
            "--tokens-per-sec must be a positive number, got {t}"
        );
    }
    let config = FakeLlmConfig {
        model: args.model,
        context_window: args.context_window,
        first_byte_delay: Duration::from_millis(args.first_byte_delay_ms),
        tokens_per_sec: args.tokens_per_sec,
        chunk_chars: args.chunk_chars.max(1),
        record_requests: false,
    };
    let llm = FakeLlm::bind(SocketAddr::new(args.host, args.port), config).await?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "turnstone-fake-llm listening on {}", llm.base_url())?;
        stdout.flush()?;
    }
    wait_for_signal()
        .await
        .context("waiting for a shutdown signal")?;
    tracing::info!("shutting down");
    drop(llm);
    Ok(())
}

#[cfg(unix)]
async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result,
        _ = term.recv() => Ok(()),
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() -> std::io::Result<()> {
    tokio::signal::ctrl_c().await
}
