//! `turnstone-bridge`: see the crate docs of `turnstone_bridge`.

use clap::Parser;
use turnstone_bridge::{Args, Bridge, BridgeConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _telemetry = turnstone_runtime::init_service_tracing(
        &args.log_level,
        args.log_format,
        "turnstone-bridge",
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let config = match BridgeConfig::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("turnstone-bridge: {e}");
            std::process::exit(2);
        }
    };
    let shutdown = turnstone_runtime::Shutdown::new();
    let cancel = shutdown.token().clone();
    let signals = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            wait_for_signal().await;
            tracing::info!("stopping");
            shutdown.trigger();
        }
    });
    let bridge = match Bridge::start(config, cancel).await {
        Ok(b) => b,
        Err(turnstone_bridge::StartError::Cancelled) => return Ok(()),
        Err(e) => {
            eprintln!("turnstone-bridge: {e}");
            std::process::exit(1);
        }
    };
    bridge.join().await;
    signals.abort();
    Ok(())
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
