//! `turnstone-admin`: operator commands run beside a node, against its config file and
//! store.
//!
//! * `rerank-calibrate [--model <alias>] [--apply]` — probes a reranker with built-in
//!   relevant and irrelevant query–passage pairs, prints the score distribution, whether
//!   relevant and irrelevant passages separate cleanly, and the recommended
//!   `tools.rerank_bm25_threshold`. Which reranker: the stored model definition `--model`
//!   names; else the config file's `[rerank]` (it wins on the node too); else the stored
//!   Reranker role's definition (`model.reranker`). `--apply` stores the threshold as the
//!   global setting (nodes apply it at their next `config-reload` or start); nothing is
//!   stored without a clean separation on a probability scale. Exit status 1 when there is
//!   no reranker, the endpoint cannot be probed, or `--apply` has nothing to store.

// The arguments' doc comments are `--help` text, where `[rerank]` names a TOML section.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use turnstone_llm::RerankClient;
use turnstone_node::config_file::ServerFile;
use turnstone_node::rerank::{
    SETTING_BM25_THRESHOLD, calibrate, definition_config, store_threshold,
};
use turnstone_proto::settings::RERANKER_ROLE;
use turnstone_store::Store;

#[derive(Debug, Parser)]
#[command(name = "turnstone-admin", about = "Turnstone operator commands")]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Probe the reranker and recommend tools.rerank_bm25_threshold.
    RerankCalibrate(CalibrateArgs),
}

#[derive(Debug, clap::Args)]
struct CalibrateArgs {
    /// The node's config file (its [rerank] section); default ~/.config/turnstone/config.toml.
    #[arg(long, env = "TURNSTONE_CONFIG")]
    config: Option<PathBuf>,
    /// Probe this stored model definition (a supports_rerank one) instead of [rerank] or
    /// the stored Reranker role.
    #[arg(long, value_name = "ALIAS")]
    model: Option<String>,
    /// Store the recommended threshold as the global tools.rerank_bm25_threshold setting.
    #[arg(long)]
    apply: bool,
    #[command(flatten)]
    db: turnstone_accounts::db::DbArgs,
}

fn fail(message: &str) -> ! {
    eprintln!("turnstone-admin: {message}");
    std::process::exit(1)
}

/// Opens the store the flags name; a SQLite file that does not exist is not created.
async fn open_store(db: &turnstone_accounts::db::DbArgs) -> Arc<dyn Store> {
    let config = db.store_config().unwrap_or_else(|e| fail(&e));
    if db.db_backend == "sqlite" && !db.db_path.exists() {
        fail(&format!(
            "no store at {} to read model definitions from (give --db-path or --db-url)",
            db.db_path.display()
        ))
    }
    turnstone_store::connect(&config)
        .await
        .unwrap_or_else(|e| fail(&format!("cannot open the store: {e}")))
}

/// The stored definition `alias`, as a reranker's client.
async fn stored_client(store: &dyn Store, alias: &str) -> RerankClient {
    let definitions = store
        .list_model_definitions()
        .await
        .unwrap_or_else(|e| fail(&format!("cannot read the model definitions: {e}")));
    let definition = definitions
        .iter()
        .find(|d| d.alias == alias)
        .unwrap_or_else(|| fail(&format!("no stored model definition {alias:?}")));
    let config = definition_config(definition).unwrap_or_else(|e| fail(&e));
    RerankClient::new(config).unwrap_or_else(|e| fail(&e.to_string()))
}

/// The global `model.reranker` alias, if set.
async fn role_alias(store: &dyn Store) -> Option<String> {
    let rows = store
        .list_settings()
        .await
        .unwrap_or_else(|e| fail(&format!("cannot read the settings: {e}")));
    rows.iter()
        .find(|r| r.key == RERANKER_ROLE && r.node_id.is_empty())
        .and_then(|r| serde_json::from_str::<String>(&r.value).ok())
        .filter(|a| !a.is_empty())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Cmd::RerankCalibrate(args) = Args::parse().command;
    let file = ServerFile::load(ServerFile::locate(args.config.as_deref()).as_deref())
        .unwrap_or_else(|e| fail(&e.to_string()));
    let client = match (&args.model, &file.rerank) {
        (Some(alias), _) => stored_client(open_store(&args.db).await.as_ref(), alias).await,
        (None, Some(section)) => section
            .client(&|v| std::env::var(v).ok())
            .unwrap_or_else(|e| fail(&e)),
        (None, None) => {
            let store = open_store(&args.db).await;
            let Some(alias) = role_alias(store.as_ref()).await else {
                fail(
                    "no reranker: no [rerank] section in the config file (give it with \
                     --config), no model.reranker role stored, and no --model",
                )
            };
            stored_client(store.as_ref(), &alias).await
        }
    };
    println!(
        "probing {} (model {}) with {} queries",
        client.config().endpoint(),
        client.config().model,
        turnstone_node::rerank::PROBES.len()
    );
    let calibration = calibrate(&client)
        .await
        .unwrap_or_else(|e| fail(&format!("calibration failed ({}): {e}", e.reason())));
    println!("{}", calibration.report());
    if !args.apply {
        return Ok(());
    }
    let Some(threshold) = calibration.recommended() else {
        fail("--apply: nothing stored (no clean separation on a probability scale)")
    };
    let store_config = args.db.store_config().unwrap_or_else(|e| fail(&e));
    let store = turnstone_store::connect(&store_config)
        .await
        .unwrap_or_else(|e| fail(&format!("cannot open the store: {e}")));
    store_threshold(store.as_ref(), threshold, "turnstone-admin")
        .await
        .unwrap_or_else(|e| fail(&e));
    println!(
        "stored {SETTING_BM25_THRESHOLD} = {threshold} ({}); nodes apply it at their next \
         config-reload or start",
        args.db.display()
    );
    Ok(())
}
