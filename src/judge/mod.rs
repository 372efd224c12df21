//! The `judge` gate's statistics: is the new route's failure rate worse than the old route's by
//! more than a tolerance, asked of counts read at the same moment, with an always-valid
//! sequential test whose error rates hold however often it looks. Pure: no IO, no clock.
//!
//! The model and the formulas are in `docs/design.md` ("The judge: an always-valid comparison of
//! the two routes"). In short: given the `n = f_new + f_old` failures seen since the step began,
//! each failure is on the new side with probability `p(r) = r·ρ / (r·ρ + 1)`, where `ρ` is the
//! ratio of the two sides' events and `r` the ratio of their failure rates. With
//! `r0 = 1 + tolerance`:
//! - **FAIL** tests `H0: r <= r0` with a mixture of likelihood ratios over a grid of `r > r0`
//!   ([`weigh`]'s `fail_e`); a nonnegative supermartingale under `H0`, so by Ville's inequality it
//!   ever reaches `1/alpha` with probability at most `alpha`, whenever and however often it is
//!   read. The gate remembers the highest value seen in the step: a FAIL stays.
//! - **PASS** tests the mirror hypothesis `H0': r >= r0` with the mixture over `r < r0`
//!   (`pass_e`), and needs `min_events` on each side besides: "not worse", with the same error
//!   bound, never on no evidence.
//! - Anything else is still deciding; past `max_duration` it is inconclusive, for a person.

pub mod latency;

use std::time::Duration;

use serde::Serialize;

/// How many alternatives each mixture weighs (log-spaced ratios, equal weights).
const GRID: usize = 40;
/// The mixtures' alternatives span `r0 · SPAN^±1` (a failure rate up to 64 times the other's).
const SPAN: f64 = 64.0;
/// The smallest alternative is `r0 · NEAREST^±1` away from the boundary.
const NEAREST: f64 = 1.02;

/// One side's counts since the step began.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
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

/// What a judge asks, from the plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Config {
    /// New may be this much worse than old (`0.2`: a failure rate up to 1.2 times old's) before
    /// it is a FAIL.
    pub tolerance: f64,
    /// The error bound of each decision (`1 - confidence`): a false FAIL when new is not worse,
    /// a false PASS when it is.
    pub alpha: f64,
    /// Events each side must have seen before a PASS.
    pub min_events: u64,
    /// Undecided after this long in the step: inconclusive, a person decides.
    #[serde(with = "crate::plan::duration_serde")]
    pub max_duration: Duration,
}

impl Config {
    /// The e-value at which a test decides: `1 / alpha`.
    pub fn boundary(&self) -> f64 {
        1.0 / self.alpha
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
    pub new: Counts,
    pub old: Counts,
    /// The FAIL test's e-value now.
    pub fail_e: f64,
    /// The highest FAIL e-value seen in the step, this one included (what decides a FAIL).
    pub fail_peak: f64,
    /// The PASS test's e-value now.
    pub pass_e: f64,
    /// `1 / alpha`.
    pub boundary: f64,
    /// New's failure rate over old's (`None` while a side has no events or old no failures).
    pub ratio: Option<f64>,
}

impl Evidence {
    /// The evidence in words: counts, the estimate, both statistics against the boundary.
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
        format!(
            "new {}, old {}: ratio {ratio} (tolerance {:.2}); worse e-value {} (peak {}), not-worse \
             e-value {}, boundary {}",
            side(&self.new),
            side(&self.old),
            1.0 + cfg.tolerance,
            short(self.fail_e),
            short(self.fail_peak),
            short(self.pass_e),
            short(self.boundary)
        )
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

/// `ln(sum(exp(x)) / len)`, without overflow.
fn log_mean_exp(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = xs.clone().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + (x - max).exp(), n + 1));
    max + (sum / n as f64).ln()
}

/// The log e-value of the mixture over alternatives `r0 · step^k` (`k = 1..=GRID`, `step > 1`
/// for "worse", `< 1` for "not worse") against `r0`, on `f_new` of `n` failures with event
/// ratio `rho`.
fn log_mixture(f_new: f64, f_old: f64, rho: f64, r0: f64, toward_worse: bool) -> f64 {
    let p = |r: f64| r * rho / (r * rho + 1.0);
    let p0 = p(r0);
    let (lo, hi) = (NEAREST.ln(), SPAN.ln());
    let sign = if toward_worse { 1.0 } else { -1.0 };
    let alternatives = (0..GRID).map(move |k| {
        let t = lo + (hi - lo) * k as f64 / (GRID - 1) as f64;
        let p1 = p(r0 * (sign * t).exp());
        f_new * (p1 / p0).ln() + f_old * ((1.0 - p1) / (1.0 - p0)).ln()
    });
    log_mean_exp(alternatives)
}

/// Judge `new` against `old` (counts since the step began, read at the same moment), `elapsed`
/// into the step, given the highest FAIL e-value seen earlier in the step (`fail_peak`, 1 at
/// first).
///
/// # Guarantees
/// - If new's failure rate is at most `1 + tolerance` times old's, the probability that any
///   evaluation of the step, at any times and however many, decides FAIL is at most `alpha`
///   (Ville's inequality; with the events of both sides in a steady proportion, see the design).
/// - Symmetrically for PASS when new is worse than that; and never a PASS before each side has
///   `min_events` events.
/// - A FAIL stays a FAIL for the rest of the step (the peak only grows); checking at a subset of
///   the same instants decides FAIL no earlier.
pub fn weigh(
    cfg: &Config,
    new: Counts,
    old: Counts,
    fail_peak: f64,
    elapsed: Duration,
) -> Evidence {
    let clean = |c: Counts| Counts {
        events: c.events.max(0.0),
        failures: c.failures.clamp(0.0, c.events.max(0.0)),
    };
    let (new, old) = (clean(new), clean(old));
    let r0 = 1.0 + cfg.tolerance;
    let (fail_e, pass_e) = if new.events > 0.0 && old.events > 0.0 {
        let rho = new.events / old.events;
        (
            log_mixture(new.failures, old.failures, rho, r0, true).exp(),
            log_mixture(new.failures, old.failures, rho, r0, false).exp(),
        )
    } else {
        (1.0, 1.0)
    };
    let fail_peak = fail_peak.max(fail_e);
    let boundary = cfg.boundary();
    let enough = new.events >= cfg.min_events as f64 && old.events >= cfg.min_events as f64;
    let decision = if fail_peak >= boundary {
        Decision::Fail
    } else if enough && pass_e >= boundary {
        Decision::Pass
    } else if elapsed >= cfg.max_duration {
        Decision::Inconclusive
    } else {
        Decision::Deciding
    };
    let ratio = match (new.rate(), old.rate()) {
        (Some(n), Some(o)) if o > 0.0 => Some(n / o),
        _ => None,
    };
    Evidence {
        decision,
        new,
        old,
        fail_e,
        fail_peak,
        pass_e,
        boundary,
        ratio,
    }
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
