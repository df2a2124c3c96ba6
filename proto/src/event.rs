//! What a workstream tells its frontends: the events the engine emits, declared once.
//!
//! [`Event`] is the producer's side of the per-workstream stream (node spec §2.2): the
//! engine builds these values, the node serialises them as they are (`type` tag plus
//! fields) onto `/v1/api/events?ws_id=` and, with `ws_id`/`ws_seq`/`node_seq` added
//! ([`NodeStreamEntry`]), onto the node-wide stream `/v1/api/events/node` the bridge
//! follows. The nested bodies are the [`crate::sse`] types ([`ToolItem`], [`Status`],
//! [`WorkstreamState`]), so an item or a status is declared in exactly one place.
//!
//! The consumer views derive from it, and the compiler keeps them in step:
//! [`Event::to_ws_event`] maps every variant to the tolerant SSE view
//! [`crate::sse::WsEvent`] (an exhaustive `match`: a new variant does not compile until it is
//! mapped), and [`crate::mq::OutboundEvent::from_event`] maps it on to the MQ event the bridge
//! publishes (cluster spec §3.6). One engine-internal variant, [`Event::Activity`], never
//! reaches the per-workstream stream (the node turns it into the global `ws_activity`).
//!
//! ```
//! use turnstone_proto::event::Event;
//! use turnstone_proto::sse::{Text, WsEvent};
//!
//! let ev = Event::Content { text: "Hi".into() };
//! assert_eq!(serde_json::to_string(&ev).unwrap(), r#"{"type":"content","text":"Hi"}"#);
//! assert_eq!(ev.to_ws_event("ws"), Some(WsEvent::Content(Text { text: "Hi".into() })));
//! ```

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::sse::{self, WsEvent};

pub use crate::sse::{Status, ToolItem, WorkstreamState};

/// The engine's name for a workstream's state; the wire type of `state_change` and
/// `ws_state` (`closed` is only ever stored, never emitted).
pub type WsState = WorkstreamState;

/// The engine's name for the `status` body.
pub type StatusInfo = Status;

impl WorkstreamState {
    /// A compact code for an atomic (`Idle` = 0); the inverse of [`Self::from_u8`].
    pub fn to_u8(self) -> u8 {
        self as u8
    }

    /// The state of a [`Self::to_u8`] code; unknown codes read as `Idle`.
    pub fn from_u8(v: u8) -> Self {
        Self::ALL.get(usize::from(v)).copied().unwrap_or_default()
    }
}

/// How a plan review was decided (`plan_resolved.decision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanDecision {
    /// Empty feedback: the plan stands.
    Accept,
    /// `n`, `no` or `reject` (any case), a cancel or the timeout.
    Reject,
    /// Any other feedback: the planner runs again with it.
    Refine,
}

impl PlanDecision {
    /// The wire name (`accept`, `reject`, `refine`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Reject => "reject",
            Self::Refine => "refine",
        }
    }

    /// What a reply means: `""` accepts, `n`/`no`/`reject` (any case, surrounding blanks
    /// ignored) rejects, anything else refines.
    pub fn classify(feedback: &str) -> Self {
        let reply = feedback.trim();
        if reply.is_empty() {
            Self::Accept
        } else if ["n", "no", "reject"]
            .iter()
            .any(|w| reply.eq_ignore_ascii_case(w))
        {
            Self::Reject
        } else {
            Self::Refine
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A workstream event, as the engine emits it and the node serialises it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    StateChange {
        state: WsState,
    },
    ThinkingStart,
    ThinkingStop,
    Reasoning {
        text: String,
    },
    Content {
        text: String,
    },
    StreamEnd,
    ToolInfo {
        items: Vec<ToolItem>,
    },
    /// `request_id` (ours, additive) names the approval; the bridge answers it on
    /// `{p}:resp:{request_id}`.
    ///
    /// `cycle_id` (ours, additive) names the round: several rounds may be pending on one
    /// workstream (parallel sub-agents asking through it).
    ApproveRequest {
        request_id: String,
        items: Vec<ToolItem>,
        judge_pending: bool,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        cycle_id: String,
    },
    /// `cycle_id`: the round resolved.
    ApprovalResolved {
        approved: bool,
        feedback: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        cycle_id: String,
    },
    ToolOutputChunk {
        call_id: String,
        chunk: String,
    },
    /// `is_error` is present (and true) only for errors.
    ToolResult {
        call_id: String,
        name: String,
        output: String,
        #[serde(default, skip_serializing_if = "is_false")]
        is_error: bool,
    },
    Status(StatusInfo),
    /// The output guard flagged a tool result (node spec §2.2): emitted after the call's
    /// `tool_output_chunk`s and before its `tool_result` (which carries the redacted text
    /// when redaction is on).
    OutputWarning(sse::OutputWarning),
    /// An LLM-tier judge verdict on one gated call (node spec §2.2 "Verdict object", spread
    /// at the top level next to `type`): emitted while its `approve_request` is pending, and
    /// also when it arrives after the decision (a late verdict is still forwarded).
    IntentVerdict(Box<sse::Verdict>),
    Info {
        message: String,
    },
    Error {
        message: String,
    },
    BusyError {
        message: String,
    },
    ClearUi,
    Cancelled,
    /// Emitted with the transition to idle (or error) that ends a turn: the correlation id
    /// of the send that started it and the turn's full visible text.
    TurnComplete {
        correlation_id: String,
        content: String,
        state: WsState,
        /// The effect receipts of the turn's interrupted tool batches (our extension;
        /// absent when empty, see [`crate::receipt`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        receipts: Vec<crate::receipt::Receipt>,
    },
    /// Activity line for dashboards (`ws_activity` on the node's global stream). Engine
    /// internal: never on the per-workstream stream.
    Activity {
        activity: String,
        activity_state: String,
    },
    /// A `plan_agent` plan awaiting the user's review (`/v1/api/plan`); the turn waits.
    /// `request_id` (ours, additive) names the review, as in `approve_request`.
    PlanReview {
        request_id: String,
        content: String,
    },
    /// How a plan review was decided (ours, additive): `decision` is `accept`, `reject` or
    /// `refine`; `feedback` the reply (or the cancel/timeout reason); `decided_by` `user`,
    /// `cancel` or `timeout`.
    PlanResolved {
        request_id: String,
        decision: PlanDecision,
        feedback: String,
        decided_by: String,
    },
    /// Content `open_preview` stored for the frontends' preview pane (ours, additive): its
    /// id, kind (`web`, `pdf`, `image`, `table`, `text`, `markdown`), title and the URL
    /// that serves it.
    Preview {
        preview_id: String,
        kind: String,
        title: String,
        url: String,
    },
}

impl Event {
    /// The wire `type` name.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::StateChange { .. } => "state_change",
            Self::ThinkingStart => "thinking_start",
            Self::ThinkingStop => "thinking_stop",
            Self::Reasoning { .. } => "reasoning",
            Self::Content { .. } => "content",
            Self::StreamEnd => "stream_end",
            Self::ToolInfo { .. } => "tool_info",
            Self::ApproveRequest { .. } => "approve_request",
            Self::ApprovalResolved { .. } => "approval_resolved",
            Self::ToolOutputChunk { .. } => "tool_output_chunk",
            Self::ToolResult { .. } => "tool_result",
            Self::Status(_) => "status",
            Self::OutputWarning(_) => "output_warning",
            Self::IntentVerdict(_) => "intent_verdict",
            Self::Info { .. } => "info",
            Self::Error { .. } => "error",
            Self::BusyError { .. } => "busy_error",
            Self::ClearUi => "clear_ui",
            Self::Cancelled => "cancelled",
            Self::TurnComplete { .. } => "turn_complete",
            Self::Activity { .. } => "activity",
            Self::Preview { .. } => "preview",
            Self::PlanReview { .. } => "plan_review",
            Self::PlanResolved { .. } => "plan_resolved",
        }
    }

    /// An `info` event.
    pub fn info(message: impl Into<String>) -> Self {
        Self::Info {
            message: message.into(),
        }
    }

    /// An `error` event.
    pub fn error(message: impl Into<String>) -> Self {
        Self::Error {
            message: message.into(),
        }
    }

    /// Whether the per-workstream stream carries this event (everything but the
    /// engine-internal [`Event::Activity`]).
    pub fn per_ws_visible(&self) -> bool {
        !matches!(self, Self::Activity { .. })
    }

    /// The tolerant SSE view of this event as a client decodes it (`None` for the
    /// engine-internal [`Event::Activity`]); `ws_id` fills `turn_complete.ws_id`.
    /// Decoding the serialised event gives the same value (the e2e `wire_contract` test
    /// checks it on real turns); this `match` is what keeps the two declarations in step.
    pub fn to_ws_event(&self, ws_id: &str) -> Option<WsEvent> {
        let text = |t: &String| sse::Text { text: t.clone() };
        let notice = |m: &String| sse::Notice { message: m.clone() };
        Some(match self {
            Self::StateChange { state } => WsEvent::StateChange(sse::StateChange { state: *state }),
            Self::ThinkingStart => WsEvent::ThinkingStart,
            Self::ThinkingStop => WsEvent::ThinkingStop,
            Self::Reasoning { text: t } => WsEvent::Reasoning(text(t)),
            Self::Content { text: t } => WsEvent::Content(text(t)),
            Self::StreamEnd => WsEvent::StreamEnd,
            Self::ToolInfo { items } => WsEvent::ToolInfo(sse::ToolInfo {
                items: items.clone(),
            }),
            Self::ApproveRequest {
                request_id,
                items,
                judge_pending,
                cycle_id,
            } => WsEvent::ApproveRequest(sse::ApproveRequest {
                request_id: request_id.clone(),
                items: items.clone(),
                judge_pending: *judge_pending,
                cycle_id: cycle_id.clone(),
            }),
            Self::ApprovalResolved {
                approved,
                feedback,
                cycle_id,
            } => WsEvent::ApprovalResolved(sse::ApprovalResolved {
                approved: *approved,
                feedback: feedback.clone(),
                cycle_id: cycle_id.clone(),
            }),
            Self::ToolOutputChunk { call_id, chunk } => {
                WsEvent::ToolOutputChunk(sse::ToolOutputChunk {
                    call_id: call_id.clone(),
                    chunk: chunk.clone(),
                })
            }
            Self::ToolResult {
                call_id,
                name,
                output,
                is_error,
            } => WsEvent::ToolResult(sse::ToolResult {
                call_id: call_id.clone(),
                name: name.clone(),
                output: output.clone(),
                is_error: *is_error,
            }),
            Self::Status(s) => WsEvent::Status(s.clone()),
            Self::OutputWarning(w) => WsEvent::OutputWarning(w.clone()),
            Self::IntentVerdict(v) => WsEvent::IntentVerdict(v.clone()),
            Self::Info { message } => WsEvent::Info(notice(message)),
            Self::Error { message } => WsEvent::Error(notice(message)),
            Self::BusyError { message } => WsEvent::BusyError(notice(message)),
            Self::ClearUi => WsEvent::ClearUi,
            Self::Cancelled => WsEvent::Cancelled,
            Self::TurnComplete {
                correlation_id,
                content,
                state: _,
                receipts,
            } => WsEvent::TurnComplete(sse::TurnComplete {
                ws_id: ws_id.to_owned(),
                correlation_id: correlation_id.clone(),
                content: content.clone(),
                receipts: receipts.clone(),
            }),
            Self::Activity { .. } => return None,
            Self::PlanReview {
                request_id,
                content,
            } => WsEvent::PlanReview(sse::PlanReview {
                request_id: request_id.clone(),
                content: content.clone(),
            }),
            Self::PlanResolved {
                request_id,
                decision,
                feedback,
                decided_by,
            } => WsEvent::PlanResolved(sse::PlanResolved {
                request_id: request_id.clone(),
                decision: decision.as_str().to_owned(),
                feedback: feedback.clone(),
                decided_by: decided_by.clone(),
            }),
            Self::Preview {
                preview_id,
                kind,
                title,
                url,
            } => WsEvent::Preview(sse::Preview {
                preview_id: preview_id.clone(),
                kind: kind.clone(),
                title: title.clone(),
                url: url.clone(),
            }),
        })
    }
}

/// An event with its position: `seq` is monotonic per workstream, starting at 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub seq: u64,
    pub ws_id: Arc<str>,
    #[serde(flatten)]
    pub event: Event,
}

/// A workstream event on the node-wide stream: the event's own keys, then `ws_id` and its
/// per-workstream `seq` as `ws_seq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeWsEvent<'a> {
    #[serde(flatten)]
    pub event: Cow<'a, Event>,
    pub ws_id: Cow<'a, str>,
    /// `0` when a frame leaves it out.
    #[serde(default)]
    pub ws_seq: u64,
}

/// A node-level notice about a workstream that no workstream log carries. The bodies are
/// the global stream's ([`sse::WsClosed`], [`sse::WsRename`]) plus our `ws_created`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NodeNotice {
    /// Closed, evicted or idle-cleaned (`reason`); `name` only with `evicted`.
    WsClosed(sse::WsClosed),
    /// A workstream got a (new) name.
    WsRename(sse::WsRename),
    /// A workstream came to life (created or resumed); only on the node-wide stream.
    WsCreated(sse::WsCreated),
}

impl NodeNotice {
    /// The workstream concerned.
    pub fn ws_id(&self) -> &str {
        match self {
            Self::WsClosed(n) => &n.ws_id,
            Self::WsRename(n) => &n.ws_id,
            Self::WsCreated(n) => &n.ws_id,
        }
    }
}

/// What one entry of the node-wide stream carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NodeStreamBody<'a> {
    Ws(NodeWsEvent<'a>),
    Notice(Cow<'a, NodeNotice>),
}

/// One entry of the node-wide ordered stream `/v1/api/events/node` (ours; SSE `id` =
/// `node_seq`): the body's keys, then `node_seq`. The node encodes it from borrowed parts
/// (one serialisation per event); the bridge decodes it into owned ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStreamEntry<'a> {
    #[serde(flatten)]
    pub body: NodeStreamBody<'a>,
    /// `0` when a frame leaves it out (the SSE `id` carries it too).
    #[serde(default)]
    pub node_seq: u64,
}

impl NodeStreamEntry<'_> {
    /// The JSON text of this entry.
    pub fn encode(&self) -> String {
        // Cannot fail: every key is a string and no Serialize impl here errors.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Decodes one `data:` payload of the node-wide stream (`None` for other frames:
    /// `node_hello`, `events_truncated`, or a type this crate does not know).
    pub fn decode(data: &str) -> Option<NodeStreamEntry<'static>> {
        serde_json::from_str(data).ok()
    }

    /// The workstream concerned.
    pub fn ws_id(&self) -> &str {
        match &self.body {
            NodeStreamBody::Ws(e) => &e.ws_id,
            NodeStreamBody::Notice(n) => n.ws_id(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_variant() -> Vec<Event> {
        let item = ToolItem {
            call_id: "call_1".into(),
            header: "\u{2699} bash: ls".into(),
            preview: "ls".into(),
            func_name: "bash".into(),
            approval_label: "bash".into(),
            needs_approval: true,
            error: None,
            ..ToolItem::default()
        };
        let s = |v: &str| v.to_owned();
        vec![
            Event::StateChange {
                state: WsState::Thinking,
            },
            Event::ThinkingStart,
            Event::ThinkingStop,
            Event::Reasoning { text: s("r") },
            Event::Content { text: s("c") },
            Event::StreamEnd,
            Event::ToolInfo {
                items: vec![item.clone()],
            },
            Event::ApproveRequest {
                request_id: s("0123456789ab"),
                items: vec![item],
                judge_pending: false,
                cycle_id: s("c0ffee0123456789"),
            },
            Event::ApprovalResolved {
                approved: true,
                feedback: s(""),
                cycle_id: s("c0ffee0123456789"),
            },
            Event::ToolOutputChunk {
                call_id: s("call_1"),
                chunk: s("x\n"),
            },
            Event::ToolResult {
                call_id: s("call_1"),
                name: s("bash"),
                output: s("x"),
                is_error: false,
            },
            Event::ToolResult {
                call_id: s("call_2"),
                name: s("bash"),
                output: s("boom"),
                is_error: true,
            },
            Event::Status(Status {
                prompt_tokens: 3,
                total_tokens: 3,
                pct: 0.1,
                effort: s("medium"),
                ..Status::default()
            }),
            Event::OutputWarning(sse::OutputWarning {
                call_id: s("call_1"),
                flags: vec![s("credential_leak")],
                risk_level: s("high"),
                annotations: vec![s("Detected: github_token.")],
                func_name: s("bash"),
                output_length: 40,
                redacted: true,
            }),
            Event::IntentVerdict(Box::new(sse::Verdict {
                verdict_id: s("0123456789abcdef0123456789abcdef"),
                call_id: s("call_1"),
                func_name: s("bash"),
                func_args: s(r#"{"command":"ls"}"#),
                intent_summary: s("lists files"),
                risk_level: s("low"),
                confidence: 0.9,
                recommendation: s("approve"),
                reasoning: s("read-only"),
                evidence: vec![s("ls")],
                tier: s("llm"),
                judge_model: s("judge-model"),
                latency_ms: 12,
                extra: serde_json::Map::new(),
            })),
            Event::info("i"),
            Event::error("e"),
            Event::BusyError { message: s("b") },
            Event::ClearUi,
            Event::Cancelled,
            Event::TurnComplete {
                correlation_id: s("cid"),
                content: s("done"),
                state: WsState::Idle,
                receipts: Vec::new(),
            },
            Event::TurnComplete {
                correlation_id: s("cid2"),
                content: s(""),
                state: WsState::Idle,
                receipts: vec![crate::receipt::Receipt {
                    call_id: s("call_1"),
                    func_name: s("bash"),
                    status: crate::receipt::EffectStatus::Partial,
                }],
            },
            Event::Activity {
                activity: s("bash"),
                activity_state: s("tool"),
            },
            Event::PlanReview {
                request_id: s("r1"),
                content: s("plan"),
            },
            Event::PlanResolved {
                request_id: s("r1"),
                decision: PlanDecision::Refine,
                feedback: s("more"),
                decided_by: s("user"),
            },
            Event::Preview {
                preview_id: s("p"),
                kind: s("web"),
                title: s("t"),
                url: s("/u"),
            },
        ]
    }

    #[test]
    fn the_sse_view_is_what_a_client_decodes() {
        for event in every_variant() {
            let json = serde_json::to_string(&event).unwrap();
            assert!(json.starts_with(&format!(r#"{{"type":"{}""#, event.type_name())));
            let back: Event = serde_json::from_str(&json).unwrap();
            assert_eq!(back, event, "{json}");
            match event.to_ws_event("ws") {
                None => assert!(!event.per_ws_visible()),
                Some(view) => {
                    let mut decoded = WsEvent::decode(json.as_bytes()).unwrap();
                    if let WsEvent::TurnComplete(t) = &mut decoded {
                        // Its `ws_id` travels beside the event (envelope, node stream).
                        t.ws_id = "ws".into();
                    }
                    assert_eq!(decoded, view, "{json}");
                }
            }
        }
    }

    #[test]
    fn node_stream_entries_round_trip_with_the_original_key_order() {
        let event = Event::Content { text: "hi".into() };
        let entry = NodeStreamEntry {
            body: NodeStreamBody::Ws(NodeWsEvent {
                event: Cow::Borrowed(&event),
                ws_id: Cow::Borrowed("w1"),
                ws_seq: 4,
            }),
            node_seq: 9,
        };
        let json = entry.encode();
        assert_eq!(
            json,
            r#"{"type":"content","text":"hi","ws_id":"w1","ws_seq":4,"node_seq":9}"#
        );
        assert_eq!(NodeStreamEntry::decode(&json).unwrap(), entry);

        let closed = NodeStreamEntry {
            body: NodeStreamBody::Notice(Cow::Owned(NodeNotice::WsClosed(sse::WsClosed {
                ws_id: "w1".into(),
                reason: Some("evicted".into()),
                name: Some("n".into()),
            }))),
            node_seq: 10,
        };
        let json = closed.encode();
        assert_eq!(
            json,
            r#"{"type":"ws_closed","ws_id":"w1","reason":"evicted","name":"n","node_seq":10}"#
        );
        let back = NodeStreamEntry::decode(&json).unwrap();
        assert_eq!(back, closed);
        assert_eq!(back.ws_id(), "w1");
        assert!(NodeStreamEntry::decode(r#"{"type":"node_hello","boot":1}"#).is_none());
    }

    #[test]
    fn state_codes_round_trip() {
        for s in WorkstreamState::ALL {
            assert_eq!(WorkstreamState::from_u8(s.to_u8()), s);
        }
        assert_eq!(WorkstreamState::from_u8(200), WorkstreamState::Idle);
    }
}
