//! What the daemon does with one round of evaluations: pure, no IO, no clock.
//!
//! Like a reconcile step, [`decide`] is idempotent: given the same stored state and the same
//! readings it returns the same [`Decision`], and the controller applies it through the state
//! machine (whose optimistic concurrency makes a repeated application a conflict, never a second
//! transition).

use crate::controller::evaluate::GateReport;
use crate::gate::Verdict;
use crate::machine::State;
use crate::plan::{BreachAction, GateKind, Plan};

/// What to do after a round of evaluations.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing to do: the migration is complete.
    Done,
    /// A guard failed: act as the plan says, now.
    Breach {
        action: BreachAction,
        /// The failing guards, with their readings, for the journal and the notification.
        guards: Vec<String>,
    },
    /// A judge (an exit gate's or a guard's) could not decide within its `max_duration`: pause
    /// for a person, who advances (`--force`) or rolls back; a resume starts its test again.
    Undecided {
        /// The undecided judges, with their reasons, for the journal and the notification.
        gates: Vec<String>,
    },
    /// Every exit gate passes and the minimum time is met: move one step.
    Advance,
    /// It could move, but a person must say so (paused, `auto_advance: false`, or `complete`
    /// needs its confirmation).
    ReadyForHuman { why: String },
    /// Not yet, and why.
    Wait { blockers: Vec<String> },
}

/// A breach of the built-in stale-producer guard alone pauses where the migration is (an alert
/// stays an alert): the new route is not at fault, and rolling the step back would hide the
/// producer that stopped following the routing rather than name it.
fn stale_only_pauses(action: BreachAction, failing: &[&GateReport]) -> BreachAction {
    let stale_only = failing.iter().all(|g| g.name == crate::plan::STALE_GUARD);
    match action {
        BreachAction::Rollback if stale_only => BreachAction::Pause,
        other => other,
    }
}

/// Decide from the stored state and fresh evaluations.
///
/// `blockers` is what [`crate::gate::ready_to_advance`] said; `confirmed_complete` is whether the
/// daemon's operator confirmed `complete` for this migration (`--confirm-complete NAME`).
pub fn decide(
    plan: &Plan,
    state: State,
    paused: bool,
    next: Option<State>,
    gates: &[GateReport],
    blockers: Vec<String>,
    confirmed_complete: bool,
) -> Decision {
    if state == State::Complete {
        return Decision::Done;
    }
    let failing: Vec<&GateReport> = gates
        .iter()
        .filter(|g| g.kind == GateKind::Guard && g.eval.verdict == Verdict::Fail)
        .collect();
    // A breach acts at once, except while paused: a paused migration waits for a person (after a
    // breach-triggered rollback the readings of the step it left still linger in rate windows;
    // acting on them again would cascade).
    if !failing.is_empty() && !paused {
        let action = state
            .phase()
            .and_then(|k| plan.phase(k))
            .map(|p| p.on_breach)
            .unwrap_or_default();
        return Decision::Breach {
            action: stale_only_pauses(action, &failing),
            guards: failing
                .iter()
                .map(|g| format!("{} ({})", g.name, g.eval.reason))
                .collect(),
        };
    }
    // An INCONCLUSIVE judge never lets the migration advance by itself (its gate holds the
    // advance), and it pauses it so that a person is asked; paused, it waits like any hold.
    let undecided: Vec<String> = gates
        .iter()
        .filter(|g| crate::gate::is_inconclusive(&g.eval))
        .map(|g| format!("{} ({})", g.name, g.eval.reason))
        .collect();
    if !undecided.is_empty() && !paused {
        return Decision::Undecided { gates: undecided };
    }
    if !blockers.is_empty() {
        return Decision::Wait { blockers };
    }
    if paused {
        return Decision::ReadyForHuman {
            why: "ready to advance, but paused: `migrate resume` first".into(),
        };
    }
    if !plan.auto_advance {
        return Decision::ReadyForHuman {
            why: "ready to advance (the plan sets auto_advance: false): `migrate advance`".into(),
        };
    }
    if next == Some(State::Complete) && !confirmed_complete {
        return Decision::ReadyForHuman {
            why: format!(
                "ready to complete, the point of no return: `migrate advance {0} --confirm {0}` (or run the daemon with --confirm-complete {0})",
                plan.name
            ),
        };
    }
    Decision::Advance
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{Evaluation, Memory};

    fn guard(name: &str, verdict: Verdict) -> GateReport {
        GateReport {
            phase: "slices".into(),
            name: name.into(),
            kind: GateKind::Guard,
            source: "world".into(),
            query: String::new(),
            eval: Evaluation {
                verdict,
                value: Some(1.0),
                old_value: None,
                reason: String::new(),
                samples: 1,
                soak: None,
                cause: None,
                memory: Memory::default(),
            },
            largest_partition: None,
            evaluated_at_ms: 0,
            memory_read: None,
        }
    }

    /// Issue 58: a breach of the stale-producer guard alone pauses a phase whose `on_breach`
    /// rolls back (plans/local.yaml's slices); with another guard failing beside it the phase's
    /// action stands. Through [`decide`], which picks the failing guards.
    #[test]
    fn a_stale_producer_breach_alone_pauses_instead_of_rolling_back() {
        let plan = match crate::plan::compile(
            include_str!("../../plans/local.yaml"),
            None,
            &crate::plan::compile::LoopbackResolve,
        ) {
            Ok(c) => c.plan,
            Err(e) => panic!("{e:?}"),
        };
        let stale = guard(crate::plan::STALE_GUARD, Verdict::Fail);
        let other_passes = guard("error rate", Verdict::Pass);
        let other_fails = guard("error rate", Verdict::Fail);
        let action = |gates: &[GateReport]| match decide(
            &plan,
            State::Slices(1),
            false,
            None,
            gates,
            vec![],
            false,
        ) {
            Decision::Breach { action, .. } => action,
            other => panic!("{other:?}"),
        };
        assert_eq!(action(&[stale.clone(), other_passes]), BreachAction::Pause);
        assert_eq!(
            action(&[stale.clone(), other_fails.clone()]),
            BreachAction::Rollback
        );
        assert_eq!(action(&[other_fails]), BreachAction::Rollback);
        assert_eq!(
            stale_only_pauses(BreachAction::Alert, &[&stale]),
            BreachAction::Alert
        );
    }
}
