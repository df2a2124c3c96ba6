//! The producer/consumer client: the Rust counterpart of the original Python
//! `turnstone.mq.client.TurnstoneClient` (cluster spec §5), plus a lossless consumer path.
//!
//! * Fire-and-forget requests ([`TurnstoneClient::send`], [`TurnstoneClient::create_workstream`],
//!   [`TurnstoneClient::close_workstream`], [`TurnstoneClient::command`],
//!   [`TurnstoneClient::cancel`], [`TurnstoneClient::list_workstreams`],
//!   [`TurnstoneClient::health`]) build the inbound message, `RPUSH` it and return its
//!   `correlation_id`. A `send` goes to `{p}:inbound:{node}` when a target node is given or the
//!   workstream's owner is known from `{p}:ws:{ws_id}`, else to the shared `{p}:inbound` — the
//!   original's routing.
//! * Approvals ([`TurnstoneClient::approve`], [`TurnstoneClient::plan_feedback`]) go straight
//!   to `{p}:resp:{request_id}` (`RPUSH` + `EXPIRE 600`), bypassing the inbound queues.
//! * [`TurnstoneClient::subscribe_ws`] replays the per-workstream Redis Stream
//!   `{p}:stream:{ws_id}` after a given entry id and then follows it live (`XREAD BLOCK` on a
//!   dedicated connection, reconnecting with backoff), yielding `(entry id, event)`: a consumer
//!   that stores the last id it handled resumes exactly where it stopped.
//! * [`TurnstoneClient::send_and_wait`] is the original's blocking call, but reads the turn
//!   from the stream instead of pub/sub, so nothing published between the push and the
//!   subscription — or during a reconnect — is lost. Only what the stream does not carry comes
//!   from pub/sub: `ws_created` (global) and `ack` (workstream channel).

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use redis::aio::{ConnectionManager, MultiplexedConnection};
use redis::streams::{StreamRangeReply, StreamReadReply};
use serde_json::Value;
use tokio::time::Instant;
use turnstone_proto::keys::{Keys, RESPONSE_TTL_SECS};
use turnstone_proto::mq::{
    ACK_ERROR, ApprovalRequestEvent, ApproveMessage, CancelMessage, CloseWorkstreamMessage,
    CommandMessage, CreateWorkstreamMessage, HealthMessage, InboundMessage, ListWorkstreamsMessage,
    OutboundEvent, PlanFeedbackMessage, SendMessage,
};

use crate::conn::{blocking_connection, manager};
use crate::{Backoff, Leases, QueueError, RedisSettings};

/// How long one `XREAD BLOCK` waits before it is re-issued (the connection's response
/// timeout is raised above it).
const READ_BLOCK: Duration = Duration::from_secs(5);
/// Entries fetched per `XREAD`.
const READ_COUNT: usize = 256;

/// Errors of the client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// A caller mistake (empty workstream id, malformed stream id, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A stream entry whose `event` field is missing or is not an outbound event.
    #[error("bad entry {id} in {stream}: {reason}")]
    BadEntry {
        stream: String,
        id: String,
        reason: String,
    },
    /// Waited longer than asked.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The cluster refused the request (an `ack` with status `error`).
    #[error("refused: {0}")]
    Refused(String),
}

impl From<redis::RedisError> for ClientError {
    fn from(e: redis::RedisError) -> Self {
        Self::Queue(QueueError::Redis(e))
    }
}

impl ClientError {
    /// Worth retrying after a pause (connection trouble).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Queue(e) => e.is_retryable(),
            _ => false,
        }
    }
}

/// An answer to an `approval_request`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub approved: bool,
    pub feedback: Option<String>,
    /// Approve these tools for the rest of the workstream.
    pub always: bool,
}

impl Decision {
    pub fn approve() -> Self {
        Self {
            approved: true,
            feedback: None,
            always: false,
        }
    }

    pub fn deny(feedback: impl Into<String>) -> Self {
        Self {
            approved: false,
            feedback: Some(feedback.into()),
            always: false,
        }
    }
}

/// Decides an `approval_request` seen during [`TurnstoneClient::send_and_wait`]; `None`
/// leaves it for someone else to answer.
pub type Approver = Box<dyn FnMut(&ApprovalRequestEvent) -> Option<Decision> + Send>;
/// Sees every event [`TurnstoneClient::send_and_wait`] receives.
pub type EventHook = Box<dyn FnMut(&OutboundEvent) + Send>;

/// Options of [`TurnstoneClient::send_and_wait`].
pub struct WaitOptions {
    /// Give up after this long (the result then has `timed_out`). Default 600 s.
    pub timeout: Duration,
    /// Sees every event of the turn in the stream's order, and this send's `ack`. The ack
    /// comes over pub/sub, not the stream, so it may be seen before or among the turn's first
    /// events.
    pub on_event: Option<EventHook>,
    /// Decides each `approval_request`; `None` from it (or no approver) leaves it pending.
    pub approver: Option<Approver>,
}

impl Default for WaitOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(600),
            on_event: None,
            approver: None,
        }
    }
}

impl std::fmt::Debug for WaitOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitOptions")
            .field("timeout", &self.timeout)
            .field("on_event", &self.on_event.is_some())
            .field("approver", &self.approver.is_some())
            .finish()
    }
}

/// What one turn produced (the original's `TurnResult`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnResult {
    pub correlation_id: String,
    pub ws_id: String,
    pub content_parts: Vec<String>,
    pub reasoning_parts: Vec<String>,
    /// `(tool name, output)` in order.
    pub tool_results: Vec<(String, String)>,
    pub errors: Vec<String>,
    pub timed_out: bool,
    /// The `content` of the turn's `turn_complete` (the node's full turn text).
    pub final_content: String,
    /// The stream id of the last event read, to resume from with [`TurnstoneClient::subscribe_ws`].
    pub last_stream_id: String,
}

impl TurnResult {
    pub fn content(&self) -> String {
        self.content_parts.concat()
    }

    pub fn reasoning(&self) -> String {
        self.reasoning_parts.concat()
    }

    /// Not timed out and no errors.
    pub fn ok(&self) -> bool {
        !self.timed_out && self.errors.is_empty()
    }
}

/// One workstream's events: `(stream entry id, event)`, replayed then live. Ends only after
/// an error that retrying cannot fix.
pub type WsEvents =
    Pin<Box<dyn Stream<Item = Result<(String, OutboundEvent), ClientError>> + Send>>;

/// A producer/consumer of one Turnstone cluster (one Redis, one key prefix).
#[derive(Clone)]
pub struct TurnstoneClient {
    keys: Keys,
    client: redis::Client,
    conn: ConnectionManager,
    leases: Leases,
}

impl std::fmt::Debug for TurnstoneClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnstoneClient")
            .field("prefix", &self.keys.prefix())
            .finish()
    }
}

impl TurnstoneClient {
    /// Connects to `redis_url` (`redis://`, `rediss://`); `prefix` is the key prefix
    /// (`turnstone` in the original). Unlike the original, the prefix applies to queues too.
    pub async fn new(redis_url: &str, prefix: &str) -> Result<Self, ClientError> {
        Self::connect(&RedisSettings::from_url(redis_url), prefix).await
    }

    pub async fn connect(settings: &RedisSettings, prefix: &str) -> Result<Self, ClientError> {
        if prefix.is_empty() {
            return Err(ClientError::InvalidArgument("empty key prefix".into()));
        }
        let client = settings.client()?;
        let conn = manager(&client).await?;
        let keys = Keys::new(prefix);
        Ok(Self {
            leases: Leases::new(keys.clone()),
            keys,
            client,
            conn,
        })
    }

    /// The key schema in use.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    async fn push(&self, node: &str, msg: InboundMessage) -> Result<String, ClientError> {
        let msg = with_current_trace(msg);
        let queue = if node.is_empty() {
            self.keys.inbound()
        } else {
            self.keys.inbound_node(node)
        };
        let cid = msg.correlation_id().to_string();
        let _: i64 = redis::cmd("RPUSH")
            .arg(queue)
            .arg(msg.encode())
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(cid)
    }

    /// The owner named by `{p}:ws:{ws_id}`, if any.
    pub async fn owner(&self, ws_id: &str) -> Result<Option<String>, ClientError> {
        if ws_id.is_empty() {
            return Ok(None);
        }
        Ok(self.leases.owner(&mut self.conn.clone(), ws_id).await?)
    }

    async fn route(&self, target_node: &str, ws_id: &str) -> Result<String, ClientError> {
        if !target_node.is_empty() {
            return Ok(target_node.to_string());
        }
        Ok(self.owner(ws_id).await?.unwrap_or_default())
    }

    /// Pushes a `send` (routed to `target_node`, else to the owner of `ws_id`, else shared);
    /// returns its correlation id. An empty `ws_id` makes the bridge create a workstream.
    pub async fn send(&self, msg: SendMessage) -> Result<String, ClientError> {
        let node = self.route(&msg.target_node, &msg.ws_id).await?;
        self.push(&node, msg.into()).await
    }

    /// `send` with only a workstream and a message.
    pub async fn send_text(&self, ws_id: &str, message: &str) -> Result<String, ClientError> {
        self.send(SendMessage {
            ws_id: ws_id.to_string(),
            message: message.to_string(),
            ..SendMessage::default()
        })
        .await
    }

    /// Pushes a `create_workstream` (to `target_node`'s queue when set); returns its
    /// correlation id. The new id arrives in `ws_created` on the global channel.
    pub async fn create_workstream(
        &self,
        msg: CreateWorkstreamMessage,
    ) -> Result<String, ClientError> {
        let node = msg.target_node.clone();
        self.push(&node, msg.into()).await
    }

    /// Creates a workstream and waits for its `ws_created`; returns the new `ws_id`.
    pub async fn create_workstream_and_wait(
        &self,
        msg: CreateWorkstreamMessage,
        timeout: Duration,
    ) -> Result<String, ClientError> {
        let cid = msg.correlation_id.clone();
        let mut pubsub = self.client.get_async_pubsub().await?;
        pubsub.subscribe(self.keys.events_global()).await?;
        let node = msg.target_node.clone();
        self.push(&node, msg.into()).await?;
        let mut messages = pubsub.on_message();
        let deadline = Instant::now() + timeout;
        loop {
            let msg = tokio::time::timeout_at(deadline, messages.next())
                .await
                .map_err(|_| ClientError::Timeout(format!("no ws_created for {cid}")))?
                .ok_or_else(|| {
                    ClientError::Queue(QueueError::Settings("pub/sub connection closed".into()))
                })?;
            let Ok(event) = OutboundEvent::decode(msg.get_payload_bytes()) else {
                continue;
            };
            if event.correlation_id() != cid {
                continue;
            }
            match event {
                OutboundEvent::WsCreated(c) => return Ok(c.ws_id),
                OutboundEvent::Ack(a) if a.status == ACK_ERROR => {
                    return Err(ClientError::Refused(a.body.detail));
                }
                OutboundEvent::Error(e) => return Err(ClientError::Refused(e.body.message)),
                _ => {}
            }
        }
    }

    /// `close_workstream` on the shared queue (the bridge routes it to the owner).
    pub async fn close_workstream(&self, ws_id: &str) -> Result<String, ClientError> {
        let msg = CloseWorkstreamMessage {
            ws_id: ws_id.to_string(),
            ..CloseWorkstreamMessage::default()
        };
        self.push("", msg.into()).await
    }

    /// A slash command (`/clear`, ...) on the shared queue.
    pub async fn command(&self, ws_id: &str, command: &str) -> Result<String, ClientError> {
        let msg = CommandMessage {
            ws_id: ws_id.to_string(),
            command: command.to_string(),
            ..CommandMessage::default()
        };
        self.push("", msg.into()).await
    }

    /// Stops the workstream's current generation (shared queue; routed to the owner).
    pub async fn cancel(&self, ws_id: &str) -> Result<String, ClientError> {
        let msg = CancelMessage {
            ws_id: ws_id.to_string(),
            ..CancelMessage::default()
        };
        self.push("", msg.into()).await
    }

    /// Asks for `ws_list` on the global channel.
    pub async fn list_workstreams(&self) -> Result<String, ClientError> {
        self.push("", ListWorkstreamsMessage::default().into())
            .await
    }

    /// Asks for `health_response` on the global channel.
    pub async fn health(&self) -> Result<String, ClientError> {
        self.push("", HealthMessage::default().into()).await
    }

    /// Live nodes read straight from the heartbeat keys: each heartbeat JSON plus `node_id`.
    pub async fn list_nodes(&self) -> Result<Vec<Value>, ClientError> {
        let nodes = self.leases.live_nodes(&mut self.conn.clone()).await?;
        Ok(nodes
            .into_iter()
            .map(|(id, mut v)| {
                if !v.is_object() {
                    v = Value::Object(serde_json::Map::new());
                }
                if let Some(o) = v.as_object_mut() {
                    o.insert("node_id".into(), Value::String(id));
                }
                v
            })
            .collect())
    }

    async fn respond(&self, request_id: &str, msg: InboundMessage) -> Result<(), ClientError> {
        if request_id.is_empty() {
            return Err(ClientError::InvalidArgument("empty request_id".into()));
        }
        let key = self.keys.response(request_id);
        let msg = with_current_trace(msg);
        let _: () = redis::pipe()
            .atomic()
            .cmd("RPUSH")
            .arg(&key)
            .arg(msg.encode())
            .ignore()
            .cmd("EXPIRE")
            .arg(&key)
            .arg(RESPONSE_TTL_SECS)
            .ignore()
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// Answers an `approval_request` (`request_id` = the event's `correlation_id`).
    pub async fn approve(
        &self,
        request_id: &str,
        ws_id: &str,
        approved: bool,
        feedback: Option<&str>,
        always: bool,
    ) -> Result<(), ClientError> {
        let msg = ApproveMessage {
            ws_id: ws_id.to_string(),
            request_id: request_id.to_string(),
            approved,
            feedback: feedback.map(str::to_string),
            always,
            ..ApproveMessage::default()
        };
        self.respond(request_id, msg.into()).await
    }

    /// Answers a `plan_review`: `""` approves, other text revises, `"reject"` rejects.
    pub async fn plan_feedback(
        &self,
        request_id: &str,
        ws_id: &str,
        feedback: &str,
    ) -> Result<(), ClientError> {
        let msg = PlanFeedbackMessage {
            ws_id: ws_id.to_string(),
            request_id: request_id.to_string(),
            feedback: feedback.to_string(),
            ..PlanFeedbackMessage::default()
        };
        self.respond(request_id, msg.into()).await
    }

    /// The id of the newest entry of the workstream's stream, `"0"` when it has none: pass
    /// it as `from` to see only what comes next.
    pub async fn stream_tail(&self, ws_id: &str) -> Result<String, ClientError> {
        check_ws(ws_id)?;
        let reply: StreamRangeReply = redis::cmd("XREVRANGE")
            .arg(self.keys.stream(ws_id))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(reply
            .ids
            .into_iter()
            .next()
            .map(|e| e.id)
            .unwrap_or_else(|| "0".to_string()))
    }

    /// The workstream's events after stream id `from` (exclusive; `"0"` = from the start),
    /// then live. `None` starts at the current end (only new events). Entries trimmed away by
    /// the stream's cap before they were read cannot be replayed.
    pub async fn subscribe_ws(
        &self,
        ws_id: &str,
        from: Option<&str>,
    ) -> Result<WsEvents, ClientError> {
        check_ws(ws_id)?;
        let last = match from {
            Some(id) => {
                check_stream_id(id)?;
                id.to_string()
            }
            None => self.stream_tail(ws_id).await?,
        };
        let follow = Follow {
            client: self.client.clone(),
            conn: None,
            key: self.keys.stream(ws_id),
            last,
            buf: VecDeque::new(),
            backoff: Backoff::default(),
            done: false,
        };
        Ok(Box::pin(futures::stream::unfold(follow, Follow::next)))
    }

    /// Sends and waits for the turn's `turn_complete` (the original's `send_and_wait`), reading
    /// the turn from the workstream's stream so that no event is missed. Without a `ws_id` the
    /// bridge creates a workstream; its id is learnt from `ws_created`. Collects content,
    /// reasoning, tool results and errors; an `approval_request` goes to `opts.approver`.
    /// Note the original's default `auto_approve = true` is not applied here: set it on `msg`.
    pub async fn send_and_wait(
        &self,
        msg: SendMessage,
        mut opts: WaitOptions,
    ) -> Result<TurnResult, ClientError> {
        let deadline = Instant::now() + opts.timeout;
        let cid = msg.correlation_id.clone();
        let mut ws_id = msg.ws_id.clone();
        let mut result = TurnResult {
            correlation_id: cid.clone(),
            ws_id: ws_id.clone(),
            ..TurnResult::default()
        };
        // Subscribe before pushing: `ws_created` and `ack` only travel on pub/sub.
        let pubsub = self.client.get_async_pubsub().await?;
        let (mut sink, mut notes) = pubsub.split();
        sink.subscribe(self.keys.events_global()).await?;
        let mut from = "0".to_string();
        if !ws_id.is_empty() {
            sink.subscribe(self.keys.events_ws(&ws_id)).await?;
            from = self.stream_tail(&ws_id).await?;
        }
        self.send(msg).await?;

        if ws_id.is_empty() {
            loop {
                let Ok(note) = tokio::time::timeout_at(deadline, notes.next()).await else {
                    result.timed_out = true;
                    return Ok(result);
                };
                let Some(note) = note else {
                    return Err(ClientError::Queue(QueueError::Settings(
                        "pub/sub connection closed".into(),
                    )));
                };
                let Ok(event) = OutboundEvent::decode(note.get_payload_bytes()) else {
                    continue;
                };
                if event.correlation_id() != cid {
                    continue;
                }
                if let Some(hook) = opts.on_event.as_mut() {
                    hook(&event);
                }
                match &event {
                    OutboundEvent::WsCreated(c) => {
                        ws_id = c.ws_id.clone();
                        result.ws_id = ws_id.clone();
                        sink.subscribe(self.keys.events_ws(&ws_id)).await?;
                        break;
                    }
                    OutboundEvent::Ack(a) if a.status == ACK_ERROR => {
                        result.errors.push(a.detail.clone());
                        return Ok(result);
                    }
                    _ => {}
                }
            }
        }

        let mut events = self.subscribe_ws(&ws_id, Some(&from)).await?;
        loop {
            tokio::select! {
                item = events.next() => {
                    let Some(item) = item else {
                        return Err(ClientError::Queue(QueueError::Settings("event stream ended".into())));
                    };
                    let (id, event) = match item {
                        Ok(x) => x,
                        Err(ClientError::BadEntry { .. }) => continue,
                        Err(e) => return Err(e),
                    };
                    result.last_stream_id = id;
                    if let Some(hook) = opts.on_event.as_mut() {
                        hook(&event);
                    }
                    match event {
                        OutboundEvent::Content(c) => result.content_parts.push(c.body.text),
                        OutboundEvent::Reasoning(r) => result.reasoning_parts.push(r.body.text),
                        OutboundEvent::ToolResult(t) => {
                            result.tool_results.push((t.body.name, t.body.output))
                        }
                        OutboundEvent::Error(e) => result.errors.push(e.body.message),
                        OutboundEvent::ApprovalRequest(req) => {
                            if let Some(decision) = opts.approver.as_mut().and_then(|a| a(&req)) {
                                self.approve(
                                    &req.correlation_id,
                                    &ws_id,
                                    decision.approved,
                                    decision.feedback.as_deref(),
                                    decision.always,
                                )
                                .await?;
                            }
                        }
                        OutboundEvent::TurnComplete(t) if t.correlation_id == cid => {
                            result.final_content = t.body.content;
                            return Ok(result);
                        }
                        _ => {}
                    }
                }
                note = notes.next() => {
                    let Some(note) = note else { continue };
                    let Ok(event) = OutboundEvent::decode(note.get_payload_bytes()) else { continue };
                    if let OutboundEvent::Ack(a) = &event
                        && a.correlation_id == cid
                    {
                        if let Some(hook) = opts.on_event.as_mut() {
                            hook(&event);
                        }
                        if a.status == ACK_ERROR {
                            result.errors.push(a.detail.clone());
                            return Ok(result);
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    result.timed_out = true;
                    return Ok(result);
                }
            }
        }
    }
}

/// `msg` with the current span's W3C `traceparent` when it names none, so the bridge and
/// the node continue the producer's trace.
fn with_current_trace(mut msg: InboundMessage) -> InboundMessage {
    if msg.traceparent().is_none() {
        let current = turnstone_runtime::trace_context::current_traceparent();
        msg.envelope_mut().set_traceparent(current);
    }
    msg
}

fn check_ws(ws_id: &str) -> Result<(), ClientError> {
    if ws_id.is_empty() {
        return Err(ClientError::InvalidArgument("empty ws_id".into()));
    }
    if ws_id.chars().any(|c| c.is_whitespace() || c == '*') {
        return Err(ClientError::InvalidArgument(format!(
            "ws_id {ws_id:?} contains whitespace or '*'"
        )));
    }
    Ok(())
}

/// A Redis stream id: `<ms>` or `<ms>-<seq>` (decimal).
pub fn check_stream_id(id: &str) -> Result<(), ClientError> {
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    let ok = match id.split_once('-') {
        Some((ms, seq)) => digits(ms) && digits(seq),
        None => digits(id),
    };
    if ok {
        Ok(())
    } else {
        Err(ClientError::InvalidArgument(format!(
            "stream id {id:?} is not <number> or <number>-<number>"
        )))
    }
}

/// The state of one [`WsEvents`] stream.
struct Follow {
    client: redis::Client,
    conn: Option<MultiplexedConnection>,
    key: String,
    /// The last id handed out (or the starting point).
    last: String,
    buf: VecDeque<Result<(String, OutboundEvent), ClientError>>,
    backoff: Backoff,
    done: bool,
}

type Item = Result<(String, OutboundEvent), ClientError>;

impl Follow {
    async fn next(mut self) -> Option<(Item, Self)> {
        loop {
            if let Some(item) = self.buf.pop_front() {
                return Some((item, self));
            }
            if self.done {
                return None;
            }
            let mut conn = match self.conn.take() {
                Some(c) => c,
                None => match blocking_connection(&self.client, READ_BLOCK).await {
                    Ok(c) => c,
                    Err(e) if e.is_retryable() => {
                        tracing::debug!(error = %e, stream = %self.key, "stream connection failed");
                        tokio::time::sleep(self.backoff.delay()).await;
                        continue;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some((Err(e.into()), self));
                    }
                },
            };
            let reply: Result<Option<StreamReadReply>, redis::RedisError> = redis::cmd("XREAD")
                .arg("COUNT")
                .arg(READ_COUNT)
                .arg("BLOCK")
                .arg(READ_BLOCK.as_millis() as u64)
                .arg("STREAMS")
                .arg(&self.key)
                .arg(&self.last)
                .query_async(&mut conn)
                .await;
            match reply {
                Ok(reply) => {
                    self.conn = Some(conn);
                    self.backoff.reset();
                    for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
                        self.last = entry.id.clone();
                        let raw: Option<String> = entry.get("event");
                        let item = match raw {
                            None => Err(ClientError::BadEntry {
                                stream: self.key.clone(),
                                id: entry.id,
                                reason: "no `event` field".into(),
                            }),
                            Some(raw) => match OutboundEvent::decode(raw.as_bytes()) {
                                Ok(ev) => Ok((entry.id, ev)),
                                Err(e) => Err(ClientError::BadEntry {
                                    stream: self.key.clone(),
                                    id: entry.id,
                                    reason: e.to_string(),
                                }),
                            },
                        };
                        self.buf.push_back(item);
                    }
                }
                Err(e) => {
                    let e = QueueError::from(e);
                    if e.is_retryable() {
                        tracing::debug!(error = %e, stream = %self.key, "stream read failed; reconnecting");
                        tokio::time::sleep(self.backoff.delay()).await;
                        continue;
                    }
                    self.done = true;
                    return Some((Err(e.into()), self));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_are_checked() {
        for ok in ["0", "1700000000000-0", "5-12", "42"] {
            assert!(check_stream_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "$", "-", "1-", "-1", "a-1", "1-2-3", "1 -2", ">"] {
            let err = check_stream_id(bad).unwrap_err();
            assert!(
                matches!(err, ClientError::InvalidArgument(_)),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn ws_ids_are_checked() {
        assert!(check_ws("9f3c").is_ok());
        assert!(check_ws("").is_err());
        assert!(check_ws("a b").is_err());
        assert!(check_ws("a*").is_err());
    }

    const REDIS: &str = "redis://127.0.0.1:6379/0";

    async fn client(tag: &str) -> (TurnstoneClient, MultiplexedConnection) {
        let prefix = format!("tq{tag}{:08x}", rand::random::<u32>());
        let c = TurnstoneClient::new(REDIS, &prefix).await.unwrap();
        let raw = redis::Client::open(REDIS)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        (c, raw)
    }

    async fn cleanup(c: &TurnstoneClient, raw: &mut MultiplexedConnection) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", c.keys().prefix()))
            .query_async(raw)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL").arg(keys).query_async(raw).await.unwrap();
        }
    }

    async fn xadd(raw: &mut MultiplexedConnection, key: &str, id: &str, event: &str) {
        let _: String = redis::cmd("XADD")
            .arg(key)
            .arg(id)
            .arg("type")
            .arg("content")
            .arg("event")
            .arg(event)
            .query_async(raw)
            .await
            .unwrap();
    }

    fn content(ws: &str, text: &str) -> String {
        OutboundEvent::Content(turnstone_proto::mq::ContentEvent::new(
            ws,
            turnstone_proto::sse::Text { text: text.into() },
        ))
        .encode()
    }

    #[tokio::test]
    async fn a_push_carries_the_current_trace_unless_the_message_names_one() {
        use opentelemetry::trace::TracerProvider as _;
        use tracing::Instrument as _;
        use tracing_subscriber::prelude::*;
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        // A current-thread runtime: the default subscriber holds across the awaits.
        let _default = tracing::subscriber::set_default(subscriber);
        let (c, mut raw) = client("trace").await;
        let explicit = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let span = tracing::info_span!("producer");
        let current = span
            .in_scope(turnstone_runtime::trace_context::current_traceparent)
            .expect("a span with a trace");
        async {
            c.send_text("w1", "traced").await.unwrap();
            c.send(SendMessage {
                ws_id: "w1".into(),
                message: "own trace".into(),
                traceparent: Some(explicit.into()),
                ..Default::default()
            })
            .await
            .unwrap();
        }
        .instrument(span)
        .await;
        c.send_text("w1", "untraced").await.unwrap();
        let pushed: Vec<String> = redis::cmd("LRANGE")
            .arg(c.keys().inbound())
            .arg(0)
            .arg(-1)
            .query_async(&mut raw)
            .await
            .unwrap();
        let traceparents: Vec<Option<String>> = pushed
            .iter()
            .map(|m| {
                InboundMessage::decode(m.as_bytes())
                    .unwrap()
                    .traceparent()
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(
            traceparents,
            vec![Some(current), Some(explicit.to_string()), None]
        );
        cleanup(&c, &mut raw).await;
    }

    #[tokio::test]
    async fn sends_route_to_the_owner_and_approvals_to_the_response_list() {
        let (c, mut raw) = client("route").await;
        let k = c.keys().clone();
        // Unknown owner: the shared queue.
        let cid = c.send_text("w1", "hi").await.unwrap();
        let shared: Vec<String> = redis::cmd("LRANGE")
            .arg(k.inbound())
            .arg(0)
            .arg(-1)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert_eq!(shared.len(), 1);
        let msg = InboundMessage::decode(shared[0].as_bytes()).unwrap();
        assert_eq!(msg.correlation_id(), cid);
        assert!(matches!(&msg, InboundMessage::Send(s) if s.ws_id == "w1" && s.message == "hi"));
        // Known owner: its queue. Explicit target: that queue.
        let _: () = redis::cmd("SET")
            .arg(k.ws_owner("w1"))
            .arg("node-a")
            .query_async(&mut raw)
            .await
            .unwrap();
        c.send_text("w1", "again").await.unwrap();
        c.send(SendMessage {
            ws_id: "w1".into(),
            target_node: "node-b".into(),
            ..Default::default()
        })
        .await
        .unwrap();
        for (node, n) in [("node-a", 1), ("node-b", 1)] {
            let len: i64 = redis::cmd("LLEN")
                .arg(k.inbound_node(node))
                .query_async(&mut raw)
                .await
                .unwrap();
            assert_eq!(len, n, "{node}");
        }
        // Approve: RPUSH + EXPIRE 600 on resp:{request_id}.
        c.approve("abcdef012345", "w1", false, Some("no"), true)
            .await
            .unwrap();
        let key = k.response("abcdef012345");
        let ttl: i64 = redis::cmd("TTL")
            .arg(&key)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!((590..=600).contains(&ttl), "{ttl}");
        let raw_msg: String = redis::cmd("LPOP")
            .arg(&key)
            .query_async(&mut raw)
            .await
            .unwrap();
        match InboundMessage::decode(raw_msg.as_bytes()).unwrap() {
            InboundMessage::Approve(a) => {
                assert_eq!(
                    (
                        a.request_id.as_str(),
                        a.approved,
                        a.feedback.as_deref(),
                        a.always
                    ),
                    ("abcdef012345", false, Some("no"), true)
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            c.approve("", "w1", true, None, false).await,
            Err(ClientError::InvalidArgument(_))
        ));
        // Heartbeats: list_nodes adds node_id.
        let _: () = redis::cmd("SET")
            .arg(k.node_heartbeat("node-a"))
            .arg(r#"{"server_url":"http://x","started":1.0,"max_ws":5}"#)
            .arg("EX")
            .arg(30)
            .query_async(&mut raw)
            .await
            .unwrap();
        let nodes = c.list_nodes().await.unwrap();
        assert_eq!(
            nodes,
            vec![
                serde_json::json!({"server_url":"http://x","started":1.0,"max_ws":5,"node_id":"node-a"})
            ]
        );
        cleanup(&c, &mut raw).await;
    }

    #[tokio::test]
    async fn subscribe_ws_replays_resumes_and_follows_live() {
        let (c, mut raw) = client("sub").await;
        let key = c.keys().stream("w");
        assert_eq!(c.stream_tail("w").await.unwrap(), "0");
        for i in 1..=5 {
            xadd(
                &mut raw,
                &key,
                &format!("7-{i}"),
                &content("w", &format!("e{i}")),
            )
            .await;
        }
        xadd(&mut raw, &key, "7-6", "{not json").await;
        assert_eq!(c.stream_tail("w").await.unwrap(), "7-6");
        let texts = |items: &[(String, OutboundEvent)]| -> Vec<String> {
            items
                .iter()
                .map(|(id, e)| match e {
                    OutboundEvent::Content(c) => format!("{id}={}", c.text),
                    other => format!("{id}:{}", other.type_name()),
                })
                .collect()
        };
        let mut all = c.subscribe_ws("w", Some("0")).await.unwrap();
        let mut got = Vec::new();
        for _ in 0..5 {
            got.push(all.next().await.unwrap().unwrap());
        }
        assert_eq!(
            texts(&got),
            ["7-1=e1", "7-2=e2", "7-3=e3", "7-4=e4", "7-5=e5"]
        );
        // A bad entry is reported and skipped, not fatal.
        assert!(
            matches!(all.next().await.unwrap(), Err(ClientError::BadEntry { id, .. }) if id == "7-6")
        );
        // Live: appended after the reader blocked.
        let live = tokio::spawn(async move { all.next().await.unwrap().unwrap() });
        xadd(&mut raw, &key, "8-0", &content("w", "live")).await;
        let item = tokio::time::timeout(Duration::from_secs(20), live)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(texts(&[item]), ["8-0=live"]);
        // Resume after 7-3: exactly 7-4, 7-5 (then the bad 7-6 and 8-0).
        let mut resumed = c.subscribe_ws("w", Some("7-3")).await.unwrap();
        let a = resumed.next().await.unwrap().unwrap();
        let b = resumed.next().await.unwrap().unwrap();
        assert_eq!(texts(&[a, b]), ["7-4=e4", "7-5=e5"]);
        cleanup(&c, &mut raw).await;
    }

    #[test]
    fn turn_result_joins_parts() {
        let r = TurnResult {
            content_parts: vec!["he".into(), "llo".into()],
            reasoning_parts: vec!["r".into()],
            ..TurnResult::default()
        };
        assert_eq!(r.content(), "hello");
        assert_eq!(r.reasoning(), "r");
        assert!(r.ok());
        let failed = TurnResult {
            errors: vec!["x".into()],
            ..TurnResult::default()
        };
        assert!(!failed.ok());
    }
}
