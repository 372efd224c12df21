//! Gates (`exit` and `guard` lists): a threshold (`query` + `pass_if`) or a comparison of the new
//! route with the old (`compare` + `tolerance`), on a declared source, with `for`, `for_max_gap`
//! and `min_samples`.

use std::time::Duration;

use serde_yaml::Value;

use super::cx::{Cx, Obj, describe, quote};
use super::sources::{DEAD_LETTER_QUERIES, SourceKind, Sources};
use crate::plan::lines::index_path;
use crate::plan::model::{
    Check, CmpOp, DEFAULT_FOR_MAX_GAP, DEFAULT_ROUTING_WINDOW, Gate, ROUTING_SOURCE,
};

// The fields each mapping allows (what an "unknown field" error offers instead).
const GATE_FIELDS: &[&str] = &[
    "name",
    "source",
    "query",
    "pass_if",
    "compare",
    "judge",
    "routing_applied",
    "tolerance",
    "for",
    "for_max_gap",
    "min_samples",
];
const COMPARE_FIELDS: &[&str] = &["new", "old"];
const ROUTING_APPLIED_FIELDS: &[&str] = &["window"];
const TOLERANCE_FIELDS: &[&str] = &["ratio", "absolute"];

/// What gates are checked against.
pub(super) struct GateCtx<'s> {
    /// `None` when the `sources` section itself is broken: source names are then not checked.
    pub(super) sources: Option<&'s Sources>,
    /// The drain quiet period, when it could be computed.
    pub(super) quiet: Option<Duration>,
}

impl Cx<'_> {
    pub(super) fn gates(
        &mut self,
        v: &Value,
        path: &str,
        gates: &GateCtx<'_>,
    ) -> Option<Vec<Gate>> {
        let Value::Sequence(items) = v else {
            self.error(
                path,
                format!(
                    "expected a list of gates (`- name: ...`), found {}",
                    describe(v)
                ),
            );
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match self.gate(item, &index_path(path, i), gates) {
                Some(g) => out.push(g),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn gate(&mut self, v: &Value, path: &str, gates: &GateCtx<'_>) -> Option<Gate> {
        let o = Obj::new(self, v, path, "a gate", GATE_FIELDS)?;
        let name = o
            .req(self, "name", "what status and the journal call this gate")
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        let (source, check) = match o.get_raw("routing_applied") {
            Some((rv, rp)) => {
                let check = self.routing_applied(&o, path, rv, &rp);
                (Some((ROUTING_SOURCE.to_string(), None)), check)
            }
            None => {
                let source = o
                    .req(self, "source", "the name of a declared source")
                    .and_then(|(v, p)| self.source_ref(v, &p, gates));
                let check = self.condition(&o, path, source.as_ref());
                (source, check)
            }
        };

        let hold_for = match o.get("for") {
            Some((Value::String(s), _)) if s.trim() == "quiet" => Some(gates.quiet),
            Some((v, p)) => self.duration(v, &p).map(Some),
            None => Some(None),
        };
        let for_max_gap = self.for_max_gap(o.get("for_max_gap"), o.get("for").is_some());
        let min_samples = match o.get("min_samples") {
            Some((v, p)) => self
                .uint(v, &p, 1, u64::from(u32::MAX))
                .and_then(|n| u32::try_from(n).ok()),
            None => Some(1),
        };
        Some(Gate {
            name: name?,
            source: source?.0,
            check: check?,
            hold_for: hold_for?,
            for_max_gap: for_max_gap?,
            min_samples: min_samples?,
        })
    }

    /// A gate's condition: either `query` + `pass_if` (a threshold) or `compare` + `tolerance`
    /// (new against old), each checked against the gate's source.
    fn condition(
        &mut self,
        o: &Obj<'_>,
        path: &str,
        source: Option<&(String, Option<SourceKind>)>,
    ) -> Option<Check> {
        if let Some((jv, jp)) = o.get("judge") {
            return self.judge_gate(o, path, source, jv, &jp);
        }
        match (o.get("query"), o.get("compare")) {
            (Some(_), Some(_)) => {
                self.error(
                    path,
                    "a gate takes either `query` + `pass_if` (a threshold) or `compare` + \
                     `tolerance` (new against old), not both",
                );
                None
            }
            (None, None) => {
                self.error(
                    path,
                    "a gate needs a condition: `query` + `pass_if` (e.g. \">= 1\"), or \
                     `compare: { new: QUERY, old: QUERY }`",
                );
                None
            }
            (Some((qv, qp)), None) => self.threshold_condition(o, path, source, qv, &qp),
            (None, Some((cv, cp))) => self.compare_condition(o, source, cv, &cp),
        }
    }

    /// `judge`: alone, without `query`, `compare`, `pass_if`, `tolerance` (its own is inside),
    /// `for` or `min_samples` (it decides when the counts do).
    fn judge_gate(
        &mut self,
        o: &Obj<'_>,
        path: &str,
        source: Option<&(String, Option<SourceKind>)>,
        jv: &Value,
        jp: &str,
    ) -> Option<Check> {
        let mut alone = true;
        for field in [
            "query",
            "compare",
            "pass_if",
            "tolerance",
            "for",
            "min_samples",
        ] {
            if o.get(field).is_some() {
                self.error(
                    path,
                    format!(
                        "a `judge` gate takes no `{field}`: it compares the two routes' counts \
                         itself and decides when they say so (its settings go inside `judge:`)"
                    ),
                );
                alone = false;
            }
        }
        let check = self.judge_condition(jv, jp, source);
        check.filter(|_| alone)
    }

    /// `routing_applied: { window: 2m }` (or `routing_applied: {}`): alone, without `source`
    /// (it reads the daemon's own knowledge of who polls the routing document), `query`,
    /// `compare`, `pass_if`, `tolerance` or `judge`.
    fn routing_applied(&mut self, o: &Obj<'_>, path: &str, rv: &Value, rp: &str) -> Option<Check> {
        let mut alone = true;
        for field in [
            "source",
            "query",
            "compare",
            "pass_if",
            "tolerance",
            "judge",
        ] {
            if o.get(field).is_some() {
                self.error(
                    path,
                    format!(
                        "a `routing_applied` gate takes no `{field}`: it reads which generation \
                         each producer polling the daemon's routing document applied"
                    ),
                );
                alone = false;
            }
        }
        let window = if matches!(rv, Value::Null) {
            Some(DEFAULT_ROUTING_WINDOW)
        } else {
            let r = Obj::new(self, rv, rp, "`routing_applied`", ROUTING_APPLIED_FIELDS)?;
            match r.get("window") {
                Some((v, p)) => match self.duration(v, &p) {
                    Some(w) if w.is_zero() => {
                        self.error(&p, "a window of 0s sees no producer: give e.g. `2m`");
                        None
                    }
                    other => other,
                },
                None => Some(DEFAULT_ROUTING_WINDOW),
            }
        };
        let window = window?;
        alone.then_some(Check::RoutingApplied { window })
    }

    /// `query` + `pass_if`: the query is one the source answers, `pass_if` a comparison, and no
    /// `tolerance` (which belongs to `compare`).
    fn threshold_condition(
        &mut self,
        o: &Obj<'_>,
        path: &str,
        source: Option<&(String, Option<SourceKind>)>,
        qv: &Value,
        qp: &str,
    ) -> Option<Check> {
        let pass_if = o.get("pass_if");
        let tolerance = o.get("tolerance");
        if let Some((_, tp)) = &tolerance {
            self.error(
                tp,
                "`tolerance` only applies to `compare` gates; a `query` gate uses \
                 `pass_if`",
            );
        }
        let q = self.nonempty_string(qv, qp).and_then(|q| {
            self.check_query(source, &q, qp)?;
            Some(q)
        });
        let cmp = match &pass_if {
            Some((v, p)) => self.pass_if(v, p),
            None => {
                self.error(
                    path,
                    "missing `pass_if` for `query`: the comparison that passes, e.g. \
                     \">= 1\", \"== 0\", \"< 0.01\"",
                );
                None
            }
        };
        match (q, cmp) {
            (Some(query), Some((op, value))) if tolerance.is_none() => {
                Some(Check::Threshold { query, op, value })
            }
            _ => None,
        }
    }

    /// `compare: { new, old }` + `tolerance`: both queries are ones the source answers, the
    /// tolerance is valid, and no `pass_if` (which belongs to `query`).
    fn compare_condition(
        &mut self,
        o: &Obj<'_>,
        source: Option<&(String, Option<SourceKind>)>,
        cv: &Value,
        cp: &str,
    ) -> Option<Check> {
        let pass_if = o.get("pass_if");
        let tolerance = o.get("tolerance");
        if let Some((_, pp)) = &pass_if {
            self.error(
                pp,
                "`pass_if` goes with `query`; a `compare` gate passes when new <= \
                 max(old x ratio, old + absolute), set by `tolerance`",
            );
        }
        let pair = self.compare(cv, cp, source);
        let tol = match &tolerance {
            Some((v, p)) => self.tolerance(v, p),
            None => Some((1.0, 0.0)),
        };
        match (pair, tol) {
            (Some((new, old)), Some((ratio, absolute))) if pass_if.is_none() => {
                Some(Check::Compare {
                    new,
                    old,
                    ratio,
                    absolute,
                })
            }
            _ => None,
        }
    }

    /// A gate's `for_max_gap` (`field`): only beside `for` (`has_for`), where it defaults to
    /// [`DEFAULT_FOR_MAX_GAP`]; a duration above zero.
    fn for_max_gap(
        &mut self,
        field: Option<(&Value, String)>,
        has_for: bool,
    ) -> Option<Option<Duration>> {
        let Some((v, p)) = field else {
            return Some(has_for.then_some(DEFAULT_FOR_MAX_GAP));
        };
        if !has_for {
            self.error(
                &p,
                "`for_max_gap` bounds the time between two evaluations of a `for:` gate; this \
                 gate has no `for`: add one (e.g. `for: 30m`) or remove `for_max_gap`",
            );
            return None;
        }
        let gap = self.duration(v, &p)?;
        if gap.is_zero() {
            self.error(
                &p,
                "`for_max_gap` must be longer than 0s: it is the longest time between two \
                 evaluations that keeps a `for:` streak (default 5m)",
            );
            return None;
        }
        Some(Some(gap))
    }

    /// A gate's or requirement's `source`: its name and kind (kind `None` when unknown).
    pub(super) fn source_ref(
        &mut self,
        v: &Value,
        path: &str,
        gates: &GateCtx<'_>,
    ) -> Option<(String, Option<SourceKind>)> {
        let name = self.nonempty_string(v, path)?;
        let Some(sources) = gates.sources else {
            return Some((name, None));
        };
        match sources.declared.get(&name) {
            Some(kind) => Some((name, *kind)),
            None => {
                let declared = if sources.declared.is_empty() {
                    "no sources are declared under `sources`".to_string()
                } else {
                    format!(
                        "declared sources: {}",
                        sources
                            .declared
                            .keys()
                            .map(String::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                self.error(path, format!("unknown source {}; {declared}", quote(&name)));
                None
            }
        }
    }

    /// Queries on a scrape source are evaluated by the controller itself: check they parse.
    pub(super) fn check_query(
        &mut self,
        source: Option<&(String, Option<SourceKind>)>,
        query: &str,
        path: &str,
    ) -> Option<()> {
        if let Some((name, Some(SourceKind::DeadLetters))) = source {
            if DEAD_LETTER_QUERIES.contains(&query.trim()) {
                return Some(());
            }
            self.error(
                path,
                format!(
                    "the dead-letter source {} answers {}, not {}",
                    quote(name),
                    DEAD_LETTER_QUERIES.join(" or "),
                    quote(query)
                ),
            );
            return None;
        }
        let Some((name, Some(SourceKind::Scrape | SourceKind::KafkaLag))) = source else {
            return Some(());
        };
        match crate::indicators::query::parse_query(query) {
            Ok(_) => Some(()),
            Err(e) => {
                self.error(
                    path,
                    format!(
                        "not a query the scrape source {} can answer: {e}",
                        quote(name)
                    ),
                );
                None
            }
        }
    }

    fn pass_if(&mut self, v: &Value, path: &str) -> Option<(CmpOp, f64)> {
        let Value::String(s) = v else {
            self.error(
                path,
                format!(
                    "expected a comparison in quotes such as \">= 1\" or \"== 0\", found {}",
                    describe(v)
                ),
            );
            return None;
        };
        match parse_pass_if(s) {
            Ok(c) => Some(c),
            Err(why) => {
                self.error(path, why);
                None
            }
        }
    }

    fn compare(
        &mut self,
        v: &Value,
        path: &str,
        source: Option<&(String, Option<SourceKind>)>,
    ) -> Option<(String, String)> {
        let o = Obj::new(self, v, path, "compare", COMPARE_FIELDS)?;
        if let Some((name, Some(SourceKind::DeadLetters))) = source {
            // Its readings are single numbers, never a pair of routes. A warning, not an error:
            // the gate holds (never passes), and a plan stored before this check still loads.
            self.warn(
                path,
                format!(
                    "the dead-letter source {} answers one number ({}), not a new/old pair: this \
                     gate holds for ever; use `query` + `pass_if`",
                    quote(name),
                    DEAD_LETTER_QUERIES.join(" or ")
                ),
            );
        }
        let side = |cx: &mut Self, key: &str, what: &str| {
            o.req(cx, key, what).and_then(|(v, p)| {
                let q = cx.nonempty_string(v, &p)?;
                cx.check_query(source, &q, &p)?;
                Some(q)
            })
        };
        let new = side(self, "new", "the query read on the new route");
        let old = side(self, "old", "the query read on the old route");
        Some((new?, old?))
    }

    fn tolerance(&mut self, v: &Value, path: &str) -> Option<(f64, f64)> {
        let o = Obj::new(self, v, path, "tolerance", TOLERANCE_FIELDS)?;
        let ratio = match o.get("ratio") {
            Some((v, p)) => self.number(v, &p).and_then(|r| {
                if r >= 1.0 {
                    Some(r)
                } else {
                    self.error(
                        &p,
                        format!(
                            "ratio must be at least 1 (new may be at most ratio x old); got {r}"
                        ),
                    );
                    None
                }
            }),
            None => Some(1.0),
        };
        let absolute = match o.get("absolute") {
            Some((v, p)) => self.number(v, &p).and_then(|a| {
                if a >= 0.0 {
                    Some(a)
                } else {
                    self.error(
                        &p,
                        format!(
                            "absolute must be at least 0 (new may be at most old + absolute); \
                             got {a}"
                        ),
                    );
                    None
                }
            }),
            None => Some(0.0),
        };
        Some((ratio?, absolute?))
    }
}

/// `">= 1"`, `"==0"`, `"< 0.01"`, `"<= 1e-3"` → operator and finite number.
fn parse_pass_if(s: &str) -> Result<(CmpOp, f64), String> {
    const OPS: [(&str, CmpOp); 6] = [
        ("<=", CmpOp::Le),
        (">=", CmpOp::Ge),
        ("==", CmpOp::Eq),
        ("!=", CmpOp::Ne),
        ("<", CmpOp::Lt),
        (">", CmpOp::Gt),
    ];
    let t = s.trim();
    let shape = "pass_if is an operator (<, <=, ==, !=, >=, >) then a number, e.g. \">= 1\", \
                 \"== 0\", \"< 0.01\"";
    let Some((op, rest)) = OPS
        .iter()
        .find_map(|(text, op)| t.strip_prefix(text).map(|rest| (*op, rest)))
    else {
        let hint = if t.starts_with("=>") {
            " (did you mean `>=`?)"
        } else if t.starts_with("=<") {
            " (did you mean `<=`?)"
        } else if t.starts_with('=') {
            " (equality is `==`)"
        } else {
            ""
        };
        return Err(format!("malformed pass_if {}: {shape}{hint}", quote(t)));
    };
    let num = rest.trim();
    match num.parse::<f64>() {
        Ok(n) if n.is_finite() => Ok((op, n)),
        Ok(_) => Err(format!(
            "malformed pass_if {}: the threshold must be a finite number",
            quote(t)
        )),
        Err(_) => Err(format!(
            "malformed pass_if {}: {} is not a number; {shape}",
            quote(t),
            quote(num)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_pass_if;
    use crate::plan::compile::test_support::{edit, errors, lines, ok};
    use crate::plan::model::{CmpOp, DEFAULT_FOR_MAX_GAP, PhaseKind};
    use std::time::Duration;

    /// `for_max_gap` beside `for`, whatever `for` is (`quiet` too); one given without `for` is an
    /// error at its path, reported with the plan's other errors.
    #[test]
    fn for_max_gap_goes_with_for_and_defaults_to_five_minutes() {
        let c = ok(&edit(
            "        for: 5m\n",
            "        for: 5m\n        for_max_gap: 90s\n",
        )
        .replace("for: quiet }", "for: quiet, for_max_gap: 1h }"));
        let guard = c
            .plan
            .phase(PhaseKind::Slices)
            .map(|s| s.guard[0].for_max_gap);
        assert_eq!(guard, Some(Some(Duration::from_secs(90))));
        let drain = c
            .plan
            .phase(PhaseKind::Drain)
            .map(|d| d.exit[0].for_max_gap);
        assert_eq!(drain, Some(Some(Duration::from_secs(3600))));
        assert_eq!(DEFAULT_FOR_MAX_GAP, Duration::from_secs(300));

        let yaml = edit("        min_samples: 10\n", "        for_max_gap: 10m\n")
            .replace("for: quiet }", "for: quiet, for_max_gap: 0ms }")
            .replacen("observe: 2h", "observe: soon", 1);
        let errs = errors(&yaml);
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "phases.slices.observe",
                "phases.slices.exit[0].for_max_gap",
                "phases.drain.exit[0].for_max_gap",
            ],
            "{}",
            lines(&errs)
        );
    }

    #[test]
    fn pass_if_forms() {
        let cases: &[(&str, Option<(CmpOp, f64)>)] = &[
            (">=1", Some((CmpOp::Ge, 1.0))),
            (">= 1", Some((CmpOp::Ge, 1.0))),
            ("== 0", Some((CmpOp::Eq, 0.0))),
            ("!= 0", Some((CmpOp::Ne, 0.0))),
            ("< 0.01", Some((CmpOp::Lt, 0.01))),
            ("<= 1e-3", Some((CmpOp::Le, 0.001))),
            ("  >  -2.5 ", Some((CmpOp::Gt, -2.5))),
            ("= 1", None),
            ("=> 1", None),
            (">= ", None),
            (">= NaN", None),
            ("< inf", None),
            ("1", None),
            ("", None),
            ("≥ 1", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_pass_if(text).ok(), *want, "{text:?}");
        }
    }

    const GUARD: &str = "    guard:\n      - name: error rate breach\n";

    fn with_gate(lines: &str) -> String {
        crate::plan::compile::test_support::edit(
            GUARD,
            &format!("    guard:\n{lines}      - name: error rate breach\n"),
        )
    }

    #[test]
    fn a_routing_applied_gate_needs_no_source_and_defaults_its_window() {
        use crate::plan::model::{Check, DEFAULT_ROUTING_WINDOW, PhaseKind, ROUTING_SOURCE};
        use std::time::Duration;
        for (body, window) in [
            (
                "      - name: producers follow\n        routing_applied: { window: 45s }\n",
                Duration::from_secs(45),
            ),
            (
                "      - name: producers follow\n        routing_applied: {}\n",
                DEFAULT_ROUTING_WINDOW,
            ),
            (
                "      - name: producers follow\n        routing_applied:\n        for: 1m\n",
                DEFAULT_ROUTING_WINDOW,
            ),
        ] {
            let c = crate::plan::compile::test_support::ok(&with_gate(body));
            let slices = c.plan.phase(PhaseKind::Slices).expect("slices");
            let g = &slices.guard[0];
            assert_eq!(g.check, Check::RoutingApplied { window }, "{body}");
            assert_eq!(g.source, ROUTING_SOURCE);
        }
    }

    #[test]
    fn a_routing_applied_gate_with_a_source_a_query_or_a_zero_window_is_an_error() {
        use crate::plan::compile::test_support::{errors, lines};
        for (body, needle) in [
            (
                "      - name: producers follow\n        source: prom\n        routing_applied: {}\n",
                "takes no `source`",
            ),
            (
                "      - name: producers follow\n        query: x\n        pass_if: \">= 1\"\n        routing_applied: {}\n",
                "takes no `query`",
            ),
            (
                "      - name: producers follow\n        routing_applied: { window: 0s }\n",
                "window of 0s",
            ),
            (
                "      - name: producers follow\n        routing_applied: { windw: 1m }\n",
                "windw",
            ),
        ] {
            let e = lines(&errors(&with_gate(body)));
            assert!(e.contains(needle), "{body}: {e}");
        }
    }
}
