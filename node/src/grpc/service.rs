//! `turnstone.v1.NodeService`: each RPC authenticates as the HTTP route it mirrors
//! ([`super::access`]) and then runs that route's own code (`crate::server::*`): one send
//! path, one create path, one event log and replay.

use std::pin::Pin;
use std::sync::Arc;

use axum::extract::State;
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status};
use turnstone_grpc::v1::{self as pb, node_service_server::NodeService};
use turnstone_proto::api::{
    ApproveBody, CancelBody, CloseWorkstreamBody, CommandBody, CreateWorkstreamBody, PlanBody,
    SendBody, SendReply,
};

use super::access::{Route, authorize, status_of};
use super::events::event_of;
use crate::send_queue::Submitted;
use crate::server::body::WireJson;
use crate::server::memories::{MemoryList, MemoryQuery, MemoryRow};
use crate::server::{Node, events, health, memories, skills, turns, workstreams};

/// The service over one node.
#[derive(Clone)]
pub struct NodeGrpc {
    node: Arc<Node>,
}

impl NodeGrpc {
    pub fn new(node: Arc<Node>) -> Self {
        Self { node }
    }

    async fn authorize<T>(
        &self,
        request: &Request<T>,
        route: Route,
    ) -> Result<Option<turnstone_runtime::auth::Identity>, Status> {
        authorize(&self.node, request, route).await
    }

    /// An open stream takes a slot of the caller's identity, as an SSE stream does.
    fn stream_slot(
        &self,
        identity: Option<&turnstone_runtime::auth::Identity>,
    ) -> Result<crate::server::sse::StreamSlot, Status> {
        let key = identity.map_or_else(
            || "anonymous".to_string(),
            |i| format!("{}/{}", i.source, i.user_id),
        );
        let max = self.node.options.sse_per_identity;
        self.node.stream_slots.acquire(&key, max).ok_or_else(|| {
            Status::resource_exhausted(format!(
                "Too many open event streams for this identity (at most {max}); close one first"
            ))
        })
    }
}

const LIST: Route = Route::get("/v1/api/workstreams");
const CREATE: Route = Route::post("/v1/api/workstreams/new");
const CLOSE: Route = Route::post("/v1/api/workstreams/close");
const SEND: Route = Route::post("/v1/api/send");
const APPROVE: Route = Route::post("/v1/api/approve");
const CANCEL: Route = Route::post("/v1/api/cancel");
const COMMAND: Route = Route::post("/v1/api/command");
const PLAN: Route = Route::post("/v1/api/plan");
const HEALTH: Route = Route::get("/health");
const EVENTS: Route = Route::get("/v1/api/events");
const NODE_EVENTS: Route = Route::get("/v1/api/events/node");
const MEMORIES: Route = Route::get("/v1/api/memories");
const SEARCH_MEMORIES: Route = Route::post("/v1/api/memories/search");
const SKILLS: Route = Route::get("/v1/api/skills");

type EventStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn send_body(r: pb::SendRequest) -> SendBody {
    SendBody {
        ws_id: r.ws_id,
        message: r.message,
        correlation_id: r.correlation_id,
        auto_approve: r.auto_approve,
        auto_approve_tools: r.auto_approve_tools,
        queue: r.queue,
    }
}

fn send_response(submitted: &Submitted) -> pb::SendResponse {
    let SendReply {
        status,
        position,
        reason,
    } = submitted.body();
    pb::SendResponse {
        status,
        position,
        reason,
        idempotent_replayed: matches!(submitted, Submitted::Replayed { .. }),
    }
}

fn memory(m: MemoryRow) -> pb::Memory {
    pb::Memory {
        memory_id: m.memory_id,
        name: m.name,
        description: m.description,
        r#type: m.mem_type,
        scope: m.scope,
        scope_id: m.scope_id,
        content: m.content,
        created: m.created,
        updated: m.updated,
        last_accessed: m.last_accessed,
        access_count: m.access_count,
    }
}

fn memories_of(list: MemoryList) -> (Vec<pb::Memory>, u64) {
    let total = list.total as u64;
    (list.memories.into_iter().map(memory).collect(), total)
}

/// A limit as the routes read it: absent is the route's default.
fn limit_of(limit: Option<i64>) -> Option<serde_json::Value> {
    limit.map(serde_json::Value::from)
}

impl NodeGrpc {
    /// The send path of `POST /v1/api/send` (`turns::submit_send`).
    async fn submit(
        &self,
        identity: Option<&turnstone_runtime::auth::Identity>,
        request: pb::SendRequest,
    ) -> Result<Submitted, Status> {
        let key = crate::server::state::idempotency_key(
            Some(&request.correlation_id),
            &axum::http::HeaderMap::new(),
        )
        .map_err(status_of)?;
        turns::submit_send(&self.node, identity, key, send_body(request))
            .await
            .map_err(status_of)
    }
}

#[tonic::async_trait]
impl NodeService for NodeGrpc {
    async fn list_workstreams(
        &self,
        request: Request<pb::ListWorkstreamsRequest>,
    ) -> Result<Response<pb::ListWorkstreamsResponse>, Status> {
        self.authorize(&request, LIST).await?;
        let list = workstreams::list(State(self.node.clone())).await.0;
        let workstreams = list
            .workstreams
            .into_iter()
            .map(|w| pb::Workstream {
                state: super::events::state_of(w.state.as_str()).into(),
                id: w.id,
                name: w.name,
                queued: w.queued.unwrap_or(0),
                hibernated: w.hibernated.unwrap_or(false),
            })
            .collect();
        Ok(Response::new(pb::ListWorkstreamsResponse { workstreams }))
    }

    async fn create_workstream(
        &self,
        request: Request<pb::CreateWorkstreamRequest>,
    ) -> Result<Response<pb::CreateWorkstreamResponse>, Status> {
        let identity = self.authorize(&request, CREATE).await?;
        let r = request.into_inner();
        let body = CreateWorkstreamBody {
            name: r.name,
            auto_approve: r.auto_approve,
            model: r.model,
            resume_ws: r.resume_ws,
            skill: r.skill,
            user_id: r.user_id,
            correlation_id: r.correlation_id,
            ws_id: r.ws_id,
            auto_approve_tools: r.auto_approve_tools,
            posture: r.posture,
            // The gRPC message has no persona field: `/persona <name>` selects one.
            persona: String::new(),
        };
        let key = crate::server::state::idempotency_key(
            Some(&body.correlation_id),
            &axum::http::HeaderMap::new(),
        )
        .map_err(status_of)?;
        let (reply, replayed) =
            workstreams::create_or_replay(&self.node, identity.as_ref(), key, &body)
                .await
                .map_err(status_of)?;
        Ok(Response::new(pb::CreateWorkstreamResponse {
            ws_id: reply["ws_id"].as_str().unwrap_or_default().to_string(),
            name: reply["name"].as_str().unwrap_or_default().to_string(),
            resumed: reply["resumed"].as_bool().unwrap_or(false),
            message_count: reply["message_count"].as_u64().unwrap_or(0),
            idempotent_replayed: replayed,
        }))
    }

    async fn close_workstream(
        &self,
        request: Request<pb::CloseWorkstreamRequest>,
    ) -> Result<Response<pb::CloseWorkstreamResponse>, Status> {
        self.authorize(&request, CLOSE).await?;
        let ws_id = request.into_inner().ws_id;
        // An unknown workstream is NOT_FOUND here (HTTP answers 400 for both, as the original).
        if self.node.workstream(&ws_id).is_none() && self.node.manager.hibernated(&ws_id).is_none()
        {
            return Err(Status::not_found("Unknown workstream"));
        }
        let reply = workstreams::close(
            State(self.node.clone()),
            WireJson(CloseWorkstreamBody { ws_id }),
        )
        .await
        .map_err(status_of)?;
        Ok(Response::new(pb::CloseWorkstreamResponse {
            status: reply.0["status"].as_str().unwrap_or("ok").to_string(),
        }))
    }

    async fn send(
        &self,
        request: Request<pb::SendRequest>,
    ) -> Result<Response<pb::SendResponse>, Status> {
        let identity = self.authorize(&request, SEND).await?;
        let submitted = self.submit(identity.as_ref(), request.into_inner()).await?;
        Ok(Response::new(send_response(&submitted)))
    }

    async fn send_and_wait(
        &self,
        request: Request<pb::SendAndWaitRequest>,
    ) -> Result<Response<pb::SendAndWaitResponse>, Status> {
        let identity = self.authorize(&request, SEND).await?;
        let deadline = super::wait::deadline_of(request.metadata(), request.get_ref().timeout_ms);
        let r = request.into_inner();
        let send = r
            .send
            .ok_or_else(|| Status::invalid_argument("send is required"))?;
        super::wait::send_and_wait(
            self,
            identity.as_ref(),
            send,
            r.cancel_on_disconnect,
            deadline,
        )
        .await
        .map(Response::new)
    }

    async fn approve(
        &self,
        request: Request<pb::ApproveRequest>,
    ) -> Result<Response<pb::ApproveResponse>, Status> {
        self.authorize(&request, APPROVE).await?;
        let r = request.into_inner();
        let body = ApproveBody {
            ws_id: r.ws_id,
            approved: r.approved,
            feedback: r.feedback,
            always: r.always,
            request_id: r.request_id,
            cycle_id: r.cycle_id,
            call_id: r.call_id,
        };
        let reply = turns::approve(State(self.node.clone()), WireJson(body))
            .await
            .map_err(status_of)?;
        Ok(Response::new(pb::ApproveResponse {
            status: reply.0.status,
        }))
    }

    async fn cancel(
        &self,
        request: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::CancelResponse>, Status> {
        self.authorize(&request, CANCEL).await?;
        let r = request.into_inner();
        let body = CancelBody {
            ws_id: r.ws_id,
            force: r.force,
            all: r.all,
        };
        let reply = turns::cancel(State(self.node.clone()), WireJson(body))
            .await
            .map_err(status_of)?
            .0;
        Ok(Response::new(pb::CancelResponse {
            status: reply.status,
            removed: reply.removed,
        }))
    }

    async fn command(
        &self,
        request: Request<pb::CommandRequest>,
    ) -> Result<Response<pb::CommandResponse>, Status> {
        self.authorize(&request, COMMAND).await?;
        let r = request.into_inner();
        let body = CommandBody {
            ws_id: r.ws_id,
            command: r.command,
        };
        let reply = turns::command(State(self.node.clone()), WireJson(body))
            .await
            .map_err(status_of)?;
        Ok(Response::new(pb::CommandResponse {
            status: reply.0.status,
        }))
    }

    async fn plan(
        &self,
        request: Request<pb::PlanRequest>,
    ) -> Result<Response<pb::PlanResponse>, Status> {
        self.authorize(&request, PLAN).await?;
        let r = request.into_inner();
        let body = PlanBody {
            ws_id: r.ws_id,
            feedback: r.feedback,
            request_id: r.request_id,
        };
        let reply = turns::plan(State(self.node.clone()), WireJson(body))
            .await
            .map_err(status_of)?;
        Ok(Response::new(pb::PlanResponse {
            status: reply.0.status,
        }))
    }

    async fn health(
        &self,
        request: Request<pb::HealthRequest>,
    ) -> Result<Response<pb::HealthResponse>, Status> {
        self.authorize(&request, HEALTH).await?;
        let health = health::health(State(self.node.clone())).await.0;
        Ok(Response::new(pb::HealthResponse {
            json: serde_json::to_string(&health).unwrap_or_default(),
            status: health.status,
            version: health.version,
        }))
    }

    type StreamEventsStream = EventStream<pb::StreamEventsResponse>;

    async fn stream_events(
        &self,
        request: Request<pb::StreamEventsRequest>,
    ) -> Result<Response<Self::StreamEventsStream>, Status> {
        let identity = self.authorize(&request, EVENTS).await?;
        let r = request.into_inner();
        let ws = self.node.resolve(&r.ws_id).await.map_err(status_of)?;
        let slot = self.stream_slot(identity.as_ref())?;
        let frames = events::workstream_stream(&self.node, ws, r.after_seq);
        let stream = frames.filter_map(move |frame| {
            let _open = &slot;
            std::future::ready(
                event_of(frame).map(|event| Ok(pb::StreamEventsResponse { event: Some(event) })),
            )
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_memories(
        &self,
        request: Request<pb::ListMemoriesRequest>,
    ) -> Result<Response<pb::ListMemoriesResponse>, Status> {
        let identity = self.authorize(&request, MEMORIES).await?;
        let r = request.into_inner();
        let filter = MemoryQuery {
            mem_type: r.r#type,
            scope: r.scope,
            scope_id: r.scope_id,
            limit: limit_of(r.limit),
        };
        let list = memories::list_memories(&self.node, identity.as_ref(), filter)
            .await
            .map_err(status_of)?;
        let (memories, total) = memories_of(list);
        Ok(Response::new(pb::ListMemoriesResponse { memories, total }))
    }

    async fn search_memories(
        &self,
        request: Request<pb::SearchMemoriesRequest>,
    ) -> Result<Response<pb::SearchMemoriesResponse>, Status> {
        let identity = self.authorize(&request, SEARCH_MEMORIES).await?;
        let r = request.into_inner();
        let filter = MemoryQuery {
            mem_type: r.r#type,
            scope: r.scope,
            scope_id: r.scope_id,
            limit: limit_of(r.limit),
        };
        let list = memories::search_memories(&self.node, identity.as_ref(), &r.query, filter)
            .await
            .map_err(status_of)?;
        let (memories, total) = memories_of(list);
        Ok(Response::new(pb::SearchMemoriesResponse {
            memories,
            total,
        }))
    }

    async fn list_skills(
        &self,
        request: Request<pb::ListSkillsRequest>,
    ) -> Result<Response<pb::ListSkillsResponse>, Status> {
        self.authorize(&request, SKILLS).await?;
        let list = skills::list(State(self.node.clone()))
            .await
            .map_err(status_of)?
            .0;
        let skills = list
            .skills
            .into_iter()
            .map(|s| pb::Skill {
                name: s.name,
                category: s.category,
                description: s.description,
                tags: s.tags,
                is_default: s.is_default,
                activation: s.activation,
                origin: s.origin,
                author: s.author,
                version: s.version,
            })
            .collect();
        Ok(Response::new(pb::ListSkillsResponse { skills }))
    }

    async fn rename_workstream(
        &self,
        request: Request<pb::RenameWorkstreamRequest>,
    ) -> Result<Response<pb::RenameWorkstreamResponse>, Status> {
        self.authorize(&request, COMMAND).await?;
        let r = request.into_inner();
        let name = r.name.trim();
        if name.is_empty() {
            return Err(Status::invalid_argument("name is required"));
        }
        let ws = self.node.resolve(&r.ws_id).await.map_err(status_of)?;
        turns::rename(&self.node, &ws, name);
        Ok(Response::new(pb::RenameWorkstreamResponse {
            status: "ok".into(),
            name: name.to_string(),
        }))
    }

    type StreamNodeEventsStream = EventStream<pb::StreamNodeEventsResponse>;

    async fn stream_node_events(
        &self,
        request: Request<pb::StreamNodeEventsRequest>,
    ) -> Result<Response<Self::StreamNodeEventsStream>, Status> {
        let identity = self.authorize(&request, NODE_EVENTS).await?;
        let r = request.into_inner();
        let slot = self.stream_slot(identity.as_ref())?;
        let frames = events::node_stream(&self.node, r.after_seq, r.boot);
        let stream = frames.filter_map(move |frame| {
            let _open = &slot;
            std::future::ready(
                event_of(frame)
                    .map(|event| Ok(pb::StreamNodeEventsResponse { event: Some(event) })),
            )
        });
        Ok(Response::new(Box::pin(stream)))
    }
}

impl NodeGrpc {
    pub(super) fn node(&self) -> &Arc<Node> {
        &self.node
    }

    pub(super) async fn submit_for_wait(
        &self,
        identity: Option<&turnstone_runtime::auth::Identity>,
        request: pb::SendRequest,
    ) -> Result<(Submitted, pb::SendResponse), Status> {
        let submitted = self.submit(identity, request).await?;
        let response = send_response(&submitted);
        Ok((submitted, response))
    }
}
