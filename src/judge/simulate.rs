//! `migrate judge simulate`: both routes simulated, seeded, and judged through the gate code the
//! daemon runs ([`crate::gate::evaluate_judge`] for the judge, [`crate::gate::evaluate`] for a
//! plain threshold gate `new < old × (1 + tolerance) for: 1m` on the last minute's failure rates),
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
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Binomial, Distribution, Poisson};
use serde::Serialize;

use crate::gate::{self, Memory, Observation, Verdict};
use crate::judge::{Config, Counts};
use crate::plan::{Check, Gate, JudgeCheck, JudgeForm, JudgeSide};

/// The threshold gate's `for:` and its rates' window.
const THRESHOLD_FOR: Duration = Duration::from_secs(60);

/// What to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scenario {
    /// Messages per second on each side.
    pub traffic: f64,
    /// The old side's failure rate (0.01: 1%).
    pub base_rate: f64,
    /// New's failure rate over old's.
    pub ratio: f64,
    /// How often both gates are checked.
    #[serde(with = "crate::plan::duration_serde")]
    pub every: Duration,
    /// How long each run lasts.
    #[serde(with = "crate::plan::duration_serde")]
    pub duration: Duration,
    pub runs: u32,
    pub seed: u64,
    /// The judge's settings (its `tolerance` is the threshold gate's too).
    pub config: Config,
    /// The latency form's quantile (`None`: the counts form; `base_rate` unused otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantile: Option<f64>,
}

/// Why a scenario cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimulateError {
    #[error("{0}")]
    Invalid(String),
}

/// How one gate fared over the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// With new not worse than the tolerance (`ratio <= 1 + tolerance`): the share of runs that
    /// failed at any check of the run (0 when new is worse).
    pub false_fail_rate: f64,
    /// With new worse than the tolerance: the share of runs whose first decision was a pass (0
    /// when new is not worse).
    pub false_pass_rate: f64,
    /// Shares of runs whose first decision was a FAIL, a PASS, or that never decided.
    pub fail_rate: f64,
    pub pass_rate: f64,
    pub undecided_rate: f64,
    /// Seconds to the first decision, over the runs that decided (`None`: none did).
    pub median_decision_s: Option<f64>,
    pub p90_decision_s: Option<f64>,
    /// Runs that passed while a side had fewer than `min_events` events.
    pub passes_before_min_events: u32,
}

/// Both gates on the same runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub scenario: Scenario,
    pub judge: Outcome,
    pub threshold: Outcome,
}

/// One gate's record over a run.
#[derive(Debug, Clone, Copy, Default)]
struct Track {
    memory: Memory,
    first: Option<(Verdict, f64)>,
    failed: bool,
    early_pass: bool,
}

impl Track {
    /// The threshold gate's evaluation of `observation` at `now_ms`, seen.
    fn threshold(&mut self, gate: &Gate, observation: &Observation, now_ms: i64, early: bool) {
        let e = gate::evaluate(gate, observation, self.memory, now_ms);
        self.memory = e.memory;
        self.see(e.verdict, now_ms as f64 / 1000.0, early);
    }

    fn see(&mut self, verdict: Verdict, at_s: f64, early: bool) {
        match verdict {
            Verdict::Soaking | Verdict::NoData => {}
            Verdict::Fail => {
                self.failed = true;
                self.first.get_or_insert((verdict, at_s));
            }
            Verdict::Pass => {
                self.early_pass |= early;
                self.first.get_or_insert((verdict, at_s));
            }
        }
    }
}

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

/// The threshold gate `new < old × (1 + tolerance) for: 1m`.
fn threshold_gate(tolerance: f64) -> Gate {
    Gate {
        name: "threshold".into(),
        source: "sim".into(),
        check: Check::Compare {
            new: "failure rate new [1m]".into(),
            old: "failure rate old [1m]".into(),
            ratio: 1.0 + tolerance,
            absolute: 0.0,
        },
        hold_for: Some(THRESHOLD_FOR),
        for_max_gap: Some(crate::plan::DEFAULT_FOR_MAX_GAP),
        min_samples: 1,
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

/// The value at quantile `q` of sorted `xs` (nearest rank).
fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let rank = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
    Some(xs[rank - 1])
}

fn outcome(tracks: &[Track], worse: bool) -> Outcome {
    let n = tracks.len().max(1) as f64;
    let share = |f: &dyn Fn(&Track) -> bool| tracks.iter().filter(|t| f(t)).count() as f64 / n;
    let first_is = |v: Verdict| move |t: &Track| t.first.is_some_and(|(f, _)| f == v);
    let mut times: Vec<f64> = tracks.iter().filter_map(|t| t.first.map(|f| f.1)).collect();
    times.sort_by(f64::total_cmp);
    Outcome {
        false_fail_rate: if worse { 0.0 } else { share(&|t| t.failed) },
        false_pass_rate: if worse {
            share(&first_is(Verdict::Pass))
        } else {
            0.0
        },
        fail_rate: share(&first_is(Verdict::Fail)),
        pass_rate: share(&first_is(Verdict::Pass)),
        undecided_rate: share(&|t| t.first.is_none()),
        median_decision_s: quantile(&times, 0.5),
        p90_decision_s: quantile(&times, 0.9),
        passes_before_min_events: tracks.iter().filter(|t| t.early_pass).count() as u32,
    }
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
            let e = gate::evaluate_judge(
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
                Observation::Unavailable("no events in the window".into())
            };
            t.threshold(&threshold, &observation, now_ms, early);
        }
        judged.push(j);
        thresholded.push(t);
    }
    Ok(report(s, &judged, &thresholded, worse))
}

/// Both gates' outcomes over the runs.
fn report(s: &Scenario, judged: &[Track], thresholded: &[Track], worse: bool) -> Report {
    Report {
        scenario: *s,
        judge: outcome(judged, worse),
        threshold: outcome(thresholded, worse),
    }
}

mod latency;
