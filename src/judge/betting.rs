//! The judge's test: an e-process over intervals that bets, in each interval between two
//! readings, on the share of that interval's failures that fell on the new route, against the
//! share the interval's own traffic split allows. Pure: no IO, no clock.
//!
//! One interval is one observation. Under `H0: new's failure rate <= (1 + tolerance) × old's`
//! the expected new share of an interval's failures is at most
//! `p_i = ρ_i·r0 / (1 + ρ_i·r0)`, with `ρ_i` the interval's own new/old event ratio and
//! `r0 = 1 + tolerance`. Each bet multiplies the wealth by `1 + c·(S_i − p_i)/p_i` (FAIL) or
//! `1 + c·(p_i − S_i)/(1 − p_i)` (PASS) for a fraction `c` in `(0, 1)`: never negative, expected
//! at most 1 under the tested hypothesis whatever the distribution of `S_i` (bursts, a random
//! rate), so each wealth is a nonnegative supermartingale and Ville's inequality bounds the
//! chance that it ever reaches `1/alpha`. A burst is one interval: it moves the wealth by a
//! bounded factor (at most `1 + c·(1 − p_i)/p_i`), never by dozens of trials. The wealths of
//! [`FRACTIONS`] are averaged (a mixture of supermartingales is one). The argument, its
//! assumptions and its cost in speed are in `docs/design.md` ("The judge").

use serde::{Deserialize, Serialize};

use super::detector::Detector;

/// One side's counts since the step began.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Messages handled (successes and failures).
    pub events: f64,
    /// Of those, failures.
    pub failures: f64,
}

impl Counts {
    /// The failure rate (`None` without events).
    pub fn rate(&self) -> Option<f64> {
        (self.events > 0.0).then(|| self.failures / self.events)
    }
}

/// How many bet sizes the mixture averages.
pub const BETS: usize = 8;

/// The bet sizes, as fractions of the largest bet that cannot lose everything.
pub const FRACTIONS: [f64; BETS] = [0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.75, 0.9];

/// Counts below this (in absolute value) are rounding noise of a counter read twice.
const NOISE: f64 = 1e-9;

/// What a judge remembers between two readings of a count: where the last weighed interval
/// ended, both tests' wealths, the highest FAIL wealth, and the counts of its budget.
///
/// # Guarantees
/// A ledger only moves forward: [`Ledger::look`] weighs the interval since its baseline or
/// merges it into the next; nothing in it is recomputed from cumulative totals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Both sides' counts (since the count began) at the end of the last weighed interval.
    pub seen_new: Counts,
    pub seen_old: Counts,
    /// `ln` of each FAIL bet's wealth.
    pub log_fail: [f64; BETS],
    /// `ln` of each PASS bet's wealth.
    pub log_pass: [f64; BETS],
    /// The highest FAIL e-value (the mixture) since the count began.
    pub fail_peak: f64,
    /// Intervals weighed (with at least one failure).
    pub intervals: u32,
    /// Failures weighed, both sides.
    pub failures: f64,
    /// The tolerance and `alpha` the wealths were bet under (a change starts a new count:
    /// [`Ledger::under`]).
    pub tolerance: f64,
    #[serde(default)]
    pub alpha: f64,
    /// The false-PASS bound it was bet under (`None`: a ledger from before it had its own,
    /// the same as `alpha`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha_pass: Option<f64>,
    /// Counts that came before this one in the step (pauses and resumes, tolerance changes):
    /// each spends its own share of the step's budget ([`spend`]).
    pub count: u32,
    /// A FAIL was reached in the step, in this count or an earlier one: it stays.
    pub failed: bool,
    /// A latency judge's boundaries `[b, T]`, chosen at its first weighed reading and kept for
    /// the count, so that every interval counts beyond the same boundaries.
    #[serde(default)]
    pub le: Option<[f64; 2]>,
    /// The change detector of this count ([`super::detector`]); a ledger stored before it
    /// existed reads as a fresh one.
    #[serde(default)]
    pub detector: Detector,
}

impl Ledger {
    /// A fresh ledger at `tolerance` and `alpha`, for the `count`-th count of the step.
    pub fn new(tolerance: f64, alpha: f64, count: u32, failed: bool) -> Ledger {
        Ledger {
            seen_new: Counts::default(),
            seen_old: Counts::default(),
            log_fail: [0.0; BETS],
            log_pass: [0.0; BETS],
            fail_peak: 1.0,
            intervals: 0,
            failures: 0.0,
            tolerance,
            alpha,
            alpha_pass: None,
            count,
            failed,
            le: None,
            detector: Detector::default(),
        }
    }

    /// A fresh ledger for the first count of a step at `tolerance`, with a false FAIL bound
    /// `alpha` and a false PASS bound `alpha_pass`.
    pub fn first(tolerance: f64, alpha: f64, alpha_pass: f64) -> Ledger {
        Ledger {
            alpha_pass: Some(alpha_pass),
            ..Ledger::new(tolerance, alpha, 0, false)
        }
    }

    /// The next count of the same step (after a resume, or a change of tolerance or
    /// `alpha`): fresh wealths, a smaller share of the budget, and a FAIL already reached kept.
    pub fn next_count(&self, tolerance: f64, alpha: f64) -> Ledger {
        Ledger {
            alpha_pass: self.alpha_pass,
            ..Ledger::new(tolerance, alpha, self.count.saturating_add(1), self.failed)
        }
    }

    /// This ledger if it was bet under `tolerance` and the bounds `alpha` (false FAIL) and
    /// `alpha_pass` (false PASS), else its next count (a plan change mid-step: what was bet
    /// under another hypothesis or boundary does not carry over, a FAIL already reached does).
    pub fn under(&self, tolerance: f64, alpha: f64, alpha_pass: f64) -> Ledger {
        let bet_pass = self.alpha_pass.unwrap_or(self.alpha);
        if self.tolerance == tolerance && self.alpha == alpha && bet_pass == alpha_pass {
            *self
        } else {
            Ledger {
                alpha_pass: Some(alpha_pass),
                ..self.next_count(tolerance, alpha)
            }
        }
    }

    /// The FAIL test's e-value now (the mixture of its bets).
    pub fn fail_e(&self) -> f64 {
        mean_exp(&self.log_fail)
    }

    /// The PASS test's e-value now.
    pub fn pass_e(&self) -> f64 {
        mean_exp(&self.log_pass)
    }

    /// Weigh the interval from the baseline to `new`, `old` (counts since the count began),
    /// under tolerance `r0 - 1`, or say why it is merged into the next.
    pub fn look(&self, r0: f64, new: Counts, old: Counts) -> (Ledger, Look) {
        let d = |now: Counts, seen: Counts| Counts {
            events: now.events - seen.events,
            failures: now.failures - seen.failures,
        };
        let (dn, dold) = (d(new, self.seen_new), d(old, self.seen_old));
        let went_down = [dn.events, dn.failures, dold.events, dold.failures]
            .iter()
            .any(|v| *v < -NOISE)
            || dn.failures > dn.events + NOISE
            || dold.failures > dold.events + NOISE;
        if went_down {
            return (*self, Look::WentDown);
        }
        if dn.events <= NOISE || dold.events <= NOISE {
            return (*self, Look::Merged);
        }
        let mut next = *self;
        next.seen_new = new;
        next.seen_old = old;
        let (f_new, f_old) = (dn.failures.max(0.0), dold.failures.max(0.0));
        let n = f_new + f_old;
        if n <= NOISE {
            return (next, Look::NoFailures);
        }
        let rho = dn.events / dold.events;
        let p = rho * r0 / (1.0 + rho * r0);
        let share = f_new / n;
        for (k, c) in FRACTIONS.iter().enumerate() {
            next.log_fail[k] += (1.0 + c * (share - p) / p).ln();
            next.log_pass[k] += (1.0 + c * (p - share) / (1.0 - p)).ln();
        }
        next.intervals = next.intervals.saturating_add(1);
        next.failures += n;
        next.fail_peak = next.fail_peak.max(next.fail_e());
        (next, Look::Weighed { share, allowed: p })
    }
}

/// What one reading did to the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Look {
    /// An interval with failures, weighed: new's share of them, and the most `H0` allows.
    Weighed { share: f64, allowed: f64 },
    /// An interval with events on both sides and no failure: no bet (factor 1).
    NoFailures,
    /// A side had no new events (a step shorter than its scrape interval, a side idle): the
    /// interval is merged into the next.
    Merged,
    /// A count went down since the baseline (a counter reset the source did not handle, an
    /// extrapolation): nothing is weighed until the counts are past the baseline again.
    WentDown,
}

/// The share of a step's budget `alpha` that its `count`-th count (0 first) spends: 3/4 to the
/// first, then `alpha/4 · 6/(π²·k²)` to the `k`-th resumed count; they add up to `alpha`, so
/// no number of resumes buys more than the step's budget.
pub fn spend(alpha: f64, count: u32) -> f64 {
    if count == 0 {
        0.75 * alpha
    } else {
        let k = f64::from(count);
        0.25 * alpha * 6.0 / (std::f64::consts::PI.powi(2) * k * k)
    }
}

/// `mean(exp(x))`, without overflow for large `x`.
fn mean_exp(xs: &[f64; BETS]) -> f64 {
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return if max.is_nan() { f64::NAN } else { 0.0 };
    }
    let sum: f64 = xs.iter().map(|x| (x - max).exp()).sum();
    (max + (sum / BETS as f64).ln()).exp()
}
