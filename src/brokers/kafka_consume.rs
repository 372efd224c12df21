//! Reading a Kafka topic through a consumer group, committing after the effect.
//!
//! # Guarantees
//! - Nothing is committed before its delivery's [`Acker::ack`]: auto-commit and the automatic
//!   offset store are off. An ack commits (synchronously, confirmed by the group coordinator
//!   before it returns) the partition's offset up to the oldest delivery of that partition not
//!   acked yet; an ack behind an older unacked delivery is recorded and committed with it. A
//!   member that stops (or is killed) leaves uncommitted only what it had not acked, or acked
//!   behind such a gap: that comes again to the next owner of the partition (at least once; the
//!   consumer's dedup absorbs the repeat).
//! - Rebalance-safe: when a partition is revoked its bookkeeping goes with it, and an ack of a
//!   delivery from before the revocation is refused with an error (it will be delivered to the
//!   partition's new owner from the last commit), so a late ack never commits past records
//!   another member is reading.
//! - [`Acker::nack`] rewinds the partition to its oldest unacked delivery: that record and every
//!   later one of the partition come again (Kafka cannot give back one record alone).
//! - Kafka keeps no redelivery flag: `redelivered` is set for a record this subscription read
//!   before (after a nack), not for one a previous member read.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer as _, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{ClientContext, Message as _, Offset, TopicPartitionList};

use super::kafka_client::{REQUEST_TIMEOUT, base_config, blocking, millis, op_error, read_message};
use super::kafka_url::KafkaUrl;
use super::types::Received;
use super::{BrokerError, Result, SubscribeOptions};

/// Kafka brokers accept session timeouts in [6 s, 300 s] by default
/// (`group.min.session.timeout.ms`, `group.max.session.timeout.ms`).
const MIN_SESSION: Duration = Duration::from_secs(6);
const MAX_SESSION: Duration = Duration::from_secs(300);

/// The deliveries of one partition since it was assigned (or rewound).
#[derive(Debug)]
struct Window {
    /// Which assignment (or rewind) these deliveries belong to.
    epoch: u64,
    /// Handed out, not acked.
    delivered: BTreeSet<i64>,
    /// Acked, not committed yet (behind an older delivery not acked).
    acked: BTreeSet<i64>,
    /// The offset last committed by this subscription.
    committed: i64,
}

impl Window {
    /// The offset to commit: every delivery below it acked.
    fn committable(&self) -> i64 {
        match (self.delivered.first(), self.acked.last()) {
            (Some(oldest), _) => *oldest,
            (None, Some(last)) => last + 1,
            (None, None) => self.committed,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    windows: HashMap<i32, Window>,
    /// The highest offset read per partition (for `redelivered`).
    seen: HashMap<i32, i64>,
    next_epoch: u64,
    closed: bool,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The consumer's context: forgets the bookkeeping of revoked partitions.
struct Context {
    state: Arc<Mutex<State>>,
}

impl ClientContext for Context {}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let mut state = lock(&self.state);
        match rebalance {
            Rebalance::Revoke(list) => {
                for e in list.elements() {
                    state.windows.remove(&e.partition());
                }
            }
            Rebalance::Assign(_) => {}
            Rebalance::Error(_) => state.windows.clear(),
        }
    }
}

type Consumer = StreamConsumer<Context>;

/// One member of a consumer group reading one topic.
pub(super) struct Subscription {
    topic: String,
    consumer: Option<Arc<Consumer>>,
    state: Arc<Mutex<State>>,
    commits: Arc<tokio::sync::Mutex<()>>,
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("kafka::Subscription")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    pub(super) async fn start(
        url: &KafkaUrl,
        topic: &str,
        options: &SubscribeOptions,
    ) -> Result<Subscription> {
        let (b, t) = (url.clone(), topic.to_string());
        let exists = blocking(move || super::kafka_offsets::partitions(&b, &t))
            .await
            .map_err(|e| op_error("subscribe", topic, e))?;
        if exists.is_none() {
            return Err(op_error(
                "subscribe",
                topic,
                "no such topic (declare the queue first)",
            ));
        }
        let session = options.visibility_timeout.clamp(MIN_SESSION, MAX_SESSION);
        let heartbeat = (session / 3).min(Duration::from_secs(3));
        let state = Arc::new(Mutex::new(State::default()));
        let consumer: Consumer = base_config(url)
            .set("group.id", &options.group)
            .set("client.id", &options.consumer)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("allow.auto.create.topics", "false")
            .set("session.timeout.ms", millis(session))
            .set("heartbeat.interval.ms", millis(heartbeat))
            .create_with_context(Context {
                state: state.clone(),
            })
            .map_err(|e| op_error("subscribe", topic, e))?;
        consumer
            .subscribe(&[topic])
            .map_err(|e| op_error("subscribe", topic, e))?;
        Ok(Subscription {
            topic: topic.to_string(),
            consumer: Some(Arc::new(consumer)),
            state,
            commits: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    fn consumer(&self) -> Result<&Arc<Consumer>> {
        self.consumer
            .as_ref()
            .ok_or_else(|| op_error("consume", &self.topic, "the subscription was released"))
    }

    /// The next record. Cancel-safe: records wait in librdkafka's queue until `recv` takes one,
    /// and a taken one is recorded before anything else can be awaited. A lost connection to a
    /// broker (or to all of them) is reported by librdkafka, which reconnects by itself: it is
    /// logged and the wait goes on ([`recovers`]), so a broker that is down a moment ends no
    /// subscription (nor the bridge session reading it, which would leave the group, rejoin and
    /// get the uncommitted records again).
    pub(super) async fn next(&mut self) -> Result<Option<Received<Acker>>> {
        let consumer = self.consumer()?.clone();
        let m = loop {
            match consumer.recv().await {
                Ok(m) => break m,
                Err(KafkaError::MessageConsumption(code)) if recovers(code) => {
                    tracing::warn!(
                        "kafka: consume on {:?}: {code} (librdkafka reconnects; waiting)",
                        self.topic
                    );
                }
                Err(e) => return Err(op_error("consume", &self.topic, e)),
            }
        };
        let (partition, offset) = (m.partition(), m.offset());
        let message = read_message(&m);
        let stored = super::Stored {
            partition: u32::try_from(partition).ok(),
            position: u64::try_from(offset).ok(),
            // The create time is the producer's clock: only the broker's append time is an
            // enqueue time.
            enqueued_at_ms: match m.timestamp() {
                rdkafka::Timestamp::LogAppendTime(ms) => Some(ms),
                _ => None,
            },
        };
        drop(m);
        let mut state = lock(&self.state);
        let seen = state.seen.entry(partition).or_insert(-1);
        let redelivered = offset <= *seen;
        *seen = (*seen).max(offset);
        let w = window(&mut state, partition, offset);
        w.delivered.insert(offset);
        let epoch = w.epoch;
        drop(state);
        Ok(Some(Received {
            message,
            redelivered,
            stored,
            acker: Acker {
                topic: self.topic.clone(),
                partition,
                offset,
                epoch,
                consumer,
                state: self.state.clone(),
                commits: self.commits.clone(),
            },
        }))
    }

    /// Leaves the group: what this member had not committed goes to the next owner of each
    /// partition, from the last commit.
    pub(super) async fn release(mut self) -> Result<()> {
        lock(&self.state).closed = true;
        if let Some(consumer) = self.consumer.take() {
            let topic = self.topic.clone();
            blocking(move || {
                consumer.unsubscribe();
                drop(consumer);
                Ok::<_, String>(())
            })
            .await
            .map_err(|e| op_error("release", &topic, e))?;
        }
        Ok(())
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        lock(&self.state).closed = true;
        // Closing a consumer waits for the group to answer: not on an async thread.
        if let Some(consumer) = self.consumer.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn_blocking(move || drop(consumer));
        }
    }
}

/// Whether librdkafka reports `code` while it recovers by itself (a broker unreachable, a leader
/// or coordinator moving): the consumer goes on once the cluster answers again.
fn recovers(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::Resolve
            | C::BrokerNotAvailable
            | C::NetworkException
            | C::RequestTimedOut
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::NotCoordinator
            | C::CoordinatorNotAvailable
            | C::CoordinatorLoadInProgress
    )
}

/// The window of `partition`, made at `offset` when the partition has none (a new assignment).
fn window(state: &mut State, partition: i32, offset: i64) -> &mut Window {
    let next = &mut state.next_epoch;
    state.windows.entry(partition).or_insert_with(|| {
        *next += 1;
        Window {
            epoch: *next,
            delivered: BTreeSet::new(),
            acked: BTreeSet::new(),
            committed: offset,
        }
    })
}

/// The ack handle of one record: its partition, offset, and the assignment it came from.
pub(super) struct Acker {
    topic: String,
    partition: i32,
    offset: i64,
    epoch: u64,
    consumer: Arc<Consumer>,
    state: Arc<Mutex<State>>,
    commits: Arc<tokio::sync::Mutex<()>>,
}

impl fmt::Debug for Acker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("kafka::Acker")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl Acker {
    fn stale(&self, operation: &'static str) -> BrokerError {
        op_error(
            operation,
            &self.topic,
            format!(
                "partition {} was revoked, rewound or released since offset {} was read: it \
                 will be delivered again",
                self.partition, self.offset
            ),
        )
    }

    /// This delivery's window, when the subscription is open and the partition was neither
    /// revoked nor rewound since the delivery was read.
    fn window<'s>(&self, state: &'s mut State, operation: &'static str) -> Result<&'s mut Window> {
        if state.closed {
            return Err(self.stale(operation));
        }
        state
            .windows
            .get_mut(&self.partition)
            .filter(|w| w.epoch == self.epoch)
            .ok_or_else(|| self.stale(operation))
    }

    /// Records the ack and commits what it makes contiguous.
    pub(super) async fn ack(self) -> Result<()> {
        // One commit at a time per subscription: commits land in the order they were decided.
        let _turn = self.commits.lock().await;
        let target = {
            let mut state = lock(&self.state);
            let w = self.window(&mut state, "ack")?;
            w.delivered.remove(&self.offset);
            w.acked.insert(self.offset);
            let target = w.committable();
            if target <= w.committed {
                return Ok(());
            }
            target
        };
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&self.topic, self.partition, Offset::Offset(target))
            .map_err(|e| op_error("ack", &self.topic, e))?;
        let consumer = self.consumer.clone();
        blocking(move || consumer.commit(&list, CommitMode::Sync))
            .await
            .map_err(|e| op_error("ack (commit)", &self.topic, e))?;
        let mut state = lock(&self.state);
        if let Ok(w) = self.window(&mut state, "ack") {
            w.committed = w.committed.max(target);
            w.acked.retain(|o| *o >= target);
        }
        Ok(())
    }

    /// Rewinds the partition to its oldest delivery not acked (this one or an older one).
    pub(super) async fn nack(self) -> Result<()> {
        let _turn = self.commits.lock().await;
        let from = {
            let mut state = lock(&self.state);
            let w = self.window(&mut state, "nack")?;
            let from = w.delivered.first().copied().unwrap_or(self.offset);
            // The records from `from` on come again, in a new window: acks of the old
            // deliveries are refused from now on.
            state.windows.remove(&self.partition);
            from
        };
        let (consumer, topic, partition) =
            (self.consumer.clone(), self.topic.clone(), self.partition);
        blocking(move || consumer.seek(&topic, partition, Offset::Offset(from), REQUEST_TIMEOUT))
            .await
            .map_err(|e| op_error("nack (seek)", &self.topic, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window_at(committed: i64) -> Window {
        Window {
            epoch: 1,
            delivered: BTreeSet::new(),
            acked: BTreeSet::new(),
            committed,
        }
    }

    #[test]
    fn a_broker_out_of_reach_is_waited_for_and_a_missing_topic_is_not() {
        assert!(recovers(RDKafkaErrorCode::BrokerTransportFailure));
        assert!(recovers(RDKafkaErrorCode::AllBrokersDown));
        assert!(!recovers(RDKafkaErrorCode::UnknownTopicOrPartition));
        assert!(!recovers(RDKafkaErrorCode::TopicAuthorizationFailed));
    }

    #[test]
    fn a_commit_never_passes_a_delivery_not_acked() {
        let mut w = window_at(10);
        w.delivered.extend([10, 11, 12]);
        assert_eq!(w.committable(), 10);
        // 11 and 12 acked, 10 not: nothing to commit.
        w.delivered.remove(&11);
        w.acked.insert(11);
        w.delivered.remove(&12);
        w.acked.insert(12);
        assert_eq!(w.committable(), 10);
        // 10 acked: up to 13.
        w.delivered.remove(&10);
        w.acked.insert(10);
        assert_eq!(w.committable(), 13);
    }

    #[test]
    fn offsets_skipped_by_the_log_do_not_hold_the_commit() {
        // A compacted topic or a transaction marker: offsets 5 and 6 never delivered.
        let mut w = window_at(4);
        w.acked.extend([4, 7]);
        w.delivered.insert(8);
        assert_eq!(w.committable(), 8);
    }
}
