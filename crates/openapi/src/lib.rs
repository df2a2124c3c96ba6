//! # turnstone-openapi
//!
//! The OpenAPI 3.1 documents of the node and the console, from one generator: a service
//! writes its table of documented operations ([`ApiRoute`]: method, path, summary,
//! parameters, the Rust types of the request and response bodies) and says what each route
//! needs (its auth table, through [`Api::access`]); [`document`] turns that into the
//! document, with JSON Schemas derived from the types (`schemars`), so a change to a wire
//! type changes the document. [`DOCS_PAGE`] is the self-contained `/docs` page (no CDN,
//! works offline) that renders a service's `/openapi.json`.

use std::collections::BTreeSet;

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};
use turnstone_proto::api::{ErrorReply, StatusReply};
use turnstone_runtime::auth::Access;

/// Writes the schema of one Rust type into a generator and returns a reference to it.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// [`SchemaFn`] of `T`.
pub fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
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

impl Param {
    /// A required path parameter (`{name}` in the route's path).
    pub const fn path(name: &'static str, description: &'static str) -> Self {
        Self {
            name,
            location: ParamIn::Path,
            required: true,
            count: false,
            description,
        }
    }

    /// An optional query parameter; `count`: a non-negative integer (a limit or an offset).
    pub const fn query(name: &'static str, count: bool, description: &'static str) -> Self {
        Self {
            name,
            location: ParamIn::Query,
            required: false,
            count,
            description,
        }
    }
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
    pub const fn new(method: &'static str, path: &'static str, tag: &'static str) -> Self {
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

    pub const fn get(path: &'static str, tag: &'static str) -> Self {
        Self::new("get", path, tag)
    }

    pub const fn post(path: &'static str, tag: &'static str) -> Self {
        Self::new("post", path, tag)
    }

    pub const fn put(path: &'static str, tag: &'static str) -> Self {
        Self::new("put", path, tag)
    }

    pub const fn delete(path: &'static str, tag: &'static str) -> Self {
        Self::new("delete", path, tag)
    }

    pub const fn summary(mut self, summary: &'static str) -> Self {
        self.summary = summary;
        self
    }

    pub const fn body<T: JsonSchema>(mut self) -> Self {
        self.request = Some(schema_of::<T>);
        self
    }

    pub const fn json<T: JsonSchema>(mut self) -> Self {
        self.reply = Reply::Json(schema_of::<T>);
        self
    }

    pub const fn reply(mut self, reply: Reply) -> Self {
        self.reply = reply;
        self
    }

    pub const fn params(mut self, params: &'static [Param]) -> Self {
        self.params = params;
        self
    }

    pub const fn errors(mut self, errors: &'static [u16]) -> Self {
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
}

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
    api: &Api,
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

    match (api.access)(route.method, route.path).scope() {
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

pub fn security_requirement() -> Value {
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

/// A service's API, as documented.
#[derive(Clone, Copy)]
pub struct Api {
    /// `info.title`.
    pub title: &'static str,
    /// `info.version`.
    pub version: &'static str,
    /// `info.description` (Markdown).
    pub description: &'static str,
    /// Every documented operation, in document order.
    pub routes: &'static [ApiRoute],
    /// What `(method, path)` needs, from the service's auth table (the same the auth layer
    /// enforces).
    pub access: fn(&str, &str) -> Access,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Api({}, {} routes)", self.title, self.routes.len())
    }
}

/// Builds the document. Request schemas describe what is accepted (every field optional, as
/// decoding is tolerant); response schemas what is sent.
pub fn document(api: &Api) -> Value {
    let (doc, conflicts) = assemble(api);
    for name in conflicts {
        // The same name read and written differently: the response form is kept.
        tracing::warn!(schema = %name, "request and response schemas differ");
    }
    doc
}

/// The document, and the names of schemas whose request and response forms differ.
pub fn assemble(api: &Api) -> (Value, Vec<String>) {
    let mut requests = generator(false);
    let mut replies = generator(true);
    let error_ref = replies.subschema_for::<ErrorReply>().to_value();

    let mut paths = Map::new();
    for route in api.routes {
        let op = operation(api, route, &mut requests, &mut replies, &error_ref);
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
            "title": api.title,
            "version": api.version,
            "description": api.description,
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

/// The `/docs` page: renders the operations of `/openapi.json` (same origin).
pub const DOCS_PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API</title>
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
  <h1 id="title">API</h1>
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
    use turnstone_runtime::auth::Scope;

    fn access(method: &str, path: &str) -> Access {
        match (method, path) {
            ("post", "/login") => Access::Public,
            ("post", _) => Access::Requires(Scope::Approve),
            _ => Access::Requires(Scope::Read),
        }
    }

    const ROUTES: &[ApiRoute] = &[
        ApiRoute::post("/login", "auth").summary("Sign in"),
        ApiRoute::get("/v1/api/things/{id}", "things")
            .json::<StatusReply>()
            .errors(&[404]),
        ApiRoute::post("/v1/api/things", "things").body::<Value>(),
    ];

    const API: Api = Api {
        title: "Test API",
        version: "1.2.3",
        description: "Things.",
        routes: ROUTES,
        access,
    };

    #[test]
    fn operation_ids_follow_the_original() {
        assert_eq!(ROUTES[1].operation_id(), "v1_api_things_id_get");
        assert_eq!(ROUTES[0].operation_id(), "login_post");
    }

    #[test]
    fn security_and_errors_follow_the_access_table() {
        let (doc, conflicts) = assemble(&API);
        assert!(conflicts.is_empty(), "{conflicts:?}");
        assert_eq!(doc["info"]["title"], "Test API");
        assert_eq!(doc["info"]["version"], "1.2.3");
        let login = &doc["paths"]["/login"]["post"];
        assert_eq!(login["security"], json!([]));
        assert!(login["responses"]["401"].is_null());
        let get = &doc["paths"]["/v1/api/things/{id}"]["get"];
        assert_eq!(get["x-required-scope"], "read");
        for status in ["200", "401", "403", "404"] {
            assert!(get["responses"][status].is_object(), "{status}");
        }
        let post = &doc["paths"]["/v1/api/things"]["post"];
        assert_eq!(
            post["description"],
            "Requires a token with the `approve` scope."
        );
        assert!(post["requestBody"].is_object());
        assert!(post["responses"]["413"].is_object());
    }
}
