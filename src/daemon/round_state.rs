//! What the leader's rounds keep between them ([`RoundState`]): each migration's memo, its
//! compiled plan and its scrape histories, the ticks running apart, where the pruning stands,
//! the probes' runs and how the preflight reads brokers. The rounds' part of
//! [`super::Shared`].

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::memo::Memo;
use crate::controller::histories::Histories;
use crate::controller::plans::PlanCache;

/// The rounds' state (see the module doc).
pub struct RoundState {
    /// What the daemon remembers of each migration between its ticks.
    memo: Mutex<HashMap<String, Memo>>,
    /// Each migration's compiled plan, kept while its stored plan (and what it reads) is
    /// unchanged.
    pub(super) plans: PlanCache,
    /// Each migration's scrape histories, kept between rounds.
    pub(super) histories: Histories,
    /// Where the leader's pruning stands ([`super::retention`]).
    pub(super) retention: super::retention::Retention,
    /// The migrations' ticks running apart, and when the leader's rounds last completed
    /// ([`super::lanes`]).
    pub lanes: super::lanes::Lanes,
    /// The synthetic phase's probe runs.
    #[cfg(feature = "brokers")]
    pub probes: super::probes::ProbeRuns,
    /// How the preflight reads a plan's brokers (`None`: no preflight, [`super::preflight`]).
    preflight: Mutex<Option<super::preflight_reader::Reader>>,
}

impl Default for RoundState {
    fn default() -> RoundState {
        RoundState {
            memo: Mutex::new(HashMap::new()),
            plans: PlanCache::default(),
            histories: Histories::default(),
            retention: super::retention::Retention::default(),
            lanes: super::lanes::Lanes::default(),
            #[cfg(feature = "brokers")]
            probes: super::probes::ProbeRuns::default(),
            preflight: Mutex::new(super::preflight_reader::Reader::default_for_build()),
        }
    }
}

impl RoundState {
    /// `f` on the memo of migration `name` (a fresh one the first time).
    pub(super) fn with_memo<R>(&self, name: &str, f: impl FnOnce(&mut Memo) -> R) -> R {
        let mut map = self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        f(map.entry(name.to_string()).or_default())
    }

    /// How the preflight reads brokers from now on; `None`: no preflight.
    pub(super) fn set_preflight_reader(&self, reader: Option<super::preflight_reader::Reader>) {
        *self
            .preflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = reader;
    }

    /// How the preflight reads brokers now.
    pub(super) fn preflight_reader(&self) -> Option<super::preflight_reader::Reader> {
        self.preflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
