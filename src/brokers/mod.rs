//! Broker adapters: one contract, three brokers (RabbitMQ over AMQP 0.9.1, NATS JetStream, Redis
//! Streams), behind the cargo feature `brokers`; and Kafka (rdkafka over librdkafka) with the
//! feature `kafka` (docs/brokers.md, "Kafka": its column of this table, the build, the traps).
//!
//! | operation | RabbitMQ (lapin) | NATS JetStream (async-nats) | Redis Streams (redis) |
//! |-----------|------------------|-----------------------------|-----------------------|
//! | [`Adapter::publish`] returns after | the publisher confirm (ack) | the `PubAck` | the `XADD` reply |
//! | [`Subscription::next`] | `basic.consume`, manual ack, prefetch | durable pull consumer, explicit ack | `XREADGROUP` + `XAUTOCLAIM` of stale pending |
//! | [`Subscription::release`] | closes the channel: unacked requeued | a drop: redelivered after `ack_wait` | nothing left on the server: an exclusive subscription claims it |
//! | [`Adapter::depth`] | ready + unacked (management API) | pending + ack pending of the group | lag + pending of the group |
//! | [`Adapter::browse`] | not possible: [`BrokerError::Unsupported`] | reads by sequence, consumes nothing | `XRANGE`, consumes nothing |
//! | [`Delivery::stored`] | nothing (a classic queue has no position nor enqueue time) | stream sequence, stored time | entry id, its ms |
//! | [`Adapter::stale_mark`] ([`marks`]) | `None` | the stream's last sequence | the server's `TIME` (or a later last id) |
//!
//! Headers travel as AMQP headers (long strings), NATS message headers, and Redis stream fields
//! prefixed `h:`; the payload is bytes, untouched. A RabbitMQ delivery also carries its AMQP
//! properties and typed headers ([`Properties`]): a RabbitMQ publish writes them back (persistent
//! always; `user_id` only when it is the connection's user), NATS and Redis publishes write the
//! properties as `x-amqp-*` text headers ([`PROPERTY_HEADERS`]). The route stamp (`x-qm-*`, see [`crate::stamp`]),
//! [`HEADER_DEDUP_KEY`], [`HEADER_KEY`] and [`HEADER_PROBE`] cross every pair of brokers unchanged.
//!
//! # Guarantees
//! - `publish` returns `Ok` only once the broker has taken responsibility for the message
//!   (persisted or replicated as the broker defines its confirm); any doubt is an error, so the
//!   caller retries and a duplicate is the worst case, never a loss.
//! - A delivery that is neither acked nor nacked comes back (connection loss, visibility timeout);
//!   at once and ahead of newer messages when its subscription ends with
//!   [`Subscription::release`] (RabbitMQ) or the next subscription of the group is
//!   [`SubscribeOptions::exclusive`] (Redis); JetStream gives it back after `ack_wait`.
//! - `declare` is idempotent: it creates the queue / stream / consumer group when missing and
//!   leaves an existing one as it is.
//! - `publish` may be called from many tasks at once on one [`Adapter`] (`&self`): the
//!   connection and the confirming channel are shared, each publish awaits its own confirm.
//! - [`Subscription::next`] is cancel-safe: a call dropped before it returns (the losing arm of
//!   a `select!`, an elapsed `timeout`) loses and reorders nothing.
//! - A delivery is acked on the broker only after its own [`Delivery::ack`]; with
//!   [`AckMode::Coalesced`] (RabbitMQ) the ack may reach the broker a little later, covered by a
//!   `basic.ack(multiple)`, and one not sent when the subscription goes is a redelivery.
//!
//! # Connecting
//! [`Adapter::connect`] takes the plan's `kind` and `url`:
//! - RabbitMQ: an `amqp://` / `amqps://` URL (`amqp://user:pass@host:5672/%2f`). [`Adapter::depth`]
//!   needs the management API (only it knows the unacked count): its URL is derived as
//!   `http://user:pass@host:15672/api` (`https://…:15671/api` for `amqps`), or given in the query
//!   parameter `management=` (percent-encoded), or passed to [`RabbitMq::connect_with_management`].
//! - NATS: `nats://[user:pass@]host:4222`. The stream of queue `q` is named `q` with every `.`, `*`,
//!   `>`, `/`, `\` and blank replaced by `_` (stream names cannot hold them); its one subject is `q`
//!   itself; file storage, work-queue retention (a message leaves the stream once acked, so one
//!   consumer group per queue: JetStream refuses a second one on a work-queue stream). A stream
//!   that exists already is used as it is. Consumer (group) names get the same replacement.
//! - Redis: `redis://[user:pass@]host:6379[/db]`. The stream key is the queue name. Acked entries
//!   stay in the stream (as Redis Streams do; other consumer groups may still need them): trim
//!   with `XTRIM … MINID` when every group is past them.
//!
//! # Connection loss
//! The shared publishing connection is re-opened on the next call after it broke (RabbitMQ, Redis;
//! the NATS client reconnects by itself); the call that saw the break fails. A [`Subscription`]
//! whose connection broke returns an error from [`Subscription::next`]; calling `next` again goes
//! on for NATS (the client reconnects) and Redis (a new connection, this consumer's pending
//! entries read again first), while a RabbitMQ subscription stays failed (subscribe again: the
//! broker requeued its unacked deliveries). Every network wait is bounded: a stopped broker is an
//! error, never a hang.

mod ack_window;
mod amqp_message;
#[cfg(feature = "controller")]
pub mod durability;
#[cfg(feature = "kafka")]
mod kafka;
#[cfg(feature = "kafka")]
mod kafka_browse;
#[cfg(feature = "kafka")]
mod kafka_client;
#[cfg(feature = "kafka")]
mod kafka_consume;
#[cfg(feature = "kafka")]
mod kafka_offsets;
#[cfg(feature = "kafka")]
mod kafka_url;
pub mod marks;
mod nats;
mod properties;
mod rabbitmq;
pub mod record;
mod redis_reply;
mod redis_streams;
mod types;

#[cfg(feature = "kafka")]
pub use kafka::{Kafka, KafkaUrl, Partitioner};
#[cfg(feature = "kafka")]
pub use kafka_browse::BROWSE_GROUP;
#[cfg(feature = "kafka")]
pub use kafka_offsets::{PartitionLag, group_lag};
pub use nats::Nats;
pub use properties::{PROPERTY_HEADERS, Properties, TypedHeaders, property_headers};
pub use rabbitmq::RabbitMq;
pub use record::{Record, RecordHeader};
pub use redis_streams::RedisStreams;
use types::redact;
pub use types::{
    AckMode, BrokerError, CONFIRM_TIMEOUT, CONNECT_TIMEOUT, Depth, HEADER_DEDUP_KEY, HEADER_KEY,
    HEADER_PROBE, Kind, Message, Result, Stored, SubscribeOptions, text_headers,
};

/// A connected broker adapter: one of the three brokers behind one contract.
///
/// Share it by reference or in an `Arc`: every operation takes `&self`, and `publish` may run
/// from many tasks at once.
#[derive(Debug)]
pub enum Adapter {
    /// RabbitMQ over AMQP 0.9.1.
    RabbitMq(RabbitMq),
    /// NATS JetStream.
    Nats(Nats),
    /// Redis Streams.
    Redis(RedisStreams),
    /// Kafka (feature `kafka`).
    #[cfg(feature = "kafka")]
    Kafka(Kafka),
}

impl Adapter {
    /// Connects to the broker of `kind` at `url` (see the module documentation, "Connecting").
    ///
    /// # Errors
    /// [`BrokerError::Connect`] when the broker cannot be reached or refuses the credentials
    /// (the URL in the error has its password removed).
    pub async fn connect(kind: Kind, url: &str) -> Result<Adapter> {
        Ok(match kind {
            Kind::RabbitMq => Adapter::RabbitMq(RabbitMq::connect(url).await?),
            Kind::Nats => Adapter::Nats(Nats::connect(url).await?),
            Kind::Redis => Adapter::Redis(RedisStreams::connect(url).await?),
            #[cfg(feature = "kafka")]
            Kind::Kafka => Adapter::Kafka(Kafka::connect(url).await?),
            #[cfg(not(feature = "kafka"))]
            Kind::Kafka => {
                return Err(BrokerError::Unsupported {
                    kind: "kafka",
                    what: "this build has no Kafka adapter: build migrate with `--features kafka`"
                        .to_string(),
                });
            }
        })
    }

    /// The kind of broker.
    pub fn kind(&self) -> Kind {
        match self {
            Adapter::RabbitMq(_) => Kind::RabbitMq,
            Adapter::Nats(_) => Kind::Nats,
            Adapter::Redis(_) => Kind::Redis,
            #[cfg(feature = "kafka")]
            Adapter::Kafka(_) => Kind::Kafka,
        }
    }

    /// Makes sure `queue` exists: a durable queue (RabbitMQ), a stream named after the queue with
    /// the queue as its subject, file storage, work-queue retention (JetStream); nothing for Redis
    /// (the stream and its group are created by [`Adapter::subscribe`], the stream also by the
    /// first publish). Idempotent; an existing queue or stream is left as it is.
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when the broker refuses (e.g. a RabbitMQ queue of that name
    /// exists with other arguments) or cannot be reached.
    pub async fn declare(&self, queue: &str) -> Result<()> {
        match self {
            Adapter::RabbitMq(b) => b.declare(queue).await,
            Adapter::Nats(b) => b.declare(queue).await,
            Adapter::Redis(b) => b.declare(queue).await,
            #[cfg(feature = "kafka")]
            Adapter::Kafka(b) => b.declare(queue).await,
        }
    }

    /// Publishes `message` to `queue` and returns once the broker confirmed it: the publisher
    /// confirm (RabbitMQ: persistent, default exchange, routing key = queue, mandatory), the
    /// `PubAck` (JetStream), the `XADD` reply (Redis). Safe to call from many tasks at once.
    ///
    /// # Errors
    /// [`BrokerError::NotConfirmed`] when the broker nacked, returned (no such RabbitMQ queue, no
    /// stream for the subject), did not answer within [`CONFIRM_TIMEOUT`], or the connection
    /// broke. The message may or may not be stored: retry.
    ///
    /// [`BrokerError::Refused`] when the broker or its client refused this very message and
    /// nothing was stored: a header name or value the wire format cannot carry (a RabbitMQ header
    /// name over 255 bytes; a NATS header name or value NATS cannot encode), a message larger than
    /// the NATS server's `max_payload` (checked by the client against what the server announced),
    /// a JetStream `PubAck` error about the message (larger than the stream's `max_msg_size`).
    /// Retrying the same message will not succeed until the destination changes.
    pub async fn publish(&self, queue: &str, message: &Message) -> Result<()> {
        match self {
            Adapter::RabbitMq(b) => b.publish(queue, message).await,
            Adapter::Nats(b) => b.publish(queue, message).await,
            Adapter::Redis(b) => b.publish(queue, message).await,
            #[cfg(feature = "kafka")]
            Adapter::Kafka(b) => b.publish(queue, message).await,
        }
    }

    /// Starts reading `queue` with manual acks (see [`SubscribeOptions`]).
    ///
    /// - RabbitMQ: its own connection and channel, `basic.qos(prefetch)`, `basic.consume`;
    ///   unacked deliveries return to the queue when the subscription (its connection) is
    ///   dropped.
    /// - JetStream: the durable pull consumer `options.group` (explicit ack, `ack_wait` =
    ///   visibility timeout, `max_ack_pending` = prefetch), created when missing; one that
    ///   exists gets these two numbers and keeps the rest of its settings.
    /// - Redis: the consumer group `options.group` (created at id `0` with `MKSTREAM` when
    ///   missing, so entries added before the first subscribe are read too), consumer
    ///   `options.consumer`: first the group's pending entries of every consumer, claimed with
    ///   `XAUTOCLAIM … 0` in stream order, when `options.exclusive`, else this consumer's own
    ///   pending entries (redelivered either way), then `XREADGROUP … >`, and every half
    ///   visibility timeout an `XAUTOCLAIM` of entries idle longer than the visibility timeout
    ///   (redelivered). At most `prefetch` deliveries are unacked.
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when the queue / stream does not exist (RabbitMQ, JetStream:
    /// [`Adapter::declare`] it first) or the broker refuses.
    pub async fn subscribe(&self, queue: &str, options: &SubscribeOptions) -> Result<Subscription> {
        self.subscribe_acking(queue, options, AckMode::PerMessage)
            .await
    }

    /// [`Adapter::subscribe`] with the acks sent as `acks` says.
    ///
    /// # Errors
    /// As [`Adapter::subscribe`].
    pub async fn subscribe_acking(
        &self,
        queue: &str,
        options: &SubscribeOptions,
        acks: AckMode,
    ) -> Result<Subscription> {
        let inner = match self {
            Adapter::RabbitMq(b) => {
                SubscriptionInner::RabbitMq(Box::new(b.subscribe(queue, options, acks).await?))
            }
            Adapter::Nats(b) => {
                SubscriptionInner::Nats(Box::new(b.subscribe(queue, options).await?))
            }
            Adapter::Redis(b) => {
                SubscriptionInner::Redis(Box::new(b.subscribe(queue, options).await?))
            }
            #[cfg(feature = "kafka")]
            Adapter::Kafka(b) => {
                SubscriptionInner::Kafka(Box::new(b.subscribe(queue, options).await?))
            }
        };
        Ok(Subscription { inner })
    }

    /// How many messages of `queue` wait for the consumer group `group`.
    ///
    /// - RabbitMQ: `messages_ready` and `messages_unacknowledged` of the management API (its
    ///   statistics lag by up to the broker's stats interval, 5 s by default; `group` is unused:
    ///   a RabbitMQ queue is one group).
    /// - JetStream: `num_pending` and `num_ack_pending` of the consumer `group`; without that
    ///   consumer, the stream's message count is ready.
    /// - Redis: `lag` and `pending` of the group (`XINFO GROUPS`); without that group, `XLEN`
    ///   is ready; a stream that does not exist is empty.
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when the queue / stream does not exist (RabbitMQ, JetStream), or
    /// the broker (RabbitMQ: its management API, whose URL the error names) cannot be reached.
    pub async fn depth(&self, queue: &str, group: &str) -> Result<Depth> {
        match self {
            Adapter::RabbitMq(b) => b.depth(queue, group).await,
            Adapter::Nats(b) => b.depth(queue, group).await,
            Adapter::Redis(b) => b.depth(queue, group).await,
            #[cfg(feature = "kafka")]
            Adapter::Kafka(b) => b.depth(queue, group).await,
        }
    }

    /// Up to `limit` messages of `queue`, oldest first, without consuming anything.
    ///
    /// JetStream reads the stream by sequence (deleted ones skipped); Redis reads `XRANGE - +`
    /// (entries already acked by a group are still in the stream, so they are included); Kafka
    /// assigns itself each partition up to the high watermark read first, joining no group and
    /// committing nothing (`kafka_browse`), oldest first by record timestamp.
    ///
    /// # Errors
    /// [`BrokerError::Unsupported`] for RabbitMQ (AMQP can only take a message and put it back,
    /// which reorders the queue and marks the message redelivered); [`BrokerError::Operation`]
    /// when the stream or topic does not exist (JetStream, Kafka), the broker cannot be reached,
    /// or a Kafka partition delivers nothing for 10 s before its end (never a shorter answer).
    pub async fn browse(&self, queue: &str, limit: usize) -> Result<Vec<Message>> {
        match self {
            Adapter::RabbitMq(b) => b.browse(queue, limit).await,
            Adapter::Nats(b) => b.browse(queue, limit).await,
            Adapter::Redis(b) => b.browse(queue, limit).await,
            #[cfg(feature = "kafka")]
            Adapter::Kafka(b) => b.browse(queue, limit).await,
        }
    }
}

/// The deliveries of one queue to one consumer, from [`Adapter::subscribe`].
///
/// Dropping it stops consuming: RabbitMQ requeues what it delivered and nobody acked, JetStream
/// and Redis redeliver it after the visibility timeout (Redis: what its last read took and it did
/// not hand out yet is read first by the next subscription of the same consumer, or of any
/// consumer when it is [`SubscribeOptions::exclusive`], claimed by another consumer of the group
/// after the visibility timeout). [`Subscription::release`] also lets a Redis read in flight
/// finish, so that an exclusive next subscription claims everything at once.
#[derive(Debug)]
pub struct Subscription {
    inner: SubscriptionInner,
}

#[derive(Debug)]
enum SubscriptionInner {
    RabbitMq(Box<rabbitmq::Subscription>),
    Nats(Box<nats::Subscription>),
    Redis(Box<redis_streams::Subscription>),
    #[cfg(feature = "kafka")]
    Kafka(Box<kafka_consume::Subscription>),
}

impl Subscription {
    /// The next delivery; waits until there is one. `Ok(None)` only when the subscription ended
    /// for good: the broker cancelled the consumer (RabbitMQ queue deleted, JetStream consumer
    /// deleted, Redis stream or group deleted) or the connection was closed cleanly.
    ///
    /// # Cancel safety
    /// Cancel-safe, for every broker: dropping the future before it completes (a `select!` arm
    /// that lost, a `timeout` that elapsed) loses no message and changes no order; the next call
    /// returns what this one would have. RabbitMQ and NATS read from a stream the client fills;
    /// Redis keeps its read in flight (an `XREADGROUP … BLOCK` the server answers whether or not
    /// anyone still waits) inside the subscription, and the next call resumes it.
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when the connection broke or the broker failed the consumer.
    /// A RabbitMQ subscription stays failed (subscribe again); NATS and Redis ones may deliver
    /// again on the next call (see the module documentation, "Connection loss").
    pub async fn next(&mut self) -> Result<Option<Delivery>> {
        Ok(match &mut self.inner {
            SubscriptionInner::RabbitMq(s) => s.next().await?.map(|r| r.wrap(Acker::RabbitMq)),
            SubscriptionInner::Nats(s) => s.next().await?.map(|r| r.wrap(Acker::Nats)),
            SubscriptionInner::Redis(s) => s.next().await?.map(|r| r.wrap(Acker::Redis)),
            #[cfg(feature = "kafka")]
            SubscriptionInner::Kafka(s) => s.next().await?.map(|r| r.wrap(Acker::Kafka)),
        })
    }

    /// Sends the acks recorded and not sent yet ([`AckMode::Coalesced`] on RabbitMQ, including
    /// those waiting behind an unacked delivery); nothing to do otherwise.
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when an ack could not be delivered (channel closed): those
    /// messages will be delivered again.
    pub async fn flush_acks(&self) -> Result<()> {
        match &self.inner {
            SubscriptionInner::RabbitMq(s) => s.flush_acks().await,
            SubscriptionInner::Nats(_) | SubscriptionInner::Redis(_) => Ok(()),
            #[cfg(feature = "kafka")]
            SubscriptionInner::Kafka(_) => Ok(()),
        }
    }

    /// Ends the subscription, giving back what it was delivered and that was neither acked nor
    /// nacked so that the next subscription of the group gets it first, in order, at once. Drop
    /// (or settle) the deliveries first: one acked after this comes again.
    ///
    /// - RabbitMQ: the same as dropping it (the broker requeues every unacked delivery at once,
    ///   in place). Call [`Subscription::flush_acks`] first.
    /// - JetStream: the same as dropping it: what it held comes back after `ack_wait`, behind
    ///   newer messages; nothing is NAKed (why: `docs/bridge.md`, across the end of a session).
    /// - Redis: a read in flight is let finish (within a second) rather than abandoned on the
    ///   server, so every entry this consumer took is in the group's pending list, where the
    ///   next [`SubscribeOptions::exclusive`] subscription claims it first, whatever its
    ///   consumer name (nothing is sent: an entry's place in the stream is its order).
    ///
    /// A crash cannot do this: RabbitMQ still requeues at once when the connection closes; Redis
    /// once the server has dropped the crashed process's connections.
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when the broker could not be told (the connection broke): what
    /// was not given back comes back after the visibility timeout.
    pub async fn release(self) -> Result<()> {
        match self.inner {
            SubscriptionInner::RabbitMq(s) => {
                drop(s);
                Ok(())
            }
            SubscriptionInner::Nats(s) => s.release().await,
            SubscriptionInner::Redis(s) => s.release().await,
            #[cfg(feature = "kafka")]
            SubscriptionInner::Kafka(s) => s.release().await,
        }
    }
}

/// One delivered message: read it, then [`Delivery::ack`] or [`Delivery::nack`] it. A delivery
/// dropped without either comes back later (RabbitMQ: when its subscription is dropped; JetStream,
/// Redis: after the visibility timeout).
#[derive(Debug)]
pub struct Delivery {
    /// The message, headers and payload as published.
    pub message: Message,
    /// The broker delivered it before (RabbitMQ's `redelivered` flag; JetStream: delivered more
    /// than once; Redis: auto-claimed from another consumer or re-read from this consumer's own
    /// pending list).
    pub redelivered: bool,
    /// Where and when the broker stored it, as far as the broker tells ([`Stored`]).
    pub stored: Stored,
    acker: Acker,
}

impl<A> types::Received<A> {
    fn wrap(self, acker: impl FnOnce(A) -> Acker) -> Delivery {
        Delivery {
            message: self.message,
            redelivered: self.redelivered,
            stored: self.stored,
            acker: acker(self.acker),
        }
    }
}

#[derive(Debug)]
enum Acker {
    RabbitMq(rabbitmq::Acker),
    Nats(nats::Acker),
    Redis(redis_streams::Acker),
    #[cfg(feature = "kafka")]
    Kafka(kafka_consume::Acker),
}

impl Delivery {
    /// The broker's facts about this delivery for the stale-producer check
    /// ([`Stored::stale_facts`]).
    pub fn stale_facts(&self) -> crate::stale::Delivery {
        self.stored.stale_facts()
    }

    /// Acknowledges: the broker forgets the message (JetStream, Redis: and the ack is confirmed
    /// by the broker before this returns).
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when the ack could not be delivered (connection lost, channel
    /// closed): the message will be delivered again.
    pub async fn ack(self) -> Result<()> {
        match self.acker {
            Acker::RabbitMq(a) => a.ack().await,
            Acker::Nats(a) => a.ack().await,
            Acker::Redis(a) => a.ack().await,
            #[cfg(feature = "kafka")]
            Acker::Kafka(a) => a.ack().await,
        }
    }

    /// Gives the message back for redelivery: RabbitMQ `basic.nack` with requeue (back in the
    /// queue at once); JetStream `-NAK` (redelivered at once); Redis: the entry stays pending in
    /// the group and its idle time is set to the visibility timeout, so the next `XAUTOCLAIM`
    /// of any consumer of the group takes it (this subscription runs one within about a second).
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when the broker could not be told (connection lost): the
    /// message comes back anyway, after the visibility timeout or the reconnection.
    pub async fn nack(self) -> Result<()> {
        match self.acker {
            Acker::RabbitMq(a) => a.nack().await,
            Acker::Nats(a) => a.nack().await,
            Acker::Redis(a) => a.nack().await,
            #[cfg(feature = "kafka")]
            Acker::Kafka(a) => a.nack().await,
        }
    }
}
