//! Consumer metrics: every message outcome counted by route (`old`, `new`, `bridge`, `replay`,
//! from the message's route stamp), rendered as Prometheus text.
//!
//! ```text
//! queue_migrate_consumer_messages_total{route="bridge",outcome="duplicate_blocked"} 12
//! ```
//!
//! The route breakdown is what makes the duplicate count readable
//! (`docs/design.md#idempotent-consumers-and-the-dedup-window`): a retry produces a blocked duplicate and that is the system working; duplicates from
//! the bridge growing while the others stay flat mean the bridge republishes. `failed` and
//! `dead_lettered` are counted too, so that a success rate computed from this counter is honest.
//!
//! # Guarantees
//! - Every (route, outcome) series is rendered from start, at 0, so `increase()` sees the first
//!   message.
//! - Recording is one relaxed atomic add: no lock, no allocation.
//! - With [`ConsumerMetrics::with_stale_guard`], the stale-producer counts of the consumer's
//!   [`StaleGuard`] (issue 58: `queue_migrate_stale_messages_total`, by producer and slice,
//!   unstamped apart) are rendered in the same text.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::metrics_text::{self, Kind};
use crate::stale::StaleGuard;
use crate::stamp::{RouteLabel, valid_metric_name};

/// The default metric name.
pub const CONSUMER_METRIC: &str = "queue_migrate_consumer_messages_total";

/// Errors of the consumer metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// A metric name that Prometheus would reject.
    #[error("invalid metric name {0:?}: expected [a-zA-Z_:][a-zA-Z0-9_:]*")]
    InvalidName(String),
}

/// What became of one delivered message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The effect was applied (and its key committed or completed).
    Processed,
    /// A duplicate: the key was already applied; effect skipped, message acked.
    DuplicateBlocked,
    /// The key came back with a different payload hash; not applied.
    Conflict,
    /// A new key whose version is not newer than the aggregate's last applied one
    /// ([`crate::dedup::sql::Verdict::Stale`]): not applied, claim kept, message acked.
    Stale,
    /// Another consumer holds the key; the message goes back for a retry.
    InProgressRetry,
    /// The effect failed; the message goes back for a retry.
    Failed,
    /// The message was given up on and dead-lettered.
    DeadLettered,
}

impl Outcome {
    /// Every outcome, in rendering order.
    pub const ALL: [Outcome; 7] = [
        Outcome::Processed,
        Outcome::DuplicateBlocked,
        Outcome::Conflict,
        Outcome::Stale,
        Outcome::InProgressRetry,
        Outcome::Failed,
        Outcome::DeadLettered,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Processed => "processed",
            Outcome::DuplicateBlocked => "duplicate_blocked",
            Outcome::Conflict => "conflict",
            Outcome::Stale => "stale",
            Outcome::InProgressRetry => "in_progress_retry",
            Outcome::Failed => "failed",
            Outcome::DeadLettered => "dead_lettered",
        }
    }

    fn index(self) -> usize {
        match self {
            Outcome::Processed => 0,
            Outcome::DuplicateBlocked => 1,
            Outcome::Conflict => 2,
            Outcome::Stale => 3,
            Outcome::InProgressRetry => 4,
            Outcome::Failed => 5,
            Outcome::DeadLettered => 6,
        }
    }
}

/// Message outcomes by route. Share one instance (e.g. in an `Arc`) across the consumer's tasks.
#[derive(Debug)]
pub struct ConsumerMetrics {
    name: String,
    counts: [[AtomicU64; Outcome::ALL.len()]; RouteLabel::ALL.len()],
    stale: Option<Arc<StaleGuard>>,
}

impl Default for ConsumerMetrics {
    fn default() -> Self {
        ConsumerMetrics {
            name: CONSUMER_METRIC.to_string(),
            counts: Default::default(),
            stale: None,
        }
    }
}

impl ConsumerMetrics {
    /// Counters named [`CONSUMER_METRIC`].
    pub fn new() -> ConsumerMetrics {
        ConsumerMetrics::default()
    }

    /// Counters under another metric name (e.g. `consumer_messages_total` for a plan's gates).
    ///
    /// # Errors
    /// The name is not a valid Prometheus metric name.
    pub fn with_name(name: &str) -> Result<ConsumerMetrics, MetricsError> {
        if !valid_metric_name(name) {
            return Err(MetricsError::InvalidName(name.to_string()));
        }
        Ok(ConsumerMetrics {
            name: name.to_string(),
            ..ConsumerMetrics::default()
        })
    }

    /// The same counters, rendering `guard`'s stale-producer counts with them (the guard the
    /// consumer's admit path checks old-broker deliveries with:
    /// `dedup::admission::Admission::from_old_broker` in the durable mode,
    /// [`StaleGuard::check_headers`] around the Redis and window modes).
    pub fn with_stale_guard(mut self, guard: Arc<StaleGuard>) -> ConsumerMetrics {
        self.stale = Some(guard);
        self
    }

    /// The stale-producer guard rendered with these counters, if any.
    pub fn stale_guard(&self) -> Option<&Arc<StaleGuard>> {
        self.stale.as_ref()
    }

    /// Count one message.
    pub fn record(&self, route: RouteLabel, outcome: Outcome) {
        self.add(route, outcome, 1);
    }

    /// Count `n` messages.
    pub fn add(&self, route: RouteLabel, outcome: Outcome, n: u64) {
        self.counts[route.index()][outcome.index()].fetch_add(n, Ordering::Relaxed);
    }

    /// The current count.
    pub fn get(&self, route: RouteLabel, outcome: Outcome) -> u64 {
        self.counts[route.index()][outcome.index()].load(Ordering::Relaxed)
    }

    /// The Prometheus text exposition (format 0.0.4) of all 28 series (4 routes, 7 outcomes),
    /// then the stale-producer guard's families when there is one ([`StaleGuard::render`]).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(1536);
        metrics_text::family(
            &mut out,
            &self.name,
            Kind::Counter,
            "Consumed messages by route (old, new, bridge, replay: from the route stamp) and outcome (processed, duplicate_blocked, conflict, stale, in_progress_retry, failed, dead_lettered).",
        );
        for route in RouteLabel::ALL {
            for outcome in Outcome::ALL {
                let labels = [("route", route.as_str()), ("outcome", outcome.as_str())];
                metrics_text::sample(&mut out, &self.name, &labels, self.get(route, outcome));
            }
        }
        if let Some(guard) = &self.stale {
            out.push_str(&guard.render());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_series_and_parses_back() {
        let m = ConsumerMetrics::new();
        m.record(RouteLabel::Old, Outcome::Processed);
        m.add(RouteLabel::Bridge, Outcome::DuplicateBlocked, 3);
        m.record(RouteLabel::New, Outcome::Conflict);
        m.record(RouteLabel::New, Outcome::InProgressRetry);
        m.record(RouteLabel::Old, Outcome::DeadLettered);
        m.record(RouteLabel::Replay, Outcome::Stale);
        let text = m.render();
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
        assert_eq!(scrape.samples.len(), 28);
        let value = |route: &str, outcome: &str| {
            scrape
                .samples
                .iter()
                .find(|s| {
                    s.labels.get("route") == Some(route) && s.labels.get("outcome") == Some(outcome)
                })
                .map(|s| match s.value {
                    prometheus_parse::Value::Counter(v) => v,
                    ref other => panic!("{other:?}"),
                })
                .unwrap()
        };
        assert_eq!(value("old", "processed"), 1.0);
        assert_eq!(value("bridge", "duplicate_blocked"), 3.0);
        assert_eq!(value("new", "conflict"), 1.0);
        assert_eq!(value("new", "in_progress_retry"), 1.0);
        assert_eq!(value("old", "dead_lettered"), 1.0);
        assert_eq!(value("new", "failed"), 0.0);
        assert_eq!(value("replay", "stale"), 1.0);
        assert!(text.contains("# TYPE queue_migrate_consumer_messages_total counter"));
    }

    #[test]
    fn the_stale_guards_counts_render_with_the_consumers() {
        let guard = Arc::new(StaleGuard::default());
        let m = ConsumerMetrics::new().with_stale_guard(guard.clone());
        guard.check(None, crate::stale::Delivery::default());
        let text = m.render();
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
        // The consumer's 28 series, the guard's total (from 0), the unstamped count and the
        // documents followed without the old broker's mark.
        assert_eq!(scrape.samples.len(), 31, "{text}");
        assert!(
            text.contains("\nqueue_migrate_stale_mark_unread_total 0\n"),
            "{text}"
        );
        assert!(
            text.contains("\nqueue_migrate_stale_messages_total 0\n"),
            "{text}"
        );
        assert!(
            text.contains("\nqueue_migrate_unstamped_messages_total 1\n"),
            "{text}"
        );
        assert!(ConsumerMetrics::new().stale_guard().is_none());
        assert!(
            !ConsumerMetrics::new()
                .render()
                .contains("queue_migrate_stale_messages_total")
        );
    }

    #[test]
    fn custom_names_are_checked() {
        let m = ConsumerMetrics::with_name("consumer_messages_total").unwrap();
        assert!(
            m.render()
                .contains("\nconsumer_messages_total{route=\"old\",outcome=\"processed\"} 0\n")
        );
        assert!(ConsumerMetrics::with_name("consumer-messages").is_err());
    }
}
