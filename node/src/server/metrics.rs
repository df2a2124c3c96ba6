//! `GET /metrics`: the original's Prometheus metrics (node spec §1.3.2: names, types, labels,
//! order, buckets) in the text exposition format 0.0.4, plus ours — turn duration, provider
//! first byte, dropped SSE events, event-loop lag.
//!
//! Where the numbers come from:
//! - workstream activity (sends, tokens, tool calls, errors, turn timings, evictions) is
//!   folded from the node-wide event log by a background task that owns its subscription,
//!   so handlers carry no metric calls;
//! - HTTP counts and latencies come from [`track_http`], the outermost middleware after the
//!   request's log span (SSE responses are recorded when their stream ends); gRPC calls
//!   from [`turnstone_grpc::metrics::observe`] on the gRPC services (by RPC and status code);
//! - live facts (workstreams, breaker, context ratios) are read at scrape time, and so are
//!   the store's ([`StoreFacts`]: the batching writer's counters, PostgreSQL's search backlog).
//!
//! The text is written with the services' one writer, [`turnstone_runtime::metrics`] (why not
//! `prometheus-client`: see there). Unlike the original, label values are escaped, so the
//! output passes `promtool check metrics`.
//!
//! This module knows the node's state and its event types; it knows nothing of Redis or the
//! cluster, and of storage only what [`StoreFacts`] reads.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use turnstone_engine::{Event, Item, WsState};
use turnstone_grpc::metrics::GrpcCalls;
use turnstone_llm::BreakerState;
use turnstone_runtime::metrics::{Exposition, fmt_g};

use super::state::{Node, NodeEvent, NodeEventKind};
use super::views;

pub use turnstone_runtime::metrics::{CONTENT_TYPE, Histogram};

/// Upper bounds of the original's latency histograms (seconds), `+Inf` implied.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets of the whole-turn histogram: a turn includes model and tool time.
pub const TURN_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// How often the event-loop lag probe wakes up.
pub const LAG_PROBE_PERIOD: Duration = Duration::from_millis(100);

/// Most distinct `(method, endpoint)` series kept; requests beyond it are recorded under
/// the endpoint [`OVERFLOW_ENDPOINT`]. The endpoint is the matched route template, so the
/// node's routes fit many times over; the cap guards against methods clients make up.
pub const MAX_HTTP_SERIES: usize = 512;

/// Endpoint label of requests that matched no route (whatever their path).
pub const UNMATCHED_ENDPOINT: &str = "__unmatched__";

/// Distinct `tool` label values; further names are counted under [`OVERFLOW_ENDPOINT`].
pub const MAX_TOOL_LABELS: usize = 256;

/// Endpoint label of requests past [`MAX_HTTP_SERIES`] (and tool label past [`MAX_TOOL_LABELS`]).
pub const OVERFLOW_ENDPOINT: &str = "__other__";

const TOKEN_TYPES: [&str; 4] = ["prompt", "completion", "cache_creation", "cache_read"];

#[derive(Debug, Clone)]
struct HttpSeries {
    statuses: BTreeMap<u16, u64>,
    duration: Histogram,
}

/// Per-workstream tallies folded from its events.
#[derive(Debug, Clone, Default)]
struct WsTally {
    prompt_tokens: u64,
    completion_tokens: u64,
    messages: u64,
    tool_calls: BTreeMap<String, u64>,
    /// When the running turn started (its first `thinking` state).
    turn_started: Option<Instant>,
    /// When the current model request started, until its first content or reasoning.
    thinking_since: Option<Instant>,
}

/// A per-workstream counter family: name, help, value.
type WsCounter = (&'static str, &'static str, fn(&WsTally) -> u64);

/// What the event feeder has folded so far.
#[derive(Debug, Clone)]
struct Folded {
    messages_sent: u64,
    tokens: [u64; 4],
    tool_calls: BTreeMap<String, u64>,
    errors: u64,
    context_ratio: f64,
    evicted: u64,
    turn_duration: Histogram,
    first_byte: Histogram,
    last_turn_completed: Option<Instant>,
    per_ws: HashMap<String, WsTally>,
    /// Judge verdicts by `(tier, risk_level)`, both from closed sets ([`verdict_labels`]).
    verdicts: BTreeMap<(&'static str, &'static str), u64>,
    /// How long the LLM judge took per verdict (`intent_verdict.latency_ms`).
    judge_latency: Histogram,
}

impl Default for Folded {
    fn default() -> Self {
        Self {
            messages_sent: 0,
            tokens: [0; 4],
            tool_calls: BTreeMap::new(),
            errors: 0,
            context_ratio: 0.0,
            evicted: 0,
            turn_duration: Histogram::new(TURN_BUCKETS),
            first_byte: Histogram::new(LATENCY_BUCKETS),
            last_turn_completed: None,
            per_ws: HashMap::new(),
            verdicts: BTreeMap::new(),
            judge_latency: Histogram::new(LATENCY_BUCKETS),
        }
    }
}

/// The labels of a verdict, from closed sets (anything unexpected is `other`), so a
/// verdict cannot grow the series.
fn verdict_labels(v: &turnstone_proto::sse::Verdict) -> (&'static str, &'static str) {
    let tier = match v.tier.as_str() {
        "heuristic" => "heuristic",
        "llm" => "llm",
        _ => "other",
    };
    let risk = turnstone_governance::RiskLevel::parse(&v.risk_level)
        .map(turnstone_governance::RiskLevel::as_str)
        .unwrap_or("other");
    (tier, risk)
}

/// Truncations reported by logs, kept monotonic across closed workstreams.
#[derive(Debug, Default)]
struct DroppedTally {
    /// Last count seen per live workstream log.
    live: HashMap<String, u64>,
    /// Counts of workstreams that have closed since.
    retired: u64,
}

/// The node's metric state. One per [`Node`].
#[derive(Debug)]
pub struct Metrics {
    http: Mutex<BTreeMap<(String, String), HttpSeries>>,
    /// gRPC calls by method and code (`turnstone_grpc_*`).
    pub grpc: Arc<GrpcCalls>,
    folded: Mutex<Folded>,
    dropped: Mutex<DroppedTally>,
    sse_active: AtomicI64,
    ratelimit_rejected: AtomicU64,
    lag_micros: AtomicU64,
    started: AtomicBool,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Metrics {
    fn drop(&mut self) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self {
            http: Mutex::new(BTreeMap::new()),
            grpc: Arc::new(GrpcCalls::new("turnstone_grpc")),
            folded: Mutex::new(Folded::default()),
            dropped: Mutex::new(DroppedTally::default()),
            sse_active: AtomicI64::new(0),
            ratelimit_rejected: AtomicU64::new(0),
            lag_micros: AtomicU64::new(0),
            started: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// Starts, once, the tasks that feed this node's metrics: the event folder (which reads
    /// everything the node-wide log still retains, then follows it) and the event-loop lag
    /// probe. The tasks belong to the node's `Metrics` and end with it. Outside a tokio
    /// runtime nothing starts (and a later call may start them).
    pub fn start(node: &Arc<Node>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let metrics = &node.metrics;
        if metrics.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let sub = node.node_log.subscribe(Some(0));
        let folder = runtime.spawn(fold_events(Arc::downgrade(metrics), sub));
        let probe = runtime.spawn(probe_lag(Arc::downgrade(metrics)));
        metrics.tasks.lock().extend([folder, probe]);
    }

    /// Records one finished HTTP request.
    pub fn record_http(&self, method: &str, endpoint: &str, status: u16, elapsed: Duration) {
        let mut http = self.http.lock();
        let mut key = (method.to_string(), endpoint.to_string());
        if !http.contains_key(&key) && http.len() >= MAX_HTTP_SERIES {
            key.1 = OVERFLOW_ENDPOINT.to_string();
        }
        let series = http.entry(key).or_insert_with(|| HttpSeries {
            statuses: BTreeMap::new(),
            duration: Histogram::new(LATENCY_BUCKETS),
        });
        *series.statuses.entry(status).or_insert(0) += 1;
        series.duration.observe(elapsed.as_secs_f64());
    }

    /// Counts one request refused by the rate limiter.
    pub fn record_ratelimit_rejection(&self) {
        self.ratelimit_rejected.fetch_add(1, Ordering::Relaxed);
    }

    pub fn ratelimit_rejected(&self) -> u64 {
        self.ratelimit_rejected.load(Ordering::Relaxed)
    }

    /// Open SSE responses (all kinds).
    pub fn sse_connections(&self) -> i64 {
        self.sse_active.load(Ordering::Relaxed)
    }

    /// How late the last lag probe woke up.
    pub fn event_loop_lag(&self) -> Duration {
        Duration::from_micros(self.lag_micros.load(Ordering::Relaxed))
    }

    /// Time since the last turn of any workstream completed (`None` before the first).
    pub fn last_turn_completed_age(&self) -> Option<Duration> {
        self.folded
            .lock()
            .last_turn_completed
            .map(|at| Instant::now().saturating_duration_since(at))
    }

    /// Accepted sends so far.
    pub fn messages_sent(&self) -> u64 {
        self.folded.lock().messages_sent
    }

    /// Folds one entry of the node-wide log, as seen at `now`.
    pub fn observe(&self, entry: &NodeEvent, now: Instant) {
        let mut f = self.folded.lock();
        let env = match &entry.kind {
            NodeEventKind::Ws(env) => env,
            NodeEventKind::Closed { ws_id, reason, .. } => {
                if reason == "evicted" {
                    f.evicted += 1;
                }
                f.per_ws.remove(ws_id);
                return;
            }
            NodeEventKind::Renamed { .. } | NodeEventKind::Created { .. } => return,
        };
        let f = &mut *f;
        let ws = f.per_ws.entry(env.ws_id.to_string()).or_default();
        match &env.event {
            // A turn's first request: one accepted send (busy or replayed sends start none).
            Event::StateChange {
                state: WsState::Thinking,
            } if ws.turn_started.is_none() => {
                ws.turn_started = Some(now);
                ws.messages += 1;
                f.messages_sent += 1;
            }
            Event::ThinkingStart => ws.thinking_since = Some(now),
            Event::Content { .. } | Event::Reasoning { .. } => {
                if let Some(since) = ws.thinking_since.take() {
                    f.first_byte
                        .observe(now.saturating_duration_since(since).as_secs_f64());
                }
            }
            // (`thinking_stop` precedes the first delta, so only the stream's end clears.)
            Event::StreamEnd => ws.thinking_since = None,
            Event::ToolResult { name, .. } => {
                // Tool names come from the model (unknown ones too): cap the label set.
                let label =
                    if f.tool_calls.contains_key(name) || f.tool_calls.len() < MAX_TOOL_LABELS {
                        name.as_str()
                    } else {
                        OVERFLOW_ENDPOINT
                    };
                *ws.tool_calls.entry(label.to_string()).or_insert(0) += 1;
                *f.tool_calls.entry(label.to_string()).or_insert(0) += 1;
            }
            Event::Status(s) => {
                for (total, n) in f.tokens.iter_mut().zip([
                    s.prompt_tokens,
                    s.completion_tokens,
                    s.cache_creation_tokens,
                    s.cache_read_tokens,
                ]) {
                    *total += n;
                }
                ws.prompt_tokens += s.prompt_tokens;
                ws.completion_tokens += s.completion_tokens;
                if s.context_window > 0 {
                    f.context_ratio = s.total_tokens as f64 / s.context_window as f64;
                }
            }
            Event::Error { .. } => f.errors += 1,
            // Every verdict is on the first event that carries its item: the approval request
            // (asked), or `tool_info` (a batch auto-review ran unasked).
            Event::ApproveRequest { items, .. } | Event::ToolInfo { items } => {
                for verdict in items.iter().filter_map(|i| i.verdict.as_ref()) {
                    *f.verdicts.entry(verdict_labels(verdict)).or_insert(0) += 1;
                }
            }
            // LLM-tier verdicts arrive on their own.
            Event::IntentVerdict(verdict) => {
                *f.verdicts.entry(verdict_labels(verdict)).or_insert(0) += 1;
                f.judge_latency.observe(verdict.latency_ms as f64 / 1000.0);
            }
            Event::TurnComplete { .. } => {
                ws.thinking_since = None;
                if let Some(started) = ws.turn_started.take() {
                    f.turn_duration
                        .observe(now.saturating_duration_since(started).as_secs_f64());
                }
                f.last_turn_completed = Some(now);
            }
            _ => {}
        }
    }

    /// Truncations reported to subscribers of the node log and every workstream log.
    fn dropped_events(&self, node: &Node) -> u64 {
        let mut d = self.dropped.lock();
        let live: HashMap<String, u64> = node
            .manager
            .list()
            .iter()
            .map(|w| (w.id().to_string(), w.log().truncation_count()))
            .collect();
        let gone: u64 = d
            .live
            .iter()
            .filter(|(id, _)| !live.contains_key(*id))
            .map(|(_, n)| *n)
            .sum();
        d.retired += gone;
        d.live = live;
        node.node_log.truncation_count() + d.retired + d.live.values().sum::<u64>()
    }

    /// The exposition of every metric, in the original's order, then ours; `store` when the
    /// node persists.
    pub fn render(&self, node: &Node, store: Option<&StoreFacts>) -> String {
        let mut x = Exposition::default();
        let workstreams = node.manager.list();

        x.family(
            "turnstone_build_info",
            "gauge",
            "Build information (always 1).",
        );
        x.sample(
            "turnstone_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("model", &node.options.model),
            ],
            "1",
        );
        x.family(
            "turnstone_uptime_seconds",
            "gauge",
            "Seconds since the node started.",
        );
        x.sample(
            "turnstone_uptime_seconds",
            &[],
            fmt_g(node.uptime().as_secs_f64()),
        );
        x.family(
            "turnstone_workstreams_active_total",
            "gauge",
            "Live workstreams.",
        );
        x.sample("turnstone_workstreams_active_total", &[], workstreams.len());
        let mut by_state: BTreeMap<&str, u64> = [
            WsState::Attention,
            WsState::Error,
            WsState::Idle,
            WsState::Running,
            WsState::Thinking,
        ]
        .iter()
        .map(|s| (s.as_str(), 0))
        .collect();
        for w in &workstreams {
            *by_state.entry(w.state().as_str()).or_insert(0) += 1;
        }
        x.family(
            "turnstone_workstreams_by_state",
            "gauge",
            "Live workstreams by state.",
        );
        for (state, n) in &by_state {
            x.sample("turnstone_workstreams_by_state", &[("state", state)], n);
        }

        // Snapshots: no lock is held while the text is written.
        let http = self.http.lock().clone();
        let f = self.folded.lock().clone();
        {
            x.family(
                "turnstone_http_requests_total",
                "counter",
                "HTTP requests by method, route template and status.",
            );
            for ((method, endpoint), series) in http.iter() {
                for (status, n) in &series.statuses {
                    x.sample(
                        "turnstone_http_requests_total",
                        &[
                            ("method", method),
                            ("endpoint", endpoint),
                            ("status_code", &status.to_string()),
                        ],
                        n,
                    );
                }
            }
            x.family(
                "turnstone_http_request_duration_seconds",
                "histogram",
                "HTTP request duration (SSE: the whole stream).",
            );
            for ((method, endpoint), series) in http.iter() {
                x.histogram(
                    "turnstone_http_request_duration_seconds",
                    &[("method", method), ("endpoint", endpoint)],
                    &series.duration,
                );
            }
        }

        let dropped = self.dropped_events(node);
        x.counter(
            "turnstone_messages_sent_total",
            "Accepted sends.",
            f.messages_sent,
        );
        x.family(
            "turnstone_tokens_total",
            "counter",
            "Tokens reported at the end of turns, by type.",
        );
        for (kind, n) in TOKEN_TYPES.iter().zip(f.tokens) {
            x.sample("turnstone_tokens_total", &[("type", kind)], n);
        }
        x.family(
            "turnstone_tool_calls_total",
            "counter",
            "Tool calls by tool.",
        );
        for (tool, n) in &f.tool_calls {
            x.sample("turnstone_tool_calls_total", &[("tool", tool)], n);
        }
        x.counter("turnstone_errors_total", "Error events emitted.", f.errors);
        x.gauge(
            "turnstone_context_window_used_ratio",
            "Context window share used by the last reported turn of any workstream.",
            f.context_ratio,
        );
        x.family(
            "turnstone_sse_connections_active",
            "gauge",
            "Open SSE connections (all streams).",
        );
        x.sample(
            "turnstone_sse_connections_active",
            &[],
            self.sse_connections(),
        );
        x.counter(
            "turnstone_ratelimit_rejected_total",
            "Requests refused by the rate limiter.",
            self.ratelimit_rejected(),
        );
        let (up, circuit) = match node.manager.engine().provider().breaker().state() {
            BreakerState::Closed => (1, 0),
            BreakerState::Open => (0, 1),
            BreakerState::HalfOpen => (0, 2),
        };
        x.family(
            "turnstone_backend_up",
            "gauge",
            "1 when the model backend's circuit is closed.",
        );
        x.sample("turnstone_backend_up", &[], up);
        x.family(
            "turnstone_circuit_state",
            "gauge",
            "Model backend circuit: 0 closed, 1 open, 2 half_open.",
        );
        x.sample("turnstone_circuit_state", &[], circuit);
        x.counter(
            "turnstone_workstreams_evicted_total",
            "Workstreams evicted to make room.",
            f.evicted,
        );
        x.family(
            "turnstone_judge_enabled",
            "gauge",
            "1 when the intent judge (heuristic verdicts, LLM tier when configured) is on.",
        );
        let judge_on = node.manager.engine().config().judge.enabled;
        x.sample("turnstone_judge_enabled", &[], u8::from(judge_on));
        if !f.verdicts.is_empty() {
            x.family(
                "turnstone_judge_verdicts_total",
                "counter",
                "Intent judge verdicts by tier and risk level.",
            );
            for ((tier, risk), n) in &f.verdicts {
                x.sample(
                    "turnstone_judge_verdicts_total",
                    &[("tier", tier), ("risk_level", risk)],
                    n,
                );
            }
        }
        if f.judge_latency.count() > 0 {
            x.family(
                "turnstone_judge_llm_latency_seconds",
                "histogram",
                "Time the LLM judge took for one verdict.",
            );
            x.histogram("turnstone_judge_llm_latency_seconds", &[], &f.judge_latency);
        }

        if !workstreams.is_empty() {
            // Names only behind `--metrics-auth`: a public scrape shows ids alone.
            let ids: Vec<(String, String)> = workstreams
                .iter()
                .map(|w| {
                    let name = if node.options.metrics_auth {
                        w.name()
                    } else {
                        String::new()
                    };
                    (w.id().to_string(), name)
                })
                .collect();
            let empty = WsTally::default();
            let tally = |id: &str| f.per_ws.get(id).unwrap_or(&empty);
            let per_ws: [WsCounter; 3] = [
                (
                    "turnstone_workstream_prompt_tokens_total",
                    "Prompt tokens per workstream.",
                    |t| t.prompt_tokens,
                ),
                (
                    "turnstone_workstream_completion_tokens_total",
                    "Completion tokens per workstream.",
                    |t| t.completion_tokens,
                ),
                (
                    "turnstone_workstream_messages_total",
                    "Accepted sends per workstream.",
                    |t| t.messages,
                ),
            ];
            x.family(
                "turnstone_workstream_info",
                "gauge",
                "One line per live workstream.",
            );
            for (id, name) in &ids {
                x.sample(
                    "turnstone_workstream_info",
                    &[("ws_id", id), ("name", name)],
                    "1",
                );
            }
            for (metric, help, value) in per_ws {
                x.family(metric, "counter", help);
                for (id, name) in &ids {
                    x.sample(metric, &[("ws_id", id), ("name", name)], value(tally(id)));
                }
            }
            x.family(
                "turnstone_workstream_tool_calls_total",
                "counter",
                "Tool calls per workstream and tool.",
            );
            for (id, name) in &ids {
                for (tool, n) in &tally(id).tool_calls {
                    x.sample(
                        "turnstone_workstream_tool_calls_total",
                        &[("ws_id", id), ("name", name), ("tool", tool)],
                        n,
                    );
                }
            }
            x.family(
                "turnstone_workstream_context_ratio",
                "gauge",
                "Context window share used per workstream.",
            );
            for (w, (id, name)) in workstreams.iter().zip(&ids) {
                x.sample(
                    "turnstone_workstream_context_ratio",
                    &[("ws_id", id), ("name", name)],
                    fmt_g(views::context_ratio(node, w)),
                );
            }
        }

        x.family(
            "turnstone_turn_duration_seconds",
            "histogram",
            "Time from an accepted send to its turn_complete.",
        );
        x.histogram("turnstone_turn_duration_seconds", &[], &f.turn_duration);
        x.family(
            "turnstone_provider_first_byte_seconds",
            "histogram",
            "Time from the start of a model request to its first content or reasoning.",
        );
        x.histogram("turnstone_provider_first_byte_seconds", &[], &f.first_byte);
        x.counter(
            "turnstone_sse_events_dropped_total",
            "Times a subscriber was told that events it wanted are gone.",
            dropped,
        );
        x.gauge(
            "turnstone_event_loop_lag_seconds",
            "How late the last 100 ms lag probe woke up.",
            self.event_loop_lag().as_secs_f64(),
        );
        // The output guard's counters are the engine's (sub-agents' results included).
        let guard = node.manager.engine().output_guard_counts();
        x.family(
            "turnstone_output_guard_flags_total",
            "counter",
            "Tool results the output guard flagged, by flag (a result can raise several).",
        );
        for (flag, n) in &guard.flags {
            x.sample("turnstone_output_guard_flags_total", &[("flag", flag)], n);
        }
        x.counter(
            "turnstone_output_guard_warnings_total",
            "Tool results that produced an output_warning.",
            guard.warnings,
        );
        x.counter(
            "turnstone_output_guard_redactions_total",
            "Tool results (and sub-agent answers) whose secrets were redacted.",
            guard.redactions,
        );
        if let Some(reranker) = &node.options.reranker {
            x.family(
                "turnstone_rerank_requests_total",
                "counter",
                "Rerank requests that re-ordered results, by use.",
            );
            for (use_, n) in reranker.reranked() {
                x.sample("turnstone_rerank_requests_total", &[("use", use_)], n);
            }
            x.family(
                "turnstone_rerank_fallbacks_total",
                "counter",
                "Rerank requests that failed, so the native order was kept, by use and reason.",
            );
            for ((use_, reason), n) in reranker.fallbacks() {
                x.sample(
                    "turnstone_rerank_fallbacks_total",
                    &[("use", use_), ("reason", reason)],
                    n,
                );
            }
        }
        x.gauge(
            "turnstone_workstreams_hibernated",
            "Hibernated workstreams (out of memory, rehydrated on use).",
            node.manager.hibernated_len() as f64,
        );
        x.counter(
            "turnstone_workstream_hibernations_total",
            "Workstreams that went to hibernation.",
            node.hibernation.hibernations(),
        );
        x.counter(
            "turnstone_workstream_rehydrations_total",
            "Hibernated workstreams brought back into memory.",
            node.hibernation.rehydrations(),
        );
        if let Some(store) = store {
            store.render(&mut x);
        }
        self.grpc.render(&mut x);
        x.finish()
    }
}

/// How long a scrape waits for the store's backlog count before leaving it out: a slow
/// database must not make `/metrics` slow (nor fail it).
pub const STORE_FACTS_TIMEOUT: Duration = Duration::from_secs(2);

/// The store's side of `/metrics`, read at scrape time.
#[derive(Debug, Clone, Copy)]
pub struct StoreFacts {
    /// The batching writer's counters since the node started.
    pub writer: turnstone_store::WriterCounters,
    /// Committed messages not yet search-indexed; `None` when the count failed or took
    /// longer than [`STORE_FACTS_TIMEOUT`] (the sample is left out, not guessed).
    pub search_backlog: Option<u64>,
}

impl StoreFacts {
    pub async fn read(persistence: &crate::persist::Persistence) -> Self {
        let search_backlog =
            match tokio::time::timeout(STORE_FACTS_TIMEOUT, persistence.store.search_backlog())
                .await
            {
                Ok(Ok(n)) => Some(n),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot count the search backlog for /metrics");
                    None
                }
                Err(_) => {
                    tracing::warn!("counting the search backlog for /metrics timed out");
                    None
                }
            };
        Self {
            writer: persistence.writer.counters(),
            search_backlog,
        }
    }

    fn render(&self, x: &mut Exposition) {
        let w = &self.writer;
        x.family(
            "turnstone_store_writes_total",
            "counter",
            "Store writes by the batching writer, by outcome: written, dropped (refused: the \
             queue was full or the writer stopped) or failed (their transaction failed twice).",
        );
        for (outcome, n) in [
            ("written", w.written),
            ("dropped", w.dropped),
            ("failed", w.failed),
        ] {
            x.sample("turnstone_store_writes_total", &[("outcome", outcome)], n);
        }
        x.counter(
            "turnstone_store_write_batches_total",
            "Transactions the batching writer committed.",
            w.batches,
        );
        x.gauge(
            "turnstone_store_write_queue_depth",
            "Writes accepted and not yet committed or failed.",
            w.queued.saturating_sub(w.written + w.failed) as f64,
        );
        if let Some(backlog) = self.search_backlog {
            x.gauge(
                "turnstone_store_search_backlog",
                "Committed messages not yet in the search index (PostgreSQL indexes in the \
                 background; search slows in proportion to this; always 0 on SQLite).",
                backlog as f64,
            );
        }
    }
}

/// Follows the node-wide log for as long as the metrics exist.
async fn fold_events(metrics: Weak<Metrics>, mut sub: turnstone_engine::Subscription<NodeEvent>) {
    while let Some(item) = sub.next().await {
        let Some(metrics) = metrics.upgrade() else {
            return;
        };
        if let Item::Event(entry) = item {
            metrics.observe(&entry, Instant::now());
        }
    }
}

/// Measures how late a periodic timer fires: a busy or blocked runtime shows up here.
async fn probe_lag(metrics: Weak<Metrics>) {
    let mut tick = tokio::time::interval(LAG_PROBE_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let scheduled = tick.tick().await;
        let lag = Instant::now().saturating_duration_since(scheduled);
        let Some(metrics) = metrics.upgrade() else {
            return;
        };
        let micros = u64::try_from(lag.as_micros()).unwrap_or(u64::MAX);
        metrics.lag_micros.store(micros, Ordering::Relaxed);
    }
}

/// `GET /metrics`.
pub async fn metrics(State(node): State<Arc<Node>>) -> Response {
    let store = match &node.persistence {
        Some(p) => Some(StoreFacts::read(p).await),
        None => None,
    };
    let mut response = node.metrics.render(&node, store.as_ref()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// Decrements the SSE gauge and records the request when an SSE body ends.
struct SseGuard {
    node: Arc<Node>,
    method: String,
    endpoint: String,
    status: u16,
    started: Instant,
}

impl Drop for SseGuard {
    fn drop(&mut self) {
        let metrics = &self.node.metrics;
        metrics.sse_active.fetch_sub(1, Ordering::Relaxed);
        metrics.record_http(
            &self.method,
            &self.endpoint,
            self.status,
            self.started.elapsed(),
        );
    }
}

/// The HTTP metrics middleware: method, matched route template (unmatched paths share one
/// label), status, latency. An SSE response counts as an open connection until its body is
/// dropped, and is recorded then.
pub async fn track_http(State(node): State<Arc<Node>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().as_str().to_string();
    let endpoint = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or(UNMATCHED_ENDPOINT, |m| m.as_str())
        .to_string();
    let response = next.run(req).await;
    let status = response.status().as_u16();
    let is_sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        node.metrics
            .record_http(&method, &endpoint, status, started.elapsed());
        return response;
    }
    node.metrics.sse_active.fetch_add(1, Ordering::Relaxed);
    let guard = SseGuard {
        node: node.clone(),
        method,
        endpoint,
        status,
        started,
    };
    super::sse::hold_while_streaming(response, guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_series_are_bounded() {
        let m = Metrics::new();
        for i in 0..MAX_HTTP_SERIES + 5 {
            m.record_http("GET", &format!("/p/{i}"), 404, Duration::ZERO);
        }
        let http = m.http.lock();
        assert_eq!(http.len(), MAX_HTTP_SERIES + 1);
        let other = &http[&("GET".to_string(), OVERFLOW_ENDPOINT.to_string())];
        assert_eq!(other.statuses[&404], 5);
    }

    #[test]
    fn tool_labels_are_bounded_and_closed_workstreams_forgotten() {
        use std::sync::Arc;
        let m = Metrics::new();
        let now = Instant::now();
        let result = |seq: u64, name: String| NodeEvent {
            seq,
            kind: NodeEventKind::Ws(Arc::new(turnstone_engine::Envelope {
                seq,
                ws_id: "w".into(),
                event: Event::ToolResult {
                    call_id: "c".into(),
                    name,
                    output: String::new(),
                    is_error: true,
                },
            })),
        };
        for i in 0..MAX_TOOL_LABELS as u64 + 10 {
            m.observe(&result(i + 1, format!("hallucinated_{i}")), now);
        }
        {
            let f = m.folded.lock();
            assert_eq!(f.tool_calls.len(), MAX_TOOL_LABELS + 1);
            assert_eq!(f.tool_calls[OVERFLOW_ENDPOINT], 10);
            assert!(f.per_ws.contains_key("w"));
        }
        m.observe(
            &NodeEvent {
                seq: 9_999,
                kind: NodeEventKind::Closed {
                    ws_id: "w".into(),
                    reason: "closed".into(),
                    name: None,
                },
            },
            now,
        );
        assert!(!m.folded.lock().per_ws.contains_key("w"));
    }
}
