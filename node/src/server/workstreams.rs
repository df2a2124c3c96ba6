//! Workstream routes: list, dashboard, create, close.

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};
use turnstone_engine::{CreateOptions, Hibernated, Listed, ManagerError, WsState};
use turnstone_proto::api::{
    CloseWorkstreamBody, CreateWorkstreamBody, Dashboard, DashboardAggregate, DashboardWorkstream,
    WorkstreamList, WorkstreamSummary,
};
use turnstone_runtime::auth::Identity;

use super::body::WireJson;
use super::error::ApiError;
use super::state::Node;
use super::views;

/// `GET /v1/api/workstreams` — live and hibernated workstreams in creation order (a
/// hibernated one is `idle` with `"hibernated": true`).
pub async fn list(State(node): State<Arc<Node>>) -> Json<WorkstreamList> {
    let workstreams = node
        .manager
        .list_all()
        .iter()
        .map(|row| match row {
            Listed::Live(w) => WorkstreamSummary {
                id: w.id().to_string(),
                name: w.name(),
                state: w.state(),
                queued: Some(node.queues.len(w.id()) as u64),
                hibernated: None,
            },
            Listed::Hibernated(h) => WorkstreamSummary {
                id: h.ws_id.to_string(),
                name: h.name.clone(),
                state: WsState::Idle,
                queued: Some(0),
                hibernated: Some(true),
            },
        })
        .collect();
    Json(WorkstreamList { workstreams })
}

/// `GET /v1/api/dashboard` — enriched rows and aggregates (node spec §1.3.4); hibernated
/// workstreams as `idle` rows with `"hibernated": true` and the totals they went to sleep
/// with.
pub async fn dashboard(State(node): State<Arc<Node>>) -> Json<Dashboard> {
    let list = node.manager.list_all();
    let mut aggregate = DashboardAggregate {
        total_count: list.len() as u64,
        uptime_seconds: node.uptime().as_secs(),
        ..DashboardAggregate::default()
    };
    let workstreams = list
        .iter()
        .map(|row| {
            let w = match row {
                Listed::Live(w) => w,
                Listed::Hibernated(h) => {
                    aggregate.total_tokens += h.tokens;
                    aggregate.total_tool_calls += h.tool_calls;
                    return hibernated_row(&node, h);
                }
            };
            let (activity, activity_state) = w.activity();
            let (model, model_alias) = views::model_of(&node, w);
            aggregate.total_tokens += w.tokens_total();
            aggregate.total_tool_calls += w.tool_calls_total();
            if w.state() != WsState::Idle {
                aggregate.active_count += 1;
            }
            DashboardWorkstream {
                id: w.id().to_string(),
                name: w.name(),
                state: w.state(),
                title: w.title().unwrap_or_default(),
                tokens: w.tokens_total(),
                context_ratio: (views::context_ratio(&node, w) * 1000.0).round() / 1000.0,
                activity,
                activity_state,
                tool_calls: w.tool_calls_total(),
                node: "local".to_string(),
                model,
                model_alias,
                queue: Some(
                    node.queues
                        .snapshot(w.id())
                        .iter()
                        .map(|m| m.wire())
                        .collect(),
                ),
                hibernated: None,
            }
        })
        .collect();
    Json(Dashboard {
        workstreams,
        aggregate,
    })
}

/// The dashboard row of a hibernated workstream: what its index entry keeps; the model is
/// the node's (a per-workstream model choice is in the store until it wakes).
fn hibernated_row(node: &Node, h: &Hibernated) -> DashboardWorkstream {
    DashboardWorkstream {
        id: h.ws_id.to_string(),
        name: h.name.clone(),
        state: WsState::Idle,
        title: h.title.clone().unwrap_or_default(),
        tokens: h.tokens,
        tool_calls: h.tool_calls,
        node: "local".to_string(),
        model: node.options.model.clone(),
        model_alias: node.options.model_alias.clone(),
        queue: Some(Vec::new()),
        hibernated: Some(true),
        ..DashboardWorkstream::default()
    }
}

/// `POST /v1/api/workstreams/new`. With a `correlation_id` (or an `Idempotency-Key`
/// header) a repeat within the idempotency window returns the first reply (header
/// `Idempotent-Replayed: true`) and creates nothing — also when the repeats race.
pub async fn create(
    State(node): State<Arc<Node>>,
    identity: Option<Extension<Identity>>,
    headers: HeaderMap,
    WireJson(body): WireJson<CreateWorkstreamBody>,
) -> Result<Response, ApiError> {
    let key = super::state::idempotency_key(Some(&body.correlation_id), &headers)?;
    let (reply, replayed) = create_or_replay(&node, identity.as_deref(), key, &body).await?;
    let mut response = Json(reply).into_response();
    if replayed {
        response.headers_mut().insert(
            "idempotent-replayed",
            axum::http::HeaderValue::from_static("true"),
        );
    }
    Ok(response)
}

/// The create of `POST /v1/api/workstreams/new` and of gRPC `CreateWorkstream`: the reply,
/// and whether it is the first reply of an earlier create with the same idempotency `key`.
pub async fn create_or_replay(
    node: &Node,
    identity: Option<&Identity>,
    key: Option<String>,
    body: &CreateWorkstreamBody,
) -> Result<(Value, bool), ApiError> {
    super::auth::check_approvals_off(identity, body.auto_approve, &body.auto_approve_tools)?;
    let posture = super::posture::requested(identity, &body.posture)?;
    // The owner usage is accounted to: the user a bridge or the console creates for, else
    // the caller.
    let owner = match body.user_id.trim() {
        "" => identity.map_or("", |i| i.user_id.as_str()),
        user_id => user_id,
    };
    let Some(key) = key else {
        return Ok((create_now(node, body, posture, owner).await?, false));
    };
    let mut memo = node.create_memo.lock().await;
    let now = SystemTime::now();
    let window = node.options.idempotency_window;
    memo.retain(|_, (_, at)| now.duration_since(*at).unwrap_or_default() <= window);
    if let Some((reply, _)) = memo.get(&key) {
        return Ok((reply.clone(), true));
    }
    let (reply, replayed) = match created_by_send(node, &key).await {
        Some(reply) => (reply, true),
        None => (create_now(node, body, posture, owner).await?, false),
    };
    if memo.len() < node.options.idempotency_capacity {
        memo.insert(key, (reply.clone(), now));
    }
    Ok((reply, replayed))
}

/// The workstream a create with `key` made before, found through the send of the same key:
/// the bridge gives a create and its first message one correlation id, and sends are stored,
/// so a create redelivered after a restart (its in-memory memo gone) finds the workstream
/// its message went to instead of making a second one.
async fn created_by_send(node: &Node, key: &str) -> Option<Value> {
    let sent = node.remembered_send(key)?;
    let ws = match node.resolve(&sent.ws_id).await {
        Ok(ws) => ws,
        Err(_) => reopen(node, &sent.ws_id).await.ok()?,
    };
    Some(json!({
        "ws_id": ws.id(),
        "name": ws.name(),
        "resumed": false,
        "message_count": ws.history().len(),
    }))
}

async fn create_now(
    node: &Node,
    body: &CreateWorkstreamBody,
    posture: Option<turnstone_governance::Posture>,
    owner: &str,
) -> Result<Value, ApiError> {
    // An unknown persona creates nothing.
    let persona = body.persona.trim();
    let toolset = &node.manager.engine().config().toolset;
    if !persona.is_empty() && toolset.persona(persona).is_none() {
        let intent = turnstone_tools::toolset::ToolIntent::all().with_persona(Some(persona.into()));
        let err = toolset.validate(&intent).err().map(|e| e.to_string());
        return Err(ApiError::BadRequest(
            err.unwrap_or_else(|| format!("unknown persona '{persona}'")),
        ));
    }
    let reply = create_inner(node, body).await?;
    if let (Some(p), Some(ws_id)) = (&node.persistence, reply["ws_id"].as_str()) {
        p.record_owner(ws_id, owner);
    }
    if !persona.is_empty()
        && let Some(ws) = reply["ws_id"].as_str().and_then(|id| node.workstream(id))
    {
        super::internal::change_tool_intent(node, &ws, &json!({ "persona": persona })).await?;
    }
    if let Some(posture) = posture
        && let Some(ws) = reply["ws_id"].as_str().and_then(|id| node.workstream(id))
    {
        ws.set_posture(posture);
    }
    if !body.auto_approve_tools.is_empty()
        && let Some(ws) = reply["ws_id"].as_str().and_then(|id| node.workstream(id))
    {
        ws.set_always_approved(body.auto_approve_tools.iter().cloned().collect());
    }
    Ok(reply)
}

async fn create_inner(node: &Node, body: &CreateWorkstreamBody) -> Result<Value, ApiError> {
    if !body.resume_ws.is_empty() {
        return resume(node, body).await;
    }
    if !body.ws_id.is_empty() && !valid_ws_id(&body.ws_id) {
        return Err(ApiError::BadRequest(
            "ws_id must be 1-64 characters of [A-Za-z0-9_-]".into(),
        ));
    }
    if !body.ws_id.is_empty()
        && (node.workstream(&body.ws_id).is_some()
            || node.manager.hibernated(&body.ws_id).is_some())
    {
        return Err(ApiError::Conflict {
            message: format!("Workstream {} already exists", body.ws_id),
            detail: json!({"ws_id": body.ws_id}),
        });
    }
    // Looked up before anything is created: an unknown skill creates nothing. Without
    // storage no skill exists, which is the same 400 as the original's.
    let skill = if body.skill.trim().is_empty() {
        None
    } else {
        Some(
            super::skills::find_enabled(node, &body.skill)
                .await
                .map_err(|e| match e {
                    super::skills::SkillError::NoStorage => {
                        super::skills::SkillError::NotFound(body.skill.clone()).into()
                    }
                    other => ApiError::from(other),
                })?,
        )
    };
    // A model alias is checked before anything is created; without a registry the
    // engine's model is kept.
    let engine = node.manager.engine();
    let model = match body.model.trim() {
        // `model.default` (stored setting): the alias of workstreams that name none.
        "" => match node.cluster_settings.default_model() {
            Some(alias) => match engine.resolve_model(&alias).await {
                Ok(choice) => Some(choice),
                Err(e) => {
                    tracing::warn!(alias, error = %e, "model.default not usable; the node's model is kept");
                    None
                }
            },
            None => None,
        },
        alias if engine.config().models.is_some() => Some(
            engine
                .resolve_model(alias)
                .await
                .map_err(|e| ApiError::BadRequest(e.to_string()))?,
        ),
        alias => {
            tracing::debug!(alias, "no model registry: the engine's model is kept");
            None
        }
    };
    let options = CreateOptions {
        id: Some(body.ws_id.clone()).filter(|id| !id.is_empty()),
        name: Some(body.name.clone()).filter(|n| !n.is_empty()),
        skip_permissions: body.auto_approve.then_some(true),
        ..CreateOptions::default()
    };
    let ws = node.create_workstream(options).map_err(|e| match e {
        ManagerError::AllActive(_) => ApiError::BadRequest(e.to_string()),
        other => ApiError::BadRequest(other.to_string()),
    })?;
    if let Some(choice) = model {
        ws.use_model(choice);
    }
    if let Some(skill) = &skill {
        super::skills::apply(node, &ws, skill).await?;
    }
    Ok(json!({
        "ws_id": ws.id(),
        "name": ws.name(),
        "resumed": false,
        "message_count": ws.history().len(),
    }))
}

fn valid_ws_id(id: &str) -> bool {
    id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `GET /v1/api/approvals` (ours) — every pending approval round on this node (several
/// may wait on one workstream), as the `approve_request` events that announced them plus
/// `ws_id`, and every pending plan
/// review as its `plan_review` event plus `ws_id`. The bridge re-reads this on start
/// instead of keeping a copy of approval state.
pub async fn pending_approvals(State(node): State<Arc<Node>>) -> Json<Value> {
    let rows: Vec<Value> = node
        .manager
        .list()
        .iter()
        .flat_map(|w| {
            w.pending_approvals()
                .into_iter()
                .chain(w.pending_plan_review())
                .filter_map(|env| {
                    let mut v = views::event_json(&env.event);
                    let o = v.as_object_mut()?;
                    o.insert("ws_id".into(), json!(w.id()));
                    o.insert("ws_seq".into(), json!(env.seq));
                    Some(v)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    Json(json!({ "approvals": rows }))
}

/// `POST /v1/api/workstreams/close` — 400 `Cannot close last workstream` for the last one
/// and for unknown ids, as the original.
pub async fn close(
    State(node): State<Arc<Node>>,
    WireJson(body): WireJson<CloseWorkstreamBody>,
) -> Result<Json<Value>, ApiError> {
    match node.close_workstream(&body.ws_id) {
        Ok(()) => Ok(Json(json!({"status": "ok"}))),
        Err(_) => Err(ApiError::BadRequest("Cannot close last workstream".into())),
    }
}

/// `workstreams/new` with `resume_ws`: the saved conversation (alias, id or unique id prefix)
/// becomes a live workstream under its stored id, so history keeps accruing in one place.
async fn resume(node: &Node, body: &CreateWorkstreamBody) -> Result<Value, ApiError> {
    let Some(p) = &node.persistence else {
        return Err(ApiError::Unavailable(
            "This node runs without persistence; nothing to resume".into(),
        ));
    };
    let session = p
        .store
        .resume_session(&body.resume_ws)
        .await
        .map_err(|e| match e {
            turnstone_store::StoreError::NotFound(_) => {
                ApiError::NotFound(format!("Workstream not found: {}", body.resume_ws))
            }
            other => ApiError::BadRequest(other.to_string()),
        })?;
    let ws_id = session.workstream.ws_id.clone();
    let count = session.messages.len();
    if node.manager.hibernated(&ws_id).is_some() {
        // Hibernated, or left open by an earlier run: rehydrated as for any request, then
        // held to the explicit-resume rule below — a `full` posture is asked for again.
        let ws = node.resolve(&ws_id).await?;
        if ws.posture() == turnstone_governance::Posture::Full {
            tracing::warn!(%ws_id, "stored posture \"full\" not kept on resume; ask it again");
            ws.set_posture(turnstone_governance::Posture::Ask);
        }
    }
    if let Some(live) = node.workstream(&ws_id) {
        return Ok(
            json!({"ws_id": live.id(), "name": live.name(), "resumed": true, "message_count": live.history().len()}),
        );
    }
    let name = Some(body.name.clone())
        .filter(|n| !n.is_empty())
        .or(session.workstream.alias.clone())
        .or(session.workstream.title.clone())
        .unwrap_or_else(|| session.workstream.name.clone());
    // An explicit resume: a stored `full` posture needs the request to ask for it again.
    let ws = revive(
        node,
        session,
        name,
        body.auto_approve.then_some(true),
        false,
    )
    .await?;
    Ok(json!({"ws_id": ws.id(), "name": ws.name(), "resumed": true, "message_count": count}))
}

/// Makes a stored session live under its own id, with its settings and skill.
async fn revive(
    node: &Node,
    session: turnstone_store::ResumedSession,
    name: String,
    skip_permissions: Option<bool>,
    full_posture: bool,
) -> Result<turnstone_engine::WorkstreamHandle, ApiError> {
    let ws_id = session.workstream.ws_id.clone();
    let stored = match &node.persistence {
        Some(p) => p.store.load_config(&ws_id).await.unwrap_or_default(),
        None => Default::default(),
    };
    // Resumed here from another node's row (a shared store, its owner moved): this node
    // serves it now, so its next start lists it and the other node's does not.
    if let Some(p) = &node.persistence
        && session.workstream.node_id.as_deref() != Some(p.node_id.as_str())
        && let Err(e) = p.store.adopt_workstream(&ws_id, &p.node_id).await
    {
        tracing::warn!(%ws_id, error = %e, "workstream not recorded as this node's");
    }
    let ws = node
        .create_workstream(CreateOptions {
            id: Some(ws_id),
            name: Some(name),
            skip_permissions,
            history: session.messages,
        })
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    restore_session_config(&ws, &stored, full_posture).await;
    super::skills::restore(node, &ws, &stored).await;
    Ok(ws)
}

/// The name a reopened workstream shows: its alias, else its title, else its stored name.
pub(crate) fn stored_name(stored: &turnstone_store::Workstream) -> String {
    stored
        .alias
        .clone()
        .or(stored.title.clone())
        .unwrap_or_else(|| stored.name.clone())
}

/// Brings `ws_id` back to life after a node restart (its queued messages must run): from
/// the store with its history when it is there, else empty under the same id.
pub(crate) async fn reopen(
    node: &Node,
    ws_id: &str,
) -> Result<turnstone_engine::WorkstreamHandle, ApiError> {
    let Some(p) = &node.persistence else {
        return Err(ApiError::Unavailable("no persistence".into()));
    };
    match p.store.resume_session(ws_id).await {
        Ok(session) if session.workstream.ws_id == ws_id => {
            let name = stored_name(&session.workstream);
            // The same workstream coming back (rehydration, recovery): as it was.
            revive(node, session, name, None, true).await
        }
        _ => node
            .create_workstream(CreateOptions {
                id: Some(ws_id.to_string()),
                ..CreateOptions::default()
            })
            .map_err(|e| ApiError::BadRequest(e.to_string())),
    }
}

/// Restores what a resumed session stored beside its conversation: the tool-set intent
/// (stored as intent, never a list), the deferred tools `tool_search` had loaded
/// (`tool_loaded`, a JSON list), the model alias (`model`) and the approval posture
/// (`posture`; a stored `full` only with `full_posture`, else `ask`: an explicit resume does
/// not switch approvals off for whoever resumes). Unreadable values are skipped with a
/// warning.
pub(crate) async fn restore_session_config(
    ws: &turnstone_engine::WorkstreamHandle,
    stored: &std::collections::BTreeMap<String, String>,
    full_posture: bool,
) {
    if let Some(text) = stored.get(turnstone_engine::POSTURE_CONFIG_KEY) {
        match turnstone_governance::Posture::parse(text) {
            Some(turnstone_governance::Posture::Full) if !full_posture => {
                tracing::warn!(ws_id = %ws.id(), "stored posture \"full\" not restored on resume; ask it again");
                ws.restore_posture(turnstone_governance::Posture::Ask);
            }
            Some(posture) => ws.restore_posture(posture),
            None => {
                tracing::warn!(ws_id = %ws.id(), posture = %text, "stored posture not restored")
            }
        }
    }
    let intent = stored.get("tool_intent").and_then(|t| {
        turnstone_tools::toolset::ToolIntent::from_json(t)
            .inspect_err(|e| tracing::warn!(error = %e, "stored tool intent not restored"))
            .ok()
    });
    let loaded = stored
        .get(turnstone_engine::TOOL_LOADED_CONFIG_KEY)
        .and_then(|t| {
            serde_json::from_str::<Vec<String>>(t)
                .inspect_err(|e| tracing::warn!(error = %e, "stored loaded tools not restored"))
                .ok()
        });
    if intent.is_some() || loaded.is_some() {
        ws.restore_tools(
            intent.unwrap_or_else(|| ws.tool_intent()),
            loaded.unwrap_or_default(),
        );
    }
    if let Some(alias) = stored
        .get(turnstone_engine::MODEL_CONFIG_KEY)
        .filter(|a| !a.is_empty())
    {
        ws.restore_model(alias).await;
    }
}

/// `GET /v1/api/workstreams/saved` — up to 50 persisted workstreams with messages, newest
/// first (empty without persistence).
pub async fn saved(State(node): State<Arc<Node>>) -> Result<Json<Value>, ApiError> {
    let Some(p) = &node.persistence else {
        return Ok(Json(json!({"workstreams": []})));
    };
    let sessions = p
        .store
        .list_sessions(50)
        .await
        .map_err(|e| ApiError::Unavailable(format!("Storage unavailable: {e}")))?;
    let rows: Vec<Value> = sessions
        .into_iter()
        .map(|s| {
            json!({
                "ws_id": s.workstream.ws_id,
                "alias": s.workstream.alias,
                "title": s.workstream.title,
                "created": s.workstream.created,
                "updated": s.workstream.updated,
                "message_count": s.message_count,
            })
        })
        .collect();
    Ok(Json(json!({ "workstreams": rows })))
}
