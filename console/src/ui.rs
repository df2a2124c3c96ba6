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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::ASSETS;

    fn asset(name: &str) -> &'static str {
        ASSETS
            .iter()
            .find(|(p, _, _)| *p == name)
            .map(|(_, _, body)| *body)
            .expect(name)
    }

    /// Every `<marker>name"` occurrence counted by name; the names that occur more than once.
    fn repeated(text: &str, marker: &str, end: char) -> Vec<String> {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for piece in text.split(marker).skip(1) {
            if let Some(name) = piece.split(end).next().filter(|n| !n.trim().is_empty()) {
                *seen.entry(name).or_default() += 1;
            }
        }
        seen.into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(name, _)| name.to_string())
            .collect()
    }

    // Two tabs built apart once both gave an element the same id, and both named their
    // loader `loadRoles`: the page took the first element and the last function, and one
    // tab silently stopped working.
    #[test]
    fn element_ids_and_function_names_of_the_page_are_unique() {
        assert_eq!(
            repeated(asset("index.html"), " id=\"", '"'),
            Vec::<String>::new(),
            "repeated element ids in index.html"
        );
        assert_eq!(
            repeated(asset("app.js"), "function ", '('),
            Vec::<String>::new(),
            "repeated function names in app.js"
        );
    }
}
