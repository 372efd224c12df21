//! The daemon's one clock ([`DaemonClock`]): every instant the daemon reads comes from it, each
//! reading named by what it is for.

use std::sync::Arc;

use crate::time::{Clock, DbClock, Millis};

/// Every reading of time the daemon makes, built once where the daemon is configured
/// ([`super::Config::clock`]) and passed in. Time that matters is the database's or monotonic
/// (issue 42):
///
/// - [`DaemonClock::lease_ms`]: the database's clock as this daemon follows it ([`DbClock`]:
///   sampled at every lease attempt by the daemon's [`crate::lease::Lease`]; the monotonic
///   clock in between).
///   What the lease, and whether the store still answers, are measured on.
/// - [`DaemonClock::gates_ms`]: what the gates, the rounds, the API's "now", the webhooks, the
///   retention and the probes read: the database's clock on the steady clock
///   ([`DbClock::steady_ms`]: a step of the database's clock forward is not taken, so it never
///   shortens `observe`, `min_duration` or `for:`, issue 54), or the instant `--now` fixes, or a
///   simulated clock (the demo, tests).
/// - [`DaemonClock::wall_ms`]: this host's wall clock, read only to measure how far it is from
///   the database's (the `queue_migrate_clock_skew_seconds` metric and its warning); nothing is
///   decided on it.
///
/// What measures a duration inside the process by [`std::time::Instant::now`] and `elapsed` (how long a tick
/// took, for `/metrics`; the HTTP server's idle timer on tokio's clock) reads no instant that is
/// compared with another process's, and stays where it measures.
#[derive(Clone)]
pub struct DaemonClock {
    /// The database's clock as this daemon follows it.
    db: DbClock,
    /// What the gates read when not the database's clock: `--now`, or a simulated clock.
    gates: Option<Clock>,
    /// This host's wall clock.
    wall: Clock,
}

impl std::fmt::Debug for DaemonClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonClock")
            .field("db", &self.db)
            .field("gates", &self.gates.as_ref().map(|_| "fixed or simulated"))
            .finish_non_exhaustive()
    }
}

impl DaemonClock {
    /// The clock of a daemon on a host whose wall clock is `wall`: the database's clock follows
    /// `wall` until the first lease attempt samples it; the gates read the database's clock (so
    /// that `observe`, `min_duration` and `for:` are measured on it whatever the host's says,
    /// issue 42), or the instant `fixed` (`--now`) when given.
    pub fn on_host(wall: Clock, fixed: Option<Millis>) -> DaemonClock {
        let db = DbClock::starting_at(wall());
        let gates: Option<Clock> = fixed.map(|at| Arc::new(move || at) as Clock);
        DaemonClock { db, gates, wall }
    }

    /// The clock of a daemon whose gates read `gates` (a simulated clock: the demo's, a test's);
    /// the lease runs on the database's clock as [`DaemonClock::on_host`] on this host's wall
    /// clock.
    pub fn simulated(gates: Clock) -> DaemonClock {
        DaemonClock {
            gates: Some(gates),
            ..DaemonClock::on_host(Arc::new(crate::time::now_ms), None)
        }
    }

    /// Now, for the gates, the rounds, the API and whatever the migrations' story is told in:
    /// the steady reading of the database's clock ([`DbClock::steady_ms`]) unless fixed or
    /// simulated.
    pub fn gates_ms(&self) -> Millis {
        match &self.gates {
            Some(clock) => clock(),
            None => self.db.steady_ms(),
        }
    }

    /// Steps of the database's clock seen at this daemon's samples ([`DbClock::steps`]).
    pub fn db_steps(&self) -> u64 {
        self.db.steps()
    }

    /// How far the gates' clock runs behind the database's, in ms: the steps forward it did
    /// not take ([`DbClock::lag_ms`]; 0 when the gates read a fixed or simulated clock).
    pub fn gates_lag_ms(&self) -> Millis {
        match &self.gates {
            Some(_) => 0,
            None => self.db.lag_ms(),
        }
    }

    /// Now on the database's clock as this daemon follows it: what the lease is measured on.
    pub fn lease_ms(&self) -> Millis {
        self.db.now_ms()
    }

    /// This host's wall clock: only to measure its skew from the database's.
    pub fn wall_ms(&self) -> Millis {
        (self.wall)()
    }

    /// The database's clock as this daemon follows it: sampled by the daemon's lease
    /// ([`crate::lease::Lease`], the one place it is), read here by the gates and the lease.
    pub fn db(&self) -> &DbClock {
        &self.db
    }
}

/// A lease sample taken: a step of the database's clock it saw (`step`) is logged, and
/// `/metrics` shows the steps so far and how far the gates' clock lags the database's.
pub(super) fn note_sample(
    clock: &DaemonClock,
    metrics: &super::metrics::Metrics,
    step: Option<crate::time::ClockStep>,
) {
    let lag_ms = clock.gates_lag_ms();
    #[allow(clippy::cast_precision_loss)]
    metrics.db_clock(clock.db_steps(), lag_ms as f64 / 1000.0);
    if let Some(step) = step {
        tracing::warn!(
            step_ms = step.by_ms,
            gates_clock_lag_ms = lag_ms,
            "the database's clock stepped by {} s between two lease samples (more than {} s \
             apart from this host's monotonic clock): observe, min_duration and for: are \
             measured on the monotonic clock and are not shortened by it{}",
            step.by_ms as f64 / 1000.0,
            crate::time::STEP_MS / 1000,
            if lag_ms > 0 {
                format!(
                    "; the gates' clock now runs {} s behind the database's (waits counted from \
                     instants the database stamps are lengthened by that much until this daemon \
                     restarts)",
                    lag_ms / 1000
                )
            } else {
                String::new()
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_gates_read_the_database_clock_unless_fixed_or_simulated() {
        let ahead: Clock = Arc::new(|| crate::time::now_ms() + 120_000);
        let host = DaemonClock::on_host(ahead.clone(), None);
        // Before the first sample, the database's clock is the host's.
        assert!((host.lease_ms() - ahead()).abs() < 1_000);
        // Sampled: the gates and the lease follow the database, the wall clock stays the host's.
        host.db().sample(1_000_000, Instant::now());
        assert!((host.gates_ms() - 1_000_000).abs() < 1_000);
        assert!((host.lease_ms() - 1_000_000).abs() < 1_000);
        assert!(host.wall_ms() > 1_700_000_000_000);
        // `--now`: the gates read the fixed instant; the lease still the database's clock.
        let fixed = DaemonClock::on_host(ahead, Some(42));
        fixed.db().sample(1_000_000, Instant::now());
        assert_eq!(fixed.gates_ms(), 42);
        assert!((fixed.lease_ms() - 1_000_000).abs() < 1_000);
        // A simulated clock: the gates read it.
        let simulated = DaemonClock::simulated(Arc::new(|| 7));
        assert_eq!(simulated.gates_ms(), 7);
        assert!(simulated.lease_ms() > 1_700_000_000_000);
    }
}
