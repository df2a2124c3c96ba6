//! The one error type of this crate.

/// Why a payload could not be decoded (cluster spec §1.1, node spec §2).
///
/// Decoding never panics: every bad input maps to one of these variants.
/// None of them is retryable: the same bytes fail the same way again, so a
/// consumer should dead-letter the message instead of retrying it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The bytes are not JSON (or not UTF-8).
    #[error("malformed JSON: {0}")]
    Malformed(String),
    /// The JSON is valid but is not an object (`[1, 2]`, `"x"`, `5`, ...).
    #[error("expected a JSON object, got {0}")]
    NotAnObject(&'static str),
    /// An inbound message whose `type` is missing or not one of the ten
    /// inbound types. The text matches the original bridge's error text.
    #[error("Unknown inbound message type: '{0}'")]
    UnknownType(String),
    /// A known field holds a value of the wrong JSON type
    /// (e.g. `"auto_approve": "yes"`).
    #[error("invalid field `{field}` in `{message_type}`: {reason}")]
    InvalidField {
        /// The `type` of the message or event being decoded.
        message_type: String,
        /// The offending top-level key.
        field: String,
        /// What serde said about it.
        reason: String,
    },
}

impl ProtoError {
    /// Whether retrying the same input could succeed. Always `false`: a
    /// decoding error is a property of the bytes.
    pub fn is_retryable(&self) -> bool {
        false
    }
}
