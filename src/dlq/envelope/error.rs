//! What can be wrong with an envelope.

/// Errors of the envelope: reading one, or an instant in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// The line is not UTF-8 (JSON text must be; a binary body belongs base64 in `payload`).
    #[error(
        "not UTF-8 (byte {offset}): JSON text must be; binary bodies go in payload as {{\"base64\": ...}}"
    )]
    NotUtf8 {
        /// Offset of the first invalid byte in the line.
        offset: usize,
    },
    /// Not JSON, not an object, a field missing or of the wrong type.
    #[error("{0}")]
    Json(String),
    /// An instant field that is not `YYYY-MM-DDTHH:MM:SS[.f](Z|±HH:MM)`.
    #[error("{field}: {message}")]
    Timestamp {
        /// The field (`firstAttemptAt`, `deadLetteredAt`).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// `payload` is `{"base64": ...}` but the text is not standard base64.
    #[error("payload.base64: {0}")]
    Base64(String),
}
