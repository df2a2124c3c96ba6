//! Routes that drive a turn: send (idempotent), approve (decided once), cancel, command,
//! plan.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};
use turnstone_engine::{ApproveOutcome, PlanOutcome, RoundRef, SendOutcome};
use turnstone_proto::api::{
    ApproveBody, CancelBody, CancelReply, CommandBody, PlanBody, SendBody, StatusReply,
};
use turnstone_runtime::auth::Identity;

use super::body::WireJson;
use super::error::ApiError;
use super::state::Node;
use crate::send_queue::{self, SendOptions, SendRequest, Submitted};

/// `POST /v1/api/send`. A `correlation_id` in the body (or an `Idempotency-Key` header)
/// makes it idempotent: a repeat within the window returns the first result and starts
/// nothing. While the workstream is busy (or others wait) the send is refused `busy`, as
/// the original, unless it says `"queue": true`: then it waits in the workstream's queue
/// (`{"status":"queued","position":n}`) and becomes its own turn (`crate::send_queue`).
pub async fn send(
    State(node): State<Arc<Node>>,
    identity: Option<Extension<Identity>>,
    headers: HeaderMap,
    WireJson(body): WireJson<SendBody>,
) -> Result<Response, ApiError> {
    let key = super::state::idempotency_key(Some(&body.correlation_id), &headers)?;
    let submitted = submit_send(&node, identity.as_deref(), key, body).await?;
    let mut response = Json(submitted.body()).into_response();
    if matches!(submitted, Submitted::Replayed { .. }) {
        response.headers_mut().insert(
            "idempotent-replayed",
            axum::http::HeaderValue::from_static("true"),
        );
    }
    Ok(response)
}

/// The send of `POST /v1/api/send` and of gRPC `Send`/`SendAndWait`: checks, then the
/// workstream's queue (`send_queue::submit`). `key` is the idempotency key, if any. A closed
/// workstream is `404 Unknown workstream`.
pub async fn submit_send(
    node: &Arc<Node>,
    identity: Option<&Identity>,
    key: Option<String>,
    body: SendBody,
) -> Result<Submitted, ApiError> {
    super::auth::check_approvals_off(
        identity,
        body.auto_approve == Some(true),
        &body.auto_approve_tools,
    )?;
    let message = body.message.trim();
    if message.is_empty() {
        return Err(ApiError::BadRequest("Empty message".into()));
    }
    let ws = node.resolve(&body.ws_id).await?;
    let request = SendRequest {
        message: message.to_string(),
        key,
        options: SendOptions {
            auto_approve: body.auto_approve,
            auto_approve_tools: body.auto_approve_tools,
            traceparent: turnstone_runtime::trace_context::current_traceparent(),
        },
        queue: body.queue,
    };
    let submitted = send_queue::submit(node, &ws, request).await?;
    if submitted == Submitted::Closed {
        return Err(ApiError::unknown_workstream());
    }
    Ok(submitted)
}

/// `POST /v1/api/approve`. Several approval rounds may be pending on one workstream (one
/// per sub-agent asking through it); the body names the round by `cycle_id`, `request_id`
/// or a member `call_id` (the first given), or names none (the original's clients): the
/// oldest pending round. The first decision of a round wins; a later one is `409` with the
/// recorded verdict, an id naming no round of the workstream `404 Unknown approval`. With
/// no id and nothing ever decided it is `200 {"status":"ok"}`, as the original.
pub async fn approve(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<ApproveBody>,
) -> Result<Json<StatusReply>, ApiError> {
    let which = RoundRef::from_ids(&body.cycle_id, &body.request_id, &body.call_id);
    let ws = match node.resolve(&body.ws_id).await {
        Ok(ws) => ws,
        // Gone from this node since (closed, released to another node): a request it
        // decided, or that ended undecided, is still answered from its durable record.
        Err(e) => return Err(decided_elsewhere(&node, which).await.unwrap_or(e)),
    };
    match ws.approve_round(which, body.approved, body.feedback.clone(), body.always) {
        ApproveOutcome::Resolved(_) | ApproveOutcome::NotPending(None) => {
            Ok(Json(StatusReply::default()))
        }
        ApproveOutcome::NotPending(Some(v)) => Err(ApiError::Conflict {
            message: "Approval already decided".into(),
            detail: json!({"verdict": {
                "request_id": v.request_id,
                "cycle_id": v.cycle_id,
                "approved": v.approved,
                "feedback": v.feedback,
                "decided_by": v.decided_by,
            }}),
        }),
        ApproveOutcome::Unknown => {
            // A request decided longer ago (or before a restart): its durable record.
            Err(decided_elsewhere(&node, which)
                .await
                .unwrap_or_else(|| ApiError::NotFound("Unknown approval".into())))
        }
    }
}

/// `409` with the recorded verdict when `which` names a request by id whose durable record
/// is no longer pending; `None` otherwise.
async fn decided_elsewhere(node: &Node, which: RoundRef<'_>) -> Option<ApiError> {
    let RoundRef::Request(request_id) = which else {
        return None;
    };
    let record = node.persistence.as_ref()?.approval(request_id).await?;
    (record.state != turnstone_store::ApprovalState::Pending).then(|| ApiError::Conflict {
        message: "Approval already decided".into(),
        detail: json!({"verdict": {
            "request_id": record.request_id,
            "approved": record.state == turnstone_store::ApprovalState::Approved,
            "feedback": record.feedback,
            "decided_by": record.decided_by,
            "state": record.state.as_str(),
        }}),
    })
}

/// `POST /v1/api/cancel`: stops the running turn only — the next queued message then
/// starts. With `"all": true` the workstream's queue is emptied first (`removed`: how many).
pub async fn cancel(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<CancelBody>,
) -> Result<Json<CancelReply>, ApiError> {
    let ws = node.resolve(&body.ws_id).await?;
    let mut reply = CancelReply::default();
    if body.all {
        reply.removed = Some(send_queue::clear(&node, ws.id()).await? as u64);
    }
    ws.cancel();
    Ok(Json(reply))
}

/// `POST /v1/api/plan` — answers the pending plan review (`""` accepts, `n`/`no`/`reject`
/// rejects, other text asks for a revised plan). Like `/approve`: the first reply wins and a
/// later one is `409` with the recorded verdict; with nothing ever decided it is
/// `200 {"status":"ok"}`. A `request_id` (the bridge sends the review's) naming a review
/// that is no longer pending is answered from the durable record.
pub async fn plan(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<PlanBody>,
) -> Result<Json<StatusReply>, ApiError> {
    let request_id = body.request_id.as_str();
    let ws = node.resolve(&body.ws_id).await?;
    let names_other = |env: Arc<turnstone_engine::Envelope>| !matches!(&env.event, turnstone_engine::Event::PlanReview { request_id: r, .. } if r == request_id);
    let names_decided = !request_id.is_empty() && ws.pending_plan_review().is_none_or(names_other);
    // A reply to an earlier round never answers the current one.
    if names_decided
        && let Some(v) = ws
            .last_plan_verdict()
            .filter(|v| v.request_id == request_id)
    {
        return Err(plan_conflict(&v));
    }
    if names_decided
        && let Some(p) = &node.persistence
        && let Some(record) = p.approval(request_id).await
        && record.state != turnstone_store::ApprovalState::Pending
    {
        return Err(ApiError::Conflict {
            message: "Plan review already decided".into(),
            detail: json!({"verdict": {
                "request_id": record.request_id,
                "decision": record.verdict,
                "feedback": record.feedback,
                "decided_by": record.decided_by,
                "state": record.state.as_str(),
            }}),
        });
    }
    match ws.plan_feedback(&body.feedback) {
        PlanOutcome::Resolved(_) | PlanOutcome::NotPending(None) => {
            Ok(Json(StatusReply::default()))
        }
        PlanOutcome::NotPending(Some(v)) => Err(plan_conflict(&v)),
    }
}

/// The `409` of a reply to a plan review that was decided already (`state` as the durable
/// record has it).
fn plan_conflict(v: &turnstone_engine::PlanVerdict) -> ApiError {
    ApiError::Conflict {
        message: "Plan review already decided".into(),
        detail: json!({"verdict": {
            "request_id": v.request_id,
            "decision": v.decision.as_str(),
            "feedback": v.feedback,
            "decided_by": v.decided_by,
            "state": match (v.decision, v.decided_by) {
                (turnstone_engine::PlanDecision::Accept, _) => "approved",
                (_, "timeout") => "timed_out",
                _ => "denied",
            },
        }}),
    }
}

/// Names `ws` (`/name <name>`, the `RenameWorkstream` RPC): announced on the node stream
/// (`ws_rename`), stored as its alias, confirmed by an `info` event.
pub fn rename(node: &Node, ws: &turnstone_engine::WorkstreamHandle, name: &str) {
    ws.set_name(name);
    node.announce_rename(ws.id(), name);
    ws.emit_info(format!("Workstream named: {name}"));
}

/// `POST /v1/api/command` — slash commands; output arrives as `info`/`error` events.
pub async fn command(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<CommandBody>,
) -> Result<Json<StatusReply>, ApiError> {
    let text = body.command.trim();
    if text.is_empty() {
        return Err(ApiError::BadRequest("Empty command".into()));
    }
    let ws = node.resolve(&body.ws_id).await?;
    let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let rest = rest.trim();
    match word {
        "/clear" | "/new" => {
            if ws.replace_history(Vec::new()) {
                ws.emit_info("Conversation cleared.");
            } else {
                ws.emit_error("Cannot clear while processing.");
                return Ok(Json(StatusReply::busy()));
            }
        }
        "/name" if !rest.is_empty() => rename(&node, &ws, rest),
        "/resume" if !rest.is_empty() => {
            let Some(p) = &node.persistence else {
                ws.emit_error("This node runs without persistence; nothing to resume.");
                return Ok(Json(StatusReply::default()));
            };
            match p.store.resume_session(rest).await {
                Ok(session) => {
                    let n = session.messages.len();
                    if ws.replace_history(session.messages) {
                        super::workstreams::restore_session_config(&ws, &session.raw_config, false)
                            .await;
                        ws.emit_info(format!(
                            "Resumed {} ({n} messages).",
                            session.workstream.ws_id
                        ));
                    } else {
                        ws.emit_error("Cannot resume while processing.");
                        return Ok(Json(StatusReply::busy()));
                    }
                }
                Err(e) => ws.emit_error(format!("Command error: {e}")),
            }
        }
        "/skill" => skill_command(&node, &ws, rest).await,
        "/plan" => plan_command(&node, &ws, rest).await,
        "/persona" => persona_command(&node, &ws, rest).await,
        "/mcp" => mcp_command(&node, &ws, rest).await,
        "/help" => ws.emit_info(
            "Commands: /clear, /new, /name <name>, /resume <alias|id>, /skill [name|clear], \
             /model [alias], /plan [on|off], /persona [name|clear], /compact, /mcp [refresh [server]], /help.",
        ),
        "/compact" => {
            if ws.compact() == SendOutcome::Busy {
                return Ok(Json(StatusReply::busy()));
            }
        }
        "/model" if rest.is_empty() => {
            let (model, alias) = ws.model();
            let current = describe_model(&model, &alias);
            let aliases = node.manager.engine().model_aliases();
            let available = if aliases.is_empty() {
                "No model aliases are configured.".to_string()
            } else {
                format!("Available: {}", aliases.join(", "))
            };
            ws.emit_info(format!("Model: {current}\n{available}"));
        }
        "/model" => match ws.select_model(rest).await {
            Ok((model, alias)) => ws.emit_info(format!(
                "Model switched to {}; it applies from the next turn.",
                describe_model(&model, &alias)
            )),
            Err(e) => ws.emit_error(e.to_string()),
        },
        other => ws.emit_info(format!(
            "Unknown command: {other}. Type /help for available commands."
        )),
    }
    Ok(Json(StatusReply::default()))
}

/// `/plan` says whether plan mode is on; `/plan on` and `/plan off` enter and leave it
/// (seed 004: only read-only tools and tool_search are offered and callable in it). The
/// change is persisted with the tool intent; output as `info` (plus a `status` carrying
/// `plan_mode`), failures as `error` events.
async fn plan_command(node: &Node, ws: &turnstone_engine::WorkstreamHandle, arg: &str) {
    let on = match arg.to_ascii_lowercase().as_str() {
        "" => {
            ws.emit_info(if ws.plan_mode() {
                "Plan mode is on (read-only tools only). Leave it with /plan off."
            } else {
                "Plan mode is off. Enter it with /plan on."
            });
            return;
        }
        "on" => true,
        "off" => false,
        other => {
            ws.emit_error(format!("Usage: /plan [on|off] (not '{other}')"));
            return;
        }
    };
    if ws.plan_mode() == on {
        ws.emit_info(if on {
            "Plan mode is already on."
        } else {
            "Plan mode is already off."
        });
        return;
    }
    let change = json!({ "plan": if on { json!(true) } else { Value::Null } });
    if let Err(e) = super::internal::change_tool_intent(node, ws, &change).await {
        ws.emit_error(format!("Command error: {}", e.message()));
    }
}

/// `/persona` names the workstream's persona and the configured ones; `/persona <name>`
/// selects one (a named tool-visibility set, from the next turn), `/persona clear` drops it.
/// Persisted with the tool intent; output as `info`, failures as `error` events.
async fn persona_command(node: &Node, ws: &turnstone_engine::WorkstreamHandle, arg: &str) {
    let configured: Vec<String> = node
        .manager
        .engine()
        .config()
        .toolset
        .personas
        .keys()
        .cloned()
        .collect();
    let configured_text = if configured.is_empty() {
        "none are configured ([tools.personas])".to_string()
    } else {
        configured.join(", ")
    };
    let change = match arg {
        "" => {
            match ws.tool_intent().persona {
                Some(name) => {
                    ws.emit_info(format!("Persona: {name}. Configured: {configured_text}."))
                }
                None => ws.emit_info(format!("No persona. Configured: {configured_text}.")),
            }
            return;
        }
        "clear" => json!({ "persona": Value::Null }),
        name => json!({ "persona": name }),
    };
    match super::internal::change_tool_intent(node, ws, &change).await {
        Ok(intent) => ws.emit_info(match intent.persona {
            Some(name) => format!("Persona set: {name}; it applies from the next turn."),
            None => "Persona cleared; it applies from the next turn.".to_string(),
        }),
        Err(e) => ws.emit_error(format!("Command error: {}", e.message())),
    }
}

/// `/skill` shows the active skill (and the enabled ones), `/skill clear` deactivates it,
/// `/skill <name>` activates an enabled skill. Output as `info`, failures as `error` events.
async fn skill_command(node: &Node, ws: &turnstone_engine::WorkstreamHandle, arg: &str) {
    use super::skills::{self, SkillError};
    match arg {
        "" => {
            let active = ws.skill().map(|s| s.name);
            let available = match &node.persistence {
                Some(p) => p
                    .store
                    .list_skills(true)
                    .await
                    .map(|all| all.into_iter().map(|s| s.spec.name).collect::<Vec<_>>())
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            let available = if available.is_empty() {
                "none".to_string()
            } else {
                available.join(", ")
            };
            match active {
                Some(name) => {
                    ws.emit_info(format!("Active skill: {name}. Available: {available}."))
                }
                None => ws.emit_info(format!("No active skill. Available: {available}.")),
            }
        }
        "clear" => match skills::clear(node, ws).await {
            Ok(Some(name)) => ws.emit_info(format!("Skill cleared: {name}.")),
            Ok(None) => ws.emit_info("No active skill."),
            Err(e) => ws.emit_error(format!("Command error: {e}")),
        },
        name => match skills::activate(node, ws, name).await {
            Ok(skill) => {
                let mut message = format!("Skill activated: {}.", skill.spec.name);
                if matches!(
                    skill.spec.scan_status.to_ascii_lowercase().as_str(),
                    "high" | "critical"
                ) {
                    message.push_str(&format!(
                        " Warning: its security scan rated it {} risk.",
                        skill.spec.scan_status
                    ));
                }
                ws.emit_info(message);
            }
            Err(e @ SkillError::NoStorage) => ws.emit_error(format!(
                "{e}: this node runs without persistence, so it has no skills."
            )),
            Err(e) => ws.emit_error(e.to_string()),
        },
    }
}

/// `/mcp` lists the MCP servers (state and counts); `/mcp refresh [server]` rediscovers one
/// server, or all, at once (tools, resources, prompts; the registry follows). Output as
/// `info`, failures as `error` events.
async fn mcp_command(node: &Node, ws: &turnstone_engine::WorkstreamHandle, arg: &str) {
    let Some(mcp) = node.mcp() else {
        ws.emit_info("No MCP servers are configured.");
        return;
    };
    let (sub, server) = arg
        .split_once(char::is_whitespace)
        .map_or((arg, ""), |(a, b)| (a, b.trim()));
    let describe = |name: &str, st: &turnstone_mcp::ServerStatus| {
        let mut line = format!(
            "{name}: {} — {} tools, {} resources, {} templates, {} prompts",
            if st.connected {
                "connected"
            } else {
                "not connected"
            },
            st.tools,
            st.resources,
            st.resource_templates,
            st.prompts
        );
        if !st.error.is_empty() {
            line.push_str(&format!(" (error: {})", st.error));
        }
        line
    };
    match sub {
        "" | "status" | "list" => {
            let lines: Vec<String> = mcp
                .status()
                .iter()
                .map(|(name, st)| describe(name, st))
                .collect();
            ws.emit_info(format!("MCP servers:\n{}", lines.join("\n")));
        }
        "refresh" => {
            let target = (!server.is_empty()).then_some(server);
            if let Some(name) = target
                && mcp.server_config(name).is_none()
            {
                ws.emit_error(format!(
                    "Unknown MCP server '{name}'. Configured: {}",
                    mcp.server_names().join(", ")
                ));
                return;
            }
            match mcp.refresh(target).await {
                Ok(()) => {
                    let status = mcp.status();
                    let lines: Vec<String> = status
                        .iter()
                        .filter(|(name, _)| target.is_none_or(|t| t == name.as_str()))
                        .map(|(name, st)| describe(name, st))
                        .collect();
                    ws.emit_info(format!("MCP refreshed:\n{}", lines.join("\n")));
                }
                Err(e) => ws.emit_error(format!("MCP refresh failed: {e}")),
            }
        }
        other => ws.emit_error(format!(
            "Unknown /mcp action '{other}'. Usage: /mcp, /mcp refresh [server]"
        )),
    }
}

/// `alias (model)`, or the model alone when it has no alias.
fn describe_model(model: &str, alias: &str) -> String {
    if alias.is_empty() || alias == model {
        model.to_string()
    } else {
        format!("{alias} ({model})")
    }
}
