//! Previews opened by `open_preview`: the node's [`PreviewSink`], a bounded in-memory store
//! per workstream, and `GET /v1/api/previews/{preview_id}?ws_id=` that serves them.
//!
//! A stored preview is content-addressed (its id is derived from a SHA-256 of its kind, type
//! and bytes, so opening the same content twice stores it once) and lives as long as its
//! workstream: the node forgets a workstream's previews when it closes or is evicted. Each
//! workstream keeps at most [`PreviewLimits::per_workstream`] previews and
//! [`PreviewLimits::workstream_bytes`] bytes, the node [`PreviewLimits::total_bytes`]; the
//! oldest previews go first.
//!
//! Storing a preview emits a `preview` event on the workstream's stream
//! (`{type:"preview", preview_id, kind, title, url}`), which makes the web UI open its pane.
//!
//! Served content is untrusted: every response carries `Content-Security-Policy: sandbox`
//! (no scripts, an opaque origin, no forms) and `default-src 'none'` (a previewed page loads
//! nothing remote, so opening it never reveals the viewer to the page's site) with
//! `nosniff` and `no-referrer`. `?remote=1` allows the page's remote images, styles, fonts
//! and media (still no scripts) — the pane's "remote content" toggle.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde::Deserialize;
use turnstone_tools::toolset::sha256_hex;
use turnstone_tools::{
    OpenPreviewTool, PreviewContent, PreviewKind, PreviewSink, Provenance, RegistryError,
    WebOptions,
};

use super::error::ApiError;
use super::state::Node;

/// The CSP of a served preview: sandboxed, nothing loaded from anywhere.
pub const PREVIEW_CSP: &str = "sandbox; default-src 'none'; img-src data:; \
     style-src 'unsafe-inline'; font-src data:; media-src data:";

/// The CSP with remote content allowed (images, styles, fonts, media; never scripts).
pub const PREVIEW_CSP_REMOTE: &str = "sandbox; default-src 'none'; img-src * data:; \
     style-src * 'unsafe-inline'; font-src * data:; media-src * data:";

/// Bounds of the store.
#[derive(Debug, Clone, Copy)]
pub struct PreviewLimits {
    /// Previews one workstream keeps.
    pub per_workstream: usize,
    /// Bytes one workstream keeps.
    pub workstream_bytes: usize,
    /// Bytes the node keeps over all workstreams.
    pub total_bytes: usize,
}

impl Default for PreviewLimits {
    fn default() -> Self {
        Self {
            per_workstream: 32,
            workstream_bytes: 64 * 1024 * 1024,
            total_bytes: 256 * 1024 * 1024,
        }
    }
}

/// One stored preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPreview {
    pub id: String,
    pub ws_id: String,
    pub kind: PreviewKind,
    pub mime: String,
    pub title: String,
    pub source: String,
    pub bytes: Bytes,
    /// Insertion order over the whole store (the oldest is evicted first).
    seq: u64,
}

#[derive(Debug, Default)]
struct Inner {
    by_ws: HashMap<String, VecDeque<StoredPreview>>,
    total: usize,
    next_seq: u64,
}

impl Inner {
    fn ws_bytes(list: &VecDeque<StoredPreview>) -> usize {
        list.iter().map(|p| p.bytes.len()).sum()
    }

    /// Drops the globally oldest preview; `false` when there is none.
    fn evict_oldest(&mut self) -> bool {
        let oldest = self
            .by_ws
            .iter()
            .filter_map(|(ws, list)| list.front().map(|p| (p.seq, ws.clone())))
            .min();
        let Some((_, ws)) = oldest else {
            return false;
        };
        if let Some(list) = self.by_ws.get_mut(&ws)
            && let Some(gone) = list.pop_front()
        {
            self.total -= gone.bytes.len();
            if list.is_empty() {
                self.by_ws.remove(&ws);
            }
        }
        true
    }
}

/// The node's previews, per workstream, bounded.
#[derive(Debug, Default)]
pub struct PreviewStore {
    limits: PreviewLimits,
    inner: Mutex<Inner>,
}

impl PreviewStore {
    pub fn new(limits: PreviewLimits) -> Self {
        Self {
            limits,
            inner: Mutex::default(),
        }
    }

    /// Stores `content` for `ws_id` (the same content again is moved to the front and
    /// retitled) and evicts the oldest previews beyond the limits.
    pub fn insert(&self, ws_id: &str, content: PreviewContent) -> Result<StoredPreview, String> {
        let size = content.bytes.len();
        if size > self.limits.workstream_bytes || size > self.limits.total_bytes {
            return Err(format!(
                "the preview is {size} bytes, more than this node keeps per workstream"
            ));
        }
        let digest = sha256_hex(&content.bytes);
        let id = sha256_hex(format!("{}\n{}\n{digest}", content.kind, content.mime).as_bytes())
            [..32]
            .to_string();
        let mut inner = self.inner.lock();
        inner.next_seq += 1;
        let seq = inner.next_seq;
        let list = inner.by_ws.entry(ws_id.to_string()).or_default();
        let mut freed = 0;
        if let Some(at) = list.iter().position(|p| p.id == id)
            && let Some(old) = list.remove(at)
        {
            freed += old.bytes.len();
        }
        let stored = StoredPreview {
            id,
            ws_id: ws_id.to_string(),
            kind: content.kind,
            mime: content.mime,
            title: content.title,
            source: content.source,
            bytes: Bytes::from(content.bytes),
            seq,
        };
        list.push_back(stored.clone());
        while list.len() > self.limits.per_workstream
            || Inner::ws_bytes(list) > self.limits.workstream_bytes
        {
            match list.pop_front() {
                Some(gone) => freed += gone.bytes.len(),
                None => break,
            }
        }
        inner.total = inner.total + size - freed;
        while inner.total > self.limits.total_bytes {
            if !inner.evict_oldest() {
                break;
            }
        }
        Ok(stored)
    }

    /// The preview `id` of `ws_id`.
    pub fn get(&self, ws_id: &str, id: &str) -> Option<StoredPreview> {
        self.inner
            .lock()
            .by_ws
            .get(ws_id)
            .and_then(|list| list.iter().find(|p| p.id == id).cloned())
    }

    /// Forgets every preview of `ws_id` (it closed); returns how many went.
    pub fn forget(&self, ws_id: &str) -> usize {
        let mut inner = self.inner.lock();
        match inner.by_ws.remove(ws_id) {
            Some(list) => {
                inner.total -= Inner::ws_bytes(&list);
                list.len()
            }
            None => 0,
        }
    }

    /// Previews held and their bytes, over all workstreams.
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.inner.lock();
        (inner.by_ws.values().map(VecDeque::len).sum(), inner.total)
    }
}

/// The URL that serves a stored preview.
pub fn preview_url(ws_id: &str, id: &str) -> String {
    format!("/v1/api/previews/{id}?ws_id={ws_id}")
}

/// `open_preview`'s sink on a node: stores into [`Node::previews`] and emits the `preview`
/// event on the workstream.
#[derive(Debug)]
pub struct NodePreviews {
    node: Weak<Node>,
}

impl PreviewSink for NodePreviews {
    fn store(&self, ws_id: &str, preview: PreviewContent) -> Result<String, String> {
        let node = self
            .node
            .upgrade()
            .ok_or_else(|| "the node is shutting down".to_string())?;
        let ws = node
            .workstream(ws_id)
            .ok_or_else(|| format!("workstream {ws_id} is not open on this node"))?;
        let stored = node.previews.insert(ws_id, preview)?;
        let url = preview_url(ws_id, &stored.id);
        tracing::info!(
            ws_id,
            preview_id = %stored.id,
            kind = %stored.kind,
            bytes = stored.bytes.len(),
            "preview stored"
        );
        ws.emit_preview(&stored.id, stored.kind.as_str(), &stored.title, &url);
        Ok(stored.id)
    }
}

/// Registers `open_preview` (URL fetches with `web`'s settings) in the node's live registry,
/// storing into the node's previews.
pub fn register(node: &Arc<Node>, web: &WebOptions) -> Result<(), RegistryError> {
    let sink = Arc::new(NodePreviews {
        node: Arc::downgrade(node),
    });
    let tool = OpenPreviewTool::new(web, sink)?;
    node.manager
        .engine()
        .registry()
        .add(Arc::new(tool), Provenance::Builtin)
}

/// Query of the preview route.
#[derive(Debug, Deserialize)]
pub struct PreviewQuery {
    #[serde(default)]
    ws_id: String,
    /// `1`/`true`: allow the page's remote images, styles, fonts and media.
    #[serde(default)]
    remote: Option<String>,
}

/// `GET /v1/api/previews/{preview_id}?ws_id=` (read scope) — the stored bytes with their
/// content type and a sandboxing CSP. `404` for an unknown workstream or preview.
pub async fn get_preview(
    State(node): State<Arc<Node>>,
    Path(preview_id): Path<String>,
    Query(q): Query<PreviewQuery>,
) -> Result<Response, ApiError> {
    if q.ws_id.is_empty() {
        return Err(ApiError::BadRequest("ws_id is required".to_string()));
    }
    let preview = node
        .previews
        .get(&q.ws_id, &preview_id)
        .ok_or_else(|| ApiError::NotFound("Unknown preview".to_string()))?;
    let remote = matches!(
        q.remote.as_deref().map(str::trim),
        Some("1" | "true" | "yes")
    );
    let text = preview.mime.starts_with("text/")
        || preview.mime == "application/json"
        || preview.mime == "image/svg+xml";
    let content_type = if text {
        format!("{}; charset=utf-8", preview.mime)
    } else {
        preview.mime.clone()
    };
    let mut response = Body::from(preview.bytes.clone()).into_response();
    let headers = response.headers_mut();
    let value = |v: &str| HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static(""));
    headers.insert(header::CONTENT_TYPE, value(&content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(if remote {
            PREVIEW_CSP_REMOTE
        } else {
            PREVIEW_CSP
        }),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=3600"),
    );
    headers.insert(
        header::HeaderName::from_static("x-preview-kind"),
        HeaderValue::from_static(preview.kind.as_str()),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(bytes: &[u8], title: &str) -> PreviewContent {
        PreviewContent {
            kind: PreviewKind::Text,
            mime: "text/plain".into(),
            title: title.into(),
            source: "s".into(),
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn content_addressed_bounded_and_forgotten_with_the_workstream() {
        let store = PreviewStore::new(PreviewLimits {
            per_workstream: 2,
            workstream_bytes: 10,
            total_bytes: 12,
        });
        let a = store.insert("w1", content(b"aaaa", "A")).unwrap();
        let again = store.insert("w1", content(b"aaaa", "A again")).unwrap();
        assert_eq!(a.id, again.id, "same content, same id");
        assert_eq!(store.usage(), (1, 4));
        assert_eq!(store.get("w1", &a.id).unwrap().title, "A again");
        assert!(
            store.get("w2", &a.id).is_none(),
            "previews are per workstream"
        );

        let b = store.insert("w1", content(b"bbbb", "B")).unwrap();
        let c = store.insert("w1", content(b"cccc", "C")).unwrap();
        assert!(store.get("w1", &a.id).is_none(), "the oldest went (count)");
        assert!(store.get("w1", &b.id).is_some() && store.get("w1", &c.id).is_some());
        // Over the node total: the globally oldest goes.
        store.insert("w2", content(b"dddddd", "D")).unwrap();
        assert!(store.get("w1", &b.id).is_none());
        assert_eq!(store.usage(), (2, 10));
        assert!(store.insert("w3", content(&[b'x'; 11], "big")).is_err());

        assert_eq!(store.forget("w1"), 1);
        assert_eq!(store.usage(), (1, 6));
        assert_eq!(store.forget("w1"), 0);
    }
}
