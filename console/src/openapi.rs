//! The console's OpenAPI 3.1 document (`GET /openapi.json`) and its `/docs` page, from the
//! generator the node uses (`turnstone-openapi`). [`ROUTES`] documents the console's own
//! routes; what each needs comes from [`crate::routes::CONSOLE_ROUTES`] (what the auth layer
//! enforces). The cluster routes answer the original console's JSON, documented as free-form
//! objects; the account and schedule routes with their Rust types. Routes left out (the UI,
//! `/metrics`, the document, the proxy to nodes) are in [`UNDOCUMENTED`]; a test checks that
//! every row of the route table is in one of the two lists.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;
use turnstone_accounts::login::{AuthStatusReply, LoginBody, LoginReply};
use turnstone_accounts::policies::{PolicyBody, PolicyList};
use turnstone_accounts::roles::{RoleBody, RoleList, RoleView};
use turnstone_accounts::users::{
    NewTokenBody, NewUserBody, SetupReply, TokenList, TokenView, UpdateUserBody, UserList,
    UserRolesBody, UserView,
};
use turnstone_openapi::{Api, ApiRoute, Param};
use turnstone_proto::routes::template_for_path;
use turnstone_runtime::auth::{Access, Scope};

use crate::cluster_settings::{ModelBody, SettingBody};
use crate::routes::CONSOLE_ROUTES;
use crate::schedules::TaskBody;

/// `info.title` of the document.
pub const TITLE: &str = "turnstone Console API";

/// What the console's route table says `(method, path)` needs (`read` for a path it lacks,
/// as the auth layer would refuse it anyway).
pub fn access(method: &str, path: &str) -> Access {
    let template = template_for_path(CONSOLE_ROUTES, path);
    crate::routes::route_access(&method.to_ascii_uppercase(), template, None)
        .unwrap_or(Access::Requires(Scope::Read))
}

const NODE_ID: [Param; 1] = [Param::path("node_id", "The node.")];
const USER_ID: [Param; 1] = [Param::path("user_id", "The user.")];
const TOKEN_ID: [Param; 1] = [Param::path("token_id", "The token.")];
const ROLE_ID: [Param; 1] = [Param::path("role_id", "The role.")];
const TASK_ID: [Param; 1] = [Param::path("task_id", "The scheduled task.")];
const RUNS: [Param; 2] = [
    Param::path("task_id", "The scheduled task."),
    Param::query(
        "limit",
        true,
        "Most runs, newest first (1..1000, default 50).",
    ),
];
const NODES: [Param; 3] = [
    Param::query("sort", false, "`activity` (default), `tokens` or `name`."),
    Param::query("limit", true, "1..1000, default 100."),
    Param::query("offset", true, "0..10000."),
];
const WORKSTREAMS: [Param; 6] = [
    Param::query("state", false, "Only this state."),
    Param::query("node", false, "Only this node."),
    Param::query("search", false, "Substring of name, title or node."),
    Param::query("sort", false, "`state` (default), `tokens` or `name`."),
    Param::query("page", true, "From 1."),
    Param::query("per_page", true, "1..200, default 50."),
];
const TOKENS: [Param; 1] = [Param::query("user_id", false, "Only this user's tokens.")];
const WATCH_ID: [Param; 1] = [Param::path("watch_id", "The watch.")];
const SETTING_KEY: [Param; 1] = [Param::path(
    "key",
    "The setting, e.g. `server.approval_timeout`.",
)];
const SETTING_DELETE: [Param; 2] = [
    Param::path("key", "The setting."),
    Param::query(
        "node_id",
        false,
        "The node's override to remove (default: the global value).",
    ),
];
const AUDIT: [Param; 3] = [
    Param::query("user_id", false, "Only this user's changes."),
    Param::query("action", false, "Only this action, e.g. `setting.update`."),
    Param::query(
        "limit",
        true,
        "Most events, newest first (1..1000, default 100).",
    ),
];
const DEFINITION_ID: [Param; 1] = [Param::path("definition_id", "The model definition.")];
const POLICY_ID: [Param; 1] = [Param::path("policy_id", "The tool policy.")];
const SKILL_NAME: [Param; 1] = [Param::path("name", "The skill.")];
const MEMORIES: [Param; 5] = [
    Param::query("node_id", false, "Only this node (default: every node)."),
    Param::query(
        "type",
        false,
        "`user`, `project`, `feedback` or `reference`.",
    ),
    Param::query("scope", false, "`global`, `workstream` or `user`."),
    Param::query("scope_id", false, "The workstream or user id of the scope."),
    Param::query(
        "limit",
        true,
        "Most memories per node (1..200, default 100).",
    ),
];
const MEMORY_DELETE: [Param; 4] = [
    Param::path("name", "The memory."),
    Param::query("node_id", false, "The node holding it (required)."),
    Param::query(
        "scope",
        false,
        "`global` (default), `workstream` or `user`.",
    ),
    Param::query("scope_id", false, "The workstream or user id of the scope."),
];

/// Every documented operation, in document order.
pub const ROUTES: &[ApiRoute] = &[
    ApiRoute::get("/health", "health")
        .summary("Liveness, with node and workstream counts")
        .json::<Value>(),
    ApiRoute::get("/ready", "health")
        .summary("Readiness: 503 while stopping or while Redis does not answer")
        .json::<Value>()
        .errors(&[503]),
    ApiRoute::get("/v1/api/cluster/overview", "cluster")
        .summary("Totals across the cluster: nodes, workstreams by state, tokens, drift")
        .json::<Value>(),
    ApiRoute::get("/v1/api/cluster/nodes", "cluster")
        .summary("Nodes with their counts, health and status")
        .params(&NODES)
        .json::<Value>()
        .errors(&[400]),
    ApiRoute::get("/v1/api/cluster/workstreams", "cluster")
        .summary("Workstreams of every node, filtered, sorted and paged")
        .params(&WORKSTREAMS)
        .json::<Value>()
        .errors(&[400]),
    ApiRoute::post("/v1/api/cluster/workstreams/new", "cluster")
        .summary("Create a workstream through the queue: `auto`, `pool` or a node")
        .body::<Value>()
        .json::<Value>()
        .errors(&[404, 503]),
    ApiRoute::get("/v1/api/cluster/node/{node_id}", "cluster")
        .summary("One node with its workstreams")
        .params(&NODE_ID)
        .json::<Value>()
        .errors(&[400, 404]),
    ApiRoute::get("/v1/api/cluster/snapshot", "cluster")
        .summary("Every node with its workstreams, and the overview")
        .json::<Value>(),
    ApiRoute::get("/v1/api/cluster/events", "cluster")
        .summary("The cluster event stream: a snapshot, then every event")
        .reply(turnstone_openapi::Reply::EventStream),
    ApiRoute::get("/v1/api/models", "cluster")
        .summary("Model aliases of the cluster (the enabled stored definitions)")
        .json::<Value>()
        .errors(&[503]),
    ApiRoute::get("/v1/api/skills", "cluster")
        .summary("Enabled skills in the console's store")
        .json::<Value>()
        .errors(&[503]),
    ApiRoute::get("/v1/api/admin/watches", "fan-out")
        .summary("Watches of every node")
        .json::<Value>(),
    ApiRoute::post("/v1/api/admin/watches/{watch_id}/cancel", "fan-out")
        .summary("Cancel a watch on its node (`node_id` in the body or query)")
        .params(&WATCH_ID)
        .json::<Value>()
        .errors(&[400, 404, 502]),
    ApiRoute::get("/v1/api/admin/mcp-servers", "fan-out")
        .summary("MCP servers of every node, with each node's status")
        .json::<Value>(),
    ApiRoute::post("/v1/api/admin/mcp-servers/reload", "fan-out")
        .summary("Reload the MCP servers of every node")
        .json::<Value>(),
    ApiRoute::get("/v1/api/admin/models", "fan-out")
        .summary("Models of every node, and the stored model definitions (never a key)")
        .json::<Value>(),
    ApiRoute::post("/v1/api/admin/models", "settings")
        .summary("Add a model definition (alias, model, provider, base_url, api_key): 201, pushed to every node")
        .body::<ModelBody>()
        .json::<Value>()
        .errors(&[201, 400, 503]),
    ApiRoute::post("/v1/api/admin/models/reload", "settings")
        .summary("Push the model definitions to every node and reload their registries")
        .json::<Value>()
        .errors(&[503]),
    ApiRoute::put("/v1/api/admin/models/{definition_id}", "settings")
        .summary("Change a model definition; pushed to every node")
        .params(&DEFINITION_ID)
        .body::<ModelBody>()
        .json::<Value>()
        .errors(&[400, 404, 503]),
    ApiRoute::delete("/v1/api/admin/models/{definition_id}", "settings")
        .summary("Delete a model definition; pushed to every node")
        .params(&DEFINITION_ID)
        .json::<Value>()
        .errors(&[404, 503]),
    ApiRoute::get("/v1/api/admin/audit", "settings")
        .summary("The audit log of admin changes: who, what, when, from where")
        .params(&AUDIT)
        .json::<Value>()
        .errors(&[400, 503]),
    turnstone_accounts::usage::USAGE_API_ROUTE,
    ApiRoute::get("/v1/api/admin/settings", "settings")
        .summary("Stored cluster settings and the accepted keys with their types")
        .json::<Value>()
        .errors(&[503]),
    ApiRoute::put("/v1/api/admin/settings/{key}", "settings")
        .summary("Set a cluster setting (globally or for one node); every node reloads")
        .params(&SETTING_KEY)
        .body::<SettingBody>()
        .json::<Value>()
        .errors(&[400, 503]),
    ApiRoute::delete("/v1/api/admin/settings/{key}", "settings")
        .summary("Remove a setting (nodes fall back to their flags and file); every node reloads")
        .params(&SETTING_DELETE)
        .json::<Value>()
        .errors(&[400, 404, 503]),
    ApiRoute::get("/v1/api/admin/policies", "governance")
        .summary("Stored tool policies in evaluation order")
        .json::<PolicyList>()
        .errors(&[503]),
    ApiRoute::post("/v1/api/admin/policies", "governance")
        .summary("Add a tool policy (`name`, `tool_pattern`, `action`): 201, pushed to every node")
        .body::<PolicyBody>()
        .json::<Value>()
        .errors(&[201, 400, 503]),
    ApiRoute::put("/v1/api/admin/policies/{policy_id}", "governance")
        .summary("Change a tool policy; pushed to every node")
        .params(&POLICY_ID)
        .body::<PolicyBody>()
        .json::<Value>()
        .errors(&[400, 403, 404, 503]),
    ApiRoute::delete("/v1/api/admin/policies/{policy_id}", "governance")
        .summary("Delete a tool policy; pushed to every node")
        .params(&POLICY_ID)
        .json::<Value>()
        .errors(&[403, 404, 503]),
    ApiRoute::get("/v1/api/admin/skills", "governance")
        .summary("Every stored skill, enabled or not")
        .json::<Value>()
        .errors(&[503]),
    ApiRoute::post("/v1/api/admin/skills", "governance")
        .summary("Add a skill (`name`, `content`, …): 201, pushed to every node")
        .body::<Value>()
        .json::<Value>()
        .errors(&[201, 400, 409, 503]),
    ApiRoute::put("/v1/api/admin/skills/{name}", "governance")
        .summary("Change a skill's fields; pushed to every node")
        .params(&SKILL_NAME)
        .body::<Value>()
        .json::<Value>()
        .errors(&[400, 403, 404, 503]),
    ApiRoute::delete("/v1/api/admin/skills/{name}", "governance")
        .summary("Delete a skill; pushed to every node")
        .params(&SKILL_NAME)
        .json::<Value>()
        .errors(&[403, 404, 503]),
    ApiRoute::get("/v1/api/admin/memories", "fan-out")
        .summary("Memories of every node (a shared one listed once, with its nodes)")
        .params(&MEMORIES)
        .json::<Value>()
        .errors(&[400, 404]),
    ApiRoute::delete("/v1/api/admin/memories/{name}", "fan-out")
        .summary("Delete a memory on its node (relayed)")
        .params(&MEMORY_DELETE)
        .json::<Value>()
        .errors(&[400, 404, 502]),
    ApiRoute::get("/v1/api/admin/users", "users")
        .summary("Stored users with their roles")
        .json::<UserList>()
        .errors(&[503]),
    ApiRoute::post("/v1/api/admin/users", "users")
        .summary("Create a user (`username`, `display_name`, `password`, `role`): 201")
        .body::<NewUserBody>()
        .json::<UserView>()
        .errors(&[201, 503]),
    ApiRoute::put("/v1/api/admin/users/{user_id}", "users")
        .summary("Change a user's display name and/or password")
        .params(&USER_ID)
        .body::<UpdateUserBody>()
        .json::<UserView>()
        .errors(&[404, 503]),
    ApiRoute::delete("/v1/api/admin/users/{user_id}", "users")
        .summary("Delete a user with their tokens")
        .params(&USER_ID)
        .json::<Value>()
        .errors(&[404, 503]),
    ApiRoute::put("/v1/api/admin/users/{user_id}/roles", "users")
        .summary("Replace a user's roles")
        .params(&USER_ID)
        .body::<UserRolesBody>()
        .json::<UserView>()
        .errors(&[404, 503]),
    ApiRoute::get("/v1/api/admin/tokens", "users")
        .summary("API tokens (never the token itself)")
        .params(&TOKENS)
        .json::<TokenList>()
        .errors(&[503]),
    ApiRoute::post("/v1/api/admin/tokens", "users")
        .summary("Create a `ts_` API token: the raw token only in this 201")
        .body::<NewTokenBody>()
        .json::<TokenView>()
        .errors(&[201, 404, 503]),
    ApiRoute::delete("/v1/api/admin/tokens/{token_id}", "users")
        .summary("Delete an API token")
        .params(&TOKEN_ID)
        .json::<Value>()
        .errors(&[404, 503]),
    ApiRoute::get("/v1/api/admin/roles", "roles")
        .summary("Roles, built-in first")
        .json::<RoleList>()
        .errors(&[503]),
    ApiRoute::post("/v1/api/admin/roles", "roles")
        .summary("Create a role (`name`, `permissions`): 201")
        .body::<RoleBody>()
        .json::<RoleView>()
        .errors(&[201, 503]),
    ApiRoute::put("/v1/api/admin/roles/{role_id}", "roles")
        .summary("Change a custom role's display name and/or permissions")
        .params(&ROLE_ID)
        .body::<RoleBody>()
        .json::<RoleView>()
        .errors(&[404, 503]),
    ApiRoute::delete("/v1/api/admin/roles/{role_id}", "roles")
        .summary("Delete a custom role (taken from every user); built-in roles are refused")
        .params(&ROLE_ID)
        .json::<Value>()
        .errors(&[400, 404, 503]),
    ApiRoute::get("/v1/api/admin/schedules", "schedules")
        .summary("Scheduled tasks with their next run and last result")
        .json::<Value>()
        .errors(&[503]),
    ApiRoute::post("/v1/api/admin/schedules", "schedules")
        .summary("Create a cron or `at` task: 201")
        .body::<TaskBody>()
        .json::<Value>()
        .errors(&[201, 503]),
    ApiRoute::get("/v1/api/admin/schedules/{task_id}", "schedules")
        .summary("One scheduled task")
        .params(&TASK_ID)
        .json::<Value>()
        .errors(&[404, 503]),
    ApiRoute::put("/v1/api/admin/schedules/{task_id}", "schedules")
        .summary("Change a task; its next run is worked out anew")
        .params(&TASK_ID)
        .body::<TaskBody>()
        .json::<Value>()
        .errors(&[404, 503]),
    ApiRoute::delete("/v1/api/admin/schedules/{task_id}", "schedules")
        .summary("Delete a task with its runs")
        .params(&TASK_ID)
        .json::<Value>()
        .errors(&[404, 503]),
    ApiRoute::get("/v1/api/admin/schedules/{task_id}/runs", "schedules")
        .summary("A task's runs, newest first")
        .params(&RUNS)
        .json::<Value>()
        .errors(&[400, 404, 503]),
    ApiRoute::post("/v1/api/auth/login", "auth")
        .summary("Sign in with a token or a stored user's password")
        .body::<LoginBody>()
        .json::<LoginReply>()
        .errors(&[401, 429, 500]),
    ApiRoute::post("/v1/api/auth/logout", "auth")
        .summary("Sign out (a user's sessions end)")
        .json::<Value>(),
    ApiRoute::get("/v1/api/auth/status", "auth")
        .summary("Whether auth is on and users exist")
        .json::<AuthStatusReply>(),
    ApiRoute::post("/v1/api/auth/setup", "auth")
        .summary("Create the first user (admin) once; needs the full-access token")
        .body::<NewUserBody>()
        .json::<SetupReply>()
        .errors(&[401, 409, 503]),
    ApiRoute::get("/v1/api/auth/whoami", "auth")
        .summary("The caller")
        .json::<Value>(),
];

/// Routes the console serves that the document leaves out: the dashboard, `/metrics`, the
/// document and its page, and the proxy to each node (documented by the node's own).
pub const UNDOCUMENTED: &[(&str, &str)] = &[
    ("get", "/"),
    ("get", "/static/{*path}"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("get", "/docs"),
    ("get", "/node/{node_id}"),
    ("get", "/node/{node_id}/"),
    ("*", crate::routes::NODE_PROXY_ROUTE),
];

/// The console's API for the shared generator.
pub const API: Api = Api {
    title: TITLE,
    version: env!("CARGO_PKG_VERSION"),
    description: "The HTTP API of the Turnstone console. Errors are `{\"error\": \"...\"}`. \
                  Credentials: `Authorization: Bearer <token>` or the `turnstone_auth` cookie \
                  set by login.",
    routes: ROUTES,
    access,
};

static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    serde_json::to_string_pretty(&turnstone_openapi::document(&API))
        .unwrap_or_else(|_| "{}".to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_or_listed_as_undocumented() {
        // A documented path names the route it is served by (`{node_id}` for `{*node_id}`).
        let served_by = |path: &str| template_for_path(CONSOLE_ROUTES, path);
        for (method, template, _) in CONSOLE_ROUTES {
            let m = method.to_ascii_lowercase();
            let documented = ROUTES
                .iter()
                .any(|r| r.method == m && served_by(r.path) == Some(*template));
            let left_out = UNDOCUMENTED
                .iter()
                .any(|(um, ut)| (*um == m || *um == "*") && ut == template);
            assert!(
                documented ^ left_out,
                "{method} {template}: documented {documented}, left out {left_out}"
            );
        }
        for r in ROUTES {
            assert!(
                CONSOLE_ROUTES
                    .iter()
                    .any(|(m, t, _)| m.eq_ignore_ascii_case(r.method)
                        && served_by(r.path) == Some(*t)),
                "{} {} is documented but not served",
                r.method,
                r.path
            );
        }
    }

    #[test]
    fn schemas_agree_and_security_follows_the_route_table() {
        let (doc, conflicts) = turnstone_openapi::assemble(&API);
        assert_eq!(conflicts, Vec::<String>::new());
        assert_eq!(doc["info"]["title"], TITLE);
        let login = &doc["paths"]["/v1/api/auth/login"]["post"];
        assert_eq!(login["security"], serde_json::json!([]));
        let users = &doc["paths"]["/v1/api/admin/users"]["get"];
        assert_eq!(users["x-required-scope"], "approve");
        let create = &doc["paths"]["/v1/api/cluster/workstreams/new"]["post"];
        assert_eq!(create["x-required-scope"], "write");
        let node = &doc["paths"]["/v1/api/cluster/node/{node_id}"]["get"];
        assert_eq!(node["x-required-scope"], "read");
        let schedules = &doc["paths"]["/v1/api/admin/schedules/{task_id}"]["put"];
        assert_eq!(schedules["x-required-scope"], "approve");
        assert!(doc["components"]["schemas"]["UserView"].is_object());
    }
}
