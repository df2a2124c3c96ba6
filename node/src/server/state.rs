//! The node's shared state: the workstream manager, the node-wide ordered event log, the
//! idempotency window of sends, auth, and start-up facts for `/health`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use std::borrow::Cow;

use parking_lot::Mutex;
use serde_json::Value;
use turnstone_engine::{
    Closed, CreateOptions, Envelope, Event, EventLog, Manager, ManagerError, Sequenced,
    WorkstreamHandle,
};
use turnstone_proto::event::{NodeNotice, NodeStreamBody, NodeStreamEntry, NodeWsEvent};
use turnstone_proto::sse;
use turnstone_runtime::auth::Authenticator;

use crate::persist::{Persistence, StoreJournal};

/// One entry of the node-wide stream: a workstream event, or a node-level notice about a
/// workstream (closed, renamed) that no workstream log carries.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeEvent {
    /// Position in the node-wide stream (the SSE `id` of `/v1/api/events/node`).
    pub seq: u64,
    pub kind: NodeEventKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeEventKind {
    Ws(Arc<Envelope>),
    Closed {
        ws_id: String,
        reason: String,
        name: Option<String>,
    },
    Renamed {
        ws_id: String,
        name: String,
    },
    /// A workstream came to life (created or resumed); only on the node-wide stream.
    Created {
        ws_id: String,
        name: String,
    },
}

impl Sequenced for NodeEvent {
    fn seq(&self) -> u64 {
        self.seq
    }
}

impl NodeEvent {
    /// The node-level notice this entry is, as the wire has it (`None` for a workstream
    /// event).
    pub fn notice(&self) -> Option<NodeNotice> {
        Some(match &self.kind {
            NodeEventKind::Ws(_) => return None,
            NodeEventKind::Closed {
                ws_id,
                reason,
                name,
            } => NodeNotice::WsClosed(sse::WsClosed {
                ws_id: ws_id.clone(),
                reason: Some(reason.clone()),
                name: name.clone(),
            }),
            NodeEventKind::Renamed { ws_id, name } => NodeNotice::WsRename(sse::WsRename {
                ws_id: ws_id.clone(),
                name: name.clone(),
            }),
            NodeEventKind::Created { ws_id, name } => NodeNotice::WsCreated(sse::WsCreated {
                ws_id: ws_id.clone(),
                name: name.clone(),
            }),
        })
    }

    /// The JSON text of this entry on the node-wide stream ([`NodeStreamEntry`]): the
    /// workstream event with `ws_id`, its per-workstream `seq` as `ws_seq`, and `node_seq`.
    /// One serialisation, straight from the typed event (no `Value` in between).
    pub fn encode(&self) -> String {
        let body = match &self.kind {
            NodeEventKind::Ws(env) => NodeStreamBody::Ws(NodeWsEvent {
                event: Cow::Borrowed(&env.event),
                ws_id: Cow::Borrowed(&env.ws_id),
                ws_seq: env.seq,
            }),
            _ => match self.notice() {
                Some(notice) => NodeStreamBody::Notice(Cow::Owned(notice)),
                None => return String::new(),
            },
        };
        NodeStreamEntry {
            body,
            node_seq: self.seq,
        }
        .encode()
    }
}

/// Settings of a node server.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    pub node_id: String,
    /// Model name reported by `/health` and `connected`.
    pub model: String,
    pub model_alias: String,
    /// Node-wide events retained for `Last-Event-ID` resumption.
    pub node_log_capacity: usize,
    /// How long a `correlation_id` / `Idempotency-Key` of a send is remembered.
    pub idempotency_window: Duration,
    /// Most remembered keys (oldest forgotten first).
    pub idempotency_capacity: usize,
    /// Per-client-IP rate limiting (off by default).
    pub ratelimit: super::ratelimit::RateLimitConfig,
    /// Origins allowed by CORS (`TURNSTONE_CORS_ORIGINS`); empty = no CORS at all, as the
    /// original (then `OPTIONS` is `405`).
    pub cors_origins: Vec<String>,
    /// Most messages one workstream's queue holds (`--max-queued-sends`); past it a send
    /// is answered `busy` with a reason.
    pub max_queued_sends: usize,
    /// The version `/health` reports (`TURNSTONE_ADVERTISED_VERSION` overrides the build's;
    /// lets an operator or a test stage a version drift).
    pub version: String,
    /// `/metrics` needs a `read` credential (`--metrics-auth`); public by default.
    pub metrics_auth: bool,
    /// Most event streams one identity may hold open at once.
    pub sse_per_identity: usize,
    /// Time a client has to send a request's headers (see `server::conn`).
    pub header_read_timeout: Duration,
    /// The reranker (also in the engine's config): `[rerank]`'s endpoint, or the stored
    /// Reranker role's (`model.reranker`, applied at each reload), or none yet; its live
    /// settings follow the stored `tools.rerank_*` keys, its fallbacks are counted in
    /// `/metrics`. `None`: no reranker ever (a node without the server binary's set-up).
    pub reranker: Option<Arc<crate::rerank::NodeReranker>>,
}

impl Default for NodeOptions {
    fn default() -> Self {
        Self {
            node_id: "local".into(),
            model: String::new(),
            model_alias: String::new(),
            node_log_capacity: 65_536,
            idempotency_window: Duration::from_secs(600),
            idempotency_capacity: 100_000,
            ratelimit: super::ratelimit::RateLimitConfig::default(),
            cors_origins: Vec::new(),
            max_queued_sends: crate::send_queue::DEFAULT_MAX_QUEUED_SENDS,
            version: env!("CARGO_PKG_VERSION").to_string(),
            metrics_auth: false,
            sse_per_identity: 32,
            header_read_timeout: super::conn::HEADER_READ_TIMEOUT,
            reranker: None,
        }
    }
}

/// What a send with a given key did the first time.
#[derive(Debug, Clone, PartialEq)]
pub struct RememberedSend {
    pub ws_id: String,
    pub status: &'static str,
    at: SystemTime,
}

/// Longest `correlation_id` / `Idempotency-Key` accepted (bytes); they are remembered per
/// node, so their size is bounded.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 256;

/// The idempotency key of a request: the body's `correlation_id` if non-empty, else the
/// `Idempotency-Key` header. `400` when it is longer than [`MAX_IDEMPOTENCY_KEY_BYTES`].
pub fn idempotency_key(
    correlation_id: Option<&str>,
    headers: &axum::http::HeaderMap,
) -> Result<Option<String>, super::ApiError> {
    let key = correlation_id
        .filter(|c| !c.is_empty())
        .or_else(|| headers.get("idempotency-key").and_then(|v| v.to_str().ok()))
        .map(str::to_string);
    match key {
        Some(k) if k.len() > MAX_IDEMPOTENCY_KEY_BYTES => {
            Err(super::ApiError::BadRequest(format!(
                "correlation_id / Idempotency-Key is too long ({} bytes; at most \
                 {MAX_IDEMPOTENCY_KEY_BYTES})",
                k.len()
            )))
        }
        other => Ok(other),
    }
}

#[derive(Debug, Default)]
struct Idempotency {
    by_key: HashMap<String, RememberedSend>,
    order: VecDeque<String>,
}

/// The node.
pub struct Node {
    pub options: NodeOptions,
    pub manager: Manager,
    pub node_log: Arc<EventLog<NodeEvent>>,
    pub auth: Authenticator,
    pub started: SystemTime,
    /// Identifies this run of the node (Unix milliseconds at start): the node-wide stream's
    /// `node_seq` restarts with it, so a resume point names the boot it belongs to.
    pub boot_id: u64,
    /// `/metrics` state, fed from `node_log` once the router is built.
    pub metrics: Arc<super::metrics::Metrics>,
    /// The per-client-IP rate limiter (`ratelimit.enabled`), shared by HTTP and gRPC.
    pub ratelimiter: Option<Arc<super::ratelimit::RateLimiter>>,
    /// The store, when the node persists (the default for `turnstone-server`).
    pub persistence: Option<Arc<Persistence>>,
    idempotency: Mutex<Idempotency>,
    /// Replies of idempotent creates (`correlation_id` / `Idempotency-Key`), held across
    /// the create (which may await the store) so concurrent repeats create one workstream.
    pub create_memo: tokio::sync::Mutex<HashMap<String, (Value, SystemTime)>>,
    /// The MCP client manager, when MCP servers are configured (set once at start-up).
    mcp: std::sync::OnceLock<Arc<turnstone_mcp::McpManager>>,
    /// Content `open_preview` stored, per workstream (forgotten when it closes).
    pub previews: super::previews::PreviewStore,
    /// The one-time code that authorises first-user setup (printed at start).
    pub setup_code: super::login::SetupCode,
    /// Open event streams per identity.
    pub stream_slots: Arc<super::sse::StreamSlots>,
    /// The graceful drain (SIGTERM): readiness, refusal of new turns, end of event streams.
    pub drain: turnstone_runtime::Drain,
    /// Queued user turns, per workstream (`crate::send_queue`).
    pub queues: crate::send_queue::SendQueues,
    /// The tool policies the engine applies (config file + store).
    pub policies: super::policies::PolicyRegistry,
    /// The stored cluster-wide settings and model definitions in force.
    pub cluster_settings: super::cluster_settings::ClusterSettings,
    /// Hibernation: rehydrations in flight, counters (`super::hibernation`).
    pub hibernation: Arc<super::hibernation::Hibernation>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("node_id", &self.options.node_id)
            .finish()
    }
}

impl Node {
    /// Runs `job` every `period` — the first time one period from now — for as long as the
    /// node lives (the task holds only a weak reference). A late tick waits, it does not
    /// burst.
    pub(crate) fn every<F, Fut>(self: &Arc<Self>, period: Duration, job: F)
    where
        F: Fn(Arc<Node>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(node) = weak.upgrade() else { return };
                job(node).await;
            }
        });
    }

    /// Builds a node around an engine manager; every workstream event is forwarded, in order,
    /// into the node-wide log.
    pub fn new(
        engine: Arc<turnstone_engine::Engine>,
        manager_config: turnstone_engine::ManagerConfig,
        auth: Authenticator,
        options: NodeOptions,
    ) -> Arc<Self> {
        Self::build(engine, manager_config, auth, options, None)
    }

    /// A node whose conversations and approvals are persisted.
    pub fn with_persistence(
        engine: Arc<turnstone_engine::Engine>,
        manager_config: turnstone_engine::ManagerConfig,
        auth: Authenticator,
        options: NodeOptions,
        persistence: Arc<Persistence>,
    ) -> Arc<Self> {
        Self::build(engine, manager_config, auth, options, Some(persistence))
    }

    fn build(
        engine: Arc<turnstone_engine::Engine>,
        manager_config: turnstone_engine::ManagerConfig,
        auth: Authenticator,
        options: NodeOptions,
        persistence: Option<Arc<Persistence>>,
    ) -> Arc<Self> {
        let node_log: Arc<EventLog<NodeEvent>> =
            Arc::new(EventLog::new(options.node_log_capacity, 1024));
        let hook_log = node_log.clone();
        let mut manager =
            Manager::new(engine, manager_config).with_event_hook(Arc::new(move |env| {
                hook_log.push_with(|seq| NodeEvent {
                    seq,
                    kind: NodeEventKind::Ws(env.clone()),
                });
            }));
        let hibernation = Arc::new(super::hibernation::Hibernation::default());
        if let Some(p) = &persistence {
            manager = manager.with_journal(Arc::new(StoreJournal(p.clone())));
            p.spawn_approval_recorder(&node_log);
        }
        // A workstream that hibernates is marked so in the store (a restart lists it again).
        let (sleep_store, sleep_count) = (persistence.clone(), hibernation.clone());
        manager = manager.with_hibernate_hook(Arc::new(move |h: &turnstone_engine::Hibernated| {
            if let Some(p) = &sleep_store {
                p.record_state(&h.ws_id, super::hibernation::HIBERNATED_STATE);
            }
            sleep_count
                .hibernations
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }));
        // Auto-titles are stored as the workstream's title and announced as `ws_rename`.
        let (title_log, title_store) = (node_log.clone(), persistence.clone());
        manager = manager.with_title_hook(Arc::new(move |ws_id: &str, title: &str| {
            if let Some(p) = &title_store {
                p.record_title(ws_id, title);
            }
            title_log.push_with(|seq| NodeEvent {
                seq,
                kind: NodeEventKind::Renamed {
                    ws_id: ws_id.to_string(),
                    name: title.to_string(),
                },
            });
        }));
        let started = SystemTime::now();
        let boot_id = started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        let queues = crate::send_queue::SendQueues::new(options.max_queued_sends);
        let metrics = Arc::new(super::metrics::Metrics::new());
        let ratelimiter = options.ratelimit.enabled.then(|| {
            Arc::new(super::ratelimit::RateLimiter::new(
                options.ratelimit.clone(),
                metrics.clone(),
            ))
        });
        let node = Arc::new(Self {
            options,
            manager,
            node_log,
            auth,
            started,
            boot_id,
            metrics,
            ratelimiter,
            persistence,
            idempotency: Mutex::new(Idempotency::default()),
            create_memo: tokio::sync::Mutex::default(),
            mcp: std::sync::OnceLock::new(),
            previews: super::previews::PreviewStore::default(),
            setup_code: super::login::SetupCode::generate(),
            stream_slots: Arc::default(),
            drain: turnstone_runtime::Drain::new(),
            queues,
            policies: Default::default(),
            cluster_settings: Default::default(),
            hibernation,
        });
        crate::send_queue::SendQueues::start_dispatcher(&node);
        super::hibernation::start_sweeper(&node);
        node
    }

    /// Attaches the MCP manager (once; later calls are ignored).
    pub fn set_mcp(&self, mcp: Arc<turnstone_mcp::McpManager>) {
        let _ = self.mcp.set(mcp);
    }

    /// The store, when the node persists.
    pub fn store(&self) -> Option<Arc<dyn turnstone_store::Store>> {
        self.persistence.as_ref().map(|p| p.store.clone())
    }

    pub fn mcp(&self) -> Option<&Arc<turnstone_mcp::McpManager>> {
        self.mcp.get()
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed().unwrap_or_default()
    }

    pub fn workstream(&self, ws_id: &str) -> Option<WorkstreamHandle> {
        self.manager.get(ws_id)
    }

    /// Creates a workstream, announcing an eviction on the node-wide stream.
    pub fn create_workstream(
        &self,
        options: CreateOptions,
    ) -> Result<WorkstreamHandle, ManagerError> {
        let (handle, evicted) = self.manager.create(options)?;
        if let Some(closed) = evicted {
            self.announce_closed(&closed);
        }
        if let Some(p) = &self.persistence {
            p.record_workstream(handle.id(), &handle.name());
        }
        self.node_log.push_with(|seq| NodeEvent {
            seq,
            kind: NodeEventKind::Created {
                ws_id: handle.id().to_string(),
                name: handle.name(),
            },
        });
        Ok(handle)
    }

    /// Closes a workstream on request. The node-wide stream says so (`ws_closed`, reason
    /// `closed`: the bridge drops its ownership key, metrics forget the workstream); the
    /// global stream does not, as the original emits nothing for an explicit close.
    pub fn close_workstream(&self, ws_id: &str) -> Result<(), ManagerError> {
        let name = match self.manager.get(ws_id) {
            Some(w) => w.name(),
            None => self
                .manager
                .hibernated(ws_id)
                .map(|h| h.name)
                .unwrap_or_default(),
        };
        self.manager.close(ws_id)?;
        if let Some(p) = &self.persistence {
            p.record_state(ws_id, "closed");
        }
        self.announce_closed(&Closed {
            ws_id: ws_id.to_string(),
            name,
            reason: "closed",
        });
        Ok(())
    }

    pub fn announce_closed(&self, closed: &Closed) {
        self.previews.forget(&closed.ws_id);
        let name = (closed.reason == "evicted").then(|| closed.name.clone());
        self.node_log.push_with(|seq| NodeEvent {
            seq,
            kind: NodeEventKind::Closed {
                ws_id: closed.ws_id.clone(),
                reason: closed.reason.to_string(),
                name,
            },
        });
    }

    pub fn announce_rename(&self, ws_id: &str, name: &str) {
        if let Some(p) = &self.persistence {
            p.record_alias(ws_id, name);
        }
        self.node_log.push_with(|seq| NodeEvent {
            seq,
            kind: NodeEventKind::Renamed {
                ws_id: ws_id.to_string(),
                name: name.to_string(),
            },
        });
    }

    /// Runs `start` unless `key` was seen within the idempotency window, in which case the
    /// first outcome is returned and nothing runs. The check and the start are atomic, so
    /// two concurrent sends with one key start one turn.
    pub fn send_once(
        &self,
        key: Option<&str>,
        ws_id: &str,
        start: impl FnOnce() -> &'static str,
    ) -> (RememberedSend, bool) {
        let Some(key) = key.filter(|k| !k.is_empty()) else {
            return (
                RememberedSend {
                    ws_id: ws_id.to_string(),
                    status: start(),
                    at: SystemTime::now(),
                },
                false,
            );
        };
        let mut memo = self.idempotency.lock();
        let now = SystemTime::now();
        let window = self.options.idempotency_window;
        while let Some(oldest) = memo.order.front().cloned() {
            let expired = memo
                .by_key
                .get(&oldest)
                .is_none_or(|r| now.duration_since(r.at).unwrap_or_default() > window);
            if expired || memo.order.len() > self.options.idempotency_capacity {
                memo.order.pop_front();
                memo.by_key.remove(&oldest);
            } else {
                break;
            }
        }
        if let Some(previous) = memo.by_key.get(key) {
            return (previous.clone(), true);
        }
        let outcome = RememberedSend {
            ws_id: ws_id.to_string(),
            status: start(),
            at: now,
        };
        // A send that was not admitted is not remembered: a retry may legitimately start it.
        if outcome.status != crate::send_queue::NOT_ADMITTED {
            memo.by_key.insert(key.to_string(), outcome.clone());
            memo.order.push_back(key.to_string());
        }
        (outcome, false)
    }
}

impl Node {
    /// Forgets a send's key (its message was not stored: a retry is a new attempt).
    pub fn forget_send(&self, key: &str) {
        let mut memo = self.idempotency.lock();
        memo.by_key.remove(key);
        memo.order.retain(|k| k != key);
    }

    /// The send remembered under `key` within the idempotency window, if any (also one a
    /// previous run of the node accepted: see `crate::send_queue::recover`).
    pub fn remembered_send(&self, key: &str) -> Option<RememberedSend> {
        let memo = self.idempotency.lock();
        let r = memo.by_key.get(key)?;
        let age = SystemTime::now().duration_since(r.at).unwrap_or_default();
        (age <= self.options.idempotency_window).then(|| r.clone())
    }

    /// Remembers a key a previous run of the node accepted (`crate::send_queue::recover`).
    pub fn remember_send(&self, key: &str, ws_id: &str, status: &'static str) {
        let mut memo = self.idempotency.lock();
        let remembered = RememberedSend {
            ws_id: ws_id.to_string(),
            status,
            at: SystemTime::now(),
        };
        if memo.by_key.insert(key.to_string(), remembered).is_none() {
            memo.order.push_back(key.to_string());
        }
    }
}

/// Is this per-workstream event one the original's per-workstream stream carries?
pub fn per_ws_visible(event: &Event) -> bool {
    event.per_ws_visible()
}
