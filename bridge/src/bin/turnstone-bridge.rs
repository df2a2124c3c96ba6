//! `turnstone-bridge`: see the crate docs of `turnstone_bridge`.

use turnstone_bridge::config::SPEC;
use turnstone_bridge::{Args, Bridge, BridgeConfig};
use turnstone_runtime::{Settings, exit_config_error};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings =
        Settings::<Args>::load(&SPEC).unwrap_or_else(|e| exit_config_error(SPEC.binary, &e));
    let args = &settings.args;
    let config = BridgeConfig::from_args(args, settings.secret("TURNSTONE_JWT_SECRET"))
        .unwrap_or_else(|e| exit_config_error(SPEC.binary, &e));
    if settings.check {
        settings.print_check(&[
            ("redis", config.redis.display()),
            ("node_auth", format!("{:?}", config.auth)),
        ]);
        return Ok(());
    }
    let _telemetry = turnstone_runtime::init_service_tracing(
        &args.service.log_level,
        args.service.log_format,
        "turnstone-bridge",
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    settings.log_warnings();
    let shutdown = turnstone_runtime::Shutdown::new();
    let cancel = shutdown.token().clone();
    let mut signal = tokio::spawn(turnstone_runtime::signal_received());
    let start = Bridge::start(config, cancel);
    tokio::pin!(start);
    let bridge = tokio::select! {
        started = &mut start => match started {
            Ok(b) => b,
            Err(e) => {
                eprintln!("turnstone-bridge: {e}");
                std::process::exit(1);
            }
        },
        _ = &mut signal => {
            // Stopped before start-up finished: nothing was taken yet.
            shutdown.trigger();
            return Ok(());
        }
    };
    let _ = signal.await;
    let report = bridge.drain(args.service.drain_timeout()).await;
    tracing::info!(
        finished = report.finished,
        handed_back = report.handed_back,
        "stopped"
    );
    Ok(())
}
