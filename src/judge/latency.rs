//! The latency form of the `judge` gate: "is new's p-quantile worse than old's by more than
//! `tolerance`?", asked of both sides' histogram buckets (Prometheus `_bucket` series: cumulative
//! counts per `le`, since the step began) and answered by the counts form's test on the
//! observations each side has beyond a boundary. Pure: no IO, no clock.
//!
//! At each look ([`slow_counts`]):
//! - `b` is old's p-quantile bucket boundary: the smallest `le` whose cumulative count reaches
//!   `quantile` of old's total (what `histogram_quantile` interpolates within);
//! - `T` is the smallest `le` at or above `(1 + tolerance) · b`;
//! - old's "slow" observations are those above `b`, new's those above `T`; each side's total is
//!   its `+Inf` bucket.
//!
//! Then [`super::weigh`] asks, with its tolerance at 0, whether new's share above `T` is higher
//! than old's share above `b`. Old's share above `b` is `1 - p_b`, where `p_b` is the level of
//! old's own quantile at `b`; new's share above `T` exceeds it exactly when new's
//! `p_b`-quantile is above `T ≥ (1 + tolerance) · b`: the question at the buckets' resolution.
//! The boundary is chosen once old has `min_events` observations (before that the judge is
//! still deciding), so that it has settled; the formulas and the guarantee are in
//! `docs/design.md`.

use super::{Config, Counts, Evidence};

/// A latency judge's settings besides [`Config`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Buckets {
    /// The quantile compared (`0.99`: p99), in (0, 1).
    pub quantile: f64,
    /// The histogram's finite bucket boundaries (`le`), ascending; `+Inf` follows them.
    pub le: Vec<f64>,
}

/// Both sides' slow and total counts at one look, and the boundaries they were counted at.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Slow {
    /// New's observations (`events`) and those above `slow_le` (`failures`).
    pub new: Counts,
    /// Old's observations and those above `quantile_le`.
    pub old: Counts,
    /// `b`: old's p-quantile bucket boundary.
    pub quantile_le: f64,
    /// `T`: the smallest `le` at or above `(1 + tolerance) · b` (when none is, nothing is
    /// weighed: [`Unweighed::NoBucketPast`]).
    pub slow_le: f64,
}

/// Why a look weighs nothing yet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unweighed {
    /// Old has fewer than `min_events` observations: its quantile has not settled.
    Settling { old_total: f64 },
    /// Old's p-quantile is above the highest finite `le`: the buckets cannot say where.
    AboveBuckets,
    /// No finite `le` is at or above `(1 + tolerance) · b`: a slower new route could not be
    /// seen, so the judge neither passes nor fails on these buckets.
    NoBucketPast { quantile_le: f64 },
}

/// The slow counts of both sides (`new` and `old`: cumulative counts at each of `b.le` then at
/// `+Inf`, since the step began), or why there are none yet. `fixed` holds the boundaries
/// `[b, T]` chosen at an earlier reading of the count: they are kept (every interval counts
/// beyond the same boundaries).
pub fn slow_counts(
    b: &Buckets,
    cfg: &Config,
    new: &[f64],
    old: &[f64],
    fixed: Option<[f64; 2]>,
) -> Result<Slow, Unweighed> {
    let total = |c: &[f64]| c.last().copied().unwrap_or(0.0);
    let (new_total, old_total) = (total(new), total(old));
    let at = |c: &[f64], i: usize| c.get(i).copied().unwrap_or(0.0);
    let index = |le: f64| b.le.iter().position(|x| *x == le);
    let q = match fixed.and_then(|[q, _]| index(q).map(|i| (i, q))) {
        Some(q) => q,
        None => {
            if old_total < cfg.min_events as f64 || old_total <= 0.0 {
                return Err(Unweighed::Settling { old_total });
            }
            b.le.iter()
                .enumerate()
                .find(|&(i, _)| at(old, i) >= b.quantile * old_total)
                .map(|(i, le)| (i, *le))
                .ok_or(Unweighed::AboveBuckets)?
        }
    };
    let limit = (1.0 + cfg.tolerance) * q.1;
    let slow = match fixed.and_then(|[_, t]| index(t).map(|i| (i, t))) {
        Some(s) => s,
        None => {
            b.le.iter()
                .enumerate()
                .find(|&(_, le)| *le >= limit)
                .map(|(i, le)| (i, *le))
                .ok_or(Unweighed::NoBucketPast { quantile_le: q.1 })?
        }
    };
    // Negative counts are kept as read: the ledger holds on a count that went down.
    Ok(Slow {
        new: Counts {
            events: new_total,
            failures: new_total - at(new, slow.0),
        },
        old: Counts {
            events: old_total,
            failures: old_total - at(old, q.0),
        },
        quantile_le: q.1,
        slow_le: slow.1,
    })
}

/// The counts form's settings for the slow counts: its tolerance at 0 (the latency tolerance is
/// in the boundary `T`).
pub fn counts_config(cfg: &Config) -> Config {
    Config {
        tolerance: 0.0,
        ..*cfg
    }
}

/// The evidence of a latency look in words.
pub fn describe(b: &Buckets, cfg: &Config, slow: &Slow, e: &Evidence) -> String {
    let share = |c: &Counts| {
        c.rate()
            .map_or("-".to_string(), |r| format!("{:.3}%", r * 100.0))
    };
    format!(
        "p{} : old {}/{} above le {} ({}), new {}/{} above le {} ({}, tolerance {:.2}); worse \
         e-value {} (peak {}), not-worse e-value {}, boundary {}",
        b.quantile * 100.0,
        slow.old.failures.round(),
        slow.old.events.round(),
        slow.quantile_le,
        share(&slow.old),
        slow.new.failures.round(),
        slow.new.events.round(),
        slow.slow_le,
        share(&slow.new),
        1.0 + cfg.tolerance,
        super::short(e.fail_e),
        super::short(e.fail_peak),
        super::short(e.pass_e),
        super::short(e.boundary)
    )
}

/// Why a look weighed nothing, in words.
pub fn describe_unweighed(b: &Buckets, cfg: &Config, why: Unweighed) -> String {
    match why {
        Unweighed::Settling { old_total } => format!(
            "p{}: old has {} of the {} observations its quantile needs to settle",
            b.quantile * 100.0,
            old_total.round(),
            cfg.min_events
        ),
        Unweighed::AboveBuckets => format!(
            "p{}: old's quantile is above the highest finite bucket ({}): the buckets cannot say \
             where",
            b.quantile * 100.0,
            b.le.last().copied().unwrap_or(f64::NAN)
        ),
        Unweighed::NoBucketPast { quantile_le } => format!(
            "p{}: old's quantile is in the bucket le {quantile_le}, and no bucket reaches {} \
             ({:.2} times it): a slower new route could not be seen, so nothing is weighed \
             (add a bucket boundary above it)",
            b.quantile * 100.0,
            (1.0 + cfg.tolerance) * quantile_le,
            1.0 + cfg.tolerance
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn cfg() -> Config {
        Config {
            tolerance: 0.2,
            alpha: 0.01,
            alpha_pass: 0.01,
            confidence: None,
            min_events: 100,
            min_failures: 0,
            max_duration: Duration::from_secs(3600),
        }
    }

    fn buckets() -> Buckets {
        Buckets {
            quantile: 0.9,
            le: vec![0.1, 0.2, 0.25, 0.5, 1.0],
        }
    }

    #[test]
    fn the_boundaries_are_olds_quantile_bucket_and_the_next_past_the_tolerance() {
        // Old: 1000 observations, 950 at or below 0.2 (p90 in the 0.2 bucket).
        let old = [500.0, 950.0, 980.0, 995.0, 1000.0, 1000.0];
        let new = [400.0, 800.0, 900.0, 990.0, 1000.0, 1000.0];
        let s = slow_counts(&buckets(), &cfg(), &new, &old, None).expect("weighed");
        assert_eq!(s.quantile_le, 0.2);
        // 1.2 × 0.2 = 0.24: the 0.25 bucket.
        assert_eq!(s.slow_le, 0.25);
        assert_eq!((s.old.events, s.old.failures), (1000.0, 50.0));
        assert_eq!((s.new.events, s.new.failures), (1000.0, 100.0));
    }

    #[test]
    fn no_weighing_before_old_settles_or_above_the_buckets() {
        let few = [5.0, 9.0, 10.0, 10.0, 10.0, 10.0];
        assert_eq!(
            slow_counts(&buckets(), &cfg(), &few, &few, None),
            Err(Unweighed::Settling { old_total: 10.0 })
        );
        let slow = [0.0, 0.0, 0.0, 0.0, 10.0, 1000.0];
        assert_eq!(
            slow_counts(&buckets(), &cfg(), &slow, &slow, None),
            Err(Unweighed::AboveBuckets)
        );
    }

    #[test]
    fn old_p99_in_the_top_finite_bucket_weighs_nothing_however_slow_new_is() {
        // Old's p90 in the top finite bucket (1.0): no bucket reaches 1.2. Every new
        // observation above it: on today's main this read as "new has 0 slow" and passed.
        let old = [0.0, 0.0, 0.0, 0.0, 950.0, 1000.0];
        let new = [0.0, 0.0, 0.0, 0.0, 0.0, 1000.0];
        assert_eq!(
            slow_counts(&buckets(), &cfg(), &new, &old, None),
            Err(Unweighed::NoBucketPast { quantile_le: 1.0 })
        );
        let said = describe_unweighed(
            &buckets(),
            &cfg(),
            Unweighed::NoBucketPast { quantile_le: 1.0 },
        );
        assert!(said.contains("could not be seen"), "{said}");
    }

    #[test]
    fn fixed_boundaries_are_kept_whatever_olds_quantile_reads_later() {
        let old = [500.0, 950.0, 980.0, 995.0, 1000.0, 1000.0];
        let new = [400.0, 800.0, 900.0, 990.0, 1000.0, 1000.0];
        let s = slow_counts(&buckets(), &cfg(), &new, &old, Some([0.1, 0.25])).expect("weighed");
        assert_eq!((s.quantile_le, s.slow_le), (0.1, 0.25));
        assert_eq!((s.old.failures, s.new.failures), (500.0, 100.0));
    }
}
