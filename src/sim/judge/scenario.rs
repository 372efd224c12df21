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
pub(super) struct Track {
    pub(super) memory: Memory,
    first: Option<(Verdict, f64)>,
    failed: bool,
    early_pass: bool,
}

impl Track {
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

/// The value at quantile `q` of sorted `xs` (nearest rank).
pub(super) fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let rank = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
    Some(xs[rank - 1])
}

pub(super) fn outcome(tracks: &[Track], worse: bool) -> Outcome {
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

/// Both gates' outcomes over the runs.
pub(super) fn report(s: &Scenario, judged: &[Track], thresholded: &[Track], worse: bool) -> Report {
    Report {
        scenario: *s,
        judge: outcome(judged, worse),
        threshold: outcome(thresholded, worse),
    }
}
