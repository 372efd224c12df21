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

mod common;
mod nats;
mod rabbitmq;
mod redis;

pub use common::Target;

#[cfg(feature = "kafka")]
mod kafka;

use std::time::Duration;

use crate::preflight::{BrokerSettings, Kind};

/// How long reading one broker's settings may take in all.
pub const READ_DEADLINE: Duration = Duration::from_secs(15);

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
