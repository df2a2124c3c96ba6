//! `turnstone.v1.ConsoleService` (`proto/turnstone/v1/console.proto`, see `docs/grpc.md`):
//! the cluster API over gRPC, on the console's port (multiplexed by content type with
//! [`turnstone_grpc::serve::multiplex`]). Each RPC checks the access of the HTTP route it
//! mirrors ([`crate::routes::CONSOLE_ROUTES`]) and runs that route's code (`crate::api`,
//! `crate::events`).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::{Query, State};
use futures::{Stream, StreamExt};
use serde_json::Value;
use tonic::{Code, Request, Response, Status};
use turnstone_grpc::v1::{self as pb, console_service_server::ConsoleService};
use turnstone_runtime::auth::Identity;

use crate::error::ApiError;
use crate::state::Console;
use crate::{api, events};

/// The service over one console.
#[derive(Clone)]
pub struct ConsoleGrpc {
    console: Arc<Console>,
}

impl ConsoleGrpc {
    pub fn new(console: Arc<Console>) -> Self {
        Self { console }
    }

    /// Authenticates the `authorization` metadata for the HTTP route `(method, template)`.
    async fn authorize<T>(
        &self,
        request: &Request<T>,
        method: &str,
        template: &str,
    ) -> Result<Option<Identity>, Status> {
        let access = crate::routes::route_access(method, Some(template), None)
            .map_err(|_| Status::permission_denied("this RPC has no permission entry"))?;
        let authorization = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        self.console
            .auth
            .check_access(access, authorization, None)
            .await
            .map_err(|e| {
                let code = match e.status() {
                    401 => Code::Unauthenticated,
                    403 => Code::PermissionDenied,
                    _ => Code::Internal,
                };
                Status::new(code, e.body_message())
            })
    }
}

/// The status of a route's error (`docs/grpc.md`, "Status codes").
pub fn status_of(e: ApiError) -> Status {
    let message = e.to_string();
    match e {
        ApiError::BadRequest(_) => Status::invalid_argument(message),
        ApiError::Auth { status: 401, .. } => Status::unauthenticated(message),
        ApiError::Auth { .. } | ApiError::Forbidden(_) => Status::permission_denied(message),
        ApiError::NotFound(_) => Status::not_found(message),
        ApiError::BadGateway(_) | ApiError::Unavailable(_) => Status::unavailable(message),
        _ => Status::internal(message),
    }
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn number(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Query parameters as the HTTP route reads them (`0` / empty: the route's default).
fn params(pairs: &[(&str, String)]) -> api::Params {
    Query(
        pairs
            .iter()
            .filter(|(_, v)| !v.is_empty() && v != "0")
            .map(|(k, v)| ((*k).to_string(), v.clone()))
            .collect::<HashMap<_, _>>(),
    )
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::WatchClusterResponse, Status>> + Send>>;

fn watch_item(v: &Value) -> pb::WatchClusterResponse {
    pb::WatchClusterResponse {
        r#type: text(v, "type"),
        json: v.to_string(),
    }
}

#[tonic::async_trait]
impl ConsoleService for ConsoleGrpc {
    async fn get_overview(
        &self,
        request: Request<pb::GetOverviewRequest>,
    ) -> Result<Response<pb::GetOverviewResponse>, Status> {
        self.authorize(&request, "GET", "/v1/api/cluster/overview")
            .await?;
        let o = api::overview(State(self.console.clone())).await.0;
        let states = o
            .get("states")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Response::new(pb::GetOverviewResponse {
            nodes: number(&o, "nodes"),
            workstreams: number(&o, "workstreams"),
            states,
            json: o.to_string(),
        }))
    }

    async fn list_nodes(
        &self,
        request: Request<pb::ListNodesRequest>,
    ) -> Result<Response<pb::ListNodesResponse>, Status> {
        self.authorize(&request, "GET", "/v1/api/cluster/nodes")
            .await?;
        let r = request.into_inner();
        let query = params(&[
            ("sort", r.sort),
            ("limit", r.limit.to_string()),
            ("offset", r.offset.to_string()),
        ]);
        let page = api::nodes(State(self.console.clone()), query)
            .await
            .map_err(status_of)?
            .0;
        let nodes = page["nodes"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|n| pb::ClusterNode {
                        node_id: text(n, "node_id"),
                        server_url: text(n, "server_url"),
                        reachable: n["reachable"].as_bool().unwrap_or(false),
                        max_ws: number(n, "max_ws"),
                        version: text(n, "version"),
                        json: n.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Response::new(pb::ListNodesResponse {
            nodes,
            total: number(&page, "total"),
        }))
    }

    async fn list_cluster_workstreams(
        &self,
        request: Request<pb::ListClusterWorkstreamsRequest>,
    ) -> Result<Response<pb::ListClusterWorkstreamsResponse>, Status> {
        self.authorize(&request, "GET", "/v1/api/cluster/workstreams")
            .await?;
        let r = request.into_inner();
        let query = params(&[
            ("state", r.state),
            ("node", r.node),
            ("search", r.search),
            ("sort", r.sort),
            ("page", r.page.to_string()),
            ("per_page", r.per_page.to_string()),
        ]);
        let page = api::workstreams(State(self.console.clone()), query)
            .await
            .map_err(status_of)?
            .0;
        let workstreams = page["workstreams"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|w| pb::ClusterWorkstream {
                        id: text(w, "id"),
                        name: text(w, "name"),
                        state: text(w, "state"),
                        node: text(w, "node"),
                        json: w.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Response::new(pb::ListClusterWorkstreamsResponse {
            workstreams,
            total: number(&page, "total"),
            page: number(&page, "page"),
            per_page: number(&page, "per_page"),
            pages: number(&page, "pages"),
        }))
    }

    async fn create_cluster_workstream(
        &self,
        request: Request<pb::CreateClusterWorkstreamRequest>,
    ) -> Result<Response<pb::CreateClusterWorkstreamResponse>, Status> {
        let identity = self
            .authorize(&request, "POST", "/v1/api/cluster/workstreams/new")
            .await?;
        let r = request.into_inner();
        let body = serde_json::json!({
            "node_id": r.node_id,
            "name": r.name,
            "model": r.model,
            "initial_message": r.initial_message,
            "skill": r.skill,
            "resume_ws": r.resume_ws,
        });
        let reply = api::create_counted(&self.console, identity, body.to_string().as_bytes())
            .await
            .map_err(status_of)?;
        Ok(Response::new(pb::CreateClusterWorkstreamResponse {
            status: text(&reply, "status"),
            correlation_id: text(&reply, "correlation_id"),
            target_node: text(&reply, "target_node"),
        }))
    }

    type WatchClusterStream = WatchStream;

    async fn watch_cluster(
        &self,
        request: Request<pb::WatchClusterRequest>,
    ) -> Result<Response<Self::WatchClusterStream>, Status> {
        self.authorize(&request, "GET", "/v1/api/cluster/events")
            .await?;
        let stream = events::cluster_stream(&self.console, watch_item, None)
            .map(|item| item.map_err(|never| match never {}));
        Ok(Response::new(Box::pin(stream)))
    }
}

/// The console's gRPC services: the console service, health (`NOT_SERVING` once the console
/// stops) and reflection; every call counted in the console's metrics.
pub async fn services(console: Arc<Console>) -> axum::Router {
    use turnstone_grpc::v1::console_service_server::ConsoleServiceServer;
    let calls = console.grpc_calls.clone();
    let lifecycle = turnstone_grpc::serve::Lifecycle {
        draining: console.shutdown.clone(),
        streams_closing: console.shutdown.clone(),
    };
    let service = ConsoleServiceServer::new(ConsoleGrpc::new(console))
        .max_decoding_message_size(crate::BODY_LIMIT);
    let services = turnstone_grpc::serve::with_health_and_reflection(service, lifecycle).await;
    turnstone_grpc::metrics::observe(services, calls)
}
