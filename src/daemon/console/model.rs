//! What the console's pages show, as data: built by the handlers ([`super`]), written as HTML
//! by [`super::html`].

use super::actions;
use super::gate_data;
use crate::controller::views::{EntryView, StatusView};
use crate::daemon::auth::Principal;
use crate::plan::{GateKind, Threshold};
use crate::time::{human_ms, rfc3339};

/// Who serves the page: this controller's name and whether it acts; and who reads it, when a
/// trusted proxy said so.
pub struct Serving {
    pub holder: String,
    pub leader: bool,
    pub read_only: bool,
    /// The reader as the authenticating proxy named them (`--trust-identity-header`).
    pub reader: Option<Principal>,
}

impl Serving {
    /// Why no action applies on this daemon, whoever asks.
    pub(super) fn blocked(&self) -> Option<String> {
        if self.read_only {
            Some("This daemon serves reads only: no action is accepted here.".into())
        } else if !self.leader {
            Some("This controller is standing by: act from the console of the active one.".into())
        } else {
            None
        }
    }
}

/// One migration as the fleet shows it.
pub struct FleetRow {
    pub view: StatusView,
    /// A guard fails.
    pub breached: bool,
}

/// One migration as its page shows it.
pub struct Detail {
    pub view: StatusView,
    pub thresholds: Vec<Option<Threshold>>,
    /// Each current gate's query (and link), aligned with `view.gates`.
    pub gate_data: Vec<Option<gate_data::GateData>>,
    pub rungs: Vec<RungView>,
    /// The minimum time the current step must still last, in ms (0: met), with the minimum.
    pub min_left: Option<(i64, i64)>,
    /// One page of the journal, oldest first.
    pub journal: Vec<EntryView>,
    /// The `before` cursor of the older page, when there is one.
    pub older: Option<i64>,
    /// This page is not the newest (`?before=` was given).
    pub paged_back: bool,
    pub breached: bool,
    /// Advancing from here enters `complete`: the migration's name is asked.
    pub point_of_no_return: bool,
    /// The actions as they apply now.
    pub actions: Vec<actions::Action>,
    /// The charts: of the current step, or of a past one chosen on the ladder.
    pub charts: Charts,
    /// Who follows the routing document and who lags (this daemon's knowledge).
    pub producers: Option<crate::daemon::followers_view::ProducersView>,
}

/// The step whose recorded values the charts show.
pub struct Charts {
    /// `slices[0]`, `synthetic`...
    pub state: String,
    /// The current step (its charts span the phase, as before a selection).
    pub current: bool,
    /// Each visit to the step, oldest first: when it was entered and left (the current step:
    /// its visit up to now). A past step's charts plot every visit, and the heading names each.
    pub visits: Vec<(i64, i64)>,
    pub gates: Vec<ChartSpec>,
}

/// One chart.
pub struct ChartSpec {
    pub name: String,
    pub kind: GateKind,
    pub threshold: Option<Threshold>,
    pub data: Option<gate_data::GateData>,
}

/// One rung of the ladder.
pub struct RungView {
    pub state: String,
    /// Slices on the new broker at that rung.
    pub slices: u32,
    pub at: Place,
    /// The migration was in this step once (its charts can be shown).
    pub visited: bool,
    /// The charts show this step.
    pub selected: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Done,
    Here,
    Ahead,
}

/// A duration in ms as the pages write it (`1h 5m`).
pub(super) fn human(ms: i64) -> String {
    human_ms(ms)
}

/// An instant as the pages write it.
pub(super) fn when(ms: i64) -> String {
    rfc3339(ms)
}
