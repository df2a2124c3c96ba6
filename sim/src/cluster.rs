//! The simulated nodes: heartbeats, ownership leases, inbound dispatch and the events of each
//! workstream, written to Redis exactly as a node and its bridge write them.
//!
//! What clients and the console see is what our bridge publishes (`bridge/src/events`,
//! `bridge/src/inbound`): events of a workstream go through the same [`Publisher`] script
//! (an entry `<boot>-<seq>` in `{p}:stream:{ws_id}` plus the pub/sub copies), `ack` and
//! `ws_created` travel on pub/sub only, state changes reach the workstream, global and
//! cluster channels. Unlike the original simulator, turns run concurrently: a dispatcher
//! hands each message to a task of its own, so throughput is not capped by the number of
//! dispatchers.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::ConnectionManager;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use turnstone_proto::ids::now_timestamp;
use turnstone_proto::keys::Keys;
use turnstone_proto::mq::{
    ACK_ERROR, ACK_OK, AckBody, ClusterStateBody, CreateWorkstreamMessage, EmptyBody,
    HealthResponseBody, InboundMessage, NodeHeartbeat, NodeListBody, Outbound, OutboundEvent,
    SendMessage, StateChangeBody, ToolResultBody, TurnCompleteBody, WsCreatedBody, WsListBody,
};
use turnstone_proto::sse::{Notice, Status, Text};
use turnstone_queue::conn::{blocking_connection, manager};
use turnstone_queue::{Backoff, Leases, Origin, Publication, Publisher, rendezvous};
use turnstone_runtime::auth::JwtSecret;

use crate::config::SimConfig;
use crate::report::Metrics;
use crate::rng::SimRng;

/// How long one dispatcher's `BLPOP` blocks before it looks at its node list again.
const POP_TIMEOUT: Duration = Duration::from_secs(1);
/// Stream cap and expiry, as the bridge's defaults (`--stream-maxlen`, `--stream-ttl`).
const STREAM_MAXLEN: u64 = 10_000;
const STREAM_TTL_SECS: u64 = 86_400;
/// The simulated tool.
const TOOL_NAME: &str = "bash";

/// One simulated node.
#[derive(Debug)]
pub struct SimNode {
    pub id: String,
    /// Unix seconds when it started (the heartbeat's `started`).
    pub started: f64,
    alive: AtomicBool,
    /// Cancelled when the node is killed: its running turns stop mid-way.
    killed: CancellationToken,
}

impl SimNode {
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// `sim://<id>`: never polled by the console.
    pub fn server_url(&self) -> String {
        format!("sim://{}", self.id)
    }
}

/// One workstream of a simulated node.
#[derive(Debug)]
struct Ws {
    node: usize,
    name: String,
    /// Creation order, for evicting the oldest idle one.
    created: u64,
    tokens: u64,
    turn_count: u64,
    /// Sends accepted and not finished (the running one included).
    pending: Arc<AtomicU64>,
    /// Held by the running turn: turns of one workstream run one after the other, turns of
    /// different workstreams concurrently.
    turn: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug, Default)]
struct State {
    ws: HashMap<String, Ws>,
    /// Workstreams per node.
    per_node: Vec<usize>,
    created: u64,
}

/// Every simulated node of one run and their shared connections.
pub struct Cluster {
    cfg: SimConfig,
    keys: Keys,
    leases: Leases,
    redis: ConnectionManager,
    client: redis::Client,
    publisher: Publisher,
    /// First part of every stream entry id (ms since the epoch at start): a later run on the
    /// same prefix appends after an earlier one.
    boot: u64,
    /// Second part of every stream entry id, shared by all nodes, so a workstream moved to
    /// another node keeps appending above its last entry.
    seq: AtomicU64,
    nodes: Vec<Arc<SimNode>>,
    state: Mutex<State>,
    metrics: Arc<Metrics>,
    secret: Option<JwtSecret>,
    turns: AtomicU64,
    stop: CancellationToken,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("prefix", &self.keys.prefix())
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

impl Cluster {
    /// Connects, writes every node's first heartbeat and starts the heartbeat, dispatch,
    /// janitor and utilisation tasks.
    pub async fn start(cfg: SimConfig, metrics: Arc<Metrics>) -> anyhow::Result<Arc<Self>> {
        let client = cfg.redis.settings().client()?;
        let redis = manager(&client).await?;
        let keys = Keys::new(cfg.redis.prefix.clone());
        let started = now_timestamp();
        let nodes = (0..cfg.nodes)
            .map(|i| {
                Arc::new(SimNode {
                    id: SimConfig::node_id(i),
                    started,
                    alive: AtomicBool::new(true),
                    killed: CancellationToken::new(),
                })
            })
            .collect::<Vec<_>>();
        let secret = cfg
            .jwt_secret
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(JwtSecret::new);
        let cluster = Arc::new(Self {
            leases: Leases::new(keys.clone()),
            keys,
            redis,
            client,
            publisher: Publisher::new(STREAM_MAXLEN, STREAM_TTL_SECS),
            boot: (started * 1000.0) as u64,
            seq: AtomicU64::new(0),
            state: Mutex::new(State {
                per_node: vec![0; nodes.len()],
                ..State::default()
            }),
            nodes,
            metrics,
            secret,
            turns: AtomicU64::new(0),
            stop: CancellationToken::new(),
            cfg,
        });
        cluster.beat().await?;
        tokio::spawn(cluster.clone().heartbeats());
        tokio::spawn(cluster.clone().janitor());
        tokio::spawn(cluster.clone().utilization());
        let per = cluster.cfg.nodes_per_dispatcher.max(1);
        let indices: Vec<usize> = (0..cluster.nodes.len()).collect();
        let mut slices: Vec<Vec<usize>> = indices.chunks(per).map(<[usize]>::to_vec).collect();
        if slices.is_empty() {
            slices.push(Vec::new());
        }
        for slice in slices {
            tokio::spawn(cluster.clone().dispatch(slice));
        }
        Ok(cluster)
    }

    pub fn nodes(&self) -> &[Arc<SimNode>] {
        &self.nodes
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Ids of the live nodes' workstreams, sorted (a stable order for seeded choices).
    pub fn workstreams(&self) -> Vec<String> {
        let s = self.state.lock();
        let mut ids: Vec<String> = s.ws.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Stops every task (heartbeats stop too: the keys expire by their TTL, as a bridge's).
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Kills one node: it stops heartbeating, taking messages and publishing; its running
    /// turns end unfinished. Its queue is handed to the shared one once its heartbeat has
    /// expired, as live bridges do with a dead node's queue.
    pub fn kill(&self, index: usize) {
        let Some(node) = self.nodes.get(index) else {
            return;
        };
        if node.alive.swap(false, Ordering::Relaxed) {
            node.killed.cancel();
            self.metrics.node_killed(&node.id);
            tracing::info!(node = %node.id, "node killed");
        }
    }

    // ---- heartbeats, leases, janitor ----

    fn heartbeat_value(&self, node: &SimNode, workstreams: usize) -> String {
        let url = node.server_url();
        let mut hb = NodeHeartbeat {
            server_url: url.clone(),
            started: node.started,
            max_ws: self.cfg.max_ws_per_node as u64,
            sim: Some(true),
            workstreams: Some(workstreams as u64),
            ..NodeHeartbeat::default()
        };
        if let Some(secret) = &self.secret {
            let at = turnstone_runtime::auth::jwt::unix_seconds(std::time::SystemTime::now());
            hb.signed_at = Some(at);
            hb.sig = Some(turnstone_runtime::auth::heartbeat::sign(
                secret, &node.id, &url, at,
            ));
        }
        hb.encode()
    }

    /// One heartbeat of every live node and a refresh of their leases, in one round trip.
    async fn beat(&self) -> anyhow::Result<()> {
        let ttl = self.cfg.heartbeat_ttl().as_secs();
        let lease = self.cfg.lease_ttl().as_secs();
        let (counts, owned): (Vec<usize>, Vec<(String, usize)>) = {
            let s = self.state.lock();
            (
                s.per_node.clone(),
                s.ws.iter().map(|(id, w)| (id.clone(), w.node)).collect(),
            )
        };
        let mut pipe = redis::pipe();
        for (i, node) in self.nodes.iter().enumerate() {
            if !node.is_alive() {
                continue;
            }
            pipe.cmd("SET")
                .arg(self.keys.node_heartbeat(&node.id))
                .arg(self.heartbeat_value(node, counts.get(i).copied().unwrap_or(0)))
                .arg("EX")
                .arg(ttl)
                .ignore();
        }
        for (ws_id, node) in owned {
            if self.nodes.get(node).is_some_and(|n| n.is_alive()) {
                pipe.cmd("SET")
                    .arg(self.keys.ws_owner(&ws_id))
                    .arg(&self.nodes[node].id)
                    .arg("EX")
                    .arg(lease)
                    .ignore();
            }
        }
        let _: () = pipe.query_async(&mut self.redis.clone()).await?;
        Ok(())
    }

    async fn heartbeats(self: Arc<Self>) {
        let every = self.cfg.heartbeat_ttl() / 2;
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            if let Err(e) = self.beat().await {
                tracing::warn!(error = %e, "heartbeats not written");
            }
        }
    }

    /// Hands the queues of killed nodes whose heartbeat has expired to the shared queue.
    async fn janitor(self: Arc<Self>) {
        let every = (self.cfg.heartbeat_ttl() / 4).max(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            for node in self.nodes.iter().filter(|n| !n.is_alive()) {
                let mut conn = self.redis.clone();
                match self.leases.is_alive(&mut conn, &node.id).await {
                    Ok(false) => {}
                    _ => continue,
                }
                loop {
                    let moved: Result<Option<String>, _> = redis::cmd("LMOVE")
                        .arg(self.keys.inbound_node(&node.id))
                        .arg(self.keys.inbound())
                        .arg("LEFT")
                        .arg("RIGHT")
                        .query_async(&mut conn)
                        .await;
                    if !matches!(moved, Ok(Some(_))) {
                        break;
                    }
                }
            }
        }
    }

    async fn utilization(self: Arc<Self>) {
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            let counts = {
                let s = self.state.lock();
                self.nodes
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| n.is_alive())
                    .map(|(i, _)| s.per_node.get(i).copied().unwrap_or(0))
                    .collect()
            };
            self.metrics.snapshot(counts);
        }
    }

    // ---- dispatch ----

    /// Pops the queues of `slice`'s live nodes (first) and the shared queue, and hands each
    /// message to a task of its own.
    async fn dispatch(self: Arc<Self>, slice: Vec<usize>) {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let mut conn = None;
        while !self.stop.is_cancelled() {
            let c = match conn.as_mut() {
                Some(c) => c,
                None => match blocking_connection(&self.client, POP_TIMEOUT).await {
                    Ok(c) => conn.insert(c),
                    Err(e) => {
                        tracing::warn!(error = %e, "dispatcher cannot connect");
                        tokio::time::sleep(backoff.delay()).await;
                        continue;
                    }
                },
            };
            let mut keys: Vec<String> = slice
                .iter()
                .filter(|i| self.nodes[**i].is_alive())
                .map(|i| self.keys.inbound_node(&self.nodes[*i].id))
                .collect();
            keys.push(self.keys.inbound());
            let mut pop = redis::cmd("BLPOP");
            pop.arg(&keys).arg(POP_TIMEOUT.as_secs_f64());
            let popped: Result<Option<(String, String)>, _> = tokio::select! {
                _ = self.stop.cancelled() => return,
                r = pop.query_async(c) => r,
            };
            match popped {
                Ok(Some((queue, raw))) => {
                    backoff.reset();
                    let from = slice
                        .iter()
                        .copied()
                        .find(|i| self.keys.inbound_node(&self.nodes[*i].id) == queue);
                    tokio::spawn(self.clone().handle(raw, from));
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "pop failed; reconnecting");
                    conn = None;
                    tokio::time::sleep(backoff.delay()).await;
                }
            }
        }
    }

    /// Handles one inbound message taken from `from`'s queue (`None`: the shared queue).
    pub async fn handle(self: Arc<Self>, raw: String, from: Option<usize>) {
        let msg = match InboundMessage::decode(raw.as_bytes()) {
            Ok(m) => m,
            Err(e) => {
                let ev = OutboundEvent::Error(out(
                    "",
                    "",
                    Notice {
                        message: format!("Failed to process message: {e}"),
                    },
                ));
                self.pubsub(&self.keys.events_global(), &ev).await;
                return;
            }
        };
        let cid = msg.correlation_id().to_string();
        match msg {
            InboundMessage::Send(s) => self.send(s, from).await,
            InboundMessage::CreateWorkstream(c) => self.create_message(c, from).await,
            InboundMessage::CloseWorkstream(c) => {
                let closed = self.close(&c.ws_id).await;
                let detail = if closed { "" } else { "Unknown workstream" };
                self.ack(&c.ws_id, &cid, closed, detail).await;
            }
            InboundMessage::Command(c) => self.ack(&c.ws_id, &cid, true, "").await,
            InboundMessage::Cancel(c) => self.ack(&c.ws_id, &cid, true, "").await,
            InboundMessage::ListWorkstreams(_) => {
                let node = from.or_else(|| self.pick_node());
                let rows = {
                    let s = self.state.lock();
                    let mut rows: Vec<_> =
                        s.ws.iter()
                            .filter(|(_, w)| Some(w.node) == node)
                            .map(|(id, w)| {
                                let state = if w.pending.load(Ordering::Relaxed) > 0 {
                                    "thinking"
                                } else {
                                    "idle"
                                };
                                json!({"id": id, "name": w.name, "state": state})
                            })
                            .collect();
                    rows.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
                    rows
                };
                let ev: OutboundEvent = out("", &cid, WsListBody { workstreams: rows }).into();
                self.pubsub(&self.keys.events_global(), &ev).await;
            }
            InboundMessage::Health(_) => {
                let node = from.or_else(|| self.pick_node()).unwrap_or(0);
                let ws = self.state.lock().per_node.get(node).copied().unwrap_or(0);
                let data = json!({
                    "status": "ok",
                    "node_id": self.nodes.get(node).map(|n| n.id.clone()).unwrap_or_default(),
                    "sim": true,
                    "workstreams": ws,
                    "max_ws": self.cfg.max_ws_per_node,
                });
                let ev: OutboundEvent = out("", &cid, HealthResponseBody { data }).into();
                self.pubsub(&self.keys.events_global(), &ev).await;
            }
            InboundMessage::ListNodes(_) => {
                // Each heartbeat plus its `node_id`, as the proto's `node_list` item.
                let nodes = self
                    .leases
                    .heartbeats(&mut self.redis.clone())
                    .await
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(id, raw)| {
                        NodeHeartbeat::decode(&raw)
                            .ok()
                            .map(|hb| hb.to_node_list_item(&id))
                    })
                    .collect();
                let ev: OutboundEvent = out("", &cid, NodeListBody { nodes }).into();
                self.pubsub(&self.keys.events_global(), &ev).await;
            }
            // No simulated turn asks for approval or a plan review.
            InboundMessage::Approve(_) | InboundMessage::PlanFeedback(_) => {}
        }
    }

    /// The live node with the fewest workstreams (lowest index on ties).
    fn pick_node(&self) -> Option<usize> {
        let s = self.state.lock();
        (0..self.nodes.len())
            .filter(|i| self.nodes[*i].is_alive())
            .min_by_key(|i| (s.per_node.get(*i).copied().unwrap_or(0), *i))
    }

    /// The live node named by `target`, if any.
    fn node_named(&self, target: &str) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.id == target)
            .filter(|i| self.nodes[*i].is_alive())
    }

    /// The live node that runs `ws_id`, re-homing it (rendezvous over the live nodes, as
    /// the bridges do with a soft-pinned workstream) when its node was killed.
    async fn owner_of(&self, ws_id: &str) -> Option<usize> {
        let (old, moved) = {
            let mut s = self.state.lock();
            let old = s.ws.get(ws_id)?.node;
            if self.nodes[old].is_alive() {
                return Some(old);
            }
            let live: Vec<&str> = self
                .nodes
                .iter()
                .filter(|n| n.is_alive())
                .map(|n| n.id.as_str())
                .collect();
            let chosen = rendezvous(ws_id, live)?;
            let new = self.nodes.iter().position(|n| n.id == chosen)?;
            if let Some(w) = s.ws.get_mut(ws_id) {
                w.node = new;
            }
            s.per_node[old] = s.per_node[old].saturating_sub(1);
            s.per_node[new] += 1;
            (old, new)
        };
        let mut conn = self.redis.clone();
        let (from, to) = (&self.nodes[old].id, &self.nodes[moved].id);
        let _ = self
            .leases
            .claim(&mut conn, ws_id, Some(from), to, self.cfg.lease_ttl())
            .await;
        let ev = OutboundEvent::Info(out(
            ws_id,
            "",
            Notice {
                message: format!(
                    "Workstream moved to node '{to}' without its history: node '{from}' is down."
                ),
            },
        ));
        self.pubsub(&self.keys.events_ws(ws_id), &ev).await;
        Some(moved)
    }

    async fn send(self: Arc<Self>, s: SendMessage, from: Option<usize>) {
        let cid = s.correlation_id.clone();
        let started = s.timestamp;
        let (node, ws_id) = if s.ws_id.is_empty() {
            let node = self
                .node_named(&s.target_node)
                .or(from.filter(|i| self.nodes[*i].is_alive()))
                .or_else(|| self.pick_node());
            let Some(node) = node else {
                self.refuse("", &cid, "no live node").await;
                return;
            };
            match self.create(node, &s.name, &cid).await {
                Ok(ws) => (node, ws),
                Err(why) => {
                    self.refuse("", &cid, &why).await;
                    return;
                }
            }
        } else {
            match self.owner_of(&s.ws_id).await {
                Some(node) => (node, s.ws_id.clone()),
                None => {
                    self.refuse(&s.ws_id, &cid, "Unknown workstream").await;
                    return;
                }
            }
        };
        let ahead = self
            .state
            .lock()
            .ws
            .get(&ws_id)
            .map(|w| w.pending.fetch_add(1, Ordering::Relaxed))
            .unwrap_or(0);
        if ahead == 0 {
            self.ack(&ws_id, &cid, true, "").await;
        } else {
            let ev: OutboundEvent = out(
                &ws_id,
                &cid,
                AckBody {
                    status: "queued".into(),
                    detail: format!("queued at position {ahead}"),
                },
            )
            .into();
            self.pubsub(&self.keys.events_ws(&ws_id), &ev).await;
        }
        self.turn(node, &ws_id, &cid, started).await;
    }

    async fn create_message(self: Arc<Self>, c: CreateWorkstreamMessage, from: Option<usize>) {
        let cid = c.correlation_id.clone();
        let node = if c.target_node.is_empty() {
            from.filter(|i| self.nodes[*i].is_alive())
                .or_else(|| self.pick_node())
        } else {
            self.node_named(&c.target_node)
        };
        let Some(node) = node else {
            let why = if c.target_node.is_empty() {
                "no live node".to_string()
            } else {
                format!("target node '{}' is not alive", c.target_node)
            };
            self.refuse("", &cid, &why).await;
            return;
        };
        let ws_id = match self.create(node, &c.name, &cid).await {
            Ok(ws) => ws,
            Err(why) => {
                self.refuse("", &cid, &why).await;
                return;
            }
        };
        if !c.initial_message.is_empty() {
            if let Some(w) = self.state.lock().ws.get(&ws_id) {
                w.pending.fetch_add(1, Ordering::Relaxed);
            }
            self.turn(node, &ws_id, &cid, c.timestamp).await;
        }
    }

    /// Creates a workstream on `node` (evicting its oldest idle one at capacity, as a node
    /// does), takes its lease and announces it on global (`node_id` `""`) and cluster.
    pub async fn create(&self, node: usize, name: &str, cid: &str) -> Result<String, String> {
        let ws_id = turnstone_proto::ids::new_ws_id();
        let name = if name.is_empty() {
            format!("sim-ws-{}", &ws_id[..8])
        } else {
            name.to_string()
        };
        let evicted = {
            let mut s = self.state.lock();
            let mut evicted = None;
            if s.per_node[node] >= self.cfg.max_ws_per_node.max(1) {
                let oldest =
                    s.ws.iter()
                        .filter(|(_, w)| w.node == node && w.pending.load(Ordering::Relaxed) == 0)
                        .min_by_key(|(_, w)| w.created)
                        .map(|(id, _)| id.clone());
                match oldest {
                    Some(id) => {
                        s.ws.remove(&id);
                        s.per_node[node] -= 1;
                        evicted = Some(id);
                    }
                    None => {
                        return Err(format!(
                            "node '{}' is at capacity ({} workstreams, all busy)",
                            self.nodes[node].id, self.cfg.max_ws_per_node
                        ));
                    }
                }
            }
            s.created += 1;
            let created = s.created;
            s.ws.insert(
                ws_id.clone(),
                Ws {
                    node,
                    name: name.clone(),
                    created,
                    tokens: 0,
                    turn_count: 0,
                    pending: Arc::default(),
                    turn: Arc::default(),
                },
            );
            s.per_node[node] += 1;
            evicted
        };
        if let Some(old) = evicted {
            self.announce_closed(node, &old).await;
        }
        let node_id = self.nodes[node].id.clone();
        let mut conn = self.redis.clone();
        if let Err(e) = self
            .leases
            .own(&mut conn, &ws_id, &node_id, self.cfg.lease_ttl())
            .await
        {
            tracing::warn!(ws_id, error = %e, "lease not taken (the next heartbeat takes it)");
        }
        let global: OutboundEvent = out(
            &ws_id,
            cid,
            WsCreatedBody {
                name: name.clone(),
                ..WsCreatedBody::default()
            },
        )
        .into();
        self.pubsub(&self.keys.events_global(), &global).await;
        let cluster: OutboundEvent = out(
            &ws_id,
            cid,
            WsCreatedBody {
                name,
                node_id,
                ..WsCreatedBody::default()
            },
        )
        .into();
        self.pubsub(&self.keys.events_cluster(), &cluster).await;
        Ok(ws_id)
    }

    /// Closes a workstream; `false` when it is unknown.
    pub async fn close(&self, ws_id: &str) -> bool {
        let node = {
            let mut s = self.state.lock();
            let Some(w) = s.ws.remove(ws_id) else {
                return false;
            };
            s.per_node[w.node] = s.per_node[w.node].saturating_sub(1);
            w.node
        };
        self.announce_closed(node, ws_id).await;
        true
    }

    /// `ws_closed` on global and cluster (and the stream), then the lease goes.
    async fn announce_closed(&self, node: usize, ws_id: &str) {
        let ev = OutboundEvent::WsClosed(out(ws_id, "", EmptyBody::default()));
        self.entry(
            ws_id,
            vec![(
                vec![self.keys.events_global(), self.keys.events_cluster()],
                ev,
            )],
        )
        .await;
        let mut conn = self.redis.clone();
        let _ = self
            .leases
            .release(&mut conn, ws_id, &self.nodes[node].id)
            .await;
    }

    // ---- one turn ----

    /// Sleeps `secs` unless the node is killed meanwhile (`false` then).
    async fn wait(&self, node: usize, secs: f64) -> bool {
        let killed = &self.nodes[node].killed;
        if secs > 0.0 {
            tokio::select! {
                _ = killed.cancelled() => return false,
                _ = tokio::time::sleep(Duration::from_secs_f64(secs)) => {}
            }
        }
        !killed.is_cancelled()
    }

    /// One simulated turn: thinking, streamed content, tool rounds, status, idle,
    /// `turn_complete` with the message's correlation id.
    async fn turn(&self, node: usize, ws_id: &str, cid: &str, started: f64) {
        let Some((lock, pending)) = self
            .state
            .lock()
            .ws
            .get(ws_id)
            .map(|w| (w.turn.clone(), w.pending.clone()))
        else {
            return;
        };
        let _running = lock.lock().await;
        self.metrics.turn_started();
        let finished = self.run_turn(node, ws_id, cid, started).await;
        pending.fetch_sub(1, Ordering::Relaxed);
        if !finished {
            self.metrics.turn_interrupted(cid);
        }
    }

    async fn run_turn(&self, node: usize, ws_id: &str, cid: &str, started: f64) -> bool {
        let cfg = &self.cfg;
        let n = self.turns.fetch_add(1, Ordering::Relaxed);
        let mut rng = SimRng::new(cfg.seed, 1_000_000 + n);
        let rounds = rng.below(cfg.max_tool_rounds as usize + 1);
        if !self.state_change(node, ws_id, "thinking", "").await {
            return false;
        }
        let mut content = String::new();
        let mut completion = 0u64;
        let mut tool_calls = 0u64;
        for round in 0..=rounds {
            if !self
                .wait(node, rng.normal(cfg.llm_latency, cfg.llm_latency_sd))
                .await
            {
                return false;
            }
            let tokens = rng.normal(cfg.tokens, cfg.tokens_sd).round().max(1.0) as usize;
            completion += tokens as u64;
            let per_chunk = cfg.tokens_per_chunk.max(1);
            let mut done = 0;
            while done < tokens {
                let take = per_chunk.min(tokens - done);
                if cfg.tokens_per_sec > 0.0
                    && !self.wait(node, take as f64 / cfg.tokens_per_sec).await
                {
                    return false;
                }
                let text: String = (done..done + take).map(|i| format!("t{i} ")).collect();
                content.push_str(&text);
                done += take;
                let ev = OutboundEvent::Content(out(ws_id, "", Text { text }));
                if !self.ws_event(node, ws_id, ev).await {
                    return false;
                }
            }
            let end = OutboundEvent::StreamEnd(out(ws_id, "", EmptyBody::default()));
            if !self.ws_event(node, ws_id, end).await {
                return false;
            }
            if round == rounds {
                break;
            }
            if !self
                .state_change(node, ws_id, "running", "bash: simulated")
                .await
                || !self.wait(node, cfg.tool_latency).await
            {
                return false;
            }
            let failed = rng.chance(cfg.tool_failure_rate);
            tool_calls += 1;
            self.metrics.tool_call(failed);
            let output = if failed {
                "Error: simulated tool failure".to_string()
            } else {
                format!("simulated output of round {}", round + 1)
            };
            let result: OutboundEvent = out(
                ws_id,
                "",
                ToolResultBody {
                    call_id: format!("call_{}", rng.hex(12)),
                    name: TOOL_NAME.into(),
                    output,
                },
            )
            .into();
            if !self.ws_event(node, ws_id, result).await
                || !self.state_change(node, ws_id, "thinking", "").await
            {
                return false;
            }
        }
        let (total, turn_count) = {
            let mut s = self.state.lock();
            match s.ws.get_mut(ws_id) {
                Some(w) => {
                    w.tokens += completion + 50;
                    w.turn_count += 1;
                    (w.tokens, w.turn_count)
                }
                None => (completion, 1),
            }
        };
        let window = cfg.context_window.max(1);
        let status = OutboundEvent::Status(out(
            ws_id,
            "",
            Status {
                prompt_tokens: total.saturating_sub(completion),
                completion_tokens: completion,
                total_tokens: total,
                context_window: window,
                // A percentage with one decimal, as a real node sends it.
                pct: (total as f64 / window as f64 * 1000.0).round() / 10.0,
                tool_calls_this_turn: tool_calls,
                turn_count,
                ..Status::default()
            },
        ));
        if !self.ws_event(node, ws_id, status).await
            || !self.state_change(node, ws_id, "idle", "").await
        {
            return false;
        }
        let complete = OutboundEvent::TurnComplete(out(
            ws_id,
            cid,
            TurnCompleteBody {
                content,
                receipts: Vec::new(),
            },
        ));
        if !self.ws_event(node, ws_id, complete).await {
            return false;
        }
        self.metrics
            .turn_completed(&self.nodes[node].id, cid, started);
        true
    }

    // ---- publishing ----

    /// `state_change` on the workstream and global channels, `cluster_state` (with the
    /// workstream's tokens and context ratio) on the cluster channel: one stream entry.
    async fn state_change(&self, node: usize, ws_id: &str, state: &str, activity: &str) -> bool {
        if !self.nodes[node].is_alive() {
            return false;
        }
        let tokens = self.state.lock().ws.get(ws_id).map_or(0, |w| w.tokens);
        let ratio = tokens as f64 / self.cfg.context_window.max(1) as f64;
        let change: OutboundEvent = out(
            ws_id,
            "",
            StateChangeBody {
                state: state.to_string(),
            },
        )
        .into();
        let cluster: OutboundEvent = out(
            ws_id,
            "",
            ClusterStateBody {
                state: state.to_string(),
                node_id: self.nodes[node].id.clone(),
                tokens,
                context_ratio: (ratio * 1000.0).round() / 1000.0,
                activity: activity.to_string(),
                activity_state: if activity.is_empty() { "" } else { "tool" }.to_string(),
            },
        )
        .into();
        self.entry(
            ws_id,
            vec![
                (
                    vec![self.keys.events_ws(ws_id), self.keys.events_global()],
                    change,
                ),
                (vec![self.keys.events_cluster()], cluster),
            ],
        )
        .await;
        true
    }

    /// An event of the workstream's own channel (and stream), unless the node was killed.
    async fn ws_event(&self, node: usize, ws_id: &str, event: OutboundEvent) -> bool {
        if !self.nodes[node].is_alive() {
            return false;
        }
        self.entry(ws_id, vec![(vec![self.keys.events_ws(ws_id)], event)])
            .await;
        true
    }

    /// One stream entry of `ws_id` (the first group's event) and its pub/sub copies, by the
    /// bridge's publish script.
    async fn entry(&self, ws_id: &str, groups: Vec<(Vec<String>, OutboundEvent)>) {
        let Some(event_type) = groups.first().map(|(_, e)| e.type_name().to_string()) else {
            return;
        };
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        // One sequence for the whole simulated cluster: one origin.
        let origin = Origin {
            node_id: "turnstone-sim".into(),
            boot: self.boot,
            seq,
        };
        let Some(publication) = Publication::new(
            self.keys.stream(ws_id),
            self.keys.stream_positions(ws_id),
            Some(origin),
            event_type,
            groups,
        ) else {
            return;
        };
        let mut backoff = Backoff::default();
        for _ in 0..5 {
            match self
                .publisher
                .publish(&mut self.redis.clone(), &publication)
                .await
            {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(ws_id, error = %e, "event not published yet; retrying");
                    tokio::time::sleep(backoff.delay()).await;
                }
            }
        }
    }

    /// Publishes one event on pub/sub only (`ack`, `ws_created`, answers), as the bridge.
    async fn pubsub(&self, channel: &str, event: &OutboundEvent) {
        let r: Result<i64, _> = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(event.encode())
            .query_async(&mut self.redis.clone())
            .await;
        if let Err(e) = r {
            tracing::warn!(channel, error = %e, "publish failed");
        }
    }

    async fn ack(&self, ws_id: &str, cid: &str, ok: bool, detail: &str) {
        if !ok {
            self.metrics.refused(cid);
        }
        let ev: OutboundEvent = out(
            ws_id,
            cid,
            AckBody {
                status: if ok { ACK_OK } else { ACK_ERROR }.into(),
                detail: detail.to_string(),
            },
        )
        .into();
        self.pubsub(&self.keys.events_ws(ws_id), &ev).await;
    }

    /// A refusal: `ack` status `error` (and `error`) on the workstream's channel, or the
    /// global one when there is no workstream, as the bridge tells a producer.
    async fn refuse(&self, ws_id: &str, cid: &str, why: &str) {
        self.metrics.refused(cid);
        let channel = if ws_id.is_empty() {
            self.keys.events_global()
        } else {
            self.keys.events_ws(ws_id)
        };
        let ack: OutboundEvent = out(
            ws_id,
            cid,
            AckBody {
                status: ACK_ERROR.into(),
                detail: why.to_string(),
            },
        )
        .into();
        let err = OutboundEvent::Error(out(
            ws_id,
            cid,
            Notice {
                message: why.to_string(),
            },
        ));
        self.pubsub(&channel, &ack).await;
        self.pubsub(&channel, &err).await;
    }
}

/// An outbound event about `ws_id` (`""`: none) answering `cid` (`""`: nothing), stamped now.
fn out<B>(ws_id: &str, cid: &str, body: B) -> Outbound<B> {
    Outbound {
        correlation_id: cid.to_string(),
        ..Outbound::new(ws_id, body)
    }
}
