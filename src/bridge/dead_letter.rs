//! The dead letter of a message the destination refused for good: the dead-letter article's
//! envelope ([`crate::dlq::envelope`]) as the payload, the original headers kept, published to the
//! old broker's `brokers.old.dead_letter` queue. Pure: instants are arguments.

use crate::brokers::{Message, Properties, Record};
use crate::dlq::envelope::{DeadLetterBuilder, ErrorInfo, FailedMessage};

/// The `errorClass` of every message the bridge parks: `migrate dlq triage` groups them apart
/// from the consumers' own dead letters. Stable: recorded decisions name it.
pub const ERROR_CLASS: &str = "bridge_refused";

/// The `consumerVersion` the bridge writes: `queue-migrate-bridge <crate version>`.
pub const CONSUMER_VERSION: &str = concat!("queue-migrate-bridge ", env!("CARGO_PKG_VERSION"));

/// The message to publish to the dead-letter queue for `original` (the ingress message as
/// received, without the bridge's stamp), refused with `refusal` after `attempts` publishes, the
/// first at `first_attempt_ms`, given up on at `now_ms`.
///
/// Its payload is one envelope line: `payload` the original body byte for byte, `errorClass`
/// [`ERROR_CLASS`], `errorMessage` the refusal, `traceId` the `x-trace-id` header,
/// `firstAttemptAt` the `x-first-attempt-at` header when it is an instant, else
/// `first_attempt_ms`. Its headers are the original ones: they came from the old broker, which
/// can carry them back, and a replay to the ingress needs them (a key in a header, the dedup key).
/// So are its AMQP properties and typed headers (see [`crate::brokers::Properties`]), except
/// `content_type` and `content_encoding` (they describe the original body, now inside the
/// envelope) and `expiration` (a parked message must not expire).
pub fn message(
    original: &Message,
    refusal: &str,
    attempts: u32,
    first_attempt_ms: i64,
    now_ms: i64,
) -> Message {
    let headers: Vec<(String, String)> = original
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let failed = FailedMessage {
        body: &original.payload,
        headers: &headers,
        received_at_ms: first_attempt_ms,
    };
    let builder = DeadLetterBuilder::new(CONSUMER_VERSION)
        .classifier(|_: &ErrorInfo| Some(ERROR_CLASS.to_string()));
    let envelope = builder.build(&failed, &ErrorInfo::new(refusal), attempts, now_ms);
    Message {
        headers: original.headers.clone(),
        payload: envelope.to_line().into_bytes(),
        properties: Properties {
            content_type: None,
            content_encoding: None,
            expiration: None,
            ..original.properties.clone()
        },
        // A Kafka record's headers and key go back as they came; the payload is the envelope
        // now (never a tombstone), and the dead letter's time is its own.
        record: Record {
            tombstone: false,
            timestamp_ms: None,
            ..original.record.clone()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlq::envelope::DeadLetter;

    const REFUSAL: &str =
        "nats: publish to \"ORDERS\" refused for this message: max payload size exceeded";

    /// Regression: the bridge had no way to park a message the destination refuses; its key
    /// stalled for good. The envelope is the article's, its payload byte-intact (binary too).
    #[test]
    fn the_envelope_keeps_the_body_byte_for_byte_and_the_headers() {
        let body: Vec<u8> = (0..=255).cycle().take(3000).collect();
        let original = Message::new(body.clone())
            .with_header("x-qm-key", "order-7")
            .with_header("x-trace-id", "4bf92f35");
        let dl = message(&original, REFUSAL, 3, 1_767_225_600_000, 1_767_225_601_500);
        assert_eq!(
            dl.headers, original.headers,
            "the original headers are kept"
        );
        let envelope = DeadLetter::from_line(&dl.payload).expect("a dead-letter envelope");
        assert_eq!(envelope.payload.to_bytes().as_ref(), body.as_slice());
        assert_eq!(envelope.error_class, "bridge_refused");
        assert_eq!(envelope.error_message, REFUSAL);
        assert_eq!(
            envelope.consumer_version,
            format!("queue-migrate-bridge {}", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(envelope.attempts, 3);
        assert_eq!(envelope.trace_id.as_deref(), Some("4bf92f35"));
        assert_eq!(envelope.first_attempt_at, "2026-01-01T00:00:00.000Z");
        assert_eq!(envelope.dead_lettered_at, "2026-01-01T00:00:01.500Z");
    }

    /// Regression: the dead letter of a RabbitMQ message lost its AMQP properties, so nothing
    /// told which message (message id, correlation id) was parked.
    #[test]
    fn the_dead_letter_keeps_the_properties_that_do_not_describe_the_body() {
        let original = Message {
            properties: Properties {
                content_type: Some("application/json".into()),
                content_encoding: Some("gzip".into()),
                expiration: Some("60000".into()),
                message_id: Some("msg-1".into()),
                correlation_id: Some("corr-1".into()),
                priority: Some(4),
                ..Properties::default()
            },
            ..Message::new("{}")
        }
        .with_header("x-qm-key", "order-7");
        let dl = message(&original, REFUSAL, 1, 0, 0);
        assert_eq!(
            dl.properties,
            Properties {
                message_id: Some("msg-1".into()),
                correlation_id: Some("corr-1".into()),
                priority: Some(4),
                ..Properties::default()
            },
            "the envelope is JSON, and a parked message must not expire"
        );
        assert_eq!(dl.headers, original.headers);
    }

    #[test]
    fn a_text_body_stays_a_json_string() {
        let original = Message::new(br#"{"orderId":"order-7"}"#.to_vec());
        let dl = message(&original, REFUSAL, 1, 0, 0);
        let v: serde_json::Value = serde_json::from_slice(&dl.payload).expect("json");
        assert_eq!(v["payload"], r#"{"orderId":"order-7"}"#);
        assert!(dl.headers.is_empty());
    }
}
