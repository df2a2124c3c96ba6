//! `web_search` over MCP: `[tools] search_backend = "mcp:<server>:<tool>"` sends every search
//! to that tool of one of the node's MCP servers ([`McpSearchBackend`], the node's
//! implementation of [`SearchBackend`]).
//!
//! * **Arguments** follow the tool's input schema: the query goes to `query` (or `q`,
//!   `search`, `search_query`, … — else the only string parameter), the result count to
//!   `max_results`/`count`/`limit`/`num_results`/… when there is one (within the schema's
//!   `minimum`/`maximum`), the category to `category`/`categories`/`topic` when the schema
//!   has it (and its `enum`, if any, allows it).
//! * **Results**: JSON (structured content, or a text item that parses) with title / URL /
//!   snippet-like fields — at the top, or under `results`, `items`, `web.results`, … —
//!   becomes one hit per entry; `resource_link` items are hits too; plain text becomes one
//!   hit per block (or line) that carries a URL, else the text itself is the one result.
//! * **Errors** are readable tool errors: no MCP servers, server not configured or not
//!   connected, tool missing (with what the server offers), the tool's own error.
//!
//! The MCP manager starts after the tools are built, so the backend finds it through an
//! [`McpSlot`] the node fills when MCP starts; a search while a server is still connecting
//! waits for it (bounded).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use turnstone_mcp::{McpManager, McpTool, McpToolResult, ServerState, qualified_name};
use turnstone_tools::web::{SearchBackend, SearchBackendSpec, SearchHit, SearchRequest};

/// Parameter names that take the query, in order of preference.
const QUERY_KEYS: [&str; 10] = [
    "query",
    "q",
    "search",
    "search_query",
    "searchQuery",
    "term",
    "keywords",
    "text",
    "input",
    "prompt",
];
/// Parameter names that take the number of results.
const COUNT_KEYS: [&str; 10] = [
    "max_results",
    "maxResults",
    "count",
    "limit",
    "num_results",
    "numResults",
    "top_k",
    "size",
    "n",
    "k",
];
/// Parameter names that take the category.
const CATEGORY_KEYS: [&str; 3] = ["category", "categories", "topic"];
/// Keys under which JSON results keep their list, tried before any other key.
const LIST_KEYS: [&str; 11] = [
    "results",
    "items",
    "hits",
    "organic_results",
    "organic",
    "web",
    "news",
    "documents",
    "data",
    "result",
    "value",
];
const TITLE_KEYS: [&str; 3] = ["title", "name", "headline"];
const URL_KEYS: [&str; 6] = ["url", "link", "href", "uri", "source_url", "source"];
const SNIPPET_KEYS: [&str; 8] = [
    "snippet",
    "content",
    "description",
    "body",
    "summary",
    "abstract",
    "excerpt",
    "text",
];
/// How deep JSON results are searched for their list.
const MAX_DEPTH: usize = 4;
/// Characters of a tool's error text passed on.
const MAX_ERROR_CHARS: usize = 500;

/// Where the MCP search backend finds the node's MCP manager: empty until MCP starts (and
/// for good on a node without MCP servers). Clones share the slot.
#[derive(Clone, Default)]
pub struct McpSlot(Arc<OnceLock<Arc<McpManager>>>);

impl std::fmt::Debug for McpSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSlot")
            .field("filled", &self.0.get().is_some())
            .finish()
    }
}

impl McpSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fills the slot (once; later calls change nothing).
    pub fn set(&self, manager: Arc<McpManager>) {
        let _ = self.0.set(manager);
    }

    /// The manager, once MCP started.
    pub fn get(&self) -> Option<&Arc<McpManager>> {
        self.0.get()
    }
}

/// The backend `[tools] search_backend` asks for: `Some` for `mcp:<server>:<tool>`, `None`
/// for SearxNG (built into the tool). An invalid value is an error.
pub fn backend_for(
    spec: Option<&str>,
    slot: &McpSlot,
) -> Result<Option<Arc<dyn SearchBackend>>, String> {
    match SearchBackendSpec::parse(spec.unwrap_or(""))? {
        SearchBackendSpec::Searxng => Ok(None),
        SearchBackendSpec::Mcp { server, tool } => Ok(Some(Arc::new(McpSearchBackend::new(
            server,
            tool,
            slot.clone(),
        )))),
    }
}

/// The MCP server `search_backend` names when none of `configured` has that name (worth a
/// warning at start: every search would fail).
pub fn unconfigured_server(spec: Option<&str>, configured: &[String]) -> Option<String> {
    match SearchBackendSpec::parse(spec.unwrap_or("")) {
        Ok(SearchBackendSpec::Mcp { server, .. }) if !configured.contains(&server) => Some(server),
        _ => None,
    }
}

/// `web_search` answered by the MCP tool `tool` of server `server`.
#[derive(Debug, Clone)]
pub struct McpSearchBackend {
    server: String,
    tool: String,
    slot: McpSlot,
    wait: Duration,
}

impl McpSearchBackend {
    /// The backend for `mcp:{server}:{tool}`, finding the manager in `slot`.
    pub fn new(server: impl Into<String>, tool: impl Into<String>, slot: McpSlot) -> Self {
        Self {
            server: server.into(),
            tool: tool.into(),
            slot,
            wait: Duration::from_secs(15),
        }
    }

    /// How long a search waits for a server that is still connecting (default 15 s).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The tool, waiting (bounded) while its server connects or reconnects.
    async fn find_tool(&self, manager: &McpManager) -> Result<McpTool, String> {
        let qualified = qualified_name(&self.server, &self.tool);
        let deadline = tokio::time::Instant::now() + self.wait;
        let mut changes = manager.subscribe();
        loop {
            let Some(state) = manager.server_state(&self.server) else {
                return Err(format!(
                    "MCP server '{}' is not configured (configured: {})",
                    self.server,
                    list_or_none(&manager.server_names())
                ));
            };
            if let Some(tool) = manager.tool(&qualified) {
                return Ok(tool);
            }
            let waiting = matches!(
                state,
                ServerState::Connecting | ServerState::Reconnecting { .. }
            );
            let now = tokio::time::Instant::now();
            if state == ServerState::Ready {
                let offered: Vec<String> = manager
                    .tools_snapshot()
                    .into_iter()
                    .filter(|t| t.server == self.server)
                    .map(|t| t.name)
                    .collect();
                return Err(format!(
                    "MCP server '{}' has no tool '{}' (it offers: {})",
                    self.server,
                    self.tool,
                    list_or_none(&offered)
                ));
            }
            if !waiting || now >= deadline {
                return Err(format!(
                    "MCP server '{}' is not connected ({})",
                    self.server,
                    state.describe()
                ));
            }
            // A change of what is offered, or a short look again (a failure changes no
            // offer).
            let step = (deadline - now).min(Duration::from_millis(250));
            let _ = tokio::time::timeout(step, changes.changed()).await;
        }
    }
}

#[async_trait]
impl SearchBackend for McpSearchBackend {
    fn describe(&self) -> String {
        format!("mcp:{}:{}", self.server, self.tool)
    }

    async fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, String> {
        let backend = self.describe();
        let Some(manager) = self.slot.get() else {
            return Err(format!(
                "{backend}: this node has no MCP servers (configure [mcp.servers.{}] in \
                 config.toml, or --mcp-config)",
                self.server
            ));
        };
        let tool = self
            .find_tool(manager)
            .await
            .map_err(|e| format!("{backend}: {e}"))?;
        let args = arguments(&tool.input_schema, request);
        tracing::debug!(backend = %backend, %args, "MCP web search");
        let result = manager
            .call_tool(&tool.qualified_name, args)
            .await
            .map_err(|e| format!("{backend}: {e}"))?;
        if result.is_error {
            let text: String = result.text.chars().take(MAX_ERROR_CHARS).collect();
            return Err(format!("{backend}: the tool reported an error: {text}"));
        }
        let mut hits = hits_of(&result);
        hits.truncate(request.max_results.max(1));
        tracing::info!(backend = %backend, hits = hits.len(), "MCP web search answered");
        Ok(hits)
    }
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// The `tools/call` arguments for `request`, shaped by the tool's input schema.
fn arguments(schema: &Value, request: &SearchRequest) -> Value {
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let find = |keys: &[&'static str]| -> Option<&'static str> {
        keys.iter().find(|k| props.contains_key(**k)).copied()
    };
    let is_string = |p: &Value| p.get("type").and_then(Value::as_str) == Some("string");
    let query_key = find(&QUERY_KEYS)
        .map(str::to_string)
        .or_else(|| {
            // The only required string parameter, else the only string parameter.
            let strings: Vec<&String> = props
                .iter()
                .filter(|(_, p)| is_string(p))
                .map(|(k, _)| k)
                .collect();
            let required_strings: Vec<&&String> = strings
                .iter()
                .filter(|k| required.contains(&k.as_str()))
                .collect();
            match (required_strings.as_slice(), strings.as_slice()) {
                ([only], _) => Some((**only).clone()),
                (_, [only]) => Some((*only).clone()),
                _ => None,
            }
        })
        .unwrap_or_else(|| "query".to_string());
    let mut args = Map::new();
    args.insert(query_key, Value::String(request.query.clone()));

    if let Some(key) = find(&COUNT_KEYS) {
        let prop = &props[key];
        let mut n = request.max_results as f64;
        if let Some(max) = prop.get("maximum").and_then(Value::as_f64) {
            n = n.min(max);
        }
        if let Some(min) = prop.get("minimum").and_then(Value::as_f64) {
            n = n.max(min);
        }
        let n = n.max(0.0).round() as u64;
        let value = if is_string(prop) {
            Value::String(n.to_string())
        } else {
            json!(n)
        };
        args.insert(key.to_string(), value);
    }

    if let Some(key) = find(&CATEGORY_KEYS) {
        let prop = &props[key];
        let category = request.category.as_str();
        let allowed = prop
            .get("enum")
            .or_else(|| prop.get("items").and_then(|i| i.get("enum")))
            .and_then(Value::as_array);
        let pass = match allowed {
            Some(values) => values.iter().any(|v| v.as_str() == Some(category)),
            // A free-form field: "general" adds nothing unless the tool insists.
            None => category != "general" || required.contains(&key),
        };
        if pass {
            let value = if prop.get("type").and_then(Value::as_str) == Some("array") {
                json!([category])
            } else {
                json!(category)
            };
            args.insert(key.to_string(), value);
        }
    }
    Value::Object(args)
}

/// The hits of a tool's result: structured or JSON text first, then resource links, then
/// plain text.
fn hits_of(result: &McpToolResult) -> Vec<SearchHit> {
    if let Some(structured) = &result.structured_content {
        let hits = json_hits(structured, 0);
        if !hits.is_empty() {
            return hits;
        }
    }
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    let mut hits = Vec::new();
    let mut empty_list = result
        .structured_content
        .as_ref()
        .is_some_and(|s| is_empty_list(s, 0));
    for text in &texts {
        if let Ok(value) = serde_json::from_str::<Value>(text.trim()) {
            hits.extend(json_hits(&value, 0));
            empty_list |= is_empty_list(&value, 0);
        }
    }
    for item in &result.content {
        if item.get("type").and_then(Value::as_str) == Some("resource_link")
            && let Some(hit) = object_hit(item)
        {
            hits.push(hit);
        }
    }
    if !hits.is_empty() || empty_list {
        return hits;
    }
    text_hits(&texts.join("\n\n"))
}

/// Whether JSON says "no results": an empty list, at the top or under a list key.
fn is_empty_list(value: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match value {
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => LIST_KEYS
            .iter()
            .filter_map(|k| map.get(*k))
            .any(|v| is_empty_list(v, depth + 1)),
        Value::String(s) => {
            serde_json::from_str::<Value>(s.trim()).is_ok_and(|v| is_empty_list(&v, depth + 1))
        }
        _ => false,
    }
}

/// Hits in a JSON value: a list of result objects, an object holding one (under a known
/// key first), or a single result object.
fn json_hits(value: &Value, depth: usize) -> Vec<SearchHit> {
    if depth > MAX_DEPTH {
        return Vec::new();
    }
    match value {
        Value::Array(items) => {
            let hits: Vec<SearchHit> = items.iter().filter_map(object_hit).collect();
            if hits.is_empty() {
                // A list of lists or wrappers: the first that holds results.
                items
                    .iter()
                    .map(|i| json_hits(i, depth + 1))
                    .find(|h| !h.is_empty())
                    .unwrap_or_default()
            } else {
                hits
            }
        }
        Value::Object(map) => {
            for key in LIST_KEYS {
                // Arrays, objects, or a string holding JSON (FastMCP's `{"result": "…"}`).
                if let Some(inner) = map.get(key) {
                    let hits = json_hits(inner, depth + 1);
                    if !hits.is_empty() {
                        return hits;
                    }
                }
            }
            if let Some(hit) = object_hit(value) {
                return vec![hit];
            }
            map.iter()
                .filter(|(k, v)| {
                    !LIST_KEYS.contains(&k.as_str()) && (v.is_array() || v.is_object())
                })
                .map(|(_, v)| json_hits(v, depth + 1))
                .find(|h| !h.is_empty())
                .unwrap_or_default()
        }
        // A JSON string holding JSON (double-encoded results).
        Value::String(s) if depth < MAX_DEPTH => serde_json::from_str::<Value>(s.trim())
            .map(|v| json_hits(&v, depth + 1))
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// One result object: it needs a URL-like field.
fn object_hit(value: &Value) -> Option<SearchHit> {
    let map = value.as_object()?;
    let field = |keys: &[&str]| {
        keys.iter()
            .filter_map(|k| map.get(*k).and_then(Value::as_str))
            .map(str::trim)
            .find(|s| !s.is_empty())
            .map(str::to_string)
    };
    let url = field(&URL_KEYS)?;
    Some(SearchHit {
        title: field(&TITLE_KEYS).unwrap_or_default(),
        url,
        snippet: field(&SNIPPET_KEYS).unwrap_or_default(),
    })
}

/// Hits in plain text: one per block (blank-line separated) with a URL — or per line, when
/// the text is one block of several linked lines. Without any URL the text itself is the
/// one result (no URL, its text as the snippet).
fn text_hits(text: &str) -> Vec<SearchHit> {
    let text = text.trim();
    if text.is_empty() {
        return Vec::new();
    }
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut current = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                blocks.push(std::mem::take(&mut current));
            }
        } else {
            current.push(line.trim());
        }
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    if let [only] = blocks.as_slice() {
        // One block of several results: split before each `Title:` line, else per line.
        let is_title = |l: &str| split_label(strip_marker(l)).0.as_deref() == Some("title");
        if only.iter().filter(|l| is_title(l)).count() > 1 {
            let mut split: Vec<Vec<&str>> = Vec::new();
            for line in only {
                if is_title(line) || split.is_empty() {
                    split.push(Vec::new());
                }
                if let Some(last) = split.last_mut() {
                    last.push(*line);
                }
            }
            blocks = split;
        } else if only.iter().filter(|l| find_url(l).is_some()).count() > 1 {
            blocks = only.iter().map(|l| vec![*l]).collect();
        }
    }
    let hits: Vec<SearchHit> = blocks.iter().filter_map(|b| block_hit(b)).collect();
    if hits.is_empty() {
        return vec![SearchHit {
            title: String::new(),
            url: String::new(),
            snippet: text.to_string(),
        }];
    }
    hits
}

/// The hit of one block of lines, when one of them carries a URL.
fn block_hit(lines: &[&str]) -> Option<SearchHit> {
    let (url_line, url) = lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| find_url(l).map(|u| (i, u)))?;
    let mut title = String::new();
    let mut snippet = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let line = strip_marker(line);
        let (label, rest) = split_label(line);
        let rest = if i == url_line {
            without_url(rest, url)
        } else {
            rest.to_string()
        };
        if rest.is_empty() {
            continue;
        }
        match label.as_deref() {
            Some("title" | "name") if title.is_empty() => title = rest,
            Some("url" | "link" | "source") => {}
            Some(_) => snippet.push(rest),
            None if title.is_empty() && (i == 0 || i == url_line) => title = rest,
            None => snippet.push(rest),
        }
    }
    Some(SearchHit {
        title,
        url: url.to_string(),
        snippet: snippet.join(" "),
    })
}

/// The first `http(s)://` URL in `line`.
fn find_url(line: &str) -> Option<&str> {
    let start = line.find("https://").or_else(|| line.find("http://"))?;
    let rest = &line[start..];
    let end = rest
        .find(|c: char| c.is_whitespace() || matches!(c, ')' | '>' | ']' | '"' | '\'' | '`'))
        .unwrap_or(rest.len());
    let url = rest[..end].trim_end_matches(['.', ',', ';']);
    (url.len() > "https://".len()).then_some(url)
}

/// `line` without a list marker (`1.`, `-`, `*`, `•`).
fn strip_marker(line: &str) -> &str {
    let line = line.trim();
    let digits = line.trim_start_matches(|c: char| c.is_ascii_digit());
    if digits.len() < line.len()
        && let Some(rest) = digits
            .strip_prefix('.')
            .or_else(|| digits.strip_prefix(')'))
    {
        return rest.trim_start();
    }
    line.strip_prefix(['-', '*', '•'])
        .map(str::trim_start)
        .unwrap_or(line)
}

/// `Title: x` → (`title`, `x`); a line without a short label → (`None`, the line).
fn split_label(line: &str) -> (Option<String>, &str) {
    if let Some((label, rest)) = line.split_once(':') {
        let label = label.trim();
        if !label.is_empty()
            && label.len() <= 20
            && !rest.starts_with("//")
            && label
                .chars()
                .all(|c| c.is_alphabetic() || c == ' ' || c == '_')
        {
            return (Some(label.to_ascii_lowercase()), rest.trim());
        }
    }
    (None, line)
}

/// The text of a line around its URL: a markdown link's text, else the rest without the
/// URL and the punctuation that tied it on.
fn without_url(line: &str, url: &str) -> String {
    if let (Some(open), Some(close)) = (line.find('['), line.find("]("))
        && open < close
    {
        return line[open + 1..close].trim().to_string();
    }
    line.replacen(url, "", 1)
        .trim_matches(|c: char| c.is_whitespace() || "-–—|:()<>[]".contains(c))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(max: usize, category: &str) -> SearchRequest {
        SearchRequest {
            query: "rust async".into(),
            category: category.into(),
            max_results: max,
        }
    }

    fn hit(title: &str, url: &str, snippet: &str) -> SearchHit {
        SearchHit {
            title: title.into(),
            url: url.into(),
            snippet: snippet.into(),
        }
    }

    #[test]
    fn arguments_follow_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "q": {"type": "string"}, "limit": {"type": "integer", "maximum": 3},
            "topic": {"type": "string", "enum": ["general", "news"]}}});
        assert_eq!(
            arguments(&schema, &request(5, "news")),
            json!({"q": "rust async", "limit": 3, "topic": "news"})
        );
        // A category the enum does not allow is left out.
        assert_eq!(
            arguments(&schema, &request(2, "it")),
            json!({"q": "rust async", "limit": 2})
        );
        // No known names: the only required string parameter takes the query.
        let schema = json!({"type": "object", "required": ["needle"], "properties": {
            "needle": {"type": "string"}, "lang": {"type": "string"},
            "categories": {"type": "array", "items": {"type": "string"}},
            "count": {"type": "string"}}});
        assert_eq!(
            arguments(&schema, &request(4, "science")),
            json!({"needle": "rust async", "count": "4", "categories": ["science"]})
        );
        // A free-form category is not sent for "general"; no schema at all: `query`.
        assert_eq!(
            arguments(&json!({"type": "object"}), &request(4, "general")),
            json!({"query": "rust async"})
        );
    }

    #[test]
    fn json_results_in_common_shapes() {
        let expected = vec![
            hit("A", "https://a.example", "first"),
            hit("B", "https://b.example", "second"),
        ];
        let list = json!([
            {"title": "A", "url": "https://a.example", "snippet": "first"},
            {"name": "B", "link": "https://b.example", "description": "second"},
            {"title": "no url"}
        ]);
        assert_eq!(json_hits(&list, 0), expected);
        assert_eq!(
            json_hits(&json!({"query": "x", "results": list}), 0),
            expected
        );
        assert_eq!(json_hits(&json!({"web": {"results": list}}), 0), expected);
        assert_eq!(json_hits(&json!({"result": list.to_string()}), 0), expected);
        assert_eq!(
            json_hits(
                &json!({"title": "A", "url": "https://a.example", "content": "first"}),
                0
            ),
            expected[..1]
        );
        assert!(json_hits(&json!({"answer": 42}), 0).is_empty());
        assert!(is_empty_list(&json!({"query": "x", "results": []}), 0));
        assert!(is_empty_list(&json!({"result": "{\"results\": []}"}), 0));
        assert!(!is_empty_list(&json!({"results": list}), 0));
        assert!(!is_empty_list(&json!({"answer": "prose"}), 0));
    }

    #[test]
    fn plain_text_results() {
        let text = "1. Title: Tokio\nURL: https://tokio.rs\nDescription: An async runtime.\n\n\
                    2. Title: async-std\nURL: https://async.rs/.\nDescription: Another one.";
        assert_eq!(
            text_hits(text),
            [
                hit("Tokio", "https://tokio.rs", "An async runtime."),
                hit("async-std", "https://async.rs/", "Another one.")
            ]
        );
        let lines = "- [The Book](https://doc.rust-lang.org/book/)\n- Rust by Example - https://doc.rust-lang.org/rust-by-example/";
        assert_eq!(
            text_hits(lines),
            [
                hit("The Book", "https://doc.rust-lang.org/book/", ""),
                hit(
                    "Rust by Example",
                    "https://doc.rust-lang.org/rust-by-example/",
                    ""
                )
            ]
        );
        let packed = "Title: Tokio\nURL: https://tokio.rs\nDescription: Runtime.\n\
                      Title: Rayon\nURL: https://docs.rs/rayon\nDescription: Data parallelism.";
        assert_eq!(
            text_hits(packed),
            [
                hit("Tokio", "https://tokio.rs", "Runtime."),
                hit("Rayon", "https://docs.rs/rayon", "Data parallelism.")
            ]
        );
        assert_eq!(
            text_hits("  Rust 1.0 shipped in 2015.  "),
            [hit("", "", "Rust 1.0 shipped in 2015.")]
        );
        assert!(text_hits(" \n ").is_empty());
    }

    #[test]
    fn backend_specs() {
        let slot = McpSlot::new();
        assert!(backend_for(None, &slot).unwrap().is_none());
        assert!(backend_for(Some("searxng"), &slot).unwrap().is_none());
        let b = backend_for(Some("mcp:finder:search"), &slot)
            .unwrap()
            .unwrap();
        assert_eq!(b.describe(), "mcp:finder:search");
        let Err(err) = backend_for(Some("mcp:finder"), &slot) else {
            panic!("mcp:finder accepted");
        };
        assert!(err.contains("mcp:<server>:<tool>"), "{err}");
    }

    #[test]
    fn an_unconfigured_server_is_named() {
        let names = vec!["finder".to_string()];
        assert_eq!(unconfigured_server(Some("mcp:finder:search"), &names), None);
        assert_eq!(
            unconfigured_server(Some("mcp:brave:search"), &names),
            Some("brave".into())
        );
        assert_eq!(unconfigured_server(None, &names), None);
    }

    #[tokio::test]
    async fn without_mcp_the_search_says_so() {
        let backend = McpSearchBackend::new("finder", "search", McpSlot::new());
        let err = backend.search(&request(3, "general")).await.unwrap_err();
        assert!(
            err.starts_with("mcp:finder:search: this node has no MCP servers")
                && err.contains("[mcp.servers.finder]"),
            "{err}"
        );
    }
}
