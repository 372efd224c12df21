//! The error a migration spends on its judges (issue 55 item 2): one plan-wide budget of false
//! FAILs and false PASSes, split across the judges and the steps they watch, so that the
//! promise is per migration, not per gate and per step. Pure: no IO, no clock.
//!
//! A migration's judges make one decision per judge per step they watch (a guard of `slices`
//! watches each of its steps). By the union bound, if the `i`-th judge×step errs with
//! probability at most `alpha_i`, the migration makes any false FAIL with probability at most
//! `Σ alpha_i`; giving each of the `N` judge×steps `alpha_i = false_fail / N` keeps that sum at
//! the plan's budget (and likewise for false PASSes). Within a step, the counts a resume starts
//! share their judge×step's `alpha_i` ([`super::betting::spend`]). Each judge×step's false-FAIL
//! bound is split between its FAIL test and its change detector ([`super::detector`], whose
//! alarm is a FAIL): `detectors` ([`super::detector::SHARE`], a quarter) to the detector, the
//! rest to the test, so both together spend the judge×step's share and no more.

use serde::Serialize;

/// Default false-FAIL and false-PASS budget per migration.
pub const DEFAULT_BUDGET: f64 = 0.01;

/// A plan's `judge_budget:`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budget {
    /// The chance of any false FAIL (new is not worse) in the migration.
    pub false_fail: f64,
    /// The chance of any false PASS (new is worse) in the migration.
    pub false_pass: f64,
    /// The share of `false_fail` set aside for the change detectors' alarms: each judge×step's
    /// detector takes this share of its bound ([`super::detector::SHARE`]; fixed in this
    /// version, see `docs/plan.md`).
    pub detectors: f64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            false_fail: DEFAULT_BUDGET,
            false_pass: DEFAULT_BUDGET,
            detectors: super::detector::SHARE,
        }
    }
}

/// One judge×step's part of the budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Share {
    /// Its bound of a false FAIL (its FAIL test's and its change detector's together), and of a
    /// false PASS, in one step.
    pub fail: f64,
    pub pass: f64,
    /// How many judge×steps the plan's budget is split across.
    pub judge_steps: u32,
}

impl Budget {
    /// Each judge×step's share when the plan has `judge_steps` of them (split equally); its
    /// FAIL test and its change detector split its `fail` ([`super::detector::SHARE`]).
    ///
    /// # Guarantees
    /// `judge_steps` shares add up to at most `false_fail` (the FAIL tests' and the detectors'
    /// together) and `false_pass`.
    pub fn share(&self, judge_steps: u32) -> Share {
        let n = f64::from(judge_steps.max(1));
        Share {
            fail: self.false_fail / n,
            pass: self.false_pass / n,
            judge_steps: judge_steps.max(1),
        }
    }
}

/// A judge's bounds per step from its share and the `confidence` its plan wrote for it, if
/// any: the stricter of the two for each (`1 - confidence` for both FAIL and PASS), so that a
/// per-judge confidence can tighten a judge but never spend more than its share.
pub fn alphas(share: Share, confidence: Option<f64>) -> (f64, f64) {
    match confidence {
        Some(c) => {
            let own = 1.0 - c;
            (share.fail.min(own), share.pass.min(own))
        }
        None => (share.fail, share.pass),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_add_up_to_the_budget_and_a_confidence_only_tightens() {
        let b = Budget::default();
        let s = b.share(5);
        assert!((s.fail * 5.0 - 0.01).abs() < 1e-15);
        assert!((s.pass * 5.0 - 0.01).abs() < 1e-15);
        assert_eq!(alphas(s, None), (s.fail, s.pass));
        // A looser confidence than the share: the share holds.
        assert_eq!(alphas(s, Some(0.99)), (s.fail, s.pass));
        // A stricter one: it holds.
        let (f, p) = alphas(s, Some(0.9999));
        assert!((f - 1e-4).abs() < 1e-12 && (p - 1e-4).abs() < 1e-12);
        // The change detectors keep their part of the false-FAIL budget: each judge×step's
        // FAIL test and detector split its share, and together spend no more than the budget.
        assert_eq!(b.detectors, crate::judge::detector::SHARE);
        let cfg = crate::judge::Config {
            tolerance: 0.2,
            alpha: s.fail,
            alpha_pass: s.pass,
            confidence: None,
            min_events: 1,
            min_failures: 1,
            max_duration: std::time::Duration::from_secs(60),
        };
        let (test, detector) = (1.0 / cfg.boundary_at(0), 1.0 / cfg.detector_boundary_at(0));
        assert!((test / 0.75 - 0.0015).abs() < 1e-15, "{test}");
        assert!((detector / 0.75 - 0.0005).abs() < 1e-15, "{detector}");
        assert!(((test + detector) / 0.75 * 5.0 - b.false_fail).abs() < 1e-15);
        // No judge: nothing divides by zero.
        assert_eq!(b.share(0).judge_steps, 1);
    }
}
