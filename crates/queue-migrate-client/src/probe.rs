//! Synthetic probes: marked messages the daemon publishes through the new broker during the
//! `synthetic` phase (`synthetic: { probes: { rate, count, repeat } }` in the plan), and what a
//! consumer does with them.
//!
//! A probe is an ordinary message with the header [`HEADER_PROBE`] (`latency` or `idempotency`), a
//! dedup key (`x-qm-dedup-key: probe:MIGRATION:RUN.SEQ`, a three-part business key), and a route stamp whose `x-qm-at` is the
//! publish time. A consumer recognises it ([`Probe::from_headers`]), claims its dedup key like any
//! message, applies **no business effect**, and records it in [`ProbeMetrics`]:
//!
//! - `queue_migrate_probe_received_total{route,probe}` — every delivery;
//! - `queue_migrate_probe_effects_total{route,probe}` — deliveries whose claim was fresh (the
//!   "effect" a real message would have had);
//! - `queue_migrate_probe_latency_seconds{route}` — a histogram of publish-to-consume time of
//!   latency probes.
//!
//! The idempotency probe is one message sent `repeat` times (default 5): a gate such as
//! `sum(queue_migrate_probe_effects_total{probe="idempotency"}) == 1` checks that the consumers
//! applied it once. [`due`] says how many latency probes should have been sent after some time.

// Part of the library consumers depend on: every public item is documented.
#![warn(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};

use crate::metrics_text::{self, Kind};
use crate::stamp::RouteLabel;

/// Marks a probe; the value is its kind.
pub const HEADER_PROBE: &str = "x-qm-probe";

/// The two kinds of probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProbeKind {
    /// Measures publish-to-consume time by route.
    Latency,
    /// One message sent several times: one effect expected.
    Idempotency,
}

impl ProbeKind {
    /// Both kinds.
    pub const ALL: [ProbeKind; 2] = [ProbeKind::Latency, ProbeKind::Idempotency];

    /// The header value and metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Latency => "latency",
            ProbeKind::Idempotency => "idempotency",
        }
    }

    /// Reads a header value.
    pub fn parse(s: &str) -> Option<ProbeKind> {
        match s {
            "latency" => Some(ProbeKind::Latency),
            "idempotency" => Some(ProbeKind::Idempotency),
            _ => None,
        }
    }

    fn index(self) -> usize {
        match self {
            ProbeKind::Latency => 0,
            ProbeKind::Idempotency => 1,
        }
    }
}

/// A recognised probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Probe {
    /// Its kind.
    pub kind: ProbeKind,
}

impl Probe {
    /// The probe in these headers (names matched case-insensitively), if the message is one. An
    /// unknown kind is still a probe (of the latency kind), so that a newer daemon's probes never
    /// reach business code.
    pub fn from_headers<'a, I>(headers: I) -> Option<Probe>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        headers
            .into_iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(HEADER_PROBE))
            .map(|(_, v)| Probe {
                kind: ProbeKind::parse(v.trim()).unwrap_or(ProbeKind::Latency),
            })
    }
}

/// The dedup key of latency probe `seq` of run `run` (the generation that entered `synthetic`).
pub fn latency_key(migration: &str, run: u64, seq: u32) -> String {
    format!("probe:{migration}:{run}.{seq}")
}

/// The dedup key of the idempotency probe of run `run`.
pub fn idempotency_key(migration: &str, run: u64) -> String {
    format!("probe:{migration}:{run}.idempotency")
}

/// How many latency probes should have been sent `elapsed_ms` after the run started, at `rate`
/// per second, `count` in all: the first at once, then one every `1/rate` s.
pub fn due(rate: f64, count: u32, elapsed_ms: i64) -> u32 {
    if elapsed_ms < 0 || rate.is_nan() || rate <= 0.0 {
        return 0;
    }
    // Precision: elapsed below 2^53 ms; the product is clamped before the cast.
    #[allow(clippy::cast_precision_loss)]
    let n = (elapsed_ms as f64 / 1000.0 * rate).floor() + 1.0;
    if n >= f64::from(count) {
        count
    } else {
        // In 1..count, so the cast is exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let n = n as u32;
        n
    }
}

/// Latency histogram bucket bounds, seconds.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

/// A consumer's probe counters and latency histogram, by route.
#[derive(Debug, Default)]
pub struct ProbeMetrics {
    received: [[AtomicU64; 2]; RouteLabel::ALL.len()],
    effects: [[AtomicU64; 2]; RouteLabel::ALL.len()],
    latency: [Histogram; RouteLabel::ALL.len()],
}

impl ProbeMetrics {
    /// Empty counters.
    pub fn new() -> ProbeMetrics {
        ProbeMetrics::default()
    }

    /// A probe was delivered; `fresh` when its dedup claim was fresh (its one "effect");
    /// `latency_ms` for a latency probe: consume time minus the stamp's `at`.
    pub fn record(&self, route: RouteLabel, kind: ProbeKind, fresh: bool, latency_ms: Option<i64>) {
        let (r, k) = (route.index(), kind.index());
        self.received[r][k].fetch_add(1, Ordering::Relaxed);
        if fresh {
            self.effects[r][k].fetch_add(1, Ordering::Relaxed);
        }
        if let (true, ProbeKind::Latency, Some(ms)) = (fresh, kind, latency_ms) {
            let ms = ms.max(0);
            let h = &self.latency[r];
            #[allow(clippy::cast_precision_loss)]
            let secs = ms as f64 / 1000.0;
            for (i, bound) in LATENCY_BUCKETS.iter().enumerate() {
                if secs <= *bound {
                    h.buckets[i].fetch_add(1, Ordering::Relaxed);
                }
            }
            h.count.fetch_add(1, Ordering::Relaxed);
            h.sum_micros.fetch_add(
                u64::try_from(ms).unwrap_or(0).saturating_mul(1000),
                Ordering::Relaxed,
            );
        }
    }

    /// Fresh claims (effects) so far.
    pub fn effects(&self, route: RouteLabel, kind: ProbeKind) -> u64 {
        self.effects[route.index()][kind.index()].load(Ordering::Relaxed)
    }

    /// Deliveries so far.
    pub fn received(&self, route: RouteLabel, kind: ProbeKind) -> u64 {
        self.received[route.index()][kind.index()].load(Ordering::Relaxed)
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, help, table) in [
            (
                "queue_migrate_probe_received_total",
                "Synthetic probes delivered, by route and kind.",
                &self.received,
            ),
            (
                "queue_migrate_probe_effects_total",
                "Synthetic probes whose dedup claim was fresh (applied once), by route and kind.",
                &self.effects,
            ),
        ] {
            metrics_text::family(&mut out, name, Kind::Counter, help);
            for route in RouteLabel::ALL {
                for kind in ProbeKind::ALL {
                    let labels = [("route", route.as_str()), ("probe", kind.as_str())];
                    let v = table[route.index()][kind.index()].load(Ordering::Relaxed);
                    metrics_text::sample(&mut out, name, &labels, v);
                }
            }
        }
        let name = "queue_migrate_probe_latency_seconds";
        metrics_text::family(
            &mut out,
            name,
            Kind::Histogram,
            "Publish-to-consume time of latency probes, by route.",
        );
        let (bucket, sum_name, count_name) = (
            format!("{name}_bucket"),
            format!("{name}_sum"),
            format!("{name}_count"),
        );
        for route in RouteLabel::ALL {
            let h = &self.latency[route.index()];
            let r = route.as_str();
            for (i, bound) in LATENCY_BUCKETS.iter().enumerate() {
                let le = bound.to_string();
                let v = h.buckets[i].load(Ordering::Relaxed);
                metrics_text::sample(&mut out, &bucket, &[("route", r), ("le", &le)], v);
            }
            let count = h.count.load(Ordering::Relaxed);
            metrics_text::sample(&mut out, &bucket, &[("route", r), ("le", "+Inf")], count);
            #[allow(clippy::cast_precision_loss)]
            let sum = h.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
            metrics_text::sample(&mut out, &sum_name, &[("route", r)], sum);
            metrics_text::sample(&mut out, &count_name, &[("route", r)], count);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_are_recognised_by_their_header_whatever_its_case() {
        let h = [("X-QM-Probe", "idempotency"), ("x-qm-route", "new")];
        assert_eq!(
            Probe::from_headers(h),
            Some(Probe {
                kind: ProbeKind::Idempotency
            })
        );
        assert_eq!(Probe::from_headers([("x-qm-route", "new")]), None);
        // A kind this version does not know is still kept away from business code.
        assert_eq!(
            Probe::from_headers([("x-qm-probe", "jitter")]).map(|p| p.kind),
            Some(ProbeKind::Latency)
        );
    }

    #[test]
    fn due_sends_the_first_at_once_then_at_the_rate_up_to_count() {
        assert_eq!(due(2.0, 10, 0), 1);
        assert_eq!(due(2.0, 10, 499), 1);
        assert_eq!(due(2.0, 10, 500), 2);
        assert_eq!(due(2.0, 10, 4_999), 10);
        assert_eq!(due(2.0, 10, 3_600_000), 10);
        assert_eq!(due(2.0, 10, -5), 0);
        assert_eq!(due(0.0, 10, 1000), 0);
        assert_eq!(due(f64::NAN, 10, 1000), 0);
    }

    #[test]
    fn one_effect_of_five_copies_renders_and_parses_back() {
        let m = ProbeMetrics::new();
        for i in 0..5 {
            m.record(RouteLabel::New, ProbeKind::Idempotency, i == 0, None);
        }
        m.record(RouteLabel::New, ProbeKind::Latency, true, Some(30));
        m.record(RouteLabel::New, ProbeKind::Latency, false, Some(30));
        assert_eq!(m.effects(RouteLabel::New, ProbeKind::Idempotency), 1);
        assert_eq!(m.received(RouteLabel::New, ProbeKind::Idempotency), 5);
        let text = m.render();
        for line in [
            "queue_migrate_probe_effects_total{route=\"new\",probe=\"idempotency\"} 1",
            "queue_migrate_probe_received_total{route=\"new\",probe=\"idempotency\"} 5",
            "queue_migrate_probe_latency_seconds_bucket{route=\"new\",le=\"0.025\"} 0",
            "queue_migrate_probe_latency_seconds_bucket{route=\"new\",le=\"0.05\"} 1",
            "queue_migrate_probe_latency_seconds_count{route=\"new\"} 1",
            "queue_migrate_probe_latency_seconds_sum{route=\"new\"} 0.03",
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
    }
}
