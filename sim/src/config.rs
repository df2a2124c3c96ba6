//! The simulator's knobs (the original's `turnstone-sim` flags, cluster spec §9, plus the
//! Redis flags every Turnstone service shares).

use std::path::PathBuf;
use std::time::Duration;

use turnstone_queue::RedisArgs;

/// Which traffic the simulator's producer generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// `--mps` sends per second for `--duration` seconds, each to a random workstream.
    Steady,
    /// `--burst-size` sends pushed at once.
    Burst,
    /// Steady, plus `--node-kill-count` nodes killed every `--node-kill-interval` seconds,
    /// up to half of the nodes.
    NodeFailure,
    /// Steady rate, but each message is a `create_workstream` with `target_node` and an
    /// `initial_message`: the directed queues and create-then-turn path.
    Directed,
    /// Create two workstreams per node (at most 50), one send to each, close half.
    Lifecycle,
    /// No producer: only the nodes, until `--duration` ends (for external clients and the
    /// console).
    Idle,
}

/// Every setting of one simulation run.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "turnstone-sim",
    about = "Simulated Turnstone nodes on Redis, and a load generator with a JSON report"
)]
pub struct SimConfig {
    /// `--redis-url` (or host/port/db), credentials, TLS files and `--prefix`.
    #[command(flatten)]
    pub redis: RedisArgs,
    #[arg(long, value_enum, default_value = "steady")]
    pub scenario: Scenario,
    /// Number of simulated nodes (`sim-0000` …).
    #[arg(long, default_value_t = 10)]
    pub nodes: usize,
    /// Sends per second (steady, node_failure, directed).
    #[arg(long, default_value_t = 5.0)]
    pub mps: f64,
    /// Seconds of sending (steady, node_failure, directed) or of running (idle).
    #[arg(long, default_value_t = 30.0)]
    pub duration: f64,
    /// Sends of the burst scenario.
    #[arg(long, default_value_t = 100)]
    pub burst_size: usize,
    /// Nodes killed at each kill (node_failure).
    #[arg(long, default_value_t = 1)]
    pub node_kill_count: usize,
    /// Seconds between kills (node_failure).
    #[arg(long, default_value_t = 10.0)]
    pub node_kill_interval: f64,
    /// Mean seconds before a simulated LLM response starts.
    #[arg(long, default_value_t = 2.0)]
    pub llm_latency: f64,
    /// Standard deviation of `--llm-latency`.
    #[arg(long, default_value_t = 0.5)]
    pub llm_latency_sd: f64,
    /// Mean tokens per response.
    #[arg(long, default_value_t = 200.0)]
    pub tokens: f64,
    /// Standard deviation of `--tokens`.
    #[arg(long, default_value_t = 50.0)]
    pub tokens_sd: f64,
    /// Tokens streamed per second (0: the whole response at once).
    #[arg(long, default_value_t = 50.0)]
    pub tokens_per_sec: f64,
    /// Tokens per `content` event.
    #[arg(long, default_value_t = 20)]
    pub tokens_per_chunk: usize,
    /// Seconds one tool call takes.
    #[arg(long, default_value_t = 0.5)]
    pub tool_latency: f64,
    /// Share of tool calls that fail (0..1).
    #[arg(long, default_value_t = 0.02)]
    pub tool_failure_rate: f64,
    /// Most tool rounds in one turn (each turn draws 0..=this many).
    #[arg(long, default_value_t = 3)]
    pub max_tool_rounds: u32,
    /// Workstream capacity of each node (the heartbeat's `max_ws`); a create at capacity
    /// evicts the oldest idle workstream, as a real node does.
    #[arg(long, default_value_t = 10)]
    pub max_ws_per_node: usize,
    /// Workstreams each node starts with (steady, burst, node_failure targets).
    #[arg(long, default_value_t = 2)]
    pub ws_per_node: usize,
    /// Context window reported in `status`.
    #[arg(long, default_value_t = 131_072)]
    pub context_window: u64,
    /// Seeds the schedule (sends, targets, kills) and the simulated latencies.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Heartbeat TTL in seconds (refreshed every TTL/2), as the bridge's `--heartbeat-ttl`.
    #[arg(long, default_value_t = 60)]
    pub heartbeat_ttl: u64,
    /// Ownership lease TTL in seconds, as the bridge's `--lease-ttl`.
    #[arg(long, default_value_t = 120)]
    pub lease_ttl: u64,
    /// Seconds to wait after the last send for the turns still running.
    #[arg(long, default_value_t = 120.0)]
    pub drain_timeout: f64,
    /// Blocking-pop dispatchers each watch this many node queues (plus the shared queue).
    #[arg(long, default_value_t = 50)]
    pub nodes_per_dispatcher: usize,
    /// Writes the JSON report here (it is always printed on stdout).
    #[arg(long)]
    pub metrics_file: Option<PathBuf>,
    /// Signs heartbeats as a bridge does, so a console holding the same secret trusts the
    /// simulated nodes.
    #[arg(long, env = "TURNSTONE_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,
}

impl SimConfig {
    /// The heartbeat TTL (at least 2 s, so TTL/2 is a whole second or more).
    pub fn heartbeat_ttl(&self) -> Duration {
        Duration::from_secs(self.heartbeat_ttl.max(2))
    }

    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl.max(3))
    }

    /// `sim-NNNN` (four digits up to 9,999 nodes, as the original).
    pub fn node_id(index: usize) -> String {
        format!("sim-{index:04}")
    }
}
