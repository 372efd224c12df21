//! What every Kafka client of the adapter shares: the settings, the error shape, reading a
//! record into a [`Message`], and running librdkafka's blocking calls off the async threads.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::message::Headers as _;

use super::kafka_url::KafkaUrl;
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

/// A record's headers as text (a value that is not UTF-8 is read lossily) and its key as
/// [`HEADER_KEY`] when the headers have none.
pub(super) fn read_message<M: rdkafka::Message>(m: &M) -> Message {
    let mut headers = BTreeMap::new();
    if let Some(h) = m.headers() {
        for header in h.iter() {
            let value = header
                .value
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            headers.insert(header.key.to_string(), value);
        }
    }
    let has_key = headers.keys().any(|k| k.eq_ignore_ascii_case(HEADER_KEY));
    if !has_key && let Some(key) = m.key().and_then(|k| std::str::from_utf8(k).ok()) {
        headers.insert(HEADER_KEY.to_string(), key.to_string());
    }
    Message {
        headers,
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
