//! A `judge` gate's condition (`judge: { new, old, tolerance, confidence, min_events,
//! min_failures, max_duration }`, and `quantile` with `le` for the latency form): each side's queries (two
//! counts, or one `_bucket` query with `$le`), checked against the gate's source, and the test's
//! settings in range.

use std::time::Duration;

use serde_yaml::Value;

use super::cx::{Cx, Obj};
use super::sources::SourceKind;
use crate::judge::Config;
use crate::plan::model::{Check, JudgeCheck, JudgeForm, JudgeSide, LatencyJudge};

const JUDGE_FIELDS: &[&str] = &[
    "new",
    "old",
    "tolerance",
    "confidence",
    "min_events",
    "min_failures",
    "max_duration",
    "quantile",
    "le",
];
const SIDE_FIELDS: &[&str] = &["events", "failures", "buckets"];

/// The largest `tolerance`: new's failure rate up to 11 times old's.
const MAX_TOLERANCE: f64 = 10.0;
/// What a judge's bounds are before the plan's budget splits it (`super::budget`): 1%.
const DEFAULT_CONFIDENCE: f64 = 0.99;
/// Default `min_events` per side before a PASS.
const DEFAULT_MIN_EVENTS: u64 = 1_000;
/// Default `max_duration`.
const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(3600);

/// What a query of a judge reads the step's age as when a scrape source's query is checked.
const STEP_EXAMPLE: &str = "1m";

impl Cx<'_> {
    /// `judge:` at `path` on the gate's `source`.
    pub(super) fn judge_condition(
        &mut self,
        v: &Value,
        path: &str,
        source: Option<&(String, Option<SourceKind>)>,
    ) -> Option<Check> {
        let o = Obj::new(self, v, path, "judge", JUDGE_FIELDS)?;
        let latency = o.get_raw("quantile").is_some();
        let form = if latency {
            self.latency_form(&o, source)
        } else {
            if let Some((_, p)) = o.get_raw("le") {
                self.error(
                    &p,
                    "`le` is the latency form's: give `quantile` too, and `buckets` on each side",
                );
            }
            let new = o
                .req(
                    self,
                    "new",
                    "the new route's `events` and `failures` queries",
                )
                .and_then(|(v, p)| self.judge_side(v, &p, source));
            let old = o
                .req(
                    self,
                    "old",
                    "the old route's `events` and `failures` queries",
                )
                .and_then(|(v, p)| self.judge_side(v, &p, source));
            new.zip(old)
                .map(|(new, old)| JudgeForm::Counts { new, old })
        };
        let tolerance = o
            .req(
                self,
                "tolerance",
                "how much worse new's failure rate may be, e.g. 0.2 for 20%",
            )
            .and_then(|(v, p)| {
                let t = self.number(v, &p)?;
                if (0.0..=MAX_TOLERANCE).contains(&t) {
                    Some(t)
                } else {
                    self.error(
                        &p,
                        format!(
                            "tolerance must be between 0 and {MAX_TOLERANCE} (0.2: new's {} \
                             may be up to 1.2 times old's); got {t}",
                            if latency { "quantile" } else { "failure rate" }
                        ),
                    );
                    None
                }
            });
        // Written or not: the plan's budget (`judge_budget`) sets the bounds, the stricter
        // of its share and a written confidence (`super::budget`).
        let confidence = match o.get("confidence") {
            None => Some(None),
            Some((v, p)) => self.number(v, &p).and_then(|c| {
                if (0.5..=0.999_999).contains(&c) {
                    Some(Some(c))
                } else {
                    self.error(
                        &p,
                        format!(
                            "confidence must be between 0.5 and 0.999999 (0.99: a false FAIL or a \
                             false PASS at most 1% of the time); got {c}"
                        ),
                    );
                    None
                }
            }),
        };
        let min_events = match o.get("min_events") {
            None => Some(DEFAULT_MIN_EVENTS),
            Some((v, p)) => self.uint(v, &p, 1, u64::from(u32::MAX)),
        };
        let min_failures = match o.get("min_failures") {
            None => Some(crate::judge::DEFAULT_MIN_FAILURES),
            Some((v, p)) => self.uint(v, &p, 1, u64::from(u32::MAX)),
        };
        let max_duration = match o.get("max_duration") {
            None => Some(DEFAULT_MAX_DURATION),
            Some((v, p)) => self.duration(v, &p).and_then(|d| {
                if d.is_zero() {
                    self.error(&p, "max_duration must be longer than 0s");
                    None
                } else {
                    Some(d)
                }
            }),
        };
        Some(Check::Judge(Box::new(JudgeCheck {
            form: form?,
            config: Config {
                tolerance: tolerance?,
                alpha: 1.0 - confidence.flatten().unwrap_or(DEFAULT_CONFIDENCE),
                alpha_pass: 1.0 - confidence.flatten().unwrap_or(DEFAULT_CONFIDENCE),
                confidence: confidence?,
                min_events: min_events?,
                min_failures: min_failures?,
                max_duration: max_duration?,
            },
        })))
    }

    fn judge_side(
        &mut self,
        v: &Value,
        path: &str,
        source: Option<&(String, Option<SourceKind>)>,
    ) -> Option<JudgeSide> {
        let o = Obj::new(self, v, path, "a judge side", SIDE_FIELDS)?;
        if let Some((_, p)) = o.get_raw("buckets") {
            self.error(
                &p,
                "`buckets` is the latency form's: give the judge a `quantile` and `le`, and no \
                 `events`/`failures`",
            );
        }
        let query = |cx: &mut Self, key: &str, what: &str| {
            o.req(cx, key, what).and_then(|(v, p)| {
                let q = cx.nonempty_string(v, &p)?;
                cx.check_query(source, &q.replace("$step", STEP_EXAMPLE), &p)?;
                cx.raw_counter(&q, &p)?;
                Some(q)
            })
        };
        let events = query(
            self,
            "events",
            "the count of messages handled since the step began, e.g. \
             `sum(increase(handled_total{route=\"new\"}[$step]))`",
        );
        let failures = query(
            self,
            "failures",
            "the count of those that failed since the step began",
        );
        Some(JudgeSide {
            events: events?,
            failures: failures?,
        })
    }

    /// The latency form: `quantile`, `le` and each side's `buckets` query with `$le`.
    fn latency_form(
        &mut self,
        o: &Obj<'_>,
        source: Option<&(String, Option<SourceKind>)>,
    ) -> Option<JudgeForm> {
        let quantile = o
            .req(self, "quantile", "the quantile compared, e.g. 0.99 for p99")
            .and_then(|(v, p)| {
                let q = self.number(v, &p)?;
                if q > 0.0 && q < 1.0 {
                    Some(q)
                } else {
                    self.error(
                        &p,
                        format!("quantile must be above 0 and below 1 (0.99: p99); got {q}"),
                    );
                    None
                }
            });
        let le = o
            .req(
                self,
                "le",
                "the histogram's bucket boundaries as the exporter writes them, e.g. \
                 [0.05, 0.1, 0.25, 0.5, 1]",
            )
            .and_then(|(v, p)| self.le_list(v, &p));
        let side = |cx: &mut Self, key: &str| {
            let what = format!(
                "the {key} route's `buckets` query with `$le`, e.g. \
                 `sum(increase(latency_seconds_bucket{{route=\"{key}\",le=\"$le\"}}[$step]))`"
            );
            let (v, p) = o.req(cx, key, &what)?;
            let side = Obj::new(cx, v, &p, "a latency judge side", &["buckets"])?;
            let (v, p) = side.req(cx, "buckets", &what)?;
            let q = cx.nonempty_string(v, &p)?;
            if !q.contains("$le") {
                cx.error(
                    &p,
                    "a `buckets` query needs `$le` where each bucket's boundary goes, e.g. \
                     `le=\"$le\"`",
                );
                return None;
            }
            let example = q.replace("$step", STEP_EXAMPLE).replace("$le", "+Inf");
            cx.check_query(source, &example, &p)?;
            cx.raw_counter(&q.replace("$le", "+Inf"), &p)?;
            Some(q)
        };
        let new = side(self, "new");
        let old = side(self, "old");
        Some(JudgeForm::Latency(LatencyJudge::new(
            quantile?, &le?, new?, old?,
        )))
    }

    /// A judge's query as the raw counters it reads (`sum(increase(x[$step]))`: the counters
    /// of `x`, [`crate::judge::counter`]), or an error at `path` saying why it cannot be read
    /// that way and what to write.
    fn raw_counter(&mut self, query: &str, path: &str) -> Option<()> {
        match crate::judge::counter::recognise(query) {
            Ok(_) => Some(()),
            Err(why) => {
                self.error(
                    path,
                    format!("a judge reads its counts from the raw counters: {why}"),
                );
                None
            }
        }
    }

    /// `le`: a list of ascending boundaries (numbers, or strings as the exporter writes them:
    /// `"1.0"`), at least one finite; `+Inf` may end it.
    fn le_list(&mut self, v: &Value, path: &str) -> Option<Vec<(f64, String)>> {
        let Value::Sequence(items) = v else {
            self.error(
                path,
                format!(
                    "expected a list of bucket boundaries, found {}",
                    super::cx::describe(v)
                ),
            );
            return None;
        };
        let mut out: Vec<(f64, String)> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let parsed = match item {
                Value::Number(n) => n.as_f64().map(|f| (f, f.to_string())),
                Value::String(s) => s
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| !f.is_nan())
                    .map(|f| (f, s.clone())),
                _ => None,
            };
            let Some((value, label)) = parsed else {
                self.error(
                    &p,
                    format!(
                        "expected a bucket boundary (a number, or a string such as \"1.0\" or \
                         \"+Inf\"), found {}",
                        super::cx::describe(item)
                    ),
                );
                return None;
            };
            if out.last().is_some_and(|(prev, _)| *prev >= value) || value <= 0.0 {
                self.error(
                    &p,
                    format!("bucket boundaries must be above 0 and ascending; got {label} here"),
                );
                return None;
            }
            out.push((value, label));
        }
        if !out.iter().any(|(v, _)| v.is_finite()) {
            self.error(path, "give at least one finite bucket boundary");
            return None;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::compile::test_support::{edit, errors, line_of, lines, ok};
    use crate::plan::model::{Check, JudgeForm, PhaseKind};

    const GUARD: &str = "    guard:\n      - name: error rate breach\n";

    /// A judge guard on the slices phase, its `judge:` mapping's lines given.
    fn with_judge(body: &str) -> String {
        edit(
            GUARD,
            &format!(
                "    guard:\n      - name: failures vs old\n        source: consumer\n        judge:\n{body}      - name: error rate breach\n"
            ),
        )
    }

    const SIDES: &str = "          new: { events: 'sum(increase(handled_total{route=\"new\"}[$step]))', failures: 'sum(increase(failed_total{route=\"new\"}[$step]))' }\n          old: { events: 'sum(increase(handled_total{route=\"old\"}[$step]))', failures: 'sum(increase(failed_total{route=\"old\"}[$step]))' }\n";

    #[test]
    fn a_judge_gate_compiles_with_its_defaults() {
        let c = ok(&with_judge(&format!("{SIDES}          tolerance: 0.2\n")));
        let slices = c.plan.phase(PhaseKind::Slices).expect("slices");
        let Check::Judge(j) = &slices.guard[0].check else {
            panic!("not a judge: {:?}", slices.guard[0].check);
        };
        assert_eq!(j.config.tolerance, 0.2);
        // The default budget, 1% per migration, split over the slices guard's steps.
        let steps = f64::from(crate::plan::steps_watched(slices));
        assert!(steps > 1.0);
        assert!((j.config.alpha - 0.01 / steps).abs() < 1e-12);
        assert!((j.config.alpha_pass - 0.01 / steps).abs() < 1e-12);
        assert_eq!(j.config.confidence, None);
        assert_eq!(j.config.min_events, 1_000);
        assert_eq!(j.config.max_duration.as_secs(), 3600);
        let JudgeForm::Counts { new, .. } = &j.form else {
            panic!("not the counts form: {j:?}");
        };
        assert!(new.events.contains("$step"));
    }

    #[test]
    fn a_missing_side_or_a_tolerance_out_of_range_is_an_error_at_its_path_and_line() {
        let one_side = format!(
            "{}          tolerance: 11\n          confidence: 1.5\n",
            SIDES.lines().next().unwrap_or_default().to_string() + "\n"
        );
        let yaml = with_judge(&one_side);
        let errs = errors(&yaml);
        let found: Vec<(&str, Option<usize>)> =
            errs.iter().map(|e| (e.path.as_str(), e.line)).collect();
        assert!(
            found.contains(&("phases.slices.guard[0].judge", line_of(&yaml, "judge:"))),
            "{}",
            lines(&errs)
        );
        assert!(
            errs.iter()
                .any(|e| e.message.contains("missing required field `old`")),
            "{}",
            lines(&errs)
        );
        assert!(
            found.contains(&(
                "phases.slices.guard[0].judge.tolerance",
                line_of(&yaml, "tolerance: 11")
            )),
            "{}",
            lines(&errs)
        );
        assert!(
            found
                .iter()
                .any(|(p, _)| *p == "phases.slices.guard[0].judge.confidence"),
            "{}",
            lines(&errs)
        );
        // A side without its failures; a judge beside a `query`.
        let yaml = with_judge(&format!(
            "{}          old: {{ events: 'x_total' }}\n          tolerance: 0.1\n        query: x\n",
            SIDES.lines().next().unwrap_or_default().to_string() + "\n"
        ));
        let errs = errors(&yaml);
        assert!(
            errs.iter()
                .any(|e| e.path == "phases.slices.guard[0].judge.old"
                    && e.message.contains("`failures`")),
            "{}",
            lines(&errs)
        );
        assert!(
            errs.iter().any(|e| e.message.contains("takes no `query`")),
            "{}",
            lines(&errs)
        );
    }

    /// Issue 55: a judge reads its counts from the raw counters under its queries; a query it
    /// cannot read that way is refused at its path, saying why and what to write.
    #[test]
    fn a_judge_query_not_readable_as_raw_counters_is_refused_at_its_path() {
        let yaml = with_judge(&format!(
            "{}          tolerance: 0.2\n",
            SIDES
                .replacen(
                    "'sum(increase(handled_total{route=\"new\"}[$step]))'",
                    "'sum(handled_total{route=\"new\"})'",
                    1
                )
                .replacen(
                    "'sum(increase(failed_total{route=\"old\"}[$step]))'",
                    "'sum(rate(failed_total{route=\"old\"}[$step]))'",
                    1
                )
        ));
        let errs = errors(&yaml);
        let at = |path: &str, why: &str| {
            errs.iter().any(|e| {
                e.path == path && e.message.contains("raw counters") && e.message.contains(why)
            })
        };
        assert!(
            at("phases.slices.guard[0].judge.new.events", "no `$step`"),
            "{}",
            lines(&errs)
        );
        assert!(
            at("phases.slices.guard[0].judge.old.failures", "per second"),
            "{}",
            lines(&errs)
        );
        assert_eq!(errs.len(), 2, "{}", lines(&errs));
    }

    const LATENCY: &str = "          quantile: 0.99\n          le: [0.05, 0.1, '1.0', '+Inf']\n          new: { buckets: 'sum(increase(latency_seconds_bucket{route=\"new\",le=\"$le\"}[$step]))' }\n          old: { buckets: 'sum(increase(latency_seconds_bucket{route=\"old\",le=\"$le\"}[$step]))' }\n";

    #[test]
    fn a_latency_judge_compiles_with_a_query_per_bucket_and_side() {
        let c = ok(&with_judge(&format!("{LATENCY}          tolerance: 0.2\n")));
        let slices = c.plan.phase(PhaseKind::Slices).expect("slices");
        let Check::Judge(j) = &slices.guard[0].check else {
            panic!("not a judge: {:?}", slices.guard[0].check);
        };
        let JudgeForm::Latency(l) = &j.form else {
            panic!("not the latency form: {j:?}");
        };
        assert_eq!(l.buckets.quantile, 0.99);
        assert_eq!(l.buckets.le, vec![0.05, 0.1, 1.0]);
        assert_eq!(l.le_labels, vec!["0.05", "0.1", "1.0", "+Inf"]);
        let queries = j.queries();
        assert_eq!(queries.len(), 8);
        assert!(queries[2].contains("le=\"1.0\""), "{}", queries[2]);
        assert!(
            queries[7].contains("route=\"old\",le=\"+Inf\""),
            "{}",
            queries[7]
        );
    }

    #[test]
    fn a_latency_judge_without_a_side_or_with_a_bad_quantile_is_an_error_at_its_path_and_line() {
        let first_three: String = LATENCY.lines().take(3).map(|l| format!("{l}\n")).collect();
        let yaml = with_judge(&format!(
            "{}          tolerance: -1\n",
            first_three.replace("quantile: 0.99", "quantile: 1.5")
        ));
        let errs = errors(&yaml);
        let at = |path: &str, text: &str| {
            errs.iter()
                .any(|e| e.path == path && e.line == line_of(&yaml, text))
        };
        assert!(
            at("phases.slices.guard[0].judge.quantile", "quantile: 1.5"),
            "{}",
            lines(&errs)
        );
        assert!(
            at("phases.slices.guard[0].judge.tolerance", "tolerance: -1"),
            "{}",
            lines(&errs)
        );
        assert!(
            errs.iter().any(|e| e.path == "phases.slices.guard[0].judge"
                && e.message.contains("missing required field `old`")),
            "{}",
            lines(&errs)
        );
        // Boundaries out of order, a bucket query without `$le`, buckets on a counts judge.
        let yaml = with_judge(&format!(
            "{}          tolerance: 0.2\n",
            LATENCY
                .replace("[0.05, 0.1,", "[0.1, 0.05,")
                .replace("route=\"old\",le=\"$le\"", "route=\"old\"")
        ));
        let errs = errors(&yaml);
        assert!(
            errs.iter()
                .any(|e| e.path == "phases.slices.guard[0].judge.le[1]"
                    && e.message.contains("ascending")),
            "{}",
            lines(&errs)
        );
        assert!(
            errs.iter()
                .any(|e| e.path == "phases.slices.guard[0].judge.old.buckets"
                    && e.message.contains("`$le`")),
            "{}",
            lines(&errs)
        );
        let yaml = with_judge(&format!(
            "{}          tolerance: 0.2\n",
            SIDES.replace("new: { events", "new: { buckets: 'x{le=\"$le\"}', events")
        ));
        let errs = errors(&yaml);
        assert!(
            errs.iter()
                .any(|e| e.path == "phases.slices.guard[0].judge.new.buckets"
                    && e.message.contains("`quantile`")),
            "{}",
            lines(&errs)
        );
    }
}
