//! Pure conversions from node SSE payloads to MQ events, as the bridge
//! republishes them (cluster spec §3.6, §3.8). Only the shape changes here;
//! routing, approvals and dedup are the bridge's business.

use super::outbound::*;
use crate::event::Event;
use crate::sse::{OutputWarning, Status, Verdict, WsEvent, WsState};

fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".to_owned())
}

impl IntentVerdictEvent {
    /// The MQ form of an LLM verdict: `evidence` becomes a JSON string,
    /// `func_args` and unknown keys are dropped (cluster spec §1.3, §3.6).
    pub fn from_verdict(ws_id: &str, v: &Verdict) -> Self {
        Self::new(
            ws_id,
            IntentVerdictBody {
                call_id: v.call_id.clone(),
                func_name: v.func_name.clone(),
                intent_summary: v.intent_summary.clone(),
                risk_level: v.risk_level.clone(),
                recommendation: v.recommendation.clone(),
                reasoning: v.reasoning.clone(),
                tier: v.tier.clone(),
                judge_model: v.judge_model.clone(),
                verdict_id: v.verdict_id.clone(),
                confidence: v.confidence,
                evidence: json_list(&v.evidence),
                latency_ms: v.latency_ms,
            },
        )
    }
}

impl OutputWarningEvent {
    /// The MQ form of an output warning: lists become JSON strings, `redacted`
    /// becomes 0/1, `output_length` is dropped (cluster spec §1.3, §3.6).
    pub fn from_warning(ws_id: &str, w: &OutputWarning) -> Self {
        Self::new(
            ws_id,
            OutputWarningBody {
                call_id: w.call_id.clone(),
                func_name: w.func_name.clone(),
                risk_level: w.risk_level.clone(),
                flags: json_list(&w.flags),
                annotations: json_list(&w.annotations),
                redacted: u64::from(w.redacted),
            },
        )
    }
}

impl StatusEvent {
    /// The MQ form of a `status` event (cluster spec §3.6): the same body.
    pub fn from_status(ws_id: &str, s: &Status) -> Self {
        Self::new(ws_id, s.clone())
    }
}

impl ClusterStateEvent {
    /// The cluster-channel form of a global `ws_state` (cluster spec §3.8).
    pub fn from_ws_state(node_id: &str, s: &WsState) -> Self {
        Self::new(
            s.ws_id.clone(),
            ClusterStateBody {
                state: s.state.as_str().to_owned(),
                node_id: node_id.to_owned(),
                tokens: s.tokens,
                context_ratio: s.context_ratio,
                activity: s.activity.clone(),
                activity_state: s.activity_state.clone(),
            },
        )
    }
}

impl StateChangeEvent {
    /// The ws/global-channel form of a global `ws_state` (cluster spec §3.8).
    pub fn from_ws_state(s: &WsState) -> Self {
        Self::new(
            s.ws_id.clone(),
            StateChangeBody {
                state: s.state.as_str().to_owned(),
            },
        )
    }
}

impl OutboundEvent {
    /// The event a bridge publishes on `{p}:events:{ws_id}` for an engine event: the MQ
    /// form of its SSE view ([`Event::to_ws_event`], then [`Self::from_ws_event`]); `None`
    /// where the table of cluster spec §3.6 publishes nothing (or the approval logic does).
    pub fn from_event(ws_id: &str, event: &Event) -> Option<Self> {
        Self::from_ws_event(ws_id, &event.to_ws_event(ws_id)?)
    }

    /// The event a bridge publishes on `{p}:events:{ws_id}` for a per-ws node
    /// event, per the table of cluster spec §3.6; `None` for the events it
    /// ignores there (`connected`, `history`, `thinking_*`, `state_change`,
    /// `approval_resolved`, `busy_error`, `cancelled`, `clear_ui`, `ws_state`,
    /// unknown types) and for `approve_request` / `plan_review`, which go
    /// through the approval logic (§3.7) to get a `request_id`.
    /// Our `turn_complete` maps to the MQ `turn_complete`.
    pub fn from_ws_event(ws_id: &str, event: &WsEvent) -> Option<Self> {
        let out: Self = match event {
            WsEvent::Content(t) => Self::Content(Outbound::new(ws_id, t.clone())),
            WsEvent::Reasoning(t) => Self::Reasoning(Outbound::new(ws_id, t.clone())),
            WsEvent::ToolInfo(t) => Self::ToolInfo(Outbound::new(ws_id, t.clone())),
            WsEvent::ToolOutputChunk(c) => Self::ToolOutputChunk(Outbound::new(ws_id, c.clone())),
            WsEvent::ToolResult(r) => Self::ToolResult(Outbound::new(
                ws_id,
                ToolResultBody {
                    call_id: r.call_id.clone(),
                    name: r.name.clone(),
                    output: r.output.clone(),
                },
            )),
            WsEvent::Status(s) => StatusEvent::from_status(ws_id, s).into(),
            WsEvent::Error(n) => Self::Error(Outbound::new(ws_id, n.clone())),
            WsEvent::Info(n) => Self::Info(Outbound::new(ws_id, n.clone())),
            WsEvent::IntentVerdict(v) => IntentVerdictEvent::from_verdict(ws_id, v).into(),
            WsEvent::OutputWarning(w) => OutputWarningEvent::from_warning(ws_id, w).into(),
            WsEvent::StreamEnd => Self::StreamEnd(Outbound::new(ws_id, EmptyBody {})),
            WsEvent::TurnComplete(t) => Self::TurnComplete(Outbound {
                correlation_id: t.correlation_id.clone(),
                ..Outbound::new(
                    ws_id,
                    TurnCompleteBody {
                        content: t.content.clone(),
                        receipts: t.receipts.clone(),
                    },
                )
            }),
            WsEvent::Connected(_)
            | WsEvent::History(_)
            | WsEvent::StateChange(_)
            | WsEvent::ApproveRequest(_)
            | WsEvent::ApprovalResolved(_)
            | WsEvent::PlanReview(_)
            | WsEvent::PlanResolved(_)
            | WsEvent::Preview(_)
            | WsEvent::BusyError(_)
            | WsEvent::WsState(_)
            | WsEvent::ThinkingStart
            | WsEvent::ThinkingStop
            | WsEvent::ClearUi
            | WsEvent::Cancelled
            | WsEvent::Unknown(_) => return None,
        };
        Some(out)
    }
}
