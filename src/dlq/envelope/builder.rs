//! Building an envelope at dead-letter time: [`DeadLetterBuilder`] over a [`FailedMessage`].

use super::classify::{ErrorClassifier, ErrorInfo, SeedClassifier};
use super::dead_letter::{DeadLetter, MAX_ERROR_MESSAGE};
use super::js_text::truncate_utf16;
use super::payload::Payload;
use crate::time::{format_timestamp, parse_timestamp};

/// The message a consumer gives up on, as it received it.
#[derive(Debug, Clone, Copy)]
pub struct FailedMessage<'a> {
    /// The body, byte for byte.
    pub body: &'a [u8],
    /// Its headers (looked up by exact name: `x-trace-id`, `x-first-attempt-at`).
    pub headers: &'a [(String, String)],
    /// When this consumer received it (ms), used when no `x-first-attempt-at` header says better.
    pub received_at_ms: i64,
}

impl FailedMessage<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Builds envelopes at dead-letter time (the dead-letter article's `buildDeadLetter`), with a
/// classifier the consumer can extend:
/// `DeadLetterBuilder::new("2.14.0").classifier(my_rules.or(SeedClassifier))`.
#[derive(Debug, Clone)]
pub struct DeadLetterBuilder<C = SeedClassifier> {
    consumer_version: String,
    classifier: C,
}

impl DeadLetterBuilder<SeedClassifier> {
    /// A builder for this consumer build, with the article's classifier.
    pub fn new(consumer_version: impl Into<String>) -> Self {
        DeadLetterBuilder {
            consumer_version: consumer_version.into(),
            classifier: SeedClassifier,
        }
    }
}

impl<C: ErrorClassifier> DeadLetterBuilder<C> {
    /// Use another classifier (chain it with `.or(SeedClassifier)` to keep the article's rules as
    /// the fallback; a classifier that answers `None` for everything yields `unknown`).
    pub fn classifier<N: ErrorClassifier>(self, classifier: N) -> DeadLetterBuilder<N> {
        DeadLetterBuilder {
            consumer_version: self.consumer_version,
            classifier,
        }
    }

    /// The envelope for `message`, which failed `attempts` times with `error`, at `now_ms`.
    ///
    /// `firstAttemptAt` is the `x-first-attempt-at` header when it is an instant (rewritten in
    /// UTC with milliseconds), else the reception time; `traceId` is the `x-trace-id` header.
    pub fn build(
        &self,
        message: &FailedMessage<'_>,
        error: &ErrorInfo,
        attempts: u32,
        now_ms: i64,
    ) -> DeadLetter {
        let first_attempt_ms = message
            .header("x-first-attempt-at")
            .and_then(|h| parse_timestamp(h).ok())
            .unwrap_or(message.received_at_ms);
        DeadLetter {
            payload: Payload::Bytes(message.body.to_vec()),
            error_class: self
                .classifier
                .classify(error)
                .unwrap_or_else(|| "unknown".to_string()),
            error_message: truncate_utf16(&error.message, MAX_ERROR_MESSAGE).to_string(),
            consumer_version: self.consumer_version.clone(),
            trace_id: message.header("x-trace-id").map(str::to_string),
            attempts,
            first_attempt_at: format_timestamp(first_attempt_ms),
            dead_lettered_at: format_timestamp(now_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_follows_the_seed() {
        let headers = vec![
            ("x-trace-id".to_string(), "abc".to_string()),
            (
                "x-first-attempt-at".to_string(),
                "2026-03-02T12:00:00+02:00".to_string(),
            ),
        ];
        let msg = FailedMessage {
            body: b"\xff\x00body",
            headers: &headers,
            received_at_ms: 0,
        };
        let long = "x".repeat(700);
        let error = ErrorInfo::new(long).status(503);
        let dl = DeadLetterBuilder::new("2.0.0").build(&msg, &error, 3, 1_772_445_600_000);
        assert_eq!(dl.error_class, "dependency_unavailable");
        assert_eq!(dl.error_message.len(), MAX_ERROR_MESSAGE);
        assert_eq!(dl.trace_id.as_deref(), Some("abc"));
        assert_eq!(dl.first_attempt_at, "2026-03-02T10:00:00.000Z");
        assert_eq!(dl.dead_lettered_at, "2026-03-02T10:00:00.000Z");
        assert_eq!(dl.payload, Payload::Bytes(b"\xff\x00body".to_vec()));

        let seed = |e: ErrorInfo| SeedClassifier.classify(&e);
        assert_eq!(
            seed(ErrorInfo::new("").name("ValidationError").status(503)).as_deref(),
            Some("validation")
        );
        assert_eq!(
            seed(ErrorInfo::new("").name("TimeoutError")).as_deref(),
            Some("dependency_timeout")
        );
        assert_eq!(
            seed(ErrorInfo::new("").status(404)).as_deref(),
            Some("reference_not_found")
        );
        assert_eq!(
            seed(ErrorInfo::new("").status(500)).as_deref(),
            Some("dependency_unavailable")
        );
        assert_eq!(
            seed(ErrorInfo::new("").status(499)).as_deref(),
            Some("unknown")
        );

        let custom = |e: &ErrorInfo| {
            e.message
                .contains("stock")
                .then(|| "out_of_stock".to_string())
        };
        let b = DeadLetterBuilder::new("2.0.0").classifier(custom.or(SeedClassifier));
        let no_headers = FailedMessage {
            body: b"",
            headers: &[],
            received_at_ms: 5,
        };
        assert_eq!(
            b.build(&no_headers, &ErrorInfo::new("no stock"), 1, 0)
                .error_class,
            "out_of_stock"
        );
        let other = b.build(&no_headers, &ErrorInfo::new("x").status(404), 1, 0);
        assert_eq!(other.error_class, "reference_not_found");
        assert_eq!(other.first_attempt_at, "1970-01-01T00:00:00.005Z");
    }
}
