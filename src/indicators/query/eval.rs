//! Evaluating a scrape query over the history of its samples.

use std::time::Duration;

use crate::indicators::cause::NoDataCause;
use crate::indicators::history::History;
use crate::indicators::selector::Selector;

use super::ast::{Aggregation, Operand, Query, RangeFunction, STALENESS, Source, window_text};

/// A usable value: finite, with the number of stored points it rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub value: f64,
    /// How many points the value rests on (series for an instant selector, points used
    /// for rate/increase; both sides added for a division).
    pub samples: u32,
}

/// Why a query has no value now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no data: {reason}")]
pub struct NoData {
    pub reason: String,
    /// Which kind of no data: no series, too few samples, not a number, a stale scrape.
    pub cause: NoDataCause,
}

fn no_data(cause: NoDataCause, reason: impl Into<String>) -> NoData {
    NoData {
        reason: reason.into(),
        cause,
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn check_finite(value: f64) -> Result<f64, NoData> {
    if value.is_nan() {
        Err(no_data(NoDataCause::Unusable, "NaN"))
    } else if value.is_infinite() {
        Err(no_data(
            NoDataCause::Unusable,
            format!(
                "not a finite number ({})",
                if value > 0.0 { "+Inf" } else { "-Inf" }
            ),
        ))
    } else {
        Ok(value)
    }
}

impl Query {
    /// Evaluate at `now_ms` over the history. Points after `now_ms` are ignored. The
    /// whole query is no data when the newest scrape at or before `now_ms` is more than
    /// [`STALENESS`] old.
    pub fn evaluate(&self, history: &History, now_ms: i64) -> Result<Reading, NoData> {
        let Some((latest, latest_ms)) = history.latest_scrape(now_ms) else {
            return Err(no_data(
                NoDataCause::TooFewSamples,
                "no scrape recorded yet",
            ));
        };
        let age_ms = now_ms.saturating_sub(latest_ms);
        if age_ms > crate::time::millis(STALENESS) {
            return Err(no_data(
                NoDataCause::SourceDown,
                format!("stale: last scrape {} s ago", age_ms / 1000),
            ));
        }
        let a = self.numerator.evaluate(history, latest, now_ms)?;
        let Some(den) = &self.denominator else {
            return Ok(a);
        };
        let b = den.evaluate(history, latest, now_ms)?;
        if b.value == 0.0 {
            return Err(no_data(NoDataCause::Unusable, "division by zero"));
        }
        Ok(Reading {
            value: check_finite(a.value / b.value)?,
            samples: a.samples.saturating_add(b.samples),
        })
    }
}

impl Operand {
    /// Per-series values, then the aggregation over them.
    /// `latest` is the index of the newest scrape at or before `now_ms`.
    fn evaluate(&self, history: &History, latest: usize, now_ms: i64) -> Result<Reading, NoData> {
        let (values, samples) = match &self.source {
            Source::Instant(sel) => {
                let values: Vec<f64> = history
                    .series()
                    .filter(|s| sel.matches_labels(s.metric(), s.labels()))
                    .filter_map(|s| s.value(latest))
                    .collect();
                if values.is_empty() {
                    return Err(no_data(
                        NoDataCause::Empty,
                        format!("no series matching `{sel}` in the latest scrape"),
                    ));
                }
                let n = values.len();
                (values, n)
            }
            Source::Range {
                function,
                selector,
                window,
            } => range_values(history, *function, selector, *window, now_ms)?,
        };
        let value = aggregate(self.aggregation, &values);
        Ok(Reading {
            value: check_finite(value)?,
            samples: count(samples),
        })
    }
}

/// NaN-propagating aggregation over a non-empty list.
fn aggregate(aggregation: Aggregation, values: &[f64]) -> f64 {
    if values.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    match aggregation {
        Aggregation::Sum => values.iter().sum(),
        Aggregation::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        Aggregation::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// Per-series rate or increase over `(now_ms - window, now_ms]`, and the points used.
fn range_values(
    history: &History,
    function: RangeFunction,
    selector: &Selector,
    window: Duration,
    now_ms: i64,
) -> Result<(Vec<f64>, usize), NoData> {
    let from = now_ms.saturating_sub(crate::time::millis(window));
    let mut values = Vec::new();
    let mut used = 0usize;
    let mut most_points = 0usize;
    let mut any_series = false;
    let scrapes = history.scrapes_between(from, now_ms);
    for s in history
        .series()
        .filter(|s| selector.matches_labels(s.metric(), s.labels()))
    {
        let pts: Vec<(i64, f64)> = history.points_of(s, scrapes.clone()).collect();
        if pts.is_empty() {
            continue;
        }
        any_series = true;
        most_points = most_points.max(pts.len());
        let (Some(first), Some(last)) = (pts.first(), pts.last()) else {
            continue;
        };
        if pts.len() < 2 {
            continue;
        }
        let mut increase = 0.0;
        for pair in pts.windows(2) {
            let (prev, cur) = (pair[0].1, pair[1].1);
            increase += if cur < prev { cur } else { cur - prev };
        }
        if pts.iter().any(|p| p.1.is_nan()) {
            increase = f64::NAN;
        }
        used += pts.len();
        values.push(match function {
            RangeFunction::Increase => increase,
            // Distinct times, so the span is positive.
            RangeFunction::Rate => increase / (last.0.saturating_sub(first.0) as f64 / 1000.0),
        });
    }
    if !any_series {
        return Err(no_data(
            NoDataCause::Empty,
            format!(
                "no series matching `{selector}` in the last {}",
                window_text(window)
            ),
        ));
    }
    if values.is_empty() {
        return Err(no_data(
            NoDataCause::TooFewSamples,
            format!(
                "not enough samples (have {most_points}, need 2 within {})",
                window_text(window)
            ),
        ));
    }
    Ok((values, used))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indicators::exposition::Sample;
    use crate::indicators::query::tests::{q, sample};
    use proptest::prelude::*;

    /// Record scrapes `(at_ms, samples)` keeping what the query needs.
    fn history_for(query: &Query, scrapes: &[(i64, Vec<Sample>)]) -> History {
        let mut h = History::new();
        for (at, samples) in scrapes {
            h.record(*at, samples, &query.selectors());
        }
        h
    }

    const MIN: i64 = 60_000;

    /// Issue 32: OpenTelemetry exporters name metrics and labels with dots; PromQL 3 selects
    /// them quoted, the metric name first inside the braces.
    #[test]
    fn quoted_utf8_names_select_as_promql_3_writes_them() {
        let cases = [
            (r#"{"http.server.duration"}"#, r#"{"http.server.duration"}"#),
            (
                r#"{ "http.server.duration" , "service.name" = "x" , }"#,
                r#"{"http.server.duration","service.name"="x"}"#,
            ),
            (
                r#"http_requests_total{"service.name"!="x",code="200"}"#,
                r#"http_requests_total{"service.name"!="x",code="200"}"#,
            ),
            // A legacy name quoted reads as the name itself.
            (r#"{"up", job="a"}"#, r#"up{job="a"}"#),
            (
                r#"sum(rate({"http.requests"}[5m]))"#,
                r#"sum(rate({"http.requests"}[5m]))"#,
            ),
            (r#"max({"a.b"})"#, r#"max({"a.b"})"#),
            (
                r#"increase({"a\"b"}[1m]) / {"c.d"}"#,
                r#"increase({"a\"b"}[1m]) / {"c.d"}"#,
            ),
        ];
        for (input, canonical) in cases {
            let parsed = q(input);
            assert_eq!(parsed.to_string(), canonical, "rendering of `{input}`");
            assert_eq!(q(canonical), parsed, "re-parse of `{canonical}`");
        }
        let query = q(r#"{"http.server.duration", "service.name"="x"}"#);
        let sel = query.selectors()[0];
        assert_eq!(sel.metric, "http.server.duration");
        assert!(sel.matches(&sample(
            "http.server.duration",
            &[("service.name", "x")],
            1.0
        )));
        assert!(!sel.matches(&sample(
            "http.server.duration",
            &[("service.name", "y")],
            1.0
        )));
        assert!(!sel.matches(&sample(
            "http_server_duration",
            &[("service.name", "x")],
            1.0
        )));
        // Evaluated over a history of such series.
        let scrapes = vec![(
            MIN,
            vec![
                sample("http.server.duration", &[("service.name", "x")], 2.0),
                sample("http.server.duration", &[("service.name", "y")], 5.0),
            ],
        )];
        let h = history_for(&query, &scrapes);
        assert_eq!(query.evaluate(&h, MIN).map(|r| r.value), Ok(2.0));
    }

    /// Issue 44: no data says which kind, so a gate on a source that answers is never called
    /// blind: a window with one sample is too few samples, no series is empty, a division by
    /// zero is no usable number, a scrape gone stale is the source down.
    #[test]
    fn no_data_says_its_cause() {
        let one = |at: i64| (at, vec![sample("c_total", &[], 1.0)]);
        let cases = [
            (
                "increase(c_total[1h])",
                vec![one(MIN)],
                MIN,
                NoDataCause::TooFewSamples,
            ),
            ("c_total", vec![], MIN, NoDataCause::TooFewSamples),
            ("other_total", vec![one(MIN)], MIN, NoDataCause::Empty),
            (
                "rate(other_total[5m])",
                vec![one(MIN)],
                MIN,
                NoDataCause::Empty,
            ),
            (
                "c_total / zero",
                vec![(
                    MIN,
                    vec![sample("c_total", &[], 1.0), sample("zero", &[], 0.0)],
                )],
                MIN,
                NoDataCause::Unusable,
            ),
            ("c_total", vec![one(MIN)], 60 * MIN, NoDataCause::SourceDown),
        ];
        for (text, scrapes, now, cause) in cases {
            let query = q(text);
            let got = query.evaluate(&history_for(&query, &scrapes), now);
            assert_eq!(got.map_err(|e| e.cause), Err(cause), "{text}");
        }
    }

    /// One evaluation case: query, scrapes, evaluation time, expected outcome.
    struct Case {
        name: &'static str,
        query: &'static str,
        scrapes: Vec<(i64, Vec<Sample>)>,
        now: i64,
        expect: Result<(f64, u32), &'static str>,
    }

    fn check(cases: Vec<Case>) {
        for c in cases {
            let query = q(c.query);
            let h = history_for(&query, &c.scrapes);
            let got = query.evaluate(&h, c.now);
            match (&c.expect, &got) {
                (Ok((v, n)), Ok(r)) => {
                    assert!(
                        (r.value - v).abs() <= 1e-9 * v.abs().max(1.0),
                        "{}: value {} != {v}",
                        c.name,
                        r.value
                    );
                    assert_eq!(r.samples, *n, "{}: samples", c.name);
                }
                (Err(reason), Err(e)) => assert_eq!(&e.reason, reason, "{}", c.name),
                _ => panic!("{}: expected {:?}, got {got:?}", c.name, c.expect),
            }
        }
    }

    #[test]
    fn evaluate_instant_queries() {
        let depth = |at: i64, vals: &[(&str, f64)]| {
            (
                at,
                vals.iter()
                    .map(|(q, v)| sample("depth", &[("queue", q)], *v))
                    .chain([sample("other", &[], 99.0)])
                    .collect::<Vec<_>>(),
            )
        };
        check(vec![
            Case {
                name: "sum over series",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", 2.0), ("c", 4.0)])],
                now: 1000,
                expect: Ok((7.0, 3)),
            },
            Case {
                name: "explicit sum equals bare",
                query: "sum(depth)",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", 2.0)])],
                now: 0,
                expect: Ok((3.0, 2)),
            },
            Case {
                name: "matchers filter",
                query: "depth{queue!=\"a\"}",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", 2.0), ("c", 4.0)])],
                now: 0,
                expect: Ok((6.0, 2)),
            },
            Case {
                name: "min",
                query: "min(depth)",
                scrapes: vec![depth(0, &[("a", 5.0), ("b", -2.0), ("c", 4.0)])],
                now: 0,
                expect: Ok((-2.0, 3)),
            },
            Case {
                name: "max",
                query: "max(depth)",
                scrapes: vec![depth(0, &[("a", 5.0), ("b", -2.0), ("c", 4.0)])],
                now: 0,
                expect: Ok((5.0, 3)),
            },
            Case {
                name: "latest scrape wins",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)]), depth(MIN, &[("a", 10.0)])],
                now: MIN,
                expect: Ok((10.0, 1)),
            },
            Case {
                name: "scrapes after now are ignored",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)]), depth(MIN, &[("a", 10.0)])],
                now: MIN - 1,
                expect: Ok((1.0, 1)),
            },
            Case {
                name: "vanished series not summed",
                query: "depth",
                scrapes: vec![
                    depth(0, &[("a", 1.0), ("b", 100.0)]),
                    depth(MIN, &[("a", 2.0)]),
                ],
                now: MIN,
                expect: Ok((2.0, 1)),
            },
            Case {
                name: "all series vanished",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)]), depth(MIN, &[])],
                now: MIN,
                expect: Err("no series matching `depth` in the latest scrape"),
            },
            Case {
                name: "no matching series is no data, not 0",
                query: "depth{queue=\"zzz\"}",
                scrapes: vec![depth(0, &[("a", 1.0)])],
                now: 0,
                expect: Err("no series matching `depth{queue=\"zzz\"}` in the latest scrape"),
            },
            Case {
                name: "empty history",
                query: "depth",
                scrapes: vec![],
                now: 0,
                expect: Err("no scrape recorded yet"),
            },
            Case {
                name: "stale",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)])],
                now: 5 * MIN + 1000,
                expect: Err("stale: last scrape 301 s ago"),
            },
            Case {
                name: "exactly 5 minutes is not stale",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)])],
                now: 5 * MIN,
                expect: Ok((1.0, 1)),
            },
            Case {
                name: "NaN value",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", f64::NAN)])],
                now: 0,
                expect: Err("NaN"),
            },
            Case {
                name: "NaN in min is not skipped",
                query: "min(depth)",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", f64::NAN)])],
                now: 0,
                expect: Err("NaN"),
            },
            Case {
                name: "infinite value",
                query: "max(depth)",
                scrapes: vec![depth(0, &[("a", f64::INFINITY)])],
                now: 0,
                expect: Err("not a finite number (+Inf)"),
            },
        ]);
    }

    fn counter(at: i64, value: f64) -> (i64, Vec<Sample>) {
        (at, vec![sample("errors_total", &[("pod", "p1")], value)])
    }

    #[test]
    fn evaluate_range_queries() {
        check(vec![
            Case {
                name: "increase of a monotone counter",
                query: "increase(errors_total[5m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 20.0), counter(2 * MIN, 35.0)],
                now: 2 * MIN,
                expect: Ok((25.0, 3)),
            },
            Case {
                name: "rate of a monotone counter",
                query: "rate(errors_total[5m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 20.0), counter(2 * MIN, 34.0)],
                now: 2 * MIN,
                expect: Ok((24.0 / 120.0, 3)),
            },
            Case {
                name: "rate across a counter reset",
                query: "rate(errors_total[5m])",
                scrapes: vec![
                    counter(0, 10.0),
                    counter(MIN, 20.0),
                    counter(2 * MIN, 5.0),
                    counter(3 * MIN, 15.0),
                ],
                now: 3 * MIN,
                // 10 + 5 (reset: the new value) + 10 over 180 s
                expect: Ok((25.0 / 180.0, 4)),
            },
            Case {
                name: "increase across a counter reset",
                query: "increase(errors_total[5m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 3.0)],
                now: MIN,
                expect: Ok((3.0, 2)),
            },
            Case {
                name: "window excludes old points (left-open)",
                query: "increase(errors_total[2m])",
                scrapes: vec![
                    counter(0, 0.0),
                    counter(MIN, 100.0),
                    counter(2 * MIN, 110.0),
                    counter(3 * MIN, 130.0),
                ],
                now: 3 * MIN,
                // the point at exactly now - 2m is outside: 110 -> 130
                expect: Ok((20.0, 2)),
            },
            Case {
                name: "rate summed over series",
                query: "sum(rate(errors_total[5m]))",
                scrapes: vec![
                    (
                        0,
                        vec![
                            sample("errors_total", &[("pod", "a")], 0.0),
                            sample("errors_total", &[("pod", "b")], 100.0),
                        ],
                    ),
                    (
                        MIN,
                        vec![
                            sample("errors_total", &[("pod", "a")], 60.0),
                            sample("errors_total", &[("pod", "b")], 220.0),
                        ],
                    ),
                ],
                now: MIN,
                expect: Ok((1.0 + 2.0, 4)),
            },
            Case {
                name: "max of per-series rates",
                query: "max(rate(errors_total[5m]))",
                scrapes: vec![
                    (
                        0,
                        vec![
                            sample("errors_total", &[("pod", "a")], 0.0),
                            sample("errors_total", &[("pod", "b")], 100.0),
                        ],
                    ),
                    (
                        MIN,
                        vec![
                            sample("errors_total", &[("pod", "a")], 60.0),
                            sample("errors_total", &[("pod", "b")], 220.0),
                        ],
                    ),
                ],
                now: MIN,
                expect: Ok((2.0, 4)),
            },
            Case {
                name: "series with one point in window is skipped",
                query: "increase(errors_total[5m])",
                scrapes: vec![
                    (0, vec![sample("errors_total", &[("pod", "a")], 1.0)]),
                    (
                        MIN,
                        vec![
                            sample("errors_total", &[("pod", "a")], 4.0),
                            sample("errors_total", &[("pod", "new")], 50.0),
                        ],
                    ),
                ],
                now: MIN,
                expect: Ok((3.0, 2)),
            },
            Case {
                name: "not enough samples",
                query: "rate(errors_total[5m])",
                scrapes: vec![counter(0, 10.0)],
                now: MIN,
                expect: Err("not enough samples (have 1, need 2 within 5m)"),
            },
            Case {
                name: "not enough samples inside the window",
                query: "rate(errors_total[1m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 12.0), counter(2 * MIN, 14.0)],
                now: 2 * MIN + 30_000,
                expect: Err("not enough samples (have 1, need 2 within 1m)"),
            },
            Case {
                name: "range over no series",
                query: "rate(missing_total[5m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 12.0)],
                now: MIN,
                expect: Err("no series matching `missing_total` in the last 5m"),
            },
            Case {
                name: "NaN in a counter",
                query: "increase(errors_total[5m])",
                scrapes: vec![
                    counter(0, 10.0),
                    counter(MIN, f64::NAN),
                    counter(2 * MIN, 12.0),
                ],
                now: 2 * MIN,
                expect: Err("NaN"),
            },
            Case {
                name: "stale range",
                query: "rate(errors_total[1h])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 12.0)],
                now: 7 * MIN,
                expect: Err("stale: last scrape 360 s ago"),
            },
        ]);
    }

    #[test]
    fn evaluate_division() {
        let scrape = |at: i64, err: f64, req: f64| {
            (
                at,
                vec![
                    sample("errors_total", &[], err),
                    sample("requests_total", &[], req),
                    sample("ready", &[("pod", "a")], 1.0),
                    sample("ready", &[("pod", "b")], 0.0),
                    sample("pods", &[], 4.0),
                ],
            )
        };
        check(vec![
            Case {
                name: "ratio of rates",
                query: "rate(errors_total[5m]) / rate(requests_total[5m])",
                scrapes: vec![scrape(0, 0.0, 0.0), scrape(MIN, 5.0, 100.0)],
                now: MIN,
                expect: Ok((0.05, 4)),
            },
            Case {
                name: "ratio of instants",
                query: "(sum(ready)) / pods",
                scrapes: vec![scrape(0, 0.0, 0.0)],
                now: 0,
                expect: Ok((0.25, 3)),
            },
            Case {
                name: "division by zero",
                query: "increase(errors_total[5m]) / increase(requests_total[5m])",
                scrapes: vec![scrape(0, 1.0, 7.0), scrape(MIN, 3.0, 7.0)],
                now: MIN,
                expect: Err("division by zero"),
            },
            Case {
                name: "min over a zero is a zero denominator",
                query: "pods / min(ready)",
                scrapes: vec![scrape(0, 0.0, 0.0)],
                now: 0,
                expect: Err("division by zero"),
            },
            Case {
                name: "numerator no data",
                query: "absent_metric / pods",
                scrapes: vec![scrape(0, 0.0, 0.0)],
                now: 0,
                expect: Err("no series matching `absent_metric` in the latest scrape"),
            },
            Case {
                name: "denominator no data",
                query: "pods / rate(requests_total[5m])",
                scrapes: vec![scrape(0, 0.0, 0.0)],
                now: 0,
                expect: Err("not enough samples (have 1, need 2 within 5m)"),
            },
            Case {
                name: "overflowing quotient",
                query: "pods / ready{pod=\"a\"}",
                scrapes: vec![(
                    0,
                    vec![
                        sample("pods", &[], f64::MAX),
                        sample("ready", &[("pod", "a")], 0.5),
                    ],
                )],
                now: 0,
                expect: Err("not a finite number (+Inf)"),
            },
        ]);
    }

    proptest! {
        #[test]
        fn rate_of_monotone_counter_is_slope(
            start in 0.0f64..1e9,
            steps in prop::collection::vec((1i64..120_000, 0.0f64..1e6), 1..30),
        ) {
            let query = q("rate(c_total[7d])");
            let mut h = History::new();
            let (mut t, mut v) = (1_000_000i64, start);
            h.record(t, &[sample("c_total", &[], v)], &query.selectors());
            let first = (t, v);
            for (dt, dv) in &steps {
                t += dt;
                v += dv;
                h.record(t, &[sample("c_total", &[], v)], &query.selectors());
            }
            let expected = (v - first.1) / ((t - first.0) as f64 / 1000.0);
            let got = query.evaluate(&h, t);
            prop_assert!(got.is_ok(), "{:?}", got);
            if let Ok(r) = got {
                prop_assert!(
                    (r.value - expected).abs() <= 1e-6 * expected.abs().max(1.0),
                    "rate {} != {}", r.value, expected
                );
                prop_assert_eq!(r.samples as usize, steps.len() + 1);
            }
        }
    }
}
