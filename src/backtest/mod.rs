//! `migrate plan backtest`: what a plan would have done over a past window of real metrics.
//!
//! - [`table`] — the readings of the window, instant by instant (pure: decoding a Prometheus
//!   range answer, evaluating a recorded scrape history).
//! - [`simulate`] — the rehearsal (pure): the controller's own gate judgment, decision and
//!   state machine stepped through the window as the daemon's rounds would have.
//! - [`report`] — the answer: timeline, breaches, each gate's shares, the verdict line (pure).
//! - [`windows`] — `--windows`: the range cut into windows, each rehearsed on its own (pure).
//! - [`readings`] — the IO edge: Prometheus `query_range` (batched under the server's point
//!   limit), scrape histories from a store.
//!
//! Nothing here touches a broker, writes a store or publishes a routing document.

mod error;
pub mod readings;
pub mod report;
pub mod simulate;
pub mod table;
pub mod windows;

use crate::machine::{Ladder, State};
use crate::plan::{Check, Plan};

pub use error::BacktestError;
pub use simulate::{GateShare, Rehearsal, gate_shares, rehearse};
pub use table::{Instants, Outage, Readings};

/// One `--what-if GATE=THRESHOLD`: the threshold of every gate named `gate` (`pass_if`'s number,
/// a compare gate's `ratio`, `require_peak`'s `at_least`) becomes `threshold`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WhatIf {
    pub gate: String,
    pub threshold: f64,
}

impl WhatIf {
    /// `GATE=THRESHOLD` (a gate name may hold `=`: the last one splits).
    ///
    /// # Errors
    /// No `=`, an empty name, or a threshold that is not a finite number.
    pub fn parse(text: &str) -> Result<WhatIf, BacktestError> {
        let Some((gate, number)) = text.rsplit_once('=') else {
            return Err(BacktestError::WhatIf(format!(
                "{text:?}: want GATE=THRESHOLD, e.g. --what-if \"errors quiet=0.02\""
            )));
        };
        let gate = gate.trim();
        if gate.is_empty() {
            return Err(BacktestError::WhatIf(format!("{text:?}: no gate name")));
        }
        match number.trim().parse::<f64>() {
            Ok(threshold) if threshold.is_finite() => Ok(WhatIf {
                gate: gate.to_string(),
                threshold,
            }),
            _ => Err(BacktestError::WhatIf(format!(
                "{text:?}: {number:?} is not a number"
            ))),
        }
    }
}

/// `plan` with the thresholds `changes` name.
///
/// # Errors
/// A change that names no gate of the plan (the names are listed).
pub fn apply_what_if(plan: &Plan, changes: &[WhatIf]) -> Result<Plan, BacktestError> {
    let mut plan = plan.clone();
    for change in changes {
        let mut found = false;
        for phase in &mut plan.phases {
            for gate in phase.exit.iter_mut().chain(phase.guard.iter_mut()) {
                if gate.name != change.gate {
                    continue;
                }
                found = true;
                match &mut gate.check {
                    Check::Threshold { value, .. } => *value = change.threshold,
                    Check::Compare { ratio, .. } => *ratio = change.threshold,
                    Check::Judge(j) => j.config.tolerance = change.threshold,
                    // No threshold: every producer must have applied the step's generation.
                    Check::RoutingApplied { .. } => {}
                }
            }
            if change.gate == "require_peak"
                && let Some(r) = &mut phase.require_peak
            {
                found = true;
                r.at_least = Some(change.threshold);
            }
        }
        if !found {
            let names: Vec<String> = plan
                .phases
                .iter()
                .flat_map(|p| p.gate_keys())
                .filter(|(name, _)| *name != "require_deploy")
                .map(|(name, _)| format!("{name:?}"))
                .collect();
            return Err(BacktestError::WhatIf(format!(
                "no gate named {:?} in the plan; its gates: {}",
                change.gate,
                names.join(", ")
            )));
        }
    }
    Ok(plan)
}

/// The state a rehearsal starts in: `text` (`planned`, `synthetic`, `slices[2]`), entered at
/// the window's start; `planned` when `None` (as if `migrate init` ran then with the daemon
/// running: its first round enters the first phase at once).
///
/// # Errors
/// A state the plan does not have, or `complete` (nothing to rehearse).
pub fn start_state(plan: &Plan, text: Option<&str>) -> Result<State, BacktestError> {
    let ladder = Ladder::of(plan);
    let Some(text) = text else {
        return Ok(State::Planned);
    };
    match State::parse(text) {
        Some(s) if s != State::Complete && ladder.rungs().contains(&s) => Ok(s),
        _ => {
            let states: Vec<String> = ladder
                .rungs()
                .iter()
                .filter(|s| **s != State::Complete)
                .map(ToString::to_string)
                .collect();
            Err(BacktestError::StartAt(format!(
                "{text:?} is not a step of this plan to start from; its steps: {}",
                states.join(", ")
            )))
        }
    }
}

/// What a person should know of `step_ms` for this plan: a `for:` gate whose `for_max_gap` is
/// shorter than the step restarts its streak at every round and never passes (as it would live,
/// with rounds that far apart).
pub fn step_notes(plan: &Plan, step_ms: i64) -> Vec<String> {
    let mut notes = Vec::new();
    for phase in &plan.phases {
        for gate in phase.exit.iter().chain(&phase.guard) {
            if gate.hold_for.is_none() {
                continue;
            }
            let gap = gate.for_max_gap.unwrap_or(crate::plan::DEFAULT_FOR_MAX_GAP);
            if step_ms > crate::time::millis(gap) {
                notes.push(format!(
                    "gate `{}` ({}): the step {} is longer than its for_max_gap {}: its `for:` restarts at every round and never passes; use a shorter --step",
                    gate.name,
                    phase.kind.as_str(),
                    crate::time::human_ms(step_ms),
                    crate::time::human(gap)
                ));
            }
        }
    }
    notes
}

/// The whole answer of a rehearsal: the plan as written, and as changed by `--what-if`.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub rehearsal: Rehearsal,
    pub shares: Vec<GateShare>,
    /// The changes and the rehearsal with them (`None`: no `--what-if`).
    pub what_if: Option<(Vec<WhatIf>, Rehearsal, Vec<GateShare>)>,
    /// When a source could not be reached: its gates had no data, through no fault of the plan.
    pub outages: Vec<Outage>,
}

/// Rehearse `plan` from `start_at` over the readings, and again with `changes` if any.
///
/// # Errors
/// A change that names no gate.
pub fn backtest(
    plan: &Plan,
    readings: &Readings,
    start_at: State,
    changes: &[WhatIf],
) -> Result<Outcome, BacktestError> {
    let what_if = if changes.is_empty() {
        None
    } else {
        let changed = apply_what_if(plan, changes)?;
        Some((
            changes.to_vec(),
            rehearse(&changed, readings, start_at),
            gate_shares(&changed, readings),
        ))
    };
    Ok(Outcome {
        rehearsal: rehearse(plan, readings, start_at),
        shares: gate_shares(plan, readings),
        what_if,
        outages: readings.outages(),
    })
}

#[cfg(test)]
mod tests;
