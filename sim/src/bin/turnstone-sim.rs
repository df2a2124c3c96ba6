//! `turnstone-sim`: runs one scenario against Redis and prints the JSON report (see
//! `docs/simulator.md`).

use clap::Parser;
use turnstone_sim::SimConfig;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cfg = SimConfig::parse();
    let _telemetry = turnstone_runtime::init_service_tracing(
        "info",
        turnstone_runtime::LogFormat::Text,
        "turnstone-sim",
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let report = turnstone_sim::run(cfg).await?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
