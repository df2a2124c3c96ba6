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
        Self {
            ws_id: ws_id.to_owned(),
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
            ..Self::default()
        }
    }
}

impl OutputWarningEvent {
    /// The MQ form of an output warning: lists become JSON strings, `redacted`
    /// becomes 0/1, `output_length` is dropped (cluster spec §1.3, §3.6).
    pub fn from_warning(ws_id: &str, w: &OutputWarning) -> Self {
        Self {
            ws_id: ws_id.to_owned(),
            call_id: w.call_id.clone(),
            func_name: w.func_name.clone(),
            risk_level: w.risk_level.clone(),
            flags: json_list(&w.flags),
            annotations: json_list(&w.annotations),
            redacted: u64::from(w.redacted),
            ..Self::default()
        }
    }
}

impl StatusEvent {
    /// The MQ form of a `status` event (cluster spec §3.6).
    pub fn from_status(ws_id: &str, s: &Status) -> Self {
        Self {
            ws_id: ws_id.to_owned(),
            prompt_tokens: s.prompt_tokens,
            completion_tokens: s.completion_tokens,
            total_tokens: s.total_tokens,
            context_window: s.context_window,
            pct: s.pct,
            effort: s.effort.clone(),
            cache_creation_tokens: s.cache_creation_tokens,
            cache_read_tokens: s.cache_read_tokens,
            tool_calls_this_turn: s.tool_calls_this_turn,
            turn_count: s.turn_count,
            ..Self::default()
        }
    }
}

impl ClusterStateEvent {
    /// The cluster-channel form of a global `ws_state` (cluster spec §3.8).
    pub fn from_ws_state(node_id: &str, s: &WsState) -> Self {
        Self {
            ws_id: s.ws_id.clone(),
            state: s.state.as_str().to_owned(),
            node_id: node_id.to_owned(),
            tokens: s.tokens,
            context_ratio: s.context_ratio,
            activity: s.activity.clone(),
            activity_state: s.activity_state.clone(),
            ..Self::default()
        }
    }
}

impl StateChangeEvent {
    /// The ws/global-channel form of a global `ws_state` (cluster spec §3.8).
    pub fn from_ws_state(s: &WsState) -> Self {
        Self {
            ws_id: s.ws_id.clone(),
            state: s.state.as_str().to_owned(),
            ..Self::default()
        }
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
        let ws = ws_id.to_owned();
        let out: Self = match event {
            WsEvent::Content(t) => ContentEvent {
                ws_id: ws,
                text: t.text.clone(),
                ..ContentEvent::default()
            }
            .into(),
            WsEvent::Reasoning(t) => ReasoningEvent {
                ws_id: ws,
                text: t.text.clone(),
                ..ReasoningEvent::default()
            }
            .into(),
            WsEvent::ToolInfo(t) => ToolInfoEvent {
                ws_id: ws,
                items: t.items.clone(),
                ..ToolInfoEvent::default()
            }
            .into(),
            WsEvent::ToolOutputChunk(c) => ToolOutputChunkEvent {
                ws_id: ws,
                call_id: c.call_id.clone(),
                chunk: c.chunk.clone(),
                ..ToolOutputChunkEvent::default()
            }
            .into(),
            WsEvent::ToolResult(r) => ToolResultEvent {
                ws_id: ws,
                call_id: r.call_id.clone(),
                name: r.name.clone(),
                output: r.output.clone(),
                ..ToolResultEvent::default()
            }
            .into(),
            WsEvent::Status(s) => StatusEvent::from_status(ws_id, s).into(),
            WsEvent::Error(n) => ErrorEvent {
                ws_id: ws,
                message: n.message.clone(),
                ..ErrorEvent::default()
            }
            .into(),
            WsEvent::Info(n) => InfoEvent {
                ws_id: ws,
                message: n.message.clone(),
                ..InfoEvent::default()
            }
            .into(),
            WsEvent::IntentVerdict(v) => IntentVerdictEvent::from_verdict(ws_id, v).into(),
            WsEvent::OutputWarning(w) => OutputWarningEvent::from_warning(ws_id, w).into(),
            WsEvent::StreamEnd => StreamEndEvent {
                ws_id: ws,
                ..StreamEndEvent::default()
            }
            .into(),
            WsEvent::TurnComplete(t) => TurnCompleteEvent {
                ws_id: ws,
                correlation_id: t.correlation_id.clone(),
                content: t.content.clone(),
                ..TurnCompleteEvent::default()
            }
            .into(),
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
