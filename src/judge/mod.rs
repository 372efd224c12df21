//! The `judge` gate's statistics: is the new route's failure rate worse than the old route's by
//! more than a tolerance, asked of counts read at the same moment, with an always-valid
//! sequential test whose error rates hold however often it looks. Pure: no IO, no clock.
//!
//! The model and the proof are in `docs/design.md` ("The judge: an always-valid comparison of
//! the two routes"). In short: each reading closes an interval; the interval's failures are
//! weighed against the interval's own traffic split, one interval one observation
//! ([`betting`]: a bet on new's share of the interval's failures, bounded, so a burst is one
//! observation, not dozens of trials), and the wealths carry from one reading to the next in a
//! [`betting::Ledger`]:
//! - **FAIL** when the change detector ([`detector`]) alarms, or when the FAIL wealth has ever
//!   reached `1/alpha_k` in the step (`alpha_k` the share
//!   of the step's budget of this count: [`betting::spend`]); it stays, whatever comes after,
//!   a resume or a tolerance change included;
//! - **PASS** when the PASS wealth reaches it, on `min_events` per side and `min_failures`
//!   weighed;
//! - anything else is DECIDING; past `max_duration` INCONCLUSIVE, for a person.

pub mod betting;
pub mod budget;
pub mod counter;
pub mod detector;
pub mod latency;

use std::time::Duration;

use serde::Serialize;

pub use betting::{Counts, Ledger, Look};

/// Default `min_failures`: failures (both sides) weighed before a PASS.
pub const DEFAULT_MIN_FAILURES: u64 = 10;

/// What a judge asks, from the plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Config {
    /// New may be this much worse than old (`0.2`: a failure rate up to 1.2 times old's) before
    /// it is a FAIL.
    pub tolerance: f64,
    /// The bound of a false FAIL (new is not worse) in a step: the judge's share of the
    /// plan's budget, or `1 - confidence` where that is stricter ([`budget`]). Its FAIL test
    /// and its change detector split it ([`detector::SHARE`]).
    pub alpha: f64,
    /// The bound of a false PASS (new is worse) in a step, likewise.
    pub alpha_pass: f64,
    /// The `confidence` the plan wrote for this judge (`None`: the budget alone decides).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Events each side must have seen before a PASS.
    pub min_events: u64,
    /// Failures (both sides) weighed before a PASS: a PASS rests on evidence, never on a
    /// handful of failures.
    pub min_failures: u64,
    /// Undecided after this long in the step: inconclusive, a person decides.
    #[serde(with = "crate::plan::duration_serde")]
    pub max_duration: Duration,
}

impl Config {
    /// The e-value at which a test decides in the first count of a step: `1 / alpha_0`
    /// ([`betting::spend`]).
    pub fn boundary(&self) -> f64 {
        self.boundary_at(0)
    }

    /// The e-value at which the FAIL test decides in the `count`-th count of a step (0 first):
    /// its part of `alpha`, all but the change detector's [`detector::SHARE`].
    pub fn boundary_at(&self, count: u32) -> f64 {
        1.0 / betting::spend(self.alpha * (1.0 - detector::SHARE), count)
    }

    /// The wealth at which the change detector alarms in the `count`-th count of a step: its
    /// [`detector::SHARE`] of `alpha`.
    pub fn detector_boundary_at(&self, count: u32) -> f64 {
        1.0 / betting::spend(self.alpha * detector::SHARE, count)
    }

    /// The e-value at which the PASS test decides in the `count`-th count of a step.
    pub fn pass_boundary_at(&self, count: u32) -> f64 {
        1.0 / betting::spend(self.alpha_pass, count)
    }
}

/// What the counts say, as of now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// New is worse than old by more than the tolerance (with the chosen confidence).
    Fail,
    /// New is not worse by more than the tolerance, on at least `min_events` per side.
    Pass,
    /// Not decided yet.
    Deciding,
    /// Not decided within `max_duration`: a person decides.
    Inconclusive,
}

/// A judgment with its evidence (what is journaled and charted).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Evidence {
    pub decision: Decision,
    /// Both sides' counts since the count began, as read.
    pub new: Counts,
    pub old: Counts,
    /// The FAIL test's e-value now.
    pub fail_e: f64,
    /// The highest FAIL e-value of this count, this one included.
    pub fail_peak: f64,
    /// The PASS test's e-value now.
    pub pass_e: f64,
    /// `1 / alpha_k`: where this count's FAIL test decides.
    pub boundary: f64,
    /// Where this count's PASS test decides (`1 / alpha_pass_k`).
    pub pass_boundary: f64,
    /// New's failure rate over old's since the count began (`None` while a side has no events
    /// or old no failures): the estimate a person reads.
    pub ratio: Option<f64>,
    /// What this reading did: an interval weighed, merged into the next, or held.
    pub look: Look,
    /// Intervals with failures weighed in this count, and their failures.
    pub intervals: u32,
    pub failures: f64,
    /// Counts before this one in the step (resumes, tolerance changes).
    pub count: u32,
    /// The change detector's wealth now, and where it alarms ([`detector`]).
    pub detector: f64,
    pub detector_boundary: f64,
    /// The change detector's alarm in this count, if it has alarmed: the FAIL is its when the
    /// FAIL test's peak stayed below its boundary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alarm: Option<detector::Alarm>,
}

impl Evidence {
    /// The evidence in words: the estimate against the tolerance, the counts, then both
    /// statistics against the boundary.
    pub fn describe(&self, cfg: &Config) -> String {
        let side = |c: &Counts| {
            format!(
                "{}/{} failed ({})",
                c.failures.round(),
                c.events.round(),
                c.rate()
                    .map_or("-".to_string(), |r| format!("{:.3}%", r * 100.0))
            )
        };
        let ratio = self.ratio.map_or("-".to_string(), |r| format!("{r:.2}"));
        let look = match self.look {
            Look::WentDown => "; a count went down since the last interval (a counter reset \
                               or an extrapolated read): held, the interval is weighed once \
                               the counts are past it"
                .to_string(),
            Look::Merged => "; a side had no new events: merged into the next interval".into(),
            _ => String::new(),
        };
        let count = if self.count > 0 {
            format!(
                " (count {} of the step: a smaller share of its budget)",
                self.count + 1
            )
        } else {
            String::new()
        };
        format!(
            "ratio {ratio} (tolerance {:.2}); new {}, old {}; {} intervals with {} failures \
             weighed{look}; worse e-value {} (peak {}), not-worse e-value {}, boundary {}{}; \
             change detector {} (alarm at {}){count}",
            1.0 + cfg.tolerance,
            side(&self.new),
            side(&self.old),
            self.intervals,
            self.failures.round(),
            short(self.fail_e),
            short(self.fail_peak),
            short(self.pass_e),
            short(self.boundary),
            if (self.pass_boundary - self.boundary).abs() > 1e-9 * self.boundary {
                format!(" (PASS at {})", short(self.pass_boundary))
            } else {
                String::new()
            },
            short(self.detector),
            short(self.detector_boundary),
        )
    }

    /// The change detector's alarm, when the FAIL is the detector's alone (the FAIL test's
    /// peak below its boundary).
    pub fn detector_fail(&self) -> Option<detector::Alarm> {
        self.alarm
            .filter(|_| self.decision == Decision::Fail && self.fail_peak < self.boundary)
    }
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{v:.2e}")
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Judge one reading: `new` and `old` are both sides' counts since the count began, read at
/// the same moment, `elapsed` into it; `ledger` is what the judge remembers of the count
/// (`None` at its first reading; one bet under another tolerance or `alpha` moved on with
/// [`Ledger::under`] by the caller). Returns the ledger to remember and the evidence.
///
/// # Guarantees
/// - If new's failure rate is at most `1 + tolerance` times old's in every interval (in the
///   sense of `docs/design.md`: new's expected share of an interval's failures is at most what
///   that interval's traffic split allows; bursts and a random rate allowed), the probability
///   that any reading of the step, at any times and however many, decides FAIL is at most
///   `alpha`, summed over all the step's counts ([`betting::spend`]): the FAIL test's and the
///   change detector's ([`detector`]) FAILs together, each on its part of `alpha`.
/// - Symmetrically for PASS when new is worse than that, at most `alpha_pass`; never a PASS
///   before each side has `min_events` events and `min_failures` failures were weighed.
/// - A FAIL stays a FAIL for the rest of the step: across a resume (a new count) and a
///   tolerance change alike.
/// - A negative count, or a count lower than at the last interval, weighs nothing and says so.
pub fn weigh(
    cfg: &Config,
    ledger: Option<Ledger>,
    new: Counts,
    old: Counts,
    elapsed: Duration,
) -> (Ledger, Evidence) {
    let start = ledger.unwrap_or_else(|| Ledger::first(cfg.tolerance, cfg.alpha, cfg.alpha_pass));
    let (mut next, look) = start.look(1.0 + cfg.tolerance, new, old);
    let boundary = cfg.boundary_at(next.count);
    let pass_boundary = cfg.pass_boundary_at(next.count);
    let detector_boundary = cfg.detector_boundary_at(next.count);
    let at_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    next.detector = match look {
        Look::Weighed { share, allowed } => {
            let edge = (share - allowed) / allowed;
            next.detector.step(Some(edge), at_ms, detector_boundary)
        }
        Look::NoFailures => next.detector.step(None, at_ms, detector_boundary),
        Look::Merged | Look::WentDown => next.detector,
    };
    next.failed |= next.fail_peak >= boundary || next.detector.alarm.is_some();
    let enough = new.events >= cfg.min_events as f64
        && old.events >= cfg.min_events as f64
        && next.failures >= cfg.min_failures as f64;
    let pass_e = next.pass_e();
    let decision = if next.failed {
        Decision::Fail
    } else if enough && pass_e >= pass_boundary {
        Decision::Pass
    } else if elapsed >= cfg.max_duration {
        Decision::Inconclusive
    } else {
        Decision::Deciding
    };
    let ratio = match (new.rate(), old.rate()) {
        (Some(n), Some(o)) if o > 0.0 && n >= 0.0 => Some(n / o),
        _ => None,
    };
    let evidence = Evidence {
        decision,
        new,
        old,
        fail_e: next.fail_e(),
        fail_peak: next.fail_peak,
        pass_e,
        boundary,
        pass_boundary,
        ratio,
        look,
        intervals: next.intervals,
        failures: next.failures,
        count: next.count,
        detector: next.detector.wealth,
        detector_boundary,
        alarm: next.detector.alarm,
    };
    (next, evidence)
}

/// Since when a judge counts in a migration's step: the step's start (`entered_ms`), or the
/// migration's last commit in it (`updated_ms`: a pause or a resume; a transition enters a new
/// step). A person who resumes has dealt with what came before: the test starts again.
pub fn counting_from(entered_ms: i64, updated_ms: i64) -> i64 {
    entered_ms.max(updated_ms)
}

/// `query` with each `$step` replaced by the step's age, `elapsed_ms` into it, in whole seconds
/// (at least `1s`): `increase(x_total[$step])` counts since the step began.
pub fn at_step(query: &str, elapsed_ms: i64) -> String {
    if !query.contains("$step") {
        return query.to_string();
    }
    let secs = (elapsed_ms / 1000).max(1);
    query.replace("$step", &format!("{secs}s"))
}

#[cfg(test)]
mod tests;
