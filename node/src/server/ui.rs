//! The web UI: the static files of `node/ui/`, compiled into the binary, served at `/`
//! (the page) and `/static/{path}` (its scripts, styles and icon). Both are public routes;
//! the page itself asks for a token when the API answers 401.
//!
//! Responses carry a strong `ETag` (a hash of the file) and `Cache-Control: no-cache`, so a
//! browser revalidates each load and gets `304 Not Modified` until the binary changes. The
//! page also gets a strict Content-Security-Policy: everything is same-origin, nothing is
//! inline.

use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Path under `/static/`.
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// The [`Asset`] of the file `node/ui/<path>`, named once.
macro_rules! asset {
    ($path:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            body: include_str!(concat!("../../ui/", $path)),
        }
    };
}

/// Every file of the UI.
pub const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("app.js", JS),
    asset!("markdown.js", JS),
    asset!("dom.js", JS),
    asset!("style.css", CSS),
    asset!("preview.js", JS),
    asset!("preview.css", CSS),
    asset!("favicon.svg", SVG),
];

/// The page's Content-Security-Policy: same-origin scripts, styles, images and streams only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// The embedded file at `path` (relative to `/static/`).
pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// A strong entity tag for `body`: FNV-1a 64 over its bytes, quoted.
pub fn etag(body: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in body.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("\"{hash:016x}\"")
}

/// Whether an `If-None-Match` header value matches `tag` (a list, or `*`).
fn matches_if_none_match(header_value: &str, tag: &str) -> bool {
    header_value
        .split(',')
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t == tag)
}

fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let tag = etag(asset.body);
    let not_modified = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| matches_if_none_match(v, &tag));
    let mut response = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = Body::from(asset.body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        r
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(v) = HeaderValue::from_str(&tag) {
        headers.insert(header::ETAG, v);
    }
    if asset.content_type == HTML {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
    }
    response
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "Not Found",
    )
        .into_response()
}

/// `GET /` — the page.
pub async fn index(headers: HeaderMap) -> Response {
    match asset("index.html") {
        Some(a) => serve(a, &headers),
        None => not_found(),
    }
}

/// `GET /static/{*path}` — one file of the UI; `404 Not Found` (text) for anything else.
pub async fn static_file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match asset(&path) {
        Some(a) => serve(a, &headers),
        None => not_found(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_the_page_links_is_embedded() {
        let page = asset("index.html").unwrap().body;
        for linked in [
            "app.js",
            "markdown.js",
            "dom.js",
            "style.css",
            "favicon.svg",
            "preview.js",
            "preview.css",
        ] {
            assert!(
                page.contains(&format!("/static/{linked}")),
                "index.html links {linked}"
            );
            assert!(asset(linked).is_some(), "{linked} is embedded");
        }
        assert!(asset("../Cargo.toml").is_none());
        assert!(asset("").is_none());
    }

    #[test]
    fn etags_are_stable_quoted_and_content_dependent() {
        assert_eq!(etag("abc"), etag("abc"));
        assert_ne!(etag("abc"), etag("abd"));
        let tag = etag("abc");
        assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() == 18);
        assert!(matches_if_none_match(&tag, &tag));
        assert!(matches_if_none_match(&format!("\"x\", W/{tag}"), &tag));
        assert!(matches_if_none_match("*", &tag));
        assert!(!matches_if_none_match("\"other\"", &tag));
    }

    #[test]
    fn not_modified_keeps_the_tag_and_drops_the_body_type() {
        let a = *asset("style.css").unwrap();
        let mut h = HeaderMap::new();
        let fresh = serve(&a, &h);
        assert_eq!(fresh.status(), StatusCode::OK);
        assert_eq!(fresh.headers()[header::CONTENT_TYPE], CSS);
        let tag = fresh.headers()[header::ETAG].clone();
        h.insert(header::IF_NONE_MATCH, tag.clone());
        let cached = serve(&a, &h);
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(cached.headers()[header::ETAG], tag);
        assert_eq!(cached.headers()[header::CACHE_CONTROL], "no-cache");
    }
}
