//! The collector (cluster spec §6.2): three tasks that keep the [`Cluster`] model current
//! and fan every change out to the cluster SSE listeners.
//!
//! * **discovery** — every `discovery_interval`, the heartbeat keys (`SCAN {p}:node:*` +
//!   `MGET`, read by `turnstone_queue::Leases::heartbeats`, the bridges' discovery): new
//!   nodes join (`node_joined`, polled at once), missing ones are lost (`node_lost`). A cluster event naming an unknown node wakes discovery early.
//! * **poll** — every `poll_interval`, each HTTP node's `/v1/api/dashboard` (non-2xx is a
//!   failure) and `/health` (failure → `{}`), at most `poll_concurrency` at once, each node
//!   delayed by a hash-based jitter in `[0, interval/2)`. Failures keep the node's last data.
//! * **events** — `SUBSCRIBE {p}:events:cluster`, applied to the model and fanned out
//!   unchanged (unknown types and nodes included), reconnecting with backoff.
//!
//! The model is published as an `Arc<Cluster>`: a query takes the current one under the
//! lock (a pointer copy) and runs without it, so 1,000 polls a second and the listings do
//! not wait for each other (see [`crate::model`] for the copy-on-write). Every event goes
//! into one broadcast ring of `sse_queue` events that each listener reads at its own pace.
//! A listener takes the model and its place in the ring under the same lock, so no event
//! falls between its snapshot and its stream; one that falls a whole ring behind is told
//! so and starts again from a fresh snapshot ([`crate::events`]).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use turnstone_proto::ids::now_timestamp;
use turnstone_proto::keys::Keys;
use turnstone_proto::mq::NodeHeartbeat;
use turnstone_queue::Leases;

use crate::config::{ConsoleConfig, NodeCredentials};
use crate::model::{Cluster, NodeRecord, ZombieRules};
use crate::trust::HeartbeatTrust;

/// Counters exported on `/metrics`.
#[derive(Debug, Default)]
pub struct CollectorStats {
    pub polls_ok: AtomicU64,
    pub polls_failed: AtomicU64,
    /// Sum of poll durations in microseconds (with `polls_ok + polls_failed` gives the mean).
    pub poll_micros: AtomicU64,
    pub discoveries: AtomicU64,
    pub discovery_errors: AtomicU64,
    pub events_received: AtomicU64,
    pub events_invalid: AtomicU64,
    /// Events an SSE listener missed because it fell `sse_queue` events behind.
    pub sse_dropped: AtomicU64,
    /// Listeners that fell behind and were sent a fresh snapshot (`"resync": true`).
    pub sse_resyncs: AtomicU64,
    pub redis_reconnects: AtomicU64,
}

struct Inner {
    /// The current model; replaced (copy-on-write) by every change.
    cluster: Arc<Cluster>,
    /// Every fanned-out event, in order.
    events: broadcast::Sender<Arc<Value>>,
}

/// The shared collector state. Cheap to clone behind an `Arc`.
pub struct Collector {
    inner: Mutex<Inner>,
    pub config: ConsoleConfig,
    pub keys: Keys,
    /// Node discovery (the heartbeat keys), shared with the bridges.
    leases: Leases,
    pub credentials: NodeCredentials,
    pub stats: CollectorStats,
    http: reqwest::Client,
    redis: redis::Client,
    discover_now: Notify,
    /// The ids of nodes as they join (a console task pushes settings to them).
    joined: tokio::sync::broadcast::Sender<String>,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector")
            .field("prefix", &self.keys.prefix())
            .finish()
    }
}

impl Collector {
    pub fn new(
        config: ConsoleConfig,
        redis: redis::Client,
        credentials: NodeCredentials,
    ) -> Result<Arc<Self>, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(config.poll_timeout)
            .timeout(config.poll_timeout)
            .pool_max_idle_per_host(4)
            .build()?;
        Ok(Arc::new(Self {
            inner: Mutex::new(Inner {
                cluster: Arc::new(Cluster::default()),
                events: broadcast::channel(config.sse_queue.max(1)).0,
            }),
            keys: Keys::new(config.prefix.clone()),
            leases: Leases::new(Keys::new(config.prefix.clone())),
            config,
            credentials,
            stats: CollectorStats::default(),
            http,
            redis,
            discover_now: Notify::new(),
            joined: tokio::sync::broadcast::channel(256).0,
        }))
    }

    fn rules(&self) -> ZombieRules {
        ZombieRules {
            stall_after: self.config.stall_after,
            max_event_loop_lag: self.config.max_event_loop_lag,
        }
    }

    /// The model as it is now; it does not change under the caller.
    pub fn model(&self) -> Arc<Cluster> {
        self.inner.lock().cluster.clone()
    }

    /// Runs `f` on the model as it is now (queries), without holding the lock.
    pub fn read<T>(&self, f: impl FnOnce(&Cluster) -> T) -> T {
        f(&self.model())
    }

    /// Changes the model and fans out `events` under one lock acquisition.
    fn update(&self, f: impl FnOnce(&mut Cluster) -> Vec<Value>) {
        let mut inner = self.inner.lock();
        let events = f(Arc::make_mut(&mut inner.cluster));
        for e in events {
            // No listener: nobody to tell.
            let _ = inner.events.send(Arc::new(e));
        }
    }

    /// Registers a listener: the model to build its snapshot from and the stream of every
    /// later event, taken atomically.
    pub fn subscribe(&self) -> (Arc<Cluster>, broadcast::Receiver<Arc<Value>>) {
        let inner = self.inner.lock();
        (inner.cluster.clone(), inner.events.subscribe())
    }

    /// Counts a listener that fell `missed` events behind and is resynced.
    pub fn count_resync(&self, missed: u64) {
        self.stats.sse_dropped.fetch_add(missed, Ordering::Relaxed);
        self.stats.sse_resyncs.fetch_add(1, Ordering::Relaxed);
    }

    /// The ids of nodes that join from now on (a bounded channel: a receiver that falls
    /// more than 256 behind is told how many it missed).
    pub fn joined(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.joined.subscribe()
    }

    /// Live SSE listeners.
    pub fn listener_count(&self) -> usize {
        self.inner.lock().events.receiver_count()
    }

    /// A new multiplexed Redis connection (commands, not pub/sub).
    pub async fn redis_connection(&self) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        self.redis.get_multiplexed_async_connection().await
    }

    /// Starts discovery, polling and the event subscription; they stop when `stop` fires.
    pub fn spawn(self: &Arc<Self>, stop: CancellationToken) -> Vec<tokio::task::JoinHandle<()>> {
        vec![
            tokio::spawn(self.clone().discovery_loop(stop.clone())),
            tokio::spawn(self.clone().poll_loop(stop.clone())),
            tokio::spawn(self.clone().events_loop(stop)),
        ]
    }

    // ------------------------------------------------------------------ discovery

    async fn discovery_loop(self: Arc<Self>, stop: CancellationToken) {
        let mut conn: Option<redis::aio::MultiplexedConnection> = None;
        loop {
            if conn.is_none() {
                match self.redis_connection().await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        self.stats.discovery_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, "discovery: Redis unavailable");
                    }
                }
            }
            if let Some(c) = conn.as_mut() {
                match self.discover(c).await {
                    Ok(new_nodes) => {
                        for node_id in new_nodes {
                            // No receiver (no store): nothing to tell.
                            let _ = self.joined.send(node_id.clone());
                            let me = self.clone();
                            tokio::spawn(async move { me.poll_node(&node_id).await });
                        }
                    }
                    Err(e) => {
                        self.stats.discovery_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, "discovery failed");
                        conn = None;
                    }
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(self.config.discovery_interval) => {}
                _ = self.discover_now.notified() => {}
            }
        }
    }

    /// One discovery pass; returns the ids of nodes that joined.
    pub async fn discover(
        &self,
        conn: &mut redis::aio::MultiplexedConnection,
    ) -> Result<Vec<String>, turnstone_queue::QueueError> {
        let heartbeats = self.leases.heartbeats(conn).await?;
        let trust = HeartbeatTrust {
            secret: self.credentials.secret().cloned(),
            max_age: self.config.heartbeat_max_age,
            allow: self.config.node_url_allow.clone(),
        };
        let now = turnstone_runtime::auth::jwt::unix_seconds(SystemTime::now());
        let mut beats: Vec<(String, NodeHeartbeat, Option<String>)> =
            Vec::with_capacity(heartbeats.len());
        for (node_id, value) in &heartbeats {
            let node_id = node_id.as_str();
            match NodeHeartbeat::decode(value) {
                Ok(hb) => {
                    let untrusted = hb
                        .server_url
                        .starts_with("http")
                        .then(|| trust.judge(node_id, &hb, now))
                        .flatten();
                    beats.push((node_id.to_string(), hb, untrusted));
                }
                Err(e) => tracing::warn!(node_id, error = %e, "unreadable heartbeat"),
            }
        }
        self.stats.discoveries.fetch_add(1, Ordering::Relaxed);
        let mut joined = Vec::new();
        self.update(|cluster| {
            let mut events = Vec::new();
            let seen: std::collections::HashSet<&str> =
                beats.iter().map(|(id, _, _)| id.as_str()).collect();
            let lost: Vec<String> = cluster
                .nodes
                .keys()
                .filter(|id| !seen.contains(id.as_str()))
                .cloned()
                .collect();
            for id in lost {
                cluster.nodes.remove(&id);
                tracing::info!(node_id = %id, "node lost (heartbeat gone)");
                events.push(json!({"type": "node_lost", "node_id": id}));
            }
            for (id, hb, untrusted) in &beats {
                let url = hb.server_url.trim_end_matches('/');
                if let Some(why) = untrusted
                    && cluster.nodes.get(id).is_none_or(|n| n.untrusted.as_ref() != Some(why))
                {
                    tracing::warn!(node_id = %id, server_url = %url, reason = %why, "node heartbeat not trusted: no credentials are sent to it");
                }
                match cluster.nodes.get(id) {
                    // Unchanged: the node is left as it is (not copied).
                    Some(n)
                        if n.server_url == url
                            && n.max_ws == hb.max_ws
                            && n.started == hb.started
                            && n.untrusted == *untrusted => {}
                    Some(_) => {
                        if let Some(n) = cluster.node_mut(id) {
                            n.server_url = url.to_string();
                            n.max_ws = hb.max_ws;
                            n.started = hb.started;
                            n.untrusted = untrusted.clone();
                        }
                    }
                    None => {
                        let mut record = NodeRecord::new(id, url, hb.started, hb.max_ws);
                        record.untrusted = untrusted.clone();
                        cluster.insert_node(record);
                        tracing::info!(node_id = %id, server_url = %url, "node joined");
                        events.push(json!({"type": "node_joined", "node_id": id}));
                        joined.push(id.clone());
                    }
                }
            }
            events
        });
        Ok(joined)
    }

    // ------------------------------------------------------------------ polling

    fn jitter(&self, node_id: &str) -> Duration {
        if !self.config.poll_jitter {
            return Duration::ZERO;
        }
        let mut h = DefaultHasher::new();
        node_id.hash(&mut h);
        let half = self.config.poll_interval.as_millis() / 2;
        if half == 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(u64::try_from(u128::from(h.finish()) % half).unwrap_or(0))
    }

    async fn poll_loop(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.config.poll_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let ids: Vec<String> = self.read(|c| {
                c.nodes
                    .values()
                    .filter(|n| n.credential_url().is_some())
                    .map(|n| n.node_id.clone())
                    .collect()
            });
            let me = &self;
            let round = futures::stream::iter(ids).for_each_concurrent(
                self.config.poll_concurrency.max(1),
                |id| async move {
                    tokio::time::sleep(me.jitter(&id)).await;
                    me.poll_node(&id).await;
                },
            );
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = round => {}
            }
        }
    }

    /// Polls one node now and applies the result.
    pub async fn poll_node(&self, node_id: &str) {
        let Some(url) = self.read(|c| {
            c.nodes
                .get(node_id)
                .and_then(|n| n.credential_url().map(str::to_string))
        }) else {
            // Lost meanwhile, untrusted (no credentials go there), or a simulator node
            // (`sim://`), which is never polled.
            return;
        };
        let started = Instant::now();
        let auth = match self.credentials.collector_header() {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "cannot mint the collector token");
                None
            }
        };
        let get = |path: &str| {
            let mut req = self.http.get(format!("{url}{path}"));
            if let Some(a) = &auth {
                req = req.header(reqwest::header::AUTHORIZATION, a);
            }
            req.send()
        };
        let (dashboard, health) = tokio::join!(get("/v1/api/dashboard"), get("/health"));
        let dashboard: Result<Value, (String, bool)> = match dashboard {
            Ok(resp) if resp.status().is_success() => resp
                .json::<Value>()
                .await
                .map_err(|e| (format!("bad dashboard JSON: {e}"), false)),
            Ok(resp) => {
                let status = resp.status().as_u16();
                let auth = matches!(status, 401 | 403);
                Err((format!("dashboard answered HTTP {status}"), auth))
            }
            Err(e) => Err((transport_error(&e), false)),
        };
        let health = match health {
            Ok(resp) if resp.status().is_success() => {
                resp.json::<Value>().await.unwrap_or_else(|_| json!({}))
            }
            _ => json!({}),
        };
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.stats.poll_micros.fetch_add(micros, Ordering::Relaxed);
        let rules = self.rules();
        match dashboard {
            Ok(dash) => {
                self.stats.polls_ok.fetch_add(1, Ordering::Relaxed);
                let now = Instant::now();
                self.update(|c| match c.node_mut(node_id) {
                    // The node may have been lost while we polled.
                    Some(n) => n.apply_poll(dash, health, now_timestamp(), now, &rules),
                    None => Vec::new(),
                });
            }
            Err((error, auth_failed)) => {
                self.stats.polls_failed.fetch_add(1, Ordering::Relaxed);
                if auth_failed {
                    tracing::warn!(node_id, %error, "node refused the console's credentials");
                } else {
                    tracing::debug!(node_id, %error, "poll failed");
                }
                self.update(|c| {
                    if let Some(n) = c.node_mut(node_id) {
                        n.apply_poll_failure(error, auth_failed);
                        // A node that answers /health is still worth showing as such.
                        if health.as_object().is_some_and(|o| !o.is_empty()) {
                            n.set_health(health);
                        }
                    }
                    Vec::new()
                });
            }
        }
    }

    // ------------------------------------------------------------------ events

    async fn events_loop(self: Arc<Self>, stop: CancellationToken) {
        let channel = self.keys.events_cluster();
        let mut backoff =
            turnstone_queue::Backoff::new(Duration::from_millis(200), Duration::from_secs(10))
                .without_jitter();
        loop {
            let session = async {
                let mut pubsub = self.redis.get_async_pubsub().await?;
                pubsub.subscribe(&channel).await?;
                tracing::info!(%channel, "subscribed to cluster events");
                let mut stream = pubsub.into_on_message();
                while let Some(msg) = stream.next().await {
                    let payload: Vec<u8> = msg.get_payload().unwrap_or_default();
                    self.handle_event(&payload);
                }
                Ok::<(), redis::RedisError>(())
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                r = session => {
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "cluster event subscription failed");
                    } else {
                        tracing::warn!("cluster event subscription ended");
                    }
                }
            }
            self.stats.redis_reconnects.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(backoff.delay()) => {}
            }
        }
    }

    /// Applies and fans out one cluster event payload (invalid JSON is dropped).
    pub fn handle_event(&self, payload: &[u8]) {
        self.stats.events_received.fetch_add(1, Ordering::Relaxed);
        let event: Value = match serde_json::from_slice(payload) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                self.stats.events_invalid.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let node_id = event
            .get("node_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let unknown_node = !node_id.is_empty() && self.read(|c| !c.nodes.contains_key(node_id));
        self.update(|c| {
            c.apply_event(&event);
            vec![event]
        });
        if unknown_node {
            // Probably a node whose heartbeat we have not scanned yet.
            self.discover_now.notify_one();
        }
    }

    /// Asks the discovery task to scan now.
    pub fn discover_soon(&self) {
        self.discover_now.notify_one();
    }
}

fn transport_error(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "connection refused or unreachable".to_string()
    } else {
        format!("request failed: {e}")
    }
}
