//! The owned envelope, [`DeadLetter`]: what the builder makes, what is written as one JSON line,
//! and what a line reads into (through the borrowed view, [`EnvelopeRef`]).

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use super::borrowed::EnvelopeRef;
use super::error::EnvelopeError;
use super::js_text::wtf8_to_string;
use super::payload::{Payload, PayloadLean, PayloadProbe};
use crate::time::parse_timestamp;

/// The article's `MAX_ERROR_MESSAGE`, in UTF-16 code units (JS string length).
pub const MAX_ERROR_MESSAGE: usize = 500;

/// One dead letter (the dead-letter article's `buildDeadLetter` result).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetter {
    /// The original body, byte for byte.
    pub payload: Payload,
    /// What grouping starts from (see [`ErrorClassifier`](super::ErrorClassifier)).
    #[serde(rename = "errorClass")]
    pub error_class: String,
    /// The error's message, cut at [`MAX_ERROR_MESSAGE`] UTF-16 units.
    #[serde(rename = "errorMessage")]
    pub error_message: String,
    /// The consumer build that failed: "does this failure still exist in the current code?".
    #[serde(rename = "consumerVersion")]
    pub consumer_version: String,
    /// Links the dead letter to the rest of the request while the trace exists.
    #[serde(rename = "traceId")]
    pub trace_id: Option<String>,
    /// How many times the consumer tried.
    pub attempts: u32,
    /// The first attempt (not the last): it locates the deploy or incident that started it.
    #[serde(rename = "firstAttemptAt")]
    pub first_attempt_at: String,
    /// When the consumer gave up.
    #[serde(rename = "deadLetteredAt")]
    pub dead_lettered_at: String,
}

impl DeadLetter {
    /// `firstAttemptAt` in ms (it parsed when the envelope was read or built).
    pub fn first_attempt_ms(&self) -> Option<i64> {
        parse_timestamp(&self.first_attempt_at).ok()
    }

    /// `deadLetteredAt` in ms.
    pub fn dead_lettered_ms(&self) -> Option<i64> {
        parse_timestamp(&self.dead_lettered_at).ok()
    }

    /// Read one export line.
    ///
    /// # Errors
    /// The line is not a valid envelope (see the module documentation).
    pub fn from_line(line: &[u8]) -> Result<DeadLetter, EnvelopeError> {
        Ok(EnvelopeRef::parse(line)?.to_dead_letter())
    }

    /// The envelope as one JSON line (no newline).
    pub fn to_line(&self) -> String {
        // Serializing plain strings, numbers and a Value cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for DeadLetter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut view: EnvelopeRef<'_> = EnvelopeRef::deserialize(deserializer)?;
        view.validate().map_err(de::Error::custom)?;
        Ok(view.to_dead_letter())
    }
}

impl<'a> EnvelopeRef<'a, PayloadLean<'a>> {
    /// The owned envelope, when the payload was kept (not [`PayloadLean::Escaped`]).
    pub(crate) fn to_dead_letter(&self) -> Option<DeadLetter> {
        let payload = match self.payload() {
            PayloadLean::Borrowed(t) => Payload::Bytes(t.as_bytes().to_vec()),
            PayloadLean::Escaped => return None,
            PayloadLean::Other(p) => p.clone(),
        };
        Some(self.owned(payload))
    }
}

impl<P> EnvelopeRef<'_, P> {
    fn owned(&self, payload: Payload) -> DeadLetter {
        DeadLetter {
            payload,
            error_class: self.error_class().to_string(),
            error_message: wtf8_to_string(self.error_message_wtf8()),
            consumer_version: self.consumer_version().to_string(),
            trace_id: self.trace_id().map(str::to_string),
            attempts: self.attempts(),
            first_attempt_at: self.first_attempt_at().to_string(),
            dead_lettered_at: self.dead_lettered_at().to_string(),
        }
    }
}

impl EnvelopeRef<'_> {
    /// The owned envelope.
    pub fn to_dead_letter(&self) -> DeadLetter {
        self.owned(match self.payload() {
            PayloadProbe::Text(t) => Payload::Bytes(t.as_bytes().to_vec()),
            PayloadProbe::Other(p) => p.clone(),
        })
    }
}

/// A dead letter of class `dependency_timeout` with `payload`, for the crate's tests.
#[cfg(test)]
pub(crate) fn sample_dead_letter(payload: Payload) -> DeadLetter {
    DeadLetter {
        payload,
        error_class: "dependency_timeout".into(),
        error_message: "t".into(),
        consumer_version: "1".into(),
        trace_id: None,
        attempts: 3,
        first_attempt_at: "2026-11-29T10:00:00.000Z".into(),
        dead_lettered_at: "2026-11-29T10:05:00.000Z".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(payload: Payload) -> DeadLetter {
        DeadLetter {
            payload,
            error_class: "validation".into(),
            error_message: "bad".into(),
            consumer_version: "1.0.0".into(),
            trace_id: None,
            attempts: 3,
            first_attempt_at: "2026-03-02T10:15:00.000Z".into(),
            dead_lettered_at: "2026-03-02T10:16:00.000Z".into(),
        }
    }

    #[test]
    fn non_utf8_payload_round_trips_through_base64() {
        let bytes: Vec<u8> = (0..=255).collect();
        let dl = envelope(Payload::Bytes(bytes.clone()));
        let line = dl.to_line();
        assert!(line.contains(r#""payload":{"base64":""#), "{line}");
        let back = DeadLetter::from_line(line.as_bytes()).expect("reads back");
        assert_eq!(back, dl);
        assert_eq!(back.payload.to_bytes().as_ref(), bytes.as_slice());
    }

    #[test]
    fn utf8_payload_is_a_json_string_and_round_trips() {
        let body = "{\"order\":\"ação 🚀\"}\n\u{0}";
        let dl = envelope(Payload::Bytes(body.as_bytes().to_vec()));
        let line = dl.to_line();
        let v: serde_json::Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["payload"], serde_json::Value::String(body.into()));
        assert_eq!(DeadLetter::from_line(line.as_bytes()), Ok(dl));
    }

    #[test]
    fn every_field_has_the_seed_name() {
        let v: serde_json::Value =
            serde_json::from_str(&envelope(Payload::Bytes(b"x".to_vec())).to_line()).expect("json");
        let mut keys: Vec<_> = v.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "attempts",
                "consumerVersion",
                "deadLetteredAt",
                "errorClass",
                "errorMessage",
                "firstAttemptAt",
                "payload",
                "traceId"
            ]
        );
    }

    #[test]
    fn node_buffer_and_json_payloads_are_read() {
        let line = r#"{"payload":{"type":"Buffer","data":[255,0,1]},"errorClass":"a","errorMessage":"m","consumerVersion":"v","traceId":null,"attempts":1,"firstAttemptAt":"2026-01-01T00:00:00Z","deadLetteredAt":"2026-01-01T00:00:00Z"}"#;
        let dl = DeadLetter::from_line(line.as_bytes()).expect("valid");
        assert_eq!(dl.payload, Payload::Bytes(vec![255, 0, 1]));
        let line = line.replace(r#"{"type":"Buffer","data":[255,0,1]}"#, r#"{"order":1}"#);
        let dl = DeadLetter::from_line(line.as_bytes()).expect("valid");
        assert_eq!(dl.payload.to_bytes().as_ref(), br#"{"order":1}"#);
        let bad = line.replace(r#"{"order":1}"#, r#"{"base64":"@@"}"#);
        assert!(matches!(
            DeadLetter::from_line(bad.as_bytes()),
            Err(EnvelopeError::Json(m)) if m.contains("base64")
        ));
    }

    #[test]
    fn lone_surrogate_from_a_js_writer_is_kept_as_its_escape() {
        let line = r#"{"payload":"x","errorClass":"a","errorMessage":"boom \ud83d","consumerVersion":"v","attempts":1,"firstAttemptAt":"2026-01-01T00:00:00Z","deadLetteredAt":"2026-01-01T00:00:00Z"}"#;
        let dl = DeadLetter::from_line(line.as_bytes()).expect("valid");
        assert_eq!(dl.error_message, "boom \\ud83d");
        assert_eq!(dl.trace_id, None);
    }

    #[test]
    fn invalid_lines_say_why() {
        assert!(matches!(
            DeadLetter::from_line(b"{\"payload\":\"\xff\"}"),
            Err(EnvelopeError::NotUtf8 { offset: 12 })
        ));
        assert!(matches!(
            DeadLetter::from_line(b"[]"),
            Err(EnvelopeError::Json(_))
        ));
        let line = r#"{"payload":"x","errorClass":"a","errorMessage":"m","consumerVersion":"v","attempts":1,"firstAttemptAt":"2026-02-30T00:00:00Z","deadLetteredAt":"2026-01-01T00:00:00Z"}"#;
        assert!(matches!(
            DeadLetter::from_line(line.as_bytes()),
            Err(EnvelopeError::Timestamp {
                field: "firstAttemptAt",
                ..
            })
        ));
    }
}
