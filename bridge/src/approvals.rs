//! Relays approval decisions from Redis to the node, without keeping approval state.
//!
//! The node holds every pending approval and decides each once. The bridge only knows which
//! response lists to watch — `{p}:resp:{request_id}` of the requests it published (and, after
//! a start or an outage, of what `GET /v1/api/approvals` lists) — and waits on all of them
//! with a single `BLPOP` on one dedicated connection, whatever their number. A wake list
//! interrupts the wait when a new request arrives. A decision the node cannot take yet is
//! put back at the head of its list.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use turnstone_proto::api::{ApproveBody, PlanBody};
use turnstone_proto::mq::InboundMessage;
use turnstone_queue::Backoff;

use crate::{Ctx, Reply};

/// The approval requests whose replies this bridge relays, keyed by round: request_id → its
/// workstream and `cycle_id` (several rounds may be pending on one workstream, each with its
/// own response list). A cache of the node's pending set (rebuilt from
/// `GET /v1/api/approvals` on start and after an outage). Owned by the relay; the event
/// follower tells it what was asked and resolved.
pub struct Approvals {
    waits: Mutex<HashMap<String, Wait>>,
    redis: ConnectionManager,
    /// `{p}:bridge:{node}:wake`: a push interrupts the relay's wait.
    wake_key: String,
}

impl Approvals {
    pub(crate) fn new(redis: ConnectionManager, wake_key: String) -> Self {
        Self {
            waits: Mutex::default(),
            redis,
            wake_key,
        }
    }

    /// The node asked `request_id` (round `cycle_id`; empty for a plan review) of `ws_id`:
    /// its response list is watched from now on.
    pub(crate) async fn watch(&self, request_id: String, ws_id: String, cycle_id: String) {
        self.waits
            .lock()
            .insert(request_id, Wait { ws_id, cycle_id });
        self.wake().await;
    }

    /// The workstream is gone: nothing of it is watched any more.
    pub(crate) fn forget_workstream(&self, ws_id: &str) {
        self.waits.lock().retain(|_, w| w.ws_id != ws_id);
    }

    /// A request of `ws_id` was resolved: the one named by `request_id` (a plan review),
    /// else the round named by `cycle_id`; naming neither (a node that knows no rounds),
    /// every request of the workstream.
    pub(crate) fn forget_resolved(&self, ws_id: &str, request_id: &str, cycle_id: &str) {
        self.waits.lock().retain(|r, w| {
            w.ws_id != ws_id
                || if !request_id.is_empty() {
                    r != request_id
                } else if !cycle_id.is_empty() {
                    w.cycle_id != cycle_id
                } else {
                    false
                }
        });
    }

    fn forget(&self, request_id: &str) {
        self.waits.lock().remove(request_id);
    }

    fn workstream_of(&self, request_id: &str) -> Option<String> {
        self.waits.lock().get(request_id).map(|w| w.ws_id.clone())
    }

    /// The response lists to wait on, sorted, then the wake list.
    fn lists(&self, keys: &turnstone_proto::keys::Keys) -> Vec<String> {
        let mut lists: Vec<String> = self.waits.lock().keys().map(|r| keys.response(r)).collect();
        lists.sort();
        lists.push(self.wake_key.clone());
        lists
    }

    /// Makes the relay re-block on the current set of response lists.
    async fn wake(&self) {
        let mut conn = self.redis.clone();
        let r: Result<(), _> = redis::pipe()
            .cmd("RPUSH")
            .arg(&self.wake_key)
            .arg("1")
            .ignore()
            .cmd("EXPIRE")
            .arg(&self.wake_key)
            .arg(60)
            .ignore()
            .query_async(&mut conn)
            .await;
        if let Err(e) = r {
            tracing::debug!(error = %e, "approval waiter not woken (it re-blocks within 5 s)");
        }
    }

    /// Adds the node's pending approvals; `false` when the node did not list them.
    async fn load_pending(&self, ctx: &Ctx) -> bool {
        let Reply::Accepted(body) = ctx.node.approvals().await else {
            return false;
        };
        let rows: Vec<PendingRow> = body
            .get("approvals")
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let mut waits = self.waits.lock();
        for row in rows {
            if !row.ws_id.is_empty() && !row.request_id.is_empty() {
                let wait = Wait {
                    ws_id: row.ws_id,
                    cycle_id: row.cycle_id,
                };
                waits.insert(row.request_id, wait);
            }
        }
        true
    }
}

/// A watched request's workstream and round.
#[derive(Debug, Clone)]
struct Wait {
    ws_id: String,
    /// Empty for a plan review.
    cycle_id: String,
}

/// What the relay reads of a row of `GET /v1/api/approvals`.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct PendingRow {
    ws_id: String,
    request_id: String,
    cycle_id: String,
}

pub async fn run(ctx: Arc<Ctx>) {
    let pop = Duration::from_secs(5);
    let mut conn: Option<MultiplexedConnection> = None;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let mut loaded_epoch = u64::MAX;
    let resp_prefix = ctx.keys.response("");
    let approvals = &ctx.approvals;
    while !ctx.cancel.is_cancelled() {
        let epoch = ctx.link.epoch();
        if ctx.link.is_up() && epoch != loaded_epoch && approvals.load_pending(&ctx).await {
            loaded_epoch = epoch;
        }
        let Some(c) = conn.as_mut() else {
            match turnstone_queue::conn::blocking_connection(&ctx.client, pop).await {
                Ok(c) => {
                    conn = Some(c);
                    backoff.reset();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "approval waiter cannot reach redis");
                    tokio::select! {
                        _ = ctx.cancel.cancelled() => break,
                        _ = tokio::time::sleep(backoff.delay()) => {}
                    }
                }
            }
            continue;
        };
        let keys = approvals.lists(&ctx.keys);
        let mut blpop = redis::cmd("BLPOP");
        blpop.arg(&keys).arg(pop.as_secs());
        let popped: Result<Option<(String, String)>, _> = tokio::select! {
            _ = ctx.cancel.cancelled() => break,
            r = blpop.query_async(c) => r,
        };
        let (key, value) = match popped {
            Ok(Some(kv)) => kv,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "approval wait failed; reconnecting");
                conn = None;
                continue;
            }
        };
        if key == approvals.wake_key {
            continue;
        }
        let Some(request_id) = key.strip_prefix(&resp_prefix).map(str::to_string) else {
            continue;
        };
        let Some(ws_id) = approvals.workstream_of(&request_id) else {
            continue;
        };
        if !relay(&ctx, &ws_id, &request_id, &value).await {
            // The node cannot take it now: put it back first in line and wait a little.
            let mut m = ctx.redis.clone();
            let _: Result<(), _> = redis::cmd("LPUSH")
                .arg(&key)
                .arg(&value)
                .query_async(&mut m)
                .await;
            tokio::select! {
                _ = ctx.cancel.cancelled() => break,
                _ = tokio::time::sleep(backoff.delay()) => {}
            }
        }
    }
}

/// A decision for `request_id` of `ws_id`.
fn decision(
    ws_id: &str,
    request_id: &str,
    approved: bool,
    feedback: Option<&str>,
    always: bool,
) -> ApproveBody {
    ApproveBody {
        ws_id: ws_id.to_string(),
        approved,
        feedback: feedback.filter(|f| !f.is_empty()).map(str::to_string),
        always,
        request_id: request_id.to_string(),
        ..ApproveBody::default()
    }
}

/// Hands one reply to the node; `false` when it must be retried later.
async fn relay(ctx: &Ctx, ws_id: &str, request_id: &str, raw: &str) -> bool {
    let reply = match InboundMessage::decode(raw.as_bytes()) {
        Ok(InboundMessage::PlanFeedback(p)) => {
            let body = PlanBody {
                ws_id: ws_id.to_string(),
                feedback: p.feedback,
                request_id: request_id.to_string(),
            };
            ctx.node.plan(&body).await
        }
        Ok(InboundMessage::Approve(a)) => {
            let body = decision(
                ws_id,
                request_id,
                a.approved,
                a.feedback.as_deref(),
                a.always,
            );
            ctx.node.approve(&body).await
        }
        // Any other message on a response list counts as a denial (cluster spec §3.7).
        Ok(_) => {
            let body = decision(
                ws_id,
                request_id,
                false,
                Some("Unexpected reply type"),
                false,
            );
            ctx.node.approve(&body).await
        }
        Err(e) => {
            ctx.dead_letter(&format!("unreadable approval reply: {e}"), raw, request_id)
                .await;
            let body = decision(
                ws_id,
                request_id,
                false,
                Some("Unreadable approval reply"),
                false,
            );
            ctx.node.approve(&body).await
        }
    };
    match reply {
        Reply::Accepted(_) => {
            ctx.metrics.inc(&ctx.metrics.approvals_relayed);
            ctx.approvals.forget(request_id);
            true
        }
        Reply::Rejected { status, error, .. } => {
            // 409: decided already (first decision wins); 404: the workstream is gone.
            tracing::info!(request_id, status, error, "approval reply not applied");
            if status != 409 {
                ctx.dead_letter(
                    &format!("approval reply refused by the node: {error}"),
                    raw,
                    request_id,
                )
                .await;
            }
            ctx.approvals.forget(request_id);
            true
        }
        Reply::Unavailable(e) => {
            ctx.metrics.inc(&ctx.metrics.node_retries);
            tracing::warn!(request_id, error = %e, "node unavailable for an approval; will retry");
            false
        }
    }
}
