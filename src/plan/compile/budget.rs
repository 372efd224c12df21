//! `judge_budget: { false_fail, false_pass, detectors }`: the plan-wide error budget of its
//! judges ([`crate::judge::budget`]), and each judge's bounds from its share of it.

use serde_yaml::Value;

use super::cx::{Cx, Obj};
use crate::judge::budget::{Budget, alphas};
use crate::plan::model::{Check, Phase};

const FIELDS: &[&str] = &["false_fail", "false_pass", "detectors"];

impl Cx<'_> {
    /// `judge_budget:` at `path`: each bound above 0 and at most 0.5, `detectors` the share of
    /// `false_fail` kept for the change detectors, [`crate::judge::detector::SHARE`] (the only
    /// value this version takes: each judge carries the split in its own bound).
    pub(super) fn judge_budget(&mut self, v: &Value, path: &str) -> Option<Budget> {
        let o = Obj::new(self, v, path, "judge_budget", FIELDS)?;
        let bound = |cx: &mut Self, key: &str| match o.get(key) {
            None => Some(crate::judge::budget::DEFAULT_BUDGET),
            Some((v, p)) => cx.number(v, &p).and_then(|b| {
                if b > 0.0 && b <= 0.5 {
                    Some(b)
                } else {
                    cx.error(
                        &p,
                        format!(
                            "{key} must be above 0 and at most 0.5 (0.01: at most 1% of \
                             migrations); got {b}"
                        ),
                    );
                    None
                }
            }),
        };
        let false_fail = bound(self, "false_fail");
        let false_pass = bound(self, "false_pass");
        let share = crate::judge::detector::SHARE;
        let detectors = match o.get("detectors") {
            None => Some(share),
            Some((v, p)) => self.number(v, &p).and_then(|d| {
                if d == share {
                    Some(d)
                } else {
                    self.error(
                        &p,
                        format!(
                            "detectors is the share of false_fail kept for the judges' change \
                             detectors, {share} in this version (each judge's detector takes \
                             that share of its bound); got {d}"
                        ),
                    );
                    None
                }
            }),
        };
        Some(Budget {
            false_fail: false_fail?,
            false_pass: false_pass?,
            detectors: detectors?,
        })
    }
}

/// How many steps a phase's gates watch: each of `slices`' steps, one for another phase.
pub fn steps_watched(phase: &Phase) -> u32 {
    u32::try_from(phase.steps.len()).unwrap_or(u32::MAX).max(1)
}

/// The plan's judge×steps: each judge gate (exit or guard) once for each step its phase has.
pub fn judge_steps(phases: &[Phase]) -> u32 {
    phases
        .iter()
        .map(|p| {
            let judges = p
                .exit
                .iter()
                .chain(&p.guard)
                .filter(|g| matches!(g.check, Check::Judge(_)))
                .count();
            u32::try_from(judges)
                .unwrap_or(u32::MAX)
                .saturating_mul(steps_watched(p))
        })
        .fold(0, u32::saturating_add)
}

/// Give each judge of `phases` its bounds: its share of `budget` (split equally over the plan's
/// judge×steps), or the `confidence` written for it where that is stricter.
pub(super) fn apply(phases: &mut [Phase], budget: &Budget) {
    let share = budget.share(judge_steps(phases));
    for phase in phases.iter_mut() {
        for gate in phase.exit.iter_mut().chain(phase.guard.iter_mut()) {
            if let Check::Judge(j) = &mut gate.check {
                let (fail, pass) = alphas(share, j.config.confidence);
                j.config.alpha = fail;
                j.config.alpha_pass = pass;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::compile::test_support::{edit, errors, lines, ok};
    use crate::plan::model::{Check, PhaseKind};

    const GUARD: &str = "    guard:\n      - name: error rate breach\n";

    fn with_judge(extra: &str, top: &str) -> String {
        let judge = format!(
            "    guard:\n      - name: failures vs old\n        source: consumer\n        judge:\n\
             {}          tolerance: 0.2\n{extra}      - name: error rate breach\n",
            "          new: { events: 'sum(increase(h_total{route=\"new\"}[$step]))', failures: 'sum(increase(f_total{route=\"new\"}[$step]))' }\n          old: { events: 'sum(increase(h_total{route=\"old\"}[$step]))', failures: 'sum(increase(f_total{route=\"old\"}[$step]))' }\n"
        );
        format!("{top}{}", edit(GUARD, &judge))
    }

    fn judge_alphas(yaml: &str) -> (f64, f64, u32) {
        let c = ok(yaml);
        let slices = c.plan.phase(PhaseKind::Slices).expect("slices");
        let Check::Judge(j) = &slices.guard[0].check else {
            panic!("not a judge");
        };
        (
            j.config.alpha,
            j.config.alpha_pass,
            super::judge_steps(&c.plan.phases),
        )
    }

    #[test]
    fn the_default_budget_is_split_across_the_judges_steps() {
        let (fail, pass, n) = judge_alphas(&with_judge("", ""));
        assert!(n >= 2, "a slices guard watches each of its steps: {n}");
        assert!((fail * f64::from(n) - 0.01).abs() < 1e-12, "{fail} x {n}");
        assert!((pass * f64::from(n) - 0.01).abs() < 1e-12, "{pass} x {n}");
    }

    #[test]
    fn a_written_confidence_is_taken_where_stricter_and_the_budget_elsewhere() {
        // Looser than its share: the share holds.
        let (fail, _, n) = judge_alphas(&with_judge("          confidence: 0.9\n", ""));
        assert!((fail - 0.01 / f64::from(n)).abs() < 1e-12);
        // Stricter: the confidence holds.
        let (fail, pass, _) = judge_alphas(&with_judge("          confidence: 0.99999\n", ""));
        assert!((fail - 1e-5).abs() < 1e-12 && (pass - 1e-5).abs() < 1e-12);
        // A budget of the plan's own, detectors keeping a quarter of its false FAILs: each
        // judge's bound is its whole share, which its FAIL test and detector split.
        let (fail, pass, n) = judge_alphas(&with_judge(
            "",
            "judge_budget: { false_fail: 0.02, false_pass: 0.05, detectors: 0.25 }\n",
        ));
        assert!((fail * f64::from(n) - 0.02).abs() < 1e-12);
        assert!((pass * f64::from(n) - 0.05).abs() < 1e-12);
    }

    #[test]
    fn a_budget_out_of_range_is_an_error_at_its_path() {
        let errs = errors(&with_judge(
            "",
            "judge_budget: { false_fail: 0, false_pass: 0.9, detectors: 1, other: 1 }\n",
        ));
        for path in [
            "judge_budget.false_fail",
            "judge_budget.false_pass",
            "judge_budget.detectors",
        ] {
            assert!(
                errs.iter().any(|e| e.path == path),
                "{path}: {}",
                lines(&errs)
            );
        }
        // The detectors' share is the judges' own in this version: another one is refused.
        let off = errors(&with_judge("", "judge_budget: { detectors: 0 }\n"));
        assert!(
            off.iter()
                .any(|e| e.path == "judge_budget.detectors" && e.message.contains("0.25")),
            "{}",
            lines(&off)
        );
        assert!(
            errs.iter().any(|e| e.message.contains("other")),
            "{}",
            lines(&errs)
        );
    }
}
