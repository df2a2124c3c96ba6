//! `turnstone`: the terminal client. Interactive when stdin is a terminal; otherwise reads
//! prompts line by line from stdin and prints the replies.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use std::sync::Arc;
use turnstone_engine::{Manager, ManagerConfig};
use turnstone_node::NodeError;

use turnstone_cli::render::Style;
use turnstone_cli::repl::{Repl, ReplOptions, ctrl_c_presses, stdin_lines};
use turnstone_cli::settings::{CliArgs, Settings};
use turnstone_node::backend::{Backend, resolve_cwd};
use turnstone_node::persist::{Persistence, StoreJournal};
use turnstone_runtime::{LogFormat, init_tracing};
use turnstone_store::StoreConfig;

#[tokio::main]
async fn main() -> ExitCode {
    let args = CliArgs::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("turnstone: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: CliArgs) -> Result<(), NodeError> {
    let settings = Settings::resolve(&args, &|var| std::env::var(var).ok())?;
    if let Err(e) = init_tracing(&settings.log_level, LogFormat::Text) {
        eprintln!("turnstone: logging disabled: {e}");
    }
    let cwd = resolve_cwd(settings.cwd.clone())?;
    let backend = Backend::connect(settings.base_url.as_deref(), settings.api_key.clone()).await?;
    if backend.is_scripted() {
        eprintln!(
            "[using the built-in scripted model at {}; pass --base-url for a real one]",
            backend.base_url
        );
    }
    let engine = backend.engine(settings.engine_config(cwd)).await?;
    turnstone_engine::register_subagent(&engine)?;
    let mut manager = Manager::new(
        engine,
        ManagerConfig {
            idle_timeout: None,
            ..ManagerConfig::default()
        },
    );
    // Sessions are saved to SQLite (TURNSTONE_DB_PATH, default `.turnstone.db`) unless
    // TURNSTONE_NO_PERSISTENCE is set; `/resume` reads them back.
    let persistence = if std::env::var_os("TURNSTONE_NO_PERSISTENCE").is_some() {
        None
    } else {
        let path = std::env::var("TURNSTONE_DB_PATH").unwrap_or_else(|_| ".turnstone.db".into());
        let p = Persistence::open(&StoreConfig::sqlite(path), "local").await?;
        manager = manager.with_journal(Arc::new(StoreJournal(p.clone())));
        Some(p)
    };

    let interactive = std::io::stdin().is_terminal();
    let stdout_tty = std::io::stdout().is_terminal();
    let no_color = std::env::var("NO_COLOR").ok();
    let options = ReplOptions {
        interactive,
        stdout_tty,
        style: Style::detect(stdout_tty, no_color.as_deref()),
        spinner: interactive && std::io::stderr().is_terminal(),
        model: settings.model.clone(),
        endpoint: backend.base_url.clone(),
    };
    let mut repl = Repl::new(manager, options, std::io::stdout())?;
    if let Some(p) = &persistence {
        repl = repl.with_persistence(p.clone());
    }
    let result = repl.run(stdin_lines(), ctrl_c_presses()).await;
    if let Some(p) = persistence {
        p.writer.shutdown().await;
    }
    drop(backend);
    result
}
