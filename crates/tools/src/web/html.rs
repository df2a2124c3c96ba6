//! Turning a fetched body into plain text, by content type.

/// How a body is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Html,
    Text,
}

/// Decides how to read a body from its `Content-Type` (and, without one, its first bytes).
/// `Err` names a type that is not text (images, PDFs, archives, …).
pub fn body_kind(content_type: Option<&str>, body: &[u8]) -> Result<BodyKind, String> {
    let mime = content_type
        .and_then(|ct| ct.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty());
    match mime.as_deref() {
        Some("text/html" | "application/xhtml+xml") => Ok(BodyKind::Html),
        Some(m)
            if m.starts_with("text/")
                || m.ends_with("+json")
                || m.ends_with("+xml")
                || matches!(
                    m,
                    "application/json"
                        | "application/xml"
                        | "application/javascript"
                        | "application/x-javascript"
                        | "application/ecmascript"
                        | "application/x-sh"
                        | "application/toml"
                        | "application/yaml"
                        | "application/x-yaml"
                ) =>
        {
            Ok(BodyKind::Text)
        }
        Some(m) if m != "application/octet-stream" => Err(m.to_owned()),
        _ => sniff(body)
            .ok_or_else(|| mime.unwrap_or_else(|| "binary data without a content type".to_owned())),
    }
}

/// A body without a usable content type: HTML if it looks like markup, text if it has no
/// NUL byte and is mostly valid UTF-8.
fn sniff(body: &[u8]) -> Option<BodyKind> {
    let head = &body[..body.len().min(1024)];
    if head.contains(&0) {
        return None;
    }
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    let trimmed = text.trim_start();
    if trimmed.starts_with("<!doctype html") || trimmed.starts_with("<html") {
        return Some(BodyKind::Html);
    }
    let bad = text
        .chars()
        .filter(|c| *c == char::REPLACEMENT_CHARACTER)
        .count();
    (bad * 10 <= text.chars().count()).then_some(BodyKind::Text)
}

/// Plain text of an HTML document (scripts and styles dropped, links as footnotes).
pub fn html_to_text(html: &[u8]) -> String {
    match html2text::config::plain_no_decorate()
        .no_link_wrapping()
        .link_footnotes(true)
        .string_from_read(html, 100)
    {
        Ok(text) => tidy(&text),
        // html2text refuses only pathological input; fall back to the raw text.
        Err(_) => tidy(&String::from_utf8_lossy(html)),
    }
}

/// Trailing spaces removed and runs of blank lines collapsed to one.
pub fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(
            body_kind(Some("text/html; charset=utf-8"), b""),
            Ok(BodyKind::Html)
        );
        assert_eq!(
            body_kind(Some("application/json"), b"{}"),
            Ok(BodyKind::Text)
        );
        assert_eq!(
            body_kind(Some("image/png"), b"\x89PNG"),
            Err("image/png".to_owned())
        );
        assert_eq!(body_kind(None, b"<!DOCTYPE html><p>x"), Ok(BodyKind::Html));
        assert_eq!(body_kind(None, b"plain words"), Ok(BodyKind::Text));
        assert!(body_kind(Some("application/octet-stream"), b"\0\x01\x02").is_err());
    }

    #[test]
    fn scripts_and_styles_are_dropped() {
        let html = b"<html><head><style>p{color:red}</style><script>var secret=1;</script>\
                     </head><body><h1>Title</h1><p>Hello <b>world</b></p></body></html>";
        let text = html_to_text(html);
        assert!(text.contains("Title"), "{text}");
        assert!(text.contains("Hello world"), "{text}");
        assert!(!text.contains("secret"), "{text}");
        assert!(!text.contains("color:red"), "{text}");
        let linked = html_to_text(b"<p>See <a href=\"https://example.org/x\">this</a>.</p>");
        assert!(linked.contains("https://example.org/x"), "{linked}");
    }
}
