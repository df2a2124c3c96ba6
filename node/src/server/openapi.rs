//! The OpenAPI 3.1 document served at `/openapi.json`, and the `/docs` page that lists it.
//!
//! [`ROUTES`] is the table of documented operations: method, path, summary, parameters and
//! the Rust types of the request and response bodies. [`document`] turns it into the
//! document, with JSON Schemas derived from those types (`schemars`), so a change to a wire
//! type changes the document. Security per operation comes from the node's route table
//! ([`NODE_ROUTES`], what the auth layer enforces), not from this table. Routes the original leaves out of its document
//! (`/metrics`, the web UI, the document itself) are in [`UNDOCUMENTED`]; every route the
//! router serves is in one of the two lists (a test checks it).
//!
//! `/docs` is a self-contained page (no CDN, works offline) whose inline script renders the
//! operations of `/openapi.json`.

use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};
use turnstone_proto::api::{
    ApproveBody, CancelBody, CloseWorkstreamBody, CommandBody, CreateWorkstreamBody,
    CreateWorkstreamReply, Dashboard, ErrorReply, Health, PlanBody, QueueList, SendBody,
    SendOutcomes, SendOutcomesBody, StatusReply, WorkstreamList,
};
use turnstone_proto::routes::{Lookup, NODE_ROUTES, lookup};
use turnstone_runtime::auth::Access;

use super::login::{AuthStatusReply, LoginBody, LoginReply, WhoamiReply};
use super::memories::{
    DeleteMemoryReply, MemoryList, MemoryRow, ModelList, SaveMemoryBody, SearchMemoriesBody,
};
use super::policies::{DeletePolicyReply, PolicyBody, PolicyList, PolicyRow, VerdictList};
use super::posture::{PostureBody, PostureReply};
use super::skills::{AdminSkillList, DeleteSkillReply, SkillBody, SkillList, SkillRow};
use super::state::Node;

/// `info.title` of the document.
pub const TITLE: &str = "turnstone Server API";

/// Writes the schema of one Rust type into a generator and returns a reference to it.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// Body of a successful response.
#[derive(Clone, Copy)]
pub enum Reply {
    /// `application/json` of a Rust type.
    Json(SchemaFn),
    /// A Server-Sent Events stream (`text/event-stream`).
    EventStream,
    /// `text/html`.
    Html,
    /// Bytes of a type only known at run time (a stored preview).
    Bytes,
}

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamIn {
    Query,
    Header,
    Path,
}

impl ParamIn {
    fn as_str(self) -> &'static str {
        match self {
            Self::Query => "query",
            Self::Header => "header",
            Self::Path => "path",
        }
    }
}

/// A parameter of an operation: a string, or a non-negative integer when `count`.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub location: ParamIn,
    pub required: bool,
    pub count: bool,
    pub description: &'static str,
}

/// One documented operation.
#[derive(Clone, Copy)]
pub struct ApiRoute {
    /// Lowercase HTTP method (`get`, `post`, `delete`).
    pub method: &'static str,
    /// Full path as served, e.g. `/v1/api/send`; parameters as `{name}`.
    pub path: &'static str,
    pub summary: &'static str,
    pub tag: &'static str,
    pub params: &'static [Param],
    pub request: Option<SchemaFn>,
    pub reply: Reply,
    /// Error statuses besides those implied by auth (401/403) and a request body (400).
    pub errors: &'static [u16],
}

impl std::fmt::Debug for ApiRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method.to_uppercase(), self.path)
    }
}

impl ApiRoute {
    const fn new(method: &'static str, path: &'static str, tag: &'static str) -> Self {
        Self {
            method,
            path,
            summary: "",
            tag,
            params: &[],
            request: None,
            reply: Reply::Json(schema_of::<StatusReply>),
            errors: &[],
        }
    }

    const fn get(path: &'static str, tag: &'static str) -> Self {
        Self::new("get", path, tag)
    }

    const fn post(path: &'static str, tag: &'static str) -> Self {
        Self::new("post", path, tag)
    }

    const fn put(path: &'static str, tag: &'static str) -> Self {
        Self::new("put", path, tag)
    }

    const fn delete(path: &'static str, tag: &'static str) -> Self {
        Self::new("delete", path, tag)
    }

    const fn summary(mut self, summary: &'static str) -> Self {
        self.summary = summary;
        self
    }

    const fn body<T: JsonSchema>(mut self) -> Self {
        self.request = Some(schema_of::<T>);
        self
    }

    const fn json<T: JsonSchema>(mut self) -> Self {
        self.reply = Reply::Json(schema_of::<T>);
        self
    }

    const fn reply(mut self, reply: Reply) -> Self {
        self.reply = reply;
        self
    }

    const fn params(mut self, params: &'static [Param]) -> Self {
        self.params = params;
        self
    }

    const fn errors(mut self, errors: &'static [u16]) -> Self {
        self.errors = errors;
        self
    }

    /// `operationId`: the path with `/` → `_` (braces dropped), trimmed, `_` + method, as
    /// the original (`v1_api_send_post`).
    pub fn operation_id(&self) -> String {
        let path: String = self
            .path
            .chars()
            .filter(|c| !matches!(c, '{' | '}'))
            .map(|c| if c == '/' { '_' } else { c })
            .collect();
        format!("{}_{}", path.trim_matches('_'), self.method)
    }

    /// What the node's route table says this operation needs (`/metrics` as by default,
    /// public). An operation without a row (which the route tests refuse) is documented as
    /// needing `read`, as the auth layer would refuse it anyway.
    pub fn access(&self) -> Access {
        match lookup(NODE_ROUTES, self.method, self.path) {
            Lookup::Entry(needs) => Access::of_route(needs, false),
            Lookup::OtherMethod | Lookup::Missing => {
                Access::Requires(turnstone_runtime::auth::Scope::Read)
            }
        }
    }
}

/// `POST /v1/api/send` as documented: the original fields plus ours (`correlation_id`,
/// `queue`, the auto-approve pair), all declared on [`SendBody`].
#[derive(JsonSchema)]
#[allow(dead_code)]
struct SendRequest {
    #[serde(flatten)]
    body: SendBody,
}

/// `POST /v1/api/cancel` as documented: the original fields plus `all` ([`CancelBody`]).
#[derive(JsonSchema)]
#[allow(dead_code)]
struct CancelRequest {
    #[serde(flatten)]
    body: CancelBody,
}

/// One row of `GET /v1/api/workstreams/saved` (the handler writes it as JSON).
#[derive(JsonSchema)]
#[allow(dead_code)]
struct SavedWorkstream {
    ws_id: String,
    alias: Option<String>,
    title: Option<String>,
    /// ISO timestamp.
    created: String,
    /// ISO timestamp.
    updated: String,
    message_count: u64,
}

/// `GET /v1/api/workstreams/saved`: up to 50, newest first.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct SavedWorkstreams {
    workstreams: Vec<SavedWorkstream>,
}

const LAST_EVENT_ID: Param = Param {
    name: "Last-Event-ID",
    location: ParamIn::Header,
    required: false,
    count: true,
    description: "Resume after this event id: the missed events, or an explicit truncation event.",
};

const LAST_EVENT_ID_QUERY: Param = Param {
    name: "last_event_id",
    location: ParamIn::Query,
    required: false,
    count: false,
    description: "Same as the `Last-Event-ID` header, for clients that cannot set headers; \
                  the header wins.",
};

const FROM_QUERY: Param = Param {
    name: "from",
    location: ParamIn::Query,
    required: false,
    count: true,
    description: "Same as the `Last-Event-ID` header; the header wins.",
};

const BOOT_QUERY: Param = Param {
    name: "boot",
    location: ParamIn::Query,
    required: false,
    count: true,
    description: "The `boot` of the `node_hello` the resume point belongs to; another boot \
                  replays everything retained of this one (`reset: true`).",
};

const WS_ID_QUERY: Param = Param {
    name: "ws_id",
    location: ParamIn::Query,
    required: true,
    count: false,
    description: "The workstream.",
};

const IDEMPOTENCY_KEY: Param = Param {
    name: "Idempotency-Key",
    location: ParamIn::Header,
    required: false,
    count: false,
    description: "Same as `correlation_id` in the body.",
};

const WS_ID_PATH: Param = Param {
    name: "ws_id",
    location: ParamIn::Path,
    required: true,
    count: false,
    description: "The workstream.",
};

const CORRELATION_ID_PATH: Param = Param {
    name: "correlation_id",
    location: ParamIn::Path,
    required: true,
    count: false,
    description: "The queued message's correlation id.",
};

const WATCHES_WS_ID_QUERY: Param = Param {
    name: "ws_id",
    location: ParamIn::Query,
    required: false,
    count: false,
    description: "Only this workstream's watches (default: every active watch of this node).",
};

const WATCH_ID_PATH: Param = Param {
    name: "watch_id",
    location: ParamIn::Path,
    required: true,
    count: false,
    description: "The watch.",
};

const MEMORY_SCOPE_QUERY: Param = Param {
    name: "scope",
    location: ParamIn::Query,
    required: false,
    count: false,
    description: "`global`, `workstream` or `user` (the caller's own memories).",
};

const MEMORY_SCOPE_ID_QUERY: Param = Param {
    name: "scope_id",
    location: ParamIn::Query,
    required: false,
    count: false,
    description: "The workstream or user id; only together with `scope`.",
};

const MEMORY_LIST_PARAMS: [Param; 4] = [
    Param {
        name: "type",
        location: ParamIn::Query,
        required: false,
        count: false,
        description: "`user`, `project`, `feedback` or `reference`.",
    },
    MEMORY_SCOPE_QUERY,
    MEMORY_SCOPE_ID_QUERY,
    Param {
        name: "limit",
        location: ParamIn::Query,
        required: false,
        count: true,
        description: "At most this many (default 100, at most 200).",
    },
];

const MEMORY_DELETE_PARAMS: [Param; 3] = [
    Param {
        name: "name",
        location: ParamIn::Path,
        required: true,
        count: false,
        description: "The memory name (normalised like on save).",
    },
    MEMORY_SCOPE_QUERY,
    MEMORY_SCOPE_ID_QUERY,
];

const POLICY_ID_PATH: [Param; 1] = [Param {
    name: "policy_id",
    location: ParamIn::Path,
    required: true,
    count: false,
    description: "The policy id (`config:<name>` for a config-file policy).",
}];
const fn query(name: &'static str, description: &'static str) -> Param {
    Param {
        name,
        location: ParamIn::Query,
        required: false,
        count: false,
        description,
    }
}
const VERDICT_LIST_PARAMS: [Param; 6] = [
    query("ws_id", "Only this workstream's verdicts."),
    query(
        "risk_level",
        "`none`, `low`, `medium`, `high` or `critical`.",
    ),
    query("since", "Inclusive ISO timestamp."),
    query("until", "Inclusive ISO timestamp."),
    query("limit", "1–1000, default 100."),
    query("offset", "Rows to skip, default 0."),
];
const SKILL_NAME_PATH: [Param; 1] = [Param {
    name: "name",
    location: ParamIn::Path,
    required: true,
    count: false,
    description: "The skill name.",
}];
const PREVIEW_PARAMS: [Param; 3] = [
    Param {
        name: "preview_id",
        location: ParamIn::Path,
        required: true,
        count: false,
        description: "The `preview_id` of the workstream's `preview` event.",
    },
    WS_ID_QUERY,
    Param {
        name: "remote",
        location: ParamIn::Query,
        required: false,
        count: false,
        description: "`1`: let a previewed page load its remote images, styles, fonts and \
                      media (never scripts).",
    },
];

/// Every documented operation, in document order.
pub const ROUTES: &[ApiRoute] = &[
    ApiRoute::get("/health", "health")
        .summary("Node health: status, version, workstream counts, backend")
        .json::<Health>(),
    ApiRoute::get("/ready", "health")
        .summary("Readiness: `ready`, or 503 while draining or while the store does not answer")
        .errors(&[503]),
    ApiRoute::get("/v1/api/workstreams", "workstreams")
        .summary("Live workstreams on this node, in creation order")
        .json::<WorkstreamList>(),
    ApiRoute::get("/v1/api/workstreams/saved", "workstreams")
        .summary("Persisted workstreams that have messages, newest first")
        .json::<SavedWorkstreams>()
        .errors(&[503]),
    ApiRoute::get("/v1/api/dashboard", "workstreams")
        .summary("Live workstreams with usage, and aggregates")
        .json::<Dashboard>(),
    ApiRoute::post("/v1/api/workstreams/new", "workstreams")
        .summary("Create (optionally resume) a workstream")
        .body::<CreateWorkstreamBody>()
        .params(&[IDEMPOTENCY_KEY])
        .json::<CreateWorkstreamReply>()
        .errors(&[404, 409, 503]),
    ApiRoute::post("/v1/api/workstreams/close", "workstreams")
        .summary("Close a workstream")
        .body::<CloseWorkstreamBody>(),
    ApiRoute::get("/v1/api/approvals", "turns")
        .summary(
            "Pending tool approvals and plan reviews on this node (the approve_request and \
             plan_review events, with ws_id)",
        )
        .json::<super::internal::PendingApprovals>(),
    ApiRoute::post("/v1/api/send", "turns")
        .summary(
            "Send a user message (starts a turn); while one runs `{\"status\": \"busy\"}`, \
             or with `\"queue\": true` `{\"status\": \"queued\", \"position\": n}`",
        )
        .body::<SendRequest>()
        .params(&[IDEMPOTENCY_KEY])
        .errors(&[404, 409]),
    ApiRoute::post("/v1/api/sends/outcomes", "turns")
        .summary(
            "What became of sends, by correlation id (queued, started, completed with its \
             turn_complete, removed, unknown): a bridge asks after this node restarted",
        )
        .body::<SendOutcomesBody>()
        .json::<SendOutcomes>()
        .errors(&[400, 503]),
    ApiRoute::post("/v1/api/approve", "turns")
        .summary("Resolve the pending tool approval (the first decision wins)")
        .body::<ApproveBody>()
        .errors(&[404, 409]),
    ApiRoute::post("/v1/api/plan", "turns")
        .summary(
            "Answer the pending plan review: \"\" accepts, n/no/reject rejects, other text \
             asks for a revised plan (the first reply wins; a later one is 409 with the verdict)",
        )
        .body::<PlanBody>()
        .errors(&[404, 409]),
    ApiRoute::post("/v1/api/command", "turns")
        .summary("Run a slash command; its output arrives on the event stream")
        .body::<CommandBody>()
        .errors(&[404]),
    ApiRoute::post("/v1/api/cancel", "turns")
        .summary("Cancel the current generation (`\"all\": true`: and empty the queue)")
        .body::<CancelRequest>()
        .errors(&[404, 503]),
    ApiRoute::post("/v1/api/workstreams/{ws_id}/posture", "workstreams")
        .summary("Set the approval posture: ask, auto-review or full (full needs the approve scope)")
        .params(&[WS_ID_PATH])
        .body::<PostureBody>()
        .json::<PostureReply>()
        .errors(&[400, 403, 404]),
    ApiRoute::get("/v1/api/workstreams/{ws_id}/queue", "turns")
        .summary("The workstream's queued messages, next first")
        .params(&[WS_ID_PATH])
        .json::<QueueList>()
        .errors(&[404]),
    ApiRoute::delete(
        "/v1/api/workstreams/{ws_id}/queue/{correlation_id}",
        "turns",
    )
    .summary("Remove one queued message (it never runs)")
    .params(&[WS_ID_PATH, CORRELATION_ID_PATH])
    .errors(&[404, 503]),
    ApiRoute::get("/v1/api/events", "events")
        .summary("Events of one workstream (SSE), resumable with Last-Event-ID")
        .params(&[WS_ID_QUERY, LAST_EVENT_ID_QUERY, LAST_EVENT_ID])
        .reply(Reply::EventStream)
        .errors(&[404]),
    ApiRoute::get("/v1/api/events/global", "events")
        .summary("Workstream lifecycle and state events of the node (SSE)")
        .params(&[LAST_EVENT_ID])
        .reply(Reply::EventStream),
    ApiRoute::get("/v1/api/events/node", "events")
        .summary("Every event of every workstream in one ordered stream (SSE), resumable")
        .params(&[FROM_QUERY, BOOT_QUERY, LAST_EVENT_ID])
        .reply(Reply::EventStream)
        .errors(&[400]),
    ApiRoute::post("/v1/api/auth/login", "auth")
        .summary("Log in with a token (or username and password); sets the auth cookie")
        .body::<LoginBody>()
        .json::<LoginReply>()
        .errors(&[401, 429]),
    ApiRoute::post("/v1/api/auth/logout", "auth").summary("Clear the auth cookie"),
    ApiRoute::post("/v1/api/auth/setup", "auth")
        .summary("Create the first user (admin) once and log them in; needs storage")
        .body::<super::users::NewUserBody>()
        .json::<super::users::SetupReply>()
        .errors(&[400, 409, 503]),
    ApiRoute::get("/v1/api/auth/status", "auth")
        .summary("Login UI state: is auth on, is first-user setup needed")
        .json::<AuthStatusReply>(),
    ApiRoute::get("/v1/api/auth/whoami", "auth")
        .summary("The calling user (401 without a user identity)")
        .json::<WhoamiReply>(),
    ApiRoute::get("/v1/api/tools", "workstreams")
        .summary("The exact tool array of a workstream's latest model request (inspection)")
        .params(&[WS_ID_QUERY])
        .json::<super::internal::PreparedToolsReply>()
        .errors(&[404]),
    ApiRoute::post("/v1/api/tools", "workstreams")
        .summary("Change a workstream's tool-set intent (applies from the next turn; persisted)")
        .body::<super::internal::SetToolsBody>()
        .json::<super::internal::SetToolsReply>()
        .errors(&[404, 503]),
    ApiRoute::get("/v1/api/previews/{preview_id}", "workstreams")
        .summary("Content open_preview stored for a workstream, served with a sandboxing CSP")
        .params(&PREVIEW_PARAMS)
        .reply(Reply::Bytes)
        .errors(&[400, 404]),
    ApiRoute::get("/v1/api/_internal/mcp-status", "internal")
        .summary("Status of each configured MCP server (console fan-out)")
        .json::<super::internal::McpStatusReply>(),
    ApiRoute::get("/v1/api/_internal/model-status", "internal")
        .summary("Each model alias with its model, provider and context window")
        .json::<super::internal::ModelStatusReply>(),
    ApiRoute::post("/v1/api/_internal/mcp-reload", "internal")
        .summary("Rediscover every MCP server's tools, resources and prompts")
        .errors(&[503]),
    ApiRoute::get("/v1/api/models", "models")
        .summary("Model aliases this node serves")
        .json::<ModelList>(),
    ApiRoute::get("/v1/api/memories", "memories")
        .summary("Structured memories, newest `updated` first")
        .params(&MEMORY_LIST_PARAMS)
        .json::<MemoryList>()
        .errors(&[400, 503]),
    ApiRoute::post("/v1/api/memories", "memories")
        .summary("Upsert a memory by (name, scope, scope_id): 201 when created, 200 when updated")
        .body::<SaveMemoryBody>()
        .json::<MemoryRow>()
        .errors(&[201, 500, 503]),
    ApiRoute::post("/v1/api/memories/search", "memories")
        .summary("Memories containing every term of the query (read-only)")
        .body::<SearchMemoriesBody>()
        .json::<MemoryList>()
        .errors(&[503]),
    ApiRoute::delete("/v1/api/memories/{name}", "memories")
        .summary("Delete a memory by name and scope")
        .params(&MEMORY_DELETE_PARAMS)
        .json::<DeleteMemoryReply>()
        .errors(&[400, 404, 503]),
    ApiRoute::get("/v1/api/skills", "skills")
        .summary("Enabled skills (summary), highest priority first")
        .json::<SkillList>()
        .errors(&[503]),
    ApiRoute::get("/v1/api/admin/policies", "policies")
        .summary("Tool policies (config file and stored), in evaluation order (admin)")
        .json::<PolicyList>()
        .errors(&[500]),
    ApiRoute::post("/v1/api/admin/policies", "policies")
        .summary("Create a tool policy (`name`, `tool_pattern`, `action` required): 201 with the row (admin)")
        .body::<PolicyBody>()
        .json::<PolicyRow>()
        .errors(&[201, 400, 500, 503]),
    ApiRoute::put("/v1/api/admin/policies/{policy_id}", "policies")
        .summary("Change the given fields of a tool policy; config-file policies are read-only (admin)")
        .params(&POLICY_ID_PATH)
        .body::<PolicyBody>()
        .json::<PolicyRow>()
        .errors(&[400, 403, 404, 500, 503]),
    ApiRoute::delete("/v1/api/admin/policies/{policy_id}", "policies")
        .summary("Delete a tool policy; config-file policies are read-only (admin)")
        .params(&POLICY_ID_PATH)
        .json::<DeletePolicyReply>()
        .errors(&[403, 404, 500, 503]),
    ApiRoute::get("/v1/api/admin/verdicts", "policies")
        .summary("Recorded judge verdicts, newest first, with the human decision (admin)")
        .params(&VERDICT_LIST_PARAMS)
        .json::<VerdictList>()
        .errors(&[400, 500, 503]),
    ApiRoute::get("/v1/api/admin/skills", "skills")
        .summary("Every skill with every column, enabled or not (admin)")
        .json::<AdminSkillList>()
        .errors(&[503]),
    ApiRoute::post("/v1/api/admin/skills", "skills")
        .summary("Create a skill (`name` and `content` required): 201 with the row (admin)")
        .body::<SkillBody>()
        .json::<SkillRow>()
        .errors(&[201, 409, 500, 503]),
    ApiRoute::put("/v1/api/admin/skills/{name}", "skills")
        .summary("Change the given fields of a skill; MCP-synced skills are read-only (admin)")
        .params(&SKILL_NAME_PATH)
        .body::<SkillBody>()
        .json::<SkillRow>()
        .errors(&[403, 404, 500, 503]),
    ApiRoute::delete("/v1/api/admin/skills/{name}", "skills")
        .summary("Delete a skill; MCP-synced skills are read-only (admin)")
        .params(&SKILL_NAME_PATH)
        .json::<DeleteSkillReply>()
        .errors(&[403, 404, 500, 503]),
    ApiRoute::get("/v1/api/watches", "watches")
        .summary("Active watches (every column of the watches row)")
        .params(&[WATCHES_WS_ID_QUERY])
        .json::<super::watches::WatchList>()
        .errors(&[500]),
    ApiRoute::post("/v1/api/watches/{watch_id}/cancel", "watches")
        .summary("Deactivate a watch (403 when another node polls it)")
        .params(&[WATCH_ID_PATH])
        .json::<super::watches::CancelWatchReply>()
        .errors(&[404, 500]),
];

/// Routes the router serves that the document leaves out (as the original does): the web
/// UI, `/metrics`, the document and its page.
pub const UNDOCUMENTED: &[(&str, &str)] = &[
    ("get", "/"),
    ("get", "/static/{*path}"),
    ("get", "/shared/{*path}"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("get", "/docs"),
    // SSO is not supported yet: both answer as an original without OIDC settings.
    ("get", "/v1/api/auth/oidc/authorize"),
    ("get", "/v1/api/auth/oidc/callback"),
    // User and token administration (approve scope; the original had no node admin routes,
    // its OpenAPI document none either): documented in docs/api.md.
    ("get", "/v1/api/admin/users"),
    ("post", "/v1/api/admin/users"),
    ("delete", "/v1/api/admin/users/{user_id}"),
    ("get", "/v1/api/admin/tokens"),
    ("post", "/v1/api/admin/tokens"),
    ("delete", "/v1/api/admin/tokens/{token_id}"),
];

fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad request (invalid JSON body or invalid field)",
        401 => "Missing or invalid credentials",
        403 => "The token lacks the required scope",
        404 => "Unknown workstream",
        409 => "Already decided or conflicting",
        413 => "Request body too large",
        429 => "Too many attempts (see Retry-After)",
        500 => "Storage failed",
        503 => "Storage unavailable",
        _ => "Error",
    }
}

fn error_response(status: u16, error_ref: &Value) -> Value {
    json!({
        "description": status_text(status),
        "content": {"application/json": {"schema": error_ref}},
    })
}

fn operation(
    route: &ApiRoute,
    requests: &mut SchemaGenerator,
    replies: &mut SchemaGenerator,
    error_ref: &Value,
) -> Value {
    let mut op = Map::new();
    op.insert("operationId".into(), json!(route.operation_id()));
    op.insert("summary".into(), json!(route.summary));
    op.insert("tags".into(), json!([route.tag]));

    if !route.params.is_empty() {
        let params: Vec<Value> = route
            .params
            .iter()
            .map(|p| {
                json!({
                    "name": p.name,
                    "in": p.location.as_str(),
                    "required": p.required || p.location == ParamIn::Path,
                    "description": p.description,
                    "schema": if p.count {
                        json!({"type": "integer", "minimum": 0})
                    } else {
                        json!({"type": "string"})
                    },
                })
            })
            .collect();
        op.insert("parameters".into(), Value::Array(params));
    }

    let mut errors: BTreeSet<u16> = route.errors.iter().copied().collect();
    if let Some(request) = route.request {
        let schema = request(requests).to_value();
        op.insert(
            "requestBody".into(),
            json!({"required": true, "content": {"application/json": {"schema": schema}}}),
        );
        errors.extend([400, 413]);
    }

    match route.access().scope() {
        None => {
            op.insert("security".into(), json!([]));
        }
        Some(scope) => {
            op.insert(
                "description".into(),
                json!(format!("Requires a token with the `{scope}` scope.")),
            );
            op.insert("security".into(), security_requirement());
            op.insert("x-required-scope".into(), json!(scope.as_str()));
            errors.extend([401, 403]);
        }
    }

    let mut responses = Map::new();
    let ok = match route.reply {
        Reply::Json(schema) => json!({
            "description": status_text(200),
            "content": {"application/json": {"schema": schema(replies).to_value()}},
        }),
        Reply::EventStream => json!({
            "description": "An event stream: `id: <seq>` and `data: <JSON event>` per event, \
                            a `: ping` comment every few seconds",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }),
        Reply::Html => json!({
            "description": status_text(200),
            "content": {"text/html": {"schema": {"type": "string"}}},
        }),
        Reply::Bytes => json!({
            "description": "The stored bytes with their own content type",
            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
        }),
    };
    responses.insert("200".into(), ok.clone());
    for status in errors {
        // A second success status (201 Created) answers with the same body as the 200.
        let response = if (200..300).contains(&status) {
            let mut alt = ok.clone();
            alt["description"] = json!(status_text(status));
            alt
        } else {
            error_response(status, error_ref)
        };
        responses.insert(status.to_string(), response);
    }
    op.insert("responses".into(), Value::Object(responses));
    Value::Object(op)
}

fn security_requirement() -> Value {
    json!([{"bearerAuth": []}, {"cookieAuth": []}])
}

fn generator(serialize: bool) -> SchemaGenerator {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
    });
    let settings = if serialize {
        settings.for_serialize()
    } else {
        settings.for_deserialize()
    };
    SchemaGenerator::new(settings)
}

/// Builds the document from [`ROUTES`]. Request schemas describe what is accepted
/// (every field optional, as decoding is tolerant); response schemas what is sent.
pub fn document() -> Value {
    let (doc, conflicts) = assemble();
    for name in conflicts {
        // The same name read and written differently: the response form is kept.
        tracing::warn!(schema = %name, "request and response schemas differ");
    }
    doc
}

/// The document, and the names of schemas whose request and response forms differ.
fn assemble() -> (Value, Vec<String>) {
    let mut requests = generator(false);
    let mut replies = generator(true);
    let error_ref = replies.subschema_for::<ErrorReply>().to_value();

    let mut paths = Map::new();
    for route in ROUTES {
        let op = operation(route, &mut requests, &mut replies, &error_ref);
        let item = paths
            .entry(route.path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(item) = item.as_object_mut() {
            item.insert(route.method.to_string(), op);
        }
    }

    let mut schemas = replies.take_definitions(true);
    let mut conflicts = Vec::new();
    for (name, schema) in requests.take_definitions(true) {
        match schemas.get(&name) {
            Some(existing) if *existing != schema => conflicts.push(name),
            Some(_) => {}
            None => {
                schemas.insert(name, schema);
            }
        }
    }

    let doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": TITLE,
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The HTTP API of a Turnstone node. Errors are `{\"error\": \"...\"}`. \
                            Credentials: `Authorization: Bearer <token>` or the `turnstone_auth` \
                            cookie set by login.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A config token, a `ts_` API token, or a JWT",
                },
                "cookieAuth": {"type": "apiKey", "in": "cookie", "name": "turnstone_auth"},
            },
        },
        "security": security_requirement(),
    });
    (doc, conflicts)
}

static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    serde_json::to_string_pretty(&document()).unwrap_or_else(|_| "{}".to_string())
});

/// `GET /openapi.json`.
pub async fn openapi_json() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
        .into_response()
}

/// `GET /docs`.
pub async fn docs() -> Html<&'static str> {
    Html(DOCS_PAGE)
}

/// The two public routes of this module.
pub fn routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/openapi.json", get(openapi_json))
        .route("/docs", get(docs))
}

const DOCS_PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>turnstone Server API</title>
<style>
  :root { color-scheme: light dark; --fg: #1d232a; --muted: #5f6b76; --bg: #fbfbfc;
          --card: #ffffff; --line: #dde2e7; --get: #1f7a4d; --post: #2457a6; --put: #8a5a00; --delete: #b3261e; }
  @media (prefers-color-scheme: dark) {
    :root { --fg: #e6e9ec; --muted: #9aa5b1; --bg: #15181b; --card: #1d2125; --line: #30363d; }
  }
  body { margin: 0; font: 15px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
  main { max-width: 60rem; margin: 0 auto; padding: 1.5rem; }
  h1 { margin: 0 0 .25rem; font-size: 1.6rem; }
  h2 { margin: 2rem 0 .5rem; font-size: 1.1rem; text-transform: capitalize; color: var(--muted); }
  .muted { color: var(--muted); }
  details { background: var(--card); border: 1px solid var(--line); border-radius: 8px; margin: .4rem 0; }
  summary { cursor: pointer; padding: .55rem .8rem; display: flex; gap: .8rem; align-items: baseline; }
  .method { font: 600 .75rem ui-monospace, monospace; text-transform: uppercase; min-width: 3.6rem;
            text-align: center; color: #fff; border-radius: 4px; padding: .1rem .3rem; }
  .get { background: var(--get); } .post { background: var(--post); } .put { background: var(--put); } .delete { background: var(--delete); }
  .path { font-family: ui-monospace, monospace; font-weight: 600; }
  .lock { margin-left: auto; font-size: .8rem; color: var(--muted); white-space: nowrap; }
  .body { padding: 0 .8rem .8rem; border-top: 1px solid var(--line); }
  pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: .6rem;
        overflow: auto; font-size: .82rem; }
  table { border-collapse: collapse; font-size: .9rem; }
  td { padding: .15rem .8rem .15rem 0; vertical-align: top; }
  code { font: .85em ui-monospace, monospace; background: var(--bg); border: 1px solid var(--line);
         border-radius: 4px; padding: 0 .25rem; }
</style>
</head>
<body>
<main>
  <h1 id="title">turnstone Server API</h1>
  <div class="muted" id="meta">Loading <a href="/openapi.json">/openapi.json</a>…</div>
  <div id="ops"></div>
</main>
<script>
"use strict";
const el = (tag, attrs, ...kids) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const kid of kids) node.append(kid);
  return node;
};
// A schema as a compact type: `{ key?: type  // description }`, `a | b`, `type[]`.
const shape = (doc, schema) => {
  const seen = new Set();
  const walk = (s, pad) => {
    if (s === true || s === undefined) return "any";
    if (!s || typeof s !== "object") return "any";
    if (typeof s.$ref === "string") {
      const name = s.$ref.split("/").pop();
      if (seen.has(name)) return name;
      seen.add(name);
      const out = walk((doc.components.schemas || {})[name], pad);
      seen.delete(name);
      return out;
    }
    if ("const" in s) return JSON.stringify(s.const);
    if (Array.isArray(s.enum)) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
    const alts = s.oneOf || s.anyOf;
    if (Array.isArray(alts)) return alts.map((a) => walk(a, pad)).join(" | ");
    const types = Array.isArray(s.type) ? s.type : [s.type || (s.properties ? "object" : "any")];
    return types.map((t) => {
      if (t === "array") return walk(s.items, pad) + "[]";
      if (t !== "object" || !s.properties) return t;
      const required = new Set(s.required || []);
      const inner = pad + "  ";
      const lines = Object.entries(s.properties).map(([key, sub]) => {
        const note = sub && sub.description ? "  // " + sub.description.replace(/\s+/g, " ") : "";
        return inner + key + (required.has(key) ? "" : "?") + ": " + walk(sub, inner) + note;
      });
      return "{\n" + lines.join("\n") + "\n" + pad + "}";
    }).join(" | ");
  };
  return walk(schema, "");
};
const prose = (text) => {
  // `code` spans of the descriptions as <code>, everything else as text.
  const node = el("span", {});
  String(text || "").split("`").forEach((part, i) => node.append(i % 2 ? el("code", {}, part) : part));
  return node;
};
const schemaBlock = (doc, label, content) => {
  const media = Object.keys(content || {})[0];
  if (!media) return "";
  return el("div", {}, el("p", {}, label + " ", el("code", {}, media)),
            el("pre", {}, shape(doc, content[media].schema)));
};
fetch("/openapi.json").then((r) => r.json()).then((doc) => {
  document.getElementById("title").textContent = doc.info.title;
  document.title = doc.info.title;
  const meta = document.getElementById("meta");
  meta.textContent = "OpenAPI " + doc.openapi + " · version " + doc.info.version + " · ";
  meta.append(prose(doc.info.description));
  const groups = new Map();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = (op.tags || ["other"])[0];
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push([method, path, op]);
    }
  }
  const root = document.getElementById("ops");
  for (const [tag, ops] of groups) {
    root.append(el("h2", {}, tag));
    for (const [method, path, op] of ops) {
      const lock = op.security && op.security.length === 0
        ? "public" : "scope: " + (op["x-required-scope"] || "read");
      const parts = [];
      if (op.description) parts.push(el("p", {}, prose(op.description)));
      if (op.parameters) {
        const rows = op.parameters.map((p) => el("tr", {}, el("td", {}, el("code", {}, p.name)),
          el("td", { class: "muted" }, p.in + (p.required ? ", required" : "")),
          el("td", {}, prose(p.description))));
        parts.push(el("p", {}, "Parameters"), el("table", {}, ...rows));
      }
      if (op.requestBody) parts.push(schemaBlock(doc, "Request body", op.requestBody.content));
      for (const [status, resp] of Object.entries(op.responses || {})) {
        parts.push(el("p", {}, el("strong", {}, status), " ", prose(resp.description)));
        if (status.startsWith("2") && resp.content) parts.push(schemaBlock(doc, "Response", resp.content));
      }
      root.append(el("details", location.hash === "#all" ? { open: "" } : {},
        el("summary", {}, el("span", { class: "method " + method }, method),
           el("span", { class: "path" }, path), prose(op.summary),
           el("span", { class: "lock" }, lock)),
        el("div", { class: "body" }, ...parts)));
    }
  }
}).catch((e) => {
  document.getElementById("meta").textContent = "Could not load /openapi.json: " + e;
});
</script>
</body>
</html>
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_response_schemas_of_one_name_agree() {
        let (doc, conflicts) = assemble();
        assert_eq!(conflicts, Vec::<String>::new());
        assert!(doc["components"]["schemas"]["WorkstreamState"].is_object());
    }

    #[test]
    fn operation_ids_follow_the_original() {
        let send = ROUTES.iter().find(|r| r.path == "/v1/api/send").unwrap();
        assert_eq!(send.operation_id(), "v1_api_send_post");
        let mut route = *send;
        route.path = "/v1/api/memories/{name}";
        route.method = "delete";
        assert_eq!(route.operation_id(), "v1_api_memories_name_delete");
        assert_eq!(ROUTES[0].operation_id(), "health_get");
    }

    #[test]
    fn security_follows_the_auth_policy() {
        let doc = document();
        assert_eq!(
            doc["paths"]["/v1/api/auth/login"]["post"]["security"],
            json!([])
        );
        let whoami = &doc["paths"]["/v1/api/auth/whoami"]["get"];
        assert_eq!(whoami["security"], security_requirement());
        assert!(whoami["responses"]["401"].is_object());
        let approve = &doc["paths"]["/v1/api/approve"]["post"];
        assert_eq!(
            approve["description"],
            "Requires a token with the `approve` scope."
        );
    }
}
