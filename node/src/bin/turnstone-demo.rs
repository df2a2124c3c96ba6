//! `turnstone-demo`: one workstream in the terminal, against `--base-url` or the built-in
//! scripted model.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use turnstone_engine::{CreateOptions, Engine, EngineConfig, Manager, ManagerConfig};
use turnstone_llm::{CircuitBreaker, OpenAiConfig, OpenAiProvider, Resilient, RetryPolicy};
use turnstone_node::demo::{Answers, run_prompt};
use turnstone_runtime::{LogFormat, init_tracing};
use turnstone_testkit::FakeLlm;
use turnstone_tools::ToolRegistry;

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

    let fake = match &args.base_url {
        Some(_) => None,
        None => Some(FakeLlm::start().await),
    };
    let base_url = match (&args.base_url, &fake) {
        (Some(url), _) => url.clone(),
        (None, Some(f)) => f.base_url(),
        (None, None) => anyhow::bail!("no model endpoint"),
    };
    if fake.is_some() {
        eprintln!(
            "[using the built-in scripted model at {base_url}; pass --base-url for a real one]"
        );
    }
    let mut llm_config = OpenAiConfig::new(base_url);
    llm_config.api_key = args.api_key.clone();
    let provider = OpenAiProvider::new(llm_config)?;
    let resilient = Resilient::new(
        Arc::new(provider),
        RetryPolicy::default(),
        Arc::new(CircuitBreaker::default()),
    );
    let cwd = match args.cwd {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let config = EngineConfig {
        model: args.model.clone(),
        skip_permissions: args.skip_permissions,
        cwd,
        ..EngineConfig::default()
    };
    let engine = Engine::new(resilient, Arc::new(ToolRegistry::with_builtins()?), config).await;
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
