//! The durability settings of a broker, read for the preflight ([`crate::preflight`]): the
//! edge of that pure module. One reader per kind, each bounded by a client-side deadline
//! ([`READ_DEADLINE`] in all, and each request its own timeout); what a broker could not tell
//! is returned as unknown with why, never guessed.
//!
//! - NATS: the stream's storage and replicas (JetStream API), the cluster from the server's
//!   INFO, the sync interval from the monitoring endpoint's `/varz` when one is given.
//! - Kafka (feature `kafka`): the topic's replication factor (metadata), its resolved
//!   `min.insync.replicas` and `unclean.leader.election.enable` (DescribeConfigs), the brokers
//!   (metadata); our producer's `acks` from the adapter's own settings.
//! - RabbitMQ: the queue's type and durability and the cluster's nodes (management API);
//!   publisher confirms from the adapter (always on).
//! - Redis: `CONFIG GET appendonly` / `appendfsync`, `INFO replication`.
//!
//! # Errors
//! A broker that cannot be reached at all (or answers nothing within the deadline) is an
//! error, with the reason redacted: nothing about it can be judged.

mod nats;
mod rabbitmq;
mod redis;

#[cfg(feature = "kafka")]
mod kafka;

use std::time::Duration;

use crate::preflight::{BrokerSettings, Kind, Side};

/// How long reading one broker's settings may take in all.
pub const READ_DEADLINE: Duration = Duration::from_secs(15);

/// How long one HTTP request to a monitoring endpoint may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// What to read: one broker of a plan.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub side: Side,
    /// The display name.
    pub name: &'a str,
    /// The plan's kind (`nats`, `amqp`...).
    pub kind: &'a str,
    /// Its connection URL (may hold credentials: never shown as is).
    pub url: &'a str,
    /// The queue, stream or topic the migration writes to.
    pub destination: &'a str,
    /// The monitoring endpoint, when the plan names one.
    pub monitor: Option<&'a str>,
}

/// Reads `target`'s settings within [`READ_DEADLINE`].
///
/// # Errors
/// The broker could not be reached, its kind has no reader, or the deadline passed: the reason,
/// redacted (neither the URL's credentials nor any URL's).
pub async fn read(target: Target<'_>) -> Result<BrokerSettings, String> {
    let read = async {
        match Kind::of_plan_kind(target.kind) {
            Some(Kind::Nats) => nats::read(&target).await,
            Some(Kind::RabbitMq) => rabbitmq::read(&target).await,
            Some(Kind::Redis) => redis::read(&target).await,
            #[cfg(feature = "kafka")]
            Some(Kind::Kafka) => kafka::read(&target).await,
            #[cfg(not(feature = "kafka"))]
            Some(Kind::Kafka) => Err("this migrate was built without the `kafka` feature".into()),
            None => Err(format!("kind {:?} has no adapter", target.kind)),
        }
    };
    match tokio::time::timeout(READ_DEADLINE, read).await {
        Ok(r) => r.map_err(|e| crate::redact::known(&e, [target.url])),
        Err(_) => Err(format!("no answer within {READ_DEADLINE:?}")),
    }
}

/// The HTTP client of the monitoring endpoints: bounded connect and request.
fn http() -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .connect_timeout(super::CONNECT_TIMEOUT)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

/// A GET answered with JSON, or why not (its body's start on an HTTP error).
async fn get_json(
    http: &reqwest::Client,
    url: reqwest::Url,
    auth: Option<(&str, Option<&str>)>,
) -> Result<serde_json::Value, GetError> {
    let shown = crate::redact::url(url.as_str());
    let mut req = http.get(url);
    if let Some((user, password)) = auth {
        req = req.basic_auth(user, password);
    }
    let response = req
        .send()
        .await
        .map_err(|e| GetError::Other(format!("{shown}: {}", crate::redact::error(&e))))?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(GetError::NotFound);
    }
    if !status.is_success() {
        return Err(GetError::Other(format!("{shown}: HTTP {status}")));
    }
    response
        .json()
        .await
        .map_err(|e| GetError::Other(format!("{shown}: not JSON: {e}")))
}

/// Why a GET gave no JSON.
enum GetError {
    NotFound,
    Other(String),
}
