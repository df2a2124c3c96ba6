//! `open_preview`: show the user rich content (a web page, PDF, image, table, text or
//! markdown) in a preview pane beside the conversation.
//!
//! The tool resolves the target to bytes — an http(s) URL through the SSRF-screened fetcher
//! of `web_fetch` (same `allow_private_network` opt-in, every redirect hop screened), or a
//! file read relative to the working directory with `read_file`'s checks — classifies them,
//! applies the per-kind size cap and hands them to a [`PreviewSink`]. Storing the content
//! and opening the pane is the sink's job (the node keeps previews per workstream and tells
//! its frontends); the model receives only a one-line confirmation.
//!
//! URL targets need approval (network access); file paths run unprompted (local reads).
//! `attachment:<id>` targets are recognised but this node keeps no attachments, so they are
//! refused with a clear error.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{header, looks_binary, schema_definition};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::paths;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};
use crate::web::WebOptions;
use crate::web::fetch::{self, FetchConfig};
use crate::web::ssrf::SsrfPolicy;

const MIB: usize = 1024 * 1024;

/// How a preview is rendered. The wire names are `web`, `pdf`, `image`, `table`, `text`
/// and `markdown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PreviewKind {
    /// An HTML page, shown in a fully sandboxed frame.
    Web,
    Pdf,
    Image,
    /// CSV, TSV or JSON, shown as a table.
    Table,
    Text,
    Markdown,
}

impl PreviewKind {
    /// Every kind, in the schema's order.
    pub const ALL: [PreviewKind; 6] = [
        Self::Web,
        Self::Pdf,
        Self::Image,
        Self::Table,
        Self::Text,
        Self::Markdown,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Web => "web",
            Self::Pdf => "pdf",
            Self::Image => "image",
            Self::Table => "table",
            Self::Text => "text",
            Self::Markdown => "markdown",
        }
    }

    /// The kind of a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The largest content of this kind a preview holds (pages 4 MB, PDFs 32 MB, images
    /// 4 MB, tables 2 MB, text and markdown 512 KB).
    pub fn max_bytes(self) -> usize {
        match self {
            Self::Web | Self::Image => 4 * MIB,
            Self::Pdf => 32 * MIB,
            Self::Table => 2 * MIB,
            Self::Text | Self::Markdown => MIB / 2,
        }
    }

    /// The largest cap of any kind: more than this is never read.
    pub fn largest_cap() -> usize {
        Self::ALL
            .into_iter()
            .map(Self::max_bytes)
            .max()
            .unwrap_or(0)
    }
}

impl std::fmt::Display for PreviewKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Content to show in a workstream's preview pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewContent {
    pub kind: PreviewKind,
    /// The MIME type the bytes are served with (`text/html`, `image/png`, `text/csv`, …).
    pub mime: String,
    /// The pane header.
    pub title: String,
    /// Where the bytes came from: the final URL, or the file path.
    pub source: String,
    pub bytes: Vec<u8>,
}

/// Where `open_preview` puts what it resolved (the node: a bounded per-workstream store
/// that also tells the workstream's frontends to open the pane).
pub trait PreviewSink: Send + Sync {
    /// Stores `preview` for workstream `ws_id` and announces it; returns the preview's id.
    /// `Err` is a reason for the model (no such workstream, no room).
    fn store(&self, ws_id: &str, preview: PreviewContent) -> Result<String, String>;
}

/// The `open_preview` tool.
#[derive(Clone)]
pub struct OpenPreviewTool {
    definition: ToolDefinition,
    fetch: FetchConfig,
    sink: Arc<dyn PreviewSink>,
}

impl std::fmt::Debug for OpenPreviewTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenPreviewTool")
            .field("fetch", &self.fetch)
            .finish_non_exhaustive()
    }
}

impl OpenPreviewTool {
    /// The tool with the web tools' fetch settings (`allow_private_network`, timeout, pinned
    /// hosts), storing into `sink`.
    pub fn new(options: &WebOptions, sink: Arc<dyn PreviewSink>) -> Result<Self, RegistryError> {
        let mut fetch = options.fetch_config();
        fetch.max_bytes = PreviewKind::largest_cap();
        fetch.user_agent =
            concat!("turnstone/", env!("CARGO_PKG_VERSION"), " (open_preview)").to_owned();
        Ok(Self {
            definition: schema_definition(
                "open_preview",
                include_str!("../../schemas/open_preview.json"),
            )?,
            fetch,
            sink,
        })
    }
}

/// Whether the target names a URL scheme (`scheme://…`).
fn scheme_of(target: &str) -> Option<&str> {
    let (scheme, rest) = target.split_once("://")?;
    let valid = !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (valid && !rest.is_empty()).then_some(scheme)
}

#[async_trait]
impl Tool for OpenPreviewTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let target = a.non_blank("target")?.trim();
        let kind = match a.opt_trimmed("kind")? {
            None => None,
            Some(k) => Some(PreviewKind::parse(&k.to_ascii_lowercase()).ok_or_else(|| {
                format!(
                    "Error: unknown kind '{k}' (expected one of: {})",
                    PreviewKind::ALL.map(PreviewKind::as_str).join(", ")
                )
            })?),
        };
        let title = a
            .opt_string("title")?
            .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|t| !t.is_empty());
        let mut normalized = json!({});
        if let Some(k) = kind {
            normalized["kind"] = json!(k.as_str());
        }
        if let Some(t) = &title {
            normalized["title"] = json!(t);
        }
        if let Some(id) = target.strip_prefix("attachment:") {
            return Err(format!(
                "Error: attachment '{}' is not available: this node keeps no attachments. \
                 Preview a URL or a file path instead.",
                id.trim()
            ));
        }
        match scheme_of(target).map(str::to_ascii_lowercase).as_deref() {
            Some("http" | "https") => {
                let url = fetch::parse_url(target).map_err(|e| format!("Error: {e}"))?;
                fetch::screen_url(
                    &url,
                    SsrfPolicy {
                        allow_private_network: self.fetch.allow_private_network,
                    },
                )
                .map_err(|e| format!("Error: {e}"))?;
                normalized["url"] = json!(url.as_str());
                Ok(Prepared {
                    args: normalized,
                    header: header("open_preview", url.as_str()),
                    preview: String::new(),
                    needs_approval: true,
                    approval_label: "open_preview".to_owned(),
                })
            }
            Some(other) => Err(format!(
                "Error: scheme '{other}' is not supported: the target must be an http(s) URL, \
                 a file path or attachment:<id>"
            )),
            None => {
                let resolved = paths::resolve(&ctx.cwd, target);
                normalized["path"] = json!(resolved.to_string_lossy());
                let access = paths::Access::check(&ctx.cwd, &[&resolved]);
                Ok(Prepared {
                    args: normalized,
                    header: header("open_preview", target),
                    preview: access.note(),
                    needs_approval: !access.is_inside(),
                    approval_label: access.read_label("open_preview"),
                })
            }
        }
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let kind = prepared.text("kind").and_then(PreviewKind::parse);
        let title = prepared.text("title");
        let resolved = if let Some(url) = prepared.text("url") {
            self.fetch_url(url).await
        } else if let Some(path) = prepared.text("path") {
            read_path(&paths::resolve(&ctx.cwd, path), ctx).await
        } else {
            Err("Error: missing required argument 'target'".to_owned())
        };
        let (source, declared, bytes, fallback_title) = match resolved {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(e),
        };
        let content = match build(
            &source,
            declared.as_deref(),
            bytes,
            kind,
            title,
            fallback_title,
        ) {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(e),
        };
        if ctx.ws_id.is_empty() {
            return ToolOutput::error("Error: there is no workstream to show a preview in");
        }
        let (kind, size, title) = (content.kind, content.bytes.len(), content.title.clone());
        tracing::debug!(ws_id = %ctx.ws_id, %kind, size, "preview stored");
        match self.sink.store(&ctx.ws_id, content) {
            Ok(id) => ToolOutput::ok(format!(
                "Opened a {kind} preview \"{title}\" ({}) in the user's preview pane \
                 (preview {id}); its content is not shown to you: use web_fetch or read_file \
                 to read it.",
                human_size(size)
            )),
            Err(e) => ToolOutput::error(format!("Error: the preview could not be stored: {e}")),
        }
    }
}

/// What a target resolved to: source, declared MIME type, bytes, default title.
type Resolved = (String, Option<String>, Vec<u8>, String);

impl OpenPreviewTool {
    async fn fetch_url(&self, url: &str) -> Result<Resolved, String> {
        let page = fetch::fetch(url, &self.fetch)
            .await
            .map_err(|e| format!("Error: {e}"))?;
        let final_url = page.url.to_string();
        if !(200..300).contains(&page.status) {
            return Err(format!("Error: {final_url} answered HTTP {}", page.status));
        }
        if page.truncated {
            return Err(format!(
                "Error: {final_url} is larger than {}, more than any preview holds (largest: \
                 PDFs {})",
                human_size(self.fetch.max_bytes),
                human_size(PreviewKind::Pdf.max_bytes())
            ));
        }
        Ok((final_url.clone(), page.content_type, page.body, final_url))
    }
}

async fn read_path(path: &Path, ctx: &ToolContext) -> Result<Resolved, String> {
    let shown = paths::display(&ctx.cwd, path);
    let meta = match tokio::fs::metadata(path).await {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("Error: file not found: {shown}"));
        }
        Err(e) => return Err(format!("Error: cannot read {shown}: {e}")),
    };
    if meta.is_dir() {
        return Err(format!("Error: {shown} is a directory, not a file"));
    }
    if !meta.is_file() {
        return Err(format!("Error: {shown} is not a regular file"));
    }
    let largest = PreviewKind::largest_cap();
    if meta.len() > largest as u64 {
        return Err(format!(
            "Error: {shown} is {}, more than any preview holds (largest: PDFs {})",
            human_size(meta.len() as usize),
            human_size(largest)
        ));
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| format!("Error: cannot read {shown}: {e}"))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| shown.clone());
    Ok((shown, None, bytes, name))
}

/// Classifies, applies the override and the cap, and picks the title.
fn build(
    source: &str,
    declared: Option<&str>,
    bytes: Vec<u8>,
    wanted: Option<PreviewKind>,
    title: Option<&str>,
    fallback_title: String,
) -> Result<PreviewContent, String> {
    let (detected, mime) = classify(declared, source, &bytes).map_err(|what| {
        format!("Error: {source} cannot be previewed: it is {what}, not a page, PDF, image, table or text")
    })?;
    let (kind, mime) = match wanted {
        None => (detected, mime),
        Some(k) if k == detected => (k, mime),
        Some(k @ (PreviewKind::Pdf | PreviewKind::Image)) => {
            let what = if k == PreviewKind::Pdf {
                "PDF"
            } else {
                "image"
            };
            return Err(format!(
                "Error: {source} is not {what} content (it looks like {detected}, {mime})"
            ));
        }
        Some(k) if looks_binary(&bytes) => {
            return Err(format!(
                "Error: {source} is binary ({mime}) and cannot be shown as {k}"
            ));
        }
        Some(k) => (k, default_mime(k).to_owned()),
    };
    let cap = kind.max_bytes();
    if bytes.len() > cap {
        return Err(format!(
            "Error: {source} is {}, over the {} limit of {kind} previews",
            human_size(bytes.len()),
            human_size(cap)
        ));
    }
    let title = match title {
        Some(t) => t.to_owned(),
        None if kind == PreviewKind::Web => html_title(&bytes).unwrap_or(fallback_title),
        None => fallback_title,
    };
    let title: String = title.chars().take(200).collect();
    Ok(PreviewContent {
        kind,
        mime,
        title,
        source: source.to_owned(),
        bytes,
    })
}

fn default_mime(kind: PreviewKind) -> &'static str {
    match kind {
        PreviewKind::Web => "text/html",
        PreviewKind::Pdf => "application/pdf",
        PreviewKind::Image => "application/octet-stream",
        PreviewKind::Table => "text/csv",
        PreviewKind::Text => "text/plain",
        PreviewKind::Markdown => "text/markdown",
    }
}

/// The kind and MIME type of content: magic bytes first, then the declared type, then the
/// name's extension, then a look at the text. `Err` describes content that is none of them.
pub fn classify(
    declared: Option<&str>,
    name: &str,
    bytes: &[u8],
) -> Result<(PreviewKind, String), String> {
    use PreviewKind::*;
    let found = |k: PreviewKind, m: &str| Ok((k, m.to_owned()));
    if bytes.starts_with(b"%PDF-") {
        return found(Pdf, "application/pdf");
    }
    if let Some(mime) = image_mime(bytes) {
        return found(Image, mime);
    }
    let binary = looks_binary(bytes) || std::str::from_utf8(bytes).is_err();
    let declared = declared
        .and_then(|d| d.split(';').next())
        .map(|d| d.trim().to_ascii_lowercase())
        .filter(|d| !d.is_empty());
    if let Some(d) = declared.as_deref() {
        let text_kind = match d {
            "text/html" | "application/xhtml+xml" => Some((Web, "text/html")),
            "image/svg+xml" => Some((Image, "image/svg+xml")),
            "text/csv" => Some((Table, "text/csv")),
            "text/tab-separated-values" => Some((Table, "text/tab-separated-values")),
            "application/json" => Some((Table, "application/json")),
            d if d.ends_with("+json") => Some((Table, "application/json")),
            "text/markdown" | "text/x-markdown" => Some((Markdown, "text/markdown")),
            d if d.starts_with("text/") => Some((Text, "text/plain")),
            _ => None,
        };
        if let Some((k, m)) = text_kind
            && !binary
        {
            return table_checked(k, m, bytes);
        }
        if d == "application/pdf" {
            return Err("not a PDF although it says application/pdf".to_owned());
        }
    }
    let ext = extension(name);
    if !binary {
        let by_ext = match ext.as_str() {
            "html" | "htm" | "xhtml" => Some((Web, "text/html")),
            "svg" => Some((Image, "image/svg+xml")),
            "csv" => Some((Table, "text/csv")),
            "tsv" | "tab" => Some((Table, "text/tab-separated-values")),
            "json" => Some((Table, "application/json")),
            "md" | "markdown" => Some((Markdown, "text/markdown")),
            _ => None,
        };
        if let Some((k, m)) = by_ext {
            return table_checked(k, m, bytes);
        }
        let head: String = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)])
            .trim_start()
            .chars()
            .take(64)
            .collect::<String>()
            .to_ascii_lowercase();
        if head.starts_with("<!doctype html") || head.starts_with("<html") {
            return found(Web, "text/html");
        }
        if head.starts_with("<svg") {
            return found(Image, "image/svg+xml");
        }
        return found(Text, "text/plain");
    }
    Err(match declared {
        Some(d) => format!("binary data ({d})"),
        None if !ext.is_empty() => format!("binary data (.{ext})"),
        None => "binary data".to_owned(),
    })
}

/// A JSON "table" that does not parse is shown as text.
fn table_checked(
    kind: PreviewKind,
    mime: &str,
    bytes: &[u8],
) -> Result<(PreviewKind, String), String> {
    if mime == "application/json"
        && bytes.len() <= PreviewKind::Table.max_bytes()
        && serde_json::from_slice::<Value>(bytes).is_err()
    {
        return Ok((PreviewKind::Text, "text/plain".to_owned()));
    }
    Ok((kind, mime.to_owned()))
}

/// The lowercase extension of the last path segment of a path or URL (query dropped).
fn extension(name: &str) -> String {
    let path = name.split(['?', '#']).next().unwrap_or_default();
    let last = path.rsplit('/').next().unwrap_or_default();
    match last.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// The MIME type of a raster image, by its magic bytes.
fn image_mime(b: &[u8]) -> Option<&'static str> {
    if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP".as_slice()) {
        return Some("image/webp");
    }
    match b {
        [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, ..] => Some("image/png"),
        [0xff, 0xd8, 0xff, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Some("image/gif"),
        [
            b'B',
            b'M',
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            12 | 40 | 52 | 56 | 108 | 124,
            0,
            0,
            0,
            ..,
        ] => Some("image/bmp"),
        [0x00, 0x00, 0x01, 0x00, _, _, ..] => Some("image/x-icon"),
        _ => None,
    }
}

/// The `<title>` of an HTML page (first 64 KB), whitespace collapsed, common entities
/// decoded.
fn html_title(bytes: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(64 * 1024)]);
    let lower = head.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let raw = head.get(start..end)?;
    let text = raw
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then_some(text)
}

/// `512 KB`, `4 MB`, `1.5 MB`, `300 bytes`.
fn human_size(n: usize) -> String {
    if n >= MIB {
        let mb = n as f64 / MIB as f64;
        if mb.fract() == 0.0 {
            format!("{mb:.0} MB")
        } else {
            format!("{mb:.1} MB")
        }
    } else if n >= 1024 {
        format!("{} KB", n.div_ceil(1024))
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_by_magic_type_extension_and_content() {
        let c =
            |d: Option<&str>, n: &str, b: &[u8]| classify(d, n, b).map(|(k, m)| (k.as_str(), m));
        assert_eq!(c(None, "x.bin", b"%PDF-1.7\n").unwrap().0, "pdf");
        assert_eq!(
            c(None, "a", b"\x89PNG\r\n\x1a\n\0\0").unwrap(),
            ("image", "image/png".to_owned())
        );
        assert_eq!(
            c(Some("text/html; charset=utf-8"), "/", b"<p>hi</p>")
                .unwrap()
                .0,
            "web"
        );
        assert_eq!(c(None, "data.csv", b"a,b\n1,2\n").unwrap().0, "table");
        assert_eq!(
            c(None, "t.tsv", b"a\tb\n").unwrap().1,
            "text/tab-separated-values"
        );
        assert_eq!(c(None, "d.json", br#"{"a": 1}"#).unwrap().0, "table");
        assert_eq!(c(None, "d.json", b"{broken").unwrap().0, "text");
        assert_eq!(
            c(Some("application/ld+json"), "/", b"[1]").unwrap().0,
            "table"
        );
        assert_eq!(c(None, "README.md", b"# Title\n").unwrap().0, "markdown");
        assert_eq!(
            c(None, "page", b"  <!DOCTYPE html><html>").unwrap().0,
            "web"
        );
        assert_eq!(c(None, "notes", b"plain words").unwrap().0, "text");
        assert_eq!(c(Some("text/plain"), "/x.csv", b"a,b").unwrap().0, "text");
        assert!(
            c(None, "blob.dat", b"\0\x01\x02")
                .unwrap_err()
                .contains(".dat")
        );
        assert!(c(Some("application/pdf"), "/", b"not a pdf").is_err());
    }

    #[test]
    fn overrides_caps_and_titles() {
        let page = b"<html><head><title> A &amp; B\n page </title></head></html>".to_vec();
        let p = build("u", Some("text/html"), page, None, None, "u".into()).unwrap();
        assert_eq!((p.kind, p.title.as_str()), (PreviewKind::Web, "A & B page"));
        let t = build(
            "f.txt",
            None,
            b"a,b\n".to_vec(),
            Some(PreviewKind::Table),
            None,
            "f.txt".into(),
        )
        .unwrap();
        assert_eq!((t.kind, t.mime.as_str()), (PreviewKind::Table, "text/csv"));
        let e = build(
            "f.txt",
            None,
            b"text".to_vec(),
            Some(PreviewKind::Image),
            None,
            "f".into(),
        )
        .unwrap_err();
        assert!(e.contains("is not image content"), "{e}");
        let big = vec![b'x'; MIB / 2 + 1];
        let e = build("big.txt", None, big, None, None, "big.txt".into()).unwrap_err();
        assert!(e.contains("over the 512 KB limit of text previews"), "{e}");
        assert_eq!(human_size(4 * MIB), "4 MB");
        assert_eq!(human_size(1536), "2 KB");
        assert_eq!(scheme_of("HTTP://x"), Some("HTTP"));
        assert_eq!(scheme_of("a/b://c"), None);
        assert_eq!(scheme_of("notes.txt"), None);
    }
}
