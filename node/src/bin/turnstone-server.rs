//! `turnstone-server`: the node. Serves the v0.9.6 HTTP API and SSE for workstreams run by
//! the engine, against `--base-url` or, without one, the built-in scripted model.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use turnstone_engine::{AgentModel, CreateOptions, EngineConfig, ManagerConfig};
use turnstone_node::backend::{
    Backend, ModelTarget, connect_registry, connect_target, resolve_cwd,
};
use turnstone_node::config_file::{
    EngineFlags, HOME_CONFIG, NODE_TABLES, SERVER_OWN_KEYS, ServerFile,
};
use turnstone_node::persist::Persistence;
use turnstone_node::server::policies::PolicyRegistry;
use turnstone_node::server::{self, Node, NodeOptions};
use turnstone_runtime::auth::{
    AUDIENCE_SERVER, AuthEnv, Authenticator, ConfigToken, TokenRole, check_bind_policy,
    generate_api_token,
};
use turnstone_runtime::{EnvAlias, ServiceSpec, Settings, Shutdown, exit_config_error};
use turnstone_store::StoreConfig;

#[derive(Debug, Parser)]
#[command(
    name = "turnstone-server",
    about = "A Turnstone node: HTTP API, SSE, workstreams"
)]
struct Args {
    /// Address to bind.
    #[arg(long, env = "TURNSTONE_HOST", default_value = "0.0.0.0")]
    host: IpAddr,
    /// Port to bind (0 picks a free one).
    #[arg(long, env = "TURNSTONE_PORT", default_value_t = 8080)]
    port: u16,
    /// Also serve the gRPC API (which the HTTP port serves too) on this port alone.
    #[arg(long, env = "TURNSTONE_GRPC_PORT")]
    grpc_port: Option<u16>,
    /// OpenAI-compatible endpoint. Default: the built-in scripted model (a demo).
    #[arg(long, env = "TURNSTONE_BASE_URL")]
    base_url: Option<String>,
    /// Model name (default: the first model the endpoint lists at start-up).
    #[arg(long, env = "TURNSTONE_MODEL")]
    model: Option<String>,
    /// Without `--model`: seconds to keep asking an unreachable endpoint for its model list
    /// (a model server may still be loading) before start-up fails. An empty list fails at
    /// once.
    #[arg(long, env = "TURNSTONE_MODEL_DETECT_TIMEOUT", default_value_t = 60)]
    model_detect_timeout: u64,
    /// API key of the endpoint (old env name: `OPENAI_API_KEY`).
    #[arg(long, env = "TURNSTONE_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Provider kind: `openai` (OpenAI-compatible) or `anthropic` (Messages API; the key from
    /// `--api-key` or `ANTHROPIC_API_KEY`). A `[models]` table in the config file wins.
    #[arg(long, default_value = "openai")]
    provider: String,
    /// MCP servers as a standard `{"mcpServers": {...}}` JSON file (added to the config
    /// file's `[mcp.servers.*]`).
    #[arg(long)]
    mcp_config: Option<PathBuf>,
    /// `--config` (`[server]`, `[models.*]`, `[model]`, `[mcp.servers.*]`, `[tools]`;
    /// default `~/.config/turnstone/config.toml` when it exists), `--log-level`,
    /// `--log-format`, `--drain-timeout`, `--check-config`.
    #[command(flatten)]
    service: turnstone_runtime::ServiceArgs,
    /// Model, tool, workstream and circuit-breaker settings (`--instructions`,
    /// `--temperature`, `--max-tokens`, `--context-window`, `--tool-timeout`, …).
    #[command(flatten)]
    tuning: turnstone_node::tuning::TuningArgs,
    /// Node id (default: the host name).
    #[arg(long, env = "TURNSTONE_NODE_ID")]
    node_id: Option<String>,
    /// Most live (in-memory) workstreams; creating one more evicts the oldest idle one, or
    /// with hibernation on hibernates it. Hibernated workstreams do not count.
    #[arg(long, default_value_t = 50)]
    max_workstreams: usize,
    /// Seconds a workstream stays idle before it hibernates: it leaves memory (its state is
    /// in the store) and comes back on its next use. 0 = never. Needs persistence. Default:
    /// `[server] hibernate_after_secs`, else 0.
    #[arg(long, env = "TURNSTONE_HIBERNATE_AFTER_SECS")]
    hibernate_after_secs: Option<u64>,
    /// Approve every tool call without asking.
    #[arg(long)]
    skip_permissions: bool,
    /// Seconds a tool approval may stay pending before it is denied (and recorded so).
    #[arg(long, env = "TURNSTONE_APPROVAL_TIMEOUT", default_value_t = 3600)]
    approval_timeout: u64,
    /// Working directory of the tools.
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// `--db-backend`, `--db-path`, `--db-url`, `--db-pool-size`.
    #[command(flatten)]
    db: turnstone_accounts::db::DbArgs,
    /// Most messages one workstream's queue holds (sends that arrive while it is busy and
    /// opt in with `"queue": true`); past it a send is answered `busy` with a reason.
    /// Default: `[server] max_queued_sends`, else 1000.
    #[arg(long, env = "TURNSTONE_MAX_QUEUED_SENDS")]
    max_queued_sends: Option<usize>,
    /// Keep nothing on disk (no conversation history, no resume).
    #[arg(long)]
    no_persistence: bool,
    /// Sessions without an alias older than this many days are pruned at start (0 = never).
    #[arg(long, default_value_t = 90)]
    session_retention_days: u32,
    /// Seconds between two looks for due watches (the `watch` tool; needs persistence).
    /// Default: `[server] watch_tick_secs`, else 15.
    #[arg(long, env = "TURNSTONE_WATCH_TICK_SECS")]
    watch_tick_secs: Option<u64>,
    /// Origins allowed by CORS, comma-separated (default: none, and no CORS at all).
    #[arg(long, env = "TURNSTONE_CORS_ORIGINS", value_delimiter = ',')]
    cors_origins: Vec<String>,
    /// Rate-limit requests per client IP (token bucket; `/health`, `/metrics` exempt).
    #[arg(long, env = "TURNSTONE_RATELIMIT_ENABLED")]
    ratelimit_enabled: bool,
    /// Bucket refill rate, requests per second.
    #[arg(long, env = "TURNSTONE_RATELIMIT_RPS", default_value_t = 10.0)]
    ratelimit_rps: f64,
    /// Bucket capacity (burst).
    #[arg(long, env = "TURNSTONE_RATELIMIT_BURST", default_value_t = 20)]
    ratelimit_burst: u32,
    /// Proxies whose `X-Forwarded-For` (client address: rate and login limits) and
    /// `X-Forwarded-Proto` (the cookie's `Secure`) are believed: comma-separated CIDRs or
    /// addresses. `TURNSTONE_RATELIMIT_TRUSTED_PROXIES` / `--ratelimit-trusted-proxies` are
    /// the old names.
    #[arg(
        long,
        env = "TURNSTONE_TRUSTED_PROXIES",
        alias = "ratelimit-trusted-proxies",
        default_value = ""
    )]
    trusted_proxy: String,
    /// `/metrics` needs a `read` credential (it is public by default, like `/health`).
    #[arg(long, env = "TURNSTONE_METRICS_AUTH")]
    metrics_auth: bool,
    /// Most event streams (SSE) one identity may hold open at once; more are refused (429).
    #[arg(long, env = "TURNSTONE_SSE_PER_IDENTITY", default_value_t = 32)]
    sse_per_identity: usize,
    /// Seconds a client has to send a request's headers before the connection is closed.
    #[arg(long, env = "TURNSTONE_HEADER_READ_TIMEOUT", default_value_t = 30)]
    header_read_timeout: u64,
    /// `task_agent`: model requests a sub-agent may make before it is stopped. Default:
    /// `[tools] agent_max_turns`, else 20.
    #[arg(long, env = "TURNSTONE_AGENT_MAX_TURNS")]
    agent_max_turns: Option<u32>,
    /// `task_agent`: whether sub-agents run every tool of their set without asking (the
    /// human approved the task_agent call). `false`: only auto-approve tools run. Default:
    /// `[tools] subagent_auto_approve_all`, else false.
    #[arg(
        long,
        env = "TURNSTONE_SUBAGENT_AUTO_APPROVE_ALL",
        action = clap::ArgAction::Set
    )]
    subagent_auto_approve_all: Option<bool>,
}

impl Args {
    /// The engine settings given as flags (they win over the config file).
    fn engine_flags(&self) -> EngineFlags {
        EngineFlags {
            agent_max_turns: self.agent_max_turns,
            subagent_auto_approve_all: self.subagent_auto_approve_all,
            watch_tick_secs: self.watch_tick_secs,
        }
    }
}

/// How long open connections get to close after the drain before they are cut.
const LISTENER_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The node's part of the configuration contract beyond its flags.
const SPEC: ServiceSpec = ServiceSpec {
    binary: "turnstone-server",
    table: Some("server"),
    own_keys: SERVER_OWN_KEYS,
    home_config: Some(HOME_CONFIG),
    aliases: &[&[
        EnvAlias {
            old: "OPENAI_API_KEY",
            arg: "api_key",
            instead: "TURNSTONE_API_KEY",
        },
        EnvAlias {
            old: "TURNSTONE_RATELIMIT_TRUSTED_PROXIES",
            arg: "trusted_proxy",
            instead: "TURNSTONE_TRUSTED_PROXIES",
        },
    ]],
    secrets: &[&[
        "TURNSTONE_JWT_SECRET",
        "TURNSTONE_AUTH_TOKEN",
        "TURNSTONE_API_KEY",
        "TURNSTONE_DB_URL",
    ]],
    extra_env: &["TURNSTONE_ADVERTISED_VERSION"],
    // `[database]`, `[auth]`, `[ratelimit]`, `[health]`, `[session]`, `[tools]`.
    tables: NODE_TABLES,
};

/// The node id when none is configured: the host name (stable across restarts in a
/// StatefulSet), else a random one.
fn default_node_id() -> String {
    turnstone_runtime::settings::hostname()
        .filter(|h| h != "localhost")
        .unwrap_or_else(|| turnstone_engine::new_ws_id()[..12].to_string())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings =
        Settings::<Args>::load(&SPEC).unwrap_or_else(|e| exit_config_error(SPEC.binary, &e));
    let args = &settings.args;
    // Everything below up to the backend connects to nothing: `--check-config` stops there.
    let config_error = |e: &dyn std::fmt::Display| -> ! { exit_config_error(SPEC.binary, e) };
    if !matches!(args.provider.as_str(), "openai" | "anthropic") {
        config_error(&format!(
            "--provider {}: expected `openai` (OpenAI-compatible) or `anthropic`",
            args.provider
        ));
    }
    let file = ServerFile::load(ServerFile::locate(args.service.config.as_deref()).as_deref())
        .unwrap_or_else(|e| config_error(&e));
    let mut mcp_servers = file.mcp_servers.clone();
    if let Some(path) = &args.mcp_config {
        mcp_servers.extend(turnstone_mcp::load_mcp_json(path).unwrap_or_else(|e| config_error(&e)));
    }

    // Auth: on by default; off only on a loopback bind.
    let env = AuthEnv {
        auth_enabled: std::env::var("TURNSTONE_AUTH_ENABLED").ok(),
        auth_token: settings.secret("TURNSTONE_AUTH_TOKEN"),
        jwt_secret: settings.secret("TURNSTONE_JWT_SECRET"),
    };
    // `[auth]` of the config file (`enabled`, `jwt_secret`, `[[auth.tokens]]`); the
    // environment wins over it.
    let mut auth_config = file.auth.clone().unwrap_or_default();
    let mut printed_token = None;
    if env.auth_token.is_none()
        && env.jwt_secret.is_none()
        && auth_config.jwt_secret.is_none()
        && auth_config.tokens.is_empty()
        && turnstone_runtime::auth::auth_enabled(auth_config.enabled, env.auth_enabled.as_deref())
    {
        // Nothing to log in with: make a full-access token for this run and say so once.
        let token = generate_api_token()?;
        auth_config
            .tokens
            .push(ConfigToken::new(token.clone(), TokenRole::Full));
        printed_token = Some(token);
    }
    let auth = Authenticator::from_config(&auth_config, &env, AUDIENCE_SERVER)
        .unwrap_or_else(|e| config_error(&e));
    check_bind_policy(auth.is_enabled(), args.host).unwrap_or_else(|e| config_error(&e));
    let ratelimit = server::ratelimit::RateLimitConfig {
        enabled: args.ratelimit_enabled,
        requests_per_second: args.ratelimit_rps,
        burst: args.ratelimit_burst,
        trusted_proxies: server::ratelimit::Cidr::parse_list(&args.trusted_proxy)
            .unwrap_or_else(|e| config_error(&e)),
    };
    ratelimit.validate().unwrap_or_else(|e| config_error(&e));
    let store_config = store_config(args).unwrap_or_else(|e| config_error(&e));
    let watch_tick = file
        .watch_tick(&args.engine_flags())
        .unwrap_or_else(|e| config_error(&e));
    file.apply_engine_settings(&args.engine_flags(), &mut EngineConfig::default())
        .unwrap_or_else(|e| config_error(&e));
    let tuned = args.tuning.check().unwrap_or_else(|e| config_error(&e));
    // `[rerank]`: the node-local reranker (its key read now, so --check-config fails on it);
    // without one the stored Reranker role (`model.reranker`) may bring one at any reload.
    let reranker = match &file.rerank {
        Some(section) => {
            let client = section
                .client(&|v| std::env::var(v).ok())
                .unwrap_or_else(|e| config_error(&e));
            turnstone_node::rerank::NodeReranker::new(client, section.settings())
        }
        None => turnstone_node::rerank::NodeReranker::none(),
    };
    // `[server]` keys that are flags reached `args` through the settings' layers.
    let node_id = args.node_id.clone().unwrap_or_else(default_node_id);
    if settings.check {
        let config_file = file
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(none)".into());
        settings.print_check(&[
            ("node_id", node_id),
            ("config_file", config_file),
            ("auth_enabled", auth.is_enabled().to_string()),
            ("mcp_servers", mcp_servers.len().to_string()),
            (
                "grpc_port",
                args.grpc_port
                    .map_or_else(|| "(the HTTP port)".into(), |p| p.to_string()),
            ),
        ]);
        return Ok(());
    }

    let _telemetry = turnstone_runtime::init_service_tracing(
        &args.service.log_level.to_lowercase(),
        args.service.log_format,
        "turnstone-server",
    )
    .map_err(anyhow::Error::msg)?;
    settings.log_warnings();
    if let Some(path) = &file.path {
        tracing::info!(path = %path.display(), "config file read");
    }
    if let Some(endpoint) = reranker.endpoint() {
        let s = reranker.settings();
        tracing::info!(
            endpoint = %endpoint.client.config().endpoint(),
            web_search = s.web_search,
            bm25 = s.bm25,
            bm25_threshold = s.bm25_threshold,
            "reranker configured"
        );
    }
    if file.auth.as_ref().is_some_and(|a| a.token.is_some()) {
        tracing::warn!(
            "[auth] token is the terminal client's outgoing token; the node does not use it \
             (its tokens are [[auth.tokens]] and TURNSTONE_AUTH_TOKEN)"
        );
    }
    if !auth.is_enabled() {
        tracing::warn!(host = %args.host, "auth is DISABLED (allowed only on a loopback bind)");
    }

    let (mut backend, model, agent_model, models) = connect_backend(args, &file).await?;
    backend.provider.breaker = Arc::new(turnstone_llm::CircuitBreaker::new(
        tuned.breaker_threshold,
        tuned.breaker_cooldown,
    ));
    let model_alias = models
        .as_ref()
        .map(|r| r.default_alias().to_string())
        .unwrap_or_default();
    if backend.is_scripted() {
        tracing::info!(url = %backend.base_url, "no --base-url: using the built-in scripted model");
    }
    let mut config = EngineConfig {
        model: model.clone(),
        model_alias: model_alias.clone(),
        // `/model <alias>` switches a workstream within the registry.
        models: models.map(Arc::new),
        auto_title: true,
        node_id: node_id.clone(),
        skip_permissions: args.skip_permissions,
        approval_timeout: std::time::Duration::from_secs(args.approval_timeout.max(1)),
        cwd: resolve_cwd(args.cwd.clone())?,
        reranker: Some(reranker.clone() as Arc<dyn turnstone_tools::Reranker>),
        ..EngineConfig::default()
    };
    // Instructions, sampling, context window, tool output and tool search settings.
    args.tuning
        .apply_engine(&mut config)
        .map_err(anyhow::Error::msg)?;
    // The registry's default model sees images when its entry says `vision = true`.
    if let Some(registry) = &config.models
        && let Ok(default) = registry.get(registry.default_alias())
    {
        config.vision |= default.entry.vision;
    }
    // agent_max_turns, subagent_auto_approve_all, compaction, auto_title: flag > file.
    file.apply_engine_settings(&args.engine_flags(), &mut config)
        .map_err(anyhow::Error::msg)?;
    let persistence = if let Some(store_config) = &store_config {
        let p = Persistence::open(store_config, &node_id).await?;
        match p
            .store
            .prune_sessions(&node_id, args.session_retention_days)
            .await
        {
            Ok(n) if n > 0 => tracing::info!(pruned = n, "old and empty sessions pruned"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "session pruning failed"),
        }
        Some(p)
    } else {
        None
    };
    // Stored settings the node reads only at start (`tools.web_search_backend`) win over
    // the config file; the live ones are applied once the node exists.
    let mut file = file;
    if let Some(p) = &persistence {
        let stored = server::cluster_settings::startup_values(&p.store, &node_id).await;
        if let Some(backend) = stored
            .get("tools.web_search_backend")
            .and_then(|v| v.as_str())
        {
            tracing::info!(backend, "web_search backend from the stored settings");
            file.tools.search_backend = Some(backend.to_string()).filter(|b| !b.is_empty());
        }
    }
    // `mcp:server:tool` searches find the MCP manager here once it starts.
    let mcp_slot = turnstone_node::mcp_search::McpSlot::new();
    let mut tool_options = builtin_options(&file, &backend, &model, &mcp_slot)?;
    tool_options.bash_default_timeout = tuned.tool_timeout;
    let mcp_names: Vec<String> = mcp_servers.iter().map(|s| s.name.clone()).collect();
    if let Some(server) = turnstone_node::mcp_search::unconfigured_server(
        file.tools.search_backend.as_deref(),
        &mcp_names,
    ) {
        tracing::warn!(
            server,
            "search_backend names an MCP server that is not configured; web_search will fail"
        );
    }
    // What the stored settings fall back to when a key is not (or no longer) stored.
    let baseline = server::cluster_settings::Baseline::new(
        config.clone(),
        file.judge.clone(),
        file.registry.clone(),
        if model_alias.is_empty() {
            "default"
        } else {
            &model_alias
        },
        own_model_entry(args, &backend, &model),
    );
    let engine = backend.engine_with(config, &tool_options).await?;
    turnstone_engine::register_subagent_with(&engine, agent_model.clone())?;
    turnstone_engine::register_plan_agent(&engine, agent_model)?;
    let hibernate_after = args
        .hibernate_after_secs
        .or(file.server.hibernate_after_secs)
        .filter(|secs| *secs > 0)
        .map(std::time::Duration::from_secs);
    if hibernate_after.is_some() && store_config.is_none() {
        tracing::warn!("hibernate_after_secs needs persistence; workstreams stay in memory");
    }
    let mut manager_config = ManagerConfig {
        max_workstreams: args.max_workstreams,
        hibernate_after: hibernate_after.filter(|_| store_config.is_some()),
        ..ManagerConfig::default()
    };
    args.tuning.apply_manager(&mut manager_config);
    let options = NodeOptions {
        node_id: node_id.clone(),
        model,
        model_alias,
        ratelimit,
        cors_origins: args
            .cors_origins
            .iter()
            .map(|o| o.trim().to_string())
            .filter(|o| !o.is_empty())
            .collect(),
        max_queued_sends: args
            .max_queued_sends
            .or(file.server.max_queued_sends)
            .unwrap_or(turnstone_node::send_queue::DEFAULT_MAX_QUEUED_SENDS)
            .max(1),
        version: std::env::var("TURNSTONE_ADVERTISED_VERSION")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string()),
        metrics_auth: args.metrics_auth,
        sse_per_identity: args.sse_per_identity.max(1),
        header_read_timeout: std::time::Duration::from_secs(args.header_read_timeout.max(1)),
        reranker: Some(reranker),
        ..NodeOptions::default()
    };
    // `ts_` API tokens are looked up in the store when there is one.
    let auth = match &persistence {
        Some(p) => auth.with_api_tokens(Arc::new(turnstone_node::server::users::StoreApiTokens(
            p.store.clone(),
        ))),
        None => auth,
    };
    let node = match persistence.clone() {
        Some(p) => Node::with_persistence(engine, manager_config, auth, options, p),
        None => Node::new(engine, manager_config, auth, options),
    };
    // Tool policies: the config file's and the stored ones, before any turn runs (a store
    // that cannot be read stops the start rather than running without its denials).
    PolicyRegistry::install(&node, file.policies.clone())
        .await
        .map_err(|e| anyhow::anyhow!("tool policies not loaded: {e:?}"))?;
    // Stored settings and model definitions over the flags and file (read again on
    // `_internal/config-reload` and `model-reload`).
    server::cluster_settings::ClusterSettings::install(&node, baseline).await;
    // The tools that need storage (memory, recall, skill) join the live registry.
    turnstone_node::store_tools::register_for(&node)?;
    server::previews::register(&node, &tool_options.web)?;
    node.create_workstream(CreateOptions {
        name: Some("default".into()),
        ..CreateOptions::default()
    })?;
    // Workstreams a previous run left open (hibernated, idle, or live when it stopped) are
    // listed again, hibernated: they rehydrate on use, and the bridge keeps their leases.
    match server::hibernation::restore_index(&node).await {
        Ok(n) if n > 0 => tracing::info!(hibernated = n, "earlier run's workstreams indexed"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = ?e, "hibernated workstreams not indexed"),
    }
    // Messages a previous run accepted into a workstream's queue run now, once each.
    turnstone_node::send_queue::recover(&node)
        .await
        .map_err(|e| anyhow::anyhow!("queued messages not recovered: {e:?}"))?;
    // MCP servers connect in the background: one slow or failing server never delays
    // start-up or the others.
    let mcp = (!mcp_servers.is_empty()).then(|| {
        turnstone_mcp::McpManager::start_with(
            mcp_servers,
            turnstone_mcp::McpOptions {
                child_env: tool_options.child_env.clone(),
                ..turnstone_mcp::McpOptions::default()
            },
        )
    });
    let mcp_sync = mcp.as_ref().map(|m| {
        tracing::info!(
            servers = m.counts().servers,
            "MCP servers connecting in the background"
        );
        node.set_mcp(m.clone());
        mcp_slot.set(m.clone());
        turnstone_node::mcp_tools::attach(m, node.manager.engine())
    });
    // MCP prompts become read-only skills in the store (only with persistence).
    let mcp_skill_sync = mcp
        .as_ref()
        .zip(persistence.as_ref())
        .map(|(m, p)| turnstone_node::mcp_skills::spawn_sync(m.clone(), p.store.clone()));

    // Watches: the tool and the runner that polls them (only with persistence).
    let watch_runner = turnstone_node::watch_runner::WatchRunner::install(
        &node,
        turnstone_node::watch_runner::WatchRunnerConfig {
            tick: watch_tick,
            child_env: tool_options.child_env.clone(),
            ..turnstone_node::watch_runner::WatchRunnerConfig::default()
        },
    )?;

    let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.host, args.port)).await?;
    let addr = listener.local_addr()?;
    let grpc_listener = match args.grpc_port {
        Some(port) => Some(tokio::net::TcpListener::bind(SocketAddr::new(args.host, port)).await?),
        None => None,
    };
    println!("turnstone-server {node_id} listening on http://{addr}");
    if let Some(l) = &grpc_listener {
        println!("gRPC also listening on {}", l.local_addr()?);
    }
    if let Some(token) = printed_token {
        println!("login token (full access, this run only): {token}");
    }
    if node.auth.is_enabled() && !server::users::has_users(&node).await && persistence.is_some() {
        // Setup needs a bootstrap credential: this code, or a full-access token.
        println!(
            "setup code (one-time, creates the first user): {}",
            node.setup_code.expose()
        );
    }
    use std::io::Write;
    std::io::stdout().flush()?;

    let drain_timeout = args.service.drain_timeout();
    let shutdown = Shutdown::new();
    let cleanup = spawn_idle_cleanup(node.clone(), shutdown.clone());
    let s = shutdown.clone();
    let mut serving = tokio::spawn(server::run(listener, node.clone(), async move {
        s.triggered().await
    }));
    let grpc_serving = grpc_listener.map(|l| {
        let s = shutdown.clone();
        tokio::spawn(turnstone_node::grpc::serve(l, node.clone(), async move {
            s.triggered().await
        }))
    });
    // SIGTERM/SIGINT: drain (not ready, no new turns, turns in flight finish or are
    // cancelled, event streams end), then stop the listener.
    tokio::select! {
        served = &mut serving => served??,
        _ = turnstone_runtime::signal_received() => {
            let report = node.drain(drain_timeout).await;
            tracing::info!(in_flight = report.in_flight, cancelled = report.cancelled, "drained");
            shutdown.trigger();
            match tokio::time::timeout(LISTENER_STOP_GRACE, &mut serving).await {
                Ok(served) => served??,
                Err(_) => {
                    tracing::warn!("connections still open after the drain; closing them");
                    serving.abort();
                }
            }
        }
    }
    cleanup.abort();
    if let Some(task) = grpc_serving {
        task.abort();
    }
    if let Some(runner) = watch_runner {
        runner.stop().await;
    }
    if let Some(task) = mcp_sync {
        task.abort();
    }
    if let Some(task) = mcp_skill_sync {
        task.abort();
    }
    if let Some(p) = persistence {
        let counters = p.writer.shutdown().await;
        tracing::info!(
            written = counters.written,
            dropped = counters.dropped,
            failed = counters.failed,
            "history flushed"
        );
    }
    drop(backend);
    tracing::info!("stopped");
    Ok(())
}

/// The store the flags name; `None` with `--no-persistence`.
fn store_config(args: &Args) -> Result<Option<StoreConfig>, String> {
    if args.no_persistence {
        return Ok(None);
    }
    let config = args.db.store_config()?;
    Ok(Some(config))
}

/// The model backend: the config file's model registry (aliases, fallback chain), else
/// `--provider anthropic`, else an OpenAI-compatible `--base-url`, else the scripted model.
/// Returns it with the model name requests carry, the model `task_agent` sub-agents run on
/// when `[model] agent_model` names another one, and, with a registry, the registry (for
/// per-workstream `/model` switching).
async fn connect_backend(
    args: &Args,
    file: &ServerFile,
) -> anyhow::Result<(
    Backend,
    String,
    Option<AgentModel>,
    Option<turnstone_llm::ModelRegistry>,
)> {
    if let Some(registry) = &file.registry {
        let r = connect_registry(registry)?;
        return Ok((r.backend, r.model, r.agent_model, Some(r.registry)));
    }
    // `--provider anthropic` takes its key from `--api-key`, else ANTHROPIC_API_KEY(_FILE).
    let api_key = match (&args.api_key, args.provider.as_str()) {
        (Some(key), _) => Some(key.clone()),
        (None, "anthropic") => {
            turnstone_node::backend::env_api_key("anthropic", &|v| std::env::var(v).ok())?
        }
        (None, _) => None,
    };
    let target = ModelTarget {
        provider: args.provider.clone(),
        base_url: args.base_url.clone(),
        api_key,
        model: args.model.clone(),
        seed: None,
    };
    let wait = std::time::Duration::from_secs(args.model_detect_timeout);
    let (backend, model) = connect_target(&target, wait).await?;
    Ok((backend, model, None, None))
}

/// The node's single model as a registry entry (the alias stored definitions are added
/// beside when the config file has no `[models.*]`).
fn own_model_entry(args: &Args, backend: &Backend, model: &str) -> turnstone_llm::ModelEntry {
    let provider = if args.provider == "anthropic" {
        turnstone_llm::ProviderKind::Anthropic
    } else {
        turnstone_llm::ProviderKind::Openai
    };
    let mut entry = turnstone_llm::ModelEntry::new(provider, backend.base_url.clone(), model);
    entry.api_key = args
        .api_key
        .clone()
        .or_else(|| {
            (provider == turnstone_llm::ProviderKind::Anthropic)
                .then(|| std::env::var("ANTHROPIC_API_KEY").ok())
                .flatten()
        })
        .filter(|k| !k.is_empty());
    entry
}

/// Built-in tool settings from `[tools]`: the web tools on (unless disabled), their SSRF
/// policy, search backend and notify targets, and page answers by the node's own model.
fn builtin_options(
    file: &ServerFile,
    backend: &Backend,
    model: &str,
    mcp: &turnstone_node::mcp_search::McpSlot,
) -> anyhow::Result<turnstone_tools::BuiltinOptions> {
    let t = &file.tools;
    let mut web = turnstone_tools::WebOptions {
        enabled: !t.disable_web,
        allow_private_network: t.allow_private_network,
        searxng_url: t
            .searxng_url(std::env::var(turnstone_node::config_file::SEARXNG_URL_ENV).ok()),
        search_backend: t.search_backend.clone(),
        // `mcp:server:tool`: the MCP bridge (it finds the manager once MCP starts).
        search: turnstone_node::mcp_search::backend_for(t.search_backend.as_deref(), mcp)
            .map_err(anyhow::Error::msg)?,
        ..turnstone_tools::WebOptions::default()
    };
    if let Some(search) = &web.search {
        tracing::info!(backend = %search.describe(), "web_search backend");
    }
    web.notify_targets = t
        .notify
        .iter()
        .map(|(name, target)| {
            let mut n = turnstone_tools::NotifyTarget::new(name.clone(), target.url.clone());
            n.headers = target
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            n
        })
        .collect();
    web.page_answerer = Some(Arc::new(turnstone_node::page_answerer::LlmPageAnswerer {
        llm: backend.provider.clone(),
        model: model.to_string(),
    }));
    Ok(turnstone_tools::BuiltinOptions {
        web,
        child_env: turnstone_tools::ChildEnv::new(t.env_passthrough.iter().cloned()),
        max_image_bytes: t
            .max_image_bytes
            .unwrap_or(turnstone_tools::DEFAULT_MAX_IMAGE_BYTES),
        ..turnstone_tools::BuiltinOptions::default()
    })
}

fn spawn_idle_cleanup(node: Arc<Node>, shutdown: Shutdown) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(timeout) = node.manager.config().idle_timeout else {
            return;
        };
        let period = (timeout / 4).min(std::time::Duration::from_secs(300));
        let mut tick = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = shutdown.triggered() => return,
                _ = tick.tick() => {
                    for closed in node.manager.close_idle() {
                        node.announce_closed(&closed);
                    }
                }
            }
        }
    })
}
