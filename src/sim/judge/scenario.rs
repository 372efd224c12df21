//! What `judge simulate` is asked and answers, shared by its two forms (counts in [`super`],
//! latency in [`super::latency`]): the scenario, the errors, one run's track, the report.

use std::time::Duration;

use serde::Serialize;

use crate::gate::{self, Memory, Observation, Verdict};
use crate::judge::Config;
use crate::plan::{Check, Gate};

/// The threshold gate's `for:` and its rates' window.
pub(super) const THRESHOLD_FOR: Duration = Duration::from_secs(60);

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

/// How the judge reads the counters when they are scraped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Read {
    /// The raw counters as of each side's last scrape, as the daemon reads them: exact
    /// increments; a reading with no new scrape on a side is merged into the next interval.
    #[default]
    Raw,
    /// What `sum(increase(x[$step]))` would return: each side's increase over its scrapes
    /// inside the step, extrapolated to the step's edges as Prometheus does (for comparison).
    Increase,
}

/// New's share of the traffic moving: stretches in which a heavy key's batches land on new
/// while a shared dependency is slow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ShareMoves {
    /// New's share of both routes' traffic during a stretch (0.5 outside them).
    pub share: f64,
    /// Both sides' failure rates are multiplied by this during a stretch.
    pub slowdown: f64,
    /// A stretch's mean length (exponential); the gaps between stretches have a mean of four
    /// stretches, so a fifth of the time is in a stretch on average.
    #[serde(with = "crate::plan::duration_serde")]
    pub stretch: Duration,
}

/// The mean gap between two stretches, in stretches.
pub(super) const GAP_STRETCHES: f64 = 4.0;

/// The departures from the judge's model, all off by default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct World {
    /// Bursts per hour on each side, independently, Poisson in time (0: none).
    pub bursts_per_hour: f64,
    /// Failed messages in a burst (added to the side's events and failures).
    pub burst_size: u64,
    /// The variance of a side's failures per second over the binomial's, at the base traffic
    /// and rate (1: none): the second's failure rate is the rate times a gamma draw of mean 1.
    pub dispersion: f64,
    /// The same gamma draw for both sides each second (a shared dependency); otherwise each
    /// side draws its own.
    pub dispersion_shared: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_moves: Option<ShareMoves>,
    /// Counters seen only at scrapes this far apart (each side at its own random phase).
    #[serde(
        with = "crate::plan::duration_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub scrape: Option<Duration>,
    pub read: Read,
    /// New's failure rate is old's until then, `ratio` times it after; times to a decision are
    /// measured from it.
    #[serde(
        with = "crate::plan::duration_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub regression_at: Option<Duration>,
}

impl Default for World {
    fn default() -> World {
        World {
            bursts_per_hour: 0.0,
            burst_size: 50,
            dispersion: 1.0,
            dispersion_shared: false,
            share_moves: None,
            scrape: None,
            read: Read::Raw,
            regression_at: None,
        }
    }
}

impl World {
    /// No departure: the runs are drawn as the judge's model says, per check.
    pub fn is_off(&self) -> bool {
        self.bursts_per_hour == 0.0
            && self.dispersion == 1.0
            && self.share_moves.is_none()
            && self.scrape.is_none()
            && self.regression_at.is_none()
    }

    pub(super) fn check(&self, s: &Scenario) -> Result<(), SimulateError> {
        let bad = |what: String| Err(SimulateError::Invalid(what));
        if !(self.bursts_per_hour.is_finite() && self.bursts_per_hour >= 0.0) {
            return bad(format!(
                "--bursts must be at least 0, got {}",
                self.bursts_per_hour
            ));
        }
        if !(self.dispersion.is_finite() && self.dispersion >= 1.0) {
            return bad(format!(
                "--dispersion must be at least 1, got {}",
                self.dispersion
            ));
        }
        if let Some(m) = self.share_moves {
            if !(m.share > 0.0 && m.share < 1.0) {
                return bad(format!("--share-moves must be in (0, 1), got {}", m.share));
            }
            if !(m.slowdown.is_finite() && m.slowdown > 0.0) || m.stretch.is_zero() {
                return bad("--share-slowdown must be above 0 and --share-stretch too".into());
            }
        }
        let whole = |d: Duration| d.subsec_nanos() == 0 && !d.is_zero();
        if self.scrape.is_some_and(|d| !whole(d)) {
            return bad("--scrape must be a whole number of seconds, at least 1s".into());
        }
        if self.read == Read::Increase && self.scrape.is_none() {
            return bad("--read increase needs --scrape (increase() reads scraped samples)".into());
        }
        if self.regression_at.is_some_and(|r| r >= s.duration) {
            return bad("--regression-at must be before the run's end (--duration)".into());
        }
        if !self.is_off() {
            if s.quantile.is_some() {
                return bad("the world's departures model failure counts, not --quantile".into());
            }
            if !whole(s.every) {
                return bad("with a departure, --every must be a whole number of seconds".into());
            }
        }
        Ok(())
    }
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
    /// Seconds to the first decision, median and 90th percentile over all runs; with a
    /// regression mid-step, seconds from its start to the first FAIL at or after it (the gate
    /// read throughout, as a guard is). A run that never decided (never failed) counts as
    /// censored at its end, so a quantile that falls on such runs is the time left at the end,
    /// `censored` (read: more than that).
    pub median_decision_s: f64,
    pub median_censored: bool,
    pub p90_decision_s: f64,
    pub p90_censored: bool,
    /// With a regression mid-step: the share of runs whose first decision came before it
    /// started (an exit gate would have decided on the route before the regression).
    pub decided_before_regression: f64,
    /// Runs that passed while a side had fewer than `min_events` events.
    pub passes_before_min_events: u32,
}

/// Since when, and until when, a run's time to a decision is counted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    /// The regression's start (`None`: none mid-step).
    pub(super) origin_s: Option<f64>,
    /// The run's end.
    pub(super) end_s: f64,
}

impl Timing {
    pub(super) fn of(s: &Scenario, regression_at: Option<Duration>) -> Timing {
        Timing {
            origin_s: regression_at.map(|r| r.as_secs_f64()),
            end_s: s.duration.as_secs_f64(),
        }
    }
}

/// Both gates on the same runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub scenario: Scenario,
    /// The departures from the judge's model simulated.
    pub world: World,
    pub judge: Outcome,
    pub threshold: Outcome,
}

/// One gate's record over a run.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Track {
    pub(super) memory: Memory,
    first: Option<(Verdict, f64)>,
    failed: bool,
    early_pass: bool,
    /// With a regression mid-step: its start, and the first FAIL at or after it.
    since_s: f64,
    caught: Option<f64>,
}

impl Track {
    /// A track whose FAILs count as catching a regression from `since_s` on.
    pub(super) fn since(since_s: f64) -> Track {
        Track {
            since_s,
            ..Track::default()
        }
    }

    /// The threshold gate's evaluation of `observation` at `now_ms`, seen.
    pub(super) fn threshold(
        &mut self,
        gate: &Gate,
        observation: &Observation,
        now_ms: i64,
        early: bool,
    ) {
        let e = gate::evaluate(gate, observation, self.memory, now_ms);
        self.memory = e.memory;
        self.see(e.verdict, now_ms as f64 / 1000.0, early);
    }

    pub(super) fn see(&mut self, verdict: Verdict, at_s: f64, early: bool) {
        match verdict {
            Verdict::Soaking | Verdict::NoData => {}
            Verdict::Fail => {
                self.failed = true;
                if at_s >= self.since_s {
                    self.caught.get_or_insert(at_s);
                }
                self.first.get_or_insert((verdict, at_s));
            }
            Verdict::Pass => {
                self.early_pass |= early;
                self.first.get_or_insert((verdict, at_s));
            }
        }
    }
}

/// The threshold gate `new < old × (1 + tolerance) for: 1m`.
pub(super) fn threshold_gate(tolerance: f64) -> Gate {
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

/// A quantile of all runs' times, undecided runs counted at `end` (censored): `(seconds,
/// censored)`.
fn censored_quantile(times: &[Option<f64>], q: f64, end: f64) -> (f64, bool) {
    let mut decided: Vec<f64> = times.iter().flatten().copied().collect();
    decided.sort_by(f64::total_cmp);
    match crate::rank::censored(&decided, times.len() - decided.len(), q) {
        Some(x) => (x, false),
        None => (end, true),
    }
}

pub(super) fn outcome(tracks: &[Track], worse: bool, timing: Timing) -> Outcome {
    let n = tracks.len().max(1) as f64;
    let share = |f: &dyn Fn(&Track) -> bool| tracks.iter().filter(|t| f(t)).count() as f64 / n;
    let first_is = |v: Verdict| move |t: &Track| t.first.is_some_and(|(f, _)| f == v);
    // With a regression mid-step, the time from its start to the first FAIL at or after it (a
    // gate read throughout, as a guard is); else the time to the first decision.
    let times: Vec<Option<f64>> = tracks
        .iter()
        .map(|t| match timing.origin_s {
            Some(origin) => t.caught.map(|c| c - origin),
            None => t.first.map(|f| f.1),
        })
        .collect();
    let left = timing.end_s - timing.origin_s.unwrap_or(0.0);
    let (median, median_censored) = censored_quantile(&times, 0.5, left);
    let (p90, p90_censored) = censored_quantile(&times, 0.9, left);
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
        median_decision_s: median,
        median_censored,
        p90_decision_s: p90,
        p90_censored,
        decided_before_regression: match timing.origin_s {
            Some(origin) => share(&|t| t.first.is_some_and(|f| f.1 < origin)),
            None => 0.0,
        },
        passes_before_min_events: tracks.iter().filter(|t| t.early_pass).count() as u32,
    }
}

/// Both gates' outcomes over the runs.
pub(super) fn report(
    s: &Scenario,
    world: &World,
    judged: &[Track],
    thresholded: &[Track],
    worse: bool,
) -> Report {
    let timing = Timing::of(s, world.regression_at);
    Report {
        scenario: *s,
        world: *world,
        judge: outcome(judged, worse, timing),
        threshold: outcome(thresholded, worse, timing),
    }
}
