//! What a migration's ticks remember between rounds, for notifications and logs only.

use std::collections::{HashMap, HashSet};

use crate::gate::Verdict;

/// What a migration's ticks remember between rounds (for notifications only: every decision is
/// made from the store and fresh readings).
#[derive(Debug, Default)]
pub struct Memo {
    /// "Ready to advance" was announced for this generation.
    pub ready_announced: Option<i64>,
    /// Gates holding, and since when.
    pub holding_since: HashMap<String, i64>,
    /// Long holds already announced.
    pub hold_announced: HashSet<String>,
    /// Guards whose alert-only breach was announced (until they stop failing).
    pub breach_announced: HashSet<String>,
    /// The step (its start) for which this daemon's clock was found behind the committing one.
    pub clock_behind_warned: Option<i64>,
    /// Each gate's last verdict (by `kind/name`) in the step that started then: what a change
    /// of verdict is logged against ([`super::tick::note_verdicts`]).
    pub verdicts: Option<(i64, HashMap<String, Verdict>)>,
    /// The standing's kind last announced.
    pub standing: Option<&'static str>,
    /// The generation whose preflight could not read a broker, already said.
    pub preflight_unread: Option<i64>,
}
