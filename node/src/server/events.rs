//! The three event streams: per workstream (`/v1/api/events?ws_id=`), global
//! (`/v1/api/events/global`) and node-wide ordered (`/v1/api/events/node`, ours).

use std::collections::VecDeque;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use turnstone_engine::{Event, Item, Sequenced, Subscription, WorkstreamHandle, WsState};
use turnstone_proto::sse::{GlobalEvent, WsActivity, WsEvent};

use super::error::ApiError;
use super::sse::{self, Frame, PING_INTERVAL};
use super::state::{Node, NodeEvent, NodeEventKind, per_ws_visible};
use super::views;

#[derive(Debug, Deserialize)]
pub struct WsQuery {
    #[serde(default)]
    ws_id: String,
    /// Resume point for clients that cannot set headers (a browser `EventSource` opened
    /// anew); the `Last-Event-ID` header wins when both are present. Not a number: ignored.
    #[serde(default)]
    last_event_id: Option<String>,
}

fn truncated(from: u64, to: u64) -> Value {
    json!({"type": "events_truncated", "missed_from": from, "missed_to": to})
}

/// Follows `sub`, mapping each item to frames, with a keep-alive ping; ends when `until`
/// resolves (the workstream closed) or the log is gone. When the node drains, what is
/// already in the log is sent, then the final `stream_closing` event, then the stream ends.
fn follow<T: Sequenced>(
    node: &Node,
    first: Vec<Frame>,
    sub: Subscription<T>,
    until: Option<WorkstreamHandle>,
    map: impl Fn(Item<T>) -> Vec<Frame> + Send + 'static,
) -> impl Stream<Item = Frame> + Send + 'static {
    struct St<T: Sequenced, M> {
        queue: VecDeque<Frame>,
        sub: Subscription<T>,
        until: Option<WorkstreamHandle>,
        ticker: tokio::time::Interval,
        map: M,
        drain: turnstone_runtime::Drain,
        end: Option<Frame>,
    }
    let mut ticker = tokio::time::interval(PING_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.reset();
    let state = St {
        queue: first.into(),
        sub,
        until,
        ticker,
        map,
        drain: node.drain.clone(),
        end: Some(Frame::event(None, super::drain::stream_closing_event(node))),
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(frame) = st.queue.pop_front() {
                return Some((frame, st));
            }
            // The final event was sent: the stream is over.
            st.end.as_ref()?;
            let closed = async {
                match &st.until {
                    Some(ws) => ws.closed().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                item = st.sub.next() => match item {
                    Some(item) => st.queue.extend((st.map)(item)),
                    None => return None,
                },
                _ = closed => return None,
                _ = st.drain.streams_closing() => {
                    let end = st.end.take();
                    return end.map(|frame| (frame, st));
                }
                _ = st.ticker.tick() => return Some((Frame::Ping, st)),
            }
        }
    })
}

/// Frames of one per-workstream item.
pub fn ws_frames(node: &Node, ws: &WorkstreamHandle, item: Item) -> Vec<Frame> {
    match item {
        Item::Truncated { from, to } => vec![Frame::event(None, truncated(from, to))],
        Item::Event(env) => {
            if !per_ws_visible(&env.event) {
                return Vec::new();
            }
            let mut frames = Vec::with_capacity(2);
            if let Event::TurnComplete { content, state, .. } = &env.event {
                frames.push(Frame::typed(
                    None,
                    &WsEvent::WsState(views::ws_state(node, ws, *state, Some(content))),
                ));
            }
            frames.push(Frame::typed(Some(env.seq), &env.event));
            frames
        }
    }
}

/// The attach preamble plus the pending plan review, if any: its `plan_review` event last
/// (after `connected`/`status`/`history`, as a pending `approve_request`), and the
/// `plan_agent` call marked `pending` in `history` (its result is not there yet).
fn with_pending_plan(mut preamble: Vec<Value>, ws: &WorkstreamHandle) -> Vec<Value> {
    let Some(env) = ws.pending_plan_review() else {
        return preamble;
    };
    if let Some(messages) = preamble
        .iter_mut()
        .find(|v| v["type"] == "history")
        .and_then(|h| h["messages"].as_array_mut())
        && let Some(call) = messages
            .iter_mut()
            .rev()
            .find(|m| m["role"] == "assistant" && m.get("tool_calls").is_some())
    {
        call["pending"] = json!(true);
    }
    preamble.push(views::event_json(&env.event));
    preamble
}

/// `GET /v1/api/events?ws_id=` — per-workstream stream with `Last-Event-ID` resumption.
pub async fn workstream_events(
    State(node): State<Arc<Node>>,
    Query(q): Query<WsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let ws = node.resolve(&q.ws_id).await?;
    let resume = sse::last_event_id(&headers).or_else(|| {
        q.last_event_id
            .as_deref()
            .and_then(|v| v.trim().parse().ok())
    });
    Ok(sse::response(workstream_stream(&node, ws, resume)))
}

/// The frames of one workstream's stream (SSE and gRPC `StreamEvents` alike): without
/// `resume` the attach preamble first, with it every retained event after it; then the live
/// events until the workstream closes or the node drains.
pub fn workstream_stream(
    node: &Arc<Node>,
    ws: WorkstreamHandle,
    resume: Option<u64>,
) -> impl Stream<Item = Frame> + Send + 'static {
    let mut sub = ws.subscribe(resume);
    let mut first = Vec::new();
    match resume {
        None => first.extend(
            with_pending_plan(views::attach_preamble(node, &ws), &ws)
                .into_iter()
                .map(|v| Frame::event(None, v)),
        ),
        Some(_) => {
            for item in sub.backlog() {
                first.extend(ws_frames(node, &ws, item));
            }
        }
    }
    let (n, w) = (node.clone(), ws.clone());
    follow(node, first, sub, Some(ws), move |item| {
        ws_frames(&n, &w, item)
    })
}

/// Frames of one node-wide item on the global stream (original `ws_state`, `ws_activity`,
/// `ws_rename`, `ws_closed`).
fn global_frames(node: &Node, item: Item<NodeEvent>) -> Vec<Frame> {
    let Item::Event(entry) = item else {
        return Vec::new();
    };
    let event = match &entry.kind {
        NodeEventKind::Ws(env) => {
            let Some(ws) = node.workstream(&env.ws_id) else {
                return Vec::new();
            };
            match &env.event {
                // The final state of a turn is announced with its content on turn_complete.
                Event::StateChange { state }
                    if !matches!(state, WsState::Idle | WsState::Error) =>
                {
                    GlobalEvent::WsState(views::ws_state(node, &ws, *state, None))
                }
                Event::TurnComplete { state, content, .. } => {
                    GlobalEvent::WsState(views::ws_state(node, &ws, *state, Some(content)))
                }
                Event::Activity {
                    activity,
                    activity_state,
                } => GlobalEvent::WsActivity(WsActivity {
                    ws_id: env.ws_id.to_string(),
                    activity: activity.clone(),
                    activity_state: activity_state.clone(),
                }),
                _ => return Vec::new(),
            }
        }
        // An explicit close is announced on the node-wide stream only (as the original).
        NodeEventKind::Closed { reason, .. } if reason == "closed" => return Vec::new(),
        NodeEventKind::Created { .. } => return Vec::new(),
        // The notice as it is, without the node-wide stream's `node_seq`.
        NodeEventKind::Closed { .. } | NodeEventKind::Renamed { .. } => {
            return entry
                .notice()
                .map(|notice| Frame::typed(Some(entry.seq), &notice))
                .into_iter()
                .collect();
        }
    };
    vec![Frame::typed(Some(entry.seq), &event)]
}

/// `GET /v1/api/events/global` — live state of every workstream (no initial frame).
pub async fn global_events(State(node): State<Arc<Node>>, headers: HeaderMap) -> Response {
    let resume = sse::last_event_id(&headers);
    // A resuming client's backlog streams from the ring as it reads (see `node_events`).
    let sub = node.node_log.subscribe(resume);
    let n = node.clone();
    sse::response(follow(&node, Vec::new(), sub, None, move |item| {
        global_frames(&n, item)
    }))
}

fn node_frames(item: Item<NodeEvent>) -> Vec<Frame> {
    match item {
        Item::Event(entry) => vec![Frame::Json {
            id: Some(entry.seq),
            json: entry.encode(),
        }],
        Item::Truncated { from, to } => vec![Frame::event(None, truncated(from, to))],
    }
}

/// `GET /v1/api/events/node` — every event of every workstream, in order, with `ws_id`,
/// `ws_seq` and `node_seq`; resumable with `Last-Event-ID` (a `node_seq`). Without it the
/// stream starts with the live events; `?from=0` replays everything retained.
///
/// The first frame (no `id`) is `node_hello` naming the node, its `boot` and the last
/// `node_seq`. `node_seq` restarts with every boot, so a client resuming with `?boot=<b>`
/// from another boot gets everything retained of this one (`"reset": true`) instead of a
/// resume point that means nothing here.
pub async fn node_events(
    State(node): State<Arc<Node>>,
    Query(q): Query<NodeQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let from = match q.from.as_deref().map(str::trim).filter(|f| !f.is_empty()) {
        None => None,
        Some(f) => Some(f.parse::<u64>().map_err(|_| {
            ApiError::BadRequest(format!("from must be a non-negative integer, got '{f}'"))
        })?),
    };
    let boot = match q.boot.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
        None => None,
        Some(b) => Some(b.parse::<u64>().map_err(|_| {
            ApiError::BadRequest(format!("boot must be a non-negative integer, got '{b}'"))
        })?),
    };
    Ok(sse::response(node_stream(
        &node,
        sse::last_event_id(&headers).or(from),
        boot,
    )))
}

/// The frames of the node-wide stream (SSE and gRPC `StreamNodeEvents` alike): `node_hello`
/// first, then every event after `resume` (a `node_seq`), live ones as they come. A `boot`
/// other than this node's replays everything retained (`"reset": true`).
pub fn node_stream(
    node: &Arc<Node>,
    resume: Option<u64>,
    boot: Option<u64>,
) -> impl Stream<Item = Frame> + Send + 'static {
    let reset = boot.is_some_and(|b| b != node.boot_id);
    let resume = if reset { Some(0) } else { resume };
    let sub = node.node_log.subscribe(resume);
    let hello = json!({
        "type": "node_hello",
        "node_id": node.options.node_id,
        "boot": node.boot_id,
        "node_seq": node.node_log.last_seq(),
        "reset": reset,
    });
    // The retained entries are read from the ring one at a time as the client takes them
    // (`Subscription::next`), never copied per connection.
    let first = vec![Frame::event(None, hello)];
    follow(node, first, sub, None, node_frames)
}

/// Query of the node-wide stream; both are numbers, read by hand so that a bad value is a
/// JSON `400` naming the parameter.
#[derive(Debug, Deserialize)]
pub struct NodeQuery {
    from: Option<String>,
    boot: Option<String>,
}
