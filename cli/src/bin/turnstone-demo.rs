//! `turnstone-demo`: one workstream in the terminal, against `--base-url` or the built-in
//! scripted model.

use std::io::BufRead;
use std::path::PathBuf;

use clap::Parser;
use turnstone_cli::demo::{Answers, run_prompt};
use turnstone_engine::{CreateOptions, EngineConfig, Manager, ManagerConfig};
use turnstone_node::backend::{Backend, resolve_cwd};
use turnstone_runtime::{LogFormat, init_tracing};

#[derive(Debug, Parser)]
#[command(about = "Run a Turnstone workstream in the terminal (demo)")]
struct Args {
    /// OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1. Default: the built-in scripted model.
    #[arg(long, env = "TURNSTONE_BASE_URL")]
    base_url: Option<String>,
    /// Model name.
    #[arg(long, env = "TURNSTONE_MODEL", default_value = "fake-model")]
    model: String,
    /// API key for the endpoint.
    #[arg(long, env = "TURNSTONE_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Approve every tool call without asking.
    #[arg(long)]
    skip_permissions: bool,
    /// Working directory of the tools (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Log level.
    #[arg(long, default_value = "warn")]
    log_level: String,
    /// Prompts to run in order; without any, prompts are read from stdin, one per line.
    prompts: Vec<String>,
}

struct Stdin;

impl Answers for Stdin {
    fn next_answer(&mut self) -> Option<String> {
        let mut line = String::new();
        let read = tokio::task::block_in_place(|| std::io::stdin().lock().read_line(&mut line));
        match read {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_tracing(&args.log_level, LogFormat::Text).map_err(anyhow::Error::msg)?;

    let backend = Backend::connect(args.base_url.as_deref(), args.api_key.clone()).await?;
    if backend.is_scripted() {
        eprintln!(
            "[using the built-in scripted model at {}; pass --base-url for a real one]",
            backend.base_url
        );
    }
    let config = EngineConfig {
        model: args.model.clone(),
        skip_permissions: args.skip_permissions,
        cwd: resolve_cwd(args.cwd.clone())?,
        ..EngineConfig::default()
    };
    let engine = backend.engine(config).await?;
    let manager = Manager::new(engine, ManagerConfig::default());
    let (ws, _) = manager.create(CreateOptions {
        name: Some("demo".into()),
        ..Default::default()
    })?;

    let mut out = std::io::stdout();
    let mut answers = Stdin;
    if args.prompts.is_empty() {
        while let Some(line) = answers.next_answer() {
            let prompt = line.trim();
            if !prompt.is_empty() {
                run_prompt(&ws, prompt, &mut out, &mut answers).await?;
            }
        }
    } else {
        for prompt in &args.prompts {
            run_prompt(&ws, prompt, &mut out, &mut answers).await?;
        }
    }
    Ok(())
}
