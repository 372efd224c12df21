//! Kafka (rdkafka over librdkafka, feature `kafka`): a topic per queue, the slice key as the
//! record key, an idempotent `acks=all` producer, a consumer group committing after the effect.
//!
//! # Connecting
//! `kafka://[user:password@]host1:9092[,host2:9092...][?name=value&...]` (or the bare
//! `host:9092,...` list): `partitions` and `replication` are what [`Kafka::declare`] asks for a
//! topic it creates (default 3 and the broker's default); TLS, mTLS, SASL, the partitioner and
//! the allowlisted client properties are in [`KafkaUrl`] (module `kafka_url`).

use std::fmt;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};

use super::kafka_client::{KIND, REQUEST_TIMEOUT, base_config, blocking, millis, op_error};
use super::kafka_offsets::{self, PartitionLag};
use super::{
    BrokerError, CONFIRM_TIMEOUT, CONNECT_TIMEOUT, Depth, HEADER_KEY, Message, Result,
    SubscribeOptions,
};

pub use super::kafka_url::{KafkaUrl, Partitioner};

/// A Kafka adapter: one idempotent producer shared by every publish, and the cluster's address
/// for the consumers, offset readers and admin requests it makes.
pub struct Kafka {
    url: KafkaUrl,
    producer: FutureProducer,
    shown: String,
}

impl fmt::Debug for Kafka {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kafka")
            .field("url", &self.shown)
            .finish_non_exhaustive()
    }
}

/// A publish error about the message itself, which every retry meets again: larger than the
/// broker (or the client) accepts, a record the broker calls invalid.
fn is_refused(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
                | RDKafkaErrorCode::InvalidMessageSize
                | RDKafkaErrorCode::InvalidRecord
                | RDKafkaErrorCode::InvalidMessage
        )
    )
}

impl Kafka {
    /// Connects to the cluster of `url` (see the module documentation) and reads its metadata
    /// once, so that an unreachable cluster is an error here.
    ///
    /// # Errors
    /// [`BrokerError::Connect`] when the URL is not a Kafka URL or no broker answered within
    /// [`CONNECT_TIMEOUT`].
    pub async fn connect(url: &str) -> Result<Kafka> {
        let shown = super::redact(url);
        let parsed = KafkaUrl::parse(url).map_err(|why| BrokerError::connect(KIND, url, why))?;
        let producer: FutureProducer = producer_config(&parsed)
            .create()
            .map_err(|e| BrokerError::connect(KIND, url, e))?;
        let probe = producer.clone();
        blocking(move || {
            probe
                .client()
                .fetch_metadata(None, CONNECT_TIMEOUT)
                .map(|_| ())
        })
        .await
        .map_err(|e| BrokerError::connect(KIND, url, e))?;
        Ok(Kafka {
            url: parsed,
            producer,
            shown,
        })
    }

    /// The cluster's address (`host:port,...`).
    pub fn bootstrap(&self) -> &str {
        &self.url.bootstrap
    }

    /// Makes sure topic `queue` exists: one the metadata knows is left as it is; otherwise a
    /// CreateTopics request with the URL's `partitions` and `replication` (an answer "exists
    /// already" is success).
    pub(super) async fn declare(&self, queue: &str) -> Result<()> {
        if self.partitions(queue).await?.is_some() {
            return Ok(());
        }
        let admin: AdminClient<DefaultClientContext> = base_config(&self.url)
            .create()
            .map_err(|e| op_error("declare", queue, e))?;
        let replication = self.url.replication.unwrap_or(-1);
        let topic = NewTopic::new(
            queue,
            self.url.partitions,
            TopicReplication::Fixed(replication),
        );
        let options = AdminOptions::new()
            .request_timeout(Some(REQUEST_TIMEOUT))
            .operation_timeout(Some(REQUEST_TIMEOUT));
        let results = admin
            .create_topics([&topic], &options)
            .await
            .map_err(|e| op_error("declare (CreateTopics)", queue, e))?;
        for result in results {
            match result {
                Ok(_) => {}
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((name, code)) => {
                    return Err(op_error(
                        "declare (CreateTopics)",
                        queue,
                        format!("topic {name}: {code}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The partition ids of `topic`, or `None` when the cluster does not know it.
    pub(super) async fn partitions(&self, topic: &str) -> Result<Option<Vec<i32>>> {
        let url = self.url.clone();
        let name = topic.to_string();
        blocking(move || kafka_offsets::partitions(&url, &name))
            .await
            .map_err(|e| op_error("metadata", topic, e))
    }

    /// Publishes `message` as one record: its headers in the order of [`Record`]'s guarantees
    /// (values, null values and repeated names as they came from Kafka), the key of
    /// [`Record::key`] else `x-qm-key`, a null payload for a tombstone, and its create time when
    /// it has one (else the producer's clock).
    ///
    /// [`Record`]: super::Record
    /// [`Record::key`]: super::Record::key
    pub(super) async fn publish(&self, queue: &str, message: &Message) -> Result<()> {
        let text = super::types::with_properties(message);
        let mut headers = OwnedHeaders::new();
        for (name, value) in super::record::kafka_headers(&text, &message.record) {
            headers = headers.insert(Header { key: name, value });
        }
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(queue).headers(headers);
        if !message.record.tombstone {
            record = record.payload(message.payload.as_slice());
        }
        if let Some(ms) = message.record.timestamp_ms {
            record = record.timestamp(ms);
        }
        // The slice key is the record key: the partitioner keeps one key on one partition, so
        // its order holds on the new side. Without one, the partitioner spreads the records.
        let key: Option<&[u8]> = match &message.record.key {
            Some(key) => Some(key),
            None => message.header(HEADER_KEY).map(str::as_bytes),
        };
        if let Some(key) = key {
            record = record.key(key);
        }
        match self.producer.send(record, CONFIRM_TIMEOUT).await {
            Ok(_) => Ok(()),
            Err((e, _)) if is_refused(&e) => Err(BrokerError::refused(KIND, queue, e)),
            Err((e, _)) => Err(BrokerError::not_confirmed(KIND, queue, e)),
        }
    }

    pub(super) async fn subscribe(
        &self,
        queue: &str,
        options: &SubscribeOptions,
    ) -> Result<super::kafka_consume::Subscription> {
        super::kafka_consume::Subscription::start(&self.url, queue, options).await
    }

    /// The group's lag on `queue`: the records between each partition's committed offset (the
    /// low watermark when the group committed none) and its high watermark, all `ready` (Kafka
    /// does not know what a member holds uncommitted).
    pub(super) async fn depth(&self, queue: &str, group: &str) -> Result<Depth> {
        let lags = self.lag(queue, group).await?;
        Ok(Depth {
            ready: lags.iter().map(PartitionLag::lag).sum(),
            unacked: 0,
        })
    }

    /// Per partition of `queue`: the committed offset of `group` and the watermarks.
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when the topic does not exist or the cluster did not answer.
    pub async fn lag(&self, queue: &str, group: &str) -> Result<Vec<PartitionLag>> {
        let url = self.url.clone();
        let (topic, group_id) = (queue.to_string(), group.to_string());
        blocking(move || kafka_offsets::group_lag_at(&url, &group_id, &topic))
            .await
            .map_err(|e| op_error("depth", queue, e))
    }

    /// Every partition's high watermark ([`super::marks`]).
    pub(super) async fn stale_mark(&self, queue: &str) -> Result<crate::stale::Mark> {
        let url = self.url.clone();
        let topic = queue.to_string();
        let ends = blocking(move || kafka_offsets::partition_ends(&url, &topic))
            .await
            .map_err(|e| op_error("stale mark", queue, e))?;
        Ok(crate::stale::Mark::PartitionEnds(ends))
    }

    /// Up to `limit` records of `queue` from the start of each partition, oldest first by
    /// (timestamp, partition, offset); joins no group, commits nothing, and fails rather than
    /// answer short when a partition stalls (see [`super::kafka_browse`]).
    pub(super) async fn browse(&self, queue: &str, limit: usize) -> Result<Vec<Message>> {
        let url = self.url.clone();
        let topic = queue.to_string();
        blocking(move || super::kafka_browse::browse(&url, &topic, limit))
            .await
            .map_err(|e| op_error("browse", queue, e))
    }
}

/// The producer's settings: what makes a confirmed publish durable and written once.
pub(super) fn producer_config(url: &KafkaUrl) -> rdkafka::ClientConfig {
    let mut config = base_config(url);
    // Idempotent: a retried batch is written once, in order (implies acks=all,
    // max.in.flight <= 5 and retries); acks=all stated for the reader.
    config
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", millis(CONFIRM_TIMEOUT))
        .set("linger.ms", "1")
        .set("partitioner", url.partitioner.librdkafka());
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mock cluster confirms a record whatever `acks` says and never loses one when a
    /// broker goes down (it elects no new leader): no test against it can tell `acks=all` from
    /// `acks=1`, so the settings are pinned here (docs/brokers.md, "Gaps of the mock").
    #[test]
    fn the_producer_waits_for_every_in_sync_replica_and_writes_once() {
        let url = KafkaUrl::parse("127.0.0.1:9092").unwrap();
        let config = producer_config(&url);
        assert_eq!(config.get("acks"), Some("all"));
        assert_eq!(config.get("enable.idempotence"), Some("true"));
    }

    /// Regression (issue 57): records were placed by librdkafka's default partitioner (CRC32),
    /// not where Java producers put the same keys (murmur2).
    #[test]
    fn keys_are_placed_as_java_places_them_unless_the_url_says_crc32() {
        let config = producer_config(&KafkaUrl::parse("127.0.0.1:9092").unwrap());
        assert_eq!(config.get("partitioner"), Some("murmur2_random"));
        let crc = KafkaUrl::parse("127.0.0.1:9092?partitioner=crc32").unwrap();
        assert_eq!(
            producer_config(&crc).get("partitioner"),
            Some("consistent_random")
        );
    }

    #[test]
    fn only_errors_about_the_record_are_refused() {
        let e = KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge);
        assert!(is_refused(&e));
        for code in [
            RDKafkaErrorCode::MessageTimedOut,
            RDKafkaErrorCode::NotEnoughReplicas,
            RDKafkaErrorCode::BrokerTransportFailure,
            RDKafkaErrorCode::UnknownTopicOrPartition,
        ] {
            assert!(
                !is_refused(&KafkaError::MessageProduction(code)),
                "{code:?}"
            );
        }
    }
}
