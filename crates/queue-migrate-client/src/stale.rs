//! The stale-producer check: a consumer on the **old** broker recognises a message whose route
//! stamp names a slice that had already moved to the new broker, at a generation newer than the
//! stamp's, once a grace period has passed since that generation was published — a producer that
//! stopped following the routing document (issue 58, `docs/design.md#stale-producers`).
//!
//! Three parts:
//! - [`MoveLedger`]: the routing documents a consumer followed, each with its publish time and
//!   (where the old broker has one) the old broker's own mark at the publish ([`Mark`]): a
//!   position (a JetStream stream sequence), its enqueue clock (a Redis server's `TIME`), or each
//!   partition's end (a Kafka topic's high watermarks). `queue_migrate`'s broker adapters read it
//!   (`Adapter::stale_mark`) and hand out each delivery's facts ([`Delivery`]).
//! - [`classify`]: the pure decision, stamp + ledger + the delivery's broker facts + [`Bounds`] ->
//!   [`Decision`]. No clock, no IO.
//! - [`StaleCounter`] (Prometheus text) and [`StaleGuard`] (ledger, bounds and counter behind one
//!   lock, what a consumer or the bridge holds).
//!
//! # Guarantees
//! - A message enqueued on the old broker before the publish that moved its slice is never
//!   [`Decision::Stale`]: when the broker's mark was recorded at the publish and the delivery
//!   carries the same kind of fact (a position of the same partition, or none; an enqueue time),
//!   by that mark exactly, whatever its producer's clock says; otherwise by the stamp's time,
//!   trusted to within [`Bounds::clock_skew_ms`] of the publisher's clock.
//! - The mark may be read later than the publish (when the consumer first sees the document):
//!   later is the safe side. Everything enqueued before the publish is also before a later
//!   mark, so a backlog stays a backlog; what a later mark changes is that a stale message
//!   enqueued between the publish and the mark is taken for a backlog (a miss, never a trip).
//! - A message is `Stale` only if its stamp (or the broker's enqueue time) is later than the
//!   publish plus [`Bounds::grace_ms`] (plus the skew bound when the stamp's time is what is read).
//! - A message without a readable stamp is [`Decision::Unstamped`]: counted apart, never ignored.
//!
//! # Limits
//! - A producer whose clock runs behind by more than the skew bound, and a broker without a
//!   position or enqueue time, can hide its stale messages inside the grace (missed, never a false
//!   trip).
//! - Without a mark (a RabbitMQ classic queue has no position nor enqueue time; a mark that
//!   could not be read in time, counted in [`MARK_UNREAD_METRIC`]; a Kafka partition the mark
//!   does not name) a backlog is told by the stamp's time: a producer whose clock ran ahead of
//!   the publisher's by more than [`Bounds::clock_skew_ms`] can make a backlog look stale.
//! - A position mark decides "before or after the publish" only; whether a message after it is
//!   beyond the grace is still read from the stamp's time (plus the skew bound). An enqueue-clock
//!   mark decides both on the broker's clock.
//! - The ledger knows the generations the consumer followed: a move it missed is dated by the
//!   first document it saw with the slice moved (later: fewer trips, never more).

// Part of the library consumers depend on: every public item is documented.
#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::metrics_text::{self, Kind};
use crate::routing::RoutingDocument;
use crate::stamp::{RouteLabel, RouteStamp};
use crate::time::Millis;

/// The metric counting stale messages, by producer and slice.
pub const STALE_METRIC: &str = "queue_migrate_stale_producer_messages_total";
/// The metric counting every stale message, without labels and from 0: what the built-in guard
/// reads (a labelled series is new at its first count, and a rate needs two points).
pub const STALE_TOTAL_METRIC: &str = "queue_migrate_stale_messages_total";
/// The metric counting messages on the old broker without a readable route stamp.
pub const UNSTAMPED_METRIC: &str = "queue_migrate_unstamped_messages_total";
/// The metric counting routing documents followed without the old broker's mark because it could
/// not be read (an error or the deadline): the check then tells a backlog by the stamp's time.
pub const MARK_UNREAD_METRIC: &str = "queue_migrate_stale_mark_unread_total";
/// The most publishes a [`MoveLedger`] keeps (the oldest are dropped; a migration has tens).
pub const MAX_PUBLISHES: usize = 4096;

/// The old broker's own mark of "now", recorded at a publish and carried by a delivery.
///
/// Read after the publish (when the consumer first sees the document), never before: a later
/// mark can only turn a stale message into a backlog or one in the grace (a miss), never a
/// backlog into a trip, since everything enqueued before the publish is before the mark too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// The last position taken, on a queue with one position that only grows (a JetStream
    /// stream sequence): a delivery at this position or below was enqueued before.
    Position(u64),
    /// The broker's enqueue clock, ms since the epoch (its own clock, compared only with itself):
    /// a delivery enqueued at this ms or before was enqueued before.
    EnqueuedAt(Millis),
    /// Per partition, its end: the position the next message of that partition gets (a Kafka
    /// partition's high watermark). A delivery of a partition named here at a position below
    /// its end was enqueued before; one of a partition not named (created later, or not read)
    /// is told by its stamp's time.
    PartitionEnds(BTreeMap<u32, u64>),
}

/// One routing document as a consumer followed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// The document's generation.
    pub generation: u64,
    /// Slices `0..slices_migrated` went to the new broker from this generation on.
    pub slices_migrated: u32,
    /// When it was published (the controller's time, or when this consumer first saw it: later is
    /// the safe side).
    pub published_at_ms: Millis,
    /// The old broker's mark at the publish, where it has one.
    pub old_mark: Option<Mark>,
}

/// The documents a consumer followed, oldest generation first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveLedger {
    publishes: Vec<Publish>,
}

impl MoveLedger {
    /// An empty ledger: nothing moved.
    pub fn new() -> MoveLedger {
        MoveLedger::default()
    }

    /// Record a publish. A generation not newer than the last one recorded is ignored (documents
    /// can arrive twice or out of order); the ledger keeps the last [`MAX_PUBLISHES`].
    pub fn record(&mut self, publish: Publish) -> bool {
        if self
            .publishes
            .last()
            .is_some_and(|p| p.generation >= publish.generation)
        {
            return false;
        }
        if self.publishes.len() >= MAX_PUBLISHES {
            self.publishes.remove(0);
        }
        self.publishes.push(publish);
        true
    }

    /// Record `doc`, published at `published_at_ms`, with the old broker's mark then.
    pub fn follow(
        &mut self,
        doc: &RoutingDocument,
        published_at_ms: Millis,
        old_mark: Option<Mark>,
    ) -> bool {
        self.record(Publish {
            generation: doc.generation,
            slices_migrated: doc.slices_migrated,
            published_at_ms,
            old_mark,
        })
    }

    /// The publish from which `slice` has been on the new broker without a break, up to the
    /// latest document; `None` when the latest document routes it to the old broker.
    pub fn moved_at(&self, slice: u32) -> Option<&Publish> {
        let mut since = None;
        for p in self.publishes.iter().rev() {
            if slice < p.slices_migrated {
                since = Some(p);
            } else {
                break;
            }
        }
        since
    }

    /// The latest publish recorded.
    pub fn latest(&self) -> Option<&Publish> {
        self.publishes.last()
    }
}

/// The bounds of the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// How long after a publish a producer may still write by the generation before it (the
    /// measured propagation with a margin: `plan check` states it).
    pub grace_ms: Millis,
    /// How far a producer's clock (the stamp's `at`) may be from the publisher's.
    pub clock_skew_ms: Millis,
}

impl Default for Bounds {
    /// A 3 s grace (the controller's `auto`: the measured propagation, p99 63 ms to 1,000
    /// long-polling producers, plus the follower's 1 s re-poll, doubled and rounded up) and a 2 s
    /// clock-skew bound.
    fn default() -> Bounds {
        Bounds {
            grace_ms: 3_000,
            clock_skew_ms: 2_000,
        }
    }
}

/// The broker's facts about one delivery (what it has: a position, an enqueue time, or neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delivery {
    /// The delivery's position, when the old broker has positions (within its partition when
    /// `partition` is set).
    pub position: Option<u64>,
    /// When the old broker enqueued it, on the broker's clock.
    pub enqueued_at_ms: Option<Millis>,
    /// The partition its position counts in, when the queue has several (Kafka); `None` for a
    /// queue with one position ([`Mark::Position`]).
    pub partition: Option<u32>,
}

impl Delivery {
    /// At `position` of a queue with one position (a JetStream stream sequence).
    pub fn at_position(position: u64) -> Delivery {
        Delivery {
            position: Some(position),
            ..Delivery::default()
        }
    }

    /// Enqueued at `ms` by the broker's clock.
    pub fn enqueued_at(ms: Millis) -> Delivery {
        Delivery {
            enqueued_at_ms: Some(ms),
            ..Delivery::default()
        }
    }

    /// At `position` (an offset) of `partition`.
    pub fn in_partition(partition: u32, position: u64) -> Delivery {
        Delivery {
            partition: Some(partition),
            position: Some(position),
            ..Delivery::default()
        }
    }
}

/// What [`classify`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No readable route stamp: a producer without the library (counted apart).
    Unstamped,
    /// Nothing to say: the slice is on the old broker, the stamp is not a producer's direct write
    /// to old (new, bridge, replay), or it is not older than the move.
    Current,
    /// Enqueued before the publish that moved its slice: a backlog, never a trip.
    Backlog,
    /// Written by the old generation within the grace after the publish: propagation.
    InGrace,
    /// A producer writing a moved slice by an older generation after the grace.
    Stale {
        /// The stamp's producer.
        producer: String,
        /// The stamp's slice.
        slice: u32,
        /// The generation the producer routed by.
        stamped: u64,
        /// The generation that moved the slice.
        moved_at: u64,
    },
}

/// Decide on one message consumed from the old broker. Pure.
///
/// `stamp` is the message's route stamp (`None`: missing or unreadable). See the module's
/// guarantees for the rules.
pub fn classify(
    stamp: Option<&RouteStamp>,
    ledger: &MoveLedger,
    delivery: Delivery,
    bounds: Bounds,
) -> Decision {
    let Some(stamp) = stamp else {
        return Decision::Unstamped;
    };
    if stamp.side != RouteLabel::Old {
        return Decision::Current;
    }
    let Some(moved) = ledger.moved_at(stamp.slice) else {
        return Decision::Current;
    };
    if stamp.generation >= moved.generation {
        return Decision::Current;
    }
    let grace = bounds.grace_ms.max(0);
    let skew = bounds.clock_skew_ms.max(0);
    // The broker's own mark, compared with itself: exact.
    let (after_publish, broker_beyond_grace) = by_mark(moved.old_mark.as_ref(), delivery, grace);
    if after_publish == Some(false) {
        return Decision::Backlog;
    }
    let stamp_beyond_grace = stamp.at_ms
        > moved
            .published_at_ms
            .saturating_add(grace)
            .saturating_add(skew);
    if broker_beyond_grace.unwrap_or(stamp_beyond_grace) {
        return Decision::Stale {
            producer: stamp.producer.clone(),
            slice: stamp.slice,
            stamped: stamp.generation,
            moved_at: moved.generation,
        };
    }
    if after_publish.is_none() && stamp.at_ms <= moved.published_at_ms.saturating_add(skew) {
        return Decision::Backlog;
    }
    Decision::InGrace
}

/// What the old broker's mark says of `delivery`: whether it was enqueued after the mark (`None`:
/// the mark and the delivery's facts cannot be compared), and whether it was enqueued beyond the
/// grace after it (`None` unless the mark is the broker's clock).
fn by_mark(mark: Option<&Mark>, delivery: Delivery, grace: Millis) -> (Option<bool>, Option<bool>) {
    match (mark, delivery) {
        (
            Some(Mark::Position(at)),
            Delivery {
                position: Some(p),
                partition: None,
                ..
            },
        ) => (Some(p > *at), None),
        (
            Some(Mark::PartitionEnds(ends)),
            Delivery {
                position: Some(p),
                partition: Some(k),
                ..
            },
        ) => (ends.get(&k).map(|end| p >= *end), None),
        (
            Some(Mark::EnqueuedAt(at)),
            Delivery {
                enqueued_at_ms: Some(t),
                ..
            },
        ) => (Some(t > *at), Some(t > at.saturating_add(grace))),
        _ => (None, None),
    }
}

/// Stale messages by (producer, slice), and unstamped ones apart. Series appear when first
/// counted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StaleCounter {
    stale: BTreeMap<(String, u32), u64>,
    unstamped: u64,
    backlog: u64,
    in_grace: u64,
    marks_unread: u64,
}

impl StaleCounter {
    /// Count one decision.
    pub fn record(&mut self, decision: &Decision) {
        match decision {
            Decision::Stale {
                producer, slice, ..
            } => *self.stale.entry((producer.clone(), *slice)).or_insert(0) += 1,
            Decision::Unstamped => self.unstamped += 1,
            Decision::Backlog => self.backlog += 1,
            Decision::InGrace => self.in_grace += 1,
            Decision::Current => {}
        }
    }

    /// Stale messages of `producer` on `slice`.
    pub fn stale(&self, producer: &str, slice: u32) -> u64 {
        self.stale
            .get(&(producer.to_string(), slice))
            .copied()
            .unwrap_or(0)
    }

    /// Every stale message counted.
    pub fn stale_total(&self) -> u64 {
        self.stale.values().sum()
    }

    /// Messages without a readable stamp.
    pub fn unstamped(&self) -> u64 {
        self.unstamped
    }

    /// Messages found to be a backlog from before a move (not trips).
    pub fn backlog(&self) -> u64 {
        self.backlog
    }

    /// Messages of an old generation within the grace (not trips).
    pub fn in_grace(&self) -> u64 {
        self.in_grace
    }

    /// Count a document followed without the old broker's mark because reading it failed.
    pub fn mark_unread(&mut self) {
        self.marks_unread += 1;
    }

    /// Documents followed without the old broker's mark because reading it failed.
    pub fn marks_unread(&self) -> u64 {
        self.marks_unread
    }

    /// The stale series: `((producer, slice), count)`, sorted.
    pub fn stale_series(&self) -> impl Iterator<Item = (&(String, u32), &u64)> {
        self.stale.iter()
    }

    /// The Prometheus text exposition (0.0.4): [`STALE_TOTAL_METRIC`] (from 0), [`STALE_METRIC`]
    /// by producer and slice (series appear at their first count), [`UNSTAMPED_METRIC`],
    /// [`MARK_UNREAD_METRIC`].
    pub fn render(&self) -> String {
        let mut out = String::new();
        metrics_text::family(
            &mut out,
            STALE_TOTAL_METRIC,
            Kind::Counter,
            "Stale messages on the old broker, all producers and slices (what the stale-producer guard reads).",
        );
        metrics_text::sample(&mut out, STALE_TOTAL_METRIC, &[], self.stale_total());
        metrics_text::family(
            &mut out,
            STALE_METRIC,
            Kind::Counter,
            "Messages on the old broker stamped by a generation older than the one that moved their slice to the new broker, after the grace: a producer not following the routing.",
        );
        for ((producer, slice), n) in &self.stale {
            let slice = slice.to_string();
            let labels = [("producer", producer.as_str()), ("slice", slice.as_str())];
            metrics_text::sample(&mut out, STALE_METRIC, &labels, *n);
        }
        metrics_text::family(
            &mut out,
            UNSTAMPED_METRIC,
            Kind::Counter,
            "Messages on the old broker without a readable route stamp (a producer without the library).",
        );
        metrics_text::sample(&mut out, UNSTAMPED_METRIC, &[], self.unstamped);
        metrics_text::family(
            &mut out,
            MARK_UNREAD_METRIC,
            Kind::Counter,
            "Routing documents followed without the old broker's own mark because it could not be read in time: a backlog is then told by the stamp's time, within the clock-skew bound.",
        );
        metrics_text::sample(&mut out, MARK_UNREAD_METRIC, &[], self.marks_unread);
        out
    }
}

/// A ledger, its bounds and a counter behind one lock: what a consumer of the old broker (or the
/// bridge) holds and shares between its tasks.
#[derive(Debug)]
pub struct StaleGuard {
    bounds: Bounds,
    inner: Mutex<(MoveLedger, StaleCounter)>,
}

impl Default for StaleGuard {
    fn default() -> StaleGuard {
        StaleGuard::new(Bounds::default())
    }
}

impl StaleGuard {
    /// A guard with `bounds` and an empty ledger.
    pub fn new(bounds: Bounds) -> StaleGuard {
        StaleGuard {
            bounds,
            inner: Mutex::new((MoveLedger::new(), StaleCounter::default())),
        }
    }

    /// The bounds it checks with.
    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    /// Follow a routing document (see [`MoveLedger::follow`]).
    pub fn follow(&self, doc: &RoutingDocument, published_at_ms: Millis, old_mark: Option<Mark>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.0.follow(doc, published_at_ms, old_mark);
    }

    /// The latest generation followed (`None` before the first): a document of this generation
    /// or an older one would be ignored, so its mark need not be read.
    pub fn latest_generation(&self) -> Option<u64> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.0.latest().map(|p| p.generation)
    }

    /// Count a document about to be followed without the old broker's mark because reading it
    /// failed (an error, or the reader's deadline): [`MARK_UNREAD_METRIC`].
    pub fn mark_unread(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.1.mark_unread();
    }

    /// Check and count one message consumed from the old broker.
    pub fn check(&self, stamp: Option<&RouteStamp>, delivery: Delivery) -> Decision {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let decision = classify(stamp, &inner.0, delivery, self.bounds);
        inner.1.record(&decision);
        decision
    }

    /// Check and count one message by its headers (an unreadable stamp is unstamped).
    pub fn check_headers<I, K, V>(&self, headers: I, delivery: Delivery) -> Decision
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let stamp = RouteStamp::from_headers(headers).ok();
        self.check(stamp.as_ref(), delivery)
    }

    /// A copy of the counts.
    pub fn counts(&self) -> StaleCounter {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .clone()
    }

    /// The counts as Prometheus text.
    pub fn render(&self) -> String {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .render()
    }
}

#[cfg(test)]
#[path = "stale_tests.rs"]
mod tests;
