//! The source broker's metadata that is not a text header: the AMQP basic properties, in neutral
//! form, and the AMQP header table with its types (pure).
//!
//! A RabbitMQ delivery fills [`Properties`]; a RabbitMQ publish writes them back as they came
//! (see `amqp_message`), and the NATS and Redis publishers write them as text headers named by
//! [`property_headers`]. Other brokers leave them empty.
//!
//! | AMQP property      | text header (NATS, Redis)  | value                                     |
//! |--------------------|----------------------------|-------------------------------------------|
//! | `content_type`     | `x-amqp-content-type`      | as is                                     |
//! | `content_encoding` | `x-amqp-content-encoding`  | as is                                     |
//! | `delivery_mode`    | `x-amqp-delivery-mode`     | decimal (`1` transient, `2` persistent)   |
//! | `priority`         | `x-amqp-priority`          | decimal                                   |
//! | `correlation_id`   | `x-amqp-correlation-id`    | as is                                     |
//! | `reply_to`         | `x-amqp-reply-to`          | as is                                     |
//! | `expiration`       | `x-amqp-expiration`        | as is (milliseconds, as AMQP writes it)   |
//! | `message_id`       | `x-amqp-message-id`        | as is                                     |
//! | `timestamp`        | `x-amqp-timestamp`         | decimal, seconds since the Unix epoch     |
//! | `type`             | `x-amqp-type`              | as is                                     |
//! | `user_id`          | `x-amqp-user-id`           | as is                                     |
//! | `app_id`           | `x-amqp-app-id`            | as is                                     |
//! | `cluster_id`       | `x-amqp-cluster-id`        | as is                                     |
//!
//! "As is" on Redis; on NATS, which refuses CR and LF in a header value, the NATS publisher
//! percent-encodes `%`, CR and LF in these headers (`%25`, `%0D`, `%0A`).

use lapin::types::FieldTable;

/// The AMQP basic properties of a message (all absent for a message that did not come from
/// RabbitMQ), and its typed AMQP header table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Properties {
    /// MIME type of the payload.
    pub content_type: Option<String>,
    /// MIME encoding of the payload (`gzip`).
    pub content_encoding: Option<String>,
    /// `1` transient, `2` persistent, as the producer set it.
    pub delivery_mode: Option<u8>,
    /// 0 to 9.
    pub priority: Option<u8>,
    /// Application correlation identifier.
    pub correlation_id: Option<String>,
    /// Where the reply goes.
    pub reply_to: Option<String>,
    /// Per-message TTL, milliseconds as text.
    pub expiration: Option<String>,
    /// Application message identifier.
    pub message_id: Option<String>,
    /// Seconds since the Unix epoch.
    pub timestamp: Option<u64>,
    /// The AMQP `type` property.
    pub kind: Option<String>,
    /// The user the producer authenticated as (RabbitMQ checks it on publish).
    pub user_id: Option<String>,
    /// The producing application.
    pub app_id: Option<String>,
    /// Deprecated in AMQP 0.9.1; carried when present.
    pub cluster_id: Option<String>,
    /// The AMQP header table as received, with its types.
    pub typed_headers: TypedHeaders,
}

/// The AMQP header table of a RabbitMQ delivery, with every value's type (opaque outside the
/// adapters). [`Message::headers`] stays the authority on which headers exist and what they say:
/// a RabbitMQ publish writes a typed value only while the text header of the same name still
/// reads as that value's text (see `amqp_message`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypedHeaders(pub(super) Option<FieldTable>);

/// The text header names of the AMQP properties, in [`property_headers`] order.
pub const PROPERTY_HEADERS: [&str; 13] = [
    "x-amqp-content-type",
    "x-amqp-content-encoding",
    "x-amqp-delivery-mode",
    "x-amqp-priority",
    "x-amqp-correlation-id",
    "x-amqp-reply-to",
    "x-amqp-expiration",
    "x-amqp-message-id",
    "x-amqp-timestamp",
    "x-amqp-type",
    "x-amqp-user-id",
    "x-amqp-app-id",
    "x-amqp-cluster-id",
];

/// The properties present on `properties`, as text headers ([`PROPERTY_HEADERS`]).
pub fn property_headers(properties: &Properties) -> Vec<(&'static str, String)> {
    let p = properties;
    let values = [
        p.content_type.clone(),
        p.content_encoding.clone(),
        p.delivery_mode.map(|v| v.to_string()),
        p.priority.map(|v| v.to_string()),
        p.correlation_id.clone(),
        p.reply_to.clone(),
        p.expiration.clone(),
        p.message_id.clone(),
        p.timestamp.map(|v| v.to_string()),
        p.kind.clone(),
        p.user_id.clone(),
        p.app_id.clone(),
        p.cluster_id.clone(),
    ];
    PROPERTY_HEADERS
        .into_iter()
        .zip(values)
        .filter_map(|(name, value)| value.map(|v| (name, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brokers::{Message, text_headers};

    #[test]
    fn every_present_property_becomes_a_named_text_header() {
        let message = Message {
            properties: Properties {
                content_type: Some("application/json".into()),
                delivery_mode: Some(2),
                priority: Some(7),
                timestamp: Some(1_767_225_600),
                kind: Some("order.paid".into()),
                ..Properties::default()
            },
            ..Message::new("{}")
        }
        .with_header("X-AMQP-TYPE", "from a header")
        .with_header("x-retry", "3");
        let got = text_headers(&message);
        let got: Vec<_> = got.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            got,
            [
                ("x-amqp-content-type", "application/json"),
                ("x-amqp-delivery-mode", "2"),
                ("x-amqp-priority", "7"),
                ("x-amqp-timestamp", "1767225600"),
                ("x-amqp-type", "order.paid"),
                ("x-retry", "3"),
            ]
        );
    }

    #[test]
    fn a_message_without_properties_keeps_its_headers_only() {
        let message = Message::new("x").with_header("a", "1");
        assert_eq!(text_headers(&message), message.headers);
    }
}
