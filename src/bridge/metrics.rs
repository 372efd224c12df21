//! The bridge's counters, rendered in the Prometheus text format.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use crate::metrics_text::{self, Kind};
use crate::routing::Side;
use crate::stamp::{PublishedCounter, RouteLabel};

/// Most distinct producers (the ingress messages' `x-qm-producer`, or `bridge` when absent) that
/// get a series of their own in `queue_migrate_published_total`: the header is whatever a
/// producer wrote, and each distinct label value is a series Prometheus keeps. The first ones
/// seen keep their name; later ones are counted under [`OTHER_PRODUCER`].
pub const MAX_PRODUCERS: usize = 64;

/// The producer label of the messages past the first [`MAX_PRODUCERS`] distinct producers.
pub const OTHER_PRODUCER: &str = "other";

/// Counters by destination (old, new); cheap to update from many tasks.
#[derive(Debug, Default)]
pub struct BridgeMetrics {
    migration: String,
    forwarded: [AtomicU64; 2],
    confirmed: [AtomicU64; 2],
    errors: [AtomicU64; 2],
    pending: [AtomicI64; 2],
    refused: [AtomicU64; 2],
    dead_lettered: [AtomicU64; 2],
    unkeyed: AtomicU64,
    ack_errors: AtomicU64,
    active: AtomicU64,
    /// `queue_migrate_published_total{broker, route="bridge", producer}`: what the bridge
    /// published, counted like a producer's (through [`BridgeMetrics::published`]).
    pub published: PublishedCounter,
    /// The producers with a series of their own (at most [`MAX_PRODUCERS`]).
    producers: RwLock<BTreeSet<String>>,
    /// The stale-producer check of the ingress messages (issue 58): a stamped message of a
    /// producer routing a moved slice by an older generation, and unstamped ones apart. The
    /// bridge's [`run`](super::run) feeds it each routing document with the ingress queue's mark
    /// on the old broker ([`crate::brokers::marks`]).
    pub stale: std::sync::Arc<crate::stale::StaleGuard>,
}

fn index(side: Side) -> usize {
    match side {
        Side::Old => 0,
        Side::New => 1,
    }
}

impl BridgeMetrics {
    /// The same counters, checking ingress messages with `bounds` (the plan's `stale_producers`).
    pub fn with_stale_bounds(mut self, bounds: crate::stale::Bounds) -> BridgeMetrics {
        self.stale = std::sync::Arc::new(crate::stale::StaleGuard::new(bounds));
        self
    }

    /// Check one ingress message's stamp, with what the old broker said of it (`facts`:
    /// [`crate::brokers::Delivery::stale_facts`]), against the routing documents the guard
    /// followed (each dated when the bridge first saw it, with the old broker's mark read then:
    /// later than the publish, the safe side).
    pub fn check_ingress(&self, message: &crate::brokers::Message, facts: crate::stale::Delivery) {
        self.stale.check_headers(message.headers.iter(), facts);
    }

    /// Counters for `migration`.
    pub fn new(migration: &str) -> BridgeMetrics {
        BridgeMetrics {
            migration: migration.to_string(),
            ..BridgeMetrics::default()
        }
    }

    /// A publish to `side` is sent (each attempt counts): pending until [`Attempt::settled`], or
    /// until the attempt is dropped unsettled (its forward was cancelled: a lost lease, the end
    /// of a shutdown's grace), which counts neither a confirm nor an error.
    pub fn forwarded(&self, side: Side) -> Attempt<'_> {
        self.forwarded[index(side)].fetch_add(1, Ordering::Relaxed);
        self.pending[index(side)].fetch_add(1, Ordering::Relaxed);
        Attempt {
            metrics: self,
            side,
            open: true,
        }
    }

    /// `side` refused a message for good ([`crate::brokers::BrokerError::Refused`]); counted
    /// once per message, however often it is retried.
    pub fn refused(&self, side: Side) {
        self.refused[index(side)].fetch_add(1, Ordering::Relaxed);
    }

    /// A message `side` refused was parked in the old broker's dead-letter queue (its ingress
    /// message is acked next).
    pub fn dead_lettered(&self, side: Side) {
        self.dead_lettered[index(side)].fetch_add(1, Ordering::Relaxed);
    }

    /// A message of `producer` was published to `broker` (confirmed): counted in
    /// `queue_migrate_published_total{route="bridge"}` under the producer's name while it is
    /// among the first [`MAX_PRODUCERS`] distinct ones, else under [`OTHER_PRODUCER`].
    pub fn published(&self, broker: &str, producer: &str) {
        let label = if self.has_series(producer) {
            producer
        } else {
            OTHER_PRODUCER
        };
        self.published.add(broker, RouteLabel::Bridge, label, 1);
    }

    /// Whether `producer` has a series of its own, giving it one while there is room.
    fn has_series(&self, producer: &str) -> bool {
        // A panic while holding the lock cannot leave the set inconsistent (one insert).
        let known = self
            .producers
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        if known.contains(producer) {
            return true;
        }
        drop(known);
        let mut known = self
            .producers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if known.len() < MAX_PRODUCERS {
            known.insert(producer.to_string());
        }
        known.contains(producer)
    }

    /// A message had no usable key.
    pub fn unkeyed(&self) {
        self.unkeyed.fetch_add(1, Ordering::Relaxed);
    }

    /// The ingress ack failed after the destination confirmed (the message will come again: a
    /// duplicate the consumers' dedup absorbs).
    pub fn ack_error(&self) {
        self.ack_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether this bridge holds the lease and forwards.
    pub fn set_active(&self, active: bool) {
        self.active.store(u64::from(active), Ordering::Relaxed);
    }

    /// Confirmed publishes to `side` so far.
    pub fn confirmed(&self, side: Side) -> u64 {
        self.confirmed[index(side)].load(Ordering::Relaxed)
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let m = self.migration.as_str();
        let mut out = String::new();
        let by_side = |out: &mut String, name: &str, kind: Kind, help: &str, v: [u64; 2]| {
            metrics_text::family(out, name, kind, help);
            for (side, v) in [("old", v[0]), ("new", v[1])] {
                let labels = [("migration", m), ("destination", side), ("route", "bridge")];
                metrics_text::sample(out, name, &labels, v);
            }
        };
        let load =
            |a: &[AtomicU64; 2]| [a[0].load(Ordering::Relaxed), a[1].load(Ordering::Relaxed)];
        by_side(
            &mut out,
            "queue_migrate_bridge_forwarded_total",
            Kind::Counter,
            "Publishes sent to a destination (each attempt).",
            load(&self.forwarded),
        );
        by_side(
            &mut out,
            "queue_migrate_bridge_confirmed_total",
            Kind::Counter,
            "Publishes the destination confirmed; the ingress message is acked after this.",
            load(&self.confirmed),
        );
        by_side(
            &mut out,
            "queue_migrate_bridge_publish_errors_total",
            Kind::Counter,
            "Publishes the destination refused or did not confirm (retried).",
            load(&self.errors),
        );
        let pending =
            |i: usize| u64::try_from(self.pending[i].load(Ordering::Relaxed)).unwrap_or(0);
        by_side(
            &mut out,
            "queue_migrate_bridge_pending",
            Kind::Gauge,
            "Publishes awaiting the destination's confirm.",
            [pending(0), pending(1)],
        );
        for (name, help, v) in [
            (
                "queue_migrate_bridge_refused_total",
                "Messages a destination refused for good (too large, a header it cannot carry): \
                 dead-lettered when the plan names brokers.old.dead_letter, else retried while \
                 their key waits.",
                load(&self.refused),
            ),
            (
                "queue_migrate_bridge_dead_lettered_total",
                "Refused messages parked in the old broker's dead-letter queue (then acked).",
                load(&self.dead_lettered),
            ),
        ] {
            metrics_text::family(&mut out, name, Kind::Counter, help);
            for (side, v) in [("old", v[0]), ("new", v[1])] {
                let labels = [("migration", m), ("destination", side)];
                metrics_text::sample(&mut out, name, &labels, v);
            }
        }
        for (name, help, v) in [
            (
                "queue_migrate_bridge_unkeyed_total",
                "Messages without a usable key (routed by the empty key).",
                self.unkeyed.load(Ordering::Relaxed),
            ),
            (
                "queue_migrate_bridge_ack_errors_total",
                "Ingress acks that failed after the destination confirmed (will be redelivered).",
                self.ack_errors.load(Ordering::Relaxed),
            ),
        ] {
            metrics_text::family(&mut out, name, Kind::Counter, help);
            metrics_text::sample(&mut out, name, &[("migration", m)], v);
        }
        let name = "queue_migrate_bridge_active";
        metrics_text::family(
            &mut out,
            name,
            Kind::Gauge,
            "1 while this bridge holds the lease and forwards.",
        );
        let active = self.active.load(Ordering::Relaxed);
        metrics_text::sample(&mut out, name, &[("migration", m)], active);
        out.push_str(&self.published.render());
        out.push_str(&self.stale.render());
        out
    }
}

/// One publish in flight, counted in `queue_migrate_bridge_pending` while it lives.
pub struct Attempt<'a> {
    metrics: &'a BridgeMetrics,
    side: Side,
    open: bool,
}

impl Attempt<'_> {
    /// The publish was confirmed (`ok`) or failed.
    pub fn settled(mut self, ok: bool) {
        self.open = false;
        let m = self.metrics;
        m.pending[index(self.side)].fetch_sub(1, Ordering::Relaxed);
        let counter = if ok { &m.confirmed } else { &m.errors };
        counter[index(self.side)].fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if self.open {
            self.metrics.pending[index(self.side)].fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 58: the bridge checks each ingress message's stamp like a consumer of the old
    /// broker: a producer routing a moved slice by an older generation after the grace is
    /// counted by producer and slice, a message without a stamp apart.
    #[test]
    fn ingress_messages_are_checked_for_stale_producers_and_unstamped_ones_counted_apart() {
        let m = BridgeMetrics::new("orders").with_stale_bounds(crate::stale::Bounds {
            grace_ms: 0,
            clock_skew_ms: 0,
        });
        let router = crate::router::Router::for_migration("orders", 128, "rabbitmq", "nats");
        let mut doc = crate::routing::RoutingDocument {
            migration: "orders".into(),
            generation: 5,
            state: "slices".into(),
            step: Some(0),
            paused: false,
            slices_total: 128,
            slices_migrated: 16,
            consume: vec![Side::Old, Side::New],
            brokers: crate::routing::BrokerNames {
                old: "rabbitmq".into(),
                new: "nats".into(),
            },
            updated_at: "2026-11-30T00:00:00Z".into(),
        };
        router.offer(doc.clone()).unwrap();
        let route = crate::routing::Route::new(Side::Old, 3, 4);
        let later = crate::time::now_ms() + 60_000;
        let stamp = crate::stamp::RouteStamp::new(&route, "rabbitmq", "checkout", later).unwrap();
        let mut stamped = crate::brokers::Message::new(b"{}".to_vec());
        for (k, v) in stamp.headers() {
            stamped.headers.insert(k.to_string(), v);
        }
        let followed = router.document().unwrap();
        m.stale.follow(&followed, crate::time::now_ms(), None);
        let none = crate::stale::Delivery::default();
        m.check_ingress(&stamped, none);
        m.check_ingress(&crate::brokers::Message::new(b"{}".to_vec()), none);
        doc.generation = 6;
        router.offer(doc).unwrap();
        let counts = m.stale.counts();
        assert_eq!((counts.stale("checkout", 3), counts.unstamped()), (1, 1));
        let text = m.render();
        assert!(
            text.contains(
                "queue_migrate_stale_producer_messages_total{producer=\"checkout\",slice=\"3\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("queue_migrate_unstamped_messages_total 1"),
            "{text}"
        );
    }

    #[test]
    fn counts_by_destination_and_renders_every_series() {
        let m = BridgeMetrics::new("orders");
        let in_flight = m.forwarded(Side::New);
        m.forwarded(Side::New).settled(true);
        m.forwarded(Side::Old).settled(false);
        m.unkeyed();
        let text = m.render();
        let exp = crate::indicators::exposition::parse(&text);
        assert!(exp.is_clean(), "{text}");
        for line in [
            "queue_migrate_bridge_forwarded_total{migration=\"orders\",destination=\"new\",route=\"bridge\"} 2",
            "queue_migrate_bridge_confirmed_total{migration=\"orders\",destination=\"new\",route=\"bridge\"} 1",
            "queue_migrate_bridge_pending{migration=\"orders\",destination=\"new\",route=\"bridge\"} 1",
            "queue_migrate_bridge_publish_errors_total{migration=\"orders\",destination=\"old\",route=\"bridge\"} 1",
            "queue_migrate_bridge_pending{migration=\"orders\",destination=\"old\",route=\"bridge\"} 0",
            "queue_migrate_bridge_unkeyed_total{migration=\"orders\"} 1",
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
        drop(in_flight);
    }

    /// Regression: a message the destination refused for good was only one more publish error,
    /// retried forever; nothing told it apart from an outage, or said it was parked.
    #[test]
    fn refused_and_dead_lettered_messages_are_counted_by_destination() {
        let m = BridgeMetrics::new("orders");
        m.refused(Side::New);
        m.refused(Side::New);
        m.dead_lettered(Side::New);
        let text = m.render();
        let exp = crate::indicators::exposition::parse(&text);
        assert!(exp.is_clean(), "{text}");
        for line in [
            "queue_migrate_bridge_refused_total{migration=\"orders\",destination=\"new\"} 2",
            "queue_migrate_bridge_refused_total{migration=\"orders\",destination=\"old\"} 0",
            "queue_migrate_bridge_dead_lettered_total{migration=\"orders\",destination=\"new\"} 1",
            "queue_migrate_bridge_dead_lettered_total{migration=\"orders\",destination=\"old\"} 0",
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
    }

    /// Regression: every distinct `x-qm-producer` an ingress message carried became a series of
    /// its own, so one producer writing a request id there grew Prometheus without bound.
    #[test]
    fn producers_past_the_bound_share_one_series() {
        let m = BridgeMetrics::new("orders");
        for i in 0..MAX_PRODUCERS + 10 {
            m.published("nats", &format!("producer-{i}"));
        }
        m.published("nats", "producer-0");
        m.published("nats", &format!("producer-{}", MAX_PRODUCERS + 3));
        let bridge = RouteLabel::Bridge;
        assert_eq!(m.published.get("nats", bridge, "producer-0"), 2);
        let last_kept = format!("producer-{}", MAX_PRODUCERS - 1);
        assert_eq!(m.published.get("nats", bridge, &last_kept), 1);
        assert_eq!(m.published.get("nats", bridge, OTHER_PRODUCER), 11);
        let text = m.render();
        let series = text
            .lines()
            .filter(|l| l.starts_with("queue_migrate_published_total{"))
            .count();
        assert_eq!(series, MAX_PRODUCERS + 1, "{text}");
    }

    /// Regression: a forward cancelled mid-publish (a lost lease, the end of a shutdown's
    /// grace) left its publish counted as pending for good.
    #[test]
    fn a_cancelled_publish_leaves_the_pending_gauge() {
        let m = BridgeMetrics::new("orders");
        let attempt = m.forwarded(Side::New);
        drop(attempt);
        let text = m.render();
        assert!(
            text.contains(
                "queue_migrate_bridge_pending{migration=\"orders\",destination=\"new\",route=\"bridge\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "queue_migrate_bridge_confirmed_total{migration=\"orders\",destination=\"new\",route=\"bridge\"} 0"
            ),
            "{text}"
        );
    }
}
