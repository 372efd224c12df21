//! The preflight's checks by name (what a plan waives), the broker kinds they apply to, and the
//! two sides of a migration.

use std::fmt;

use serde::{Serialize, Serializer};

/// Which side of the migration a broker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Old,
    New,
}

impl Side {
    /// `old`, `new`: the plan's `brokers.old|new`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Old => "old",
            Side::New => "new",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A broker family, as the preflight reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Nats,
    Kafka,
    #[serde(rename = "rabbitmq")]
    RabbitMq,
    Redis,
}

impl Kind {
    /// The kind of a plan's `brokers.X.kind` (`None`: no adapter, nothing to read).
    pub fn of_plan_kind(kind: &str) -> Option<Kind> {
        match kind {
            "nats" | "jetstream" => Some(Kind::Nats),
            "kafka" => Some(Kind::Kafka),
            "amqp" | "rabbitmq" => Some(Kind::RabbitMq),
            "redis" | "redis-streams" => Some(Kind::Redis),
            _ => None,
        }
    }

    /// `nats`, `kafka`, `rabbitmq`, `redis`: the prefix of its checks' names.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Nats => "nats",
            Kind::Kafka => "kafka",
            Kind::RabbitMq => "rabbitmq",
            Kind::Redis => "redis",
        }
    }
}

/// One check, named as a plan waives it (`single_node`, `nats.storage`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    /// The broker's settings could be read at all (every kind): nothing else is judged of a
    /// broker that could not be read.
    Readable,
    /// One node: it cannot survive the loss of that node (every kind).
    SingleNode,
    NatsStorage,
    NatsReplicas,
    NatsSync,
    KafkaReplicationFactor,
    KafkaMinInsyncReplicas,
    KafkaUncleanLeaderElection,
    KafkaAcks,
    RabbitMqQueueType,
    RabbitMqPublisherConfirms,
    RedisAppendonly,
    RedisAppendfsync,
    RedisReplicaFailover,
}

impl Check {
    /// Every check, in the order a report lists them.
    pub const ALL: [Check; 14] = [
        Check::Readable,
        Check::SingleNode,
        Check::NatsStorage,
        Check::NatsReplicas,
        Check::NatsSync,
        Check::KafkaReplicationFactor,
        Check::KafkaMinInsyncReplicas,
        Check::KafkaUncleanLeaderElection,
        Check::KafkaAcks,
        Check::RabbitMqQueueType,
        Check::RabbitMqPublisherConfirms,
        Check::RedisAppendonly,
        Check::RedisAppendfsync,
        Check::RedisReplicaFailover,
    ];

    /// The name a plan waives it by.
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Readable => "readable",
            Check::SingleNode => "single_node",
            Check::NatsStorage => "nats.storage",
            Check::NatsReplicas => "nats.replicas",
            Check::NatsSync => "nats.sync",
            Check::KafkaReplicationFactor => "kafka.replication_factor",
            Check::KafkaMinInsyncReplicas => "kafka.min_insync_replicas",
            Check::KafkaUncleanLeaderElection => "kafka.unclean_leader_election",
            Check::KafkaAcks => "kafka.acks",
            Check::RabbitMqQueueType => "rabbitmq.queue_type",
            Check::RabbitMqPublisherConfirms => "rabbitmq.publisher_confirms",
            Check::RedisAppendonly => "redis.appendonly",
            Check::RedisAppendfsync => "redis.appendfsync",
            Check::RedisReplicaFailover => "redis.replica_failover",
        }
    }

    /// The check of that name.
    pub fn parse(name: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The kind whose brokers it reads (`None`: every kind).
    pub fn kind(self) -> Option<Kind> {
        let name = self.as_str();
        [Kind::Nats, Kind::Kafka, Kind::RabbitMq, Kind::Redis]
            .into_iter()
            .find(|k| {
                name.strip_prefix(k.as_str())
                    .is_some_and(|r| r.starts_with('.'))
            })
    }

    /// Whether it is run on a broker of `kind`.
    pub fn applies_to(self, kind: Kind) -> bool {
        self.kind().is_none_or(|k| k == kind)
    }

    /// The checks run on a broker of `kind`.
    pub fn of_kind(kind: Kind) -> impl Iterator<Item = Check> {
        Check::ALL.into_iter().filter(move |c| c.applies_to(kind))
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Check {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
