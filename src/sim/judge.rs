//! `migrate judge simulate`: both routes simulated, seeded, and judged through the gate code the
//! daemon runs ([`crate::judge_verdict::evaluate_judge`] for the judge,
//! [`crate::gate::evaluate`] for a plain threshold gate `new < old × (1 + tolerance) for: 1m` on the last minute's failure rates),
//! on the same data: how often each decides wrongly, and how soon each decides.
//!
//! In the judge's model (no departure: [`World::default`]) each side draws, per check interval,
//! its events (Poisson, `traffic × every`) and its failures (binomial, of those events, at its
//! rate): no message is simulated one by one. With a departure ([`World`]: bursts,
//! overdispersion, a moving share, scrapes, a regression mid-step) both sides are drawn second
//! by second and seen as the daemon would see them ([`world`]); the gates are the same code.
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

/// Run the scenario in the judge's own model ([`simulate_in`] with no departure).
///
/// # Errors
/// A scenario out of range (its flag named).
pub fn simulate(s: &Scenario) -> Result<Report, SimulateError> {
    simulate_in(s, &World::default())
}

/// What one scenario draws from, in every run.
struct Plan {
    /// The judge's model: each side's events per check.
    events: Option<Poisson<f64>>,
    new_rate: f64,
    /// With a departure: the world drawn second by second.
    world: Option<Draws>,
}

/// One run's counters: drawn per check in the judge's model, or second by second in the world
/// and seen at its scrapes.
enum Source {
    Exact([Counts; 2]),
    World(Truth, Scraper),
}

impl Source {
    fn new(rng: &mut Xoshiro256PlusPlus, plan: &Plan, w: &World) -> Source {
        match &plan.world {
            Some(d) => {
                let truth = Truth::new(rng, d);
                Source::World(truth, Scraper::new(rng, w))
            }
            None => Source::Exact([Counts::default(); 2]),
        }
    }

    /// Both sides' counters as seen at `now_s` (`[new, old]`, since the step began) and what
    /// the judge reads.
    fn advance(
        &mut self,
        rng: &mut Xoshiro256PlusPlus,
        plan: &Plan,
        s: &Scenario,
        (now_s, read): (u64, Read),
    ) -> Result<([Counts; 2], Observation), SimulateError> {
        let seen = match self {
            Source::Exact(total) => {
                let dn = draw(rng, plan.events.as_ref(), plan.new_rate)?;
                let dold = draw(rng, plan.events.as_ref(), s.base_rate)?;
                for (t, d) in total.iter_mut().zip([dn, dold]) {
                    t.events += d.events;
                    t.failures += d.failures;
                }
                *total
            }
            Source::World(truth, scraper) => {
                let d = plan.world.as_ref().ok_or_else(|| {
                    SimulateError::Invalid("internal: a world without its draws".into())
                })?;
                while truth.at_s < now_s {
                    truth.second(rng, d)?;
                    scraper.after(truth.at_s, truth.counts);
                }
                if read == Read::Increase {
                    let judged = match scraper.increase(now_s) {
                        Some([new, old]) => Observation::Counts { new, old },
                        None => unavailable("fewer than two scrapes in the step"),
                    };
                    return Ok((scraper.seen, judged));
                }
                scraper.seen
            }
        };
        let [new, old] = seen;
        Ok((seen, Observation::Counts { new, old }))
    }
}

fn unavailable(why: &str) -> Observation {
    Observation::Unavailable(crate::gate::Unread::new(
        crate::gate::NoDataCause::Empty,
        why,
    ))
}

/// Run the scenario in a world departing from the judge's model as `w` says.
///
/// # Errors
/// A scenario out of range (its flag named).
pub fn simulate_in(s: &Scenario, w: &World) -> Result<Report, SimulateError> {
    check(s)?;
    w.check(s)?;
    if let Some(q) = s.quantile {
        return latency::simulate(s, q);
    }
    let plan = Plan {
        events: Poisson::new(s.traffic * s.every.as_secs_f64()).ok(),
        new_rate: (s.base_rate * s.ratio).min(1.0),
        world: (!w.is_off()).then(|| Draws::new(s, w)),
    };
    let worse = s.ratio > 1.0 + s.config.tolerance;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(s.seed);
    let (mut judged, mut thresholded) = (Vec::new(), Vec::new());
    for _ in 0..s.runs {
        let (j, t) = one_run(s, w, &plan, &mut rng)?;
        judged.push(j);
        thresholded.push(t);
    }
    Ok(report(s, w, &judged, &thresholded, worse))
}

/// One run: both gates' tracks.
fn one_run(
    s: &Scenario,
    w: &World,
    plan: &Plan,
    rng: &mut Xoshiro256PlusPlus,
) -> Result<(Track, Track), SimulateError> {
    let judge = judge_check(s.config);
    let threshold = threshold_gate(s.config.tolerance);
    let every_ms = crate::time::millis(s.every);
    let checks = (s.duration.as_millis() / s.every.as_millis()) as u64;
    let window = (THRESHOLD_FOR.as_millis() / s.every.as_millis()).max(1) as usize;
    let mut source = Source::new(rng, plan, w);
    let since = w.regression_at.map_or(0.0, |r| r.as_secs_f64());
    let (mut j, mut t) = (Track::since(since), Track::since(since));
    // The counters as seen at the last `window` checks and the one before them.
    let mut seen_at: VecDeque<[Counts; 2]> = VecDeque::with_capacity(window + 2);
    seen_at.push_back([Counts::default(); 2]);
    for k in 1..=checks {
        let now_ms = k as i64 * every_ms;
        let at_s = now_ms as f64 / 1000.0;
        let now_s = u64::try_from(now_ms / 1000).unwrap_or(0);
        let (seen, observation) = source.advance(rng, plan, s, (now_s, w.read))?;
        let [new, old] = seen;
        seen_at.push_back(seen);
        if seen_at.len() > window + 1 {
            seen_at.pop_front();
        }
        let min = s.config.min_events as f64;
        let early = new.events < min || old.events < min;
        let e = crate::judge_verdict::evaluate_judge(&judge, &observation, j.memory, now_ms, 0);
        j.memory = e.memory;
        j.see(e.verdict, at_s, early);
        // The threshold gate reads the last minute's failure rates, as `rate(...[1m])`
        // quotients would (on the counters as seen).
        let [then_new, then_old] = seen_at.front().copied().unwrap_or_default();
        let (ne, nf) = (
            new.events - then_new.events,
            new.failures - then_new.failures,
        );
        let (oe, of) = (
            old.events - then_old.events,
            old.failures - then_old.failures,
        );
        let observation = if ne > 0.0 && oe > 0.0 {
            Observation::Pair {
                new: nf / ne,
                old: of / oe,
            }
        } else {
            unavailable("no events in the window")
        };
        t.threshold(&threshold, &observation, now_ms, early);
    }
    Ok((j, t))
}

mod latency;
mod scenario;
mod world;

pub use scenario::{Outcome, Read, Report, Scenario, ShareMoves, SimulateError, World};
use scenario::{THRESHOLD_FOR, Track, report, threshold_gate};
use world::{Draws, Scraper, Truth};
