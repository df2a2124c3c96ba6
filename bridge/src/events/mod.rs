//! Follows the node-wide ordered event stream and republishes it.
//!
//! One HTTP stream per node (`/v1/api/events/node`), resumed from the cursor kept in Redis
//! (`<boot>:<node_seq>` of the last event published). Each node event becomes one
//! [`Publication`]: an entry in the workstream's capped stream plus the compatible pub/sub
//! messages (cluster spec §3.6, §3.8) — published only if its origin (node, boot,
//! node_seq) is past the last one appended from that node, so replaying events after a
//! crash or a reconnect publishes nothing twice.
//! `turn_complete` is the node's own event (with the send's `correlation_id`), never inferred.

mod frame;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::time::Instant;
use turnstone_proto::keys::Keys;
use turnstone_proto::mq::{
    ApprovalRequestBody, ApprovalRequestEvent, ClusterStateBody, ClusterStateEvent, ContentBody,
    EmptyBody, OutboundEvent, PlanReviewEvent, StateChangeBody, StateChangeEvent, WsClosedEvent,
    WsRenameBody, WsRenameEvent,
};
use turnstone_proto::sse::WsEvent;
use turnstone_queue::{Backoff, Origin, Publication, Publisher, Settle, coalesce};

pub use frame::{NodeEvent, NodeEventKind, NodeFrame};

use crate::Ctx;

/// The event side's state, owned by the event follower: the publisher of the
/// per-workstream streams and the facts derived from the events for `cluster_state`.
pub struct Events {
    publisher: Publisher,
    /// Per-workstream facts (tokens, context ratio, activity), rebuilt from the event
    /// stream; not state of record.
    facts: Mutex<HashMap<String, WsFacts>>,
}

impl Events {
    pub(crate) fn new(stream_maxlen: u64, stream_ttl: Duration) -> Self {
        Self {
            publisher: Publisher::new(stream_maxlen, stream_ttl.as_secs()),
            facts: Mutex::default(),
        }
    }

    fn facts(&self, ws_id: &str) -> WsFacts {
        self.facts.lock().get(ws_id).cloned().unwrap_or_default()
    }

    fn forget(&self, ws_id: &str) {
        self.facts.lock().remove(ws_id);
    }

    fn update_facts(&self, ws_id: &str, update: impl FnOnce(&mut WsFacts)) {
        update(self.facts.lock().entry(ws_id.to_string()).or_default());
    }
}

/// What the cluster channel's `cluster_state` tells besides the state.
#[derive(Debug, Clone, Default)]
struct WsFacts {
    tokens: u64,
    context_ratio: f64,
    activity: String,
    activity_state: String,
}

/// What the bridge must do besides publishing, after the publication went out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// A request to relay replies for: an approval round (`cycle_id`) or a plan review
    /// (`cycle_id` empty).
    AwaitApproval {
        request_id: String,
        ws_id: String,
        cycle_id: String,
    },
    /// An approval round (`cycle_id`) or a plan review (`request_id`) was resolved.
    ApprovalResolved {
        ws_id: String,
        request_id: String,
        cycle_id: String,
    },
    Closed {
        ws_id: String,
    },
    Created {
        ws_id: String,
    },
}

/// How often the follower saves its cursor while events flow. Saving after every batch was
/// one Redis round trip per event under load (27 `SET`s per send, `docs/benchmarks.md`);
/// a cursor older than the last published event costs only a short replay after a restart,
/// which publishes nothing twice. The first position of a node run is saved at once (a
/// restarted bridge finds which run it followed, and recovers what a restarted node
/// completed unseen, `crate::awaiting`), and so is the position of an idle follower, one
/// whose stream broke and one that stops.
const CURSOR_SAVE_INTERVAL: Duration = Duration::from_millis(200);

/// The most node events read into one batch.
const MAX_BATCH: usize = 512;

/// While events flow (the previous batch was read less than [`FLOWING`] ago), the
/// follower holds a batch this long for the events right behind it before publishing:
/// one Redis pipeline then carries a whole turn's events instead of a few each
/// (`docs/benchmarks.md`, "A short hold before publishing"). An event after a quiet spell
/// is published at once; the ack of a send never waits (it is not an event). Tokio's timers
/// tick in milliseconds, so a hold lasts 0.5–1.5 ms.
const PUBLISH_HOLD: Duration = Duration::from_micros(500);

/// See [`PUBLISH_HOLD`].
const FLOWING: Duration = Duration::from_millis(2);

/// The follower's place in the node's event log (`boot`, the run; `seq`, the last event
/// read) and what of it Redis holds (see [`CURSOR_SAVE_INTERVAL`]).
struct Cursor {
    boot: u64,
    seq: u64,
    saved: Option<(u64, u64)>,
    saved_at: Instant,
}

impl Cursor {
    /// The place a follower resumes from: the saved one (`None`: the node's oldest event).
    fn resumed(saved: Option<(u64, u64)>) -> Self {
        let (boot, seq) = saved.unwrap_or_default();
        Self {
            boot,
            seq,
            saved,
            saved_at: Instant::now(),
        }
    }

    /// Past the saved position (a position in no run is never saved).
    fn unsaved(&self) -> bool {
        self.boot != 0 && self.saved != Some((self.boot, self.seq))
    }

    /// When an unsaved position is due to be saved.
    fn due(&self) -> Instant {
        self.saved_at + CURSOR_SAVE_INTERVAL
    }

    /// The node's run is `boot`: a new run starts at its beginning (and is saved with the
    /// batch that follows, whatever the interval, [`Cursor::save`]).
    fn follows(&mut self, boot: u64) {
        if boot != self.boot {
            self.boot = boot;
            self.seq = 0;
        }
    }

    fn read(&mut self, seq: u64) {
        self.seq = self.seq.max(seq);
    }

    /// Saves the position if it is unsaved and `now` is true, or it is of a run the saved
    /// one is not, or its interval is over.
    async fn save(&mut self, ctx: &Ctx, now: bool) {
        let new_run = self.saved.map(|(b, _)| b) != Some(self.boot);
        if self.unsaved() && (now || new_run || self.saved_at.elapsed() >= CURSOR_SAVE_INTERVAL) {
            save_cursor(ctx, self.boot, self.seq).await;
            (self.saved, self.saved_at) = (Some((self.boot, self.seq)), Instant::now());
        }
    }
}

pub async fn run(ctx: Arc<Ctx>) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    // The run of the node whose missed turn_completes were asked for (`crate::awaiting`).
    let mut reconciled: Option<u64> = None;
    while !ctx.cancel.is_cancelled() {
        let loaded = load_cursor(&ctx).await;
        let resp = match ctx.node.node_events(loaded).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "node event stream not open");
                tokio::select! {
                    _ = ctx.cancel.cancelled() => break,
                    _ = tokio::time::sleep(backoff.delay()) => {}
                }
                continue;
            }
        };
        ctx.metrics.inc(&ctx.metrics.event_stream_reconnects);
        let mut stream = resp.bytes_stream().eventsource().ready_chunks(MAX_BATCH);
        let mut cursor = Cursor::resumed(loaded);
        let mut last_batch: Option<Instant> = None;
        loop {
            let chunk = tokio::select! {
                _ = ctx.cancel.cancelled() => {
                    cursor.save(&ctx, true).await;
                    return;
                }
                _ = tokio::time::sleep_until(cursor.due()), if cursor.unsaved() => {
                    cursor.save(&ctx, true).await;
                    continue;
                }
                c = stream.next() => c,
            };
            let Some(mut chunk) = chunk else {
                cursor.save(&ctx, true).await;
                break;
            };
            if last_batch.is_some_and(|at| at.elapsed() < FLOWING) {
                read_on(&mut stream, &mut chunk, Instant::now() + PUBLISH_HOLD).await;
            }
            last_batch = Some(Instant::now());
            let mut batch = Vec::with_capacity(chunk.len());
            let mut effects = Vec::new();
            let mut broken = false;
            for item in chunk {
                let ev = match item {
                    Ok(ev) => ev,
                    Err(e) => {
                        tracing::debug!(error = %e, "node event stream broke");
                        broken = true;
                        break;
                    }
                };
                let Some(frame) = NodeFrame::decode(&ev.data) else {
                    continue;
                };
                let event = match frame {
                    NodeFrame::Hello { boot } => {
                        if cursor.boot != 0 && boot != cursor.boot {
                            tracing::info!(
                                old = cursor.boot,
                                new = boot,
                                "node restarted; following its new event log"
                            );
                        }
                        cursor.follows(boot);
                        // A new run of the node (the cursor is of another one): before any
                        // event of this run is published, what the previous run completed
                        // and this bridge never saw.
                        if loaded.is_some_and(|c| c.0 != boot)
                            && reconciled != Some(boot)
                            && crate::awaiting::reconcile(&ctx, boot).await
                        {
                            reconciled = Some(boot);
                        }
                        continue;
                    }
                    NodeFrame::Truncated {
                        missed_from,
                        missed_to,
                    } => {
                        tracing::error!(
                            missed_from,
                            missed_to,
                            "the node no longer holds some events the bridge had not published"
                        );
                        continue;
                    }
                    NodeFrame::Event(event) => Some(event),
                    NodeFrame::Other => None,
                };
                let Some(seq) = ev.id.trim().parse::<u64>().ok() else {
                    continue;
                };
                ctx.metrics.inc(&ctx.metrics.events_received);
                cursor.read(seq);
                if let Some(event) = event {
                    let (entry, effect) = publication(
                        &ctx.events,
                        &ctx.keys,
                        &ctx.node_id,
                        cursor.boot,
                        seq,
                        event,
                    );
                    batch.extend(entry);
                    effects.extend(effect);
                }
            }
            let joined = batch.len();
            let batch = coalesce(batch);
            ctx.metrics
                .add(&ctx.metrics.events_joined, (joined - batch.len()) as u64);
            publish_all(&ctx, &batch).await;
            for effect in effects {
                apply(&ctx, effect).await;
            }
            cursor.save(&ctx, broken).await;
            backoff.reset();
            if broken {
                break;
            }
        }
        tokio::select! {
            _ = ctx.cancel.cancelled() => break,
            _ = tokio::time::sleep(backoff.delay()) => {}
        }
    }
}

/// Appends to `chunk` the chunks `stream` yields until `until`, or until `chunk` holds
/// [`MAX_BATCH`] items or more (a ready chunk is taken whole). The stream's end (or a
/// break) is left for the next read to see.
async fn read_on<T, S>(stream: &mut S, chunk: &mut Vec<T>, until: Instant)
where
    S: futures::Stream<Item = Vec<T>> + Unpin,
{
    while chunk.len() < MAX_BATCH {
        match tokio::time::timeout_at(until, stream.next()).await {
            Ok(Some(more)) => chunk.extend(more),
            Ok(None) | Err(_) => return,
        }
    }
}

pub(crate) async fn publish_all(ctx: &Ctx, batch: &[Publication]) {
    if batch.is_empty() {
        return;
    }
    let mut backoff = Backoff::default();
    loop {
        let mut conn = ctx.redis.clone();
        match ctx.events.publisher.publish_batch(&mut conn, batch).await {
            Ok(fresh) => {
                ctx.metrics.add(&ctx.metrics.events_published, fresh as u64);
                ctx.metrics
                    .add(&ctx.metrics.events_replayed, (batch.len() - fresh) as u64);
                return;
            }
            Err(e) => {
                ctx.metrics.inc(&ctx.metrics.publish_errors);
                tracing::warn!(error = %e, "events not published yet; retrying");
                tokio::select! {
                    _ = ctx.cancel.cancelled() => return,
                    _ = tokio::time::sleep(backoff.delay()) => {}
                }
            }
        }
    }
}

async fn apply(ctx: &Ctx, effect: Effect) {
    let mut conn = ctx.redis.clone();
    match effect {
        Effect::AwaitApproval {
            request_id,
            ws_id,
            cycle_id,
        } => {
            ctx.approvals.watch(request_id, ws_id, cycle_id).await;
        }
        Effect::ApprovalResolved {
            ws_id,
            request_id,
            cycle_id,
        } => {
            ctx.approvals
                .forget_resolved(&ws_id, &request_id, &cycle_id);
        }
        Effect::Closed { ws_id } => {
            ctx.approvals.forget_workstream(&ws_id);
            ctx.events.forget(&ws_id);
            if let Err(e) = ctx.leases.release(&mut conn, &ws_id, &ctx.node_id).await {
                tracing::warn!(ws_id, error = %e, "ownership lease not released (it runs out by itself)");
            }
        }
        Effect::Created { ws_id } => {
            // Replayed after a restart, a creation must not take back a workstream that has
            // moved to another node since (the refresh then lets this node's copy go).
            match ctx
                .leases
                .own_unless_held(&mut conn, &ws_id, &ctx.node_id, ctx.cfg.lease_ttl)
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(ws_id, "created here, but another node holds its lease")
                }
                Err(e) => {
                    tracing::warn!(ws_id, error = %e, "ownership lease not taken yet (the next refresh takes it)");
                }
            }
        }
    }
}

async fn load_cursor(ctx: &Ctx) -> Option<(u64, u64)> {
    let mut conn = ctx.redis.clone();
    let raw: Option<String> = redis::cmd("GET")
        .arg(ctx.keys.bridge_cursor(&ctx.node_id))
        .query_async(&mut conn)
        .await
        .ok()
        .flatten();
    let (b, s) = raw?
        .split_once(':')
        .map(|(b, s)| (b.to_string(), s.to_string()))?;
    Some((b.parse().ok()?, s.parse().ok()?))
}

async fn save_cursor(ctx: &Ctx, boot: u64, seq: u64) {
    let mut conn = ctx.redis.clone();
    let r: Result<(), _> = redis::cmd("SET")
        .arg(ctx.keys.bridge_cursor(&ctx.node_id))
        .arg(format!("{boot}:{seq}"))
        .query_async(&mut conn)
        .await;
    if let Err(e) = r {
        // Harmless: a replay from an older cursor publishes nothing twice.
        tracing::debug!(error = %e, "event cursor not saved");
    }
}

/// The publication (and follow-up) of one node event; pure apart from the derived facts.
/// Each distinct MQ event is encoded once.
pub(crate) fn publication(
    events: &Events,
    k: &Keys,
    node_id: &str,
    boot: u64,
    seq: u64,
    event: NodeEvent,
) -> (Option<Publication>, Option<Effect>) {
    let NodeEvent { ws_id, kind } = event;
    let event_type = kind.type_name().to_string();
    // A turn_complete settles the send this bridge awaited (`crate::awaiting`).
    let settles = match &kind {
        NodeEventKind::Ws(WsEvent::TurnComplete(t)) if !t.correlation_id.is_empty() => {
            Some(Settle {
                hash: k.bridge_awaiting(node_id),
                field: t.correlation_id.clone(),
                only_if_awaited: false,
            })
        }
        _ => None,
    };
    let ws_channel = k.events_ws(&ws_id);
    let mut effect = None;
    // (channels, event): the event goes to each channel of its group.
    let groups: Vec<(Vec<String>, OutboundEvent)> = match kind {
        NodeEventKind::Ws(WsEvent::StateChange(change)) => {
            let state = change.state.as_str().to_string();
            let f = events.facts(&ws_id);
            let cluster: OutboundEvent = ClusterStateEvent::new(
                ws_id.clone(),
                ClusterStateBody {
                    state: state.clone(),
                    node_id: node_id.to_string(),
                    tokens: f.tokens,
                    context_ratio: f.context_ratio,
                    activity: f.activity,
                    activity_state: f.activity_state,
                },
            )
            .into();
            let change: OutboundEvent =
                StateChangeEvent::new(ws_id.clone(), StateChangeBody { state }).into();
            vec![
                (vec![ws_channel, k.events_global()], change),
                (vec![k.events_cluster()], cluster),
            ]
        }
        NodeEventKind::Activity(a) => {
            events.update_facts(&ws_id, |f| {
                f.activity = a.activity;
                f.activity_state = a.activity_state;
            });
            return (None, None);
        }
        NodeEventKind::ApproveRequest {
            request_id,
            items,
            cycle_id,
        } => {
            effect = Some(Effect::AwaitApproval {
                request_id: request_id.clone(),
                ws_id: ws_id.clone(),
                cycle_id: cycle_id.clone(),
            });
            let ev = OutboundEvent::ApprovalRequest(ApprovalRequestEvent {
                correlation_id: request_id,
                ..ApprovalRequestEvent::new(ws_id.clone(), ApprovalRequestBody { items, cycle_id })
            });
            vec![(vec![ws_channel], ev)]
        }
        NodeEventKind::Ws(WsEvent::ApprovalResolved(resolved)) => {
            let effect = Effect::ApprovalResolved {
                ws_id,
                request_id: String::new(),
                cycle_id: resolved.cycle_id,
            };
            return (None, Some(effect));
        }
        NodeEventKind::Ws(WsEvent::PlanResolved(resolved)) => {
            let effect = Effect::ApprovalResolved {
                ws_id,
                request_id: resolved.request_id,
                cycle_id: String::new(),
            };
            return (None, Some(effect));
        }
        NodeEventKind::Ws(WsEvent::PlanReview(review)) => {
            // Its reply (`plan_feedback` on `resp:{request_id}`) is relayed like an approval's.
            if !review.request_id.is_empty() {
                effect = Some(Effect::AwaitApproval {
                    request_id: review.request_id.clone(),
                    ws_id: ws_id.clone(),
                    cycle_id: String::new(),
                });
            }
            let ev = OutboundEvent::PlanReview(PlanReviewEvent {
                correlation_id: review.request_id,
                ..PlanReviewEvent::new(
                    ws_id.clone(),
                    ContentBody {
                        content: review.content,
                    },
                )
            });
            vec![(vec![ws_channel], ev)]
        }
        NodeEventKind::Closed => {
            effect = Some(Effect::Closed {
                ws_id: ws_id.clone(),
            });
            let ev = OutboundEvent::WsClosed(WsClosedEvent::new(ws_id.clone(), EmptyBody {}));
            vec![(vec![k.events_global(), k.events_cluster()], ev)]
        }
        NodeEventKind::Renamed(rename) => {
            let ev: OutboundEvent =
                WsRenameEvent::new(ws_id.clone(), WsRenameBody { name: rename.name }).into();
            vec![(vec![k.events_global(), k.events_cluster()], ev)]
        }
        NodeEventKind::Created => {
            return (None, Some(Effect::Created { ws_id }));
        }
        NodeEventKind::Ws(event) => {
            if let WsEvent::Status(s) = &event {
                events.update_facts(&ws_id, |f| {
                    f.tokens = s.total_tokens;
                    f.context_ratio = (s.pct / 100.0 * 1000.0).round() / 1000.0;
                });
            }
            match OutboundEvent::from_ws_event(&ws_id, &event) {
                Some(ev) => vec![(vec![ws_channel], ev)],
                None => return (None, None),
            }
        }
    };
    let publication = Publication::new(
        k.stream(&ws_id),
        k.stream_positions(&ws_id),
        Some(Origin {
            node_id: node_id.to_string(),
            boot,
            seq,
        }),
        event_type,
        groups,
    )
    .map(|p| Publication { settles, ..p });
    (publication, effect)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// The hold takes what arrives before it ends, no more, and leaves the stream's end to
    /// the next read. (Tokio's timers tick in milliseconds, hence a longer hold here.)
    #[tokio::test(start_paused = true)]
    async fn the_hold_takes_what_arrives_before_it_ends_and_no_more() {
        let (tx, mut rx) = futures::channel::mpsc::unbounded::<Vec<u32>>();
        let start = Instant::now();
        let sender = tokio::spawn(async move {
            for (at_ms, item) in [(2, 1), (5, 2), (8, 3), (15, 4)] {
                tokio::time::sleep_until(start + Duration::from_millis(at_ms)).await;
                tx.unbounded_send(vec![item]).unwrap();
            }
        });
        let hold = Duration::from_millis(10);
        let mut chunk = vec![0];
        read_on(&mut rx, &mut chunk, start + hold).await;
        assert_eq!(
            chunk,
            [0, 1, 2, 3],
            "what arrived within the hold, in order"
        );
        assert_eq!(Instant::now(), start + hold, "held until the hold's end");
        sender.await.unwrap();
        let mut next = rx.next().await.unwrap();
        assert_eq!(next, [4], "what came after the hold is the next batch's");
        read_on(&mut rx, &mut next, Instant::now() + hold).await;
        assert_eq!(next, [4], "the stream's end ends the hold early");
        assert!(rx.next().await.is_none(), "and is seen by the next read");
    }

    #[tokio::test(start_paused = true)]
    async fn the_hold_stops_at_a_full_batch() {
        let (tx, mut rx) = futures::channel::mpsc::unbounded::<Vec<u32>>();
        for _ in 0..3 {
            tx.unbounded_send(vec![7; MAX_BATCH / 2]).unwrap();
        }
        let start = Instant::now();
        let mut chunk = Vec::new();
        read_on(&mut rx, &mut chunk, start + PUBLISH_HOLD).await;
        assert_eq!(chunk.len(), MAX_BATCH);
        assert_eq!(Instant::now(), start, "a full batch is not held");
        assert_eq!(rx.next().await.unwrap().len(), MAX_BATCH / 2);
    }

    fn frame(data: &str) -> NodeEvent {
        match NodeFrame::decode(data) {
            Some(NodeFrame::Event(e)) => e,
            other => panic!("not an event: {other:?}"),
        }
    }

    fn map(events: &Events, data: &str) -> (Option<Publication>, Option<Effect>) {
        publication(events, &Keys::new("p"), "node-a", 9, 4, frame(data))
    }

    /// A published payload without its (wall-clock) `timestamp`.
    fn wire(payload: &str) -> Value {
        let mut v: Value = serde_json::from_str(payload).unwrap();
        assert!(v["timestamp"].as_f64().unwrap() > 0.0);
        v.as_object_mut().unwrap().shift_remove("timestamp");
        v
    }

    #[test]
    fn state_change_goes_to_three_channels_with_the_derived_facts() {
        let events = Events::new(100, Duration::from_secs(60));
        assert_eq!(
            map(
                &events,
                r#"{"type":"status","total_tokens":1234,"pct":12.345,"ws_id":"w"}"#
            )
            .0
            .unwrap()
            .event_type,
            "status"
        );
        let (none, effect) = map(
            &events,
            r#"{"type":"activity","activity":"bash: ls","activity_state":"tool","ws_id":"w"}"#,
        );
        assert!(none.is_none() && effect.is_none());
        let (p, effect) = map(
            &events,
            r#"{"type":"state_change","state":"running","ws_id":"w","ws_seq":3,"node_seq":4}"#,
        );
        let p = p.unwrap();
        assert!(effect.is_none());
        assert_eq!(p.stream, "p:stream:w");
        assert_eq!(
            p.origin,
            Some(Origin {
                node_id: "node-a".into(),
                boot: 9,
                seq: 4
            })
        );
        assert_eq!(p.positions, "p:stream-pos:w");
        assert_eq!(p.event_type, "state_change");
        let change =
            json!({"type": "state_change", "ws_id": "w", "correlation_id": "", "state": "running"});
        assert_eq!(wire(&p.event.json()), change);
        let channels: Vec<&str> = p.channels.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            channels,
            ["p:events:w", "p:events:global", "p:events:cluster"]
        );
        assert_eq!(p.channels[0].1, None);
        assert_eq!(p.channels[1].1, None);
        assert_eq!(
            wire(p.channels[2].1.as_deref().unwrap()),
            json!({"type": "cluster_state", "ws_id": "w", "correlation_id": "", "state": "running",
                   "node_id": "node-a", "tokens": 1234, "context_ratio": 0.123,
                   "activity": "bash: ls", "activity_state": "tool"})
        );
    }

    #[test]
    fn approval_requests_are_published_under_their_request_id_and_watched() {
        let events = Events::new(100, Duration::from_secs(60));
        let (p, effect) = map(
            &events,
            r#"{"type":"approve_request","request_id":"r1","judge_pending":false,"ws_id":"w",
                "items":[{"call_id":"c1","header":"h","preview":"p","func_name":"bash",
                          "approval_label":"bash","needs_approval":true,"error":null}]}"#,
        );
        let p = p.unwrap();
        assert_eq!(p.event_type, "approve_request");
        assert_eq!(
            wire(&p.event.json()),
            json!({"type": "approval_request", "ws_id": "w", "correlation_id": "r1",
                   "items": [{"call_id": "c1", "header": "h", "preview": "p", "func_name": "bash",
                              "approval_label": "bash", "needs_approval": true, "error": null}]})
        );
        assert_eq!(
            effect,
            Some(Effect::AwaitApproval {
                request_id: "r1".into(),
                ws_id: "w".into(),
                cycle_id: String::new(),
            })
        );
        let (none, effect) = map(
            &events,
            r#"{"type":"approval_resolved","approved":true,"feedback":"","ws_id":"w"}"#,
        );
        assert!(none.is_none());
        assert_eq!(
            effect,
            Some(Effect::ApprovalResolved {
                ws_id: "w".into(),
                request_id: String::new(),
                cycle_id: String::new(),
            })
        );
        // A round of several: the MQ event carries its cycle_id, and its resolution names it.
        let (p, effect) = map(
            &events,
            r#"{"type":"approve_request","request_id":"r2","cycle_id":"c2","judge_pending":false,"ws_id":"w","items":[]}"#,
        );
        assert_eq!(wire(&p.unwrap().event.json())["cycle_id"], "c2");
        assert!(matches!(effect, Some(Effect::AwaitApproval { cycle_id, .. }) if cycle_id == "c2"));
        let (_, effect) = map(
            &events,
            r#"{"type":"approval_resolved","approved":false,"feedback":"","cycle_id":"c2","ws_id":"w"}"#,
        );
        assert!(
            matches!(effect, Some(Effect::ApprovalResolved { cycle_id, .. }) if cycle_id == "c2")
        );
    }

    #[test]
    fn lifecycle_events_go_to_global_and_cluster() {
        let events = Events::new(100, Duration::from_secs(60));
        let (p, effect) = map(
            &events,
            r#"{"type":"ws_closed","ws_id":"w","reason":"idle"}"#,
        );
        let p = p.unwrap();
        assert_eq!(effect, Some(Effect::Closed { ws_id: "w".into() }));
        assert_eq!(
            wire(&p.event.json()),
            json!({"type": "ws_closed", "ws_id": "w", "correlation_id": ""})
        );
        let channels: Vec<&str> = p.channels.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(channels, ["p:events:global", "p:events:cluster"]);
        let (p, _) = map(&events, r#"{"type":"ws_rename","ws_id":"w","name":"new"}"#);
        assert_eq!(
            wire(&p.unwrap().event.json()),
            json!({"type": "ws_rename", "ws_id": "w", "correlation_id": "", "name": "new"})
        );
        let (none, effect) = map(&events, r#"{"type":"ws_created","ws_id":"w","name":"x"}"#);
        assert!(none.is_none());
        assert_eq!(effect, Some(Effect::Created { ws_id: "w".into() }));
    }

    #[test]
    fn per_workstream_events_go_to_their_channel_once_encoded() {
        let events = Events::new(100, Duration::from_secs(60));
        let (p, _) = map(
            &events,
            r#"{"type":"turn_complete","correlation_id":"c9","content":"done","state":"idle","ws_id":"w"}"#,
        );
        let p = p.unwrap();
        assert_eq!(p.event_type, "turn_complete");
        assert_eq!(
            wire(&p.event.json()),
            json!({"type": "turn_complete", "ws_id": "w", "correlation_id": "c9", "content": "done"})
        );
        assert_eq!(p.channels, vec![("p:events:w".to_string(), None)]);
        for ignored in [
            r#"{"type":"thinking_start","ws_id":"w"}"#,
            r#"{"type":"something_new","ws_id":"w"}"#,
        ] {
            assert_eq!(map(&events, ignored), (None, None));
        }
    }
}
