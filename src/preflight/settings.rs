//! What a reader found on a broker: each setting known, or unknown with why.

use serde::Serialize;

use super::check::{Kind, Side};

/// A setting as read: its value, or why it could not be read (the broker did not say, an
/// endpoint was not reachable, the queue does not exist yet...).
pub type Known<T> = Result<T, String>;

/// A [`Known`] in JSON: the value itself, or `{"unknown": "why"}`.
fn known<T: Serialize, S: serde::Serializer>(k: &Known<T>, s: S) -> Result<S::Ok, S::Error> {
    match k {
        Ok(v) => v.serialize(s),
        Err(why) => {
            use serde::ser::SerializeMap as _;
            let mut m = s.serialize_map(Some(1))?;
            m.serialize_entry("unknown", why)?;
            m.end()
        }
    }
}

/// One broker's durability settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BrokerSettings {
    pub side: Side,
    /// The plan's display name of the broker.
    pub name: String,
    /// The queue, stream or topic the migration writes to.
    pub destination: String,
    /// How many nodes serve it (1: a single node).
    #[serde(serialize_with = "known")]
    pub nodes: Known<u32>,
    pub detail: Detail,
}

impl BrokerSettings {
    /// The kind of its detail.
    pub fn kind(&self) -> Kind {
        match self.detail {
            Detail::Nats(_) => Kind::Nats,
            Detail::Kafka(_) => Kind::Kafka,
            Detail::RabbitMq(_) => Kind::RabbitMq,
            Detail::Redis(_) => Kind::Redis,
        }
    }
}

/// The settings of one kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Detail {
    Nats(NatsSettings),
    Kafka(KafkaSettings),
    #[serde(rename = "rabbitmq")]
    RabbitMq(RabbitMqSettings),
    Redis(RedisSettings),
}

/// A JetStream stream and its server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NatsSettings {
    /// The stream's name (from the queue, as the adapter names it).
    pub stream: String,
    /// `file` or `memory`.
    #[serde(serialize_with = "known")]
    pub storage: Known<String>,
    /// The stream's replicas.
    #[serde(serialize_with = "known")]
    pub replicas: Known<u32>,
    /// How the server syncs its files, as its monitoring endpoint (`/varz`) says.
    #[serde(serialize_with = "known")]
    pub sync: Known<NatsSync>,
}

/// JetStream's `sync_interval` / `sync_always`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NatsSync {
    /// `sync_always: true`: every write is fsynced before its ack.
    Always,
    /// Files are fsynced every this many ms (the server's default: 2 minutes).
    EveryMs(u64),
}

/// The server's default sync interval when it names none (NATS 2.9 to 2.12).
pub const NATS_DEFAULT_SYNC_MS: u64 = 120_000;

/// A Kafka topic, and our producer's settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KafkaSettings {
    pub topic: String,
    /// The topic's partitions' replicas (the least among them).
    #[serde(serialize_with = "known")]
    pub replication_factor: Known<u32>,
    /// `min.insync.replicas`, as the topic's configuration resolves it.
    #[serde(serialize_with = "known")]
    pub min_insync_replicas: Known<u32>,
    /// `unclean.leader.election.enable`, as the topic's configuration resolves it.
    #[serde(serialize_with = "known")]
    pub unclean_leader_election: Known<bool>,
    /// Our producer's `acks` (the adapter's setting, `all`).
    pub producer_acks: String,
}

/// A RabbitMQ queue, and our publisher.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RabbitMqSettings {
    pub queue: String,
    /// `classic`, `quorum`, `stream` (the management API's `type`).
    #[serde(serialize_with = "known")]
    pub queue_type: Known<String>,
    /// Whether the queue is durable.
    #[serde(serialize_with = "known")]
    pub durable: Known<bool>,
    /// Whether our publisher waits for the broker's confirm (the adapter's setting).
    pub publisher_confirms: bool,
}

/// A Redis server, and our publisher.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedisSettings {
    /// `appendonly`.
    #[serde(serialize_with = "known")]
    pub appendonly: Known<bool>,
    /// `appendfsync`: `always`, `everysec`, `no`.
    #[serde(serialize_with = "known")]
    pub appendfsync: Known<String>,
    /// Replicas attached to it (`connected_slaves`), or, when it is itself a replica, 1.
    #[serde(serialize_with = "known")]
    pub replicas: Known<u32>,
    /// Whether our publisher waits (`WAIT`) for replicas before counting a write confirmed.
    pub publisher_waits: bool,
}
