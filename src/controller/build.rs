//! Building a [`Controller`]: [`Controller::new`] with the defaults of a person's command, then
//! what a daemon or a benchmark changes.
//!
//! The clock that stamps what a controller commits is its store's, not the controller's: the
//! database's time by default, the writer's instants on a store opened for a simulated clock
//! (`with_writer_clock()`: `--now`, the demo, tests that inject a clock). A controller holds its
//! store by reference, so that choice is made where the store is opened.

use super::Controller;
use super::histories::Histories;
use super::round::RoundBatch;
use crate::indicators::fetch::Fetcher;
use crate::plan::{Resolve, SecretsMode};
use crate::store::traits::*;

impl<'a, S: Store> Controller<'a, S> {
    /// A controller as the CLI's commands act: it writes, a stored plan's secret that does not
    /// resolve here stays unresolved until something uses it ([`SecretsMode::Deferred`]),
    /// scrape histories are read whole from the store, and each evaluation commits by itself.
    pub fn new(
        store: &'a S,
        fetcher: &'a Fetcher,
        resolve: &'a (dyn Resolve + Send + Sync),
    ) -> Controller<'a, S> {
        Controller {
            store,
            fetcher,
            resolve,
            secrets: SecretsMode::Deferred,
            read_only: false,
            histories: None,
            round: None,
            stale_after_ms: crate::standing::DRIVEN_INTERVALS
                * crate::standing::DEFAULT_INTERVAL_MS,
        }
    }

    /// This controller's views saying "not driven" once the newest evaluation of a step is
    /// older than a few of `interval` (a daemon's `--interval`; [`crate::standing::Drive`]).
    #[must_use]
    pub fn with_interval(mut self, interval: std::time::Duration) -> Controller<'a, S> {
        self.stale_after_ms = crate::standing::DRIVEN_INTERVALS
            .saturating_mul(crate::time::millis(interval))
            .max(crate::standing::MIN_STALE_MS);
        self
    }

    /// This controller with a stored plan's unresolvable secrets treated as `secrets` says
    /// ([`SecretsMode::Required`]: the daemon's, which must have them all).
    #[must_use]
    pub fn with_secrets(mut self, secrets: SecretsMode) -> Controller<'a, S> {
        self.secrets = secrets;
        self
    }

    /// This controller reading only (`true`: a standby's, which never writes nor re-publishes).
    #[must_use]
    pub fn with_read_only(mut self, read_only: bool) -> Controller<'a, S> {
        self.read_only = read_only;
        self
    }

    /// This controller keeping scrape histories in `histories` between rounds (a daemon's).
    #[must_use]
    pub fn with_histories(mut self, histories: &'a Histories) -> Controller<'a, S> {
        self.histories = Some(histories);
        self
    }

    /// This controller leaving its evaluations in `round` (a daemon's round, committed at its
    /// end) when given, else committing each by itself.
    #[must_use]
    pub fn with_round(mut self, round: Option<&'a RoundBatch>) -> Controller<'a, S> {
        self.round = round;
        self
    }
}
