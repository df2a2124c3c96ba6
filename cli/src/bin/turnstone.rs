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
use turnstone_mcp::{McpManager, McpOptions, ServerState};
use turnstone_node::backend::{connect_registry, connect_target, resolve_cwd};
use turnstone_node::persist::{Persistence, StoreJournal};
use turnstone_node::store_tools;
use turnstone_node::watch_runner::{ManagerWatchHost, WatchRunner, WatchRunnerConfig};
use turnstone_runtime::{LogFormat, init_tracing};
use turnstone_store::StoreConfig;

/// How long start-up waits for the MCP servers' first connection (the first prompt should
/// see their tools); a server still connecting then joins in the background.
const MCP_STARTUP_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Waits (at most [`MCP_STARTUP_WAIT`]) until every MCP server has connected or failed and
/// the tools of the connected ones are in `registry`; says on stderr how it went.
async fn wait_for_mcp(mcp: &Arc<McpManager>, registry: &turnstone_tools::ToolRegistry) {
    let settled = || {
        let status = mcp.status();
        let connecting = status
            .keys()
            .filter(|name| matches!(mcp.server_state(name), Some(ServerState::Connecting)))
            .count();
        let mirrored = mcp
            .tools_snapshot()
            .iter()
            .all(|t| registry.get(&t.qualified_name).is_some());
        connecting == 0 && mirrored
    };
    let deadline = tokio::time::Instant::now() + MCP_STARTUP_WAIT;
    while !settled() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for name in mcp.server_names() {
        match mcp.server_state(&name) {
            Some(ServerState::Ready) => {}
            Some(ServerState::Failed { reason }) => {
                eprintln!("[MCP server {name} failed: {reason}; retrying in the background]")
            }
            _ => eprintln!("[MCP server {name} is still connecting]"),
        }
    }
}

/// Seconds between two looks for due watches: `TURNSTONE_WATCH_TICK_SECS` (the node's
/// variable), default 15.
fn watch_tick() -> Result<std::time::Duration, NodeError> {
    match std::env::var("TURNSTONE_WATCH_TICK_SECS") {
        Err(_) => Ok(std::time::Duration::from_secs(15)),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(secs) if secs >= 1 => Ok(std::time::Duration::from_secs(secs)),
            _ => Err(NodeError::ProviderSetup(format!(
                "TURNSTONE_WATCH_TICK_SECS={v}: expected whole seconds, at least 1"
            ))),
        },
    }
}

/// Without a model name: how long to wait for the endpoint's model list.
const MODEL_DETECT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

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
    // The model: the config file's registry, else the one endpoint (the node's wiring).
    let (backend, model, agent_model, registry) = match &settings.registry {
        Some(config) => {
            let r = connect_registry(config)?;
            (
                r.backend,
                r.model,
                r.agent_model,
                Some(Arc::new(r.registry)),
            )
        }
        None => {
            let (backend, model) = connect_target(&settings.target(), MODEL_DETECT_WAIT).await?;
            (backend, model, None, None)
        }
    };
    if backend.is_scripted() {
        eprintln!(
            "[using the built-in scripted model at {}; pass --base-url for a real one]",
            backend.base_url
        );
    }
    let mut config = settings.engine_config(model.clone(), cwd);
    config.model_alias = registry
        .as_ref()
        .map(|r| r.default_alias().to_string())
        .unwrap_or_default();
    config.models = registry;
    let engine = backend.engine(config).await?;
    turnstone_engine::register_subagent_with(&engine, agent_model)?;
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
    let manager = Arc::new(manager);
    // memory, recall and skill over the session store (as the node has them).
    if let Some(p) = &persistence {
        store_tools::register_with(
            manager.engine().registry(),
            p.store.clone(),
            Arc::new(store_tools::ManagerWorkstreams(Arc::downgrade(&manager))),
        )?;
    }
    // Watches: the tool and the runner that polls them (over the session store); a notice
    // goes to its workstream when it is open in this run.
    let watch_runner = match &persistence {
        Some(p) => Some(WatchRunner::install_with(
            Arc::new(ManagerWatchHost(Arc::downgrade(&manager))),
            manager.engine().clone(),
            p.store.clone(),
            manager.engine().config().node_id.clone(),
            WatchRunnerConfig {
                tick: watch_tick()?,
                ..WatchRunnerConfig::default()
            },
        )?),
        None => None,
    };
    // MCP servers connect in the background; their tools join as they are discovered.
    let mcp = (!settings.mcp_servers.is_empty())
        .then(|| McpManager::start_with(settings.mcp_servers.clone(), McpOptions::default()));
    let mcp_sync = mcp
        .as_ref()
        .map(|m| turnstone_node::mcp_tools::attach(m, manager.engine()));
    if let Some(m) = &mcp {
        wait_for_mcp(m, manager.engine().registry()).await;
    }

    let interactive = std::io::stdin().is_terminal();
    let stdout_tty = std::io::stdout().is_terminal();
    let no_color = std::env::var("NO_COLOR").ok();
    let options = ReplOptions {
        interactive,
        stdout_tty,
        style: Style::detect(stdout_tty, no_color.as_deref()),
        spinner: interactive && std::io::stderr().is_terminal(),
        model,
        endpoint: backend.base_url.clone(),
    };
    let mut repl = Repl::new(manager, options, std::io::stdout())?;
    if let Some(p) = &persistence {
        repl = repl.with_persistence(p.clone());
    }
    let result = repl.run(stdin_lines(), ctrl_c_presses()).await;
    if let Some(task) = mcp_sync {
        task.abort();
    }
    if let Some(runner) = watch_runner {
        runner.stop().await;
    }
    if let Some(p) = persistence {
        p.writer.shutdown().await;
    }
    drop(backend);
    result
}
