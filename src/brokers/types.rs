//! What every adapter speaks: the message, the errors, the subscription options and the headers
//! that cross every pair of brokers. The adapters and [`super::Adapter`] build on these; nothing
//! here knows an adapter.

use std::collections::BTreeMap;
use std::time::Duration;

use super::properties::{Properties, property_headers};
use super::record::{Record, encoded_headers};

/// The dedup key header: the business key (`type:aggregate:event`) the consumer claims.
pub const HEADER_DEDUP_KEY: &str = "x-qm-dedup-key";
/// The message key header: what the slice is computed from (the aggregate id).
pub const HEADER_KEY: &str = "x-qm-key";
/// Marks a synthetic probe: consumers apply no business effect and report its latency.
pub use crate::probe::HEADER_PROBE;

/// Which broker an adapter speaks to; the plan's `brokers.*.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// RabbitMQ over AMQP 0.9.1 (`rabbitmq`, `amqp`).
    RabbitMq,
    /// NATS JetStream (`nats`, `jetstream`).
    Nats,
    /// Redis Streams (`redis`, `redis-streams`).
    Redis,
    /// Kafka (`kafka`); its adapter needs the cargo feature `kafka`.
    Kafka,
}

impl Kind {
    /// Reads a plan's `kind`; `None` for a kind no adapter speaks.
    pub fn parse(kind: &str) -> Option<Kind> {
        match kind.to_ascii_lowercase().as_str() {
            "rabbitmq" | "amqp" => Some(Kind::RabbitMq),
            "nats" | "jetstream" | "nats-jetstream" => Some(Kind::Nats),
            "redis" | "redis-streams" => Some(Kind::Redis),
            "kafka" => Some(Kind::Kafka),
            _ => None,
        }
    }

    /// The canonical name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::RabbitMq => "rabbitmq",
            Kind::Nats => "nats",
            Kind::Redis => "redis",
            Kind::Kafka => "kafka",
        }
    }
}

/// Errors of the broker adapters.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The broker could not be reached or the connection was lost.
    #[error("{kind} at {url}: cannot connect: {reason}")]
    Connect {
        /// The broker kind.
        kind: &'static str,
        /// The URL with any password removed.
        url: String,
        /// What the client library said.
        reason: String,
    },
    /// The broker refused or did not confirm a publish; the message may or may not be stored.
    #[error("{kind}: publish to {queue:?} not confirmed: {reason}")]
    NotConfirmed {
        /// The broker kind.
        kind: &'static str,
        /// The queue or stream.
        queue: String,
        /// Why.
        reason: String,
    },
    /// The broker or its client refused this very message: larger than the NATS server's
    /// `max_payload` or a JetStream stream's `max_msg_size`, a header name or value the wire
    /// format cannot carry. Nothing was stored, and publishing the same message again will not
    /// succeed until the destination's configuration changes (so retrying it only blocks what
    /// waits behind it). Given only where that is certain: a lost connection, a timeout, a nack
    /// or any other doubt is [`BrokerError::NotConfirmed`].
    #[error("{kind}: publish to {queue:?} refused for this message: {reason}")]
    Refused {
        /// The broker kind.
        kind: &'static str,
        /// The queue or stream.
        queue: String,
        /// What the broker or its client said about the message.
        reason: String,
    },
    /// An operation failed on the broker (declare, consume, ack, depth, browse).
    #[error("{kind}: {operation} on {queue:?}: {reason}")]
    Operation {
        /// The broker kind.
        kind: &'static str,
        /// What was attempted.
        operation: &'static str,
        /// The queue or stream.
        queue: String,
        /// Why.
        reason: String,
    },
    /// The broker cannot do this (RabbitMQ cannot browse a queue without taking its messages).
    #[error("{kind}: {what}")]
    Unsupported {
        /// The broker kind.
        kind: &'static str,
        /// What cannot be done, and what to do instead.
        what: String,
    },
    /// The plan names a broker kind no adapter speaks.
    #[error("unknown broker kind {0:?}: expected rabbitmq, nats, redis or kafka")]
    UnknownKind(String),
}

impl BrokerError {
    /// Whether the destination refused the message itself ([`BrokerError::Refused`]): the same
    /// publish will fail again, however often it is retried.
    pub fn is_refused(&self) -> bool {
        matches!(self, BrokerError::Refused { .. })
    }

    /// [`BrokerError::Connect`], the URL and the client's reason redacted ([`crate::redact`]:
    /// a client error may quote the URL it failed on, credentials included).
    pub(crate) fn connect(
        kind: &'static str,
        url: &str,
        reason: impl std::fmt::Display,
    ) -> BrokerError {
        BrokerError::Connect {
            kind,
            url: crate::redact::url(url),
            reason: crate::redact::known(&reason.to_string(), crate::outgoing::forms(url)),
        }
    }

    pub(crate) fn refused(
        kind: &'static str,
        queue: &str,
        reason: impl std::fmt::Display,
    ) -> BrokerError {
        BrokerError::Refused {
            kind,
            queue: queue.to_string(),
            reason: crate::redact::text(&reason.to_string()),
        }
    }

    pub(crate) fn operation(
        kind: &'static str,
        operation: &'static str,
        queue: &str,
        reason: impl std::fmt::Display,
    ) -> BrokerError {
        BrokerError::Operation {
            kind,
            operation,
            queue: queue.to_string(),
            reason: crate::redact::text(&reason.to_string()),
        }
    }

    pub(crate) fn not_confirmed(
        kind: &'static str,
        queue: &str,
        reason: impl std::fmt::Display,
    ) -> BrokerError {
        BrokerError::NotConfirmed {
            kind,
            queue: queue.to_string(),
            reason: crate::redact::text(&reason.to_string()),
        }
    }
}

/// A result of this module.
pub type Result<T, E = BrokerError> = std::result::Result<T, E>;

/// A message to publish: headers (text), a payload (bytes), and the source broker's metadata
/// that is not a text header (the AMQP properties and typed headers of a RabbitMQ delivery; the
/// binary, null and repeated headers, key, tombstone and create time of a Kafka record).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    /// Header names are kept as given; readers should compare them case-insensitively. Every
    /// header of a delivery with a text form is here (RabbitMQ: typed values as text, see
    /// [`Properties`]); what is written on publish follows this map.
    pub headers: BTreeMap<String, String>,
    /// The body, byte for byte.
    pub payload: Vec<u8>,
    /// The AMQP properties and typed header table (empty unless read from RabbitMQ).
    pub properties: Properties,
    /// What a Kafka record carries beyond `headers` and `payload` (empty unless read from
    /// Kafka): see [`Record`] for how a Kafka publish writes it back and how the other brokers
    /// carry it.
    pub record: Record,
}

impl Message {
    /// A message with no headers and no properties.
    pub fn new(payload: impl Into<Vec<u8>>) -> Message {
        Message {
            headers: BTreeMap::new(),
            payload: payload.into(),
            properties: Properties::default(),
            record: Record::default(),
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Message {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// A header's value, matched case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How many messages wait in a queue for its consumers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Depth {
    /// Delivered to nobody yet.
    pub ready: u64,
    /// Delivered and not acked yet.
    pub unacked: u64,
}

impl Depth {
    /// `ready + unacked`.
    pub fn total(&self) -> u64 {
        self.ready + self.unacked
    }
}

/// How a subscription reads.
#[derive(Debug, Clone)]
pub struct SubscribeOptions {
    /// The consumer group (RabbitMQ: consumer tag prefix; JetStream: durable consumer name; Redis:
    /// the stream's consumer group).
    pub group: String,
    /// This instance within the group (Redis consumer name; a tag elsewhere).
    pub consumer: String,
    /// At most this many unacked deliveries at once; with [`AckMode::Coalesced`] on RabbitMQ, at
    /// most this many unsettled by the caller, and up to four times as many more whose ack waits.
    pub prefetch: u16,
    /// A delivery not acked within this time is given to someone else (JetStream `ack_wait`,
    /// Redis `XAUTOCLAIM` idle time; RabbitMQ redelivers on channel close only).
    pub visibility_timeout: Duration,
    /// The caller guarantees this subscription is the only one reading the group (the bridge
    /// holds a lease). Redis: at its start it takes over, at once and in stream order before any
    /// new entry, every entry of the group delivered before and never acked, whichever consumer
    /// it was delivered to (an `XAUTOCLAIM` pass with a minimum idle time of 0). Without it, only
    /// this consumer's own pending entries are read first, and another consumer's come after the
    /// visibility timeout (taking a live consumer's entries would deliver them twice). RabbitMQ,
    /// NATS: no effect.
    pub exclusive: bool,
}

impl SubscribeOptions {
    /// A group with one consumer, prefetch 64, a 30 s visibility timeout.
    pub fn group(group: impl Into<String>) -> SubscribeOptions {
        let group = group.into();
        SubscribeOptions {
            consumer: format!("{group}-1"),
            group,
            prefetch: 64,
            visibility_timeout: Duration::from_secs(30),
            exclusive: false,
        }
    }
}

/// How a subscription's acks reach the broker ([`Adapter::subscribe_acking`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AckMode {
    /// Each [`Delivery::ack`] is sent to the broker before it returns.
    #[default]
    PerMessage,
    /// RabbitMQ: [`Delivery::ack`] records the ack and returns; within a few milliseconds one
    /// `basic.ack(multiple=true)` acks the lowest contiguous run of acked deliveries (a delivery
    /// is never covered before its own `ack`). Deliveries acked behind an older unacked one wait
    /// for it, at most four times `prefetch` of them and at most a second; then they are acked
    /// one by one. The channel's prefetch is five times `prefetch` (at most 65,535) to hold
    /// them: the caller must keep at most `prefetch` deliveries unacked itself. Acks not sent
    /// when the subscription is dropped or its connection breaks are lost, so those messages come
    /// again (call [`Subscription::flush_acks`] before a clean stop). NATS, Redis: the same as
    /// `PerMessage`.
    Coalesced,
}

/// How long a publish waits for the broker's confirm before it reports
/// [`BrokerError::NotConfirmed`] (the message may still have been stored: retry, dedup absorbs it).
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a broker that carries only text headers writes: the message's headers, then its
/// properties ([`property_headers`](super::property_headers)), then its Kafka record's
/// `x-kafka-*` headers ([`super::record`]), each replacing a header of the same name (compared
/// case-insensitively).
pub fn text_headers(message: &Message) -> BTreeMap<String, String> {
    let mut headers = with_properties(message);
    if !message.record.is_plain() {
        for (name, value) in encoded_headers(&headers, &message.record) {
            replace(&mut headers, name, value);
        }
    }
    headers
}

/// The message's headers, then its properties' ([`property_headers`]), each replacing a header
/// of the same name (compared case-insensitively): what a Kafka publish merges into its
/// record's headers.
pub(super) fn with_properties(message: &Message) -> BTreeMap<String, String> {
    let mut headers = message.headers.clone();
    for (name, value) in property_headers(&message.properties) {
        replace(&mut headers, name, value);
    }
    headers
}

/// Sets `name` to `value`, removing any header of that name in another case.
fn replace(headers: &mut BTreeMap<String, String>, name: &str, value: String) {
    headers.retain(|k, _| !k.eq_ignore_ascii_case(name));
    headers.insert(name.to_string(), value);
}

/// What an adapter's subscription hands up: the message, whether the broker delivered it before,
/// where and when the broker stored it, and the adapter's own acker;
/// [`super::Subscription::next`] wraps it in a [`super::Delivery`].
#[derive(Debug)]
pub(super) struct Received<A> {
    pub(super) message: Message,
    pub(super) redelivered: bool,
    pub(super) stored: Stored,
    pub(super) acker: A,
}

/// Where and when the broker itself stored a delivery, as far as it tells (each field is `None`
/// where it does not): what the stale-producer check compares with the broker's mark
/// ([`Stored::stale_facts`], [`super::Adapter::stale_mark`]).
///
/// | broker | `partition` | `position` | `enqueued_at_ms` |
/// |--------|-------------|------------|------------------|
/// | NATS JetStream | — | the stream sequence | the stored time (the server's clock) |
/// | Redis Streams | — | — | the entry id's ms part |
/// | Kafka | the partition | the offset | the broker's append time (`LogAppendTime` topics only) |
/// | RabbitMQ | — | — | — |
///
/// A Redis entry id's ms part is the server's clock at the `XADD` when the id was generated by
/// the server (`*`, as this crate's adapter publishes), and never less than the previous entry's
/// (Redis keeps ids growing when its clock steps back). A Kafka record's create time is the
/// producer's clock, not the broker's: it is not an enqueue time. A RabbitMQ classic queue has
/// neither a position nor an enqueue time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// The partition the position counts in (Kafka).
    pub partition: Option<u32>,
    /// A position that only grows on the queue (or its partition).
    pub position: Option<u64>,
    /// When the broker stored it, ms since the epoch on the broker's clock.
    pub enqueued_at_ms: Option<i64>,
}

impl Stored {
    /// The facts the stale-producer check reads ([`crate::stale::classify`]).
    pub fn stale_facts(&self) -> crate::stale::Delivery {
        crate::stale::Delivery {
            position: self.position,
            enqueued_at_ms: self.enqueued_at_ms,
            partition: self.partition,
        }
    }

    /// A Redis stream entry of id `id`: the id's ms part as its enqueue time.
    pub(super) fn redis_entry(id: &str) -> Stored {
        Stored {
            enqueued_at_ms: redis_id_ms(id),
            ..Stored::default()
        }
    }
}

/// The ms part of a Redis stream entry id (`None` for an id that is not `MS-SEQ`).
pub(super) fn redis_id_ms(id: &str) -> Option<i64> {
    id.split_once('-')
        .and_then(|(ms, seq)| seq.parse::<u64>().ok().and(ms.parse::<i64>().ok()))
}

/// `url` without its credentials, for error messages (the one rule: [`crate::redact::url`]).
pub(super) fn redact(url: &str) -> String {
    crate::redact::url(url)
}
