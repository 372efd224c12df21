//! The migration state machine: pure, no IO, no clock.
//!
//! States run `planned → consume_dual → synthetic → slices[0..n] → drain → disconnect → complete`
//! (phases the plan leaves out are skipped), with `paused` as an overlay. [`handle`] takes the
//! current [`Snapshot`] and a [`Command`] and returns the [`Transition`] to persist, or why the
//! command is illegal. Gates are not its business: the controller only sends `Advance` once the
//! gates allow it (or the user forced it).
//!
//! # Guarantees
//! - Routing follows docs/design.md#the-phases for every state ([`Ladder::routing`]).
//! - `Rollback` undoes exactly the last `Advance` (one rung down the ladder).
//! - Nothing leaves `complete`; entering it needs the migration's name as confirmation.
//! - `paused` blocks `Advance`, never `Rollback`, `Abort` or `Resume`.

use std::fmt;

use serde::Serialize;

use crate::plan::{PhaseKind, Plan};

/// Where a migration stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    Planned,
    ConsumeDual,
    Synthetic,
    /// The 0-based index into the `slices` phase's `steps`.
    Slices(usize),
    Drain,
    Disconnect,
    Complete,
}

impl State {
    /// The state's name in JSON, the store and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            State::Planned => "planned",
            State::ConsumeDual => "consume_dual",
            State::Synthetic => "synthetic",
            State::Slices(_) => "slices",
            State::Drain => "drain",
            State::Disconnect => "disconnect",
            State::Complete => "complete",
        }
    }

    /// The step index in `slices`, `None` elsewhere.
    pub fn step(self) -> Option<usize> {
        match self {
            State::Slices(i) => Some(i),
            _ => None,
        }
    }

    /// The inverse of (`name`, `step`).
    pub fn from_parts(name: &str, step: Option<usize>) -> Option<State> {
        Some(match (name, step) {
            ("planned", None) => State::Planned,
            ("consume_dual", None) => State::ConsumeDual,
            ("synthetic", None) => State::Synthetic,
            ("slices", Some(i)) => State::Slices(i),
            ("drain", None) => State::Drain,
            ("disconnect", None) => State::Disconnect,
            ("complete", None) => State::Complete,
            _ => return None,
        })
    }

    /// A state as [`fmt::Display`] writes it (`synthetic`, `slices[2]`), and nothing else.
    pub fn parse(text: &str) -> Option<State> {
        match text
            .strip_prefix("slices[")
            .and_then(|r| r.strip_suffix(']'))
        {
            Some(index) => {
                let canonical = !index.is_empty()
                    && index.bytes().all(|b| b.is_ascii_digit())
                    && (index == "0" || !index.starts_with('0'));
                if !canonical {
                    return None;
                }
                State::from_parts("slices", Some(index.parse().ok()?))
            }
            None => State::from_parts(text, None),
        }
    }

    /// The plan phase whose gates apply in this state.
    pub fn phase(self) -> Option<PhaseKind> {
        match self {
            State::Planned | State::Complete => None,
            State::ConsumeDual => Some(PhaseKind::ConsumeDual),
            State::Synthetic => Some(PhaseKind::Synthetic),
            State::Slices(_) => Some(PhaseKind::Slices),
            State::Drain => Some(PhaseKind::Drain),
            State::Disconnect => Some(PhaseKind::Disconnect),
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Slices(i) => write!(f, "slices[{i}]"),
            other => f.write_str(other.name()),
        }
    }
}

pub use crate::routing::Side;

/// What a state publishes (docs/design.md#the-phases).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Routing {
    /// The brokers consumers read.
    pub consume: Vec<Side>,
    /// Slices whose producers send to the new broker: `slice < slices_migrated`.
    pub slices_migrated: u32,
    pub slices_total: u32,
}

/// The states of one plan, in order: the rungs that `advance` climbs and `rollback` descends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ladder {
    rungs: Vec<State>,
    steps: Vec<u32>,
    slices: u32,
}

impl Ladder {
    /// The ladder of a compiled plan.
    pub fn of(plan: &Plan) -> Ladder {
        Ladder::new(
            plan.phases
                .iter()
                .map(|p| p.kind)
                .collect::<Vec<_>>()
                .as_slice(),
            plan.steps(),
            plan.slices,
        )
    }

    /// A ladder from the phases present, the slice steps and the slice total.
    pub fn new(phases: &[PhaseKind], steps: &[u32], slices: u32) -> Ladder {
        let mut rungs = vec![State::Planned];
        for kind in PhaseKind::ALL {
            if !phases.contains(&kind) {
                continue;
            }
            match kind {
                PhaseKind::ConsumeDual => rungs.push(State::ConsumeDual),
                PhaseKind::Synthetic => rungs.push(State::Synthetic),
                PhaseKind::Slices => rungs.extend((0..steps.len()).map(State::Slices)),
                PhaseKind::Drain => rungs.push(State::Drain),
                PhaseKind::Disconnect => rungs.push(State::Disconnect),
            }
        }
        rungs.push(State::Complete);
        Ladder {
            rungs,
            steps: steps.to_vec(),
            slices,
        }
    }

    /// Every state of this plan, in order.
    pub fn rungs(&self) -> &[State] {
        &self.rungs
    }

    /// Whether `state` is a valid state for this plan (an aborted migration may sit in
    /// `consume_dual` even when the plan leaves that phase out).
    pub fn knows(&self, state: State) -> bool {
        match state {
            State::Slices(i) => i < self.steps.len(),
            State::ConsumeDual => true,
            other => self.rungs.contains(&other),
        }
    }

    /// The next rung above `state`.
    pub fn next(&self, state: State) -> Option<State> {
        self.rungs.iter().copied().find(|s| *s > state)
    }

    /// The rung below `state`. Never `planned` from past `consume_dual`: once producers may
    /// have sent to the new broker, consumers keep reading it (a plan without `consume_dual`
    /// rolls back to a dual-read state, not to `planned`).
    pub fn prev(&self, state: State) -> Option<State> {
        let below = self.rungs.iter().rev().copied().find(|s| *s < state)?;
        if below == State::Planned && state > State::ConsumeDual {
            return Some(State::ConsumeDual);
        }
        Some(below)
    }

    /// Where `abort` lands: every slice back to old at once, consumers still reading both.
    pub fn abort_target(&self) -> State {
        match self.prev(State::Slices(0)) {
            Some(State::Synthetic) => State::Synthetic,
            _ => State::ConsumeDual,
        }
    }

    /// What `state` publishes.
    pub fn routing(&self, state: State) -> Routing {
        let all = self.slices;
        let (consume, migrated) = match state {
            State::Planned => (vec![Side::Old], 0),
            State::ConsumeDual | State::Synthetic => (vec![Side::Old, Side::New], 0),
            State::Slices(i) => (
                vec![Side::Old, Side::New],
                self.steps.get(i).copied().unwrap_or(all),
            ),
            State::Drain => (vec![Side::Old, Side::New], all),
            State::Disconnect | State::Complete => (vec![Side::New], all),
        };
        Routing {
            consume,
            slices_migrated: migrated,
            slices_total: all,
        }
    }
}

/// A state plus the paused overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Snapshot {
    pub state: State,
    pub paused: bool,
}

/// What a person (or the daemon) asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// One rung up. `confirm` must equal the migration's name to enter `complete`.
    Advance {
        confirm: Option<String>,
    },
    /// One rung down; `then_pause` is set by a guard breach (no flapping back up).
    Rollback {
        then_pause: bool,
    },
    Pause,
    Resume,
    /// Every slice back to old at once; consumers keep reading both; paused.
    Abort,
}

impl Command {
    /// The command's name in the journal.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Advance { .. } => "advance",
            Command::Rollback { .. } => "rollback",
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::Abort => "abort",
        }
    }
}

/// A legal move, to be persisted and published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub command: &'static str,
    pub from: Snapshot,
    pub to: Snapshot,
    /// What `to` publishes.
    pub routing: Routing,
}

/// Why a command is illegal in the current state. Nothing changes when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// `complete` is final.
    #[error(
        "the migration is complete: nothing leaves complete (the old broker may be decommissioned)"
    )]
    Complete,
    /// Advance while paused.
    #[error("the migration is paused: resume it first (`migrate resume NAME`)")]
    Paused,
    /// Entering `complete` without the name as confirmation.
    #[error(
        "advancing to complete is the point of no return: repeat the migration's name with --confirm {name}"
    )]
    ConfirmationRequired { name: String },
    /// Rollback from `planned`.
    #[error("nothing to roll back: the migration is still planned")]
    NothingToRollBack,
    /// Pause while paused.
    #[error("already paused")]
    AlreadyPaused,
    /// Resume while not paused.
    #[error("not paused: nothing to resume")]
    NotPaused,
    /// Abort before anything moved.
    #[error("nothing to abort in state {state}: no traffic has moved yet")]
    NothingToAbort { state: State },
    /// The stored state does not belong to the plan (e.g. a step index past the steps).
    #[error("state {state} does not exist in this plan")]
    UnknownState { state: State },
}

/// Decide the transition for `command` from `current`.
///
/// # Errors
/// A [`MachineError`] when the command is illegal for the state; nothing is to change then.
pub fn handle(
    ladder: &Ladder,
    name: &str,
    current: Snapshot,
    command: &Command,
) -> Result<Transition, MachineError> {
    let state = current.state;
    if !ladder.knows(state) {
        return Err(MachineError::UnknownState { state });
    }
    if state == State::Complete {
        return Err(MachineError::Complete);
    }
    let to = match command {
        Command::Advance { confirm } => {
            if current.paused {
                return Err(MachineError::Paused);
            }
            let next = ladder.next(state).unwrap_or(State::Complete);
            if next == State::Complete && confirm.as_deref() != Some(name) {
                return Err(MachineError::ConfirmationRequired {
                    name: name.to_string(),
                });
            }
            Snapshot {
                state: next,
                paused: false,
            }
        }
        Command::Rollback { then_pause } => {
            let prev = ladder.prev(state).ok_or(MachineError::NothingToRollBack)?;
            Snapshot {
                state: prev,
                paused: current.paused || *then_pause,
            }
        }
        Command::Pause => {
            if current.paused {
                return Err(MachineError::AlreadyPaused);
            }
            Snapshot {
                state,
                paused: true,
            }
        }
        Command::Resume => {
            if !current.paused {
                return Err(MachineError::NotPaused);
            }
            Snapshot {
                state,
                paused: false,
            }
        }
        Command::Abort => {
            if state == State::Planned {
                return Err(MachineError::NothingToAbort { state });
            }
            Snapshot {
                state: ladder.abort_target().min(state),
                paused: true,
            }
        }
    };
    Ok(Transition {
        command: command.name(),
        from: current,
        to,
        routing: ladder.routing(to.state),
    })
}

#[cfg(test)]
mod tests;
