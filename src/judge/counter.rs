//! A judge's counts read from the raw counters underneath its queries, not through PromQL's
//! `increase()`: which queries can be read that way ([`recognise`]), and the count since a
//! judge's counting start from each series' raw samples, counter resets handled per series
//! before summing ([`increase_since`]). Pure: no IO, no clock.
//!
//! Why: Prometheus's `increase(x[$step])` extrapolates each series' increase to the window's
//! edges, so two readings a scrape apart can disagree by a fraction of a scrape's traffic, a
//! count can go down between readings, and a reading taken between two scrapes can count
//! traffic that was never seen. The judge weighs the *differences* of its counts from one
//! reading to the next (`docs/design.md`, "The judge"): they must be exact increments of the
//! counters, and an interval without a new sample must weigh nothing (it is merged into the next
//! one by the ledger), never read as an interval of zero traffic.

use crate::indicators::query::parse_query;

/// What `$step` is read as while a query is recognised: a window no plan writes, so that a
/// query whose window is not `[$step]` is told apart.
const STEP_SENTINEL: &str = "7777777s";
const STEP_SENTINEL_SECS: u64 = 7_777_777;

/// What a judge's query counts: the increase of the counter series `selector` selects since
/// the judge's counting start, summed over them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCounter {
    /// The series selector, as PromQL text (`handled_total{route="new"}`).
    pub selector: String,
}

/// The counter underneath a judge query of the form `sum(increase(SEL[$step]))` (or
/// `increase(SEL[$step])`, summed over series alike), or why the judge cannot read it from
/// the raw counters (the reason says what to write instead).
///
/// # Errors
/// Any other shape: no `$step`, a window other than `[$step]`, `rate`, `min`/`max`, a ratio,
/// a bare selector, or what the query parser refuses (`by (...)`, `offset`, arithmetic).
pub fn recognise(query: &str) -> Result<RawCounter, String> {
    if !query.contains("$step") {
        return Err(
            "the judge counts since the step began: write `sum(increase(x[$step]))` with the \
             counter `x` (no `$step` here)"
                .into(),
        );
    }
    let parsed = parse_query(&query.replace("$step", STEP_SENTINEL)).map_err(|e| {
        format!(
            "the judge reads `sum(increase(x[$step]))` from the raw counters of `x`, and this \
             is not of that form: {e}"
        )
    })?;
    let (selector, window) = parsed
        .summed_increase()
        .map_err(|why| why.describe().to_string())?;
    if window.as_secs() != STEP_SENTINEL_SECS || window.subsec_nanos() != 0 {
        return Err(
            "the window must be `[$step]`: the judge counts since the step began, not over a \
             fixed window"
                .into(),
        );
    }
    Ok(RawCounter {
        selector: selector.to_string(),
    })
}

/// What [`increase_since`] counted.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Counted {
    /// The increase since the counting start, summed over series.
    pub total: f64,
    /// Series read, and counter resets found in them.
    pub series: usize,
    pub resets: u32,
    /// Series born after the counting start (counted from 0).
    pub born: usize,
}

/// Why raw samples are not a counter's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotACounter {
    #[error("series {series} has the value {value} at {at_ms} ms: a counter is never negative")]
    Negative {
        series: usize,
        value: f64,
        at_ms: i64,
    },
    #[error("series {series} has a value that is not a finite number at {at_ms} ms")]
    NotFinite { series: usize, at_ms: i64 },
}

/// The increase of counter series since `from_ms` through `now_ms`, from their raw samples
/// (`(at_ms, value)` each, as a PromQL range selector `x[R]` gives them, `R` reaching at least
/// a scrape interval before `from_ms`).
///
/// Per series: from its last sample at or before `from_ms` (its baseline) through its last
/// sample at or before `now_ms`, each step up counted, and each drop a counter reset whose new
/// value is the increase since the reset (as PromQL's `increase` reads a reset, without its
/// extrapolation to the window's edges). A series with no sample at or before `from_ms` was born
/// in the count and counts from 0. Then the series are summed.
///
/// # Guarantees
/// - Exact increments: the result is a sum of sample differences, never extrapolated, so two
///   readings between which no new sample arrived give the same count (the ledger merges such
///   an interval into the next), and a later reading never counts less than an earlier one of
///   the same samples.
/// - Never negative.
///
/// # Errors
/// A negative or non-finite sample: not a counter.
pub fn increase_since(
    series: &[Vec<(i64, f64)>],
    from_ms: i64,
    now_ms: i64,
) -> Result<Counted, NotACounter> {
    let mut out = Counted::default();
    for (index, samples) in series.iter().enumerate() {
        let mut samples: Vec<(i64, f64)> = samples
            .iter()
            .copied()
            .filter(|(at, _)| *at <= now_ms)
            .collect();
        samples.sort_by_key(|(at, _)| *at);
        counter_samples(index, &samples)?;
        let baseline = samples.iter().rposition(|(at, _)| *at <= from_ms);
        let (mut last, rest) = match baseline {
            Some(i) => (samples[i].1, &samples[i + 1..]),
            None => {
                if !samples.is_empty() {
                    out.born += 1;
                }
                (0.0, &samples[..])
            }
        };
        out.series += 1;
        for (_, value) in rest {
            if *value >= last {
                out.total += value - last;
            } else {
                out.resets = out.resets.saturating_add(1);
                out.total += value;
            }
            last = *value;
        }
    }
    Ok(out)
}

/// Whether every sample of series `index` can be a counter's: finite and not negative.
fn counter_samples(index: usize, samples: &[(i64, f64)]) -> Result<(), NotACounter> {
    for (at_ms, value) in samples {
        if !value.is_finite() {
            return Err(NotACounter::NotFinite {
                series: index,
                at_ms: *at_ms,
            });
        }
        if *value < 0.0 {
            return Err(NotACounter::Negative {
                series: index,
                value: *value,
                at_ms: *at_ms,
            });
        }
    }
    Ok(())
}

/// Each interval's increase of counter series read at evaluation instants (a `query_range`
/// of the raw selector: each series' latest sample at each of `times`): for `times[i]` to
/// `times[i + 1]`, the sum over series of the rise (a drop: a restart, its new value), a series
/// absent at `times[i]` and present at `times[i + 1]` counted from 0. `times.len() - 1` values.
///
/// # Guarantees
/// Exact increments of the samples read: never extrapolated, never negative; an interval with no
/// new sample in any series is 0.
///
/// # Errors
/// A negative or non-finite sample: not a counter.
pub fn interval_increments(
    series: &[Vec<(i64, f64)>],
    times: &[i64],
) -> Result<Vec<f64>, NotACounter> {
    let mut out = vec![0.0; times.len().saturating_sub(1)];
    for (index, samples) in series.iter().enumerate() {
        let by_time: std::collections::HashMap<i64, f64> = samples.iter().copied().collect();
        counter_samples(index, samples)?;
        for (i, pair) in times.windows(2).enumerate() {
            let (before, now) = (by_time.get(&pair[0]), by_time.get(&pair[1]));
            out[i] += match (before, now) {
                (_, None) => 0.0,
                (None, Some(now)) => *now,
                (Some(before), Some(now)) if now >= before => now - before,
                (Some(_), Some(now)) => *now,
            };
        }
    }
    Ok(out)
}

/// Counting spans up to this long are read sample by sample; longer ones at a resolution
/// that keeps each series to about [`LONG_SPAN_POINTS`] points (an answer's size bounded
/// whatever the step's length and the scrape interval).
pub const LONG_SPAN_MS: i64 = 6 * 3600 * 1000;

/// Points a series gives, at most about, when a long span is read at a resolution.
pub const LONG_SPAN_POINTS: i64 = 4_000;

/// The PromQL that gives the samples [`increase_since`] needs at `now_ms`: the range selector
/// `SEL[Ns]` reaching `lookback_ms` before `from_ms` (for each series' baseline); past
/// [`LONG_SPAN_MS`], the subquery `SEL[Ns:Rs]` (each series' latest sample every `R` seconds,
/// `R` the span over [`LONG_SPAN_POINTS`]).
///
/// # Guarantees
/// Up to [`LONG_SPAN_MS`] the samples are the raw ones: the count is exact. Past it, the
/// counters are read every `R`: a restart followed by growth past the old value within `R` is
/// not seen, and what a counter gained within `R` before `from_ms` may count.
pub fn samples_query(counter: &RawCounter, from_ms: i64, now_ms: i64, lookback_ms: i64) -> String {
    let counted = now_ms.saturating_sub(from_ms).max(0);
    let span = counted.saturating_add(lookback_ms.max(0));
    let secs = (span.saturating_add(999) / 1000).max(1);
    if counted <= LONG_SPAN_MS {
        return format!("{}[{secs}s]", counter.selector);
    }
    let resolution = u64::try_from(secs)
        .unwrap_or(1)
        .div_ceil(LONG_SPAN_POINTS.unsigned_abs());
    format!("{}[{secs}s:{}s]", counter.selector, resolution.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recogniser_reads_summed_increases_over_the_step_and_refuses_the_rest() {
        for (query, selector) in [
            (
                r#"sum(increase(handled_total{route="new"}[$step]))"#,
                r#"handled_total{route="new"}"#,
            ),
            (
                r#"increase(failed_total{route="old",result!="ok"}[$step])"#,
                r#"failed_total{route="old",result!="ok"}"#,
            ),
            (" sum ( increase ( x_total [ $step ] ) ) ", "x_total"),
            (
                r#"sum(increase(latency_seconds_bucket{route="new",le="+Inf"}[$step]))"#,
                r#"latency_seconds_bucket{route="new",le="+Inf"}"#,
            ),
        ] {
            assert_eq!(
                recognise(query).map(|c| c.selector),
                Ok(selector.to_string()),
                "{query}"
            );
        }
        for (query, why) in [
            ("judge_new_events", "no `$step`"),
            ("sum(increase(x_total[5m]))", "no `$step`"),
            ("sum(increase(x_total[$step])) + 1", "not of that form"),
            ("sum(rate(x_total[$step]))", "per second"),
            ("max(increase(x_total[$step]))", "one series"),
            ("sum(increase(a[$step])) / sum(increase(b[$step]))", "ratio"),
            ("sum(x_total) + 0 * $step", "not of that form"),
            (
                "sum by (route) (increase(x_total[$step]))",
                "not of that form",
            ),
            (
                "sum(increase(x_total[$step] offset 1m))",
                "not of that form",
            ),
        ] {
            let got = recognise(query);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(why)),
                "{query}: {got:?}"
            );
        }
        // A window that is not the step's is refused, even one that parses.
        let fixed = recognise("sum(increase(x_total[$step])) / sum(increase(y[1h]))");
        assert!(fixed.is_err());
    }

    #[test]
    fn a_reset_mid_interval_is_counted_per_series_before_summing() {
        // Series 0: 100 at the start, up to 130, reset to 5 (a restart), up to 25: 30 + 5 + 20.
        // Series 1: no reset, 1000 -> 1010. Summed before resets are handled, the drop of
        // series 0 would hide in series 1's growth: 130 + 1010 -> 5 + 1010 is only "down 125".
        let series = vec![
            vec![
                (0, 100.0),
                (15_000, 120.0),
                (30_000, 130.0),
                (45_000, 5.0),
                (60_000, 25.0),
            ],
            vec![(0, 1_000.0), (30_000, 1_005.0), (60_000, 1_010.0)],
        ];
        let c = increase_since(&series, 0, 60_000).expect("counters");
        assert_eq!(c.total, 30.0 + 5.0 + 20.0 + 10.0);
        assert_eq!((c.series, c.resets, c.born), (2, 1, 0));
        // Read mid-way, before the reset: only what was seen by then; never more later than the
        // samples say, never less than at an earlier reading.
        let before = increase_since(&series, 0, 40_000).expect("counters");
        assert_eq!(before.total, 30.0 + 5.0);
        assert!(before.total <= c.total);
        // A baseline before the counting start: samples at or before it do not count.
        let later = increase_since(&series, 15_000, 60_000).expect("counters");
        assert_eq!(later.total, 10.0 + 5.0 + 20.0 + 5.0 + 5.0);
    }

    #[test]
    fn a_series_born_in_the_count_counts_from_zero_and_no_new_sample_no_new_count() {
        let series = vec![vec![(20_000, 3.0), (35_000, 7.0)]];
        let c = increase_since(&series, 10_000, 40_000).expect("counter");
        assert_eq!((c.total, c.born), (7.0, 1));
        // Two readings between the same samples (a judge read faster than the scrape): the
        // same count, so the interval between them weighs nothing.
        let a = increase_since(&series, 10_000, 36_000).expect("counter");
        let b = increase_since(&series, 10_000, 49_000).expect("counter");
        assert_eq!(a, b);
    }

    #[test]
    fn negative_or_non_finite_samples_are_not_a_counter() {
        assert!(matches!(
            increase_since(&[vec![(0, 1.0), (1, -2.0)]], 0, 10),
            Err(NotACounter::Negative { .. })
        ));
        assert!(matches!(
            increase_since(&[vec![(0, f64::NAN)]], 0, 10),
            Err(NotACounter::NotFinite { .. })
        ));
    }

    #[test]
    fn interval_increments_handle_a_reset_per_series_and_count_no_new_sample_as_nothing() {
        let times = [0, 10, 20, 30, 40];
        let series = vec![
            // 100, 110, 4 (a restart), 4 (no new sample), 9.
            vec![(0, 100.0), (10, 110.0), (20, 4.0), (30, 4.0), (40, 9.0)],
            // Born at 20.
            vec![(20, 2.0), (30, 3.0), (40, 3.0)],
        ];
        let got = interval_increments(&series, &times).expect("counters");
        assert_eq!(got, vec![10.0, 4.0 + 2.0, 1.0, 5.0]);
        assert!(interval_increments(&[vec![(0, -1.0)]], &times).is_err());
        assert!(interval_increments(&[], &[0]).expect("nothing").is_empty());
    }

    #[test]
    fn the_samples_query_reaches_a_lookback_before_the_start() {
        let c = RawCounter {
            selector: "x_total{a=\"b\"}".into(),
        };
        assert_eq!(
            samples_query(&c, 10_000, 70_500, 300_000),
            "x_total{a=\"b\"}[361s]"
        );
        assert_eq!(samples_query(&c, 10_000, 10_000, 0), "x_total{a=\"b\"}[1s]");
        // Six hours counted: still sample by sample.
        assert_eq!(
            samples_query(&c, 0, LONG_SPAN_MS, 300_000),
            "x_total{a=\"b\"}[21900s]"
        );
        // Three days: every 65 s, 4,000 points a series at most.
        assert_eq!(
            samples_query(&c, 0, 3 * 86_400_000, 300_000),
            "x_total{a=\"b\"}[259500s:65s]"
        );
    }
}
