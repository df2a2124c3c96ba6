//! `read_file`: a text file as numbered lines (`cat -n` style), optionally a window of it.
//! Images are recognised by their magic bytes, not their names: a PNG, JPEG, GIF or WebP
//! image comes back as a text description (name, format, dimensions, size) with the image
//! attached ([`ToolOutput::images`]) for models that can see images; BMP, TIFF and ICO are
//! described only. An image over the size limit, cut short or corrupt, or a file named like
//! an image that is none, is a tool error. Other binary files are refused.

use std::path::Path;

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{Value, json};

use super::{finish, header, looks_binary};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::paths;
use crate::schema::builtin_definition;
use crate::tool::{ImagePart, OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

/// Images above this size are refused unless configured otherwise (`tools.max_image_bytes`).
pub const DEFAULT_MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Text files above this size are refused (use `search` or `bash` with `sed -n`).
const MAX_TEXT_BYTES: u64 = 32 * 1024 * 1024;
/// Characters shown of one line before it is cut.
const MAX_LINE_CHARS: usize = 2000;

/// The `read_file` tool.
#[derive(Debug, Clone)]
pub struct ReadFileTool {
    definition: ToolDefinition,
    max_image_bytes: u64,
}

impl ReadFileTool {
    pub fn new() -> Result<Self, RegistryError> {
        Ok(Self {
            definition: builtin_definition("read_file")?,
            max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
        })
    }

    /// Refuses images larger than `bytes` (a clear tool error, nothing is read).
    pub fn with_max_image_bytes(mut self, bytes: u64) -> Self {
        self.max_image_bytes = bytes;
        self
    }
}

#[async_trait]
impl Tool for ReadFileTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let path = a.non_blank("path")?;
        let offset = a.opt_int("offset")?;
        let limit = a.opt_int("limit")?;
        if let Some(o) = offset.filter(|o| *o < 0) {
            return Err(format!("Error: offset must be 1 or more, got {o}"));
        }
        if let Some(l) = limit.filter(|l| *l < 1) {
            return Err(format!("Error: limit must be 1 or more, got {l}"));
        }
        let resolved = paths::resolve(&ctx.cwd, path);
        let mut normalized = json!({ "path": resolved.to_string_lossy() });
        if let Some(o) = offset {
            normalized["offset"] = json!(o.max(1));
        }
        if let Some(l) = limit {
            normalized["limit"] = json!(l);
        }
        let access = paths::Access::check(&ctx.cwd, &[&resolved]);
        Ok(Prepared {
            args: normalized,
            header: header("read_file", path),
            preview: access.note(),
            needs_approval: !access.is_inside(),
            approval_label: access.read_label("read_file"),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let raw = match prepared.required_text("path") {
            Ok(raw) => raw,
            Err(missing) => return missing,
        };
        let path = paths::resolve(&ctx.cwd, raw);
        let args = &prepared.args;
        let offset = args
            .get("offset")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1);
        let limit = args.get("limit").and_then(Value::as_u64);
        finish(
            read(&path, offset, limit, self.max_image_bytes, ctx).await,
            ctx,
        )
    }
}

async fn read(
    path: &Path,
    offset: u64,
    limit: Option<u64>,
    max_image_bytes: u64,
    ctx: &ToolContext,
) -> ToolOutput {
    let shown = paths::display(&ctx.cwd, path);
    let meta = match tokio::fs::metadata(path).await {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolOutput::error(format!("Error: file not found: {shown}"));
        }
        Err(e) => return ToolOutput::error(format!("Error: cannot read {shown}: {e}")),
    };
    if meta.is_dir() {
        return ToolOutput::error(format!(
            "Error: {shown} is a directory, not a file (use bash `ls` or search to look inside)"
        ));
    }
    if !meta.is_file() {
        return ToolOutput::error(format!("Error: {shown} is not a regular file"));
    }
    let size = meta.len();
    let head = match read_head(path, 32).await {
        Ok(head) => head,
        Err(e) => return ToolOutput::error(format!("Error: cannot read {shown}: {e}")),
    };
    if let Some(kind) = image_kind(&head) {
        return read_image(path, &shown, kind, size, max_image_bytes, ctx).await;
    }
    if let Some(ext) = image_extension(path) {
        return ToolOutput::error(format!(
            "Error: {shown} is named like an image (.{ext}) but is not a PNG, JPEG, GIF or WebP \
             image: its first bytes match none of them"
        ));
    }
    if size > MAX_TEXT_BYTES {
        return ToolOutput::error(format!(
            "Error: {shown} is {size} bytes, too large to read whole; use search, or bash with \
             `sed -n 'A,Bp'`, to look at parts of it"
        ));
    }
    let bytes = match tokio::fs::read(path).await {
        Ok(b) => b,
        Err(e) => return ToolOutput::error(format!("Error: cannot read {shown}: {e}")),
    };
    if looks_binary(&bytes) {
        return ToolOutput::error(format!(
            "Error: {shown} looks like a binary file ({size} bytes); not shown"
        ));
    }
    paths::mark_read(ctx, path);
    let text = String::from_utf8_lossy(&bytes);
    ToolOutput::ok(number_lines(&text, offset, limit))
}

/// An image file: a PNG, JPEG, GIF or WebP image comes back described in text and attached
/// as an [`ImagePart`] (the engine sends it only to a model that can see images); other
/// formats are described only. Too large, truncated or corrupt images are tool errors.
async fn read_image(
    path: &Path,
    shown: &str,
    kind: &'static str,
    size: u64,
    max_bytes: u64,
    ctx: &ToolContext,
) -> ToolOutput {
    if size > max_bytes {
        return ToolOutput::error(format!(
            "Error: {shown} is a {kind} image of {size} bytes, over the {max_bytes}-byte image \
             limit (tools.max_image_bytes)"
        ));
    }
    let bytes = match tokio::fs::read(path).await {
        Ok(b) => b,
        Err(e) => return ToolOutput::error(format!("Error: cannot read {shown}: {e}")),
    };
    let dimensions = image_dimensions(kind, &bytes);
    let Some(media_type) = media_type(kind) else {
        paths::mark_read(ctx, path);
        let dims = dimensions
            .map(|(w, h)| format!(", {w}x{h} pixels"))
            .unwrap_or_default();
        return ToolOutput::ok(format!(
            "[image: {shown}, {kind}{dims}, {size} bytes. {kind} is not a format models accept \
             as an image: only this description is available.]"
        ));
    };
    let (Some((w, h)), true) = (dimensions, has_trailer(kind, &bytes)) else {
        return ToolOutput::error(format!(
            "Error: {shown} is a truncated or corrupt {kind} image ({size} bytes): its header or \
             its end is missing"
        ));
    };
    paths::mark_read(ctx, path);
    let image = ImagePart {
        media_type: media_type.to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(&bytes),
    };
    ToolOutput::ok(format!(
        "[image: {shown}, {kind}, {w}x{h} pixels, {size} bytes]"
    ))
    .with_image(image)
}

/// The media type of the formats models accept as images.
fn media_type(kind: &str) -> Option<&'static str> {
    match kind {
        "PNG" => Some("image/png"),
        "JPEG" => Some("image/jpeg"),
        "GIF" => Some("image/gif"),
        "WebP" => Some("image/webp"),
        _ => None,
    }
}

/// The extension of a file named like an image models accept (`png`, `jpg`, …).
fn image_extension(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    matches!(ext.as_str(), "png" | "jpg" | "jpeg" | "gif" | "webp").then_some(ext)
}

/// Whether the image ends the way its format ends: PNG with its `IEND` chunk, JPEG with an
/// end-of-image marker, GIF with its trailer byte, WebP with as many bytes as its RIFF header
/// announces. A file cut short fails this.
fn has_trailer(kind: &str, bytes: &[u8]) -> bool {
    match kind {
        "PNG" => bytes.ends_with(&[b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82]),
        "JPEG" => {
            let tail = &bytes[bytes.len().saturating_sub(64)..];
            tail.windows(2).any(|w| w == [0xff, 0xd9])
        }
        "GIF" => bytes.last() == Some(&0x3b),
        "WebP" => bytes.get(4..8).is_some_and(|b| {
            let riff = u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            riff + 8 <= bytes.len() as u64
        }),
        _ => true,
    }
}

async fn read_head(path: &Path, n: usize) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path).await?;
    let mut buf = Vec::with_capacity(n);
    file.take(n as u64).read_to_end(&mut buf).await?;
    Ok(buf)
}

/// `cat -n` style numbering of lines `offset..offset+limit` (1-based), with a footer when
/// only part of the file is shown.
fn number_lines(text: &str, offset: u64, limit: Option<u64>) -> String {
    let total = text.lines().count() as u64;
    if total == 0 {
        return "(empty file)".to_owned();
    }
    if offset > total {
        return format!("(offset {offset} is past the end: the file has {total} lines)");
    }
    let take = limit.unwrap_or(u64::MAX);
    let mut out = String::new();
    let mut last = offset - 1;
    for (i, line) in text
        .lines()
        .enumerate()
        .skip((offset - 1) as usize)
        .take(usize::try_from(take).unwrap_or(usize::MAX))
    {
        let n = i + 1;
        let count = line.chars().count();
        if count > MAX_LINE_CHARS {
            let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
            out.push_str(&format!("{n:>6}\t{cut}… [line cut: {count} chars]\n"));
        } else {
            out.push_str(&format!("{n:>6}\t{line}\n"));
        }
        last = n as u64;
    }
    if offset > 1 || last < total {
        out.push_str(&format!("\n[lines {offset}-{last} of {total}"));
        if last < total {
            out.push_str(&format!("; continue with offset={}", last + 1));
        }
        out.push(']');
    }
    out
}

/// The image format named by the first bytes of a file.
fn image_kind(head: &[u8]) -> Option<&'static str> {
    // "BM" alone is too weak: also require a known DIB header size.
    let bmp_dib = |h: &[u8]| {
        matches!(
            h.get(14..18),
            Some([12 | 40 | 52 | 56 | 108 | 124, 0, 0, 0])
        )
    };
    if head.starts_with(b"BM") && bmp_dib(head) {
        return Some("BMP");
    }
    if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WEBP".as_slice()) {
        return Some("WebP");
    }
    match head {
        [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, ..] => Some("PNG"),
        [0xff, 0xd8, 0xff, ..] => Some("JPEG"),
        [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Some("GIF"),
        [b'I', b'I', 0x2a, 0x00, ..] | [b'M', b'M', 0x00, 0x2a, ..] => Some("TIFF"),
        [0x00, 0x00, 0x01, 0x00, _, _, ..] => Some("ICO"),
        _ => None,
    }
}

/// Width and height for the formats that keep them at a fixed offset.
fn image_dimensions(kind: &str, bytes: &[u8]) -> Option<(u32, u32)> {
    let be = |at: usize| -> Option<u32> {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    let le16 = |at: usize| -> Option<u32> {
        bytes
            .get(at..at + 2)
            .map(|b| u32::from(u16::from_le_bytes([b[0], b[1]])))
    };
    let le32 = |at: usize| -> Option<u32> {
        bytes
            .get(at..at + 4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]).unsigned_abs())
    };
    match kind {
        "PNG" => Some((be(16)?, be(20)?)),
        "GIF" => Some((le16(6)?, le16(8)?)),
        "BMP" => Some((le32(18)?, le32(22)?)),
        "JPEG" => jpeg_dimensions(bytes),
        "WebP" => webp_dimensions(bytes),
        _ => None,
    }
}

/// Width and height from a JPEG's start-of-frame segment (the markers before it skipped).
fn jpeg_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let be16 = |at: usize| -> Option<u32> {
        bytes
            .get(at..at + 2)
            .map(|b| u32::from(u16::from_be_bytes([b[0], b[1]])))
    };
    let mut at = 2;
    while at + 9 < bytes.len() {
        if bytes[at] != 0xff {
            return None;
        }
        let marker = bytes[at + 1];
        // SOF0–SOF15 except DHT (C4), JPG (C8) and DAC (CC).
        if (0xc0..=0xcf).contains(&marker) && !matches!(marker, 0xc4 | 0xc8 | 0xcc) {
            return Some((be16(at + 7)?, be16(at + 5)?));
        }
        at += 2 + usize::try_from(be16(at + 2)?).ok()?;
    }
    None
}

/// Width and height of a WebP image (lossy `VP8 `, lossless `VP8L` or extended `VP8X`).
fn webp_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let b = |at: usize| bytes.get(at).copied().map(u32::from);
    match bytes.get(12..16)? {
        b"VP8 " => Some((
            (b(26)? | b(27)? << 8) & 0x3fff,
            (b(28)? | b(29)? << 8) & 0x3fff,
        )),
        b"VP8L" => {
            let (b0, b1, b2, b3) = (b(21)?, b(22)?, b(23)?, b(24)?);
            Some((
                1 + (((b1 & 0x3f) << 8) | b0),
                1 + (((b3 & 0x0f) << 10) | (b2 << 2) | ((b1 & 0xc0) >> 6)),
            ))
        }
        b"VP8X" => Some((
            1 + (b(24)? | b(25)? << 8 | b(26)? << 16),
            1 + (b(27)? | b(28)? << 8 | b(29)? << 16),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_windows_and_footer() {
        let text = "a\nb\nc\nd\n";
        assert_eq!(
            number_lines(text, 1, None),
            "     1\ta\n     2\tb\n     3\tc\n     4\td\n"
        );
        assert_eq!(
            number_lines(text, 2, Some(2)),
            "     2\tb\n     3\tc\n\n[lines 2-3 of 4; continue with offset=4]"
        );
        assert!(number_lines(text, 9, None).contains("past the end"));
        assert_eq!(number_lines("", 1, None), "(empty file)");
    }

    #[test]
    fn long_lines_are_cut() {
        let line = "x".repeat(MAX_LINE_CHARS + 10);
        let out = number_lines(&line, 1, None);
        assert!(out.contains(&format!("[line cut: {} chars]", MAX_LINE_CHARS + 10)));
        assert!(out.len() < MAX_LINE_CHARS + 100);
    }

    #[test]
    fn jpeg_and_webp_dimensions() {
        // SOI, an APP0 segment of length 16, then SOF0: precision 8, height 0x0102, width 0x0304.
        let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10];
        jpeg.extend_from_slice(&[0u8; 14]);
        jpeg.extend_from_slice(&[0xff, 0xc0, 0x00, 0x11, 0x08, 0x01, 0x02, 0x03, 0x04, 0x03]);
        jpeg.extend_from_slice(&[0u8; 16]);
        assert_eq!(image_dimensions("JPEG", &jpeg), Some((0x0304, 0x0102)));
        assert_eq!(image_dimensions("JPEG", &[0xff, 0xd8, 0xff]), None);
        // VP8X: canvas width-1 and height-1 as 24-bit little-endian at 24 and 27.
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X".to_vec();
        webp.extend_from_slice(&[0u8; 8]);
        webp.extend_from_slice(&[99, 0, 0, 49, 0, 0]);
        assert_eq!(image_dimensions("WebP", &webp), Some((100, 50)));
        // VP8 (lossy): 14-bit width and height at 26 and 28.
        let mut vp8 = b"RIFF\0\0\0\0WEBPVP8 ".to_vec();
        vp8.extend_from_slice(&[0u8; 10]);
        vp8.extend_from_slice(&[0x40, 0x01, 0xf0, 0x00]);
        assert_eq!(image_dimensions("WebP", &vp8), Some((320, 240)));
    }

    #[test]
    fn magic_bytes() {
        assert_eq!(image_kind(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), Some("PNG"));
        assert_eq!(image_kind(b"GIF89a.."), Some("GIF"));
        assert_eq!(image_kind(b"RIFF\0\0\0\0WEBPVP8 "), Some("WebP"));
        assert_eq!(image_kind(b"\xff\xd8\xff\xe0"), Some("JPEG"));
        assert_eq!(image_kind(b"hello world, not an image"), None);
        assert_eq!(image_kind(b"<svg xmlns="), None);
    }
}
