//! The in-memory cluster model and every read query on it (cluster spec §6.2): nodes with
//! their health, dashboard aggregate and workstreams; overview, node list, workstream list,
//! node detail and snapshot; version drift and zombie detection; placement.
//!
//! Pure data: no I/O, no locks. The collector owns the current [`Cluster`] as an `Arc` and
//! feeds it heartbeats, polls and cluster events; handlers take the `Arc` of the moment
//! and run the query methods on it without any lock. Nodes sit behind `Arc`s too, so a
//! change copies the node map (pointers) only while a reader still holds an older version,
//! and copies the one node it changes only while that node is shared.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;
use turnstone_proto::api::{self, Health};

/// The console's own version; breaks ties when deciding the cluster's majority version.
pub const CONSOLE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Workstream states in the order the state sort uses (unknown states last).
pub const STATE_ORDER: [&str; 5] = ["running", "thinking", "attention", "error", "idle"];

/// Thresholds of the zombie rules.
#[derive(Debug, Clone, Copy)]
pub struct ZombieRules {
    /// Busy workstreams but no event for this long → stalled.
    pub stall_after: Duration,
    /// Event-loop lag above this → stalled.
    pub max_event_loop_lag: Duration,
}

impl Default for ZombieRules {
    fn default() -> Self {
        Self {
            stall_after: Duration::from_secs(120),
            max_event_loop_lag: Duration::from_secs(2),
        }
    }
}

/// One node as the console knows it.
#[derive(Debug, Clone)]
pub struct NodeRecord {
    pub node_id: String,
    pub server_url: String,
    /// Epoch seconds when its bridge started (heartbeat).
    pub started: f64,
    /// Capacity from the heartbeat.
    pub max_ws: u64,
    /// Epoch seconds of the last successful poll (the original used a monotonic clock).
    pub last_seen: Option<f64>,
    /// The last poll succeeded (true until a poll fails, as the original).
    pub reachable: bool,
    /// The node's `/health` JSON (`{}` until polled), kept as received: the listings relay
    /// it whole (cluster spec §6.2), keys the console does not know included. Set only with
    /// [`Self::set_health`], which also decodes it into `reading`.
    health: Value,
    /// `health` as the wire contract types it, decoded once when it is set: the overview and
    /// the listings read it for every node on every request.
    reading: Health,
    /// The dashboard `aggregate` (`{}` until polled), relayed whole like `health`. Read
    /// key by key: other producers' aggregates carry floats where [`api::DashboardAggregate`]
    /// has integers, and one odd key must not zero the node's totals.
    pub aggregate: Value,
    /// Workstreams by id, in dashboard order. Rows stay JSON objects: they are relayed
    /// whole and come from two sources with different keys (a poll's dashboard row plus
    /// `node`/`server_url`, or the fields a cluster event gives; cluster spec §6.2).
    /// Changed only through methods that also refresh `summary`.
    workstreams: Map<String, Value>,
    /// Counts over `workstreams`, refreshed whenever they change: the listings sort and
    /// count by them on every request.
    summary: WsSummary,
    /// Why the last poll failed.
    pub last_error: Option<String>,
    /// The node refused the console's credentials (401/403) on the last poll.
    pub auth_failed: bool,
    /// Polls that failed in a row.
    pub failures: u32,
    /// Why the node counts as stalled, from its health (progress fields).
    pub stalled: Option<String>,
    /// Why its heartbeat is not trusted (`None`: trusted); an untrusted node is shown but
    /// gets no credentials: never polled, proxied to or part of a fan-out.
    pub untrusted: Option<String>,
    progress: Progress,
}

/// What the listings need from a node's workstreams, computed when they change.
#[derive(Debug, Clone, Default)]
struct WsSummary {
    /// Workstreams by their `state` as given (`""` included).
    states: BTreeMap<String, u64>,
    /// The sum of their `tokens`.
    tokens: u64,
}

impl WsSummary {
    fn of(workstreams: &Map<String, Value>) -> Self {
        let mut summary = Self::default();
        for w in workstreams.values() {
            *summary
                .states
                .entry(text(w.get("state")).to_string())
                .or_default() += 1;
            summary.tokens += num(w.get("tokens"));
        }
        summary
    }
}

#[derive(Debug, Clone, Default)]
struct Progress {
    node_seq: Option<u64>,
    /// Since when the node has had busy workstreams and an unchanged `node_seq`.
    stuck_since: Option<Instant>,
}

impl NodeRecord {
    pub fn new(node_id: &str, server_url: &str, started: f64, max_ws: u64) -> Self {
        Self {
            node_id: node_id.to_string(),
            server_url: server_url.to_string(),
            started,
            max_ws,
            last_seen: None,
            reachable: true,
            health: json!({}),
            reading: Health::default(),
            aggregate: json!({}),
            workstreams: Map::new(),
            summary: WsSummary::default(),
            last_error: None,
            auth_failed: false,
            failures: 0,
            stalled: None,
            untrusted: None,
            progress: Progress::default(),
        }
    }

    /// Polled over HTTP (simulator nodes use `sim://`).
    pub fn is_http(&self) -> bool {
        self.server_url.starts_with("http://") || self.server_url.starts_with("https://")
    }

    /// The URL the console may send credentials to: an HTTP node with a trusted heartbeat.
    pub fn credential_url(&self) -> Option<&str> {
        (self.is_http() && self.untrusted.is_none()).then_some(self.server_url.as_str())
    }

    /// The node's `/health` as received (relayed whole by the listings).
    pub fn health(&self) -> &Value {
        &self.health
    }

    /// Replaces the node's `/health` and decodes its typed reading; a health that does not
    /// decode (`{}` before the first poll or after a failed one, a foreign node) reads as
    /// the defaults, i.e. no information.
    pub fn set_health(&mut self, health: Value) {
        self.reading = match &health {
            Value::Object(o) if !o.is_empty() => {
                api::decode_value("health", &health).unwrap_or_default()
            }
            _ => Health::default(),
        };
        self.health = health;
    }

    /// The node's `/health` as the wire contract types it (see [`Self::set_health`]).
    pub fn health_reading(&self) -> &Health {
        &self.reading
    }

    /// `health.version`, `""` when unknown.
    pub fn version(&self) -> String {
        self.health_reading().version.clone()
    }

    /// Why this node is a zombie: its heartbeat is fresh (it is in the model at all) but its
    /// HTTP fails, or its health shows no progress.
    pub fn zombie_reason(&self) -> Option<String> {
        if !self.reachable && self.failures > 0 {
            let why = self.last_error.as_deref().unwrap_or("unknown error");
            return Some(format!("heartbeat fresh but HTTP failing: {why}"));
        }
        self.stalled
            .as_ref()
            .map(|s| format!("heartbeat fresh but progress stalled: {s}"))
    }

    pub fn ws_count(&self) -> u64 {
        self.workstreams.len() as u64
    }

    /// The node's workstreams by id, in dashboard order.
    pub fn workstreams(&self) -> &Map<String, Value> {
        &self.workstreams
    }

    /// Changes one workstream row (if the node has it) and refreshes the summary.
    fn change_ws(&mut self, ws_id: &str, f: impl FnOnce(&mut Map<String, Value>)) {
        if let Some(ws) = self
            .workstreams
            .get_mut(ws_id)
            .and_then(Value::as_object_mut)
        {
            f(ws);
            self.summary = WsSummary::of(&self.workstreams);
        }
    }

    /// Adds a workstream row (an existing id is kept as it is).
    fn add_ws(&mut self, ws_id: &str, row: Value) {
        if !self.workstreams.contains_key(ws_id) {
            self.workstreams.insert(ws_id.to_string(), row);
            self.summary = WsSummary::of(&self.workstreams);
        }
    }

    /// Removes a workstream row.
    fn remove_ws(&mut self, ws_id: &str) {
        if self.workstreams.shift_remove(ws_id).is_some() {
            self.summary = WsSummary::of(&self.workstreams);
        }
    }

    /// `max_ws - ws_total` (may be negative: the node evicts idle workstreams).
    pub fn free_capacity(&self) -> i64 {
        i64::try_from(self.max_ws).unwrap_or(i64::MAX) - self.workstreams.len() as i64
    }

    fn count_state(&self, state: &str) -> u64 {
        self.summary.states.get(state).copied().unwrap_or(0)
    }

    /// The aggregate's `total_tokens`, or the sum of workstream tokens when that is 0.
    pub fn total_tokens(&self) -> u64 {
        let agg = num(self.aggregate.get("total_tokens"));
        if agg > 0 {
            return agg;
        }
        self.summary.tokens
    }

    /// Records a successful poll; returns the synthetic `ws_created`/`ws_closed` events for
    /// workstreams that appeared or disappeared (sorted by id, as the original).
    pub fn apply_poll(
        &mut self,
        mut dashboard: Value,
        health: Value,
        now_epoch: f64,
        now: Instant,
        rules: &ZombieRules,
    ) -> Vec<Value> {
        self.reachable = true;
        self.failures = 0;
        self.last_error = None;
        self.auth_failed = false;
        self.last_seen = Some(now_epoch);
        self.set_health(health);
        self.stalled = stall_reason(&mut self.progress, &self.reading, now, rules);
        self.aggregate = dashboard
            .get_mut("aggregate")
            .map(Value::take)
            .unwrap_or(json!({}));
        let mut fresh = Map::new();
        if let Some(Value::Array(list)) = dashboard.get_mut("workstreams").map(Value::take) {
            for mut ws in list {
                let Some(id) = ws.get("id").and_then(Value::as_str).map(str::to_string) else {
                    continue;
                };
                if let Some(o) = ws.as_object_mut() {
                    o.insert("node".into(), json!(self.node_id));
                    o.insert("server_url".into(), json!(self.server_url));
                }
                fresh.insert(id, ws);
            }
        }
        let mut created: Vec<(&String, &Value)> = fresh
            .iter()
            .filter(|(id, _)| !self.workstreams.contains_key(*id))
            .collect();
        created.sort_by(|a, b| a.0.cmp(b.0));
        let mut closed: Vec<&String> = self
            .workstreams
            .keys()
            .filter(|id| !fresh.contains_key(*id))
            .collect();
        closed.sort();
        let mut events: Vec<Value> = created
            .into_iter()
            .map(|(id, ws)| {
                json!({
                    "type": "ws_created",
                    "ws_id": id,
                    "name": ws.get("name").cloned().unwrap_or(json!("")),
                    "node_id": self.node_id,
                })
            })
            .collect();
        events.extend(
            closed
                .into_iter()
                .map(|id| json!({"type": "ws_closed", "ws_id": id})),
        );
        self.workstreams = fresh;
        self.summary = WsSummary::of(&self.workstreams);
        events
    }

    /// Records a failed poll. Workstreams and the last health are kept (401/403 included).
    pub fn apply_poll_failure(&mut self, error: String, auth_failed: bool) {
        self.reachable = false;
        self.failures = self.failures.saturating_add(1);
        self.last_error = Some(error);
        self.auth_failed = auth_failed;
    }
}

/// The stall rules over one health reading.
fn stall_reason(
    progress: &mut Progress,
    health: &Health,
    now: Instant,
    rules: &ZombieRules,
) -> Option<String> {
    let lag_ms = health.event_loop_lag_ms.unwrap_or(0.0);
    let lag_limit = rules.max_event_loop_lag.as_secs_f64() * 1000.0;
    let seq = health.events.as_ref().map(|e| e.node_seq);
    let busy = health.workstreams.thinking + health.workstreams.running;
    let stuck = match seq {
        Some(seq) if busy > 0 && progress.node_seq == Some(seq) => {
            let since = *progress.stuck_since.get_or_insert(now);
            let stuck_for = now.saturating_duration_since(since);
            (stuck_for >= rules.stall_after).then(|| {
                format!(
                    "no event for {}s while {busy} workstream(s) are busy",
                    stuck_for.as_secs()
                )
            })
        }
        _ => {
            progress.stuck_since = None;
            None
        }
    };
    progress.node_seq = seq;
    if lag_ms > lag_limit {
        return Some(format!("event loop lag {lag_ms:.0} ms"));
    }
    stuck
}

fn num(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().map(|f| f.max(0.0) as u64))
            .unwrap_or(0),
        _ => 0,
    }
}

fn text(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or_default()
}

/// Sort orders of `/nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeSort {
    /// Running + attention, descending, then id.
    Activity,
    /// Total tokens, descending, then id.
    Tokens,
    /// Node id.
    Name,
}

impl NodeSort {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "activity" => Some(Self::Activity),
            "tokens" => Some(Self::Tokens),
            "name" => Some(Self::Name),
            _ => None,
        }
    }
}

/// Sort orders of `/workstreams`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsSort {
    /// running, thinking, attention, error, idle, unknown (stable).
    State,
    /// Tokens, descending.
    Tokens,
    /// Name, ascending.
    Name,
}

impl WsSort {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "state" => Some(Self::State),
            "tokens" => Some(Self::Tokens),
            "name" => Some(Self::Name),
            _ => None,
        }
    }
}

/// Filters and page of a `/workstreams` query.
#[derive(Debug, Clone)]
pub struct WsQuery {
    pub state: Option<String>,
    pub node: Option<String>,
    pub search: Option<String>,
    pub sort: WsSort,
    pub page: u64,
    pub per_page: u64,
}

/// Where `auto` placement puts a new workstream, and why nodes were skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node_id: String,
}

/// The whole cluster. Cloning it copies the node map's pointers, not the nodes.
#[derive(Debug, Default, Clone)]
pub struct Cluster {
    /// By node id (so every listing without a sort is ordered by id). Changed through
    /// [`Self::node_mut`] and [`Self::insert_node`].
    pub nodes: BTreeMap<String, Arc<NodeRecord>>,
}

impl Cluster {
    /// The node to change (copied first if a reader still holds it).
    pub fn node_mut(&mut self, node_id: &str) -> Option<&mut NodeRecord> {
        self.nodes.get_mut(node_id).map(Arc::make_mut)
    }

    /// Adds or replaces a node.
    pub fn insert_node(&mut self, node: NodeRecord) {
        self.nodes.insert(node.node_id.clone(), Arc::new(node));
    }

    /// Every node that has `ws_id`, to change (normally one).
    fn nodes_with_ws<'a>(&'a mut self, ws_id: &'a str) -> impl Iterator<Item = &'a mut NodeRecord> {
        self.nodes
            .values_mut()
            .filter(move |n| n.workstreams.contains_key(ws_id))
            .map(Arc::make_mut)
    }

    /// The version most nodes report; ties go to the console's own version, then to the
    /// highest version. `None` when no node reported one.
    pub fn majority_version(&self) -> Option<String> {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for n in self.nodes.values() {
            let v = n.version();
            if !v.is_empty() {
                *counts.entry(v).or_default() += 1;
            }
        }
        let top = counts.values().copied().max()?;
        let mut tied: Vec<&str> = counts
            .iter()
            .filter(|(_, c)| **c == top)
            .map(|(v, _)| v.as_str())
            .collect();
        if tied.contains(&CONSOLE_VERSION) {
            return Some(CONSOLE_VERSION.to_string());
        }
        tied.sort_by(|a, b| version_key(a).cmp(&version_key(b)).then(a.cmp(b)));
        tied.last().map(|v| v.to_string())
    }

    /// Distinct versions, sorted.
    pub fn versions(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .nodes
            .values()
            .map(|n| n.version())
            .filter(|v| !v.is_empty())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    fn drifted(&self, node: &NodeRecord, majority: Option<&str>) -> bool {
        let v = node.version();
        !v.is_empty() && majority.is_some_and(|m| m != v)
    }

    /// Nodes ordered as `sort` says.
    pub fn sorted_nodes(&self, sort: NodeSort) -> Vec<&NodeRecord> {
        let mut nodes: Vec<&NodeRecord> = self.nodes.values().map(|n| &**n).collect();
        match sort {
            NodeSort::Name => {}
            NodeSort::Activity => nodes.sort_by(|a, b| {
                let act = |n: &NodeRecord| n.count_state("running") + n.count_state("attention");
                act(b).cmp(&act(a)).then(a.node_id.cmp(&b.node_id))
            }),
            NodeSort::Tokens => nodes.sort_by(|a, b| {
                b.total_tokens()
                    .cmp(&a.total_tokens())
                    .then(a.node_id.cmp(&b.node_id))
            }),
        }
        nodes
    }

    /// `GET /v1/api/cluster/overview`.
    pub fn overview(&self) -> Value {
        let mut states = Map::new();
        for s in ["running", "thinking", "attention", "idle", "error"] {
            states.insert(s.into(), json!(0));
        }
        let mut workstreams = 0u64;
        let (mut tokens, mut calls) = (0u64, 0u64);
        let (mut mcp_servers, mut mcp_resources, mut mcp_prompts) = (0u64, 0u64, 0u64);
        let (mut max_ws, mut reachable) = (0u64, 0u64);
        let majority = self.majority_version();
        let mut drifted = Vec::new();
        let mut zombies = Vec::new();
        for n in self.nodes.values() {
            for (state, count) in &n.summary.states {
                workstreams += count;
                let state = if state.is_empty() { "idle" } else { state };
                let entry = states.entry(state.to_string()).or_insert(json!(0));
                *entry = json!(entry.as_u64().unwrap_or(0) + count);
            }
            tokens += num(n.aggregate.get("total_tokens"));
            calls += num(n.aggregate.get("total_tool_calls"));
            if let Some(mcp) = &n.health_reading().mcp {
                mcp_servers += mcp.servers;
                mcp_resources += mcp.resources;
                mcp_prompts += mcp.prompts;
            }
            max_ws += n.max_ws;
            if n.reachable {
                reachable += 1;
            }
            if self.drifted(n, majority.as_deref()) {
                drifted.push(n.node_id.clone());
            }
            if n.zombie_reason().is_some() {
                zombies.push(n.node_id.clone());
            }
        }
        let versions = self.versions();
        let mut out = json!({
            "nodes": self.nodes.len(),
            "workstreams": workstreams,
            "states": states,
            "aggregate": {"total_tokens": tokens, "total_tool_calls": calls},
            "version_drift": versions.len() > 1,
            "versions": versions,
            "majority_version": majority,
            "drifted_nodes": drifted,
            "zombie_nodes": zombies,
            "reachable_nodes": reachable,
            "capacity": {
                "max_ws": max_ws,
                "used": workstreams,
                "free": i64::try_from(max_ws).unwrap_or(i64::MAX) - workstreams as i64,
            },
        });
        if mcp_servers > 0
            && let Some(o) = out.as_object_mut()
        {
            o.insert("mcp_servers".into(), json!(mcp_servers));
            o.insert("mcp_resources".into(), json!(mcp_resources));
            o.insert("mcp_prompts".into(), json!(mcp_prompts));
        }
        out
    }

    /// The fields every node listing shares (ours added after the original's).
    fn node_flags(&self, n: &NodeRecord, majority: Option<&str>) -> Map<String, Value> {
        let zombie = n.zombie_reason();
        let drift = self.drifted(n, majority);
        let status = if n.untrusted.is_some() {
            "untrusted"
        } else if zombie.is_some() {
            "zombie"
        } else if !n.reachable {
            "unreachable"
        } else if n.health_reading().status == "degraded" {
            "degraded"
        } else {
            "ok"
        };
        let mut m = Map::new();
        m.insert("status".into(), json!(status));
        m.insert("zombie".into(), json!(zombie.is_some()));
        m.insert("zombie_reason".into(), json!(zombie));
        m.insert("version_drift".into(), json!(drift));
        m.insert("auth_failed".into(), json!(n.auth_failed));
        m.insert("trusted".into(), json!(n.untrusted.is_none()));
        m.insert("untrusted_reason".into(), json!(n.untrusted));
        m.insert("last_error".into(), json!(n.last_error));
        m.insert("capacity_free".into(), json!(n.free_capacity()));
        m.insert(
            "placeable".into(),
            json!(n.reachable && zombie.is_none() && !drift && n.untrusted.is_none()),
        );
        m
    }

    fn node_item(&self, n: &NodeRecord, majority: Option<&str>) -> Value {
        let tokens = n.total_tokens();
        let mut m = Map::new();
        m.insert("node_id".into(), json!(n.node_id));
        m.insert("server_url".into(), json!(n.server_url));
        m.insert("ws_total".into(), json!(n.ws_count()));
        for s in ["running", "thinking", "attention", "idle", "error"] {
            m.insert(format!("ws_{s}"), json!(n.count_state(s)));
        }
        m.insert("total_tokens".into(), json!(tokens));
        m.insert("ws_tokens".into(), json!(tokens));
        m.insert("max_ws".into(), json!(n.max_ws));
        m.insert("started".into(), json!(n.started));
        m.insert("last_seen".into(), json!(n.last_seen));
        m.insert("reachable".into(), json!(n.reachable));
        m.insert("health".into(), n.health().clone());
        m.insert("version".into(), json!(n.version()));
        m.extend(self.node_flags(n, majority));
        Value::Object(m)
    }

    /// `GET /v1/api/cluster/nodes`.
    pub fn nodes_page(&self, sort: NodeSort, limit: usize, offset: usize) -> Value {
        let majority = self.majority_version();
        let all = self.sorted_nodes(sort);
        let page: Vec<Value> = all
            .iter()
            .skip(offset)
            .take(limit)
            .map(|n| self.node_item(n, majority.as_deref()))
            .collect();
        json!({"nodes": page, "total": all.len()})
    }

    /// `GET /v1/api/cluster/workstreams`.
    pub fn workstreams_page(&self, q: &WsQuery) -> Value {
        let search = q.search.as_ref().map(|s| s.to_lowercase());
        let mut rows: Vec<&Value> = self
            .nodes
            .values()
            .flat_map(|n| n.workstreams.values())
            .filter(|w| q.state.as_deref().is_none_or(|s| text(w.get("state")) == s))
            .filter(|w| q.node.as_deref().is_none_or(|n| text(w.get("node")) == n))
            .filter(|w| {
                search.as_deref().is_none_or(|s| {
                    ["name", "title", "node"]
                        .iter()
                        .any(|k| text(w.get(*k)).to_lowercase().contains(s))
                })
            })
            .collect();
        // Each row's key is read once (a comparison reading it from the JSON row, n log n
        // times, was most of this query's cost at 10,000 rows); the sorts are stable.
        match q.sort {
            WsSort::State => rows.sort_by_cached_key(|w| {
                let s = text(w.get("state"));
                STATE_ORDER
                    .iter()
                    .position(|x| *x == s)
                    .unwrap_or(STATE_ORDER.len())
            }),
            WsSort::Tokens => {
                rows.sort_by_cached_key(|w| std::cmp::Reverse(num(w.get("tokens"))));
            }
            WsSort::Name => {
                let mut named: Vec<(&str, &Value)> =
                    rows.iter().map(|w| (text(w.get("name")), *w)).collect();
                named.sort_by(|a, b| a.0.cmp(b.0));
                rows = named.into_iter().map(|(_, w)| w).collect();
            }
        }
        let total = rows.len() as u64;
        let per_page = q.per_page.max(1);
        let pages = total.div_ceil(per_page);
        let start =
            usize::try_from((q.page.max(1) - 1).saturating_mul(per_page)).unwrap_or(usize::MAX);
        let page: Vec<Value> = rows
            .into_iter()
            .skip(start)
            .take(usize::try_from(per_page).unwrap_or(usize::MAX))
            .cloned()
            .collect();
        json!({
            "workstreams": page,
            "total": total,
            "page": q.page,
            "per_page": q.per_page,
            "pages": pages,
        })
    }

    /// `GET /v1/api/cluster/node/{id}`.
    pub fn node_detail(&self, node_id: &str) -> Option<Value> {
        let n = self.nodes.get(node_id)?;
        let majority = self.majority_version();
        let mut m = Map::new();
        m.insert("node_id".into(), json!(n.node_id));
        m.insert("server_url".into(), json!(n.server_url));
        m.insert("health".into(), n.health().clone());
        m.insert(
            "workstreams".into(),
            Value::Array(n.workstreams.values().cloned().collect()),
        );
        m.insert("aggregate".into(), n.aggregate.clone());
        m.insert("reachable".into(), json!(n.reachable));
        m.insert("max_ws".into(), json!(n.max_ws));
        m.insert("version".into(), json!(n.version()));
        m.extend(self.node_flags(n, majority.as_deref()));
        Some(Value::Object(m))
    }

    /// `GET /v1/api/cluster/snapshot` and the first frame of the cluster SSE.
    pub fn snapshot(&self, now_epoch: f64) -> Value {
        let majority = self.majority_version();
        let nodes: Vec<Value> = self
            .nodes
            .values()
            .map(|n| {
                let mut m = Map::new();
                m.insert("node_id".into(), json!(n.node_id));
                m.insert("server_url".into(), json!(n.server_url));
                m.insert("max_ws".into(), json!(n.max_ws));
                m.insert("reachable".into(), json!(n.reachable));
                m.insert("version".into(), json!(n.version()));
                m.insert("health".into(), n.health().clone());
                m.insert("aggregate".into(), n.aggregate.clone());
                m.insert(
                    "workstreams".into(),
                    Value::Array(n.workstreams.values().cloned().collect()),
                );
                m.insert("started".into(), json!(n.started));
                m.insert("last_seen".into(), json!(n.last_seen));
                m.extend(self.node_flags(n, majority.as_deref()));
                Value::Object(m)
            })
            .collect();
        json!({"nodes": nodes, "overview": self.overview(), "timestamp": now_epoch})
    }

    /// The nodes work may be placed on, with their free capacity (`max_ws - ws_total`), in
    /// activity order: reachable, trusted, neither zombies nor drifted.
    pub fn placeable_nodes(&self) -> Vec<(&NodeRecord, i64)> {
        let majority = self.majority_version();
        self.sorted_nodes(NodeSort::Activity)
            .into_iter()
            .filter(|n| {
                n.reachable
                    && n.zombie_reason().is_none()
                    && n.untrusted.is_none()
                    && !self.drifted(n, majority.as_deref())
            })
            .map(|n| (n, n.free_capacity()))
            .collect()
    }

    /// `auto` placement: the placeable node with the most free capacity; ties go to the
    /// first in activity order.
    pub fn place_auto(&self) -> Option<Placement> {
        let mut best: Option<(&NodeRecord, i64)> = None;
        for (n, free) in self.placeable_nodes() {
            if best.is_none_or(|(_, b)| free > b) {
                best = Some((n, free));
            }
        }
        best.map(|(n, _)| Placement {
            node_id: n.node_id.clone(),
        })
    }

    /// Applies one cluster pub/sub event to the model (§6.2 events thread). Unknown nodes
    /// and workstreams are ignored here (the event is still fanned out by the caller).
    pub fn apply_event(&mut self, event: &Value) {
        let kind = text(event.get("type"));
        let ws_id = text(event.get("ws_id"));
        let node_id = text(event.get("node_id"));
        match kind {
            "cluster_state" => {
                if !self
                    .nodes
                    .get(node_id)
                    .is_some_and(|n| n.workstreams.contains_key(ws_id))
                {
                    return;
                }
                let Some(n) = self.node_mut(node_id) else {
                    return;
                };
                n.change_ws(ws_id, |ws| {
                    let state = match event.get("state").and_then(Value::as_str) {
                        Some(s) if !s.is_empty() => s.to_string(),
                        _ => ws
                            .get("state")
                            .and_then(Value::as_str)
                            .unwrap_or("idle")
                            .to_string(),
                    };
                    ws.insert("state".into(), json!(state));
                    for key in ["tokens", "context_ratio", "activity", "activity_state"] {
                        if let Some(v) = event.get(key) {
                            ws.insert(key.into(), v.clone());
                        }
                    }
                });
            }
            "ws_created" => {
                if ws_id.is_empty()
                    || self
                        .nodes
                        .get(node_id)
                        .is_none_or(|n| n.workstreams.contains_key(ws_id))
                {
                    return;
                }
                let Some(n) = self.node_mut(node_id) else {
                    return;
                };
                let ws = json!({
                    "id": ws_id,
                    "name": text(event.get("name")),
                    "state": "idle",
                    "node": node_id,
                    "server_url": n.server_url,
                    "title": text(event.get("title")),
                    "tokens": 0,
                    "context_ratio": 0.0,
                    "activity": "",
                    "activity_state": "",
                    "tool_calls": 0,
                });
                n.add_ws(ws_id, ws);
            }
            "ws_closed" => {
                for n in self.nodes_with_ws(ws_id) {
                    n.remove_ws(ws_id);
                }
            }
            "ws_rename" => {
                let name = text(event.get("name"));
                for n in self.nodes_with_ws(ws_id) {
                    n.change_ws(ws_id, |ws| {
                        ws.insert("name".into(), json!(name));
                    });
                }
            }
            _ => {}
        }
    }
}

/// A sortable key for version strings: numeric parts compared as numbers.
fn version_key(v: &str) -> Vec<(u64, String)> {
    v.split(['.', '-', '+'])
        .map(|p| match p.parse::<u64>() {
            Ok(n) => (n, String::new()),
            Err(_) => (0, p.to_string()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, version: &str, max_ws: u64, ws: usize) -> NodeRecord {
        let mut n = NodeRecord::new(id, &format!("http://{id}"), 1.0, max_ws);
        let list: Vec<Value> = (0..ws)
            .map(|i| json!({"id": format!("{id}-w{i}"), "name": format!("w{i}"), "state": "idle", "tokens": 1}))
            .collect();
        n.apply_poll(
            json!({"workstreams": list, "aggregate": {"total_tokens": 5, "total_tool_calls": 2}}),
            json!({"version": version, "status": "ok"}),
            2.0,
            Instant::now(),
            &ZombieRules::default(),
        );
        n
    }

    fn cluster(nodes: Vec<NodeRecord>) -> Cluster {
        Cluster {
            nodes: nodes
                .into_iter()
                .map(|n| (n.node_id.clone(), Arc::new(n)))
                .collect(),
        }
    }

    #[test]
    fn the_majority_version_wins_and_ties_prefer_the_console() {
        let c = cluster(vec![
            node("a", "1.0.0", 10, 0),
            node("b", "1.0.0", 10, 0),
            node("c", "2.0.0", 10, 0),
        ]);
        assert_eq!(c.majority_version().as_deref(), Some("1.0.0"));
        let o = c.overview();
        assert_eq!(o["version_drift"], true);
        assert_eq!(o["drifted_nodes"], json!(["c"]));
        let tie = cluster(vec![
            node("a", CONSOLE_VERSION, 10, 0),
            node("b", "99.0.0", 10, 0),
        ]);
        assert_eq!(tie.majority_version().as_deref(), Some(CONSOLE_VERSION));
        let tie = cluster(vec![node("a", "1.10.0", 10, 0), node("b", "1.9.0", 10, 0)]);
        assert_eq!(tie.majority_version().as_deref(), Some("1.10.0"));
    }

    #[test]
    fn auto_placement_takes_the_most_free_and_skips_drift_and_zombies() {
        let mut c = cluster(vec![
            node("a", "1.0.0", 10, 5),
            node("b", "1.0.0", 10, 2),
            node("c", "1.0.0", 10, 0),
            node("d", "9.0.0", 50, 0),
        ]);
        c.node_mut("c")
            .unwrap()
            .apply_poll_failure("connection refused".into(), false);
        assert_eq!(c.place_auto().unwrap().node_id, "b");
        let nodes = c.nodes_page(NodeSort::Name, 100, 0);
        let d = &nodes["nodes"][3];
        assert_eq!(d["version_drift"], true);
        assert_eq!(d["placeable"], false);
        let cz = &nodes["nodes"][2];
        assert_eq!(cz["zombie"], true);
        assert_eq!(cz["status"], "zombie");
        c.node_mut("a").unwrap().reachable = false;
        c.node_mut("b").unwrap().reachable = false;
        assert_eq!(c.place_auto(), None);
    }

    #[test]
    fn progress_stall_needs_busy_workstreams_and_a_frozen_sequence() {
        let rules = ZombieRules {
            stall_after: Duration::from_secs(60),
            max_event_loop_lag: Duration::from_secs(2),
        };
        let mut n = NodeRecord::new("a", "http://a", 0.0, 10);
        let t0 = Instant::now();
        let busy = json!({"workstreams": {"thinking": 1}, "events": {"node_seq": 7}});
        let dash = json!({"workstreams": []});
        n.apply_poll(dash.clone(), busy.clone(), 0.0, t0, &rules);
        n.apply_poll(
            dash.clone(),
            busy.clone(),
            0.0,
            t0 + Duration::from_secs(30),
            &rules,
        );
        assert!(n.zombie_reason().is_none());
        n.apply_poll(
            dash.clone(),
            busy.clone(),
            0.0,
            t0 + Duration::from_secs(100),
            &rules,
        );
        assert!(n.zombie_reason().unwrap().contains("progress stalled"));
        // Progress clears it.
        let moved = json!({"workstreams": {"thinking": 1}, "events": {"node_seq": 8}});
        n.apply_poll(
            dash.clone(),
            moved,
            0.0,
            t0 + Duration::from_secs(110),
            &rules,
        );
        assert!(n.zombie_reason().is_none());
        // Idle nodes never stall; a lagging loop does.
        let idle = json!({"workstreams": {"idle": 1}, "events": {"node_seq": 8}});
        n.apply_poll(
            dash.clone(),
            idle,
            0.0,
            t0 + Duration::from_secs(500),
            &rules,
        );
        assert!(n.zombie_reason().is_none());
        let lag = json!({"event_loop_lag_ms": 5000.0});
        n.apply_poll(
            dash.clone(),
            lag,
            0.0,
            t0 + Duration::from_secs(501),
            &rules,
        );
        assert!(n.zombie_reason().unwrap().contains("lag"));
    }

    #[test]
    fn polls_diff_workstreams_and_failures_keep_them() {
        let mut n = node("a", "1", 10, 2);
        let events = n.apply_poll(
            json!({"workstreams": [{"id": "a-w1", "name": "w1", "state": "idle"}, {"id": "new", "name": "n", "state": "running"}]}),
            json!({}),
            3.0,
            Instant::now(),
            &ZombieRules::default(),
        );
        assert_eq!(
            events,
            vec![
                json!({"type": "ws_created", "ws_id": "new", "name": "n", "node_id": "a"}),
                json!({"type": "ws_closed", "ws_id": "a-w0"}),
            ]
        );
        n.apply_poll_failure("401 Unauthorized".into(), true);
        assert_eq!(n.ws_count(), 2);
        assert!(!n.reachable && n.auth_failed);
    }

    #[test]
    fn events_update_known_workstreams_only() {
        let mut c = cluster(vec![node("a", "1", 10, 1)]);
        c.apply_event(&json!({"type": "ws_created", "ws_id": "x", "name": "made", "node_id": "a"}));
        c.apply_event(&json!({"type": "ws_created", "ws_id": "y", "node_id": "ghost"}));
        c.apply_event(&json!({"type": "cluster_state", "ws_id": "x", "node_id": "a", "state": "running", "tokens": 42}));
        c.apply_event(&json!({"type": "ws_rename", "ws_id": "x", "name": "renamed"}));
        let ws = &c.nodes["a"].workstreams["x"];
        assert_eq!(ws["state"], "running");
        assert_eq!(ws["tokens"], 42);
        assert_eq!(ws["name"], "renamed");
        assert_eq!(c.overview()["states"]["running"], 1);
        // The node listing's counts follow the events (the node's summary is refreshed).
        let row = |c: &Cluster| c.nodes_page(NodeSort::Name, 10, 0)["nodes"][0].clone();
        assert_eq!(
            (row(&c)["ws_running"].clone(), row(&c)["ws_idle"].clone()),
            (json!(1), json!(1))
        );
        // A reader's model does not change under it; the writer copies what it changes.
        let before = Arc::new(c.clone());
        c.apply_event(&json!({"type": "ws_closed", "ws_id": "x"}));
        assert_eq!(c.nodes["a"].ws_count(), 1);
        assert_eq!(row(&c)["ws_running"], 0);
        assert_eq!(before.nodes["a"].ws_count(), 2);
        assert_eq!(row(&before)["ws_running"], 1);
        assert!(!Arc::ptr_eq(&before.nodes["a"], &c.nodes["a"]));
    }

    #[test]
    fn workstream_queries_filter_sort_and_page() {
        let c = cluster(vec![node("a", "1", 10, 3), node("b", "1", 10, 2)]);
        let q = |state: Option<&str>, node: Option<&str>, search: Option<&str>, page, per_page| {
            WsQuery {
                state: state.map(Into::into),
                node: node.map(Into::into),
                search: search.map(Into::into),
                sort: WsSort::Name,
                page,
                per_page,
            }
        };
        let all = c.workstreams_page(&q(None, None, None, 1, 2));
        assert_eq!(all["total"], 5);
        assert_eq!(all["pages"], 3);
        assert_eq!(all["workstreams"].as_array().unwrap().len(), 2);
        let last = c.workstreams_page(&q(None, None, None, 3, 2));
        assert_eq!(last["workstreams"].as_array().unwrap().len(), 1);
        assert_eq!(
            c.workstreams_page(&q(None, Some("b"), None, 1, 50))["total"],
            2
        );
        assert_eq!(
            c.workstreams_page(&q(Some("running"), None, None, 1, 50))["total"],
            0
        );
        assert_eq!(
            c.workstreams_page(&q(None, None, Some("W2"), 1, 50))["total"],
            1
        );
    }

    #[test]
    fn mcp_sums_appear_only_when_there_are_servers() {
        let mut c = cluster(vec![node("a", "1", 10, 0)]);
        assert!(c.overview().get("mcp_servers").is_none());
        c.node_mut("a")
            .unwrap()
            .set_health(json!({"mcp": {"servers": 2, "resources": 3, "prompts": 4}}));
        let o = c.overview();
        assert_eq!(
            (
                o["mcp_servers"].clone(),
                o["mcp_resources"].clone(),
                o["mcp_prompts"].clone()
            ),
            (json!(2), json!(3), json!(4))
        );
    }
}
