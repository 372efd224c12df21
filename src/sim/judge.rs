//! `migrate judge simulate`: both routes simulated, seeded, and judged through the gate code the
//! daemon runs ([`crate::judge_verdict::evaluate_judge`] for the judge,
//! [`crate::gate::evaluate`] for a plain threshold gate `new < old × (1 + tolerance) for: 1m` on the last minute's failure rates),
//! on the same data: how often each decides wrongly, and how soon each decides.
//!
//! Per check interval each side draws its events (Poisson, `traffic × every`) and its failures
//! (binomial, of those events, at its rate): no message is simulated one by one.
//!
//! With a `quantile` the latency form is simulated instead ([`crate::judge::latency`]): each
//! side's latencies are lognormal (median 100 ms, σ 0.5; new's scaled by `ratio`), drawn per
//! interval into the buckets `10 ms × 1.1^k` (`k` = 0..=60) by successive binomials; the threshold
//! gate compares the last minute's `histogram_quantile` of both sides.

use std::collections::VecDeque;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Binomial, Distribution, Poisson};

use crate::gate::Observation;
use crate::judge::{Config, Counts};
use crate::plan::{JudgeCheck, JudgeForm, JudgeSide};

/// The judge gate the scenario's daemon would run.
fn judge_check(config: Config) -> JudgeCheck {
    let side = |route: &str| JudgeSide {
        events: format!("sum(increase(handled_total{{route=\"{route}\"}}[$step]))"),
        failures: format!("sum(increase(failed_total{{route=\"{route}\"}}[$step]))"),
    };
    JudgeCheck {
        form: JudgeForm::Counts {
            new: side("new"),
            old: side("old"),
        },
        config,
    }
}

fn check(s: &Scenario) -> Result<(), SimulateError> {
    let bad = |what: String| Err(SimulateError::Invalid(what));
    if !(s.traffic > 0.0 && s.traffic.is_finite()) {
        return bad(format!("--traffic must be above 0, got {}", s.traffic));
    }
    if !(s.ratio.is_finite() && s.ratio >= 0.0) {
        return bad(format!("--ratio must be at least 0, got {}", s.ratio));
    }
    if !(0.0..1.0).contains(&s.base_rate) || s.base_rate * s.ratio > 1.0 {
        return bad(format!(
            "--base-rate must be in [0, 1) and --base-rate × --ratio at most 1, got {} × {}",
            s.base_rate, s.ratio
        ));
    }
    if s.every.is_zero() || s.duration < s.every {
        return bad("--every must be above 0 and at most --duration".into());
    }
    if s.runs == 0 {
        return bad("--runs must be at least 1".into());
    }
    if s.quantile.is_some_and(|q| !(q > 0.0 && q < 1.0)) {
        return bad(format!(
            "--quantile must be above 0 and below 1, got {}",
            s.quantile.unwrap_or_default()
        ));
    }
    Ok(())
}

/// Draw one side's events and failures for one interval.
fn draw(
    rng: &mut Xoshiro256PlusPlus,
    events: Option<&Poisson<f64>>,
    rate: f64,
) -> Result<Counts, SimulateError> {
    let n = events.map_or(0.0, |d| d.sample(rng));
    let failures = Binomial::new(n as u64, rate)
        .map_err(|e| SimulateError::Invalid(format!("failure rate {rate}: {e}")))?
        .sample(rng) as f64;
    Ok(Counts {
        events: n,
        failures,
    })
}

/// Run the scenario.
///
/// # Errors
/// A scenario out of range (its flag named).
pub fn simulate(s: &Scenario) -> Result<Report, SimulateError> {
    check(s)?;
    if let Some(q) = s.quantile {
        return latency::simulate(s, q);
    }
    let judge = judge_check(s.config);
    let threshold = threshold_gate(s.config.tolerance);
    let every_ms = crate::time::millis(s.every);
    let checks = (s.duration.as_millis() / s.every.as_millis()) as u64;
    let window = (THRESHOLD_FOR.as_millis() / s.every.as_millis()).max(1) as usize;
    let lambda = s.traffic * s.every.as_secs_f64();
    let events = Poisson::new(lambda).ok();
    let new_rate = (s.base_rate * s.ratio).min(1.0);
    let worse = s.ratio > 1.0 + s.config.tolerance;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(s.seed);
    let (mut judged, mut thresholded) = (Vec::new(), Vec::new());
    for _ in 0..s.runs {
        let (mut j, mut t) = (Track::default(), Track::default());
        let (mut new, mut old) = (Counts::default(), Counts::default());
        let mut recent: VecDeque<(Counts, Counts)> = VecDeque::with_capacity(window + 1);
        for k in 1..=checks {
            let dn = draw(&mut rng, events.as_ref(), new_rate)?;
            let dold = draw(&mut rng, events.as_ref(), s.base_rate)?;
            for (total, d) in [(&mut new, dn), (&mut old, dold)] {
                total.events += d.events;
                total.failures += d.failures;
            }
            recent.push_back((dn, dold));
            if recent.len() > window {
                recent.pop_front();
            }
            let now_ms = k as i64 * every_ms;
            let at_s = now_ms as f64 / 1000.0;
            let early =
                new.events < s.config.min_events as f64 || old.events < s.config.min_events as f64;
            let e = crate::judge_verdict::evaluate_judge(
                &judge,
                &Observation::Counts { new, old },
                j.memory,
                now_ms,
                0,
            );
            j.memory = e.memory;
            j.see(e.verdict, at_s, early);
            // The threshold gate reads the last minute's failure rates, as `rate(...[1m])`
            // quotients would.
            let sum = |pick: fn(&(Counts, Counts)) -> Counts| {
                recent
                    .iter()
                    .map(pick)
                    .fold((0.0, 0.0), |(e, f), c| (e + c.events, f + c.failures))
            };
            let (ne, nf) = sum(|c| c.0);
            let (oe, of) = sum(|c| c.1);
            let observation = if ne > 0.0 && oe > 0.0 {
                Observation::Pair {
                    new: nf / ne,
                    old: of / oe,
                }
            } else {
                Observation::Unavailable(crate::gate::Unread::new(
                    crate::gate::NoDataCause::Empty,
                    "no events in the window",
                ))
            };
            t.threshold(&threshold, &observation, now_ms, early);
        }
        judged.push(j);
        thresholded.push(t);
    }
    Ok(report(s, &judged, &thresholded, worse))
}

mod latency;
mod scenario;

pub use scenario::{Outcome, Report, Scenario, SimulateError};
use scenario::{THRESHOLD_FOR, Track, report, threshold_gate};
