//! The judge's change detector (issue 55): a regression that starts late in a step is caught
//! about as fast as one that starts at its beginning. Pure: no IO, no clock.
//!
//! The judge's FAIL test bets from the count's first interval on: over 40 minutes of equal routes
//! its wealth shrinks (each bet loses a little on every interval where new's share of the failures
//! is below what the tolerance allows), and a regression that starts then must first win that
//! back. The detector is an e-detector (Shin, Ramdas & Rinaldo, "E-detectors: a nonparametric
//! framework for sequential change detection", 2022) of the Shiryaev-Roberts kind over the same
//! per-interval bets as the judge ([`super::betting`]): a weighted sum, over every candidate start
//! `j` of the change, of the wealth of a FAIL bet begun at `j`,
//!
//! ```text
//! R_t = Σ_{j<=t} w_j · Π_{i=j..t} (1 + λ_i·(S_i − p_i)/p_i) = (R_{t-1} + w_t) · (1 + λ_t·(S_t − p_t)/p_t)
//! ```
//!
//! with `Σ w_j <= 1` ([`weight`]) and each bet `λ_i` in `[0, MAX_BET]` chosen from the intervals
//! before `i` only (a plug-in of the recent evidence: [`Detector::bet`]), so that on equal routes
//! it bets about nothing and the wealths of all the starts before a change stay near 1. It alarms
//! when `R_t >= 1/alpha_d`.
//!
//! # The bound
//! Under the judge's `H0` (new's expected share of each interval's failures at most `p_i`, given
//! the past: `docs/design.md`), each factor has conditional expectation at most 1, so
//! `E[R_t | past] <= R_{t-1} + w_t`, and `R_t + Σ_{j>t} w_j` is a nonnegative supermartingale
//! starting at `Σ w_j <= 1`. Ville's inequality: `P(∃ t: R_t >= 1/alpha_d) <= alpha_d`, over a
//! step of any length, however often it is read. The alarm counts as a FAIL against the same
//! budget as the judge's FAIL test: each judge×step's false-FAIL bound `alpha` is split, `SHARE`
//! to the detector and the rest to the FAIL test, so a false FAIL of either has probability at
//! most `alpha`.

use serde::{Deserialize, Serialize};

/// The detector's part of a judge×step's false-FAIL bound; the FAIL test keeps the rest.
pub const SHARE: f64 = 0.25;

/// How many candidate starts share the start weights about equally before they decay
/// ([`weight`]): one hour of 10-second readings.
pub const HORIZON: f64 = 360.0;

/// The largest bet, as a fraction of what cannot lose everything: a factor is at least `0.1`.
pub const MAX_BET: f64 = 0.9;

/// The weight of the newest interval in the plug-in's running means (about the last 8).
const SMOOTHING: f64 = 0.125;

/// A wealth never grows past this (an alarm long reached; no overflow).
const CAP: f64 = 1e200;

/// The weight of the `j`-th candidate start (1 first): `K / ((j + K − 1)(j + K))` with
/// `K =` [`HORIZON`]; about `1/K` for the first `K` starts, then decaying as `K/j²`. The first
/// `t` weights add up to `t / (t + K)`, all of them to 1.
pub fn weight(j: u32) -> f64 {
    let j = f64::from(j.max(1));
    HORIZON / ((j + HORIZON - 1.0) * (j + HORIZON))
}

/// What the detector remembers between readings, in the judge's ledger
/// ([`super::betting::Ledger`]), one per count of the step.
///
/// # Guarantees
/// [`Detector::step`] only moves forward; the bet of an interval depends on earlier intervals
/// only.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Detector {
    /// `R_t`, the weighted sum of the wealths of every candidate start.
    pub wealth: f64,
    /// The largest wealth of one start (unweighted: `max(C_{t-1}, 1) · factor`), for when the
    /// change began.
    pub run: f64,
    /// Since when (ms into the count) that start's wealth has run: the estimated change point.
    pub run_from_ms: u64,
    /// Running means of the recent intervals' `(S − p)/p` and its square (the plug-in bet).
    pub mean: f64,
    pub square: f64,
    /// Intervals weighed (candidate starts so far).
    pub starts: u32,
    /// When (ms into the count) the last interval that moved the baseline ended.
    pub last_ms: u64,
    /// When it alarmed, and since when the change ran then (ms into the count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alarm: Option<Alarm>,
}

/// A detector's alarm: when, and since when (the start of the winning bet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alarm {
    pub at_ms: u64,
    pub since_ms: u64,
}

impl Detector {
    /// The next interval's bet: the running mean of `(S − p)/p` over its running mean square
    /// (the growth-optimal fraction for a small edge), within `[0, MAX_BET]`; 0 on no evidence of
    /// new being worse.
    pub fn bet(&self) -> f64 {
        if self.square > 0.0 && self.mean > 0.0 {
            (self.mean / self.square).min(MAX_BET)
        } else {
            0.0
        }
    }

    /// After an interval that ended `at_ms` into the count: `Some(edge)` with `edge = (S − p)/p`
    /// when it had failures and was weighed, `None` when it moved the baseline without failures
    /// (nothing bet, the clock moves). Alarms when the wealth reaches `boundary`.
    pub fn step(&self, edge: Option<f64>, at_ms: u64, boundary: f64) -> Detector {
        let mut next = *self;
        next.last_ms = at_ms;
        let Some(x) = edge.filter(|x| x.is_finite()) else {
            return next;
        };
        let x = x.max(-1.0);
        let factor = 1.0 + self.bet() * x;
        next.starts = self.starts.saturating_add(1);
        next.wealth = ((self.wealth + weight(next.starts)) * factor).min(CAP);
        if self.run <= 1.0 {
            next.run_from_ms = self.last_ms;
            next.run = factor;
        } else {
            next.run = (self.run * factor).min(CAP);
        }
        next.mean = (1.0 - SMOOTHING) * self.mean + SMOOTHING * x;
        next.square = (1.0 - SMOOTHING) * self.square + SMOOTHING * x * x;
        if next.alarm.is_none() && next.wealth >= boundary {
            next.alarm = Some(Alarm {
                at_ms,
                since_ms: next.run_from_ms,
            });
        }
        next
    }
}

#[cfg(test)]
mod tests;
