//! What a run measured, and the JSON report (cluster spec §9's fields, plus the counts
//! that show nothing was lost or duplicated). Times are Unix epoch seconds, the wire's
//! `timestamp`, so a turn's latency runs from its message's `timestamp` to its
//! `turn_complete`, whoever pushed the message.

use std::collections::{BTreeMap, HashMap, HashSet};

use parking_lot::Mutex;
use serde::Serialize;
use turnstone_proto::ids::now_timestamp;

use crate::config::Scenario;

/// Utilisation figures come from the snapshots of the last this-many seconds.
const UTILIZATION_WINDOW_SECS: f64 = 5.0;

/// Counters shared by the nodes (turns, errors) and the producer (sends).
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    first_inject: Option<f64>,
    last_completion: Option<f64>,
    sent: HashSet<String>,
    completed: HashMap<String, u64>,
    latencies: Vec<f64>,
    refused: HashSet<String>,
    errors: u64,
    interrupted: HashSet<String>,
    tool_calls: u64,
    tool_failures: u64,
    turns_per_node: BTreeMap<String, u64>,
    killed_nodes: Vec<String>,
    running: u64,
    max_running: u64,
    /// `(time, workstreams of each live node)`.
    snapshots: Vec<(f64, Vec<usize>)>,
}

impl Metrics {
    /// The producer pushed a message that should end in one turn.
    pub fn sent(&self, correlation_id: &str) {
        let now = now_timestamp();
        let mut m = self.inner.lock();
        m.first_inject.get_or_insert(now);
        m.sent.insert(correlation_id.to_string());
    }

    /// How many distinct messages the producer pushed.
    pub fn sent_count(&self) -> usize {
        self.inner.lock().sent.len()
    }

    /// Messages pushed and neither completed, refused nor interrupted yet.
    pub fn outstanding(&self) -> usize {
        let m = self.inner.lock();
        m.sent
            .iter()
            .filter(|c| {
                !m.completed.contains_key(*c)
                    && !m.refused.contains(*c)
                    && !m.interrupted.contains(*c)
            })
            .count()
    }

    pub fn turn_started(&self) {
        let mut m = self.inner.lock();
        m.running += 1;
        m.max_running = m.max_running.max(m.running);
    }

    /// A turn published its `turn_complete`; `started` is its message's `timestamp`.
    pub fn turn_completed(&self, node_id: &str, correlation_id: &str, started: f64) {
        let now = now_timestamp();
        let mut m = self.inner.lock();
        m.running = m.running.saturating_sub(1);
        m.last_completion = Some(now);
        *m.completed.entry(correlation_id.to_string()).or_default() += 1;
        if started > 0.0 {
            m.latencies.push((now - started).max(0.0));
        }
        *m.turns_per_node.entry(node_id.to_string()).or_default() += 1;
    }

    /// A turn stopped because its node was killed.
    pub fn turn_interrupted(&self, correlation_id: &str) {
        let mut m = self.inner.lock();
        m.running = m.running.saturating_sub(1);
        m.interrupted.insert(correlation_id.to_string());
    }

    /// A message was answered with `ack` status `error`.
    pub fn refused(&self, correlation_id: &str) {
        let mut m = self.inner.lock();
        m.errors += 1;
        m.refused.insert(correlation_id.to_string());
    }

    pub fn tool_call(&self, failed: bool) {
        let mut m = self.inner.lock();
        m.tool_calls += 1;
        m.tool_failures += u64::from(failed);
    }

    pub fn node_killed(&self, node_id: &str) {
        self.inner.lock().killed_nodes.push(node_id.to_string());
    }

    /// Records the workstream count of every live node now.
    pub fn snapshot(&self, ws_per_live_node: Vec<usize>) {
        let now = now_timestamp();
        let mut m = self.inner.lock();
        m.snapshots.push((now, ws_per_live_node));
        // Older snapshots are never read again.
        m.snapshots
            .retain(|(t, _)| now - t <= UTILIZATION_WINDOW_SECS * 2.0);
    }

    /// The report of the run so far.
    pub fn report(&self, scenario: Scenario, seed: u64, nodes: usize, schedule: u64) -> Report {
        let m = self.inner.lock();
        let total_turns: u64 = m.completed.values().sum();
        let duplicated: u64 = m.completed.values().map(|n| n.saturating_sub(1)).sum();
        let lost = m
            .sent
            .iter()
            .filter(|c| {
                !m.completed.contains_key(*c)
                    && !m.refused.contains(*c)
                    && !m.interrupted.contains(*c)
            })
            .count() as u64;
        let duration = match (m.first_inject, m.last_completion) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => 0.0,
        };
        let per_sec = |n: f64| if duration > 0.0 { n / duration } else { 0.0 };
        let mut lat = m.latencies.clone();
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| -> f64 {
            if lat.is_empty() {
                return 0.0;
            }
            let rank = (p / 100.0 * lat.len() as f64).ceil() as usize;
            lat[rank.clamp(1, lat.len()) - 1]
        };
        let mean = if lat.is_empty() {
            0.0
        } else {
            lat.iter().sum::<f64>() / lat.len() as f64
        };
        let now = now_timestamp();
        let recent: Vec<&Vec<usize>> = m
            .snapshots
            .iter()
            .filter(|(t, _)| now - t <= UTILIZATION_WINDOW_SECS)
            .map(|(_, s)| s)
            .collect();
        let utilization = match recent.last() {
            Some(last) => Utilization {
                mean_ws_per_node: if last.is_empty() {
                    0.0
                } else {
                    last.iter().sum::<usize>() as f64 / last.len() as f64
                },
                max_ws_per_node: recent
                    .iter()
                    .flat_map(|s| s.iter().copied())
                    .max()
                    .unwrap_or(0),
                nodes_with_zero_ws: last.iter().filter(|n| **n == 0).count(),
                max_concurrent_turns: m.max_running,
            },
            None => Utilization {
                max_concurrent_turns: m.max_running,
                ..Utilization::default()
            },
        };
        Report {
            scenario,
            seed,
            schedule_digest: format!("{schedule:016x}"),
            nodes,
            total_sent: m.sent.len() as u64,
            total_turns,
            total_errors: m.errors,
            lost,
            duplicated,
            interrupted_turns: m.interrupted.len() as u64,
            tool_calls: m.tool_calls,
            tool_failures: m.tool_failures,
            duration_seconds: round3(duration),
            throughput: Throughput {
                messages_per_sec: round3(per_sec(m.sent.len() as f64)),
                turns_per_sec: round3(per_sec(total_turns as f64)),
            },
            latency: Latency {
                p50: round3(pct(50.0)),
                p90: round3(pct(90.0)),
                p99: round3(pct(99.0)),
                mean: round3(mean),
                max: round3(lat.last().copied().unwrap_or(0.0)),
            },
            utilization,
            node_kills: m.killed_nodes.len() as u64,
            killed_nodes: m.killed_nodes.clone(),
            turns_per_node: m.turns_per_node.clone(),
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The JSON report of one run (field by field in `docs/simulator.md`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: Scenario,
    pub seed: u64,
    /// FNV-1a of the schedule (sends, targets, kills): equal digests, equal schedules.
    pub schedule_digest: String,
    pub nodes: usize,
    /// Distinct messages the producer pushed.
    pub total_sent: u64,
    /// `turn_complete` events published (a duplicate would count twice).
    pub total_turns: u64,
    /// Messages answered with an `ack` of status `error`.
    pub total_errors: u64,
    /// Pushed messages with no turn, no refusal and no interruption when the run ended.
    pub lost: u64,
    /// Extra `turn_complete`s for a correlation id that had one already.
    pub duplicated: u64,
    /// Turns cut short because their node was killed.
    pub interrupted_turns: u64,
    pub tool_calls: u64,
    pub tool_failures: u64,
    /// First push to last `turn_complete`.
    pub duration_seconds: f64,
    pub throughput: Throughput,
    pub latency: Latency,
    pub utilization: Utilization,
    pub node_kills: u64,
    pub killed_nodes: Vec<String>,
    pub turns_per_node: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Throughput {
    pub messages_per_sec: f64,
    pub turns_per_sec: f64,
}

/// Seconds from a message's `timestamp` to its `turn_complete`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
    pub max: f64,
}

/// Workstreams per live node over the last 5 s of the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Utilization {
    pub mean_ws_per_node: f64,
    pub max_ws_per_node: usize,
    pub nodes_with_zero_ws: usize,
    /// Most turns running at the same moment (the original ran one per dispatcher).
    pub max_concurrent_turns: u64,
}
