//! A migration as the controller works on it: its record, its plan compiled.

use crate::machine::Ladder;
use crate::plan::Plan;
use crate::store::{GateRecord, MigrationRecord};

/// A migration with its plan compiled.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub record: MigrationRecord,
    pub plan: Plan,
    pub ladder: Ladder,
    /// The memory of the gates of the record's step, when it was read with the record (a
    /// daemon's round reads the fleet's at once: [`crate::store::JournalStore::fleet`]); `None` reads it from the
    /// store when the gates are evaluated.
    pub memory: Option<Vec<GateRecord>>,
}

impl Loaded {
    /// Since when its step counts `observe`, `min_duration` and `for:`: the step's start, or the
    /// migration's last resume in it ([`crate::judge::counting_from`]): time paused never counts.
    pub fn counting_from_ms(&self) -> i64 {
        crate::judge::counting_from(self.record.entered_at_ms, self.record.updated_at_ms)
    }

    /// The earliest instant its current step can advance, when it is not paused and its state
    /// has gates ([`crate::gate::earliest_advance_ms`]).
    pub fn earliest_advance_ms(&self) -> Option<i64> {
        if self.record.paused {
            return None;
        }
        let phase = self.plan.phase(self.record.state.phase()?)?;
        Some(crate::gate::earliest_advance_ms(
            phase,
            self.counting_from_ms(),
        ))
    }
}
