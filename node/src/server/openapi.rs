//! The OpenAPI 3.1 document served at `/openapi.json`, and the `/docs` page that lists it.
//!
//! [`ROUTES`] is the table of documented operations: method, path, summary, parameters and
//! the Rust types of the request and response bodies. [`document`] turns it into the
//! document with the generator the console shares (`turnstone-openapi`), JSON Schemas
//! derived from those types, so a change to a wire type changes the document. Security per operation comes from the node's route table
//! ([`NODE_ROUTES`], what the auth layer enforces), not from this table. Routes the original leaves out of its document
//! (`/metrics`, the web UI, the document itself) are in [`UNDOCUMENTED`]; every route the
//! router serves is in one of the two lists (a test checks it).
//!
//! `/docs` is the shared self-contained page (`turnstone_openapi::DOCS_PAGE`) that renders
//! the operations of `/openapi.json`.

use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use schemars::JsonSchema;
use serde_json::Value;
pub use turnstone_openapi::{Api, ApiRoute, Param, ParamIn, Reply, SchemaFn};
use turnstone_proto::api::{
    ApproveBody, CancelBody, CloseWorkstreamBody, CommandBody, CreateWorkstreamBody,
    CreateWorkstreamReply, Dashboard, Health, PlanBody, QueueList, SendBody, SendOutcomes,
    SendOutcomesBody, WorkstreamList,
};
use turnstone_proto::routes::{Lookup, NODE_ROUTES, lookup};
use turnstone_runtime::auth::Access;

use super::login::{AuthStatusReply, LoginBody, LoginReply, WhoamiReply};
use super::memories::{
    DeleteMemoryReply, MemoryList, MemoryRow, ModelList, SaveMemoryBody, SearchMemoriesBody,
};
use super::policies::VerdictList;
use super::posture::{PostureBody, PostureReply};
use super::skills::{AdminSkillList, DeleteSkillReply, SkillBody, SkillList, SkillRow};
use super::state::Node;
use turnstone_accounts::policies::{DeletePolicyReply, PolicyBody, PolicyList, PolicyRow};

/// `info.title` of the document.
pub const TITLE: &str = "turnstone Server API";

/// What the node's route table says `(method, path)` needs (`/metrics` as by default,
/// public). An operation without a row (which the route tests refuse) is documented as
/// needing `read`, as the auth layer would refuse it anyway.
pub fn access(method: &str, path: &str) -> Access {
    match lookup(NODE_ROUTES, method, path) {
        Lookup::Entry(needs) => Access::of_route(needs, false),
        Lookup::OtherMethod | Lookup::Missing => {
            Access::Requires(turnstone_runtime::auth::Scope::Read)
        }
    }
}

/// The node's API for the shared generator.
pub const API: Api = Api {
    title: TITLE,
    version: env!("CARGO_PKG_VERSION"),
    description: "The HTTP API of a Turnstone node. Errors are `{\"error\": \"...\"}`. \
                  Credentials: `Authorization: Bearer <token>` or the `turnstone_auth` \
                  cookie set by login.",
    routes: ROUTES,
    access,
};

/// Builds the document from [`ROUTES`] (`turnstone_openapi::document`).
pub fn document() -> Value {
    turnstone_openapi::document(&API)
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
const VERDICT_LIST_PARAMS: [Param; 6] = [
    Param::query("ws_id", false, "Only this workstream's verdicts."),
    Param::query(
        "risk_level",
        false,
        "`none`, `low`, `medium`, `high` or `critical`.",
    ),
    Param::query("since", false, "Inclusive ISO timestamp."),
    Param::query("until", false, "Inclusive ISO timestamp."),
    Param::query("limit", false, "1–1000, default 100."),
    Param::query("offset", false, "Rows to skip, default 0."),
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
    ApiRoute::post("/v1/api/_internal/config-reload", "internal")
        .summary("Re-read the stored cluster settings (storing the console's first when given)")
        .body::<turnstone_proto::settings::ConfigReloadBody>()
        .json::<turnstone_proto::settings::ConfigReloadReply>()
        .errors(&[400, 503]),
    ApiRoute::post("/v1/api/_internal/model-reload", "internal")
        .summary("Rebuild the model registry from the config file and the stored definitions")
        .body::<turnstone_proto::settings::ModelReloadBody>()
        .json::<Value>()
        .errors(&[400, 422, 503]),
    ApiRoute::post("/v1/api/_internal/release", "internal")
        .summary("Let go of a workstream another node owns now (its bridge found it moved)")
        .body::<turnstone_proto::api::ReleaseBody>()
        .errors(&[400, 404, 409]),
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
    // User, token and role administration and the usage report (approve scope; the original
    // had no node admin routes, its OpenAPI document none either; the shared handlers of
    // `turnstone_accounts`): documented in docs/api.md.
    ("get", "/v1/api/admin/users"),
    ("post", "/v1/api/admin/users"),
    ("put", "/v1/api/admin/users/{user_id}"),
    ("delete", "/v1/api/admin/users/{user_id}"),
    ("put", "/v1/api/admin/users/{user_id}/roles"),
    ("get", "/v1/api/admin/tokens"),
    ("post", "/v1/api/admin/tokens"),
    ("delete", "/v1/api/admin/tokens/{token_id}"),
    ("get", "/v1/api/admin/roles"),
    ("post", "/v1/api/admin/roles"),
    ("put", "/v1/api/admin/roles/{role_id}"),
    ("delete", "/v1/api/admin/roles/{role_id}"),
    ("get", "/v1/api/admin/usage"),
];

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
    Html(turnstone_openapi::DOCS_PAGE)
}

/// The two public routes of this module.
pub fn routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/openapi.json", get(openapi_json))
        .route("/docs", get(docs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_and_response_schemas_of_one_name_agree() {
        let (doc, conflicts) = turnstone_openapi::assemble(&API);
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
        assert_eq!(
            whoami["security"],
            turnstone_openapi::security_requirement()
        );
        assert!(whoami["responses"]["401"].is_object());
        let approve = &doc["paths"]["/v1/api/approve"]["post"];
        assert_eq!(
            approve["description"],
            "Requires a token with the `approve` scope."
        );
    }
}
