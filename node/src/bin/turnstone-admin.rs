//! `turnstone-admin`: operator commands run beside a node, against its config file and
//! store.
//!
//! * `rerank-calibrate [--apply]` — probes the `[rerank]` endpoint with built-in relevant
//!   and irrelevant query–passage pairs, prints the score distribution, whether relevant
//!   and irrelevant passages separate cleanly, and the recommended
//!   `tools.rerank_bm25_threshold`. `--apply` stores it as the global setting (nodes apply
//!   it at their next `config-reload` or start); nothing is stored without a clean
//!   separation on a probability scale. Exit status 1 when the endpoint cannot be probed
//!   or `--apply` has nothing to store.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use turnstone_node::config_file::ServerFile;
use turnstone_node::rerank::{SETTING_BM25_THRESHOLD, calibrate, store_threshold};

#[derive(Debug, Parser)]
#[command(name = "turnstone-admin", about = "Turnstone operator commands")]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Probe the [rerank] endpoint and recommend tools.rerank_bm25_threshold.
    RerankCalibrate(CalibrateArgs),
}

#[derive(Debug, clap::Args)]
struct CalibrateArgs {
    /// The node's config file (its [rerank] section); default ~/.config/turnstone/config.toml.
    #[arg(long, env = "TURNSTONE_CONFIG")]
    config: Option<PathBuf>,
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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Cmd::RerankCalibrate(args) = Args::parse().command;
    let file = ServerFile::load(ServerFile::locate(args.config.as_deref()).as_deref())
        .unwrap_or_else(|e| fail(&e.to_string()));
    let Some(section) = &file.rerank else {
        fail("no [rerank] section in the config file (give it with --config)")
    };
    let client = section
        .client(&|v| std::env::var(v).ok())
        .unwrap_or_else(|e| fail(&e));
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
