//! The bridge's HTTP client for its node: the calls of cluster spec §3.5 with the typed
//! bodies of [`turnstone_proto::api`], authenticated, with every answer classified as
//! accepted, rejected (a final answer) or unavailable (try again later).

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use turnstone_proto::api::{
    ApproveBody, CancelBody, CloseWorkstreamBody, CommandBody, CreateWorkstreamBody, PlanBody,
    ReleaseBody, SendBody, SendOutcomesBody,
};
use turnstone_runtime::auth::{JwtSecret, NewClaims, ServiceToken};

use crate::config::NodeAuth;

/// What the node said to a command.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// 2xx; the JSON body.
    Accepted(Value),
    /// A 4xx other than 408/429: final; the node's `error` text (or the status).
    Rejected {
        status: u16,
        error: String,
        body: Value,
    },
    /// No answer, 5xx, 408 or 429: the command may be retried.
    Unavailable(String),
}

impl Reply {
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

/// A reply body as its `proto::api` type (tolerant: unknown keys ignored, missing ones
/// defaulted); `None` when it is not that body.
pub fn decode_reply<T: DeserializeOwned>(what: &str, body: &Value) -> Option<T> {
    match turnstone_proto::api::decode_value(what, body) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(what, error = %e, "unexpected reply body from the node");
            None
        }
    }
}

#[derive(Clone)]
pub struct NodeClient {
    base: String,
    http: reqwest::Client,
    stream_http: reqwest::Client,
    auth: Arc<AuthHeader>,
}

impl std::fmt::Debug for NodeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeClient")
            .field("base", &self.base)
            .finish()
    }
}

enum AuthHeader {
    None,
    Static(String),
    Minted(ServiceToken),
}

impl NodeClient {
    /// A client of the node at `base`. A minted token carries `tools.approve` only when
    /// `relay_auto_approve` (the bridge relays producers' auto-approve).
    pub fn new(
        base: &str,
        auth: &NodeAuth,
        relay_auto_approve: bool,
    ) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(3))
            .tcp_nodelay(true)
            .pool_max_idle_per_host(128)
            .build()?;
        // The event stream stays open indefinitely: no overall timeout.
        let stream_http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .tcp_nodelay(true)
            .build()?;
        let auth = match auth {
            NodeAuth::None => AuthHeader::None,
            NodeAuth::Token(t) => AuthHeader::Static(format!("Bearer {t}")),
            NodeAuth::Jwt(secret) => AuthHeader::Minted(ServiceToken::new(
                if relay_auto_approve {
                    NewClaims::bridge_relaying_auto_approve()
                } else {
                    NewClaims::bridge()
                },
                JwtSecret::new(secret.clone()),
            )),
        };
        Ok(Self {
            base: base.trim_end_matches('/').to_string(),
            http,
            stream_http,
            auth: Arc::new(auth),
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Adds the node credentials and the current trace context (`traceparent`).
    fn authorize(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let req = req.headers(turnstone_runtime::trace_context::current_headers());
        match &*self.auth {
            AuthHeader::None => req,
            AuthHeader::Static(h) => req.header(reqwest::header::AUTHORIZATION, h),
            AuthHeader::Minted(t) => match t.authorization_header() {
                Ok(h) => req.header(reqwest::header::AUTHORIZATION, h),
                Err(e) => {
                    tracing::error!(error = %e, "cannot mint a token for the node");
                    req
                }
            },
        }
    }

    async fn classify(resp: Result<reqwest::Response, reqwest::Error>) -> Reply {
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return Reply::Unavailable(format!("node unreachable: {e}")),
        };
        let status = resp.status();
        let body: Value = match resp.bytes().await {
            Ok(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
            Err(e) => return Reply::Unavailable(format!("reading the node's answer: {e}")),
        };
        if status.is_success() {
            return Reply::Accepted(body);
        }
        if status.is_server_error()
            || status == StatusCode::REQUEST_TIMEOUT
            || status == StatusCode::TOO_MANY_REQUESTS
        {
            return Reply::Unavailable(format!("node answered {status}"));
        }
        let error = body
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("node answered {status}"));
        Reply::Rejected {
            status: status.as_u16(),
            error,
            body,
        }
    }

    async fn post<B: Serialize + ?Sized>(&self, path: &str, body: &B) -> Reply {
        let req = self.authorize(self.http.post(format!("{}{path}", self.base)).json(body));
        Self::classify(req.send().await).await
    }

    async fn get(&self, path: &str) -> Reply {
        let req = self.authorize(self.http.get(format!("{}{path}", self.base)));
        Self::classify(req.send().await).await
    }

    /// `POST /v1/api/send`.
    pub async fn send(&self, body: &SendBody) -> Reply {
        self.post("/v1/api/send", body).await
    }

    /// `POST /v1/api/sends/outcomes`.
    pub async fn send_outcomes(&self, body: &SendOutcomesBody) -> Reply {
        self.post("/v1/api/sends/outcomes", body).await
    }

    /// `POST /v1/api/command`.
    pub async fn command(&self, body: &CommandBody) -> Reply {
        self.post("/v1/api/command", body).await
    }

    /// `POST /v1/api/cancel`.
    pub async fn cancel(&self, body: &CancelBody) -> Reply {
        self.post("/v1/api/cancel", body).await
    }

    /// `POST /v1/api/workstreams/new`.
    pub async fn create_workstream(&self, body: &CreateWorkstreamBody) -> Reply {
        self.post("/v1/api/workstreams/new", body).await
    }

    /// `POST /v1/api/workstreams/close`.
    pub async fn close_workstream(&self, body: &CloseWorkstreamBody) -> Reply {
        self.post("/v1/api/workstreams/close", body).await
    }

    /// `POST /v1/api/approve`.
    pub async fn approve(&self, body: &ApproveBody) -> Reply {
        self.post("/v1/api/approve", body).await
    }

    /// `POST /v1/api/plan`.
    pub async fn plan(&self, body: &PlanBody) -> Reply {
        self.post("/v1/api/plan", body).await
    }

    /// `POST /v1/api/_internal/release`: another node owns the workstream now.
    pub async fn release(&self, body: &ReleaseBody) -> Reply {
        self.post("/v1/api/_internal/release", body).await
    }

    /// `GET /v1/api/workstreams`.
    pub async fn workstreams(&self) -> Reply {
        self.get("/v1/api/workstreams").await
    }

    /// `GET /v1/api/approvals`: the node's pending approvals.
    pub async fn approvals(&self) -> Reply {
        self.get("/v1/api/approvals").await
    }

    /// `GET /health` with a short timeout (liveness probe).
    pub async fn health(&self, timeout: Duration) -> Reply {
        let req = self.authorize(
            self.http
                .get(format!("{}/health", self.base))
                .timeout(timeout),
        );
        Self::classify(req.send().await).await
    }

    /// Opens the node-wide event stream after `(boot, seq)`.
    pub async fn node_events(
        &self,
        cursor: Option<(u64, u64)>,
    ) -> Result<reqwest::Response, String> {
        let url = match cursor {
            Some((boot, seq)) => format!("{}/v1/api/events/node?boot={boot}&from={seq}", self.base),
            // No resume point: everything the node still holds, so events emitted before the
            // bridge (re)started are not lost.
            None => format!("{}/v1/api/events/node?from=0", self.base),
        };
        let req = self.authorize(self.stream_http.get(url));
        let resp = req
            .send()
            .await
            .map_err(|e| format!("node unreachable: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("node event stream answered {}", resp.status()));
        }
        Ok(resp)
    }
}
