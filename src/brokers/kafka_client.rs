//! What every Kafka client of the adapter shares: the settings, the error shape, reading a
//! record into a [`Message`], and running librdkafka's blocking calls off the async threads.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::message::Headers as _;

use super::kafka_url::KafkaUrl;
use super::record::{Record, RecordHeader};
use super::{BrokerError, CONNECT_TIMEOUT, HEADER_KEY, Message};

pub(super) const KIND: &str = "kafka";

/// How long a metadata, offsets or admin request may take.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn op_error(
    operation: &'static str,
    queue: &str,
    reason: impl fmt::Display,
) -> BrokerError {
    BrokerError::operation(KIND, operation, queue, reason)
}

/// The client settings every client of this adapter shares: the URL's security settings and
/// allowlisted properties first, then the adapter's own (which the allowlist never names).
pub(super) fn base_config(url: &KafkaUrl) -> ClientConfig {
    let mut config = ClientConfig::new();
    for (name, value) in &url.client {
        config.set(name, value);
    }
    config
        .set("bootstrap.servers", &url.bootstrap)
        .set("client.id", "queue-migrate")
        .set(
            "socket.connection.setup.timeout.ms",
            millis(CONNECT_TIMEOUT),
        )
        .set("log_level", "3");
    config
}

pub(super) fn millis(d: Duration) -> String {
    d.as_millis().to_string()
}

/// A record as a [`Message`]: each header that is a single UTF-8 value of its name in the text
/// map, and the whole list in [`Record::headers`] when one is not (a binary or null value, a
/// name given twice); the key as [`HEADER_KEY`] when the headers have none and it is UTF-8, and in
/// [`Record::key`] when `x-qm-key` does not say it; a null payload as a tombstone; the create time.
pub(super) fn read_message<M: rdkafka::Message>(m: &M) -> Message {
    let mut headers = BTreeMap::new();
    let mut list = None;
    if let Some(h) = m.headers() {
        let mut plain = true;
        for header in h.iter() {
            let text = header.value.map(std::str::from_utf8);
            match text {
                Some(Ok(value)) if plain => {
                    // A name given twice is not plain: the list then says it.
                    plain = headers
                        .insert(header.key.to_string(), value.to_string())
                        .is_none();
                }
                _ => plain = false,
            }
        }
        if !plain {
            let all = h
                .iter()
                .map(|header| RecordHeader::new(header.key, header.value))
                .collect();
            (headers, list) = super::record::read_headers(all);
        }
    }
    // Whether the record's own `x-qm-key` header is its key (`None`: it has no such header).
    let says_key = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(HEADER_KEY))
        .map(|(_, v)| m.key() == Some(v.as_bytes()));
    let key = match (m.key(), says_key) {
        (Some(key), Some(false)) => Some(key.to_vec()),
        (Some(key), None) => match std::str::from_utf8(key) {
            Ok(text) => {
                headers.insert(HEADER_KEY.to_string(), text.to_string());
                None
            }
            Err(_) => Some(key.to_vec()),
        },
        _ => None,
    };
    let timestamp_ms = match m.timestamp() {
        rdkafka::Timestamp::CreateTime(ms) => Some(ms),
        _ => None,
    };
    Message {
        headers,
        record: Record {
            headers: list,
            key,
            tombstone: m.payload().is_none(),
            timestamp_ms,
        },
        ..Message::new(m.payload().unwrap_or_default().to_vec())
    }
}

/// Runs a blocking librdkafka call off the async threads.
pub(super) async fn blocking<T: Send + 'static, E: fmt::Display + Send + 'static>(
    f: impl FnOnce() -> std::result::Result<T, E> + Send + 'static,
) -> std::result::Result<T, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the request's thread failed: {e}")),
    }
}
