//! Images in the conversation (`read_file` of an image) and which models see them.
//!
//! A tool result with images keeps them on its message ([`ChatMessage::images`]) only when
//! the workstream's model sees images (`vision` on its model definition, default off); for
//! any other model the images are dropped at once — never stored, never sent — and the
//! result's text description says that the model cannot see them. A request to a model
//! without vision also goes out without images that an earlier model (`/model`) or an
//! earlier node configuration left in the history.

use turnstone_llm::{ChatMessage, ImagePart};
use turnstone_proto::image::with_markers;

/// Added to an image's description for a model that cannot see images.
pub(crate) const NOT_SEEN: &str =
    "The model cannot see images here: only this description is available.";

/// The tool message of a call's result: its images attached for a model with `vision`,
/// else only its text, with [`NOT_SEEN`] when it had images.
pub(crate) fn tool_message(
    call_id: String,
    content: String,
    images: Vec<ImagePart>,
    vision: bool,
) -> ChatMessage {
    if vision || images.is_empty() {
        ChatMessage::tool(call_id, content).with_images(images)
    } else {
        ChatMessage::tool(call_id, format!("{content}\n{NOT_SEEN}"))
    }
}

/// Whether any of `messages` carries an image.
pub(crate) fn any_images(messages: &[ChatMessage]) -> bool {
    messages.iter().any(|m| !m.images.is_empty())
}

/// `messages` without images, for a model that cannot see them: each image becomes its
/// marker line in the message text, followed by [`NOT_SEEN`].
pub(crate) fn strip_images(messages: &mut [ChatMessage]) {
    for message in messages.iter_mut().filter(|m| !m.images.is_empty()) {
        let images = std::mem::take(&mut message.images);
        let mut text = with_markers(message.content.as_deref().unwrap_or(""), &images);
        text.push('\n');
        text.push_str(NOT_SEEN);
        message.content = Some(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png() -> ImagePart {
        ImagePart {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        }
    }

    #[test]
    fn a_vision_model_keeps_the_image_and_another_gets_the_description() {
        let seen = tool_message("c1".into(), "[image: a.png]".into(), vec![png()], true);
        assert_eq!(seen.images, [png()]);
        assert_eq!(seen.content.as_deref(), Some("[image: a.png]"));
        let blind = tool_message("c1".into(), "[image: a.png]".into(), vec![png()], false);
        assert!(blind.images.is_empty());
        assert_eq!(
            blind.content.as_deref(),
            Some(format!("[image: a.png]\n{NOT_SEEN}").as_str())
        );
        let text = tool_message("c2".into(), "plain".into(), Vec::new(), false);
        assert_eq!(text.content.as_deref(), Some("plain"));
    }

    #[test]
    fn stripping_leaves_markers_and_text_only() {
        let mut messages = vec![
            ChatMessage::user("look"),
            ChatMessage::tool("c1", "[image: a.png]").with_images(vec![png()]),
        ];
        strip_images(&mut messages);
        assert!(messages.iter().all(|m| m.images.is_empty()));
        assert_eq!(messages[0].content.as_deref(), Some("look"));
        assert_eq!(
            messages[1].content.as_deref(),
            Some(format!("[image: a.png]\n{}\n{NOT_SEEN}", png().marker()).as_str())
        );
    }
}
