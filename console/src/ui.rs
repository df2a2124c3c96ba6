//! The dashboard: `console/ui/` compiled into the binary, served at `/` and `/static/{file}`
//! (public, like the original; the page asks for a token when the API answers 401). The
//! console's own pages get a strict Content-Security-Policy; proxied node pages do not pass
//! through here.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One embedded file: path under `/static/`, content type, body.
pub const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../ui/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../ui/style.css"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("../ui/favicon.svg"),
    ),
];

/// The page's Content-Security-Policy.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

fn serve(path: &str) -> Response {
    let Some((_, kind, body)) = ASSETS.iter().find(|(p, _, _)| *p == path) else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    let mut r = (*body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    if path == "index.html" {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
    }
    r
}

/// `GET /`.
pub async fn index() -> Response {
    serve("index.html")
}

/// `GET /static/{path}`.
pub async fn static_file(Path(path): Path<String>) -> Response {
    serve(&path)
}
