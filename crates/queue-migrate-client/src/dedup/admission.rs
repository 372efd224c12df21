//! One delivery's admission in the caller's transaction, with the stale-producer check of a
//! delivery read from the **old** broker (issue 58, `docs/design.md#stale-producers`):
//! [`Admission`].

use crate::stale::{Decision, Delivery, StaleGuard};
use crate::stamp::RouteStamp;
use crate::time::Millis;

use super::sql::{DedupDatabase, SqlDedupError, Transaction, Verdict, Versioned, admit};
use super::{BusinessKey, PayloadHash};

/// The checks of one delivery, built up, then run by [`Admission::admit`] in the caller's
/// transaction: what [`sql::admit`](admit) does — claim the key, then check the aggregate's
/// version — and, when the delivery came from the old broker, ask the consumer's [`StaleGuard`]
/// whether a producer wrote it by a generation older than the one that moved its slice, and count
/// the answer.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use queue_migrate_client::dedup::admission::Admission;
/// use queue_migrate_client::dedup::sql::Verdict;
/// use queue_migrate_client::dedup::{BusinessKey, ConsumerMetrics, PayloadHash, pool};
/// use queue_migrate_client::stale::{Delivery, Mark, StaleGuard};
/// use queue_migrate_client::{routing, stamp::RouteLabel, time};
///
/// let dir = tempfile::tempdir()?;
/// let pool = pool::sqlite(dir.path().join("consumer.db"), pool::PoolSettings::default()).await?;
/// // One guard per consumer process, fed with each routing document the consumer follows (the
/// // plan's `stale_producers` bounds), rendered with the consumer's own counters.
/// let guard = Arc::new(StaleGuard::default());
/// let metrics = ConsumerMetrics::new().with_stale_guard(guard.clone());
/// # let doc: routing::RoutingDocument = serde_json::from_str(r#"{"migration": "orders",
/// #   "generation": 5, "state": "slices", "step": 0, "paused": false, "slices_total": 128,
/// #   "slices_migrated": 8, "consume": ["old", "new"],
/// #   "brokers": {"old": "rabbitmq", "new": "nats"}, "updated_at": "2026-11-30T00:00:00Z"}"#)?;
/// // On each new document: when this consumer first saw it, and the old broker's mark read then
/// // (`queue_migrate::brokers::Adapter::stale_mark`, here a JetStream stream's last sequence;
/// // `None` where the broker has none, a RabbitMQ classic queue).
/// guard.follow(&doc, time::now_ms(), Some(Mark::Position(1_000)));
///
/// // A delivery from the old broker: its headers (the route stamp, if any) and what the broker
/// // says of where it stored it (`queue_migrate::brokers::Delivery::stale_facts`, here stream
/// // sequence 1001; `Delivery::default()` where it says nothing).
/// let headers = [("content-type", "application/json")];
/// let key = BusinessKey::new("order.paid", "4711", "v3")?;
/// let hash = PayloadHash::of_bytes(b"{\"orderId\":\"4711\"}");
/// let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
/// let admitted = Admission::new(&key, &hash)
///     .from_old_broker(&guard, headers, Delivery::at_position(1_001))
///     .admit(&mut tx, time::now_ms())
///     .await?;
/// // The stale check never refuses a message: match on the verdict as with `sql::admit`.
/// match admitted.verdict {
///     Verdict::Fresh => { /* apply the effect with &mut *tx */ tx.commit().await? }
///     Verdict::Stale { .. } => tx.commit().await?,
///     Verdict::Duplicate | Verdict::Conflict { .. } => tx.rollback().await?,
/// }
/// metrics.record(RouteLabel::Old, admitted.verdict.outcome());
/// // No stamp: counted apart, in the same text.
/// assert!(metrics.render().contains("\nqueue_migrate_unstamped_messages_total 1\n"));
/// # Ok(()) }
/// ```
///
/// # Guarantees
/// - The check never changes the verdict: a stale message is claimed, applied and acked exactly
///   as any other (counting is the point; the daemon's built-in guard, reading
///   `queue_migrate_stale_messages_total`, is what pauses the migration).
/// - A delivery is checked and counted once per `admit` that returns `Ok`, whatever the verdict
///   (a duplicate of a stale message is evidence of the same producer). A claim that fails is not
///   counted: the message comes back and is counted then. A delivery the caller rolls back and
///   gives back is counted again when it returns: the counters count deliveries, and the guard
///   reads an increase, so a repeat never turns a clean delivery stale.
/// - Without [`Admission::from_old_broker`] (a delivery from the new broker) nothing is checked
///   and [`Admitted::stale`] is `None`.
#[derive(Debug, Clone)]
#[must_use = "an admission does nothing until `admit` runs it"]
pub struct Admission<'a> {
    key: &'a BusinessKey,
    hash: &'a PayloadHash,
    versioned: Option<Versioned<'a>>,
    old: Option<OldBroker<'a>>,
}

/// A delivery from the old broker: the guard, the message's stamp and the broker's facts.
#[derive(Debug, Clone)]
struct OldBroker<'a> {
    guard: &'a StaleGuard,
    stamp: Option<RouteStamp>,
    delivery: Delivery,
}

/// What [`Admission::admit`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admitted {
    /// What to do with the delivery (see [`Verdict`]); the stale check never changes it.
    pub verdict: Verdict,
    /// The stale-producer decision (already counted by the guard), when the delivery came from
    /// the old broker; `None` otherwise.
    pub stale: Option<Decision>,
}

impl<'a> Admission<'a> {
    /// Claim `key` with `hash` (the default key TTL), nothing else yet.
    pub fn new(key: &'a BusinessKey, hash: &'a PayloadHash) -> Admission<'a> {
        Admission {
            key,
            hash,
            versioned: None,
            old: None,
        }
    }

    /// Also check the aggregate's version order (see [`sql::accept_version`](super::sql::accept_version)).
    pub fn versioned(mut self, versioned: Versioned<'a>) -> Admission<'a> {
        self.versioned = Some(versioned);
        self
    }

    /// [`Admission::versioned`] when `versioned` is `Some` (what [`sql::admit`](admit) takes).
    pub fn maybe_versioned(mut self, versioned: Option<Versioned<'a>>) -> Admission<'a> {
        self.versioned = versioned;
        self
    }

    /// The delivery was read from the **old** broker: check it with `guard` by its route stamp,
    /// read from `headers` (missing or unreadable: [`Decision::Unstamped`], counted apart), and
    /// the broker's `delivery` facts (its position or enqueue time where the broker has one,
    /// `Delivery::default()` where it has none: then the stamp's time decides, within the guard's
    /// clock-skew bound).
    pub fn from_old_broker<I, K, V>(
        self,
        guard: &'a StaleGuard,
        headers: I,
        delivery: Delivery,
    ) -> Admission<'a>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let stamp = RouteStamp::from_headers(headers).ok();
        self.from_old_broker_stamp(guard, stamp, delivery)
    }

    /// [`Admission::from_old_broker`] with the stamp already read (`None`: unstamped).
    pub fn from_old_broker_stamp(
        mut self,
        guard: &'a StaleGuard,
        stamp: Option<RouteStamp>,
        delivery: Delivery,
    ) -> Admission<'a> {
        self.old = Some(OldBroker {
            guard,
            stamp,
            delivery,
        });
        self
    }

    /// Run the checks in `tx`: [`sql::admit`](admit) (claim, then the version order), then the
    /// stale-producer check of a delivery from the old broker, counted by its guard.
    ///
    /// # Errors
    /// As [`sql::admit`](admit): roll back and retry the message (nothing was counted).
    pub async fn admit<DB: DedupDatabase>(
        self,
        tx: &mut Transaction<'_, DB>,
        now_ms: Millis,
    ) -> Result<Admitted, SqlDedupError> {
        let verdict = admit(tx, self.key, self.hash, self.versioned, now_ms).await?;
        let stale = self
            .old
            .map(|old| old.guard.check(old.stamp.as_ref(), old.delivery));
        Ok(Admitted { verdict, stale })
    }
}
