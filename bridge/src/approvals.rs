//! Relays approval decisions from Redis to the node, without keeping approval state.
//!
//! The node holds every pending approval and decides each once. The bridge only knows which
//! response lists to watch — `{p}:resp:{request_id}` of the requests it published (and, after
//! a start or an outage, of what `GET /v1/api/approvals` lists). A reply leaves its list only
//! by a script that records it in `{p}:bridge:{node}:decisions` in the same step; it is
//! deleted there once the node took it (or refused it for good). A bridge killed between the
//! two relays what it holds after its restart — the node answers a repeat `409`, so nothing is
//! decided twice and no reply is lost. The lists are looked at often right after a request was
//! published (an automated approver answers within milliseconds) and less often as the wait
//! grows (a person takes seconds); a wake list interrupts the wait when a new request arrives.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::LazyLock;
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

    /// The watched requests: (request id, workstream), sorted.
    fn watched(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .waits
            .lock()
            .iter()
            .map(|(r, w)| (r.clone(), w.ws_id.clone()))
            .collect();
        v.sort();
        v
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

/// Takes the first reply off each watched response list into the held hash (request id →
/// `<ws_id>\n<reply>`), atomically. KEYS: the held hash, then the response lists; ARGV: a
/// request id and its workstream per list. Returns (request id, ws_id, reply) triples.
const CLAIM: &str = r"
local out = {}
for i = 2, #KEYS do
  local reply = redis.call('LPOP', KEYS[i])
  if reply then
    local rid, ws = ARGV[2 * i - 3], ARGV[2 * i - 2]
    redis.call('HSET', KEYS[1], rid, ws .. '\n' .. reply)
    table.insert(out, rid)
    table.insert(out, ws)
    table.insert(out, reply)
  end
end
return out
";

/// A reply taken off its response list, not yet handed to the node.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    request_id: String,
    ws_id: String,
    reply: String,
}

/// How often the watched lists are looked at: every `FIRST_LOOK` right after a request was
/// published, doubling to every `SLOWEST_LOOK` while nobody answers.
const FIRST_LOOK: Duration = Duration::from_millis(5);
const SLOWEST_LOOK: Duration = Duration::from_millis(250);

pub async fn run(ctx: Arc<Ctx>) {
    let idle = Duration::from_secs(5);
    let mut conn: Option<MultiplexedConnection> = None;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let mut loaded_epoch = u64::MAX;
    let held_key = ctx.keys.bridge_decisions(&ctx.node_id);
    // What an earlier run of this bridge took and did not hand on; `None` until read.
    let mut held: Option<VecDeque<Held>> = None;
    let mut look = FIRST_LOOK;
    let approvals = &ctx.approvals;
    while !ctx.cancel.is_cancelled() {
        let epoch = ctx.link.epoch();
        if ctx.link.is_up() && epoch != loaded_epoch && approvals.load_pending(&ctx).await {
            loaded_epoch = epoch;
        }
        if held.is_none() {
            held = read_held(&ctx, &held_key).await;
        }
        // Hand on what is held; stop at the first the node cannot take now.
        let mut retry = false;
        if let Some(h) = held.as_mut() {
            while let Some(next) = h.front().cloned() {
                if !relay(&ctx, &next.ws_id, &next.request_id, &next.reply).await {
                    retry = true;
                    break;
                }
                h.pop_front();
                let r: Result<(), _> = redis::cmd("HDEL")
                    .arg(&held_key)
                    .arg(&next.request_id)
                    .query_async(&mut ctx.redis.clone())
                    .await;
                if let Err(e) = r {
                    // Relayed again after a restart: the node answers 409.
                    tracing::debug!(request_id = %next.request_id, error = %e, "relayed reply not cleared");
                }
            }
        }
        let watched = approvals.watched();
        if !retry && !watched.is_empty() && held.is_some() {
            match claim(&ctx, &held_key, &watched).await {
                Ok(taken) if !taken.is_empty() => {
                    held.get_or_insert_with(VecDeque::new).extend(taken);
                    look = FIRST_LOOK;
                    continue;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "approval replies not read"),
            }
        }
        let Some(c) = conn.as_mut() else {
            match turnstone_queue::conn::blocking_connection(&ctx.client, idle).await {
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
        // Wait for a new request (the wake list) or the next look at the watched lists.
        let wait = if retry {
            backoff.delay()
        } else if watched.is_empty() || held.is_none() {
            idle
        } else {
            let w = look;
            look = (look * 2).min(SLOWEST_LOOK);
            w
        };
        let mut blpop = redis::cmd("BLPOP");
        blpop.arg(&approvals.wake_key).arg(wait.as_secs_f64());
        let popped: Result<Option<(String, String)>, _> = tokio::select! {
            _ = ctx.cancel.cancelled() => break,
            r = blpop.query_async(c) => r,
        };
        match popped {
            Ok(Some(_)) => look = FIRST_LOOK,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "approval wait failed; reconnecting");
                conn = None;
            }
        }
        if !retry {
            backoff.reset();
        }
    }
}

/// The replies an earlier run of this bridge took off their lists and did not hand on;
/// `None` when Redis cannot be read now.
async fn read_held(ctx: &Ctx, held_key: &str) -> Option<VecDeque<Held>> {
    let rows: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(held_key)
        .query_async(&mut ctx.redis.clone())
        .await
        .map_err(|e| tracing::debug!(error = %e, "held approval replies not read yet"))
        .ok()?;
    let mut held: Vec<Held> = rows
        .into_iter()
        .filter_map(|(request_id, v)| {
            let (ws_id, reply) = v.split_once('\n')?;
            Some(Held {
                request_id,
                ws_id: ws_id.to_string(),
                reply: reply.to_string(),
            })
        })
        .collect();
    held.sort_by(|a, b| a.request_id.cmp(&b.request_id));
    if !held.is_empty() {
        tracing::info!(
            count = held.len(),
            "relaying approval replies taken before a restart"
        );
    }
    Some(held.into())
}

/// Runs [`CLAIM`] over the watched requests' response lists.
async fn claim(
    ctx: &Ctx,
    held_key: &str,
    watched: &[(String, String)],
) -> Result<Vec<Held>, redis::RedisError> {
    static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(CLAIM));
    let mut call = SCRIPT.key(held_key);
    for (request_id, ws_id) in watched {
        call.key(ctx.keys.response(request_id))
            .arg(request_id)
            .arg(ws_id);
    }
    let flat: Vec<String> = call.invoke_async(&mut ctx.redis.clone()).await?;
    Ok(flat
        .chunks_exact(3)
        .map(|t| Held {
            request_id: t[0].clone(),
            ws_id: t[1].clone(),
            reply: t[2].clone(),
        })
        .collect())
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
