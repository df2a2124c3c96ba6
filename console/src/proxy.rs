//! The reverse proxy `/node/{node_id}/…` (cluster spec §6.6).
//!
//! * The node id must match `[A-Za-z0-9._-]{1,256}` and be known to the collector, else
//!   `404 {"error": "Node not found"}`; a transport failure is `502 {"error": "Node
//!   unreachable", ...}`.
//! * Every request carries a fresh credential built for it: a 5-minute HS256 JWT with the
//!   caller's identity (`src=console-proxy`, audience `turnstone-server`) when the console
//!   has the shared secret, else the proxy service token, else the static token. The
//!   caller's own `Authorization` and cookies are never forwarded. The auth middleware runs
//!   first, so an unauthenticated request never gets here.
//! * Responses are relayed as streams (status, body, `Content-Type` and the node's security
//!   headers — `Content-Security-Policy`, `X-Content-Type-Options`, `X-Frame-Options`,
//!   `Referrer-Policy` — so a preview keeps `CSP: sandbox` on the console's origin): nothing is buffered,
//!   so event streams flow frame by frame; `Last-Event-ID` and `Accept` are forwarded.
//!   Event streams get the SSE headers; an upstream non-200 on a stream becomes a 200 with
//!   one `event: error` frame, as the original.
//! * `GET /node/{id}/` rewrites the node's page: `/static/` and `/shared/` URLs get the
//!   prefix, and after `<body>` come a banner naming the node, a style fix and a script
//!   that prefixes root-relative `fetch` and `EventSource` URLs. The node's security headers
//!   are relayed except its CSP, which would block that injected script.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use futures::StreamExt;
use serde_json::json;
use turnstone_runtime::auth::Identity;

use crate::api::valid_node_id;
use crate::error::ApiError;
use crate::events::sse_headers;
use crate::state::Console;

/// Request headers passed on to the node (everything else is dropped). The W3C trace
/// context travels on, so the node's spans join the caller's trace.
const FORWARDED_REQUEST_HEADERS: [header::HeaderName; 6] = [
    header::CONTENT_TYPE,
    header::ACCEPT,
    header::HeaderName::from_static("last-event-id"),
    header::HeaderName::from_static("idempotency-key"),
    header::HeaderName::from_static(turnstone_runtime::trace_context::TRACEPARENT),
    header::HeaderName::from_static("tracestate"),
];

/// Response headers of the node relayed to the browser besides `Content-Type`: the page's
/// own protections (a preview's `Content-Security-Policy: sandbox` keeps untrusted HTML from
/// running with the console's origin).
const RELAYED_SECURITY_HEADERS: [header::HeaderName; 4] = [
    header::CONTENT_SECURITY_POLICY,
    header::X_CONTENT_TYPE_OPTIONS,
    header::X_FRAME_OPTIONS,
    header::REFERRER_POLICY,
];

/// Copies the node's [`RELAYED_SECURITY_HEADERS`] (all values) onto the response; without
/// `with_csp` the `Content-Security-Policy` stays out (the rewritten node page).
fn relay_security_headers(from: &HeaderMap, to: &mut HeaderMap, with_csp: bool) {
    for name in RELAYED_SECURITY_HEADERS {
        if !with_csp && name == header::CONTENT_SECURITY_POLICY {
            continue;
        }
        to.remove(&name);
        for value in from.get_all(&name) {
            to.append(name.clone(), value.clone());
        }
    }
}

fn resolve(console: &Console, node_id: &str) -> Result<String, ApiError> {
    if !valid_node_id(node_id) {
        console
            .stats
            .proxy_unknown_node
            .fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::NotFound("Node not found".into()));
    }
    let known = console.collector.read(|c| {
        c.nodes
            .get(node_id)
            .map(|n| (n.credential_url().map(str::to_string), n.untrusted.clone()))
    });
    if let Some((None, Some(why))) = &known {
        return Err(ApiError::Forbidden(format!(
            "Node not trusted ({why}): the console does not proxy to it"
        )));
    }
    known.and_then(|(url, _)| url).ok_or_else(|| {
        console
            .stats
            .proxy_unknown_node
            .fetch_add(1, Ordering::Relaxed);
        ApiError::NotFound("Node not found".into())
    })
}

fn auth_header(console: &Console, identity: Option<&Identity>) -> Result<Option<String>, ApiError> {
    console
        .collector
        .credentials
        .proxy_header(identity)
        .map_err(|e| ApiError::Internal(format!("cannot mint the proxy token: {e}")))
}

fn unreachable(console: &Console, node_id: &str, e: &reqwest::Error) -> ApiError {
    console.stats.proxy_errors.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(node_id, error = %e, "proxy: node unreachable");
    ApiError::BadGateway("Node unreachable".into())
}

/// `GET /node/{id}` → `/node/{id}/`.
pub async fn node_root_redirect(Path(node_id): Path<String>, uri: Uri) -> Response {
    if !valid_node_id(&node_id) {
        return ApiError::NotFound("Node not found".into()).into_response();
    }
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    Redirect::permanent(&format!("/node/{node_id}/{query}")).into_response()
}

/// `GET /node/{id}/`: the node's page, rewritten.
pub async fn node_page(
    State(console): State<Arc<Console>>,
    Path(node_id): Path<String>,
    identity: Option<Extension<Identity>>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let base = resolve(&console, &node_id)?;
    let auth = auth_header(&console, identity.as_ref().map(|e| &e.0))?;
    console.stats.proxy_html.fetch_add(1, Ordering::Relaxed);
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let mut req = console
        .proxy_http
        .get(format!("{base}/{query}"))
        .timeout(console.collector.config.proxy_timeout);
    if let Some(a) = auth {
        req = req.header(header::AUTHORIZATION, a);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| unreachable(&console, &node_id, &e))?;
    let status = resp.status();
    let upstream_headers = resp.headers().clone();
    if !status.is_success() {
        return Ok((
            status,
            axum::Json(json!({"error": "Upstream server error", "status_code": status.as_u16()})),
        )
            .into_response());
    }
    let html = resp
        .text()
        .await
        .map_err(|e| unreachable(&console, &node_id, &e))?;
    let mut response = rewrite_html(&html, &node_id).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    relay_security_headers(&upstream_headers, response.headers_mut(), false);
    Ok(response)
}

/// Whether a proxied GET is an event stream.
fn is_event_stream(method: &Method, tail: &str, headers: &HeaderMap) -> bool {
    if method != Method::GET {
        return false;
    }
    let accepts = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"));
    let tail = tail.trim_end_matches('/');
    let tail = tail.strip_prefix("v1/").unwrap_or(tail);
    accepts || matches!(tail, "api/events" | "api/events/global" | "api/events/node")
}

/// Any other `/node/{id}/{tail}`: relayed as a stream.
pub async fn node_path(
    State(console): State<Arc<Console>>,
    Path((node_id, tail)): Path<(String, String)>,
    identity: Option<Extension<Identity>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let base = resolve(&console, &node_id)?;
    let auth = auth_header(&console, identity.as_ref().map(|e| &e.0))?;
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let url = format!("{base}/{tail}{query}");
    let stream = is_event_stream(&method, &tail, &headers);
    let mut req = console.proxy_http.request(method.clone(), &url);
    for name in FORWARDED_REQUEST_HEADERS {
        if let Some(v) = headers.get(&name) {
            req = req.header(name, v);
        }
    }
    if let Some(a) = auth {
        req = req.header(header::AUTHORIZATION, a);
    }
    if stream {
        console.stats.proxy_streams.fetch_add(1, Ordering::Relaxed);
        req = req
            .header(header::ACCEPT, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-store");
    } else {
        console.stats.proxy_requests.fetch_add(1, Ordering::Relaxed);
        req = req.timeout(console.collector.config.proxy_timeout);
        if method != Method::GET && method != Method::HEAD {
            req = req.body(opt_in_to_queue(&method, &tail, body));
        }
    }
    let resp = req
        .send()
        .await
        .map_err(|e| unreachable(&console, &node_id, &e))?;
    let status = resp.status();
    if stream {
        let mut response = if status == StatusCode::OK {
            // Ends with the console, so a graceful shutdown is not held open by streams.
            let until = console.shutdown.clone().cancelled_owned();
            Body::from_stream(resp.bytes_stream().take_until(until)).into_response()
        } else {
            Body::from(format!(
                "event: error\ndata: Upstream returned status {}\n\n",
                status.as_u16()
            ))
            .into_response()
        };
        sse_headers(&mut response);
        return Ok(response);
    }
    let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
    let upstream_headers = resp.headers().clone();
    let location = status
        .is_redirection()
        .then(|| resp.headers().get(header::LOCATION))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .map(|l| rewrite_location(l, &node_id));
    let body = Body::from_stream(
        resp.bytes_stream()
            .map(|r| r.map_err(std::io::Error::other)),
    );
    let mut response = (status, body).into_response();
    if let Some(ct) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    if let Some(loc) = location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        response.headers_mut().insert(header::LOCATION, loc);
    }
    relay_security_headers(&upstream_headers, response.headers_mut(), true);
    Ok(response)
}

/// The console always opts its sends in to the node's queue (issue 20): a `POST …/api/send`
/// whose JSON body does not say `"queue"` gets `"queue": true`, so a message typed while
/// the workstream is busy waits for its turn instead of being refused `busy`. Anything
/// else (or a body that is not a JSON object) passes unchanged.
fn opt_in_to_queue(method: &Method, tail: &str, body: Bytes) -> Bytes {
    let path = tail.trim_end_matches('/');
    if method != Method::POST || !(path == "api/send" || path == "v1/api/send") {
        return body;
    }
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(serde_json::Value::Object(mut o)) if !o.contains_key("queue") => {
            o.insert("queue".into(), serde_json::Value::Bool(true));
            serde_json::to_vec(&o).map(Bytes::from).unwrap_or(body)
        }
        _ => body,
    }
}

/// A node's root-relative redirect target, moved under the proxy prefix.
fn rewrite_location(location: &str, node_id: &str) -> String {
    if location.starts_with('/') && !location.starts_with("//") {
        format!("/node/{node_id}{location}")
    } else {
        location.to_string()
    }
}

/// HTML-escapes text for an element body.
fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The node page with prefixed asset URLs, the banner, the style fix and the URL shim.
pub fn rewrite_html(html: &str, node_id: &str) -> String {
    // Node ids are `[A-Za-z0-9._-]`: nothing to percent-encode.
    let prefix = format!("/node/{node_id}");
    let mut out = html.to_string();
    for attr in ["href", "src"] {
        for dir in ["static", "shared"] {
            out = out.replace(
                &format!("{attr}=\"/{dir}/"),
                &format!("{attr}=\"{prefix}/{dir}/"),
            );
        }
    }
    let prefix_js = serde_json::to_string(&prefix).unwrap_or_else(|_| "\"\"".into());
    let banner = format!(
        concat!(
            "<div id=\"turnstone-console-banner\" style=\"position:fixed;top:0;left:0;right:0;",
            "height:32px;z-index:2147483000;display:flex;align-items:center;gap:10px;",
            "padding:0 14px;background:#11161f;color:#d6deeb;font:13px/1 system-ui,sans-serif;",
            "border-bottom:1px solid #2a3443;box-sizing:border-box\">",
            "<a href=\"/\" style=\"color:#7cb7ff;text-decoration:none;font-weight:600\">",
            "\u{2190} Console</a><span style=\"opacity:.4\">|</span>",
            "<span>node <strong data-node-id=\"{id}\">{id}</strong></span></div>",
            "<style>body{{padding-top:32px;box-sizing:border-box}}",
            ".app{{height:calc(100vh - 32px)!important}}",
            ".dashboard-overlay{{top:32px!important}}</style>",
            "<script>(function(){{var P={prefix};",
            "function fix(u){{return (typeof u===\"string\"&&u.charAt(0)===\"/\"&&",
            "u.charAt(1)!==\"/\"&&u.indexOf(P+\"/\")!==0)?P+u:u;}}",
            "var F=window.fetch;window.fetch=function(i,o){{",
            "if(typeof i===\"string\")i=fix(i);",
            "else if(i instanceof URL&&i.origin===location.origin)i=fix(i.pathname+i.search);",
            "return F.call(this,i,o);}};",
            "var E=window.EventSource;if(E){{var S=function(u,c){{",
            "if(u instanceof URL&&u.origin===location.origin)u=u.pathname+u.search;",
            "return new E(fix(u),c);}};",
            "S.prototype=E.prototype;S.CONNECTING=E.CONNECTING;S.OPEN=E.OPEN;S.CLOSED=E.CLOSED;",
            "window.EventSource=S;}}",
            "window.TURNSTONE_PROXY_PREFIX=P;}})();</script>"
        ),
        id = escape_html(node_id),
        prefix = prefix_js,
    );
    match out.find("<body>") {
        Some(at) => {
            out.insert_str(at + "<body>".len(), &banner);
            out
        }
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_rewritten_once() {
        let html = "<head><link href=\"/static/a.css\"><script src=\"/static/app.js\"></script>\
                    <img src=\"/shared/x.svg\"></head><body><p>hi</p></body><body>";
        let out = rewrite_html(html, "node-1");
        assert!(out.contains("href=\"/node/node-1/static/a.css\""));
        assert!(out.contains("src=\"/node/node-1/static/app.js\""));
        assert!(out.contains("src=\"/node/node-1/shared/x.svg\""));
        assert_eq!(out.matches("turnstone-console-banner").count(), 1);
        assert!(out.contains("var P=\"/node/node-1\""));
        assert!(out.ends_with("</body><body>"), "only the first <body>");
    }

    #[test]
    fn security_headers_are_relayed() {
        let mut upstream = HeaderMap::new();
        upstream.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("sandbox"),
        );
        upstream.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        upstream.insert(header::SET_COOKIE, HeaderValue::from_static("a=b"));
        let mut out = HeaderMap::new();
        relay_security_headers(&upstream, &mut out, true);
        assert_eq!(out[header::CONTENT_SECURITY_POLICY], "sandbox");
        assert_eq!(out[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert!(out.get(header::SET_COOKIE).is_none());
        let mut page = HeaderMap::new();
        relay_security_headers(&upstream, &mut page, false);
        assert!(page.get(header::CONTENT_SECURITY_POLICY).is_none());
        assert_eq!(page[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }

    #[test]
    fn redirects_stay_under_the_prefix() {
        assert_eq!(rewrite_location("/docs/x", "n1"), "/node/n1/docs/x");
        assert_eq!(rewrite_location("//evil/x", "n1"), "//evil/x");
        assert_eq!(rewrite_location("https://a/b", "n1"), "https://a/b");
    }

    #[test]
    fn event_streams_are_recognised() {
        let h = HeaderMap::new();
        assert!(is_event_stream(&Method::GET, "v1/api/events", &h));
        assert!(is_event_stream(&Method::GET, "v1/api/events/global", &h));
        assert!(!is_event_stream(&Method::GET, "v1/api/workstreams", &h));
        assert!(!is_event_stream(&Method::POST, "v1/api/events", &h));
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        assert!(is_event_stream(&Method::GET, "anything", &h));
    }
}
