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
