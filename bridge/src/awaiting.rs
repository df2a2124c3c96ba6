//! Turns this bridge handed to its node and has not seen end.
//!
//! `{p}:bridge:{node}:awaiting` (HASH, correlation id → 1): a send is added before the
//! node is called (with the message's handed mark, in one round trip), removed again when
//! the node does not take it, and removed by the publication of its `turn_complete` (in the
//! same script, `turnstone_queue::Settle`). The node's event stream lives
//! in memory, so a `turn_complete` the node emitted just before it stopped may never have
//! reached this bridge. When the node comes back as a new run, the bridge asks it what
//! became of every send still awaited (`POST /v1/api/sends/outcomes`) and publishes the
//! `turn_complete` of those that completed in the previous run — at most once: that
//! publication only goes out while the entry is still there, and removes it. A turn the
//! previous run left unfinished is reported by the node itself, on its new stream.

use std::time::Duration;

use turnstone_proto::api::{
    MAX_OUTCOME_QUERY, OUTCOME_COMPLETED, OUTCOME_QUEUED, OUTCOME_STARTED, SendOutcomes,
    SendOutcomesBody,
};
use turnstone_proto::sse::WsEvent;
use turnstone_queue::{AlsoRecord, Publication, ReliableQueue, Settle};

use crate::events::{NodeEvent, NodeEventKind};
use crate::node::decode_reply;
use crate::{Ctx, Reply};

/// An awaited entry outlives a bridge that is gone for good by at most this long.
const AWAITING_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

impl Ctx {
    /// Marks a held message handed to the node (`turnstone_queue::ReliableQueue`: from
    /// now on only this node may apply it) and, for a message that starts a turn, its
    /// correlation id awaited — one atomic step, before the node is called, so a
    /// `turn_complete` can never be published before its send is awaited. `Some(false)`
    /// when the message is no longer held: another bridge's janitor released it while this
    /// bridge was cut off from Redis or stalled, and whoever took it delivers it — this
    /// bridge must not (it would run twice). `None` when Redis did not answer: the message
    /// stays held and is delivered later.
    pub(crate) async fn hand_over(
        &self,
        q: &ReliableQueue,
        raw: &str,
        awaited: Option<&str>,
    ) -> Option<bool> {
        let key = self.keys.bridge_awaiting(&self.node_id);
        let also = awaited.filter(|c| !c.is_empty()).map(|cid| AlsoRecord {
            hash: &key,
            field: cid,
            ttl: AWAITING_TTL,
        });
        let mut conn = self.redis.clone();
        match q.hand(&mut conn, raw, also).await {
            Ok(held) => Some(held),
            Err(e) => {
                tracing::warn!(error = %e, "handed mark not written; the message stays held");
                None
            }
        }
    }

    /// The node did not take the send: no `turn_complete` will come for it (best effort; a
    /// leftover is forgotten at the next reconciliation, the node not knowing it).
    pub(crate) async fn not_awaited(&self, correlation_id: &str) {
        let mut conn = self.redis.clone();
        let r: Result<(), _> = redis::cmd("HDEL")
            .arg(self.keys.bridge_awaiting(&self.node_id))
            .arg(correlation_id)
            .query_async(&mut conn)
            .await;
        if let Err(e) = r {
            tracing::debug!(error = %e, correlation_id, "awaited entry not removed");
        }
    }

    /// The settlement a `turn_complete` of `correlation_id` makes when published.
    pub(crate) fn settles(&self, correlation_id: &str, only_if_awaited: bool) -> Option<Settle> {
        (!correlation_id.is_empty()).then(|| Settle {
            hash: self.keys.bridge_awaiting(&self.node_id),
            field: correlation_id.to_string(),
            only_if_awaited,
        })
    }
}

/// After the node came back as run `boot`: publishes the `turn_complete` of every awaited
/// send that completed in an earlier run, and forgets the ones the node no longer holds or
/// removed. `false` when the node or Redis could not be asked (the caller tries again at
/// the next connection).
pub(crate) async fn reconcile(ctx: &Ctx, boot: u64) -> bool {
    let key = ctx.keys.bridge_awaiting(&ctx.node_id);
    let mut conn = ctx.redis.clone();
    let awaited: Vec<(String, String)> =
        match redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "awaited turns not read; asking again later");
                return false;
            }
        };
    if awaited.is_empty() {
        return true;
    }
    let mut recovered = Vec::new();
    let mut forget = Vec::new();
    for chunk in awaited.chunks(MAX_OUTCOME_QUERY) {
        let body = SendOutcomesBody {
            correlation_ids: chunk.iter().map(|(cid, _)| cid.clone()).collect(),
        };
        let Reply::Accepted(reply) = ctx.node.send_outcomes(&body).await else {
            tracing::warn!(
                "the node did not say what became of the awaited turns; asking again later"
            );
            return false;
        };
        let SendOutcomes { outcomes } = decode_reply("sends/outcomes", &reply).unwrap_or_default();
        for o in outcomes {
            match o.state.as_str() {
                OUTCOME_COMPLETED if o.previous_run => {
                    let event = o
                        .turn_complete
                        .and_then(|v| WsEvent::from_value(v).ok())
                        .filter(|e| matches!(e, WsEvent::TurnComplete(_)));
                    match event {
                        Some(event) => recovered.push((o.correlation_id, o.ws_id, event)),
                        None => forget.push(o.correlation_id),
                    }
                }
                // Its turn_complete is on this run's stream (or still to come).
                OUTCOME_COMPLETED | OUTCOME_QUEUED | OUTCOME_STARTED => {}
                _ => forget.push(o.correlation_id),
            }
        }
    }
    let batch: Vec<Publication> = recovered
        .into_iter()
        .enumerate()
        .filter_map(|(i, (cid, ws_id, event))| {
            let node_event = NodeEvent {
                ws_id,
                kind: NodeEventKind::Ws(event),
            };
            let (publication, _) = crate::events::publication(
                &ctx.events,
                &ctx.keys,
                &ctx.node_id,
                boot,
                i as u64,
                node_event,
            );
            let mut p = publication?;
            // No origin: published once, by its settlement.
            p.origin = None;
            p.settles = ctx.settles(&cid, true);
            Some(p)
        })
        .collect();
    if !batch.is_empty() {
        tracing::warn!(
            recovered = batch.len(),
            "turn_complete events the node emitted before it restarted, published now"
        );
        crate::events::publish_all(ctx, &batch).await;
    }
    if !forget.is_empty() {
        tracing::warn!(
            forgotten = forget.len(),
            "awaited sends the node no longer holds or removed; no turn_complete will come"
        );
        let r: Result<(), _> = redis::cmd("HDEL")
            .arg(&key)
            .arg(&forget)
            .query_async(&mut conn)
            .await;
        if let Err(e) = r {
            // They stay awaited; the next reconciliation forgets them.
            tracing::warn!(error = %e, "forgotten awaited sends not removed yet");
        }
    }
    true
}
