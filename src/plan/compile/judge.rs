//! A `judge` gate's condition (`judge: { new, old, tolerance, confidence, min_events,
//! max_duration }`): each side's two queries, checked against the gate's source, and the test's
//! settings in range.

use std::time::Duration;

use serde_yaml::Value;

use super::cx::{Cx, Obj};
use super::sources::SourceKind;
use crate::judge::Config;
use crate::plan::model::{Check, JudgeCheck, JudgeSide};

const JUDGE_FIELDS: &[&str] = &[
    "new",
    "old",
    "tolerance",
    "confidence",
    "min_events",
    "max_duration",
];
const SIDE_FIELDS: &[&str] = &["events", "failures"];

/// The largest `tolerance`: new's failure rate up to 11 times old's.
const MAX_TOLERANCE: f64 = 10.0;
/// Default `confidence` (`alpha` = 1%).
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
                            "tolerance must be between 0 and {MAX_TOLERANCE} (0.2: new's failure \
                             rate may be up to 1.2 times old's); got {t}"
                        ),
                    );
                    None
                }
            });
        let confidence = match o.get("confidence") {
            None => Some(DEFAULT_CONFIDENCE),
            Some((v, p)) => self.number(v, &p).and_then(|c| {
                if (0.5..=0.999_999).contains(&c) {
                    Some(c)
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
            new: new?,
            old: old?,
            config: Config {
                tolerance: tolerance?,
                alpha: 1.0 - confidence?,
                min_events: min_events?,
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
        let query = |cx: &mut Self, key: &str, what: &str| {
            o.req(cx, key, what).and_then(|(v, p)| {
                let q = cx.nonempty_string(v, &p)?;
                cx.check_query(source, &q.replace("$step", STEP_EXAMPLE), &p)?;
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
}

#[cfg(test)]
mod tests {
    use crate::plan::compile::test_support::{edit, errors, line_of, lines, ok};
    use crate::plan::model::{Check, PhaseKind};

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
        assert!((j.config.alpha - 0.01).abs() < 1e-12);
        assert_eq!(j.config.min_events, 1_000);
        assert_eq!(j.config.max_duration.as_secs(), 3600);
        assert!(j.new.events.contains("$step"));
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
}
