//! `turnstone-cluster up`: a local Turnstone cluster (Redis, fake model, nodes, bridges,
//! console) started from the binaries next to this one; Ctrl-C stops all of it.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use turnstone_console::launcher::{UpOptions, up};

#[derive(Debug, Parser)]
#[command(name = "turnstone-cluster", about = "Run a local Turnstone cluster")]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Start Redis (unless --redis-url), the fake model (unless --base-url), N nodes with
    /// their bridges, and the console; stop everything on Ctrl-C.
    Up(UpArgs),
}

#[derive(Debug, clap::Args)]
struct UpArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// OpenAI-compatible endpoint for the nodes (default: the scripted fake model).
    #[arg(long)]
    base_url: Option<String>,
    /// Model name for the nodes.
    #[arg(long)]
    model: Option<String>,
    /// Use this Redis instead of starting a private redis-server.
    #[arg(long)]
    redis_url: Option<String>,
    /// Console port.
    #[arg(long, default_value_t = 8090)]
    port: u16,
    /// Console bind address.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Keep node databases and logs here (default: a temp dir removed at exit).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

impl UpArgs {
    fn into_options(self) -> UpOptions {
        UpOptions {
            nodes: self.nodes,
            base_url: self.base_url,
            model: self.model,
            redis_url: self.redis_url,
            port: self.port,
            host: self.host,
            data_dir: self.data_dir,
            bin_dir: None,
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Cmd::Up(args) = Args::parse().command;
    turnstone_runtime::init_tracing("warn", turnstone_runtime::LogFormat::Text)
        .map_err(anyhow::Error::msg)?;
    if args.nodes == 0 || args.nodes > 64 {
        anyhow::bail!("--nodes must be from 1 to 64 (got {})", args.nodes);
    }
    let mut cluster = match up(args.into_options()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("turnstone-cluster: {e}");
            std::process::exit(1);
        }
    };
    println!("redis: {}", cluster.redis_url);
    for (id, url) in &cluster.node_urls {
        println!("node {id}: {url}");
    }
    println!("data and logs: {}", cluster.data_dir.display());
    let pids: Vec<String> = cluster.pids().iter().map(u32::to_string).collect();
    println!("pids: {}", pids.join(" "));
    println!("login token: {}", cluster.token);
    println!("console: {}/", cluster.console_url);
    println!("cluster up; Ctrl-C stops it");
    {
        use std::io::Write;
        std::io::stdout().flush()?;
    }
    let shutdown = turnstone_runtime::Shutdown::new();
    tokio::spawn(shutdown.clone().trigger_on_signals());
    let exited = tokio::select! {
        _ = shutdown.triggered() => None,
        name = cluster.first_exit() => Some(name),
    };
    if let Some(name) = &exited {
        eprintln!("turnstone-cluster: {name} exited; stopping the cluster");
    }
    cluster.stop().await;
    println!("cluster stopped");
    if exited.is_some() {
        std::process::exit(1);
    }
    Ok(())
}
