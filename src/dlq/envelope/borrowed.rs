//! The borrowed view of an envelope line, [`EnvelopeRef`]: every field checked, nothing copied
//! that the line already holds. Triage reads millions of lines through it; the owned
//! [`DeadLetter`](super::DeadLetter) is made from it.

use std::borrow::Cow;

use serde::Deserialize;

use super::error::EnvelopeError;
use super::payload::{PayloadLean, PayloadProbe};
use crate::time::parse_timestamp;

/// An envelope read without copying what it does not need to: triage reads millions.
///
/// `P` is how `payload` is held: [`PayloadProbe`] (the default, what [`EnvelopeRef::parse`]
/// gives) or, for triage's first read, [`PayloadLean`] ([`EnvelopeRef::parse_lean`]); both are
/// read by the same visitor, so a line is valid under one exactly when it is under the other.
#[derive(Debug, Deserialize)]
pub struct EnvelopeRef<'a, P = PayloadProbe<'a>> {
    payload: P,
    #[serde(rename = "errorClass", borrow)]
    error_class: Cow<'a, str>,
    /// WTF-8: JSON allows lone surrogate escapes, which JS writers produce.
    #[serde(rename = "errorMessage", borrow)]
    error_message: Cow<'a, [u8]>,
    #[serde(rename = "consumerVersion", borrow)]
    consumer_version: Cow<'a, str>,
    #[serde(rename = "traceId", default, borrow)]
    trace_id: Option<Cow<'a, str>>,
    attempts: u32,
    #[serde(rename = "firstAttemptAt", borrow)]
    first_attempt_at: Cow<'a, str>,
    #[serde(rename = "deadLetteredAt", borrow)]
    dead_lettered_at: Cow<'a, str>,
    #[serde(skip)]
    first_attempt_ms: i64,
    #[serde(skip)]
    dead_lettered_ms: i64,
}

/// Check what every reader of a line checks before serde: UTF-8, and an object.
fn line_text(line: &[u8]) -> Result<&str, EnvelopeError> {
    let text = std::str::from_utf8(line).map_err(|e| EnvelopeError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    // serde's derive would also take a JSON array, field by field: an envelope is an object.
    if text.trim_start().as_bytes().first() != Some(&b'{') {
        return Err(EnvelopeError::Json(
            "not a JSON object (an export has one envelope object per line)".into(),
        ));
    }
    Ok(text)
}

impl<'a> EnvelopeRef<'a> {
    /// Parse and validate one line (without its newline).
    ///
    /// # Errors
    /// The line is not a valid envelope.
    pub fn parse(line: &'a [u8]) -> Result<EnvelopeRef<'a>, EnvelopeError> {
        let mut view: EnvelopeRef<'a> = serde_json::from_str(line_text(line)?)
            .map_err(|e| EnvelopeError::Json(e.to_string()))?;
        view.validate()?;
        Ok(view)
    }
}

impl<'a> EnvelopeRef<'a, PayloadLean<'a>> {
    /// Parse and validate one line as [`EnvelopeRef::parse`] does (same result, same error),
    /// without copying out a payload string that had escapes.
    ///
    /// # Errors
    /// The line is not a valid envelope.
    pub(crate) fn parse_lean(line: &'a [u8]) -> Result<Self, EnvelopeError> {
        let mut view: Self = serde_json::from_str(line_text(line)?)
            .map_err(|e| EnvelopeError::Json(e.to_string()))?;
        view.validate()?;
        Ok(view)
    }
}

impl<'a> EnvelopeRef<'a, &'a serde_json::value::RawValue> {
    /// Triage's fast read: `payload` is checked as JSON and skipped, never unescaped or copied.
    ///
    /// `Some` only when the line is valid exactly as [`EnvelopeRef::parse`] says it is: the
    /// payload is a JSON string that holds no `\uD...` escape (the one thing skipping a string
    /// checks less than reading it as text: a lone surrogate). `None` for anything else (an
    /// invalid line, another payload form, such an escape): read the line with
    /// [`EnvelopeRef::parse_lean`] then, which gives the verdict and the message.
    pub(crate) fn parse_skim(line: &'a [u8]) -> Option<Self> {
        let text = line_text(line).ok()?;
        let mut view: Self = serde_json::from_str(text).ok()?;
        let raw = view.payload.get().as_bytes();
        if raw.first() != Some(&b'"') || may_hold_surrogate_escape(raw) {
            return None;
        }
        view.validate().ok()?;
        Some(view)
    }
}

/// Whether the JSON text `raw` has a `\u` followed by `d`/`D` (a surrogate escape, or a
/// backslash-escaped text that looks like one: either way the careful read decides).
fn may_hold_surrogate_escape(raw: &[u8]) -> bool {
    memchr::memmem::find_iter(raw, b"\\u").any(|i| matches!(raw.get(i + 2), Some(b'd' | b'D')))
}

impl<'a, P> EnvelopeRef<'a, P> {
    /// Parse both instants (a view is valid once this passed).
    pub(super) fn validate(&mut self) -> Result<(), EnvelopeError> {
        self.first_attempt_ms = parse_timestamp(&self.first_attempt_at).map_err(|message| {
            EnvelopeError::Timestamp {
                field: "firstAttemptAt",
                message,
            }
        })?;
        self.dead_lettered_ms = parse_timestamp(&self.dead_lettered_at).map_err(|message| {
            EnvelopeError::Timestamp {
                field: "deadLetteredAt",
                message,
            }
        })?;
        Ok(())
    }

    /// `errorClass`.
    pub fn error_class(&self) -> &str {
        &self.error_class
    }
    /// `consumerVersion`.
    pub fn consumer_version(&self) -> &str {
        &self.consumer_version
    }
    /// `errorMessage` as WTF-8 bytes (exactly what the JSON string held).
    pub fn error_message_wtf8(&self) -> &[u8] {
        &self.error_message
    }
    /// `firstAttemptAt` as written.
    pub fn first_attempt_at(&self) -> &str {
        &self.first_attempt_at
    }
    /// `firstAttemptAt` in ms.
    pub fn first_attempt_ms(&self) -> i64 {
        self.first_attempt_ms
    }
    /// `deadLetteredAt` as written.
    pub fn dead_lettered_at(&self) -> &str {
        &self.dead_lettered_at
    }
    /// `deadLetteredAt` in ms.
    pub fn dead_lettered_ms(&self) -> i64 {
        self.dead_lettered_ms
    }
    /// `payload`, as `P` holds it.
    pub(super) fn payload(&self) -> &P {
        &self.payload
    }
    /// `traceId`, when present and not null.
    pub(super) fn trace_id(&self) -> Option<&str> {
        self.trace_id.as_deref()
    }
    /// `attempts`.
    pub(super) fn attempts(&self) -> u32 {
        self.attempts
    }
}
