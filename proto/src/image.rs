//! An image carried in a conversation (a `read_file` of a PNG, JPEG, GIF or WebP file): the
//! bytes base64-encoded with their media type. Tools produce it, the conversation model keeps
//! it on a tool message, the store persists it and the LLM adapters send it to models that
//! can see images. Clients never receive the bytes: they see [`ImagePart::marker`].

use serde::{Deserialize, Serialize};

/// One image: its media type (`image/png`, …) and its bytes as standard base64 (with padding).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePart {
    pub media_type: String,
    pub data: String,
}

impl ImagePart {
    /// The image as a `data:` URL (OpenAI `image_url` parts).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.data)
    }

    /// The size of the decoded bytes, computed from the base64 length.
    pub fn byte_len(&self) -> usize {
        let padding = self.data.bytes().rev().take_while(|b| *b == b'=').count();
        (self.data.len() / 4 * 3).saturating_sub(padding)
    }

    /// The short text that stands for the image wherever its bytes must not go (SSE events,
    /// history served to clients, compaction prompts): `[image attached: image/png, 1234 bytes]`.
    pub fn marker(&self) -> String {
        format!(
            "[image attached: {}, {} bytes]",
            self.media_type,
            self.byte_len()
        )
    }
}

/// `text` followed by one [`ImagePart::marker`] line per image: what clients are shown of a
/// message or tool result that carries images.
pub fn with_markers(text: &str, images: &[ImagePart]) -> String {
    let mut out = text.to_owned();
    for image in images {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&image.marker());
    }
    out
}

/// Debug output names the image, never its bytes (a 5 MiB base64 string in a log line).
impl std::fmt::Debug for ImagePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.marker())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_marker_come_from_the_base64_text() {
        // "abcd" → YWJjZA== (4 bytes), "abc" → YWJj (3 bytes).
        let image = ImagePart {
            media_type: "image/png".into(),
            data: "YWJjZA==".into(),
        };
        assert_eq!(image.byte_len(), 4);
        assert_eq!(image.marker(), "[image attached: image/png, 4 bytes]");
        assert_eq!(format!("{image:?}"), image.marker());
        assert_eq!(image.data_url(), "data:image/png;base64,YWJjZA==");
        let three = ImagePart {
            media_type: "image/gif".into(),
            data: "YWJj".into(),
        };
        assert_eq!(three.byte_len(), 3);
        assert_eq!(
            with_markers("[image: a.png]", std::slice::from_ref(&image)),
            "[image: a.png]\n[image attached: image/png, 4 bytes]"
        );
        assert_eq!(
            with_markers("", &[three]),
            "[image attached: image/gif, 3 bytes]"
        );
        assert_eq!(with_markers("text", &[]), "text");
    }
}
