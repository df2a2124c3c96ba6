//! The producer side: a seeded schedule of sends and kills per scenario, pushed through the
//! real queue client (`TurnstoneClient`, routing by ownership as any producer), then a wait
//! for the turns still running, then the report.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use turnstone_proto::mq::{CreateWorkstreamMessage, SendMessage};
use turnstone_queue::TurnstoneClient;

use crate::cluster::Cluster;
use crate::config::{Scenario, SimConfig};
use crate::report::{Metrics, Report};
use crate::rng::SimRng;

/// Most workstreams the lifecycle scenario creates.
const LIFECYCLE_MAX_WS: usize = 50;

/// One thing the producer does at `at` seconds after the start.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub at: f64,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A `send` to the workstream at this index of the sorted starting workstreams.
    Send { ws: usize },
    /// A `create_workstream` with `target_node` and an `initial_message`.
    Directed { node: usize },
    /// Kill these nodes.
    Kill { nodes: Vec<usize> },
    /// Lifecycle: create one workstream (shared queue).
    Create,
    /// Lifecycle: close the created workstream at this index.
    Close { ws: usize },
}

/// The schedule of a run: a pure function of the configuration (seed included).
pub fn schedule(cfg: &SimConfig) -> Vec<Step> {
    let mut rng = SimRng::new(cfg.seed, 0);
    let starting_ws = cfg.nodes * cfg.ws_per_node.min(cfg.max_ws_per_node);
    let steady = |rng: &mut SimRng, out: &mut Vec<Step>, directed: bool| {
        let n = (cfg.mps.max(0.0) * cfg.duration.max(0.0)).round() as usize;
        for i in 0..n {
            let at = i as f64 / cfg.mps;
            let action = if directed {
                Action::Directed {
                    node: rng.below(cfg.nodes),
                }
            } else {
                Action::Send {
                    ws: rng.below(starting_ws),
                }
            };
            out.push(Step { at, action });
        }
    };
    let mut out = Vec::new();
    match cfg.scenario {
        Scenario::Steady => steady(&mut rng, &mut out, false),
        Scenario::Directed => steady(&mut rng, &mut out, true),
        Scenario::Burst => {
            for _ in 0..cfg.burst_size {
                out.push(Step {
                    at: 0.0,
                    action: Action::Send {
                        ws: rng.below(starting_ws),
                    },
                });
            }
        }
        Scenario::NodeFailure => {
            steady(&mut rng, &mut out, false);
            let mut kills = SimRng::new(cfg.seed, 1);
            let mut alive: Vec<usize> = (0..cfg.nodes).collect();
            let most = cfg.nodes / 2;
            let interval = cfg.node_kill_interval.max(0.1);
            let mut at = interval;
            let mut killed = 0;
            while at < cfg.duration && killed < most {
                let mut nodes = Vec::new();
                for _ in 0..cfg.node_kill_count.min(most - killed) {
                    nodes.push(alive.remove(kills.below(alive.len())));
                }
                killed += nodes.len();
                if nodes.is_empty() {
                    break;
                }
                out.push(Step {
                    at,
                    action: Action::Kill { nodes },
                });
                at += interval;
            }
            out.sort_by(|a, b| a.at.total_cmp(&b.at));
        }
        Scenario::Lifecycle => {
            let k = (2 * cfg.nodes).min(LIFECYCLE_MAX_WS);
            out.extend((0..k).map(|_| Step {
                at: 0.0,
                action: Action::Create,
            }));
            out.extend((0..k).map(|ws| Step {
                at: 0.0,
                action: Action::Send { ws },
            }));
            let mut order: Vec<usize> = (0..k).collect();
            for _ in 0..k / 2 {
                let ws = order.remove(rng.below(order.len()));
                out.push(Step {
                    at: 0.0,
                    action: Action::Close { ws },
                });
            }
        }
        Scenario::Idle => {}
    }
    out
}

/// FNV-1a of a schedule: two runs with equal digests pushed the same things at the same
/// offsets.
pub fn digest(steps: &[Step]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for step in steps {
        for byte in format!("{step:?};").bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Runs one whole simulation: nodes, starting workstreams, the schedule, the drain; the
/// report (also written to `--metrics-file`).
pub async fn run(cfg: SimConfig) -> anyhow::Result<Report> {
    let metrics = Arc::new(Metrics::default());
    let cluster = Cluster::start(cfg.clone(), metrics.clone()).await?;
    let report = drive(&cfg, &cluster, &metrics).await;
    cluster.stop();
    let report = report?;
    if let Some(path) = &cfg.metrics_file {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(report)
}

/// Runs the schedule against a started cluster and waits for its turns.
pub async fn drive(
    cfg: &SimConfig,
    cluster: &Arc<Cluster>,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<Report> {
    let steps = schedule(cfg);
    let client = TurnstoneClient::connect(&cfg.redis.settings(), &cfg.redis.prefix).await?;
    if cfg.scenario != Scenario::Lifecycle {
        seed_workstreams(cfg, cluster).await?;
    }
    let mut targets = cluster.workstreams();
    let start = Instant::now();
    if cfg.scenario == Scenario::Idle {
        tokio::time::sleep(Duration::from_secs_f64(cfg.duration.max(0.0))).await;
    }
    let mut i = 0usize;
    for step in &steps {
        tokio::time::sleep_until(start + Duration::from_secs_f64(step.at)).await;
        match &step.action {
            Action::Send { ws } => {
                if *ws == 0 && cfg.scenario == Scenario::Lifecycle && i == 0 {
                    targets = create_all(&client, &steps).await?;
                }
                let Some(ws_id) = targets.get(*ws) else {
                    continue;
                };
                i += 1;
                let msg = SendMessage {
                    ws_id: ws_id.clone(),
                    message: format!("simulated message {i}"),
                    ..SendMessage::default()
                };
                metrics.sent(&msg.correlation_id);
                client.send(msg).await?;
            }
            Action::Directed { node } => {
                i += 1;
                let msg = CreateWorkstreamMessage {
                    target_node: SimConfig::node_id(*node),
                    initial_message: format!("simulated message {i}"),
                    ..CreateWorkstreamMessage::default()
                };
                metrics.sent(&msg.correlation_id);
                client.create_workstream(msg).await?;
            }
            Action::Kill { nodes } => {
                for n in nodes {
                    cluster.kill(*n);
                }
            }
            Action::Create => {}
            Action::Close { ws } => {
                if i > 0 {
                    // Closes come after the sends' turns.
                    drain(cfg, metrics).await;
                    i = 0;
                }
                if let Some(ws_id) = targets.get(*ws) {
                    client.close_workstream(ws_id).await?;
                }
            }
        }
    }
    drain(cfg, metrics).await;
    if cfg.scenario == Scenario::Lifecycle {
        // The closes are done when the workstreams are gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        let left = targets.len() - targets.len() / 2;
        while cluster.workstreams().len() > left && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // One utilisation snapshot after the last turn.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    Ok(metrics.report(cfg.scenario, cfg.seed, cfg.nodes, digest(&steps)))
}

/// Gives every node its starting workstreams.
async fn seed_workstreams(cfg: &SimConfig, cluster: &Arc<Cluster>) -> anyhow::Result<()> {
    let per = cfg.ws_per_node.min(cfg.max_ws_per_node);
    let creates = (0..cluster.nodes().len()).flat_map(|node| (0..per).map(move |_| node));
    let results = futures::future::join_all(creates.map(|node| {
        let cid = turnstone_proto::ids::new_correlation_id();
        async move { cluster.create(node, "", &cid).await }
    }))
    .await;
    for r in results {
        r.map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

/// Lifecycle: every `Create` step as a `create_workstream` on the shared queue, waited for;
/// the new ids in step order.
async fn create_all(client: &TurnstoneClient, steps: &[Step]) -> anyhow::Result<Vec<String>> {
    let creates = steps.iter().filter(|s| s.action == Action::Create).count();
    let made = futures::future::join_all((0..creates).map(|i| {
        let msg = CreateWorkstreamMessage {
            name: format!("lifecycle-{i}"),
            ..CreateWorkstreamMessage::default()
        };
        client.create_workstream_and_wait(msg, Duration::from_secs(30))
    }))
    .await;
    Ok(made.into_iter().collect::<Result<Vec<_>, _>>()?)
}

/// Waits until every pushed message has ended (turn, refusal or interruption), at most
/// `--drain-timeout` seconds.
async fn drain(cfg: &SimConfig, metrics: &Metrics) {
    let deadline = Instant::now() + Duration::from_secs_f64(cfg.drain_timeout.max(0.0));
    while metrics.outstanding() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn cfg(args: &[&str]) -> SimConfig {
        let mut all = vec!["turnstone-sim"];
        all.extend_from_slice(args);
        SimConfig::parse_from(all)
    }

    #[test]
    fn the_seed_fixes_the_schedule() {
        let a = cfg(&[
            "--scenario",
            "node-failure",
            "--nodes",
            "10",
            "--mps",
            "4",
            "--duration",
            "20",
            "--node-kill-interval",
            "3",
            "--node-kill-count",
            "2",
            "--seed",
            "42",
        ]);
        assert_eq!(schedule(&a), schedule(&a));
        assert_eq!(digest(&schedule(&a)), digest(&schedule(&a)));
        let mut b = a.clone();
        b.seed = 43;
        assert_ne!(digest(&schedule(&a)), digest(&schedule(&b)));
        let steps = schedule(&a);
        assert_eq!(
            steps
                .iter()
                .filter(|s| matches!(s.action, Action::Send { .. }))
                .count(),
            80
        );
        // Kills every 3 s, two at a time, never more than half of the nodes, never twice.
        let killed: Vec<usize> = steps
            .iter()
            .filter_map(|s| match &s.action {
                Action::Kill { nodes } => Some(nodes.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(killed.len(), 5);
        let mut unique = killed.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), killed.len());
        assert!(steps.windows(2).all(|w| w[0].at <= w[1].at));
    }

    #[test]
    fn lifecycle_creates_two_per_node_sends_once_and_closes_half() {
        let steps = schedule(&cfg(&["--scenario", "lifecycle", "--nodes", "3"]));
        let count = |f: fn(&Action) -> bool| steps.iter().filter(|s| f(&s.action)).count();
        assert_eq!(count(|a| *a == Action::Create), 6);
        assert_eq!(count(|a| matches!(a, Action::Send { .. })), 6);
        assert_eq!(count(|a| matches!(a, Action::Close { .. })), 3);
        let big = schedule(&cfg(&["--scenario", "lifecycle", "--nodes", "100"]));
        assert_eq!(
            big.iter().filter(|s| s.action == Action::Create).count(),
            50
        );
    }
}
